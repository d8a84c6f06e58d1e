"""`python -m t4bench.sweep.holdout`: the held-out validation command (t4bench.sweep.holdout.cli)."""

import sys

from t4bench.sweep.holdout.cli import main

sys.exit(main())
