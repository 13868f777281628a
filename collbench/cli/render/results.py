"""Result rows as Rich tables (one per op and algorithm), nccl-tests' text layout, or JSON."""

from __future__ import annotations

import json
from collections.abc import Iterable

from rich import box
from rich.table import Table

from collbench.errors import ConfigError
from collbench.importers.nccl_tests_ops import DTYPE_NAMES
from collbench.results.noise import STALL_MARKER, row_stalled
from collbench.results.row import ResultRow
from collbench.schedules.ops import Op
from collbench.units import counted, parse_size, size_label

# nccl-tests prints its own name for a type (float, half, f8e4m3); int8 and the other integers are both.
NCCL_TYPE_NAMES = {ours: theirs for theirs, ours in DTYPE_NAMES.items()}

# nccl-tests' three header lines (its Reporter's printf formats, in str.format spelling).
_HEAD_MODES = (
    "# {:>10s}  {:>12s}  {:>8s}  {:>6s}  {:>6s}           out-of-place                       in-place          "
)
_HEAD_NAMES = "# {:>10s}  {:>12s}  {:>8s}  {:>6s}  {:>6s}  {:>7s}  {:>6s}  {:>6s} {:>6s}  {:>7s}  {:>6s}  {:>6s} {:>6s}"
_HEAD_UNITS = (
    "# {:>10s}  {:>12s}  {:>8s}  {:>6s}  {:>6s}  {:>7s}  {:>6s}  {:>6s}  {:>5s}  {:>7s}  {:>6s}  {:>6s}  {:>5s}"
)


def _groups(rows: Iterable[ResultRow]) -> dict[tuple[str, str], list[ResultRow]]:
    groups: dict[tuple[str, str], list[ResultRow]] = {}
    for row in rows:
        groups.setdefault((row.op, row.algo), []).append(row)
    return groups


def _by_size(rows: list[ResultRow]) -> list[tuple[int, dict[bool, ResultRow]]]:
    sizes: dict[int, dict[bool, ResultRow]] = {}
    for row in rows:
        sizes.setdefault(row.size_bytes, {})[row.in_place] = row
    return sorted(sizes.items())


def _root(row: ResultRow) -> int:
    # nccl-tests prints -1 where the op has no root.
    return row.root if Op.parse(row.op).spec.rooted else -1


def _redop(row: ResultRow) -> str:
    return row.redop if Op.parse(row.op).spec.reduces else "none"


def _time_str(time_us: float) -> str:
    # nccl-tests keeps the time column 7 characters wide by dropping decimals as times grow.
    if time_us >= 10000.0:
        return f"{time_us:7.0f}"
    if time_us >= 100.0:
        return f"{time_us:7.1f}"
    return f"{time_us:7.2f}"


def table_legend(rows: list[ResultRow]) -> str:
    """The line under the tables; barrier's missing bandwidth is explained only where a barrier was
    measured (an all-reduce sweep's legend spoke of barrier too)."""
    barrier = any(not Op.parse(r.op).spec.payload for r in rows)
    return (
        f"times: median microseconds; algbw, busbw: GB/s{' (none for barrier: no data)' if barrier else ''}; "
        f"out: out-of-place, in: in-place; {STALL_MARKER}: stalled (>= 5% of iterations slower than 3x the "
        "fastest, or two modes)"
    )


def results_tables(rows: list[ResultRow]) -> list[Table]:
    """One Rich table per (op, algorithm): size, count, then time/algbw/busbw/#wrong per mode."""
    tables = []
    for (op, algo), group in _groups(rows).items():
        first = group[0]
        modes = [m for m in (False, True) if any(r.in_place == m for r in group)]
        if not Op.parse(op).spec.payload:
            tables.append(_latency_table(op, algo, group, modes))
            continue
        # An out-of-place-only table (exscan, all-to-all) is narrower than its title, which would wrap.
        ranks = counted(first.world_size, "rank")
        table = _titled(f"{op} · {algo} · {first.backend} · {ranks} · {first.dtype} · {_redop(first)}")
        table.add_column("size", justify="right", no_wrap=True)
        table.add_column("count", justify="right", no_wrap=True)
        for mode in modes:
            tag = "in" if mode else "out"
            table.add_column(f"{tag} us", justify="right", no_wrap=True)
            table.add_column("algbw", justify="right", no_wrap=True)
            table.add_column("busbw", justify="right", no_wrap=True)
            table.add_column("wrong", justify="right", no_wrap=True)
        for size, by_mode in _by_size(group):
            cells = [_size_cell(size), str(next(iter(by_mode.values())).count)]
            for mode in modes:
                row = by_mode.get(mode)
                if row is None:
                    cells += ["-", "-", "-", "-"]
                    continue
                wrong = "N/A" if row.wrong < 0 else str(row.wrong)
                if row.wrong > 0:
                    wrong = f"[red]{wrong}[/red]"
                mark = STALL_MARKER if row_stalled(row) else ""
                cells += [
                    _time_str(row.time_us).strip() + mark,
                    f"{row.algbw_gbps:.3f}",
                    f"{row.busbw_gbps:.3f}",
                    wrong,
                ]
            table.add_row(*cells)
        tables.append(table)
    return tables


