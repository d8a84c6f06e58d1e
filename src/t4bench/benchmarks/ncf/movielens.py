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
from typing import Any

import numpy as np

from t4bench.benchmarks.data_checks import DataError
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
    """Before any run exists: the file is there, and its first two lines are a header with the
    needed columns and a rating (the values are checked when it is loaded)."""
    file = expected_file(dataset, path)
    if file.exists():
        _check_head(dataset, file)
        return
    if dataset == "ml-20m":
        raise DatasetMissingError(
            f"NCF reference needs MovieLens-20M: expected {file} (columns userId,movieId,rating,"
            "timestamp); set T4BENCH_ML20M_DIR or model.data.path"
        )
    raise DatasetMissingError(f"NCF mini needs {file}; run `python -m t4bench.data.prepare` (or set T4BENCH_DATA_DIR)")


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
    #: users whose one rating is held out for the test: none of their ratings trains
    single_rating_users: int = 0

    def is_positive(self, users: np.ndarray, items: np.ndarray) -> np.ndarray:
        keys = users.astype(np.int64) * self.num_items + items
        found = np.searchsorted(self.positive_keys, keys)
        found = np.minimum(found, len(self.positive_keys) - 1)
        return self.positive_keys[found] == keys

    def sample_negatives(self, users: np.ndarray, per_user: int, rng: np.random.Generator) -> np.ndarray:
        """`per_user` items each user never interacted with, by rejection sampling."""
        users = np.repeat(users, per_user)
        items = rng.integers(0, self.num_items, size=len(users))
        bad = self.is_positive(users, items)
        while bad.any():
            items[bad] = rng.integers(0, self.num_items, size=int(bad.sum()))
            bad[bad] = self.is_positive(users[bad], items[bad])
        return items.reshape(-1, per_user) if per_user > 1 else items


#: the columns each variant's file must have: (file's own names, as read)
_COLUMNS = {
    "movielens-100k": ("user_id:token", "item_id:token", "timestamp:float"),
    "ml-20m": ("userId", "movieId", "timestamp"),
}


def _check_head(dataset: str, file: Path) -> None:
    with open(file, "rb") as handle:
        head = [handle.readline() for _ in range(2)]
    wanted = _COLUMNS[dataset]
    if not head[0].strip():
        raise DataError(f"{file}: empty file (expected a header {', '.join(wanted)} and ratings)")
    try:
        header = head[0].decode("utf-8").strip().split("\t" if dataset == "movielens-100k" else ",")
    except UnicodeDecodeError as err:
        raise DataError(f"{file}:1: not UTF-8 text ({err.reason})") from None
    missing = [name for name in wanted if name not in header]
    if missing:
        raise DataError(
            f"{file}: no column {', '.join(missing)} (header has {', '.join(header)}; needs {', '.join(wanted)})"
        )
    if not head[1].strip():
        raise DataError(f"{file}: header only, no ratings")


def _first_bad_line(file: Path) -> int:
    """The 1-based number of the first line that is not UTF-8 (read only when decoding failed)."""
    with open(file, "rb") as raw:
        for number, line in enumerate(raw, 1):
            try:
                line.decode("utf-8")
            except UnicodeDecodeError:
                return number
    return 0


def _read_table(dataset: str, file: Path) -> Any:
    """The (user, item, timestamp) columns; DataError naming the file and line for a file that is
    empty, misses a column, has a ragged line, a non-numeric or missing value, or bad bytes."""
    import pandas as pd

    wanted = _COLUMNS[dataset]
    try:
        frame = pd.read_csv(file, sep="\t" if dataset == "movielens-100k" else ",")
    except pd.errors.EmptyDataError:
        raise DataError(f"{file}: empty file (expected a header {', '.join(wanted)} and ratings)") from None
    except pd.errors.ParserError as err:  # "Expected 4 fields in line 7, saw 5"
        raise DataError(f"{file}: {str(err).strip().splitlines()[-1]}") from None
    except UnicodeDecodeError as err:
        raise DataError(f"{file}:{_first_bad_line(file)}: not UTF-8 text ({err.reason})") from None
    missing = [name for name in wanted if name not in frame.columns]
    if missing:
        raise DataError(
            f"{file}: no column {', '.join(missing)} (header has {', '.join(map(str, frame.columns))}; "
            f"needs {', '.join(wanted)})"
        )
    frame = frame[list(wanted)]
    frame.columns = ["user", "item", "timestamp"]
    if frame.empty:
        raise DataError(f"{file}: header only, no ratings")
    for column, name in zip(frame.columns, wanted, strict=True):
        values = pd.to_numeric(frame[column], errors="coerce")
        bad = values.isna()
        if column != "timestamp":
            bad |= values % 1 != 0
        if bad.any():
            row = int(bad.to_numpy().argmax())
            raw = frame[column].iloc[row]
            shown = "(empty)" if pd.isna(raw) else repr(raw) if isinstance(raw, str) else str(raw)
            # line 1 is the header
            raise DataError(
                f"{file}:{row + 2}: {name}={shown} is not {'a number' if column == 'timestamp' else 'an integer id'}"
            )
        frame[column] = values
    return frame


def load(dataset: str, path: Path) -> LeaveOneOut:
    file = expected_file(dataset, path)
    frame = _read_table(dataset, file)
    users = frame["user"].astype("int64").astype("category").cat.codes.to_numpy(np.int64)
    items = frame["item"].astype("int64").astype("category").cat.codes.to_numpy(np.int64)
    timestamps = frame["timestamp"].to_numpy()
    num_users, num_items = int(users.max()) + 1, int(items.max()) + 1
    # negatives are drawn by rejection among a user's unseen items: a user who has seen every item
    # would loop forever
    distinct = np.bincount(np.unique(users * num_items + items) // num_items, minlength=num_users)
    full = np.flatnonzero(distinct >= num_items)
    if len(full):
        user = frame["user"].iloc[int(np.flatnonzero(users == full[0])[0])]
        raise DataError(f"{file}: user {user} rated all {num_items} item(s): no unseen item to sample negatives from")
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
        single_rating_users=int(np.count_nonzero(np.bincount(users, minlength=num_users) == 1)),
    )
