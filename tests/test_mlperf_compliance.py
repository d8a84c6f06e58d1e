"""Mini runs' MLPerf logs through the official checker (`python -m mlperf_logging.compliance_checker`)
under the newest ruleset that knows each benchmark (t4bench.mlperf.ruleset), open division.

GNMT and Transformer: the open rules still require one evaluation at MLPerf's own quality floor
(BLEU >= 24.0 / 25.0, as a fraction). A one-epoch mini is far below it (BLEU ~0.6-0.8), so the
one-epoch test checks that this is the ONLY rule the log misses; the slow tests read the minis
trained to their shipped targets (BLEU 60 / 45, past the floor) and require the checker's SUCCESS.

The logs of runs that other files train anyway come from conftest's shared runs (the converged
vision minis of test_vision_e2e, the translation minis of test_translation, the one-epoch ResNet
mini of test_tf_e2e): each is trained once per test session.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import SharedRun

from t4bench.mlperf import mlperf_name
from t4bench.mlperf import ruleset as ruleset_of

#: cheapest settings that still run the real data and the whole loop
ONE_EPOCH = {
    "ncf": ["max_epochs=1"],
    "gnmt": ["max_epochs=1", "model.data.eval_max_sentences=20"],
}
#: MLPerf's BLEU floor (a fraction) and the checker's rule that says it
FLOOR = {"gnmt": 0.24, "transformer": 0.25}
BLEU_FLOOR = {"gnmt": "v['value'] >= 0.240 and v['value'] < 1"}


def checker(log: Path, ruleset: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "mlperf_logging.compliance_checker",
            "--usage",
            "training",
            "--ruleset",
            ruleset,
            "--log_output",
            str(tmp_path / "checker.log"),
            str(log),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )


def failures(proc: subprocess.CompletedProcess[str]) -> list[str]:
    """The checker's complaints (WARNING/ERROR lines but its final FAILED)."""
    lines = (proc.stdout + proc.stderr).splitlines()
    return [
        line.split(" - ", 1)[1].strip()
        for line in lines
        if line.startswith(("WARNING -", "ERROR -")) and not line.endswith("FAILED")
    ]


def t4bench_check(log: Path) -> subprocess.CompletedProcess[str]:
    """`t4bench check <log>` (the console script's module): one line, never a traceback."""
    proc = subprocess.run(
        [sys.executable, "-m", "t4bench.cli", "check", str(log)], capture_output=True, text=True, timeout=300
    )
    assert "Traceback" not in proc.stdout + proc.stderr
    assert len(proc.stdout.splitlines()) == 1, proc.stdout
    return proc


def mini_log(run_t4bench, tmp_path: Path, model: str, *extra: str) -> Path:  # type: ignore[no-untyped-def]
    run_t4bench(f"model={model}", "seed=0", "progress=off", *extra)
    log = tmp_path / "run" / "mlperf.log"
    assert log.exists()
    return log


def assert_call_sites(log: Path) -> None:
    """Every line's file/lineno is the training code's call into the log, not the wrapper."""
    for line in log.read_text().splitlines():
        meta = json.loads(line.removeprefix(":::MLLOG "))["metadata"]
        assert not meta["file"].endswith("mlperf.py"), line
        source = Path(meta["file"]).read_text().splitlines()[meta["lineno"] - 1]
        assert re.search(r"mlperf|MLPerfLog|log\.", source), (line, source)


def assert_passes(log: Path, model: str, tmp_path: Path) -> None:
    """The official checker says SUCCESS, every line names its call site, `t4bench check` PASSED."""
    ruleset = ruleset_of(mlperf_name(model))
    proc = checker(log, ruleset, tmp_path)
    assert proc.returncode == 0 and "SUCCESS" in proc.stdout + proc.stderr, failures(proc)
    assert_call_sites(log)
    mine = t4bench_check(log)
    assert mine.returncode == 0 and mine.stdout.startswith(f"mlperf.log: {mlperf_name(model)}: ")
    assert f"ruleset {ruleset}: PASSED" in mine.stdout


