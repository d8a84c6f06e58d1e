"""The PyTorch backend (`framework=pytorch`, the default): the rank (process group, device,
threads), the training loop and its Trainer, optimizers, the speed options, DDP/Horovod launch,
checkpoints and resume. The framework-neutral core around it (config checks, run environment,
MLflow, MLPerf log, the evaluate/stop cadence) lives at the package's top level and never imports
this package; `t4bench.frameworks` names the entry points here. See docs/architecture.md."""
