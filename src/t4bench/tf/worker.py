"""One worker process of a TensorFlow run started by `t4bench.tf.launch`:
`python -m t4bench.tf.worker <job.pkl> <result.pkl>` runs the pickled `fn(*args)` and pickles its
result. TF_CONFIG and the rank variables come from the launching process."""

from __future__ import annotations

import pickle
import sys
from pathlib import Path

from t4bench.errors import RunTerminated, T4BenchError
from t4bench.signals import sigterm_raises


def main(job: str, result: str) -> int:
    fn, args = pickle.loads(Path(job).read_bytes())
    try:
        with sigterm_raises():
            value = fn(*args)
    except T4BenchError as err:
        print(f"t4bench: error: {err}", file=sys.stderr, flush=True)
        return 2
    except RunTerminated:
        return 128 + 15
    Path(result).write_bytes(pickle.dumps(value))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
