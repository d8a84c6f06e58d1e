"""What the user sees while a run trains: a bar per epoch on a terminal, plain lines otherwise."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table


class ProgressReporter:
    """mode: auto (bar on a TTY), bar, plain, off. Only rank 0 reports."""

    def __init__(self, mode: str, enabled: bool = True) -> None:
        if mode not in ("auto", "bar", "plain", "off"):
            raise ValueError(f"progress must be auto, bar, plain or off, got {mode!r}")
        if mode == "auto":
            mode = "bar" if sys.stdout.isatty() else "plain"
        # plain lines are for logs: one record per line, never wrapped at 80 columns
        self.console = Console(highlight=False, soft_wrap=mode != "bar")
        self.mode = mode if enabled else "off"
        self._progress: Progress | None = None
        self._task: Any = None

    def epoch_start(self, epoch: int, total_batches: int | None) -> None:
        if self.mode != "bar":
            return
        self._progress = Progress(
            TextColumn(f"epoch {epoch:>3}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("loss {task.fields[loss]:.4f}  {task.fields[rate]}"),
            TimeElapsedColumn(),
            console=self.console,
            transient=True,
        )
        self._progress.start()
        self._task = self._progress.add_task("train", total=total_batches, loss=float("nan"), rate="")

    def batch_done(self, loss: float, rate: float, unit: str) -> None:
        if self._progress is not None:
            self._progress.update(self._task, advance=1, loss=loss, rate=f"{rate:,.0f} {unit}")

    def epoch_end(self, epoch: int, metrics: Mapping[str, float], unit: str) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
        if self.mode == "off":
            return
        quality = "  ".join(f"{k} {v:.4f}" for k, v in metrics.items() if k.startswith("eval_"))
        self.console.print(
            f"epoch {epoch:>3}  train_loss {metrics['train_loss']:.4f}  {quality}  "
            f"throughput {metrics['throughput']:,.0f} {unit}  time {metrics['epoch_time_s']:.1f}s"
        )

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
