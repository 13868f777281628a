"""What kind of file a text is, and whether a command may write over a file that is there.

Readers decide what a file is by reading it; once one could not, :func:`misfiled` names what the file is
instead (result rows given as a profile, a log given as a topology). Writers ask before any work: a
record of a machine or a measurement (a profile, result rows, a topology) is never replaced by another
kind of file (:func:`refuse_replacing_record`), and any output with content is replaced only when the
user says ``--overwrite`` (:func:`refuse_replacing`: the one wording of that refusal).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path

from collbench.errors import ConfigError, InputFileError
from collbench.fileio import decode_text

RESULTS_KIND = "collbench result rows"
PROFILE_KIND = "a collbench profile"
FITS_KIND = "`collbench fit --json` output"
TOPOLOGY_KIND = "a collbench topology"
NCCL_TESTS_KIND = "nccl-tests output"
NVIDIA_SMI_KIND = "`nvidia-smi topo -m` output"
NCCL_XML_KIND = "an NCCL topology XML"
NVML_RECORDING_KIND = "an NVML recording"
_KINDS: tuple[tuple[str, str, re.Pattern[str]], ...] = (
    (
        RESULTS_KIND,
        "fit, report and compare read them",
        # CSV (its header names the row's fields); JSONL, a row a line, is is_row_line's (kind_of_text).
        re.compile(r"\A[^\n]*\bsize_bytes,[^\n]*\btime_us\b"),
    ),
    (
        "a JSON array of collbench result rows",
        "sweep --format json prints it; fit, report and compare read rows from .jsonl, .csv or .parquet,"
        " which sweep -O FILE.jsonl writes",
        # Its first row's opening, keys sorted: a row's fields hold no list, so the first ']' ends it.
        re.compile(r'\A\s*\[\s*\{[^\]]{0,4000}?"size_bytes"\s*:'),
    ),
    (NVML_RECORDING_KIND, "discover --replay reads it", re.compile(r'"format"\s*:\s*"collbench-nvml-recording"')),
    (FITS_KIND, "predict --fits reads it", re.compile(r'\A\s*\{\s*"fits"\s*:')),
    (
        PROFILE_KIND,
        "export, predict --profile and report --profile read it",
        re.compile(r"\A# collbench tuning profile|^rule_sets:", re.MULTILINE),
    ),
    (
        TOPOLOGY_KIND,
        "--from-file and --topology read it",
        re.compile(r'^\s*"?devices"?\s*:[\s\S]*^\s*"?links"?\s*:', re.MULTILINE),
    ),
    (NCCL_XML_KIND, "discover --from-nccl-xml reads it", re.compile(r"<system[\s>]")),
    ("an NCCL graph XML", "NCCL reads it through NCCL_GRAPH_FILE", re.compile(r"<graphs[\s>]")),
    ("an HTML page", "a browser reads it", re.compile(r"<(!doctype )?html", re.IGNORECASE)),
    (
        NCCL_TESTS_KIND,
        "import nccl-tests, fit, report and compare read it",
        re.compile(r"Avg bus bandwidth|out-of-place[\s\S]*busbw|\"nccl_version\""),
    ),
    (NVIDIA_SMI_KIND, "discover --from-nvidia-smi reads it", re.compile(r"^\s*GPU0\s+X\s", re.MULTILINE)),
    ("OSU micro-benchmarks output", "collbench reads nccl-tests output, not OSU's", re.compile(r"^# OSU ", re.M)),
    (
        "mpirun's error output",
        "the job failed before any result",
        re.compile(r"^(mpirun|prterun|ORTE) (was unable|noticed|has exited)", re.MULTILINE),
    ),
    (
        "an NCCL tuner config",
        "NCCL reads it through NCCL_TUNER_CONFIG_FILE",
        re.compile(r"^(allreduce|allgather|reducescatter|broadcast|reduce),\d+,", re.MULTILINE),
    ),
)


def kind_of_text(text: str) -> tuple[str, str] | None:
    """What a file is, and what reads it, by its first 20,000 characters, among the files collbench reads
    and writes and those users keep beside them; None when it is none of them. For an error's words only:
    readers decide what a file is by reading it, and ask this once they could not."""
    head = text[:20000]
    rows = is_row_line(head.lstrip().partition("\n")[0])
    return next(
        ((kind, reader) for kind, reader, pattern in _KINDS if (rows and kind == RESULTS_KIND) or pattern.search(head)),
        None,
    )


def is_row_line(line: str | bytes, *, torn: bool = False) -> bool:
    """Whether one line of a file is a results row as sweeps write them: a JSON object holding
    ``size_bytes``, whole on one line. With ``torn`` (the line is the file's last and has no newline:
    a sweep killed in its write), the start of one counts too. The one test of a row line, for
    :func:`kind_of_text` and for the sweep's check of its stream (``journal.first_line_kind``)."""
    start = line.lstrip()
    if not (start.startswith(b"{") if isinstance(start, bytes) else start.startswith("{")):
        return False
    try:
        first = json.loads(start)
    except (ValueError, RecursionError):
        # Pretty-printed JSON opens with a line of "{" alone; a row is written whole on one line. (Objects
        # nested a thousand deep are no row either: Python's reader gives up there.)
        return torn and (start.startswith(b'{"') if isinstance(start, bytes) else start.startswith('{"'))
    return isinstance(first, dict) and "size_bytes" in first


