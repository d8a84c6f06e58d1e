"""The study's tables from the run rows (`t4bench.report.query`): numbers only, no formatting.

Statistics follow `t4bench.sweep.stats` (the sweeps' summaries use the same ones): a run converged
when its outcome says so; one that did not has no time-to-train; MLPerf counts it as infinitely
slow, so the olympic mean drops it as the slowest, and is undefined (NaN) with two or more of
them. Mean ± std are over the converged runs and always stand next to the converged count, and
the runs that did not converge are counted by outcome beside them (never given a value).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import pandas as pd

from t4bench.report import configs
from t4bench.sweep.stats import describe
from t4bench.tracking import names

#: one row of the time-to-train table per configuration (`config`: t4bench.report.configs)
GROUP = ["model", "scale", "data", "hw", "hw_count", "config"]


def training_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """Runs that trained to a target (real data); synthetic throughput runs go elsewhere."""
    return runs[runs["outcome"] != names.OUTCOME_THROUGHPUT_ONLY]


def timed_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """Runs whose seconds are their own: a run that shared its GPU (t4bench.gpu_share > 1) is not."""
    return runs[~(runs["gpu_share"] > 1)]


def throughput_runs(runs: pd.DataFrame) -> pd.DataFrame:
    return runs[runs["outcome"] == names.OUTCOME_THROUGHPUT_ONLY]


def _price(group: pd.DataFrame, prices: Mapping[str, float]) -> float:
    hw = str(group["hw"].iloc[0])
    if hw in prices:
        return float(prices[hw])
    known = group["price_per_gpu_hour"].dropna()
    return float(known.median()) if len(known) else math.nan


def _outcomes(group: pd.DataFrame) -> str:
    """Every outcome but `converged`, counted: nothing is dropped silently."""
    counts = group.loc[~group["converged"], "outcome"].replace("", "unknown").value_counts()
    return ", ".join(f"{name} {n}" for name, n in sorted(counts.items()))


def time_to_train(runs: pd.DataFrame, prices: Mapping[str, float]) -> pd.DataFrame:
    """model × scale × hw × count: runs, converged, time-to-train and epochs (olympic, mean ± std),
    throughput, energy-to-train and cost-to-train."""
    rows = []
    labels = configs.settings(runs) if len(runs) else {}
    for key, group in training_runs(runs).groupby(GROUP, sort=True):
        converged = [bool(ok) for ok in group["converged"]]  # the outcome's word, not the metrics present
        ttt = describe(list(group["time_to_train_s"]), converged)
        epochs = describe(list(group["epochs_to_converge"]), converged)
        price = _price(group, prices)
        count = int(key[4])
        ok = group[group["converged"]]
        energy = ok["energy_to_train_kj"].dropna()
        rows.append(
            {
                **dict(zip(GROUP, key, strict=True)),
                "hparams": str(group["hparams"].iloc[0]),
                "settings": labels.get(str(key[5]), ""),
                "runs": len(group),
                "converged": int(ttt["n_converged"]),
                "converged_fraction": ttt["converged_fraction"],
                "other_outcomes": _outcomes(group),
                "ttt_olympic_s": ttt["olympic_mean"],
                "ttt_mean_s": ttt["mean"],
                "ttt_std_s": ttt["std"],
                "epochs_olympic": epochs["olympic_mean"],
                "epochs_mean": epochs["mean"],
                "epochs_std": epochs["std"],
                "throughput": float(group["avg_throughput"].mean()),
                "throughput_unit": str(group["throughput_unit"].iloc[0]),
                "energy_kj": float(energy.mean()) if len(energy) else math.nan,
                "energy_runs": len(energy),
                "price_per_gpu_hour": price,
                # the olympic time (MLPerf's score) at the price of every GPU of the configuration
                "cost": ttt["olympic_mean"] / 3600.0 * count * price,
            }
        )
    return pd.DataFrame(rows)


def speedup(table: pd.DataFrame, baseline: str) -> pd.DataFrame:
    """Each hw against `baseline` at the same model, scale and GPU count: time, energy and cost ratios."""
    if table.empty:
        return pd.DataFrame()
    keys = ["model", "scale", "data", "hw_count", "config"]
    base = table[table["hw"] == baseline].set_index(keys)
    rows = []
    for _, row in table[table["hw"] != baseline].iterrows():
        key = tuple(row[k] for k in keys)
        if key not in base.index:
            continue
        ref = base.loc[key]
        rows.append(
            {
                **{k: row[k] for k in keys},
                "hw": row["hw"],
                "baseline": baseline,
                "speedup": ref["ttt_olympic_s"] / row["ttt_olympic_s"],
                "energy_ratio": row["energy_kj"] / ref["energy_kj"],
                "cost_ratio": row["cost"] / ref["cost"],
            }
        )
    return pd.DataFrame(rows)


def scaling(table: pd.DataFrame) -> pd.DataFrame:
    """Each count against count 1 of the same hw: speed-up, efficiency T1 / (n·Tn), epochs ratio."""
    if table.empty:
        return pd.DataFrame()
    keys = ["model", "scale", "data", "hw", "config"]
    one = table[table["hw_count"] == 1].set_index(keys)
    rows = []
    for _, row in table[table["hw_count"] > 1].iterrows():
        key = tuple(row[k] for k in keys)
        if key not in one.index:
            continue
        ref = one.loc[key]
        speed = ref["ttt_olympic_s"] / row["ttt_olympic_s"]
        rows.append(
            {
                **{k: row[k] for k in keys},
                "hw_count": row["hw_count"],
                "speedup_vs_1": speed,
                "efficiency": speed / row["hw_count"],
                "epochs_vs_1": row["epochs_mean"] / ref["epochs_mean"],
            }
        )
    return pd.DataFrame(rows)


def throughput(runs: pd.DataFrame) -> pd.DataFrame:
    """Synthetic (input=synthetic) runs: throughput per configuration, mean ± std over runs."""
    rows = []
    for key, group in throughput_runs(runs).groupby(GROUP, sort=True):
        values = group["avg_throughput"]
        rows.append(
            {
                **dict(zip(GROUP, key, strict=True)),
                "runs": len(group),
                "throughput_mean": float(values.mean()),
                "throughput_std": float(values.std(ddof=1)) if len(values) > 1 else 0.0,
                "throughput_unit": str(group["throughput_unit"].iloc[0]),
            }
        )
    return pd.DataFrame(rows)
