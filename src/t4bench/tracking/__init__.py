"""Training runs in the MLflow store, as a user looks after them: `liveness` (a run's heartbeat and
`repair` of runs whose process is gone), `search` (paged searches), `store` (a new SQLite store made
by one process at a time), and the command line `python -m t4bench.runs` (`__main__`)."""