def _size_cell(size_bytes: int) -> str:
    """A size as nccl-tests' compact label where that label is the size (``64K``), else its bytes: a
    count rounded down to whole blocks (reduce-scatter over 3 ranks: 16380 B) showed as ``16.0K``,
    which reads as 16384."""
    label = size_label(size_bytes)
    try:
        exact = parse_size(label) == size_bytes
    except ConfigError:  # a label of no whole byte count (1.3K) is not the size either
        exact = False
    return label if exact else f"{size_bytes}B"


def _titled(title: str) -> Table:
    """A sweep's table, at least as wide as its title: Rich wraps a title to its table's width."""
    return Table(
        title=title,
        title_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        collapse_padding=True,
        min_width=len(title),
    )


def _latency_table(op: str, algo: str, group: list[ResultRow], modes: list[bool]) -> Table:
    """An op that moves no data (barrier): its time in microseconds, no size, count or bandwidth."""
    first = group[0]
    # A title wraps to its table's width: one time column would break it into a word a line.
    table = _titled(f"{op} · {algo} · {first.backend} · {counted(first.world_size, 'rank')} · no data, time only")
    for mode in modes:
        table.add_column(f"{'in' if mode else 'out'} us", justify="right", no_wrap=True)
    for _size, by_mode in _by_size(group):
        cells = []
        for mode in modes:
            row = by_mode.get(mode)
            mark = STALL_MARKER if row is not None and row_stalled(row) else ""
            cells.append("-" if row is None else _time_str(row.time_us).strip() + mark)
        table.add_row(*cells)
    return table


def _latency_text(op: str, algo: str, group: list[ResultRow]) -> list[str]:
    """nccl-tests' block for an op that moves no data (barrier): the time columns only."""
    first = group[0]
    lines = [f"# collbench {op} algo {algo} backend {first.backend} nranks {first.world_size}", "#"]
    lines.append("# {:>12s}  {:>12s}".format("out-of-place", "in-place"))
    lines.append("# {:>12s}  {:>12s}".format("time (us)", "time (us)"))
    for _size, by_mode in _by_size(group):
        cells = [by_mode.get(mode) for mode in (False, True)]
        lines.append("  " + "  ".join(f"{'N/A' if r is None else _time_str(r.time_us):>12s}" for r in cells))
    lines.append(f"# {op} moves no data: time only, no bandwidth")
    lines.append("#")
    return lines


def _nccl_tests_count(row: ResultRow) -> int:
    """The count nccl-tests prints: per rank for all-gather and reduce-scatter, else the buffer's."""
    if row.op in ("all-gather", "reduce-scatter") and row.world_size > 0:
        return row.count // row.world_size
    return row.count


def nccl_tests_text(rows: list[ResultRow]) -> str:
    """nccl-tests' stdout layout, one block per (op, algorithm), each with its ``# Avg bus bandwidth``."""
    lines: list[str] = []
    for (op, algo), group in _groups(rows).items():
        first = group[0]
        if not Op.parse(op).spec.payload:
            lines += _latency_text(op, algo, group)
            continue
        lines.append(f"# collbench {op} algo {algo} backend {first.backend} nranks {first.world_size}")
        lines.append("#")
        lines.append(_HEAD_MODES.format("", "", "", "", ""))
        lines.append(
            _HEAD_NAMES.format(
                "size",
                "count",
                "type",
                "redop",
                "root",
                "time",
                "algbw",
                "busbw",
                "#wrong",
                "time",
                "algbw",
                "busbw",
                "#wrong",
            )
        )
        lines.append(
            _HEAD_UNITS.format(
                "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", ""
            )
        )
        busbws: list[float] = []
        wrong_total = 0
        for size, by_mode in _by_size(group):
            any_row = next(iter(by_mode.values()))
            type_name = NCCL_TYPE_NAMES.get(any_row.dtype, any_row.dtype)
            count = _nccl_tests_count(any_row)
            line = f"{size:12d}  {count:12d}  {type_name:>8s}  {_redop(any_row):>6s}  {_root(any_row):6d}"
            for mode in (False, True):
                row = by_mode.get(mode)
                if row is None:
                    line += "  {:>7s}  {:>6s}  {:>6s}  {:>5s}".format("N/A", "N/A", "N/A", "N/A")
                    continue
                wrong = "N/A" if row.wrong < 0 else str(row.wrong)
                wrong_total += max(row.wrong, 0)
                line += f"  {_time_str(row.time_us)}  {row.algbw_gbps:6.2f}  {row.busbw_gbps:6.2f}  {wrong:>5s}"
                busbws.append(row.busbw_gbps)
            lines.append(line)
        avg = sum(busbws) / len(busbws) if busbws else 0.0
        lines.append(f"# Out of bounds values : {wrong_total} {'FAILED' if wrong_total else 'OK'}")
        lines.append(f"# Avg bus bandwidth    : {avg:g} ")
        lines.append("#")
    return "\n".join(lines) + "\n"


def rows_json(rows: list[ResultRow]) -> str:
    """The rows as a JSON array of objects (ResultRow's fields)."""
    return json.dumps([row.to_dict() for row in rows], indent=2, sort_keys=True)
