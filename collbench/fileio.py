"""Reading and writing the files users name, with one clear error instead of a traceback.

Every reader and writer of a user-named path goes through these, so a missing file, a directory, an
unreadable or undecodable file, or an unwritable place all become :class:`InputFileError` naming the
path and the problem.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import re
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

from collbench.errors import InputFileError
from collbench.units import MAX_INT_DIGITS

MAX_TEXT_FILE_BYTES = 64 * 1024 * 1024
"""The most bytes collbench reads from a user's text file (a profile, a topology, a fit, a log).

Real ones are kilobytes to a few megabytes; the cap is there so that a device that never ends
(``/dev/zero``) or a file of junk fails in one line instead of exhausting memory."""


def _kind_of(mode: int) -> str:
    """What a file that is not a regular file is, in the words ``ls -l`` and ``stat`` use."""
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    return "not a regular file"


def read_text_file(path: Path, expected: str, *, max_bytes: int = MAX_TEXT_FILE_BYTES) -> str:
    """The text of ``path``; InputFileError saying what was ``expected`` when it cannot be read.

    Only a regular file is read: a FIFO would block the open until a writer came, and a device such
    as ``/dev/zero`` never ends. At most ``max_bytes`` (:data:`MAX_TEXT_FILE_BYTES`) are read.
    """
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise InputFileError(str(path), f"no such file (expected {expected})") from None
    except OSError as exc:
        raise InputFileError(str(path), f"cannot read: {exc.strerror or exc}") from None
    if stat.S_ISDIR(mode):
        raise InputFileError(str(path), f"is a directory (expected {expected})")
    if not stat.S_ISREG(mode):
        raise InputFileError(str(path), f"is {_kind_of(mode)}, not a regular file (expected {expected})")
    try:
        # O_NONBLOCK: should the path have become a FIFO since the stat, the open does not wait for a writer.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise InputFileError(str(path), f"no such file (expected {expected})") from None
    except OSError as exc:
        raise InputFileError(str(path), f"cannot read: {exc.strerror or exc}") from None
    with os.fdopen(fd, "rb") as f:
        try:
            opened = os.fstat(f.fileno()).st_mode
            if not stat.S_ISREG(opened):
                raise InputFileError(str(path), f"is {_kind_of(opened)}, not a regular file (expected {expected})")
            # In pieces: one read of the cap would allocate the whole cap for a file of a few bytes.
            chunks: list[bytes] = []
            size = 0
            while size <= max_bytes and (chunk := f.read(1 << 20)):
                chunks.append(chunk)
                size += len(chunk)
            data = b"".join(chunks)
        except OSError as exc:
            raise InputFileError(str(path), f"cannot read: {exc.strerror or exc}") from None
    if len(data) > max_bytes:
        raise InputFileError(
            str(path), f"larger than {max_bytes // (1024 * 1024)} MiB, the most collbench reads (expected {expected})"
        )
    try:
        return decode_text(data)
    except UnicodeDecodeError as exc:
        raise InputFileError(str(path), f"not text (byte {exc.start} is not UTF-8; expected {expected})") from None


def read_stdin_text(expected: str, *, max_bytes: int = MAX_TEXT_FILE_BYTES) -> str:
    """The text on standard input (``-`` for a file), held to ``max_bytes`` as a file is and decoded as
    one (:func:`decode_text`): ``cat /dev/zero | ... -`` was read without end, and a UTF-16 paste was
    decoded by the locale into text no parser knew. Raises InputFileError naming ``<stdin>``."""
    import sys

    data = sys.stdin.buffer.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise InputFileError(
            "<stdin>", f"larger than {max_bytes // (1024 * 1024)} MiB, the most collbench reads (expected {expected})"
        )
    try:
        return decode_text(data)
    except UnicodeDecodeError as exc:
        raise InputFileError("<stdin>", f"not text (byte {exc.start} is not UTF-8; expected {expected})") from None


_UTF16_BOMS = {b"\xff\xfe": "utf-16-le", b"\xfe\xff": "utf-16-be"}


def decode_text(data: bytes, errors: str = "strict") -> str:
    """``data`` as text: UTF-8, less a byte-order mark; UTF-16 where it opens with UTF-16's mark.

    Windows tools write both (Notepad's UTF-8 with a BOM; PowerShell's ``>`` and ``Out-File`` UTF-16), and
    a log saved that way is the same log: read as UTF-8 it was "not text" or, sniffed, "no nccl-tests
    output in it". Raises UnicodeDecodeError (``errors="strict"``) for bytes that are neither.
    """
    encoding = _UTF16_BOMS.get(data[:2])
    if encoding is not None:
        with contextlib.suppress(UnicodeDecodeError):
            text = data[2:].decode(encoding, errors)
            # Almost any even run of bytes decodes as UTF-16: binary that happens to open with the mark
            # reads as CJK, not as the mostly-ASCII text of every file collbench takes. That is no text.
            if errors != "strict" or sum(c.isascii() for c in text) * 2 >= len(text):
                return text
    return data.decode("utf-8", errors).removeprefix("\ufeff")


_LONG_NUMBER = re.compile(rf"(?<![0-9A-Za-z.])\d{{{MAX_INT_DIGITS + 1},}}(?![0-9A-Za-z])")


def check_number_lengths(text: str, path: Path | str) -> None:
    """InputFileError naming the line of the first whole number longer than MAX_INT_DIGITS digits.

    A log or a paste is read by regular expressions that hand their digits to ``int()``, which
    refuses more than 4,300 of them with a ValueError (and takes quadratic time on the way); no
    count, size or id in such a file has more than 20. Runs inside hex words and fractions are not
    numbers and are left to the parser.
    """
    found = _LONG_NUMBER.search(text)
    if found is not None:
        digits = found.end() - found.start()
        line = text.count("\n", 0, found.start()) + 1
        raise InputFileError(
            str(path), f"a number of {digits:,} digits; numbers here have at most {MAX_INT_DIGITS}", line=line
        )


def check_path_fits(path: Path) -> None:
    """InputFileError for a path the file system cannot hold: a name past NAME_MAX (255 bytes on Linux
    file systems) or a path past PATH_MAX; shown shortened, so the message stays one readable line."""
    try:
        name_max = os.pathconf("/", "PC_NAME_MAX")
        path_max = os.pathconf("/", "PC_PATH_MAX")
    except (OSError, ValueError):
        name_max, path_max = 255, 4096
    shown = str(path) if len(str(path)) <= 80 else f"{str(path)[:40]}...{str(path)[-20:]}"
    longest = max((len(os.fsencode(part)) for part in path.parts), default=0)
    # The lock (.NAME.lock) and the temporary file (.NAME.XXXXXXXX.tmp) beside it add up to 15 bytes.
    if longest + 15 > name_max:
        raise InputFileError(
            shown, f"a name in this path is {longest} bytes long; file names here take at most {name_max - 15}"
        )
    if len(os.fsencode(os.path.abspath(path))) + 15 >= path_max:
        raise InputFileError(shown, f"the path is longer than this system takes ({path_max} bytes)")


def check_writable(path: Path) -> None:
    """Raise InputFileError now, before any work, when ``path`` could not be written later.

    Only a regular file (or a new one) is ever written: the rename that makes a written file appear
    would replace a device, a FIFO or a socket by a regular file, so those are refused, as is ``-``
    (a file named ``-`` is never what was meant) and a symlink to nothing (the rename would replace
    the link, not create what it points to).
    """
    if str(path) == "-":
        raise InputFileError(
            "-", "is not a file name collbench writes to: leave -O out to print to stdout where the command can"
        )
    check_path_fits(path)
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.exists():
        # Made silently before, a typo's folders appeared anywhere (as root: at the filesystem's root).
        missing = parent
        while not missing.parent.exists() and missing != missing.parent:
            missing = missing.parent
        if not missing.parent.is_dir():
            raise InputFileError(str(path), f"cannot write here ({missing.parent} is not a directory)")
        raise InputFileError(str(path), f"the folder {missing} does not exist; create it first, or write elsewhere")
    if path.is_symlink() and not path.exists():
        raise InputFileError(
            str(path), f"is a symlink to {os.readlink(path)}, which does not exist; give the target itself"
        )
    try:
        mode: int | None = os.stat(path).st_mode
    except OSError:
        mode = None
    if mode is not None and stat.S_ISDIR(mode):
        raise InputFileError(str(path), "is a directory; give a file name")
    if mode is not None and not stat.S_ISREG(mode):
        raise InputFileError(str(path), f"is {_kind_of(mode)}, not a regular file; collbench writes only regular files")
    existing = parent
    if not existing.is_dir():
        raise InputFileError(str(path), f"cannot write here ({existing} is not a directory)")
    # Permission bits say nothing for root or for pseudo file systems (/proc): try a real file.
    try:
        with tempfile.NamedTemporaryFile(dir=existing, prefix=".collbench-probe-"):
            pass
    except FileNotFoundError:
        # Creating a file in a directory that exists fails so only on a pseudo file system.
        raise InputFileError(
            str(path), f"cannot write here: {existing} refuses new files (a kernel file system such as /proc or /sys)"
        ) from None
    except OSError as exc:
        raise InputFileError(str(path), f"cannot write here ({existing}: {exc.strerror or exc})") from None
    if path.exists():
        try:
            with path.open("a", encoding="utf-8"):  # opened for appending: not changed
                pass
        except OSError as exc:
            raise InputFileError(str(path), f"cannot write: {exc.strerror or exc}") from None


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and a rename: never half a file.

    Creates missing parent directories. Raises InputFileError when the place cannot be written.
    """
    with atomic_output(path) as f:
        # A file name that is not UTF-8 (its bytes kept as surrogates) is written as error lines show it
        # (\udcff), not a UnicodeEncodeError after the work is done: the report names its inputs.
        f.write(text.encode("utf-8", errors="backslashreplace"))


