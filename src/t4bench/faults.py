"""Fault injection through the public callback hook, for testing how runs end.

`+callbacks.fail._target_=t4bench.faults.RaiseAtEpoch +callbacks.fail.epoch=2` raises a real
exception inside the loop after epoch 2's evaluation; the run must end FAILED, never RUNNING.
"""

from __future__ import annotations

from collections.abc import Mapping


class InjectedFault(RuntimeError):
    pass


class RaiseAtEpoch:
    def __init__(self, epoch: int = 1) -> None:
        self.epoch = epoch

    def on_epoch_end(self, epoch: int, metrics: Mapping[str, float]) -> None:
        if epoch >= self.epoch:
            raise InjectedFault(f"fault injected after epoch {epoch}")
