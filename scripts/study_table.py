"""Write a study's trials as CSV (one row per trial: state, objective, per-seed epochs, params) from
its Optuna journal, and print the best ones; for progress notes on studies still running.
    python scripts/study_table.py docs/convergence/gnmt_ding/optuna.journal gnmt_ding_tuned out.csv"""

from __future__ import annotations

import csv
import statistics
import sys

import optuna
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend


def main(journal: str, study_name: str, out: str) -> None:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.load_study(study_name=study_name, storage=JournalStorage(JournalFileBackend(journal)))
    names = sorted({k for t in study.trials for k in t.params})
    rows = []
    for t in study.trials:
        seeds = t.user_attrs.get("seed_values") or []
        rows.append(
            {
                "trial": t.number,
                "state": t.state.name.lower(),
                "objective": "" if t.value is None or t.state.name != "COMPLETE" else f"{t.value:.3f}",
                "seed_epochs": " ".join(f"{v:.2f}" for v in seeds),
                "mean": f"{statistics.mean(seeds):.3f}" if seeds else "",
                "std": f"{statistics.stdev(seeds):.3f}" if len(seeds) > 1 else "",
                "epochs_run": f"{t.user_attrs.get('epochs_run', 0):.1f}",
                **{name: t.params.get(name, "") for name in names},
            }
        )
    with open(out, "w", newline="") as handle:
        writer = csv.DictWriter(handle, list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    states = [r["state"] for r in rows]
    print(f"{study_name}: {len(rows)} trials ({', '.join(f'{s} {states.count(s)}' for s in sorted(set(states)))})")
    for r in sorted((r for r in rows if r["objective"]), key=lambda r: float(r["objective"]))[:5]:
        print(
            f"  trial {r['trial']}: objective {r['objective']} "
            f"(mean {r['mean']}, std {r['std']}; seeds {r['seed_epochs']})"
        )


if __name__ == "__main__":
    main(*sys.argv[1:4])
