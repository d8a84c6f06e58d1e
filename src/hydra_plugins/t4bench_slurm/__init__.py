"""t4bench's Slurm launchers (`hydra/launcher=submitit_slurm`, `=submitit_local`: launcher.py), in
the hydra_plugins namespace because Hydra instantiates launchers from there only."""
