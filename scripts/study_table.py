"""A study's trials as a CSV table, rebuilt from the Optuna storage a sweep made, and the best five
printed: one row per trial (number, state, objective, the per-seed epochs-to-converge the seed-robust
objective was computed from, their mean and std, epochs trained, and every searched parameter).

    python scripts/study_table.py multirun/sweeps/ncf_tuned/optuna.journal ncf_tuned trials.csv
    python scripts/study_table.py sqlite:///optuna.db gnmt_ding_tuned trials.csv

STORAGE is a journal file (what `+sweeps=<name>` writes under `hydra.sweep.dir`) or any Optuna
storage URL; the trials.csv files under docs/convergence/ were written this way."""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import optuna
import pandas as pd
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend


def open_storage(storage: str) -> optuna.storages.BaseStorage | str:
    """A URL goes to Optuna as it is; a path must be an existing journal file (a missing one would be
    created empty by the journal backend, and then the study would not be found)."""
    if "://" in storage:
        return storage
    path = Path(storage.removeprefix("journal:"))
    if not path.is_file():
        raise ValueError(f"no Optuna journal at {path}")
    return JournalStorage(JournalFileBackend(str(path)))


def trials_table(study: optuna.Study) -> pd.DataFrame:
    """One row per trial; the seed columns come from the sweeper's `seed_values` user attribute."""
    rows = []
    for trial in study.trials:
        seeds = list(trial.user_attrs.get("seed_values") or [])
        complete = trial.state == optuna.trial.TrialState.COMPLETE
        rows.append(
            {
                "trial": trial.number,
                "state": trial.state.name.lower(),
                "objective": trial.value if complete else None,
                "seed_epochs": " ".join(f"{v:.2f}" for v in seeds),
                "mean": statistics.mean(seeds) if seeds else None,
                "std": statistics.stdev(seeds) if len(seeds) > 1 else None,
                "epochs_run": float(trial.user_attrs.get("epochs_run", 0.0)),
                **trial.params,
            }
        )
    return pd.DataFrame(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("storage", help="Optuna journal file or storage URL")
    parser.add_argument("study", help="study name (the sweep's name)")
    parser.add_argument("out", type=Path, help="CSV file to write")
    args = parser.parse_args(argv)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        study = optuna.load_study(study_name=args.study, storage=open_storage(args.storage))
    except (ValueError, KeyError) as exc:  # no journal, or no study of that name in it
        print(f"t4bench: error: {args.storage}: {str(exc).strip(chr(39))}", file=sys.stderr)
        return 2
    table = trials_table(study)
    if table.empty:
        print(f"t4bench: error: study {args.study} in {args.storage} has no trials", file=sys.stderr)
        return 2
    # the statistics to 3 decimals; parameters as stored (a learning rate of 3e-4 must stay one)
    table.round({"objective": 3, "mean": 3, "std": 3}).to_csv(args.out, index=False)
    states = table["state"].value_counts().sort_index()
    print(f"{args.study}: {len(table)} trials ({', '.join(f'{s} {n}' for s, n in states.items())})")
    for row in table.dropna(subset=["objective"]).nsmallest(5, "objective").itertuples():
        print(
            f"  trial {row.trial}: objective {row.objective:.3f} "
            f"(mean {row.mean:.3f}, std {row.std:.3f}; seeds {row.seed_epochs})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
