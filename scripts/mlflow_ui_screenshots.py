"""Screenshots of the MLflow UI on t4bench runs (docs/img/mlflow_ui_*.png), from a running server.

    pip install playwright          # the Python package only: the browser is Debian's chromium
    mlflow server --backend-store-uri sqlite:///mlflow.db --port 5077 &
    python scripts/mlflow_ui_screenshots.py --url http://127.0.0.1:5077 --experiment t4bench-ncf

Writes the experiment's runs page (every sweep parent expanded, the Run Name column at its default
width: t4bench's run names fit it at each depth), one training run's overview (its at most 20 tags) and
its System metrics tab. `?workflowType=machine_learning` opens MLflow 3's "Model training" side of the UI
(its default side is GenAI, whatever the experiment's kind).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from mlflow.tracking import MlflowClient
from playwright.sync_api import Page, sync_playwright

ML_VIEW = "workflowType=machine_learning"
#: the columns a time-to-train comparison reads (docs/mlflow_ui.md)
SHOWN_COLUMNS = ["t4bench.outcome", "epochs_run", "time_to_train_s", "eval_quality", "avg_throughput"]


def close_assistant(page: Page) -> None:
    close = page.locator('[data-component-id="mlflow.assistant.chat_panel.close"]')
    if close.count():
        close.first.click()


def expand_all(page: Page) -> None:
    """Show every nested run: click collapsed expanders (they draw a plus) until none is left, as
    a trial's expander appears only once its sweep's is open."""
    expanders = page.locator('[data-component-id$="runnamecellrenderer.tsx_46"]')
    for _ in range(20):
        collapsed = [i for i in range(expanders.count()) if "M7.25 7.25V4.5" in expanders.nth(i).inner_html()]
        if not collapsed:
            return
        expanders.nth(collapsed[0]).click()
        page.wait_for_timeout(500)


def choose_columns(page: Page, hide: list[str], show: list[str]) -> None:
    """Tick/untick runs-table columns in the Columns selector (a user's per-browser choice)."""
    page.get_by_role("button", name="Columns").click()
    dialog = page.locator("[role=dialog]")
    search = dialog.get_by_placeholder("Search columns")
    for name in [*hide, *show]:
        search.fill(name)
        dialog.get_by_text(name, exact=True).first.click()
    page.keyboard.press("Escape")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:5077")
    parser.add_argument("--experiment", default="t4bench-ncf")
    parser.add_argument("--out", type=Path, default=Path("docs/img"))
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    args = parser.parse_args()

    client = MlflowClient(args.url)
    experiment = client.get_experiment_by_name(args.experiment)
    if experiment is None:
        raise SystemExit(f"mlflow_ui_screenshots: error: no experiment {args.experiment!r} at {args.url}")
    exp_id = experiment.experiment_id
    training = client.search_runs([exp_id], filter_string="tags.`t4bench.model` != ''", order_by=["start_time DESC"])
    run = next(r for r in training if "t4bench.sweep_role" not in r.data.tags)
    args.out.mkdir(parents=True, exist_ok=True)

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=args.chromium, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1400, "height": 820})
        page.goto(f"{args.url}/#/experiments/{exp_id}/runs?{ML_VIEW}")
        page.wait_for_selector("text=Run Name", timeout=60_000)
        close_assistant(page)
        expand_all(page)
        choose_columns(page, hide=["Dataset", "Source", "Models"], show=SHOWN_COLUMNS)
        page.mouse.move(5, 5)
        page.wait_for_timeout(1500)
        # every run in view: the page as tall as its rows (32 px each, below ~300 px of header)
        rows = page.locator('[role=gridcell][col-id="attributes.`Run Name`"]').count()
        page.set_viewport_size({"width": 1400, "height": max(820, 380 + 32 * rows)})
        page.wait_for_timeout(1500)
        page.screenshot(path=str(args.out / "mlflow_ui_runs.png"))
        page.set_viewport_size({"width": 1400, "height": 820})

        page.goto(f"{args.url}/#/experiments/{exp_id}/runs/{run.info.run_id}?{ML_VIEW}")
        page.wait_for_selector("text=Tags", timeout=60_000)
        close_assistant(page)
        page.mouse.move(5, 5)
        page.wait_for_timeout(1500)
        page.screenshot(path=str(args.out / "mlflow_ui_run.png"), full_page=True)

        page.goto(f"{args.url}/#/experiments/{exp_id}/runs/{run.info.run_id}/system-metrics?{ML_VIEW}")
        page.wait_for_selector("text=system/", timeout=180_000)
        close_assistant(page)
        page.mouse.move(5, 5)  # no chart toolbar under the pointer
        page.wait_for_timeout(2500)  # the charts draw after the metric histories load
        page.screenshot(path=str(args.out / "mlflow_ui_system_metrics.png"))
        browser.close()
    shots = ", ".join(f"mlflow_ui_{n}.png" for n in ("runs", "run", "system_metrics"))
    print(f"wrote {shots} in {args.out} (run {run.info.run_name}, {len(run.data.tags)} tags)")


if __name__ == "__main__":
    main()
