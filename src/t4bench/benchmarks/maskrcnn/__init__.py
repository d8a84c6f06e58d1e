"""Mask R-CNN (MLPerf Training v0.5 heavy-weight detection) on COCO: `model.py` (model and
benchmark); data, scoring and the `model:` section are shared with SSD
(t4bench.benchmarks.shared_detection). Only the standard library loads with this package."""

from t4bench.benchmarks import shared_detection

# the rules want eval_accuracy as {"BBOX": ..., "SEGM": ...}
ABOUT = shared_detection.about("maskrcnn", "3.1.0", ["box_map", "mask_map"], {"box_map": "BBOX", "mask_map": "SEGM"})
