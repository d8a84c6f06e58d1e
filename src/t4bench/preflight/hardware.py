"""Checks that run before anything heavy is imported or created: the chosen scale exists for the
model, and the requested hardware is here. Only Hydra/OmegaConf and the standard library load
here (no torch, no MLflow), so bad input fails in about a second with one line."""

from __future__ import annotations

from t4bench import resources, run_env
from t4bench.errors import T4BenchError
from t4bench.run_env import RunEnvironment
from t4bench.spec import RunSpec

#: the Hydra app's config folder as shipped in the package (t4bench.resources)
CONF_DIR = resources.conf_dir()
#: the scale every model defines in conf/model/<model>.yaml itself (no model_scale file)
BUILTIN_SCALE = "mini"


def _group_options(group: str) -> list[str]:
    """The config names of a group as Hydra sees them (its search path) inside the app, else the
    files of conf/<group>/ (a config composed outside the app)."""
    from hydra.core.global_hydra import GlobalHydra

    hydra = GlobalHydra.instance()
    if hydra.is_initialized():
        return list(hydra.config_loader().get_group_options(group))
    return sorted(p.stem for p in (CONF_DIR / group).glob("*.yaml"))


def available_scales(model: str) -> list[str]:
    """`mini` plus every `<scale>` of a conf/model_scale/<model>_<scale>.yaml."""
    prefix = f"{model}_"
    specific = {name[len(prefix) :] for name in _group_options("model_scale") if name.startswith(prefix)}
    return [BUILTIN_SCALE, *sorted(specific - {BUILTIN_SCALE})]


def check_scale(cfg: RunSpec) -> None:
    """Hydra skips a missing optional `model_scale` silently, which would run the mini sizes under
    another scale's name: refuse a scale the model has no file for."""
    model, scale = str(cfg.model.name), str(cfg.scale.name)
    scales = available_scales(model)
    if scale not in scales:
        raise T4BenchError(
            f"scale={scale} is not defined for model={model} (no conf/model_scale/{model}_{scale}.yaml); "
            f"scales for {model}: {', '.join(scales)}"
        )


def check(spec: RunSpec) -> RunEnvironment:
    """The run environment (`hw=auto` resolved, a launcher's ranks read), after one-line errors for a
    scale the model lacks or hardware this machine does not have (unless hw.strict=false). The
    config is left as composed."""
    check_scale(spec)
    return run_env.resolve(spec)
