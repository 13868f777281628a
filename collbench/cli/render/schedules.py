"""Rich renderings of schedules: the `explain` whiteboard and its totals."""

from __future__ import annotations

from typing import Protocol

from rich.console import Console
from rich.text import Text

from collbench.cli.console import whole_lines
from collbench.cli.render.styles import Wrapped
from collbench.schedules.analysis import ScheduleStats
from collbench.schedules.ir import Schedule
from collbench.schedules.whiteboard import BoardStep, Whiteboard, move_text, rank_letter
from collbench.units import counted, format_bytes


class Estimate(Protocol):
    """What the totals show of an algorithm's closed-form cost (``collbench.cli.explain.Estimate``):
    a protocol here, so that rendering does not import the command that calls it."""

    @property
    def steps(self) -> float: ...

    @property
    def port_bytes(self) -> float: ...

    @property
    def time_us(self) -> float: ...


def _grid(board: Whiteboard, holdings: tuple[tuple[str, ...], ...], width: int) -> list[Text]:
    """Rows of ranks, columns of pieces, aligned by hand: a Rich table would squeeze or wrap the cells,
    and a whiteboard is only readable when every cell is whole. Wider than ``width``, the pieces are
    shown in blocks of columns, each repeating the rank column."""
    heads = ["rank"] + [f"{k} [{a}]" if z - a == 1 else f"{k} [{a}:{z}]" for k, (a, z) in enumerate(board.pieces)]
    rows = []
    for r, row in enumerate(holdings):
        mark = "*" if board.op.spec.rooted and r == board.root else ""
        rows.append([rank_letter(r) + mark, *row])
    widths = [max(len(cells[i]) for cells in [heads, *rows]) for i in range(len(heads))]
    blocks: list[list[int]] = [[]]
    used = widths[0]
    for i in range(1, len(heads)):
        if blocks[-1] and used + 2 + widths[i] > width:
            blocks.append([])
            used = widths[0]
        blocks[-1].append(i)
        used += 2 + widths[i]
    lines: list[Text] = []
    for block in blocks:
        lines.append(Text("  ".join(heads[i].ljust(widths[i]) for i in [0, *block]).rstrip(), style="dim"))
        for cells in rows:
            line = Text(cells[0].ljust(widths[0]), style="bold")
            for i in block:
                line.append("  " + cells[i].ljust(widths[i]))
            line.rstrip()
            lines.append(line)
    return lines


def _print_lines(console: Console, lines: list[Text]) -> None:
    for line in lines:
        console.print(line, soft_wrap=True)


def _moves(step: BoardStep, width: int) -> list[Text]:
    """The step's moves, as many to a line as fit ``width``: a move (``a→b 2 (+)``) is never split."""
    lines = [Text("  ")]
    for move in step.moves:
        text = Text(f"{rank_letter(move.src)}→{rank_letter(move.dst)} ", style="cyan")
        text.append(move_text(move))
        text.append(" (+)" if move.reduce else "", style="yellow")
        line = lines[-1]
        if line.plain.strip() and line.cell_len + 3 + text.cell_len > width:
            lines.append(Text("  "))
            line = lines[-1]
        if line.plain.strip():
            line.append("   ")
        line.append_text(text)
    return lines


def render_board(console: Console, board: Whiteboard) -> None:
    """Every step: the moves (``a→b 2 (+)``: a sends piece 2 to b, which adds it) and what each rank holds."""
    console.print(Text("start", style="bold"))
    _print_lines(console, _grid(board, board.initial, console.width))
    for step in board.steps:
        console.print()
        label = ", ".join(step.labels)
        console.print(Text.assemble((f"step {step.index}", "bold"), f" · {label}" if label else ""))
        _print_lines(console, _moves(step, console.width))
        _print_lines(console, _grid(board, step.holdings, console.width))