def misfiled(path: Path | str, text: str, expected: str, *also: str) -> InputFileError | None:
    """``PATH: this is collbench result rows (fit, report and compare read them), not a collbench profile``
    where ``text`` is another kind of file than ``expected`` (a ``*_KIND`` name, or any phrase); None where
    it is not recognised, or is the kind expected or one of ``also`` (then the reader's own error says what
    is wrong inside it)."""
    found = kind_of_text(text)
    if found is None or found[0] == expected or found[0] in also:
        return None
    return InputFileError(str(path), f"this is {found[0]} ({found[1]}), not {expected}")


_RECORDS = (PROFILE_KIND, RESULTS_KIND, TOPOLOGY_KIND)
"""What collbench writes as a record of a machine or a measurement: never replaced by another kind of file."""


def refuse_replacing_record(path: Path, writing: str) -> None:
    """InputFileError when ``path`` holds a profile, result rows or a topology and ``writing`` (what the
    command writes, a ``*_KIND`` name or any phrase) is another kind: an export, a page or a topology
    given the name of a profile replaced hours of measurement without a word. Same-kind replacement
    (a topology re-discovered over the old one) is the command's to decide."""
    try:
        # is_file() raises what it does not take for absence: a name past 255 bytes (ENAMETOOLONG).
        if not path.is_file():
            return
        with path.open("rb") as f:
            head = decode_text(f.read(20000), errors="replace")
    except OSError:
        return  # check_writable says what is wrong with the place
    found = kind_of_text(head)
    if found is not None and found[0] in _RECORDS and found[0] != writing:
        raise InputFileError(
            str(path), f"holds {found[0]}; writing {writing} there would replace it: give another file name"
        )


def holds_content(path: Path) -> bool:
    """Whether ``path`` is a regular file (or a link to one) with something in it: what a command's output
    replaces only when told to (:func:`refuse_replacing`). An empty file is nothing to lose."""
    try:
        return path.is_file() and path.stat().st_size > 0
    except OSError:
        return False  # check_writable says what is wrong with the place


def replacing_refused(held: Sequence[str], elsewhere: str, *, or_else: str = "") -> ConfigError:
    """The one refusal of outputs that hold something, each of ``held`` saying one (``PATH is not empty``,
    ``PATH holds a profile``): ``...; pass --overwrite to replace it, [or_else, ]or {elsewhere}``, where
    ``elsewhere`` names the option that writes elsewhere (``-O FILE to write elsewhere``)."""
    them = "them" if len(held) > 1 else "it"
    other = f"{or_else}, " if or_else else ""
    return ConfigError(f"{' and '.join(held)}; pass --overwrite to replace {them}, {other}or {elsewhere}")


def refuse_replacing(path: Path, overwrite: bool, *, option: str = "-O", held: str = "is not empty") -> None:
    """ConfigError, before any work, when ``path`` holds something (:func:`holds_content`) and not
    ``overwrite``: ``PATH is not empty; pass --overwrite to replace it, or -O FILE to write elsewhere``, the
    contract of every command's output (a second run into the same name replaced what the first wrote,
    hours of measurement among them, without a word). ``option`` is the one that names the file (``--plot``);
    ``held`` says what is there."""
    if not overwrite and holds_content(path):
        raise replacing_refused([f"{path} {held}"], f"{option} FILE to write elsewhere")
