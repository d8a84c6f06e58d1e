"""Dataset preparation (`python -m t4bench.data.prepare`) and loaders shared by benchmarks."""
