"""What the user sees while a run trains: a bar per epoch on a terminal, plain lines otherwise.

Each evaluation prints `epoch k/N  eval e  <metrics>  time  eta <= T`: N is `max_epochs`, and T
the time to N epochs at the pace so far (training and evaluation), an upper bound since a run
stops at its target. The bar shows the epoch's steps with their own ETA. The loop hands over the
loss only when it reads it anyway (every few steps: a read waits for the GPU), with the number of
steps done; a plain log also gets a line every `PLAIN_STEP_LINE_S` seconds within long epochs.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

#: in plain mode, the least seconds between two within-epoch step lines
PLAIN_STEP_LINE_S = 60.0


def duration(seconds: float) -> str:
    """42s, 3m05s, 2h07m."""
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{seconds:.0f}s"
    minutes, secs = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def _epoch_text(epoch: float) -> str:
    return f"{epoch:g}" if isinstance(epoch, float) else str(epoch)


class ProgressReporter:
    """mode: auto (bar on a TTY), bar, plain, off. Only rank 0 reports. `max_epochs`: the run's
    epoch budget (N in `epoch k/N` and the ETA); None where there is none (throughput runs)."""

    def __init__(self, mode: str, enabled: bool = True, max_epochs: int | None = None) -> None:
        if mode not in ("auto", "bar", "plain", "off"):
            raise ValueError(f"progress must be auto, bar, plain or off, got {mode!r}")
        if mode == "auto":
            mode = "bar" if sys.stdout.isatty() else "plain"
        # plain lines are for logs: one record per line, never wrapped at 80 columns
        self.console = Console(highlight=False, soft_wrap=mode != "bar")
        self.mode = mode if enabled else "off"
        self.max_epochs = max_epochs
        self.evaluations = 0
        self._progress: Progress | None = None
        self._task: Any = None
        self._epoch = 0
        self._steps: int | None = None
        self._segment_started = 0.0
        self._last_line = 0.0
        # the pace to max_epochs: from the first epoch this process trains (a resumed run's too)
        self._run_started: float | None = None
        self._first_epoch = 0.0

    def _of_total(self, epoch: float) -> str:
        # right-aligned as before the budget was shown: logs and scripts look for "epoch   2"
        text = f"{_epoch_text(epoch):>3}"
        return f"{text}/{self.max_epochs}" if self.max_epochs else text

    def epoch_start(self, epoch: int, total_batches: int | None) -> None:
        """Training resumes in `epoch` for `total_batches` steps (to the next evaluation)."""
        now = time.perf_counter()
        if self._run_started is None:
            self._run_started, self._first_epoch = now, float(epoch - 1)
        self._epoch, self._steps, self._segment_started, self._last_line = epoch, total_batches, now, now
        if self.mode != "bar":
            return
        self._progress = Progress(
            TextColumn(f"epoch {self._of_total(epoch)}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("loss {task.fields[loss]:.4f}  {task.fields[rate]}"),
            TimeElapsedColumn(),
            TextColumn("eta"),
            TimeRemainingColumn(),
            console=self.console,
            transient=True,
        )
        self._progress.start()
        self._task = self._progress.add_task("train", total=total_batches, loss=float("nan"), rate="")

    def batch_done(self, loss: float, rate: float, unit: str, steps: int | None = None) -> None:
        """A loss the loop read back, after `steps` steps of this segment (None: one more step)."""
        if self._progress is not None:
            if steps is None:
                self._progress.update(self._task, advance=1, loss=loss, rate=f"{rate:,.0f} {unit}")
            else:
                self._progress.update(self._task, completed=steps, loss=loss, rate=f"{rate:,.0f} {unit}")
            return
        now = time.perf_counter()
        if self.mode != "plain" or steps is None or now - self._last_line < PLAIN_STEP_LINE_S:
            return
        self._last_line = now
        line = f"epoch {self._of_total(self._epoch)}  step {steps}"
        if self._steps:
            eta = (now - self._segment_started) / steps * (self._steps - steps)
            line += f"/{self._steps}  loss {loss:.4f}  {rate:,.0f} {unit}  eta {duration(eta)}"
        else:
            line += f"  loss {loss:.4f}  {rate:,.0f} {unit}"
        self.console.print(line)

    def eta_to_max_epochs(self, epochs_done: float) -> float | None:
        """Seconds to `max_epochs` at the pace so far (None before any epoch, or without a budget)."""
        if self._run_started is None or not self.max_epochs:
            return None
        trained = epochs_done - self._first_epoch
        if trained <= 0:
            return None
        return (time.perf_counter() - self._run_started) / trained * max(0.0, self.max_epochs - epochs_done)

    def epoch_end(self, epoch: float, metrics: Mapping[str, float], unit: str) -> None:
        """An evaluation after `epoch` epochs (fractional within an epoch) with its metrics."""
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
        self.evaluations += 1
        if self.mode == "off":
            return
        quality = "  ".join(f"{k} {v:.4f}" for k, v in metrics.items() if k.startswith("eval_"))
        line = (
            f"epoch {self._of_total(epoch)}  eval {self.evaluations}  train_loss {metrics['train_loss']:.4f}  "
            f"{quality}  throughput {metrics['throughput']:,.0f} {unit}  time {metrics['epoch_time_s']:.1f}s"
        )
        eta = self.eta_to_max_epochs(float(epoch))
        if eta is not None and self.max_epochs is not None and float(epoch) < self.max_epochs:
            line += f"  eta <= {duration(eta)} (to epoch {self.max_epochs})"
        self.console.print(line)

    def summary(self, title: str, rows: Mapping[str, Any]) -> None:
        if self.mode == "off":
            return
        table = Table(title=title, show_header=False)
        table.add_column("what")
        table.add_column("value", justify="right")
        for key, value in rows.items():
            table.add_row(key, f"{value:,.4g}" if isinstance(value, float) else str(value))
        self.console.print(table)

    def line(self, text: str) -> None:
        if self.mode != "off":
            self.console.print(text)
