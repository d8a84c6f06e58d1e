"""Code shared by benchmarks (vision); not a benchmark itself."""
