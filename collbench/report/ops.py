"""Per op in the report: busbw and time against size (one line per algorithm, spread bars, the fitted
curve, crossovers, noise marks) and nccl-tests' columns in a sortable table. An op that moves no data
(barrier) has its time per algorithm in microseconds instead, with no size axis and no bandwidth."""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

from collbench.models.crossover import Crossover
from collbench.models.fitted import Fit
from collbench.report.assets import table_box
from collbench.report.svg import Marker, Point, Series, color_map, log_chart
from collbench.results.noise import decision_time_us
from collbench.results.row import NCCL_TESTS_SOURCE, ResultRow
from collbench.schedules.ops import Op
from collbench.units import counted, gbps, size_label

STALL_MARK = 0.05
"""A point is marked noisy when at least this fraction of its timed iterations stalled (the sweep's
``stall_fraction``: iterations slower than 3x the point's fastest)."""

GroupKey = tuple[str, str, int]
"""(op, backend, world_size): one section."""


def stall_fraction(row: ResultRow) -> float | None:
    """The row's stall fraction, or None for rows recorded before sweeps measured it (or NaN from a CSV)."""
    value = row.stall_fraction
    return None if value is None or value != value else float(value)


@dataclass(frozen=True, slots=True)
class _Combined:
    """One point of a chart: the rows of one series at one size, as the decisions read them."""

    size_bytes: int
    decision_us: float
    """The time decisions and fits use (results.noise.decision_time_us: the p25 where measured), the
    smallest over the rows: what the profile's "measured" column shows."""
    time_us_min: float
    """The fastest iteration of that row."""
    time_us_p50: float
    """That row's median iteration: the bar runs from the fastest iteration to here."""
    time_us_max: float
    """The slowest iteration of any row (in the hover text only: one stall would set the scale)."""
    stall: float | None
    bimodal: bool
    rows: int
    iterations_timed: bool
    """Whether a row of it kept its iterations' spread: an imported nccl-tests row holds one time, the
    mean over its iterations, in every time field."""


def _combine(rows: Sequence[ResultRow]) -> _Combined:
    stalls = [s for s in (stall_fraction(r) for r in rows) if s is not None]
    best = min(rows, key=decision_time_us)
    decision = decision_time_us(best)
    fastest = best.time_us_min if 0 < best.time_us_min <= decision else decision
    return _Combined(
        size_bytes=best.size_bytes,
        decision_us=decision,
        time_us_min=fastest,
        time_us_p50=max(best.time_us, decision),
        time_us_max=max(r.time_us_max for r in rows),
        stall=max(stalls) if stalls else None,
        bimodal=any(r.bimodal for r in rows),
        rows=len(rows),
        iterations_timed=any(r.source != NCCL_TESTS_SOURCE for r in rows),
    )


def _no_stall_note(rows: Sequence[ResultRow]) -> str:
    """Why a section's points carry no noise marks: nccl-tests keeps no iteration's time, and collbench
    rows written before sweeps measured stalls have none."""
    if all(r.source == NCCL_TESTS_SOURCE for r in rows):
        return (
            "These rows are nccl-tests' times, each the mean over its iterations: no spread to draw as bars, "
            "no stall to mark."
        )
    return "These rows carry no stall fraction (recorded before sweeps measured it): no noise marks."


def _table_summary(rows: Sequence[ResultRow], n: int) -> str:
    """The line that opens a section's nccl-tests table: its size, and which time its time column is.

    The column is each row's ``time_us`` (the p50 of collbench's rows, nccl-tests' mean for a log's),
    while the charts above plot the p25: a reader saw 88.9 us for a point in the profile and 146.80 in
    the table, with no word why.
    """
    sources = {r.source == NCCL_TESTS_SOURCE for r in rows}
    said = {
        False: "collbench's rows: the p50 of the slowest rank's iterations (the fastest where rounds repeat a point)",
        True: "nccl-tests' rows: the mean over iterations, as the log prints it",
    }
    what = "; ".join(said[s] for s in sorted(sources))
    return f"nccl-tests columns: {counted(n, 'row')} (click a header to sort); time: {what}"


def busbw_gbps(size_bytes: float, time_us: float, factor: float) -> float:
    """nccl-tests' bus bandwidth of one call: ``factor * size / time`` (GB/s from bytes and us). It
    falls as time grows, so the slowest time of a spread gives its lowest busbw."""
    return gbps(size_bytes, time_us) * factor


def group_rows(rows: Sequence[ResultRow]) -> dict[GroupKey, list[ResultRow]]:
    groups: dict[GroupKey, list[ResultRow]] = defaultdict(list)
    for r in rows:
        groups[(r.op, r.backend, r.world_size)].append(r)
    return dict(sorted(groups.items()))