def render_explain(
    console: Console,
    *,
    spec_summary: str,
    schedule: Schedule,
    board: Whiteboard | None,
    stats: ScheduleStats,
    direct_stats: ScheduleStats | None,
    size_bytes: int,
    dtype: str,
    alpha_us: float,
    link_gbps: float,
    crossover: tuple[int, bool] | None,
    limits: tuple[int, int],
    estimates: tuple[Estimate, Estimate | None],
    baseline: str = "direct",
) -> None:
    """The whole ``explain`` page: header, whiteboard, totals, comparison with ``baseline`` (``direct``,
    or ``linear`` for the block ops)."""
    n = schedule.world_size
    letters = " ".join(rank_letter(r) for r in range(min(n, 8))) + (f", {n - 8} more" if n > 8 else "")
    head = Text.assemble(
        (f"{schedule.algo} {schedule.op.value}", "bold"),
        # 'drawn': the whiteboard's --count, not the --size its totals are for ('4 elements' under
        # --size 64M read as the message explained).
        f" · {counted(n, 'rank')} ({letters}) · {counted(schedule.count, 'element')} drawn",
    )
    if schedule.op.spec.rooted or schedule.algo == "direct":
        head.append(f" · root {rank_letter(schedule.root)}")
    params = ", ".join(f"{k} {v}" for k, v in schedule.params)
    if params:
        head.append(f" · {params}")
    console.print(head)
    console.print(Text(spec_summary, style="dim"))
    console.print()
    if board is None:
        console.print(
            Text(
                f"(no whiteboard beyond {limits[0]} ranks or {limits[1]} elements; use --ranks/--count to shrink it)",
                style="dim",
            )
        )
    else:
        console.print(Text(_legend(board), style="dim"), soft_wrap=whole_lines(console))
        console.print()
        render_board(console, board)
    console.print()
    totals = render_totals(
        stats, direct_stats, schedule, size_bytes, dtype, alpha_us, link_gbps, crossover, estimates, baseline
    )
    console.print(totals if whole_lines(console) else Wrapped(totals), soft_wrap=whole_lines(console))


def _legend(board: Whiteboard) -> str:
    """How to read the board, in the terms of its op."""
    spec = board.op.spec
    if not spec.payload:
        return (
            "The one column is the barrier's token: a0+b0 = a rank has heard from a and b (directly or "
            "through others); a→b 0 (+) = a tells b whom it has heard from. Done when every rank shows Σ0 "
            "(or every letter)."
        )
    text = "Columns are pieces of the buffer [elements]; "
    if spec.reduces:
        text += "a1+b1 = piece 1 of a plus piece 1 of b; Σ1 = piece 1 summed over every rank; "
    else:
        text += "b1 = b's piece 1; "
    text += "· = nothing yet; a→b 2 = a sends piece 2 to the same place in b"
    text += ", (+) b adds it." if spec.reduces else "."
    if spec.out_of_place:
        inputs = [k for k, (a, _) in enumerate(board.pieces) if a < board.count]
        what = f"pieces {inputs[0]}-{inputs[-1]} are" if len(inputs) > 1 else f"piece {inputs[0]} is" if inputs else ""
        text += (
            f" Input then output: {what} each rank's input, the rest its output; a→b 1→4 = a sends its "
            "piece 1 into b's piece 4; a→a = a copies locally (no network)."
        )
    if spec.blocks and spec.rooted:
        text += " * = the root."
    return text


