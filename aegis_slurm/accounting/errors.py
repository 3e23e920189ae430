"""The accounting layer's errors: one base, so callers (and the CLI) catch them once.

Each also derives from the convention's kind (``InputError``, ``ServiceError``...) that fixes
its exit code (``aegis_slurm.errors``).
"""

from __future__ import annotations

from aegis_slurm.errors import AegisError, InputError, ServiceError


class AccountingError(AegisError):
    """Base of every error raised by ``aegis_slurm.accounting``."""


class AccountingInputError(AccountingError, InputError):
    """An export, a value or a file given to the accounting layer cannot be read."""


class AccountingServiceError(AccountingError, ServiceError):
    """sacct or slurmdbd did not answer, or answered an error."""
