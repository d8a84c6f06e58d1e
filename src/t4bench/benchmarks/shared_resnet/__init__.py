"""Code shared by benchmarks (resnet); not a benchmark itself."""
