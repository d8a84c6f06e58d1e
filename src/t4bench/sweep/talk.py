"""What a sweep says while it runs and when it ends: job i/n with an ETA from the jobs finished
so far, and at the end the MLflow UI address and the exact commands for the report and for the
held-out validation of the best trial. Plain strings, no MLflow/Optuna import."""

from __future__ import annotations

import math
import re
import shlex
import time
from collections.abc import Iterable, Mapping

from t4bench.progress import duration
from t4bench.tracking import experiments

#: held-out seeds the printed validation command uses (as docs/convergence.md's studies did)
HELDOUT_SEEDS = "1000-1019"


def count_jobs(overrides: Iterable[str], params: Mapping[str, str] | None = None) -> int | None:
    """How many jobs Hydra's basic sweeper makes of these overrides (and hydra.sweeper.params):
    the product of each swept key's number of values; None if they cannot be parsed."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    given = list(overrides)
    keys = {o.split("=", 1)[0] for o in given}
    given += [f"{k}={v}" for k, v in (params or {}).items() if k not in keys]
    try:
        parsed = OverridesParser.create().parse_overrides(given)
        return math.prod(len(list(o.sweep_string_iterator())) for o in parsed if o.is_sweep_override())
    except Exception:  # an override Hydra itself will report; the count is only for the display
        return None


class Pace:
    """Counts finished jobs of a sweep and estimates the rest from the rate they finished at here
    (other worker processes finishing jobs too make the rate, and so the ETA, theirs as well)."""

    def __init__(self, total: int | None, already_done: int = 0) -> None:
        self.total, self.at_start = total, already_done
        self.started = time.monotonic()
        self.done = already_done

    def job_done(self, what: str = "job", done: int | None = None) -> str:
        """The line after a job: `done` finished in all (default: one more than before)."""
        self.done = self.done + 1 if done is None else done
        elapsed = time.monotonic() - self.started
        if not self.total:
            return f"[t4bench] sweep {what} {self.done} done ({duration(elapsed)} so far)"
        left = max(0, self.total - self.done)
        finished_here = max(1, self.done - self.at_start)
        tail = f"sweep ETA {duration(elapsed / finished_here * left)}" if left else "sweep done"
        return f"[t4bench] sweep {what} {self.done}/{self.total} done ({duration(elapsed)}); {tail}"


def next_steps(
    tracking_uri: str,
    experiment_id: str,
    sweep_id: str,
    sweep_dir: str | None = None,
    storage: str | None = None,
    study: str | None = None,
) -> str:
    """The lines a finished sweep ends with: where to look, and what to run next."""
    folder = re.sub(r"[^A-Za-z0-9_.-]+", "_", sweep_id)  # a seed sweep's id holds ':' and '/'
    report = [
        "t4bench",
        "report",
        "--tracking-uri",
        tracking_uri,
        "--sweep-id",
        sweep_id,
        "--out",
        f"report/{folder}",
    ]
    if storage and study:
        report += ["--optuna-storage", storage.removeprefix("journal:"), "--study", study]
    lines = [experiments.ui_line(tracking_uri, experiment_id), f"[t4bench] report: {shlex.join(report)}"]
    if sweep_dir and study:
        validate = ["t4bench", "validate", "--sweep-dir", sweep_dir, "--seeds", HELDOUT_SEEDS]
        lines.append(f"[t4bench] held-out validation of the best trial: {shlex.join(validate)}")
    return "\n".join(lines)
