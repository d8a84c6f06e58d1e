"""The checks before a run: each fails in about a second with one line, before torch, MLflow or a
run exist. Only Hydra/OmegaConf and the standard library load here.

    config    config values: types, ranges, choices, targets; what this host can hold (RULES)
    hardware  the scale exists for the model; the hardware asked for is here (hw=auto resolved)
    storage   the MLflow tracking store, the Optuna storage, the working directory are usable
    overrides the command line against the config it composes (Hydra's errors, unread `+` keys)
    command_line  all of the above on the whole command line, before Hydra starts (__main__)
    study_matrix  a run matrix (`+experiment=study_r740`): a run outside it refused, or the runs printed

The data a benchmark reads is checked by `Benchmark.check_inputs` (t4bench.benchmarks.data_checks); a
framework's own backends by its `preflight` in `t4bench.frameworks`."""
