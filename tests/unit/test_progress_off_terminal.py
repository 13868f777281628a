"""The progress display of sweep and tune (cli/progress.point_progress) leaves nothing behind off a
terminal: Rich ended it with an empty line there, which stood alone at the top of stderr above the
notes or the one error line ("\\nerror: collbench-sweep.jsonl holds 12 measured rows; ...")."""

from __future__ import annotations

from io import StringIO

from rich.console import Console

from collbench.cli.progress import point_progress


def _run(console: Console) -> str:
    progress = point_progress(console, "sweep", remaining=True)
    task = progress.add_task("sweep", total=None, now="starting ranks")
    with progress:
        progress.update(task, total=4, completed=2, now="all-reduce ring 1 KiB")
    console.print("error: the stream holds rows")
    out = console.file.getvalue()  # type: ignore[attr-defined]
    assert isinstance(out, str)
    return out


def test_off_a_terminal_only_what_is_printed_after() -> None:
    console = Console(file=StringIO(), width=80, color_system=None, force_terminal=False)
    assert _run(console) == "error: the stream holds rows\n"


def test_on_a_terminal_the_display_is_drawn_and_erased() -> None:
    # On a terminal Rich draws the bar and erases it (transient): the error follows the erasure.
    console = Console(file=StringIO(), width=80, color_system=None, force_terminal=True, force_interactive=True)
    out = _run(console)
    assert "sweep" in out and out.endswith("error: the stream holds rows\n")
