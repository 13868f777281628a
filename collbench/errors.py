"""The error hierarchy.

Every error that a user can cause derives from :class:`UserError`; the CLI prints its message as one
line on stderr and exits with code 2. Anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

from collbench.text import printable


class CollbenchError(Exception):
    """Base of every error collbench raises on purpose.

    Its message is one line with control characters escaped (:func:`collbench.text.printable`): it
    quotes file names and fields of files someone else wrote, and is printed, logged and shown by
    every rank of a job.
    """

    exit_code: int = 1

    same_on_every_rank: bool = False
    """True for an error the command line alone decides, so that every rank of a launcher's job finds
    it alike and rank 0 alone says it (16,000 ranks would print 16,000 equal lines). False for any that
    may differ by rank or node (a file, a device, a peer, the store): every rank says its own."""

    def __init__(self, *args: object) -> None:
        super().__init__(*(printable(a) if isinstance(a, str) else a for a in args))


class UserError(CollbenchError):
    """A mistake the user can fix: bad option, bad file, impossible request. Exit code 2."""

    exit_code = 2


class ConfigError(UserError):
    """Options that do not fit together, or a value out of range."""


class CommandLineError(ConfigError):
    """Options out of range or that do not fit together, found from the command line (and the
    launcher's variables, alike on every rank) alone: no file, device or host decides it."""

    same_on_every_rank = True


class RankZeroEndedError(ConfigError):
    """Rank 0 of a launcher's job ended on an error of its own (a file it refused) before the job's
    store started: it said why, and the ranks waiting for the store end with its status, silent."""

    # Rank 0 printed its own error; the others repeating "rank 0 ended" would be one line a rank.
    same_on_every_rank = True


class UnknownNameError(UserError):
    """A name (op, algorithm, dtype, reduction, backend, ...) that is not registered.

    The message lists the known names, so the user can pick one.
    """

    # The names are checked against collbench's own registries, the same code on every rank.
    same_on_every_rank = True

    def __init__(self, what: str, name: str, known: list[str] | tuple[str, ...]) -> None:
        self.what = what
        self.name = name
        self.known = tuple(known)
        super().__init__(f"unknown {what} {name!r}; known: {', '.join(self.known)}")


class InputFileError(UserError):
    """A file that is missing, empty or not in the expected format.

    The message names the file and, when known, the line or element at fault.
    """

    def __init__(self, path: str, problem: str, *, line: int | None = None) -> None:
        self.path = path
        self.problem = problem
        self.line = line
        where = f"{path}:{line}" if line is not None else path
        super().__init__(f"{where}: {problem}")


class NotApplicableError(UserError):
    """An algorithm asked to do an op (or a world size) it cannot do."""


class AlgorithmForNoOpError(NotApplicableError):
    """An algorithm asked for that does none of the ops asked for: collbench's registry alone says so."""

    # The ops an algorithm does are registered in collbench's own code, the same on every rank.
    same_on_every_rank = True


class BackendUnavailableError(UserError):
    """The requested backend cannot run here (for example NCCL on a machine without GPUs)."""


class HardwareError(CollbenchError):
    """The hardware or its driver answered something unexpected."""


class RankError(CollbenchError):
    """A rank failed, died or hung. Says which rank, on which host, doing what."""

    exit_code = 3

    def __init__(self, rank: int, host: str, doing: str, problem: str) -> None:
        self.rank = rank
        self.host = host
        self.doing = doing
        self.problem = problem
        super().__init__(f"rank {rank} on {host} failed while {doing}: {problem}")
