"""One folder per benchmark (`<name>/`: model, data readers, its `model:` section, its MLPerf names
and quality metrics in `ABOUT`), `shared_*/` for what two of them share; the registry
(t4bench.benchmarks.registry) finds them. `model.benchmark` in conf/model/<name>.yaml names the class."""
