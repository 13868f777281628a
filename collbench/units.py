"""Quantities as people read and write them, shared by the terminal (collbench/cli) and the report.

It lives in the core because the core may not import collbench/cli; the CLI imports it from here.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

from collbench.errors import CommandLineError


def check_ranks(ranks: int, least: int, command: str, option: str = "--ranks") -> None:
    """CommandLineError for a rank count below what ``command`` needs, in the one wording every command uses:
    ``--ranks 1: tune needs at least 2 ranks (a collective of one rank moves no data)``; and for one
    from :data:`MAX_RANKS` up, which every reader of results and profiles refuses (a predicted shape of
    999999999 ranks was written into a profile no command would then read)."""
    if ranks >= MAX_RANKS:
        raise CommandLineError(f"{option} {ranks}: {command} takes fewer than 2^20 ({MAX_RANKS:,}) ranks")
    why = " (a collective of one rank moves no data)" if least > 1 else ""
    check_count(ranks, least, command, option, "rank", why)


MAX_SECONDS = 7 * 24 * 3600
"""The longest --timeout or --budget: a week. 1e30 seconds reached datetime.timedelta's OverflowError."""


MIN_TIMEOUT_S = 1.0
"""The shortest --timeout of a command that starts ranks: a rank's process takes about that to start and
reach the store. Shorter, 'sweep -T 0.01' ended in torch's DistNetworkError traceback (the store's own
client timed out reaching it), and '-T 0.1' said a rank 'stopped answering (hung)' while it started."""


def check_seconds(seconds: float, option: str, least_s: float = 0.0) -> None:
    """CommandLineError unless ``seconds`` is a positive, finite number of seconds up to :data:`MAX_SECONDS`,
    in the one wording of every command's --timeout (discover --probe let NaN past its ``<= 0`` into a
    ValueError's traceback, and every command let 1e30 into an OverflowError's), and at least ``least_s``
    (:data:`MIN_TIMEOUT_S` for a --timeout that ranks run under)."""
    if not (math.isfinite(seconds) and 0 < seconds <= MAX_SECONDS):
        raise CommandLineError(
            f"{option} must be a positive number of seconds, at most {MAX_SECONDS:,} (a week), got {seconds:g}"
        )
    if seconds < least_s:
        raise CommandLineError(
            f"{option} {seconds:g}: give at least {least_s:g} s; a rank takes about that to start and reach the others"
        )


def check_nodes(nodes: int, command: str, option: str = "--nodes") -> None:
    """CommandLineError for a node count below 1, worded as :func:`check_ranks`: ``--nodes 0: fit needs at
    least 1 node``."""
    check_count(nodes, 1, command, option, "node")


def check_count(value: int, least: int, command: str, option: str, unit: str, why: str = "") -> None:
    """CommandLineError ``OPTION VALUE: COMMAND needs at least LEAST UNIT(s)[WHY]`` for ``value`` below ``least``:
    the one wording of a count too small, whichever option and command (``import --ranks 0`` said Typer's
    "Input should be greater than or equal to 1", fit "--ranks must be at least 1, got 0", explain
    "--ranks must be >= 1")."""
    if value < least:
        raise CommandLineError(f"{option} {value}: {command} needs at least {counted(least, unit)}{why}")


_BINARY_UNITS = (("G", 30), ("M", 20), ("K", 10))
# ASCII: Python's \d takes any script's digits, so '١٢٨' (Arabic-Indic) was read as 128 bytes.
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(?:([kmg])i?b?|b)?\s*$", re.IGNORECASE | re.ASCII)
_SHIFTS = {"": 0, "k": 10, "m": 20, "g": 30}


def parse_size(text: str, flag: str = "size") -> int:
    """Bytes from a size as nccl-tests' ``-b``/``-e`` take it: ``4096``, ``64K``, ``1.5M``, ``1G``.

    K, M and G are powers of 1024; ``KB``, ``KiB`` and ``Ki`` mean the same, in any case, and a bare
    number may end in ``B``. A fraction is fine when the bytes come out whole (``0.5K`` is 512), so no
    size is ever truncated. ``flag`` names the option in the message. Raises CommandLineError.
    """
    match = _SIZE.match(text)
    if match is None:
        raise CommandLineError(
            f"{flag} {text!r} is not a size (not a byte count such as 4096, nor K/M/G in powers of 1024 such as 64K)"
        )
    # Exact arithmetic: a float would call 1.00000000000000001K whole.
    value = Fraction(match.group(1)) * (1 << _SHIFTS[(match.group(2) or "").lower()])
    if value.denominator != 1:
        raise CommandLineError(f"{flag} {text!r} is not a whole number of bytes ({float(value):g})")
    return int(value)


