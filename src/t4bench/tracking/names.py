"""The MLflow contract: every tag, metric and outcome name a t4bench run writes and reports,
sweeps and the UI read. One place, so a rename is one edit and a typo is a NameError, not a
silently missing column.

Values are plain strings (MLflow's own types); nothing here imports MLflow. Run names are made
in t4bench.tracking.run_names.
"""

from __future__ import annotations

# --- tags: what was run ---------------------------------------------------------------------
MODEL = "t4bench.model"
HW = "t4bench.hw"
HW_COUNT = "t4bench.hw_count"
SCALE = "t4bench.scale"
DATA = "t4bench.data"
FRAMEWORK = "t4bench.framework"
THROUGHPUT_UNIT = "t4bench.throughput_unit"
SEED = "t4bench.seed"
OUTCOME = "t4bench.outcome"
#: why the run ended as it did, when the loop says (e.g. the loss that diverged)
OUTCOME_NOTE = "t4bench.outcome_note"
#: a resumed run's setting that differs from its start (max_epochs=...): tag <prefix><key> = the
#: new value; the params keep the values the run started with
RESUME_CHANGED_PREFIX = "t4bench.resume_changed."
SWEEP_ID = "t4bench.sweep_id"
#: prefix of the software version tags: t4bench.version.<package>
VERSION_PREFIX = "t4bench.version."

# --- tags: where it ran ---------------------------------------------------------------------
WORLD_SIZE = "t4bench.world_size"
GLOBAL_BATCH_SIZE = "t4bench.global_batch_size"
DIST_BACKEND = "t4bench.dist_backend"
LAUNCHER = "t4bench.launcher"
DEVICE = "t4bench.device"
THREADS = "t4bench.threads"
PRECISION = "t4bench.precision"
HW_REQUESTED = "t4bench.hw_requested"
HW_DETECTED = "t4bench.hw_detected"
HW_DETECTED_SOURCE = "t4bench.hw_detected_source"
HW_MISMATCH = "t4bench.hw_mismatch"
#: prefix of the hardware profile's facts: t4bench.hw_profile.<memory_gb|peak_tflops|...>
HW_PROFILE_PREFIX = "t4bench.hw_profile."
#: "on: ..." or "off: <reason>"
TELEMETRY = "t4bench.telemetry"
#: prefix of the GPU inventory tags: t4bench.gpu.<names|driver|pcie|...>
GPU_PREFIX = "t4bench.gpu."
#: runs of the sweep at once on one GPU (hw.runs_per_gpu in a --multirun; 1: alone). Shared runs'
#: epochs count, their seconds do not: keep >1 out of speed and time-to-train comparisons
GPU_SHARE = "t4bench.gpu_share"
#: the share of the GPU's memory the run's caching allocator could hold (packing.memory_fraction);
#: absent when uncapped
GPU_MEMORY_FRACTION = "t4bench.gpu_memory_fraction"
#: "on" when the sweep ran its runs under CUDA MPS (hw.mps=true), else "off"
MPS = "t4bench.mps"
#: the hydra/launcher of the --multirun the run was a job of (basic, packed, submitit_slurm,
#: submitit_local, ...; "none": not a sweep job): tells Slurm and local sweeps of one experiment apart
SWEEP_LAUNCHER = "t4bench.sweep_launcher"
#: the Slurm job the run ran in, as squeue/sacct show it (<array job>_<task> for a sweep's job)
SLURM_JOB_ID = "t4bench.slurm.job_id"
#: emulate.world_size=N: one device trained with the global batch of N ranks (hw.count stays 1)
EMULATED_WORLD_SIZE = "t4bench.emulated_world_size"
#: "true" when the rank switched its framework to deterministic kernels (deterministic=true: the
#: run repeats itself bit for bit on the same GPU and software), else "false"; read back from the
#: framework after the switch, so it says what the rank did, not what the config asked
DETERMINISTIC = "t4bench.deterministic"