@contextlib.contextmanager
def atomic_output(path: Path) -> Iterator[BinaryIO]:
    """A binary file that becomes ``path`` when the block ends without an exception, or vanishes.

    The temporary file is made by ``tempfile.mkstemp`` in the target's directory: an unpredictable
    name opened with O_EXCL, so a symlink planted under a name collbench would use is never followed
    (a fixed ``NAME.tmp`` was). It is flushed to disk before the rename, so a crash leaves the old
    file or the new one. The new file gets the old one's permissions, or the umask's. Creates
    missing parent directories; raises InputFileError when the place cannot be written.
    """
    check_writable(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise InputFileError(str(path), f"cannot write: {exc.strerror or exc}") from None
    tmp = Path(tmp_name)
    try:
        os.fchmod(fd, _new_file_mode(path))
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise InputFileError(str(path), f"cannot write: {exc.strerror or exc}") from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _new_file_mode(path: Path) -> int:
    """The mode a rewritten file keeps: the old file's, or what ``open`` would give a new one."""
    try:
        return stat.S_IMODE(path.stat().st_mode)
    except OSError:
        mask = os.umask(0o022)  # reading the umask means setting it: put it back at once
        os.umask(mask)
        return 0o666 & ~mask


MAX_YAML_NODES = 1_000_000
"""The most nodes a user's YAML's aliases may add once expanded, beyond the nodes the text itself holds.

A few KB of nested aliases (a "billion laughs") stand for billions of values: every later walk over
them (a fingerprint, a copy, a dump) then takes minutes and gigabytes. What the text holds written
out is bounded by :data:`MAX_TEXT_FILE_BYTES` instead: a probe's topology of n ranks holds about
7 n^2 nodes (n^2 / 2 links), 1.8 million at 512 ranks, and counting those against this bound refused
the file ``discover --probe`` had written.
"""


MAX_YAML_DEPTH = 100
"""The deepest a user's YAML may nest (collections in collections). Topologies and profiles nest fewer
than ten; PyYAML's own loader runs out of stack a few hundred deep, libyaml's at 1,000, and a
document only as deep as either allows would still overflow later walks over it."""


def parse_yaml(text: str, path: Path, *, libyaml: bool = True) -> Any:
    """YAML ``text`` read from ``path``; InputFileError with the problem and its line, on one line.

    PyYAML's own message spans several lines (the problem, then a context excerpt). Only plain data
    is built (the safe loader), and a document whose aliases expand past :data:`MAX_YAML_NODES`, an
    alias to itself, or nesting past :data:`MAX_YAML_DEPTH` (or too deep for the parser) is refused
    before anything is built.

    The text is parsed by libyaml (``yaml.CSafeLoader``) where PyYAML was built with it: PyYAML's
    pure-Python parser takes about 30 s for a 1 MB topology. Whatever libyaml finds wrong is parsed
    again by PyYAML's own ``SafeLoader``, so the result, or the error and its line, is the same with
    or without libyaml. ``libyaml=False`` uses PyYAML's loader alone.
    """
    import yaml

    fast = getattr(yaml, "CSafeLoader", None) if libyaml else None
    if fast is not None:
        try:
            return _load_yaml(fast, text, path)
        except (yaml.YAMLError, RecursionError, ValueError):
            # libyaml's messages differ from PyYAML's (and it may refuse what PyYAML reads): PyYAML decides.
            pass
    try:
        return _load_yaml(yaml.SafeLoader, text, path)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        # A ReaderError (a control character) has a reason, not a problem; either may span lines.
        problem = getattr(exc, "problem", None) or getattr(exc, "reason", None) or str(exc)
        raise InputFileError(str(path), f"not YAML: {' '.join(str(problem).split())}", line=line) from None
    except RecursionError:
        raise InputFileError(str(path), _TOO_DEEP) from None


_TOO_DEEP = "not YAML collbench reads: nested too deeply"


def _load_yaml(loader_class: Any, text: str, path: Path) -> Any:
    """The document in ``text`` built by ``loader_class`` once its node graph passed _check_expansion.

    Python's cyclic collector is paused meanwhile: the nodes and values made are all kept, and each of its
    passes walked them again (half of a 2.5 MiB topology's load). It only defers: nothing leaks."""
    loader, collecting = None, gc.isenabled()
    gc.disable()
    try:
        # The loader's constructor already reads the text (and refuses control characters).
        loader = loader_class(text)
        node = loader.get_single_node()
        if node is None:
            return None
        _check_expansion(node, path)
        return loader.construct_document(node)
    finally:
        if collecting:
            gc.enable()
        if loader is not None:
            loader.dispose()


def _check_expansion(root: Any, path: Path) -> None:
    """Raise InputFileError when the node graph under ``root`` expands past MAX_YAML_NODES, nests past
    MAX_YAML_DEPTH, or holds an alias to itself.

    Aliases make the graph a DAG (or a cycle); each collection's expanded size and depth are computed once,
    without recursion (a scalar is counted and checked where met), in time linear in the text. A node's
    expanded size is held against the bound plus the nodes met so far: only what aliases add counts.
    """
    if root.id == "scalar":
        return _check_scalar(root, path)
    sizes: dict[int, int] = {}  # of collections: a scalar is 1 node, 0 deep, checked where it is met
    depths: dict[int, int] = {}
    on_path: set[int] = set()
    met = 0  # nodes met so far
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if children_done:
            total, depth = 1, 1
            for child in _children(node):
                if child.id == "scalar":
                    total += 1
                else:
                    total += sizes[id(child)]
                    depth = max(depth, 1 + depths[id(child)])
            met += 1
            if total > MAX_YAML_NODES + met or depth > MAX_YAML_DEPTH:
                if depth > MAX_YAML_DEPTH:
                    # No line, as when the parser itself runs out of stack: the same words either way.
                    raise InputFileError(str(path), _TOO_DEEP)
                mark = node.start_mark
                raise InputFileError(
                    str(path),
                    f"YAML aliases expand to more than {MAX_YAML_NODES:,} values; write the values out",
                    line=mark.line + 1 if mark is not None else None,
                )
            sizes[key] = total
            depths[key] = depth
            on_path.discard(key)
            continue
        if key in sizes:
            continue
        if node.id == "mapping":
            _check_unique_keys(node, path)
        on_path.add(key)
        stack.append((node, True))
        for child in _children(node):
            if child.id == "scalar":
                _check_scalar(child, path)
                met += 1
            elif id(child) in on_path:
                raise InputFileError(str(path), "a YAML alias refers to itself", line=child.start_mark.line + 1)
            elif id(child) not in sizes:
                stack.append((child, False))


_INT_TAG = "tag:yaml.org,2002:int"


def _check_scalar(node: Any, path: Path) -> None:
    """An integer of more than MAX_INT_DIGITS digits is refused before PyYAML's ``int()`` sees it."""
    digits = sum(c.isdigit() for c in node.value) if node.tag == _INT_TAG else 0
    if digits > MAX_INT_DIGITS:
        problem = f"an integer of {digits:,} digits; numbers here have at most {MAX_INT_DIGITS}"
        raise InputFileError(str(path), problem, line=node.start_mark.line + 1)


def _check_unique_keys(node: Any, path: Path) -> None:
    """A key given twice in one mapping is refused: YAML says keys are unique, and PyYAML would keep the
    last silently, so what a reader sees first is not what collbench uses."""
    seen: set[tuple[str, str]] = set()
    for key_node, _ in node.value:
        if not hasattr(key_node, "value") or not isinstance(key_node.value, str):
            continue
        key = (key_node.tag, key_node.value)
        if key in seen:
            raise InputFileError(
                str(path),
                f"key {key_node.value[:60]!r} is given twice in one mapping",
                line=key_node.start_mark.line + 1,
            )
        seen.add(key)


def _children(node: Any) -> list[Any]:
    """A mapping node's keys and values, or a sequence node's items (only collections are asked)."""
    return [part for pair in node.value for part in pair] if node.id == "mapping" else list(node.value)


class _JSONProblem(ValueError):
    """A number or a key json.loads would take, but collbench does not."""


def json_int(text: str) -> int:
    """``json.loads``'s ``parse_int``: an integer of sane length (checked before ``int()``)."""
    digits = len(text) - text.startswith("-")
    if digits > MAX_INT_DIGITS:
        raise _JSONProblem(f"an integer of {digits:,} digits; numbers here have at most {MAX_INT_DIGITS}")
    return int(text)


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        twice = next(k for k, _ in pairs if k in seen or seen.add(k))  # type: ignore[func-returns-value]
        raise _JSONProblem(f"key {twice[:60]!r} is given twice in one object")
    return out


def parse_json(text: str, path: Path) -> Any:
    """JSON ``text`` read from ``path``; InputFileError with the problem and its line."""
    try:
        # A BOM is no JSON, but Windows editors write one: json.loads said "Unexpected UTF-8 BOM".
        return json.loads(text.removeprefix("\ufeff"), parse_int=json_int, object_pairs_hook=_unique_keys)
    except json.JSONDecodeError as exc:
        raise InputFileError(str(path), f"not JSON: {exc.msg}", line=exc.lineno) from None
    except _JSONProblem as exc:
        # json.loads says nowhere where its hook refused: a run of too many digits is found again.
        found = re.search(rf"\d{{{MAX_INT_DIGITS + 1},}}", text) if "digits" in str(exc) else None
        line = text.count("\n", 0, found.start()) + 1 if found else None
        raise InputFileError(str(path), str(exc), line=line) from None
    except RecursionError:
        raise InputFileError(str(path), "not JSON collbench reads: nested too deeply") from None


def csrc_dir() -> Path:
    """The shipped C and CUDA sources (``collbench/csrc``, a link to the repository's ``csrc/``)."""
    return Path(__file__).resolve().parent / "csrc"


# -- what a file of the wrong kind is ------------------------------------------------------------------

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
