"""``python -m aegis_slurm.cli``: the same entry point as the ``aegis-slurm`` script."""

from aegis_slurm.cli import main

main()
