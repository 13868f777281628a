"""What a sweep does with its files around the ranks: lock them, repair the stream, write --output.

``run_sweep`` calls :func:`sweep_files` around the launch. The stream (JSONL) is the record of what was
measured; ``--output`` is derived from it at the end, read back from disk, so the output never holds
a row the stream does not (and a row the ranks reported but the disk did not keep is an error).

A stream that already holds rows is never emptied unless asked (``--overwrite``); ``--resume``
continues it. That is decided once the writer's lock is held: checked before, a run that finished
in between would still lose its rows to this one.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from collbench.errors import CollbenchError, ConfigError, InputFileError, RankError
from collbench.filekinds import replacing_refused
from collbench.results.io import read_jsonl, write_rows
from collbench.results.journal import (
    count_lines,
    empty_file,
    exclusive_writer,
    first_line_kind,
    refuse_symlink,
    set_torn_tail_aside,
)
from collbench.results.row import ResultRow


def writes_files() -> bool:
    """Whether this process writes the sweep's files: always locally; under a launcher, rank 0 only."""
    from collbench.runtime.launch.ranks import job_rank

    return job_rank() == 0


@contextlib.contextmanager
def sweep_files(
    stream: Path, output: Path | None, resume: bool, note: Callable[[str], None], *, overwrite: bool = False
) -> Iterator[None]:
    """Hold the writer's lock of ``stream`` and ``output`` while the block runs.

    Without ``resume`` the stream is emptied for the new rows, once the lock is held; a stream that
    holds rows is refused (ConfigError naming ``--resume`` and ``--overwrite``) unless ``overwrite``.
    On ``resume`` a torn last line of the stream is set aside first (and said in a note). A symlink
    at the stream is refused (InputFileError). A failure in the block (a rank dying, a full disk)
    is re-raised saying where the measured rows are.
    """
    if not writes_files():
        yield
        return
    refuse_symlink(stream)  # before the lock, which would be made beside the link's target
    with exclusive_writer([stream] + ([output] if output is not None else [])):
        if resume:
            said = set_torn_tail_aside(stream)
            if said:
                note(said)
        else:
            start_stream(stream, overwrite)
        made_here = not resume and stream.stat().st_size == 0
        try:
            yield
        except ConfigError:
            # Refused before a row (nothing to measure, say): the empty stream this run made goes with it.
            if made_here and stream.exists() and stream.stat().st_size == 0:
                stream.unlink()
            raise
        except RankError as exc:
            raise RankError(exc.rank, exc.host, exc.doing, exc.problem + kept_rows_note(stream)) from None
        except InputFileError as exc:
            raise InputFileError(exc.path, exc.problem + kept_rows_note(stream), line=exc.line) from None


def start_stream(stream: Path, overwrite: bool) -> None:
    """Empty ``stream`` for a new sweep; ConfigError when it holds rows and ``overwrite`` is not set.

    Measured rows are never dropped silently, the default ``collbench-sweep.jsonl`` included: a
    second sweep run from the same folder would otherwise replace the first one's rows. A file whose
    first line is no JSON row (a profile, a log) is refused even with ``overwrite``.
    """
    refuse_symlink(stream)
    held = count_lines(stream)
    content = held or (stream.exists() and stream.stat().st_size)
    if content and first_line_kind(stream) == "other":
        # A profile, log, CSV or fits given as --stream: its lines are no rows, and --overwrite (which the
        # user gives believing it replaces rows) would empty a file this run never wrote.
        raise ConfigError(
            f"{stream} is not a results stream (its first line is not a results row: a profile, log, "
            "CSV or fits?); --overwrite empties streams only: give --stream a new file"
        )
    if content and not overwrite:
        what = f"holds {held} measured {'row' if held == 1 else 'rows'}" if held else "is not empty"
        elsewhere = "--stream FILE to stream elsewhere"
        raise replacing_refused([f"{stream} {what}"], elsewhere, or_else="--resume to continue it")
    stream.parent.mkdir(parents=True, exist_ok=True)
    empty_file(stream)


def kept_rows_note(stream: Path) -> str:
    """``; the N rows measured so far are in STREAM`` (or "" when the stream holds none)."""
    if not stream.is_file() or stream.stat().st_size == 0:
        return ""
    try:
        count = sum(1 for _ in read_jsonl(stream))
    except (CollbenchError, OSError):
        return f"; what was measured is in {stream}"
    if count == 1:  # 'the 1 rows measured so far are in' after a stop at the first row
        return f"; the 1 row measured so far is in {stream}"
    return f"; the {count} rows measured so far are in {stream}" if count else ""


def write_output_from_stream(output: Path, stream: Path, rows: list[ResultRow]) -> None:
    """Write ``rows`` to ``output`` as the stream holds them (atomically).

    Raises InputFileError when a row is not in the stream (the disk lost it), or when the output
    cannot be written.
    """
    on_disk: dict[tuple[Any, ...], ResultRow] = {}
    for row in read_jsonl(stream):
        on_disk[row.key] = row
    missing = [r for r in rows if r.key not in on_disk]
    if missing:
        raise InputFileError(
            str(stream),
            f"{len(missing)} of {len(rows)} measured rows are not in the stream file (was it changed "
            f"during the run?); {output} was not written",
        )
    # Checked before the ranks started, but the place can change meanwhile: sweep_files then says
    # where the measured rows are.
    write_rows(output, [on_disk[r.key] for r in rows])


def resumed_rows(path: Path) -> list[ResultRow]:
    """Rows already in a stream file (none when it does not exist)."""
    return list(read_jsonl(path)) if path.exists() else []
