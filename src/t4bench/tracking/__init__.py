"""MLflow, in one package: everything t4bench writes to or reads from a tracking store.

- `names`: every tag, metric and outcome name (the contract reports, sweeps and the UI read)
- `client`: the one MLflow client factory; `store_lock`: a new SQLite store made by one process at
  a time; `store_probe`: a store (and the Optuna storage, the working directory) judged read-only
  before anything opens it
- `run`: one training run (`RunTracker`: created, filled, closed); `tags`: its tags, on the run
  or in its tag file; `epoch_metrics`: what a run logs at each evaluation; `run_names`: names that fit
  the UI's Run Name column; `experiments`: classic-ML experiments and the UI's address;
  `system_metrics`: MLflow's own CPU/GPU monitor on the run
- `process` and `worker`: a run's tracking in a process of its own, so that the training process
  never imports MLflow; `run_facts`: what a run records of itself as plain values (params, name,
  contract tags), which both trackers use
- `liveness`: a run's heartbeat and the repair of runs whose process is gone; `search`: paged
  searches; `runs_command`: `t4bench runs list|repair` (also `python -m t4bench.runs`)
- `sweep_layout`: a sweep's parent, trial and seed runs; `optuna_runs`: those of an Optuna sweep

The package is a low floor: it imports none of the sweep, preflight, framework or benchmark
modules (tests/test_layout.py). Importing it loads no MLflow; its modules load what they use.
"""
