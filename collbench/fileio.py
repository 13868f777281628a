"""Reading and writing the files users name, with one clear error instead of a traceback.

Every reader and writer of a user-named path goes through these, so a missing file, a directory, an
unreadable or undecodable file, or an unwritable place all become :class:`InputFileError` naming the
path and the problem.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from collbench.errors import InputFileError


def read_text_file(path: Path, expected: str) -> str:
    """The text of ``path``; InputFileError saying what was ``expected`` when it cannot be read."""
    if path.is_dir():
        raise InputFileError(str(path), f"is a directory (expected {expected})")
    try:
        return path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise InputFileError(str(path), f"no such file (expected {expected})") from None
    except UnicodeDecodeError as exc:
        raise InputFileError(str(path), f"not text (byte {exc.start} is not UTF-8; expected {expected})") from None
    except OSError as exc:
        raise InputFileError(str(path), f"cannot read: {exc.strerror or exc}") from None


def check_writable(path: Path) -> None:
    """Raise InputFileError now, before any work, when ``path`` could not be written later."""
    if path.is_dir():
        raise InputFileError(str(path), "is a directory; give a file name")
    parent = path.parent if str(path.parent) else Path(".")
    existing = parent
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise InputFileError(str(path), f"cannot write here ({existing} is not a directory)")
    # Permission bits say nothing for root or for pseudo file systems (/proc): try a real file.
    try:
        with tempfile.NamedTemporaryFile(dir=existing, prefix=".collbench-probe-"):
            pass
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
    check_writable(path)
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise InputFileError(str(path), f"cannot write: {exc.strerror or exc}") from None


def parse_yaml(text: str, path: Path) -> Any:
    """YAML ``text`` read from ``path``; InputFileError with the problem and its line, on one line.

    PyYAML's own message spans several lines (the problem, then a context excerpt).
    """
    import yaml

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        raise InputFileError(str(path), f"not YAML: {getattr(exc, 'problem', None) or exc}", line=line) from None


def parse_json(text: str, path: Path) -> Any:
    """JSON ``text`` read from ``path``; InputFileError with the problem and its line."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputFileError(str(path), f"not JSON: {exc.msg}", line=exc.lineno) from None
