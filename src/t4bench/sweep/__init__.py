"""Sweeps over t4bench runs: seed-sweep summaries, the seed-robust Optuna objective, pruning,
and the held-out validation command. See docs/sweeps.md.

Importing this package is cheap (no torch, no mlflow, no optuna): Hydra instantiates the summary
callback in every run, sweep or not.
"""
