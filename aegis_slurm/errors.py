"""One error and exit-code convention for every aegis-slurm command.

Every domain error raised by a layer (accounting, analytics, report, logs, metrics, node) derives
from :class:`AegisError`; its message is one line naming the problem and, where there is one, the
fix.  The CLI maps them once (``aegis_slurm.cli.LazyGroup.invoke``): the message goes to stderr as
``aegis-slurm: error: <message>`` and the process exits with the error's ``exit_code``.  No
traceback reaches a user; ``AEGIS_DEBUG=1`` shows it for a bug report.

Standard library only: the node side (``aegis_slurm.node``) may import it.
"""

from __future__ import annotations

#: The documented exit codes (docs/cli.md).  Scripts and cron jobs rely on them: keep them stable.
EXIT_OK = 0
#: Anything went wrong: bad input file, unreadable store, unreachable service, internal error.
EXIT_ERROR = 1
#: The command line itself is wrong (click's own usage code).
EXIT_USAGE = 2
#: The command ran correctly and a check or threshold it evaluates failed (``cbd``, ``check``).
EXIT_CHECK_FAILED = 3
#: The command ran correctly but there was nothing to compute on (no record, empty window).
EXIT_NO_DATA = 4


class AegisError(Exception):
    """Base of every aegis-slurm domain error; ``str(err)`` is the one-line user message."""

    exit_code: int = EXIT_ERROR


class InputError(AegisError):
    """An input file or value cannot be read as what it claims to be."""


class ConfigError(AegisError):
    """A configuration file is missing, unreadable or invalid (unknown key, wrong type)."""


class ServiceError(AegisError):
    """An external service (slurmctld, sacct, Prometheus) did not answer or answered an error."""


class NoDataError(AegisError):
    """There was nothing to compute on: not an error of the tool, but not a result either."""

    exit_code = EXIT_NO_DATA


class CheckFailedError(AegisError):
    """A check or alert threshold evaluated by the command failed."""

    exit_code = EXIT_CHECK_FAILED