def size_label(size_bytes: float) -> str:
    """Bytes as nccl-tests writes them: ``512B``, ``4K``, ``1.5M`` (powers of 1024, one decimal at most)."""
    for unit, shift in _BINARY_UNITS:
        if size_bytes >= (1 << shift):
            value = size_bytes / (1 << shift)
            # Within float error of a whole number is a whole number: 4K, not 4.0K.
            return f"{value:.0f}{unit}" if abs(value - round(value)) < 1e-9 else f"{value:.1f}{unit}"
    return f"{size_bytes:.0f}B"


def gbps(size_bytes: float, time_us: float) -> float:
    """The rate of ``size_bytes`` moved in ``time_us`` microseconds, in GB/s (10^9 bytes a second,
    nccl-tests' unit): a row's algbw, and times its op's busbw factor its busbw. 0 where no time was
    taken (a time of 0 or less)."""
    return size_bytes / time_us / 1e3 if time_us > 0 else 0.0


def format_bytes(size_bytes: float) -> str:
    """Bytes as people read them in text: ``8 B``, ``64 KiB``, ``90.5 KiB``, ``5.66 MiB`` (powers of 1024,
    three significant digits at most, no decimals for a whole number of units).

    The one formatter for sizes in sentences and tables; ``size_label`` is nccl-tests' own compact
    column style (``64K``), kept where a table mirrors nccl-tests' output.
    """
    value = float(size_bytes)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            # Three significant digits would print 1023.7 KiB as 1.02e+03: whole units from 1000 up.
            whole = unit == "B" or abs(value) >= 999.5
            return f"{value:.0f} {unit}" if whole else f"{value:.3g} {unit}"
        value /= 1024
    raise AssertionError("unreachable: the last unit returns")


# -- physical bounds: what any measurement, file or request of collbench can hold ------------------

MAX_BYTES = 1 << 50
"""Sizes are below 2^50 bytes (1 PiB): no message of one rank comes near, and a size past it in a file
is a typo or an attack (a Parquet writer overflows on 1e30; 2^63 wraps a C int64)."""
MAX_RANKS = 1 << 20
"""World sizes and node counts are below 2^20 (1,048,576): a thousand times the largest job run today."""
MAX_INT_DIGITS = 20
"""Digits an integer in a file may have (2^64 has 20): checked before ``int()``, which refuses more than
4,300 digits with a ValueError and takes quadratic time on the way there."""


def counted(count: float, noun: str) -> str:
    """``count`` and ``noun``, plural unless the count is one: ``1 rank``, ``4 ranks``, ``2.5 steps``
    (explain's lines said ``1 ranks`` and ``2 step(s)``)."""
    number = str(int(count)) if float(count).is_integer() else f"{count:g}"
    return f"{number} {noun}{'' if count == 1 else 's'}"


def factor_text(factor: float) -> str:
    """A ratio as a multiplier shows it, ``64``, ``21.3``, ``1024``: three figures, whole from 1,000 up
    (``.3g`` wrote 16,384 ranks from fits at 16 as ``x1.02e+03``)."""
    return f"{factor:.3g}" if abs(factor) < 999.5 else f"{factor:.0f}"


def ranks_on_nodes(ranks: int, nodes: int) -> str:
    """A communicator's shape as every label says it: ``4 ranks on 1 node``, ``16 ranks on 2 nodes``."""
    return f"{counted(ranks, 'rank')} on {counted(nodes, 'node')}"


def time_text(time_us: float) -> str:
    """``53.19 us``, ``10.96 ms`` or ``12.5 s``: four figures, in the unit that keeps them plain (a time
    that rounds to 10,000 of one unit is said in the next: ``.4g`` writes 9999.7 as ``1e+04``)."""
    for scale, unit in ((1.0, "us"), (1e3, "ms")):
        if time_us / scale < 9999.5:
            return f"{time_us / scale:.4g} {unit}"
    seconds = time_us / 1e6
    return f"{seconds:.4g} s" if seconds < 9999.5 else f"{seconds:,.0f} s"
