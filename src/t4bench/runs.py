"""`python -m t4bench.runs list|repair` (also `t4bench runs ...`): the MLflow runs left RUNNING by a
process that is gone. The command is `t4bench.tracking.runs_command`; this name stays because
the docs and users' scripts call it."""

from __future__ import annotations

import sys

from t4bench.tracking.runs_command import main

if __name__ == "__main__":
    sys.exit(main())
