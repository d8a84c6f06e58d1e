"""Held-out validation of a sweep: the best trial's and the reference hyperparameters re-run on
seeds the sweep never used, compared with statistics.

    cli     `python -m t4bench.sweep.holdout --sweep-dir ...`: checks the input, composes the command
    runs    the validation runs, launched by the Optuna sweeper (`hydra.sweeper.validate_seeds`)
    report  the comparison of the two arms: statistics, PASS/FAIL lines, validation.{md,csv,json}
"""
