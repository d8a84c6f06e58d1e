"""SSD (MLPerf Training v0.5 light-weight detection) on COCO: `model.py` (model and benchmark),
`loss.py` (the batched loss); data, scoring and the `model:` section are shared with Mask R-CNN
(t4bench.benchmarks.shared_detection). Only the standard library loads with this package."""

from t4bench.benchmarks import shared_detection

ABOUT = shared_detection.about("ssd", "4.1.0", ["box_map"])
