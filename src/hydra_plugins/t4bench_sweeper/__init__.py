"""t4bench's Hydra plugins: an Optuna 5 sweeper (`hydra/sweeper=optuna`) and a search-path plugin
that puts the repository's sweeps/ folder on Hydra's search path (`+sweeps=<name>`).

`src/hydra_plugins` is a namespace package (no __init__.py), found by Hydra's plugin discovery
because the editable install puts src/ on sys.path (editable_mode=compat)."""
