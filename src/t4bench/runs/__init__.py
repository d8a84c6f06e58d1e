"""Training runs in the MLflow store, as a user looks after them: `liveness` (a run's heartbeat and
`repair` of runs whose process is gone), `search` (paged searches), and the command line
`python -m t4bench.runs` (`__main__`)."""
