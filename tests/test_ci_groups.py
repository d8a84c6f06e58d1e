"""The pytest-xdist groups of conftest's scheduler (`python -m pytest -n 2`, CI): the tests that read a
shared run are in its group, every other test in its file's, and the longest-first list names only
groups that exist."""

from __future__ import annotations

from pathlib import Path

from conftest import LONGEST_FIRST, SHARED_RUN_TESTS, xdist_group_of

TESTS = Path(__file__).resolve().parent


def test_shared_run_tests_are_in_their_group_and_the_rest_in_their_file() -> None:
    vision = "tests/test_vision_e2e.py::test_mini_converges_with_the_full_contract[maskrcnn]"
    assert xdist_group_of(vision) == "vision_minis"
    # the id pytest-xdist would give it once its loadgroup works again (`@` and the marker's name)
    assert xdist_group_of(f"{vision}@test_vision_e2e") == "vision_minis"
    assert xdist_group_of("tests/test_mlperf_compliance.py::test_translation_trained_past_the_floor_passes[gnmt]") == (
        "translation_minis"
    )
    assert xdist_group_of("tests/test_tf_e2e.py::test_keras_resnet_mini_reaches_the_target_without_torch") == (
        "resnet50_one_epoch"
    )
    # the same file's other tests, and a parameter that holds an `@`
    assert xdist_group_of("tests/test_mlperf_compliance.py::test_ncf_log_has_every_common_key") == (
        "test_mlperf_compliance"
    )
    assert xdist_group_of("tests/test_report.py::test_bad_input_is_one_line_and_exit_2[a@b]") == "test_report"


def test_every_named_test_and_group_exists() -> None:
    for tests in SHARED_RUN_TESTS.values():
        for test in tests:
            file, name = test.split("::")
            assert f"def {name}(" in (TESTS / file).read_text(), test
    files = {path.stem for path in TESTS.glob("test_*.py")}
    assert set(LONGEST_FIRST) <= files | set(SHARED_RUN_TESTS), set(LONGEST_FIRST) - files - set(SHARED_RUN_TESTS)
