"""Presets compared: runs of two `hparams=` settings of the same model, scale, hw and GPU count,
as the study's future work would publish them — converged fraction per arm, and preset/reference
ratios of the mean and the std of epochs to converge with bootstrap 95 % CIs
(`t4bench.sweep.stats.compare_arms`, the held-out validation's statistics).

A run that did not converge enters with the epochs it ran (a lower bound of what it needed:
right-censored), so a preset cannot gain from runs that never reached the target.
"""

from __future__ import annotations

import math

import pandas as pd

from t4bench.report import configs, tables
from t4bench.sweep.stats import compare_arms

REFERENCE = "reference"
#: bootstrap resamples (the CI of a ratio of two small arms; 2000 keeps a report fast)
N_RESAMPLES = 2000
_BUCKET = ["model", "scale", "data", "hw", "hw_count"]


def censored_epochs(group: pd.DataFrame) -> list[float]:
    return [
        float(e) if ok else float(ran)
        for e, ran, ok in zip(group["epochs_to_converge"], group["epochs_run"], group["converged"], strict=True)
        if (ok and math.isfinite(e)) or (not ok and math.isfinite(ran))
    ]


def _arm(group: pd.DataFrame) -> dict[str, object]:
    values = censored_epochs(group)
    k, n = int(group["converged"].sum()), len(group)
    return {"values": values, "converged": f"{k}/{n}", "fraction": k / n if n else math.nan}


def compare(runs: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """One row per preset configuration against the reference configuration with the most runs in
    its bucket; and, when there is none, why."""
    rows = []
    seen: set[str] = set()
    labels = configs.settings(runs) if len(runs) else {}
    for key, bucket in tables.timed_runs(tables.training_runs(runs)).groupby(_BUCKET, sort=True):
        seen.update(bucket["hparams"])
        arms = {cid: g for cid, g in bucket.groupby("config", sort=True)}
        refs = sorted(
            (cid for cid, g in arms.items() if g["hparams"].iloc[0] == REFERENCE), key=lambda c: -len(arms[c])
        )
        if not refs:
            continue
        ref_id = refs[0]
        ref = _arm(arms[ref_id])
        for cid, g in arms.items():
            preset = str(g["hparams"].iloc[0])
            if preset == REFERENCE or len(g) < 2 or len(arms[ref_id]) < 2:
                continue
            arm = _arm(g)
            result = compare_arms(arm["values"], ref["values"], n_resamples=N_RESAMPLES)  # type: ignore[arg-type]
            rows.append(
                {
                    **dict(zip(_BUCKET, key, strict=True)),
                    "preset": preset,
                    "config": cid,
                    # what differs from the other configurations (`hparams=tuned max_epochs=3`)
                    "settings": labels.get(str(cid), ""),
                    "reference_config": ref_id,
                    "converged": arm["converged"],
                    "reference_converged": ref["converged"],
                    "converged_fraction": arm["fraction"],
                    "reference_converged_fraction": ref["fraction"],
                    "mean": _mean(arm["values"]),  # type: ignore[arg-type]
                    "reference_mean": _mean(ref["values"]),  # type: ignore[arg-type]
                    **{f"mean_ratio_{k}": v for k, v in result["mean_ratio"].items()},
                    **{f"std_ratio_{k}": v for k, v in result["std_ratio"].items()},
                    "mann_whitney_p": result["mann_whitney"]["p_value"],
                }
            )
    if rows:
        return pd.DataFrame(rows), ""
    found = ", ".join(sorted(p or "?" for p in seen)) or "none"
    return pd.DataFrame(), (
        "Preset comparison needs 2+ runs of two `hparams=` settings (one of them `reference`) on the same "
        f"model, scale, hw and GPU count; found hparams: {found}."
    )


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else math.nan
