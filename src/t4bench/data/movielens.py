"""MovieLens for NCF: the 100k ratings shipped inside the `recbole` wheel (mini scale) and the
ml-20m `ratings.csv` (MLPerf reference). GroupLens terms: research use; cite
F. M. Harper and J. A. Konstan, "The MovieLens Datasets: History and Context", ACM TiiS 2015.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from t4bench.errors import DatasetMissingError

RECBOLE_WHEEL = "recbole==1.2.1"
ML100K_FILE = "ml-100k.inter"
ML20M_FILE = "ratings.csv"


def prepare(data_root: Path) -> None:
    """Fetch the recbole wheel from the package index and keep only ml-100k's ratings."""
    target = data_root / "movielens-100k" / ML100K_FILE
    if target.exists():
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "-q", "--no-deps", RECBOLE_WHEEL, "-d", tmp],
            check=True,
        )
        (wheel,) = Path(tmp).glob("recbole-*.whl")
        with zipfile.ZipFile(wheel) as archive:
            data = archive.read(f"recbole/dataset_example/ml-100k/{ML100K_FILE}")
    partial = target.with_suffix(".partial")
    partial.write_bytes(data)
    partial.rename(target)  # never leave a half-written file under the final name


def expected_file(dataset: str, path: Path) -> Path:
    if dataset == "movielens-100k":
        return path / ML100K_FILE
    if dataset == "ml-20m":
        return path / ML20M_FILE
    raise ValueError(f"unknown MovieLens variant {dataset!r} (movielens-100k or ml-20m)")


def check(dataset: str, path: Path) -> None:
    file = expected_file(dataset, path)
    if file.exists():
        return
    if dataset == "ml-20m":
        raise DatasetMissingError(
            f"NCF reference needs MovieLens-20M: expected {file} (columns userId,movieId,rating,"
            "timestamp); set T4BENCH_ML20M_DIR or model.data.path"
        )
    raise DatasetMissingError(
        f"NCF mini needs {file}; run `python -m t4bench.data.prepare` (or set T4BENCH_DATA_DIR)"
    )


@dataclass(frozen=True)
class LeaveOneOut:
    """Implicit feedback with each user's latest interaction held out (NCF's evaluation protocol)."""

    num_users: int
    num_items: int
    train_users: np.ndarray
    train_items: np.ndarray
    test_items: np.ndarray  # one per user, index = user
    #: sorted user * num_items + item keys of every positive, for O(log n) membership tests
    positive_keys: np.ndarray

    def is_positive(self, users: np.ndarray, items: np.ndarray) -> np.ndarray:
        keys = users.astype(np.int64) * self.num_items + items
        found = np.searchsorted(self.positive_keys, keys)
        found = np.minimum(found, len(self.positive_keys) - 1)
        return self.positive_keys[found] == keys

    def sample_negatives(
        self, users: np.ndarray, per_user: int, rng: np.random.Generator
    ) -> np.ndarray:
        """`per_user` items each user never interacted with, by rejection sampling."""
        users = np.repeat(users, per_user)
        items = rng.integers(0, self.num_items, size=len(users))
        bad = self.is_positive(users, items)
        while bad.any():
            items[bad] = rng.integers(0, self.num_items, size=int(bad.sum()))
            bad[bad] = self.is_positive(users[bad], items[bad])
        return items.reshape(-1, per_user) if per_user > 1 else items


def load(dataset: str, path: Path) -> LeaveOneOut:
    import pandas as pd

    file = expected_file(dataset, path)
    if dataset == "movielens-100k":
        frame = pd.read_csv(file, sep="\t")
        frame.columns = ["user", "item", "rating", "timestamp"]
    else:
        frame = pd.read_csv(file, usecols=["userId", "movieId", "timestamp"])
        frame.columns = ["user", "item", "timestamp"]
    users = frame["user"].astype("category").cat.codes.to_numpy(np.int64)
    items = frame["item"].astype("category").cat.codes.to_numpy(np.int64)
    timestamps = frame["timestamp"].to_numpy()
    num_users, num_items = int(users.max()) + 1, int(items.max()) + 1
    # latest interaction per user is the test item. ML-100k users rate many movies in the same
    # second; among such ties the one listed last in the file is held out (a stable sort)
    order = np.lexsort((np.arange(len(users)), timestamps, users))
    users, items = users[order], items[order]
    last = np.r_[users[1:] != users[:-1], True]
    test_items = np.empty(num_users, dtype=np.int64)
    test_items[users[last]] = items[last]
    keys = np.unique(users * num_items + items)
    return LeaveOneOut(
        num_users=num_users,
        num_items=num_items,
        train_users=users[~last],
        train_items=items[~last],
        test_items=test_items,
        positive_keys=keys,
    )
