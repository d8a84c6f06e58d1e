"""t4bench: MLPerf-style time-to-train benchmarks with Hydra, MLflow and Optuna.

Kept import-light on purpose: `python -m t4bench --cfg job` must not pull in torch.
"""

__version__ = "0.1.0"
