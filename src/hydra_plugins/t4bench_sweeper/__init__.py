"""t4bench's Hydra plugins: an Optuna 5 sweeper (`hydra/sweeper=optuna`) and a search-path plugin
that puts t4bench's sweep presets (sweeps/) on Hydra's search path (`+sweeps=<name>`).

`hydra_plugins` is a namespace package (no __init__.py), shared with Hydra's own plugins; Hydra's
plugin discovery finds this one in site-packages (the wheel ships it beside t4bench), or in src/
when that is on sys.path (an editable compat install, or PYTHONPATH=src)."""
