"""One `seed` drives Python, NumPy, the framework and the data order. Python's and NumPy's
generators are seeded here for every framework; each framework's rank session seeds its own
(`seed_torch` for PyTorch), so a TensorFlow run never imports torch."""

from __future__ import annotations

import os
import random

import numpy as np


def seed_python(seed: int) -> None:
    """Python's and NumPy's global generators, and hashing in processes started from here."""
    random.seed(seed)
    np.random.seed(seed % (2**32))
    os.environ["PYTHONHASHSEED"] = str(seed)


def seed_torch(seed: int) -> None:
    import torch

    torch.manual_seed(seed)


def seed_everything(seed: int) -> None:
    """Python, NumPy and torch at once (scripts that train PyTorch outside a rank)."""
    seed_python(seed)
    seed_torch(seed)
