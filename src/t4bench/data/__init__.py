"""The dataset commands (`t4bench data prepare|check`, `python -m t4bench.data.prepare`): they
gather the datasets from the benchmark folders (t4bench.benchmarks.registry) and never the other
way round; what the loaders share to reject damaged data is t4bench.benchmarks.data_checks."""