# --- tags: what happened to the run ----------------------------------------------------------
#: the speed options in effect: t4bench.perf.<option>; `dropped` names the options that could not apply
PERF_PREFIX = "t4bench.perf."
PERF_DROPPED = "t4bench.perf.dropped"
#: "on" or "off: <reason>" (MLflow's own system metrics)
SYSTEM_METRICS = "t4bench.system_metrics"
CHECKPOINT_DIR = "t4bench.checkpoint_dir"
RESUMED_FROM_EPOCH = "t4bench.resumed_from_epoch"
#: "true" on a FINISHED run whose resumed attempt failed (its status and outcome put back)
RESUME_FAILED = "t4bench.resume_failed"
#: "true" on a sweep trial's seed run trained again from the start (its checkpoint was unusable)
REDONE_FROM_SCRATCH = "t4bench.redone_from_scratch"
# liveness of a running run (t4bench.runs): who runs it, when it last said so, its repair
HEARTBEAT = "t4bench.heartbeat"
HEARTBEAT_INTERVAL_S = "t4bench.heartbeat_interval_s"
HOST = "t4bench.host"
PID = "t4bench.pid"
#: /proc/<pid>/stat start time (clock ticks since boot): tells a reused pid from the run's process
PID_START = "t4bench.pid_start"
#: the pid namespace: containers sharing a host name (host networking) do not see each other's pids
PID_NAMESPACE = "t4bench.pid_namespace"
REPAIRED = "t4bench.repaired"

# --- tags of sweeps (layout in t4bench.tracking.sweep_layout) ---------------------------------
SWEEP_ROLE = "t4bench.sweep_role"
SWEEP_KIND = "t4bench.sweep_kind"
#: what a parent run belongs to: "optuna:<study>@<storage>#<study uid>", "seeds:<sweep dir>", ...
SWEEP_IDENTITY = "t4bench.sweep_identity"
SWEEP_OVERRIDES = "t4bench.sweep_overrides"
#: prefix of the outcome counts on a sweep parent: t4bench.outcomes.<outcome>
OUTCOMES_PREFIX = "t4bench.outcomes."
OPTUNA_STATE = "t4bench.optuna.state"
OPTUNA_STUDY = "t4bench.optuna.study"
OPTUNA_STORAGE = "t4bench.optuna.storage"
OPTUNA_STUDY_UID = "t4bench.optuna.study_uid"
TRIAL_NUMBER = "t4bench.trial_number"
SEED_INDEX = "t4bench.seed_index"
RETRY_OF = "t4bench.retry_of"
BEST_TRIAL = "t4bench.best_trial"
#: prefix of the best trial's parameters on a sweep parent: t4bench.best.<param>
BEST_PREFIX = "t4bench.best."
# held-out validation (t4bench.sweep.holdout)
VALIDATION_OF = "t4bench.validation.of"
VALIDATION_SET = "t4bench.validation.set"
VALIDATION_BEST_TRIAL = "t4bench.validation.best_trial"
#: prefix of an arm's hyperparameters: t4bench.params.<key>
PARAMS_PREFIX = "t4bench.params."
#: PASS or FAIL: the held-out comparison met its goal
GOAL = "t4bench.goal"
# launches and reports
#: the command an MLflow Projects entry point ran (t4bench.mlproject)
LAUNCHED = "t4bench.launched"
REPORT = "t4bench.report"
REPORT_FILTER = "t4bench.report.filter"

# --- which tags stay on the run ---------------------------------------------------------------
#: the prefix of every t4bench tag
NAMESPACE = "t4bench."
#: the t4bench tags kept on the run: what a person compares, filters or groups on in the runs
#: table, and what searches (sweeps, reports) filter on. Every other t4bench tag is written to
#: the run's RUN_TAGS_FILE artifact (read back with t4bench.tracking.tags.run_tags), so a run carries
#: at most 20 tags with MLflow's own (name, parent, commit): 10 on every training run, 3 more in a
#: sweep, 4 that only some runs have. MLflow's own tags and a user's own (tracking.tags outside
#: t4bench.) always stay. A tag written straight to the run (the heartbeat's liveness tags, which
#: `t4bench runs repair` reads on RUNNING runs) moves to the file when the run ends.
RUN_TAGS = frozenset(
    {
        # every training run
        MODEL,
        HW,
        HW_COUNT,
        SCALE,
        DATA,
        FRAMEWORK,
        SEED,
        OUTCOME,
        GPU_SHARE,
        THROUGHPUT_UNIT,
        # sweeps: their runs, trials, parents and held-out validations
        SWEEP_ID,
        TRIAL_NUMBER,
        OPTUNA_STUDY,
        SWEEP_ROLE,
        SWEEP_KIND,
        OPTUNA_STATE,
        BEST_TRIAL,
        VALIDATION_SET,
        GOAL,
        REPORT,
        REPORT_FILTER,
        LAUNCHED,
        # only some runs
        OUTCOME_NOTE,
        RESUMED_FROM_EPOCH,
        REPAIRED,
        SLURM_JOB_ID,
    }
)
# --- tags MLflow itself defines ---------------------------------------------------------------
MLFLOW_PARENT_RUN_ID = "mlflow.parentRunId"
MLFLOW_GIT_COMMIT = "mlflow.source.git.commit"

