"""The garbage collector paused while a run starts up, and kept off what start-up left behind.

Importing torch, MLflow and Hydra allocates millions of objects, and CPython's collector scans
them again and again while they load: about 1 CPU-s of a default run's start-up, for objects that
live as long as the process. `pause()` (the `t4bench` command, first thing) turns the collector
off; `resume()` (the MLPerf run_start, where training begins; for a sweep, `--cfg` or another
command that is not one run, as soon as the command line is checked) moves everything alive into the
permanent generation (`gc.freeze`) and turns it back on, so training collects only what training
makes. `at_exit()` freezes again so the interpreter's last collections skip the run's objects
(about 2 s on a 2-core host). A rank started by a launcher never pauses: `resume()` then only
freezes, which costs nothing.
"""

from __future__ import annotations

import gc


def pause() -> None:
    gc.disable()


def resume() -> None:
    gc.freeze()
    gc.enable()


def at_exit() -> None:
    gc.freeze()
