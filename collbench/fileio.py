"""Reading and writing the files users name, with one clear error instead of a traceback.

Every reader and writer of a user-named path goes through these, so a missing file, a directory, an
unreadable or undecodable file, or an unwritable place all become :class:`InputFileError` naming the
path and the problem. What is inside is read elsewhere: YAML and JSON by :mod:`collbench.yamljson`,
what kind of file a text is (and whether a command may write over it) by :mod:`collbench.filekinds`.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

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


def csrc_dir() -> Path:
    """The shipped C and CUDA sources (``collbench/csrc``, a link to the repository's ``csrc/``)."""
    return Path(__file__).resolve().parent / "csrc"
