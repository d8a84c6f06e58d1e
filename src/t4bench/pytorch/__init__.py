"""The PyTorch backend (`framework=pytorch`, the default): the rank (process group, device,
threads), the training loop and its Trainer, optimizers, the speed options, DDP/Horovod launch,
checkpoints and resume. The framework-neutral core around it (config checks, run environment,
MLflow, MLPerf log, the evaluate/stop cadence) lives at the package's top level; of this package it
imports only `framework.py`, the wing's light face that `t4bench.frameworks` lists. See
docs/architecture.md."""
