"""The MLflow UI on t4bench runs: a real `python -m t4bench --multirun` (2 NCF mini seeds, one
epoch) writes a real SQLite store, a real `mlflow server` serves it, and the checks read it
through the REST API (MlflowClient on http://127.0.0.1:<port>) and, where Debian's chromium is
installed (`scripts/setup.sh --all`), through the UI itself in a headless browser."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import run_cli
from mlflow.tracking import MlflowClient

from t4bench.tracking import experiments, system_metrics
from t4bench.tracking.client import mlflow_client
from t4bench.tracking.run import RunTracker
from t4bench.tracking.tags import run_tags

EXPERIMENT = "t4bench-ncf"
PARENT = "mlflow.parentRunId"
SEEDS = (1, 2)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store made by a real 2-seed NCF mini multirun (a sweep parent and two training runs)."""
    root = tmp_path_factory.mktemp("mlflow_ui")
    # MLflow's own knob: one-epoch minis train for ~2 s, the default 2 s would log one sample
    env = {"MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL": "0.5"}
    seeds = ",".join(map(str, SEEDS))
    argv = ["--multirun", "model=ncf", "max_epochs=1", f"seed={seeds}", "progress=off", f"hydra.sweep.dir={root}/sweep"]
    proc = run_cli(*argv, store=root, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return root


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def server(store: Path) -> Iterator[str]:
    """A real `mlflow server` on the store; its URL."""
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    cmd = [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", f"sqlite:///{store / 'mlflow.db'}"]
    cmd += ["--host", "127.0.0.1", "--port", str(port), "--workers", "1"]
    log = (store / "server.log").open("w")
    # its own session: the server starts a uvicorn child, both end with the group
    proc = subprocess.Popen(cmd, cwd=store, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=2) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                pass
            assert proc.poll() is None, (store / "server.log").read_text()[-2000:]
            assert time.monotonic() < deadline, "mlflow server did not answer /health in 90 s"
            time.sleep(0.5)
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
        log.close()


def _runs(client: MlflowClient) -> tuple[Any, list[Any], Any]:
    experiment = client.get_experiment_by_name(EXPERIMENT)
    assert experiment is not None
    runs = client.search_runs([experiment.experiment_id])
    parents = [r for r in runs if r.data.tags.get("t4bench.sweep_role") == "parent"]
    assert len(parents) == 1, [r.info.run_name for r in runs]
    return experiment, [r for r in runs if r not in parents], parents[0]


@pytest.mark.slow
def test_experiment_is_classic_ml_with_a_description(server: str) -> None:
    experiment, _, _ = _runs(MlflowClient(server))
    assert experiment.tags[experiments.KIND_TAG] == "custom_model_development"
    note = experiment.tags[experiments.DESCRIPTION_TAG]
    assert "`ncf`" in note and "time_to_train_s" in note and "System metrics" in note


@pytest.mark.slow
def test_sweep_parent_carries_the_fixed_config_and_the_runs_nest_under_it(server: str) -> None:
    _, training, parent = _runs(MlflowClient(server))
    tags = parent.data.tags
    assert (tags["t4bench.model"], tags["t4bench.hw"], tags["t4bench.hw_count"], tags["t4bench.scale"]) == (
        "ncf",
        "cpu",
        "1",
        "mini",
    )
    assert parent.info.run_name == "seeds-sweep"  # the sweep's folder (Hydra's dated one: seeds-MMDD-hhmmss)
    params = parent.data.params
    assert params["max_epochs"] == "1" and "model.optimizer.lr" in params and "seed" not in params
    assert sorted(r.info.run_name for r in training) == [f"seed={s}" for s in SEEDS]  # under the parent
    assert {r.data.tags["mlflow.parentRunId"] for r in training} == {parent.info.run_id}


@pytest.mark.slow
def test_training_runs_log_system_metrics(server: str) -> None:
    client = MlflowClient(server)
    _, training, parent = _runs(client)
    for run in training:
        tags = run_tags(client, run)
        assert tags[system_metrics.TAG].startswith("on: MLflow SystemMetricsMonitor"), tags
        cpu = client.get_metric_history(run.info.run_id, "system/cpu_utilization_percentage")
        assert len(cpu) >= 2, cpu
        assert "system/system_memory_usage_megabytes" in run.data.metrics
        assert "run_train_s" in run.data.metrics  # MLflow's series come beside ours, not instead
    assert not [k for k in parent.data.metrics if k.startswith("system/")]  # a parent trains nothing


@pytest.mark.slow
def test_the_ui_renders_the_experiment_runs_in_a_headless_browser(server: str, tmp_path: Path) -> None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("no chromium here (Debian package `chromium`, installed by scripts/setup.sh --all)")
    experiment, _, parent = _runs(MlflowClient(server))
    exp_page = f"{server}/#/experiments/{experiment.experiment_id}"

    def dom(page: str, *expected: str) -> str:
        """The page's DOM once it shows every `expected` text: on a loaded host a page can miss
        the virtual-time budget, so up to three loads (a page that never shows them fails)."""
        flags = ["--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={tmp_path}"]
        argv = [chromium, *flags, "--virtual-time-budget=30000", "--dump-dom", f"{page}?workflowType=machine_learning"]
        for _ in range(3):
            out = subprocess.run(argv, capture_output=True, text=True, timeout=180).stdout
            if all(text in out for text in expected):
                break
        return out

    # the runs table with the sweep's parent run; the description, rendered from its Markdown
    runs = dom(f"{exp_page}/runs", EXPERIMENT, "time-to-train runs of", parent.info.run_name)
    assert EXPERIMENT in runs, runs[-2000:]
    assert "time-to-train runs of" in runs
    assert parent.info.run_name in runs
    # The run's System metrics tab is not loaded here: run alone this check passes, but in the
    # whole suite on CI the tab's charts twice did not reach the dumped DOM (not understood yet).
    # What the tab draws is checked over REST above; docs/img/mlflow_ui_system_metrics.png shows it.


#: a collapsed run's expander in MLflow 3.17's runs table draws a plus (this SVG path)
PLUS = "M7.25 7.25V4.5"
EXPANDER = '[data-component-id$="runnamecellrenderer.tsx_46"]'
#: each run name shown in the Run Name column: is it cut short (ends in an ellipsis)?
SHOWN_NAMES = """() => [...document.querySelectorAll(
    '[role=gridcell][col-id="attributes.`Run Name`"] a[href*="/runs/"] > span')].map(
    s => [s.textContent, s.scrollWidth > s.clientWidth, s.clientWidth])"""


def shown_names(page: Any, url: str) -> dict[str, tuple[bool, int]]:
    """name -> (cut short, px shown) of every run on the runs page `url`, all parents expanded."""
    page.goto(url)
    page.wait_for_selector("text=Run Name", timeout=90_000)
    for _ in range(10):  # a nested parent's expander appears once its own parent is open
        page.wait_for_timeout(1000)
        buttons = page.locator(EXPANDER)
        collapsed = [i for i in range(buttons.count()) if PLUS in buttons.nth(i).inner_html()]
        if not collapsed:
            break
        buttons.nth(collapsed[0]).click()
    return {name: (cut, px) for name, cut, px in page.evaluate(SHOWN_NAMES)}


@pytest.mark.slow
def test_run_names_show_whole_in_the_run_name_column(server: str) -> None:
    """In a real browser: t4bench's run names, and names as long as t4bench.tracking.run_names allows at
    each nesting depth (digits, the widest glyphs of its names), end in no ellipsis; one longer
    name does (the check can see a cut name)."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("no chromium here (Debian package `chromium`, installed by scripts/setup.sh --all)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright (the Python package) measures the page")
    from t4bench.tracking import run_names

    client = MlflowClient(server)
    experiment, training, parent = _runs(client)
    probes = client.create_experiment("run-name-widths")
    widest, above = [], None
    for depth, limit in enumerate(run_names.RUN_NAME_MAX):
        name = str(depth + 1) * limit
        above = client.create_run(probes, run_name=name, tags={PARENT: above} if above else {}).info.run_id
        widest.append(name)
    too_long = "9" * (run_names.RUN_NAME_MAX[0] + 3)
    client.create_run(probes, run_name=too_long)
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1400, "height": 820})
        query = "runs?workflowType=machine_learning"
        ours = shown_names(page, f"{server}/#/experiments/{experiment.experiment_id}/{query}")
        limits = shown_names(page, f"{server}/#/experiments/{probes}/{query}")
        browser.close()
    names = [parent.info.run_name, *(r.info.run_name for r in training)]
    assert set(names) <= set(ours), ours
    assert [n for n in names if ours[n][0]] == [], ours
    assert set(widest) | {too_long} <= set(limits), limits
    assert [n for n in widest if limits[n][0]] == [], limits  # the rule's limits hold, at every depth
    assert limits[too_long][0], limits


def test_an_existing_experiment_gets_the_kind_and_description_it_lacks(tmp_path: Path) -> None:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = mlflow_client(uri, new_store=True)
    bare = client.create_experiment("t4bench-gnmt")
    chosen = client.create_experiment("t4bench-ssd", tags={experiments.KIND_TAG: "genai_development"})
    guessed = client.create_experiment("t4bench-resnet50", tags={experiments.KIND_TAG: "genai_development_inferred"})
    for name in ("t4bench-gnmt", "t4bench-ssd", "t4bench-resnet50"):
        RunTracker(uri).ensure_experiment(name)
    kinds = {e: client.get_experiment(e).tags.get(experiments.KIND_TAG) for e in (bare, chosen, guessed)}
    assert kinds == {bare: "custom_model_development", chosen: "genai_development", guessed: "custom_model_development"}
    assert "`gnmt`" in client.get_experiment(bare).tags[experiments.DESCRIPTION_TAG]


def test_system_metrics_switches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = mlflow_client(uri, new_store=True)
    run = client.create_run(client.create_experiment("switches"))
    off = system_metrics.start(uri, run.info.run_id, None)
    assert off.tags()[system_metrics.TAG].startswith("off: disabled")
    monkeypatch.setenv("MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING", "false")
    assert (
        "MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING"
        in system_metrics.start(uri, run.info.run_id, 1.0).tags()[system_metrics.TAG]
    )
    monkeypatch.delenv("MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING")
    monkeypatch.delenv("MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL", raising=False)
    on = system_metrics.start(uri, run.info.run_id, 0.2)
    time.sleep(1.0)
    on.finish()
    assert on.tags()[system_metrics.TAG].startswith("on: MLflow SystemMetricsMonitor every 0.2 s (cpu, disk, network")
    assert len(client.get_metric_history(run.info.run_id, "system/cpu_utilization_percentage")) >= 2


def test_system_metrics_that_cannot_start_say_so_in_one_console_line(tmp_path: Path) -> None:
    """psutil made unimportable (what a default install lacked): the run goes on, one line says why."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = mlflow_client(uri, new_store=True)
    run_id = client.create_run(client.create_experiment("nopsutil")).info.run_id
    code = (
        "import sys; sys.modules['psutil'] = None\n"
        "from t4bench.tracking import system_metrics\n"
        f"print(system_metrics.start({uri!r}, {run_id!r}, 1.0).tags()[system_metrics.TAG])"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("off: ") and "psutil" in proc.stdout
    lines = [line for line in proc.stderr.splitlines() if line.startswith("t4bench:")]
    assert len(lines) == 1 and lines[0].startswith("t4bench: system metrics off: ") and "psutil" in lines[0]


def test_a_sweep_parent_of_hw_auto_is_tagged_with_the_profile_its_runs_train_on() -> None:
    from t4bench import hardware
    from t4bench.sweep.recorded_config import config_tags
    from tests.conftest import compose_spec

    tags = config_tags(compose_spec(["hw=auto", "model=gnmt"]))
    assert tags["t4bench.hw"] == hardware.profile_for(hardware.detect()) != "auto"  # "cpu" on a CPU host
    assert tags["t4bench.model"] == "gnmt" and tags["t4bench.hw_count"] == "1"


def test_system_metrics_interval_from_the_config() -> None:
    from omegaconf import OmegaConf

    from t4bench.errors import T4BenchError

    def interval(value: object) -> float | None:
        return system_metrics.interval_from(OmegaConf.create({"tracking": {system_metrics.CONFIG_KEY: value}}))

    assert system_metrics.interval_from(OmegaConf.create({"tracking": {}})) == system_metrics.DEFAULT_INTERVAL_S
    assert (interval(0.5), interval(0), interval(None)) == (0.5, None, None)
    for bad in ("often", -1, float("nan")):
        with pytest.raises(T4BenchError, match="system_metrics_interval_s"):
            interval(bad)


def test_a_bad_interval_is_one_line_before_any_run(tmp_path: Path) -> None:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    overrides = ["max_epochs=1", "tracking.system_metrics_interval_s=often", f"tracking.uri={uri}"]
    proc = run_cli(*overrides, store=tmp_path, timeout=300)
    assert proc.returncode == 2, proc.stderr[-2000:]
    # (MLflow itself logs two INFO lines when it makes the new store)
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == (
        "t4bench: error: tracking.system_metrics_interval_s='often': give seconds between samples, or 0 for none"
    )
    found = MlflowClient(uri).get_experiment_by_name(EXPERIMENT)
    assert found is None or not MlflowClient(uri).search_runs([found.experiment_id])


def test_tags_past_the_run_budget_go_to_one_file(tmp_path: Path) -> None:
    """`RUN_TAGS` (and MLflow's own, a user's own) stay on the run; every other t4bench tag goes to
    its run_tags.json, merged over calls; tags written straight on the run move there at its end."""
    from t4bench.report.query import QueryError, parse_tag
    from t4bench.tracking import names
    from t4bench.tracking import tags as tracking

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = mlflow_client(uri, new_store=True)
    exp = RunTracker(uri).ensure_experiment("t4bench-ncf")
    version = f"{names.VERSION_PREFIX}torch"
    run_id = tracking.create_run(client, exp, "r", {names.MODEL: "ncf", version: "2.14", "mine": "x"})
    tracking.store_tags(client, run_id, {names.OUTCOME: "converged", names.WORLD_SIZE: 2})
    client.set_tag(run_id, names.HEARTBEAT, "123")  # as the heartbeat writes it: straight on the run
    tracking.fold_tags(client, run_id)
    run = client.get_run(run_id)
    assert set(run.data.tags) == {"mlflow.runName", names.MODEL, names.OUTCOME, "mine"}
    assert tracking.file_tags(client, run_id) == {version: "2.14", names.WORLD_SIZE: "2", names.HEARTBEAT: "123"}
    assert [a.path for a in client.list_artifacts(run_id)] == [names.RUN_TAGS_FILE]
    assert tracking.run_tags(client, run)[names.HEARTBEAT] == "123" and tracking.run_tags(client, run)["mine"] == "x"
    # the report's --tag filter searches the run's own tags: a moved one is refused in one line
    assert parse_tag(f"{names.MODEL}=ncf") == (names.MODEL, "ncf")
    with pytest.raises(QueryError, match=r"run_tags\.json"):
        parse_tag(f"{version}=2.14")
