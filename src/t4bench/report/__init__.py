"""Reports from an MLflow tracking store: the study's time-to-train tables, speed-ups, scaling and
figures (`python -m t4bench.report`), and an MLPerf submission-style export of the runs' logs."""
