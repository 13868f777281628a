"""The progress display of sweep, tune and tune --check: counts and times on one line, the point now
measured on the next."""

from __future__ import annotations

from collections.abc import Iterable

from rich.console import Console, RenderableType
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

# Wide enough to see it move, narrow enough that the label, "1230/3470", "0:00:09 elapsed, 0:00:20
# left" and a tune's stage ("16 ranks: sweep") fit beside it in 80 columns.
_BAR_WIDTH = 24


class _TimeLeftColumn(TimeRemainingColumn):
    """Rich's time left, which is blank while the total is unknown (ranks starting): "0:00:03 elapsed,
    left" read as a typo; it shows the same "-:--:--" as before the first estimate."""

    def render(self, task: Task) -> Text:
        text = super().render(task)
        return text if text.plain else Text("-:--:--", style=text.style)


class _PointProgress(Progress):
    """Rich's progress, with each task's ``now`` field (the point being measured) on a line of its own.

    On one line, at 80 columns, "all-reduce recursive-doubling 256 KiB out-of-place" beside the bar
    and the times left too little room, and Rich shrank every column alike: "1…" for "123/347", the
    times cut to "0:0…". Below the counts the point has the whole width.
    """

    def stop(self) -> None:
        # Rich ends a display off a terminal (a file, a pipe, CI's log) with an empty line, after the
        # last frame it prints there; a transient display prints no frame there, so the empty line stood
        # alone at the top of stderr, above the notes or the error line.
        if self.disable or self.console.is_interactive or not self.live.transient:
            super().stop()
        else:
            self.live.stop()

    def get_renderables(self) -> Iterable[RenderableType]:
        yield self.make_tasks_table(self.tasks)
        for task in self.tasks:
            now = task.fields.get("now")
            if task.visible and now:
                yield Text(f"  {now}", no_wrap=True, overflow="ellipsis")


def point_progress(
    target: Console, label: str, *, counts: bool = True, remaining: bool = False, disable: bool = False
) -> Progress:
    """A transient progress display on ``target``: ``label`` (a format of the task, e.g.
    ``{task.description}``), a bar, points done of all (``counts``), the time elapsed and, with
    ``remaining``, the time left; the task's ``now`` field on the line below."""
    columns: list[ProgressColumn] = [TextColumn(f"[bold]{label}"), BarColumn(bar_width=_BAR_WIDTH)]
    if counts:
        columns.append(MofNCompleteColumn())
    columns.append(TimeElapsedColumn())
    if remaining:
        # Reads "0:00:09 elapsed, 0:00:20 left": each time labelled after it, as one would say it.
        columns += [TextColumn("elapsed,"), _TimeLeftColumn(), TextColumn("left")]
    return _PointProgress(*columns, console=target, transient=True, disable=disable)
