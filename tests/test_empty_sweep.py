"""A sweep whose range or choice holds no value is refused before anything exists: Hydra would
launch no job and leave an empty parent run (`t4bench.preflight.overrides.check_sweeps_not_empty`)."""

from __future__ import annotations

import pytest

from t4bench.errors import T4BenchError
from t4bench.preflight import overrides


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("seed=range(5,1)", "seed=range(5,1): sweeps nothing: the range from 5 to 1 by 1 holds no value"),
        ("seed=range(0,10,-1)", "the range from 0 to 10 by -1 holds no value"),
    ],
)
def test_an_empty_range_is_refused(line: str, expected: str) -> None:
    with pytest.raises(T4BenchError, match=expected.replace("(", r"\(").replace(")", r"\)")):
        overrides.check_sweeps_not_empty(["model=ncf", line])


@pytest.mark.parametrize(
    "line", ["seed=range(1,5)", "seed=0,1", "seed=choice(3)", "model.optimizer.lr=interval(0.1,1)"]
)
def test_sweeps_with_values_pass(line: str) -> None:
    overrides.check_sweeps_not_empty(["model=ncf", line])
