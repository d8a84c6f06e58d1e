"""Held-out validation runs (`hydra.sweeper.validate_seeds`, started by `python -m t4bench.sweep.holdout`):
both arms, the best trial's parameters ("tuned") and the config's own values ("reference"), on
seeds that the sweep never used, composed exactly as the sweep's trials were.

MLflow: one validation parent, sweep id `<sweep_id>-validate` (the comparison: metrics,
validation.json/.md/.csv artifacts), holding one run per arm (sweep ids `<sweep_id>-validate-best-t<N>`,
`<sweep_id>-validate-reference`), each holding its seed runs. Run names fit the runs table's Run Name
column: `validate-<study>-<uid8>` (fitted), `tuned-t<N>` / `reference`, `tuned-seed101`; the sweep
id tags keep the long identity. Seeds whose run already finished
are reused, so the command can be interrupted and run again. The comparison is holdout/report.py.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from t4bench.errors import RunTerminated
from t4bench.sweep.recorded_config import config_tags
from t4bench.sweep.trial_runner import quote
from t4bench.tracking import names, run_names, sweep_layout

if TYPE_CHECKING:
    from pathlib import Path

    from t4bench.spec import RunSpec
    from t4bench.sweep.space import SearchSpace
    from t4bench.tracking.optuna_runs import OptunaSweepRuns

log = logging.getLogger(__name__)


class Sweep(Protocol):
    """What the held-out runs read of the sweep (`t4bench.sweep.study.OptunaStudyRunner` is one;
    named here, not imported, so that the study, which starts these runs, is not imported back)."""

    spec: RunSpec
    launcher: Any
    space: SearchSpace
    study: Any
    study_name: str
    sweep_dir: Path
    sweep_id: str


class HoldOut:
    def __init__(self, study: Sweep, runs: OptunaSweepRuns) -> None:
        self.s, self.runs, self.mlflow = study, runs, runs.mlflow

    def _parent(self, sweep_id: str, name: str, identity: str, tags: dict[str, Any]) -> str:
        return sweep_layout.get_or_create_parent(
            self.mlflow,
            self.runs.exp_id,
            sweep_id,
            kind="validation",
            run_name=name,
            tags={**config_tags(self.s.spec), names.VALIDATION_OF: self.s.sweep_id, **tags},
            identity=f"{identity}|{self.runs.identity}",
        )

    def _end(self, run_id: str, err: BaseException | None) -> None:
        # never leave a validation run RUNNING: a re-run of the command finds and reuses it
        status = (
            names.FINISHED
            if err is None
            else names.KILLED
            if isinstance(err, (KeyboardInterrupt, RunTerminated))
            else names.FAILED
        )
        self.mlflow.set_terminated(run_id, status=status)

    def run_arm(
        self,
        label: str,
        params: list[str],
        sweep_id: str,
        parent: str,
        seeds: Sequence[int],
        job_offset: int,
        run_name: str,
    ) -> dict[str, Any]:
        """The arm's finished seed runs for `seeds` (launching the missing ones)."""
        arm = self._parent(
            sweep_id,
            run_names.fit(run_name, depth=1),
            f"validation-arm:{label}",
            {names.VALIDATION_SET: label, names.MLFLOW_PARENT_RUN_ID: parent},
        )
        try:
            sweep_layout.set_tags(
                self.mlflow, arm, {f"{names.PARAMS_PREFIX}{o.split('=', 1)[0]}": o.split("=", 1)[1] for o in params}
            )
            done = {r["seed"] for r in sweep_layout.seed_results(self.mlflow, self.runs.exp_id, sweep_id)}
            todo = [s for s in seeds if s not in done]
            batch = [
                [
                    *self.s.space.fixed,
                    *params,
                    f"seed={s}",
                    f"tracking.sweep_id={quote(sweep_id)}",
                    f"tracking.parent_run_id={arm}",
                    f"tracking.run_name={quote(run_names.seed(s, depth=2))}",
                ]
                for s in todo
            ]
            log.info(
                "validation %s: %s on seeds %s (%d already run)",
                label,
                params or "reference",
                todo,
                len(done & set(seeds)),
            )
            if batch:
                for ret in self.s.launcher.launch(batch, initial_job_idx=job_offset + int(todo[0])):
                    _ = ret.return_value
            # by seed: runs of one arm may come from several validation processes (in any order)
            wanted = set(seeds)
            results = sorted(
                (r for r in sweep_layout.seed_results(self.mlflow, self.runs.exp_id, sweep_id) if r["seed"] in wanted),
                key=lambda r: r["seed"],
            )
        except BaseException as err:
            self._end(arm, err)
            raise
        self._end(arm, None)
        return {"sweep_id": sweep_id, "run_id": arm, "overrides": params, "results": results}

    def run(self, seeds: Sequence[int]) -> dict[str, Any]:
        from t4bench.sweep.holdout import report as validate

        best = self.s.study.best_trial
        sweep_id = f"{self.s.sweep_id}-validate"
        parent = self._parent(
            sweep_id,
            run_names.validation(self.s.study_name, self.runs.study_uid),
            "validation",
            {names.VALIDATION_BEST_TRIAL: best.number},
        )
        try:
            arms = {
                "tuned": self.run_arm(
                    "tuned",
                    self.s.space.overrides(best.params, strict=False),
                    f"{self.s.sweep_id}-validate-best-t{best.number}",
                    parent,
                    seeds,
                    100000,
                    f"tuned-t{best.number}",
                ),
                "reference": self.run_arm(
                    "reference", [], f"{self.s.sweep_id}-validate-reference", parent, seeds, 200000, "reference"
                ),
            }
            report = validate.build_report(
                model=str(self.s.spec.model.name),
                study=self.s.study_name,
                seeds=list(seeds),
                best={"trial": best.number, "params": best.params, "value": best.value},
                arms=arms,
                default_max_epochs=float(self.s.spec.max_epochs),
            )
            text = validate.publish(report, self.s.sweep_dir, self.mlflow, parent, self.runs.parent_id)
        except BaseException as err:
            self._end(parent, err)
            raise
        self._end(parent, None)
        print(text, flush=True)
        return report