# --- values of OUTCOME ----------------------------------------------------------------------
OUTCOME_RUNNING = "running"
OUTCOME_CONVERGED = "converged"
OUTCOME_NOT_CONVERGED = "not_converged"
OUTCOME_DIVERGED = "diverged"
OUTCOME_PRUNED = "pruned"
OUTCOME_THROUGHPUT_ONLY = "throughput_only"
OUTCOME_FAILED = "failed"
OUTCOME_KILLED = "killed"

# --- metrics ----------------------------------------------------------------------------------
# per epoch (step = epoch)
EVAL_QUALITY = "eval_quality"
#: prefix of each quality metric of the benchmark: eval_<name>
EVAL_PREFIX = "eval_"
TRAIN_LOSS = "train_loss"
EPOCH_TIME_S = "epoch_time_s"
#: the (fractional) epochs trained when the evaluation was taken
EPOCH = "epoch"
THROUGHPUT = "throughput"
#: seconds the slowest rank spent in the steps since the previous evaluation
TRAIN_TIME_S = "train_time_s"
#: the learning rate after the last step (the schedule's value)
LR = "lr"
#: the trivial baselines' quality (t4bench.baselines): trivial_<metric>, trivial_quality the first
TRIVIAL_PREFIX = "trivial_"
TRIVIAL_QUALITY = "trivial_quality"
# once per run
#: MLPerf's two scores, logged ONLY by a run that converged: a run that did not reach its target
#: has no time to train (MLPerf counts it as infinitely slow), so sorting by either never puts it
#: first. What every run ran for is RUN_TRAIN_S and RUN_WALL_S
EPOCHS_TO_CONVERGE = "epochs_to_converge"
TIME_TO_TRAIN_S = "time_to_train_s"
EPOCHS_RUN = "epochs_run"
#: every run, whatever its outcome: seconds from MLPerf run_start to run_stop (a resumed run's
#: earlier attempts included); a converged run's time_to_train_s is this
RUN_TRAIN_S = "run_train_s"
#: every run, whatever its outcome (failed and killed runs too): seconds of this attempt from the
#: rank's start (data and model init included) to the end of training
RUN_WALL_S = "run_wall_s"
CONVERGED = "converged"
AVG_THROUGHPUT = "avg_throughput"
PEAK_GPU_MEMORY_GIB = "peak_gpu_memory_gib"
GLOBAL_BATCH_SIZE_METRIC = "global_batch_size"
WORLD_SIZE_METRIC = "world_size"
# telemetry summary (GPU runs)
ENERGY_TO_TRAIN_KJ = "energy_to_train_kj"
AVG_POWER_W = "avg_power_w"
MAX_TEMP_C = "max_temp_c"
THROTTLED_FRACTION = "throttled_fraction"
#: prefix of the per-GPU series (MLflow's system metrics and t4bench.telemetry's):
#: system/gpu_<NVML index>_<what>_<unit>, charted in the run page's System metrics tab
TELEMETRY_SERIES_PREFIX = "system/gpu_"

# --- artifacts --------------------------------------------------------------------------------
RESOLVED_CONFIG_FILE = "resolved_config.yaml"
MLPERF_LOG_FILE = "mlperf.log"
#: the run's t4bench tags that are not kept on the run (RUN_TAGS), as one JSON object
RUN_TAGS_FILE = "run_tags.json"

# --- MLflow run statuses (RunStatus names) ----------------------------------------------------
RUNNING = "RUNNING"
SCHEDULED = "SCHEDULED"
FINISHED = "FINISHED"
FAILED = "FAILED"
KILLED = "KILLED"