def section_id(key: GroupKey) -> str:
    """An element id for one section. The backend comes from a results file, so anything but letters,
    digits, ``-`` and ``_`` becomes ``-``: an id is also written into ``href`` attributes."""
    op, backend, p = key
    return re.sub(r"[^A-Za-z0-9_-]", "-", f"op-{op}-{backend}-{p}")


def reduction(r: ResultRow) -> str:
    """``r``'s reduction where its op applies one, else "" (an all-gather's row keeps the sweep's -o)."""
    return r.redop if Op.parse(r.op).spec.reduces else ""


def _series_name(r: ResultRow, several_dtypes: bool, several_redops: bool = False) -> str:
    """The legend's name of ``r``'s line: its algorithm, with its dtype and its reduction where the
    section's rows hold several (each its own line, not the fastest row of them all)."""
    return " ".join([r.algo, *((r.dtype,) if several_dtypes else ()), *((r.redop,) if several_redops else ())])


def op_section(
    key: GroupKey,
    rows: Sequence[ResultRow],
    fits: Sequence[Fit],
    crossovers: Sequence[Crossover],
    algo_colors: dict[str, str] | None = None,
) -> str:
    """The HTML of one (op, backend, world size): two charts, the crossovers, and the table.

    ``algo_colors`` keeps an algorithm's colour the same across the page (used unless the rows mix
    dtypes, where each (algorithm, dtype) gets its own)."""
    op, backend, p = key
    if not Op.parse(op).spec.payload:
        return latency_section(key, rows, algo_colors)
    factor = Op.parse(op).spec.busbw_factor(p)
    several_dtypes = len({r.dtype for r in rows}) > 1
    # A sweep of -o sum and one of -o max in one file were drawn as one line, the faster at each size. An
    # op that does not reduce keeps the sweep's -o on its rows without applying it: one line.
    several_redops = len({reduction(r) for r in rows}) > 1
    by_series: dict[str, dict[int, list[ResultRow]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        if r.time_us > 0:
            by_series[_series_name(r, several_dtypes, several_redops)][r.size_bytes].append(r)
    names = sorted(by_series)
    colors = color_map(names) if several_dtypes or several_redops or algo_colors is None else algo_colors
    has_stall = any(stall_fraction(r) is not None or r.bimodal is not None for r in rows)
    time_series, bw_series = [], []
    for name in names:
        points = [_combine(v) for _, v in sorted(by_series[name].items())]
        algo = name.split(" ")[0]
        # Only a usable fit draws a curve: one that misses its own points would be drawn as if it held.
        fit = next(
            (f for f in fits if (f.op, f.backend, f.world_size, f.algo) == (op, backend, p, algo) and f.usable), None
        )
        curve_t: tuple[tuple[float, float], ...] = ()
        curve_b: tuple[tuple[float, float], ...] = ()
        if fit is not None and points:
            grid = _geom(points[0].size_bytes, points[-1].size_bytes, 48)
            curve_t = tuple((s, fit.predict_us(s)) for s in grid)
            curve_b = tuple((s, gbps(s, t) * factor) for s, t in curve_t if t > 0)
        t_pts, b_pts = [], []
        for c in points:
            noisy = (c.stall is not None and c.stall >= STALL_MARK) or c.bimodal
            stall = "" if c.stall is None else f", {100 * c.stall:.0f}% of iterations stalled"
            stall += ", two modes more than 2x apart" if c.bimodal else ""
            bw = busbw_gbps(c.size_bytes, c.decision_us, factor)
            tip = (
                f"{name} {size_label(c.size_bytes)}: p25 {c.decision_us:.4g} us, busbw {bw:.4g} GB/s; "
                f"iterations: fastest {c.time_us_min:.4g} us "
                f"({busbw_gbps(c.size_bytes, c.time_us_min, factor):.4g} GB/s), p50 {c.time_us_p50:.4g} us, "
                f"slowest {c.time_us_max:.4g} us; {counted(c.rows, 'row')}{stall}"
                if c.iterations_timed
                # one time per row: a p25, fastest, p50 and slowest all of that one value claimed a spread
                else f"{name} {size_label(c.size_bytes)}: {c.decision_us:.4g} us, busbw {bw:.4g} GB/s; "
                f"nccl-tests' mean over its iterations (no spread recorded); {counted(c.rows, 'row')}"
            )
            t_pts.append(Point(c.size_bytes, c.decision_us, c.time_us_min, c.time_us_p50, tip, noisy))
            # busbw falls as time grows: the fastest iteration is the top of the bar, the p50 its bottom.
            b_pts.append(
                Point(
                    c.size_bytes,
                    bw,
                    busbw_gbps(c.size_bytes, c.time_us_p50, factor),
                    busbw_gbps(c.size_bytes, c.time_us_min, factor),
                    tip,
                    noisy,
                )
            )
        time_series.append(Series(name, colors[name], tuple(t_pts), curve_t))
        bw_series.append(Series(name, colors[name], tuple(b_pts), curve_b))
    mine = [c for c in crossovers if (c.op, c.backend, c.world_size) == key]
    markers = [Marker(c.size_bytes, f"{c.below} | {c.above}") for c in mine]
    title = f"{op}, {backend}, {p} ranks"
    parts = [
        f'<section class="op" id="{section_id(key)}"><h3>{escape(title)}</h3>',
        '<div class="charts">',
        log_chart(
            bw_series,
            title=f"{title}: busbw",
            x_label="size",
            y_label="busbw (GB/s) at the p25",
            markers=markers,
            width=600,
            legend_note="points: p25; bars: fastest iteration (top) to p50; dashed: fitted model",
        ),
        log_chart(
            time_series,
            title=f"{title}: time",
            x_label="size",
            y_label="time (us), p25",
            markers=markers,
            width=600,
            legend_note="points: p25; bars: fastest iteration to p50; dashed: fitted model",
        ),
        "</div>",
        '<p class="note">Points: the p25 of each size (first quartile over iterations of the slowest rank; the '
        "median where a row has no p25), the time the fits and the profile's choices use and its "
        '"measured" column shows; busbw is nccl-tests\' bus bandwidth at that time. Bars: the fastest '
        "iteration to the p50 (the faster half of the iterations; the slowest is in each point's hover "
        "text). Dashed: the fitted model. "
        + ("Vertical lines: crossovers of the models. " if mine else "")
        + (
            f"Red rings: points where {100 * STALL_MARK:.0f}% or more of the timed iterations stalled (slower than "
            "3x the fastest), or whose iterations fell into two modes more than 2x apart."
            if has_stall
            else _no_stall_note(rows)
        )
        + "</p>",
    ]
    if mine:
        items = "".join(
            f"<li>{escape(c.below)} until {escape(size_label(c.size_bytes))} ({c.size_bytes} B), then "
            f"{escape(c.above)}</li>"
            for c in mine
        )
        parts.append(f'<ul class="crossovers">{items}</ul>')
    n = len({(r.algo, r.size_bytes, r.dtype) for r in rows})
    parts.append(
        f'<details class="table"><summary>{escape(_table_summary(rows, n))}</summary>'
        f"{results_table(rows, has_stall)}</details>"
    )
    parts.append("</section>")
    return "\n".join(parts)


def latency_section(key: GroupKey, rows: Sequence[ResultRow], algo_colors: dict[str, str] | None = None) -> str:
    """The HTML of an op that moves no data (barrier): its time per algorithm, in microseconds, as bars
    from the fastest iteration to the p50 around the p25, and the table; no size axis, no bandwidth."""
    op, backend, p = key
    by_algo: dict[str, list[ResultRow]] = defaultdict(list)
    for r in rows:
        if r.time_us > 0:
            by_algo[r.algo].append(r)
    combined = sorted(((_combine(v), a) for a, v in by_algo.items()), key=lambda ca: ca[0].decision_us)
    colors = algo_colors if algo_colors is not None else color_map(sorted(by_algo))
    has_stall = any(stall_fraction(r) is not None or r.bimodal is not None for r in rows)
    top = max((c.time_us_p50 for c, _ in combined), default=0.0) or 1.0
    bars = []
    for c, algo in combined:
        noisy = (c.stall is not None and c.stall >= STALL_MARK) or c.bimodal
        tip = (
            f"{algo}: p25 {c.decision_us:.4g} us; iterations: fastest {c.time_us_min:.4g} us, p50 "
            f"{c.time_us_p50:.4g} us, slowest {c.time_us_max:.4g} us; {counted(c.rows, 'row')}"
        )
        color = colors.get(algo, "#888")
        bars.append(
            f'<tr><td>{escape(algo)}</td><td data-v="{c.decision_us}">{c.decision_us:.2f}</td>'
            f'<td class="bar" title="{escape(tip)}"><span style="display:inline-block;height:0.8em;'
            f"width:{100 * c.decision_us / top:.1f}%;background:{escape(color)}"
            f'{";outline:2px solid #c00" if noisy else ""}"></span>'
            f'<span style="font-size:smaller"> {c.time_us_min:.2f} to {c.time_us_p50:.2f}</span></td></tr>'
        )
    title = f"{op}, {backend}, {p} ranks"
    n = len({(r.algo, r.dtype) for r in rows})
    return "\n".join(
        [
            f'<section class="op" id="{section_id(key)}"><h3>{escape(title)}</h3>',
            f'<table class="latency"><thead><tr><th>algorithm</th><th>time (us), p25</th>'
            f"<th>fastest iteration to p50 (us)</th></tr></thead><tbody>{''.join(bars)}</tbody></table>",
            f'<p class="note">{escape(op)} moves no data: one point per algorithm, its time in microseconds '
            "(the p25 of the slowest rank's iterations, what the profile's choice uses), fastest first; no size "
            "axis and no bandwidth. A red outline marks a point whose iterations stalled or fell into two modes.</p>",
            f'<details class="table"><summary>{escape(_table_summary(rows, n))}</summary>'
            f"{results_table(rows, has_stall)}</details>",
            "</section>",
        ]
    )


def _geom(lo: float, hi: float, n: int) -> list[float]:
    a, b = math.log(max(lo, 1.0)), math.log(max(hi, 1.0))
    return [math.exp(a + (b - a) * i / (n - 1)) for i in range(n)] if b > a else [lo]


def _td(value: float | int | str, text: str | None = None) -> str:
    shown = str(value) if text is None else text
    if isinstance(value, (int, float)):
        return f'<td data-v="{value}">{escape(shown)}</td>'
    return f"<td>{escape(shown)}</td>"


def results_table(rows: Sequence[ResultRow], has_stall: bool) -> str:
    """nccl-tests' columns (size count type redop root, then time algbw busbw #wrong out-of-place and
    in-place) per algorithm and size; every column sorts on click."""
    spec = Op.parse(rows[0].op).spec
    cells: dict[tuple[str, int, str, str, int], dict[bool, ResultRow]] = defaultdict(dict)
    for r in rows:
        key = (r.algo, r.size_bytes, r.dtype, r.redop, r.root)
        # Several rows of one mode (rounds, segment sizes): keep the fastest p50, as a table shows one.
        old = cells[key].get(r.in_place)
        if old is None or r.time_us < old.time_us:
            cells[key][r.in_place] = r
    # Barrier moves no data: its time alone (nccl-tests' bandwidth and #wrong columns say nothing of it).
    mode_cols = ["time (us)", "algbw (GB/s)", "busbw (GB/s)", "#wrong"] if spec.payload else ["time (us)"]
    width = len(mode_cols)
    head = (
        ["algo", "size", "count", "type", "redop", "root"] + mode_cols + mode_cols + (["stall %"] if has_stall else [])
    )
    groups = (
        f'<tr><th colspan="6"></th><th colspan="{width}">out-of-place</th><th colspan="{width}">in-place</th>'
        + ('<th colspan="1"></th>' if has_stall else "")
        + "</tr>"
    )
    ths = "".join(f'<th data-col="{i}" title="click to sort">{escape(h)}</th>' for i, h in enumerate(head))
    body = []
    for (algo, size, dtype, redop, root), modes in sorted(cells.items()):
        first = next(iter(modes.values()))
        tds = [
            _td(algo),
            _td(size, f"{size} ({size_label(size)})"),
            _td(first.count),
            _td(dtype),
            _td(redop if spec.reduces else "none"),
            _td(root if spec.rooted else -1),
        ]
        for mode in (False, True):
            cell = modes.get(mode)
            if cell is None:
                tds += ['<td data-v="">-</td>'] * width
                continue
            if not spec.payload:
                tds.append(_td(cell.time_us, f"{cell.time_us:.2f}"))
                continue
            tds += [
                _td(cell.time_us, f"{cell.time_us:.2f}"),
                _td(cell.algbw_gbps, f"{cell.algbw_gbps:.3g}"),
                _td(cell.busbw_gbps, f"{cell.busbw_gbps:.3g}"),
                _td(cell.wrong, "N/A" if cell.wrong < 0 else str(cell.wrong)),
            ]
        if has_stall:
            stalls = [s for s in (stall_fraction(r) for r in modes.values()) if s is not None]
            tds.append(_td(max(stalls), f"{100 * max(stalls):.0f}") if stalls else '<td data-v="">-</td>')
        body.append(f"<tr>{''.join(tds)}</tr>")
    return table_box(
        f'<table class="sortable results"><thead>{groups}<tr>{ths}</tr></thead><tbody>{"".join(body)}</tbody></table>'
    )
