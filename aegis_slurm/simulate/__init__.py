"""Synthetic Slurm cluster histories with planted ground truth (see ``history.py``)."""

from aegis_slurm.simulate.history import SimConfig, SimResult, simulate, write_history

__all__ = ["SimConfig", "SimResult", "simulate", "write_history"]