def render_totals(
    stats: ScheduleStats,
    direct_stats: ScheduleStats | None,
    schedule: Schedule,
    size_bytes: int,
    dtype: str,
    alpha_us: float,
    link_gbps: float,
    crossover: tuple[int, bool] | None,
    estimates: tuple[Estimate, Estimate | None],
    baseline: str = "direct",
) -> Text:
    """The cost terms at ``size_bytes`` and, when given, the comparison with ``baseline``."""
    if not schedule.op.spec.payload:
        return _barrier_totals(stats, schedule, alpha_us, estimates[0])
    text = Text()
    text.append(f"totals for {format_bytes(size_bytes)} of {dtype}", style="bold")
    text.append(f" ({schedule.op.value}, {counted(schedule.world_size, 'rank')}):\n")
    text.append(f"  steps (latency term): {stats.steps}")
    if stats.max_steps_per_rank != stats.steps:
        text.append(f" on the critical path ({stats.max_steps_per_rank} at most per rank)")
    text.append("\n")
    sent = stats.bytes_sent_per_rank
    if len(sent) <= 8:
        per_rank = ", ".join(f"{rank_letter(r)} {format_bytes(b)}" for r, b in enumerate(sent))
        text.append(f"  bytes sent per rank: {per_rank}\n")
    port = max(range(len(sent)), key=lambda r: max(sent[r], stats.bytes_received_per_rank[r]), default=None)
    where = "" if port is None else f" (rank {rank_letter(port)})"
    text.append(
        f"  busiest rank over the whole schedule, sent or received: {format_bytes(stats.busiest_port_bytes)}{where}\n"
    )
    link = ""
    if stats.busiest_link:
        link = f" ({rank_letter(stats.busiest_link[0])}→{rank_letter(stats.busiest_link[1])})"
    text.append(f"  busiest link between two ranks: {format_bytes(stats.busiest_link_bytes)}{link}\n")
    text.append(f"  total sent: {format_bytes(stats.total_bytes)}")
    mine, theirs = estimates
    text.append(
        f"\n  closed-form cost (what fit and predict use): {counted(mine.steps, 'step')} and "
        f"{format_bytes(mine.port_bytes)} through the busiest port, step by step along the critical path"
    )
    text.append(
        f"\n  estimate at {alpha_us:g} us per step, one {link_gbps:g} GB/s port per rank, reductions free: "
        f"~{mine.time_us:.1f} us"
    )
    if direct_stats is None or theirs is None:
        return text
    text.append("\n")
    text.append(f"vs {baseline}", style="bold")
    what, via = _BASELINES.get(baseline, ("", "the busiest port"))
    if schedule.op.spec.ordered:
        what = " (the chain: each rank's prefix to the next, one after another)"  # linear's scan
    text.append(
        f"{what}: {counted(theirs.steps, 'step')}, {format_bytes(theirs.port_bytes)} through {via}, "
        f"~{theirs.time_us:.1f} us"
    )
    if crossover is not None:
        size, faster_above = crossover
        side = "above" if faster_above else "below"
        text.append(f"; {schedule.algo} is faster {side} ~{format_bytes(size)}")
    elif mine.time_us < theirs.time_us:
        text.append(f"; {schedule.algo} is faster at every size")
    elif theirs.time_us < mine.time_us:
        text.append(f"; {baseline} is faster at every size")
    text.append(".")
    return text


_BASELINES = {
    "direct": (" (all through one root)", "the root's port"),
    "linear": (" (every block straight to its rank, at once)", "the busiest port"),
}
"""How the totals name each baseline explain compares with, and the port its bytes go through."""


def _barrier_totals(stats: ScheduleStats, schedule: Schedule, alpha_us: float, mine: Estimate) -> Text:
    """A barrier's totals: rounds and the time they take; it moves no data, so no sizes or bytes."""
    text = Text()
    text.append("totals", style="bold")
    text.append(f" (barrier, {counted(schedule.world_size, 'rank')}; a barrier moves no data, so no sizes):\n")
    text.append(f"  rounds (latency term): {stats.steps}")
    if stats.max_steps_per_rank != stats.steps:
        text.append(f" on the critical path ({stats.max_steps_per_rank} at most per rank)")
    text.append(f"\n  closed-form cost (what fit and predict use): {counted(mine.steps, 'round')}")
    text.append(f"\n  estimate at {alpha_us:g} us per round: ~{mine.time_us:.1f} us")
    return text