def test_one_epoch_resnet50_log_passes_the_checker(resnet50_one_epoch: SharedRun, tmp_path: Path) -> None:
    # the fast case (one epoch, not marked slow: conftest's run, shared with the TensorFlow test);
    # SSD and Mask R-CNN below read converged runs
    assert_passes(resnet50_one_epoch.mlperf_log, "resnet50", tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("model", ["ssd", "maskrcnn"])
def test_converged_vision_mini_log_passes_the_checker(vision_minis, tmp_path: Path, model: str) -> None:  # type: ignore[no-untyped-def]
    assert_passes(vision_minis(model).mlperf_log, model, tmp_path)


def test_one_epoch_translation_log_misses_only_the_bleu_floor(run_t4bench, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # GNMT's one epoch; the Transformer's log passes every rule but the floor too: it passes them
    # all, floor included, once trained (below)
    model = "gnmt"
    log = mini_log(run_t4bench, tmp_path, model, *ONE_EPOCH[model])
    proc = checker(log, ruleset_of(model), tmp_path)
    assert failures(proc) == [f"Failed checks for eval_accuracy : {BLEU_FLOOR[model]}"], proc.stdout + proc.stderr
    assert_call_sites(log)
    mine = t4bench_check(log)
    assert mine.returncode == 1 and f"ruleset {ruleset_of(model)}: FAILED: " in mine.stdout
    assert "eval_accuracy" in mine.stdout


@pytest.mark.slow
@pytest.mark.parametrize("model", ["transformer", "gnmt"])
def test_translation_trained_past_the_floor_passes(
    translation_minis: dict[str, SharedRun], tmp_path: Path, model: str
) -> None:
    log = translation_minis[model].mlperf_log
    floor = FLOOR[model]
    bleu = [
        json.loads(line.removeprefix(":::MLLOG "))["value"]
        for line in log.read_text().splitlines()
        if '"key": "eval_accuracy"' in line
    ]
    assert bleu[-1] >= floor and bleu[0] < floor, bleu  # it trained from below the floor to past it
    assert_passes(log, model, tmp_path)


def test_ncf_log_has_every_common_key(run_t4bench, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """No ruleset knows NCF; its log must still hold every key the newest common rules require."""
    import mlperf_logging.compliance_checker as cc
    from mlperf_logging.compliance_checker.mlp_parser import parse_file

    log = mini_log(run_t4bench, tmp_path, "ncf", *ONE_EPOCH["ncf"])
    lines, errors = parse_file(str(log), ruleset="4.0.0")
    assert not errors
    rules = yaml.safe_load((Path(cc.__file__).parent / "training_4.0.0" / "common.yaml").read_text())
    required = {
        r["KEY"]["NAME"] for r in rules if "KEY" in r and r["KEY"].get("REQ", "").startswith(("EXACTLY", "AT_LEAST"))
    }
    logged = {line.key for line in lines}
    # epoch_* stand in for block_* (the rules accept either)
    assert required - logged <= {"block_start", "block_stop"}, sorted(required - logged)
    assert {"submission_benchmark": "ncf", "submission_division": "open"}.items() <= {
        line.key: line.value["value"] for line in lines
    }.items()
    assert_call_sites(log)
    mine = t4bench_check(log)
    assert mine.returncode == 0 and "no mlperf-logging ruleset parses ncf" in mine.stdout
    assert "t4bench's structural checks: PASSED" in mine.stdout
    # the same log without its run_stop: the structural checks catch it
    cut = tmp_path / "cut.log"
    cut.write_text("".join(line for line in log.read_text().splitlines(True) if '"key": "run_stop"' not in line))
    broken = t4bench_check(cut)
    assert broken.returncode == 1 and "structural checks: FAILED: no run_stop" in broken.stdout
