"""The run spec: the composed config read once, at the edge, into frozen typed values.

    section  a typed section over its composed node; building one checks every field
    model    the `model:` section's common base (a benchmark's own class is built from its values)
    bounds   what a typed field's value may be (its rule), and how the refusal says it
    run      RunSpec and build_spec(cfg): validation is building
    derived  RunDerived: what the runner works out (tags, emulated batch, packed threads), a value

Where the spec is built: the command-line preflight (t4bench.preflight.command_line) composes the
command line and builds its spec before Hydra starts, so a refusal leaves nothing behind; it returns
what it checked (`Checked`, with that composition). `t4bench.__main__` starts the single run's Hydra
job from it (t4bench.app_job) and hands the value to the task function: the task function builds the
spec of the job's config (a sweep's jobs: of the config Hydra's launcher composed),
and the runner skips the checks of places (hardware, tracking store, data) the preflight already
made for the same task overrides. Nothing travels through module state. From the runner down,
functions take the spec or its sections; the composed config stays as Hydra made it (read-only).
Only the standard library and OmegaConf load here.
"""

from t4bench.spec.derived import RunDerived
from t4bench.spec.model import ModelSpec
from t4bench.spec.run import HwSpec, RunSpec, build_spec

__all__ = ["HwSpec", "ModelSpec", "RunDerived", "RunSpec", "build_spec"]
