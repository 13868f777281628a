"""Rich renderings of fits, crossovers and predictions."""

from __future__ import annotations

import re
from collections.abc import Sequence

from rich.console import Group, RenderableType
from rich.text import Text

from collbench.cli.render.factored import factor
from collbench.cli.render.styles import (
    ALPHA_AT_ZERO,
    BETA_AT_ZERO,
    Wrapped,
    alpha_at_zero_note,
    beta_at_zero_note,
    narrow_table,
    one_value,
    paragraph,
    r2_text,
    unused_fits,
)
from collbench.errors import UserError
from collbench.models.crossover import Crossover
from collbench.models.fit import FitReport
from collbench.models.fitted import Fit, op_has_payload
from collbench.models.predict import Prediction, PredictReport
from collbench.schedules.ops import Op
from collbench.units import counted, factor_text, format_bytes


def format_time(time_us: float) -> str:
    if time_us >= 1e6:
        return f"{time_us / 1e6:.3g} s"
    if time_us >= 1e3:
        return f"{time_us / 1e3:.3g} ms"
    return f"{time_us:.3g} us"


def _gbps(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"


def _num(value: float) -> str:
    """Three significant digits, without an exponent below a million (1380, not 1.38e+03)."""
    return f"{value:.0f}" if 1e3 <= abs(value) < 1e6 else f"{value:.3g}"


def render_fits(report: FitReport) -> RenderableType:
    """A table per (op, backend, ranks), one row per algorithm: the fitted alpha, beta and gamma, the
    fit's quality and whether predict uses it. Fits 100 columns with every algorithm name whole."""
    parts: list[RenderableType] = [
        Text("fitted cost models (t = steps*alpha + bytes*beta + reduced*gamma)", style="bold")
    ]
    # What the bandwidth column's mark means is said once, under the last table that shows it: said under
    # the fits' table, it came before the segments' tables where the mark may be alone.
    beta_legend_at: int | None = None
    groups: dict[tuple[str, str, int], list[Fit]] = {}
    for f in report.fits:
        groups.setdefault((f.op, f.backend, f.world_size), []).append(f)
    for (op, backend, ranks), fits in groups.items():
        if not op_has_payload(op):
            parts.append(_latency_table(op, backend, ranks, fits))
            continue
        gammas = {"folded" if f.gamma_folded else _gbps(f.gamma_gbps) for f in fits}
        # One gamma is fitted jointly for all algorithms: said once in the title, not in a column. An op
        # that reduces nothing (all-gather, all-to-all...) has no gamma to say at all.
        reduces = _reduces(op)
        joint = next(iter(gammas)) if len(gammas) == 1 or not reduces else None
        # a gamma fitted as 0 has no 1/gamma: "1/gamma - GB/s" read as a figure lost
        said = {"folded": "gamma folded into beta", "-": "gamma fitted as 0"}.get(str(joint), f"1/gamma {joint} GB/s")
        title = f"{op}, {backend}, {ranks} ranks" + (f"; {said}" if joint and reduces else "")
        table = narrow_table(title)
        table.add_column("algo", no_wrap=True)
        for col in ("alpha\nus", "1/beta\nGB/s", *(() if joint else ("1/gamma\nGB/s",)), "R²\nlog", "err %\nmed/max"):
            table.add_column(col, justify="right", no_wrap=True)
        table.add_column("sizes", justify="right", no_wrap=True)
        # Points set aside because their own measurement marks them (the note names them and why);
        # the error columns are those of the points fitted.
        table.add_column("set\naside", justify="right", no_wrap=True)
        # A fit that does not explain its data says so here, and predict does not extrapolate it; why
        # is said under the table, where it wraps without widening every row.
        table.add_column("use", justify="left", no_wrap=True)
        for f in fits:
            why = f.distrust()
            gamma = "folded" if f.gamma_folded else _gbps(f.gamma_gbps)
            table.add_row(
                f.algo,
                ALPHA_AT_ZERO if f.alpha_us == 0 else _num(f.alpha_us),
                BETA_AT_ZERO if f.beta_gbps is None else _gbps(f.beta_gbps),
                *(() if joint else (gamma,)),
                r2_text(f.r2),
                f"{f.median_abs_pct_error:.1f}/{f.max_abs_pct_error:.1f}",
                f"{format_bytes(f.min_bytes)}-{format_bytes(f.max_bytes)}",
                f"{f.outliers}/{f.points + f.outliers}",
                Text("no", "red") if why else "yes",
            )
        parts.append(table)
        parts.extend(unused_fits((f.algo, why) for f in fits if (why := f.distrust())))
        parts.extend(alpha_at_zero_note(f.alpha_us for f in fits))
        if any(f.beta_gbps is None for f in fits):
            beta_legend_at = len(parts)
    # One line per note, naming every algorithm of the op and world size it holds for: the same
    # "gamma folded into beta: ..." under each of a sweep's algorithms took five lines for one fact.
    noted: dict[tuple[str, int, str], list[str]] = {}
    for f in report.fits:
        # The segments' table below gives where each segment starts: the note's "piecewise: 3 segments,
        # breaks at 262144, 2097152 bytes" said it again above it, in bytes.
        note = _PIECEWISE.sub("", f.note).strip("; ") if f.segments else f.note
        if note:
            noted.setdefault((f.op, f.world_size, note), []).append(f.algo)
    for (op, world_size, note), algos in noted.items():
        parts.append(paragraph(Text(f"{op} {', '.join(algos)} x{world_size}: {note}", style="dim")))
    for f in report.fits:
        if f.segments:
            seg = narrow_table(f"segments of {f.op} {f.algo} x{f.world_size}")
            for col in ("from", "to", "alpha us", "1/beta GB/s", "median err"):
                seg.add_column(col, justify="right", no_wrap=True)
            for s in f.segments:
                seg.add_row(
                    format_bytes(s.min_bytes),
                    format_bytes(s.max_bytes),
                    f"{s.alpha_us:.3g}",
                    BETA_AT_ZERO if s.beta_gbps is None else _gbps(s.beta_gbps),
                    f"{s.median_abs_pct_error:.1f}%",
                )
            parts.append(seg)
            if any(s.beta_gbps is None for s in f.segments):
                beta_legend_at = len(parts)
    if beta_legend_at is not None:
        parts[beta_legend_at:beta_legend_at] = beta_at_zero_note([None])
    if any(op_has_payload(f.op) for f in report.fits):  # barrier alone has no sizes to cross at
        parts.append(render_crossovers(report.crossovers, report.fits))
    for line in report.skipped:
        parts.append(paragraph(Text(f"skipped: {line}", style="yellow")))
    return Group(*parts)


def _reduces(op: str) -> bool:
    try:
        return Op.parse(op).spec.reduces
    except UserError:
        return True  # an op this version does not know: show its gamma as stored


def _latency_table(op: str, backend: str, ranks: int, fits: Sequence[Fit]) -> RenderableType:
    """A barrier's fits: microseconds per round and the time measured, with no bandwidth (it moves no
    data) and no error column (one point each: the model reproduces it)."""
    table = narrow_table(f"{op}, {backend}, {ranks} ranks: latency only")
    table.add_column("algo", no_wrap=True)
    for col in ("alpha\nus/round", "rounds", "time\nus"):
        table.add_column(col, justify="right", no_wrap=True)
    table.add_column("set\naside", justify="right", no_wrap=True)
    table.add_column("use", justify="left", no_wrap=True)
    for f in fits:
        why = f.distrust()
        time_us = f.predict_us(0)
        rounds = time_us / f.alpha_us if f.alpha_us > 0 else 0.0
        table.add_row(
            f.algo,
            _num(f.alpha_us),
            f"{rounds:.3g}",
            _num(time_us),
            f"{f.outliers}/{f.points + f.outliers}",
            Text("no", "red") if why else "yes",
        )
    return Group(table, *unused_fits((f.algo, why) for f in fits if (why := f.distrust())))


_PIECEWISE = re.compile(r"piecewise: \d+ segments, breaks at [\d, ]+ bytes(; )?")
"""The fit's note on its segments (``models/fit.py``), which the segments' table shows whole."""


def render_crossovers(crossovers: Sequence[Crossover], fits: Sequence[Fit] = ()) -> RenderableType:
    """The sizes where the fastest fitted model changes; with ``fits`` (the models they come from), each
    with how far ahead the new one gets before the next change, against the two fits' errors."""
    if not crossovers:
        return paragraph(Text(_no_crossovers(fits)))
    table = narrow_table("crossovers (the fastest algorithm changes)")
    gains = [_crossover_gain(c, crossovers, fits) for c in crossovers] if fits else []
    for col in ("op", "backend", "ranks", "size", "below", "from here up", *(("gain",) if gains else ())):
        table.add_column(col, no_wrap=True, justify="right" if col == "gain" else "left")
    for i, c in enumerate(crossovers):
        gain = () if not gains else (gains[i][0],)
        table.add_row(c.op, c.backend, str(c.world_size), format_bytes(c.size_bytes), c.below, c.above, *gain)
    if not gains:
        return table
    # A crossing is where two fitted curves meet: how sure it is depends on how far apart they get, which
    # the table said nothing of (the example's native -> rabenseifner at 6.19 MiB gains 3.8% up to 16 MiB,
    # within rabenseifner's 3.9% median error, where the profile keeps native).
    within = sum(1 for _, close in gains if close)
    legend = (
        "gain: how much faster the new choice's model is than the one it replaces, at most, up to the next "
        "crossover or the largest size fitted"
    )
    if within:
        legend += (
            f"; *: {counted(within, 'crossover')} where that is no more than the two fits' median error: the "
            "models do not tell the two apart there (tune decides on the measurements)"
        )
    return Group(table, paragraph(Text(legend)))


def _no_crossovers(fits: Sequence[Fit]) -> str:
    """Why no crossover is listed. Crossovers are drawn between usable fits only: where no op has two
    (a sweep of 3 sizes fits nothing usable), 'one algorithm is fastest over the whole range' told a
    user that the fits had found a winner, under a table of fits each marked 'use: no'."""
    fitted: dict[tuple[str, str, int], int] = {}
    usable: dict[tuple[str, str, int], int] = {}
    for f in fits:
        if op_has_payload(f.op):
            key = (f.op, f.backend, f.world_size)
            fitted[key] = fitted.get(key, 0) + 1
            usable[key] = usable.get(key, 0) + f.usable
    if max(fitted.values(), default=0) >= 2 and max(usable.values(), default=0) < 2:
        return (
            "no crossovers: they are found between usable fits, and no op here has two of one world size "
            "(the lines above say why a fit is not used)"
        )
    return "no crossovers: one algorithm is fastest over the whole range, or only one was measured"


def _crossover_gain(c: Crossover, every: Sequence[Crossover], fits: Sequence[Fit]) -> tuple[str, bool]:
    """``c``'s gain cell (``12%``, ``1.6%*`` within the fits' median errors, ``?`` without both fits), and
    whether it is within them: the largest (below - above) / above between ``c`` and the next change."""
    group = [f for f in fits if (f.op, f.backend, f.world_size) == (c.op, c.backend, c.world_size) and f.usable]
    below = next((f for f in group if f.algo == c.below), None)
    above = next((f for f in group if f.algo == c.above), None)
    if below is None or above is None:
        return "?", False
    later = [x.size_bytes for x in every if (x.op, x.backend, x.world_size) == (c.op, c.backend, c.world_size)]
    end = min((s for s in later if s > c.size_bytes), default=max(f.max_bytes for f in group))
    lo, hi = float(c.size_bytes), float(max(end, c.size_bytes))
    sizes = [lo * (hi / lo) ** (k / 15) for k in range(16)]
    gain = max((below.predict_us(s) - above.predict_us(s)) / above.predict_us(s) for s in sizes)
    close = gain * 100 <= max(below.median_abs_pct_error, above.median_abs_pct_error)
    return f"{gain:.1%}" + ("*" if close else ""), close


def render_prediction(report: PredictReport) -> RenderableType:
    title = f"predicted at {report.world_size} ranks on {report.nodes} node{'s' if report.nodes != 1 else ''}"
    # What every row shares goes in the title, so that the rest fits 80 columns; wider, the table
    # prints in parts that each repeat the op, algorithm and size (SplitTable): a part without the
    # size had eight rows of one algorithm that no reader could tell apart.
    op = one_value(p.op for p in report.predictions)
    cells = {
        "busbw\nGB/s": ["-" if p.busbw_gbps is None else f"{p.busbw_gbps:.3g}" for p in report.predictions],
        "error": ["?" if p.error_pct is None else f"±{p.error_pct:.1f}%" for p in report.predictions],
        "simulated": ["-" if p.simulated_us is None else format_time(p.simulated_us) for p in report.predictions],
        "from": [_from_text(p) for p in report.predictions],
    }
    # A column of one value is said once: the fits every row came from in the title (48 rows of
    # "x2 (x4)" took a table of their own at 80 columns), no error known under the table, and no
    # column of "-" where nothing was simulated (world sizes past what the simulator takes).
    fitted = one_value(str(p.fitted_world_size) for p in report.predictions)
    one_from = fitted is not None
    unknown_error = one_value(cells["error"]) == "?"
    dropped = {
        "from": one_from,
        "error": unknown_error,
        "simulated": one_value(cells["simulated"]) == "-",
    }
    if one_from:
        title += f" from fits at {fitted} ranks" + _from_text(report.predictions[0]).removeprefix(f"x{fitted}")
    table = narrow_table(f"{op}, {title}" if op else title, keep=2 if op else 3)
    columns = ["algo", "size", "time", "latency", *(c for c in cells if not dropped.get(c, False))]
    for col in columns if op else ("op", *columns):
        table.add_column(col, justify="left" if col in ("op", "algo") else "right", no_wrap=True)
    best = {(c["op"], c["backend"], c["size_bytes"]): c["algo"] for c in report.choice}
    bases: dict[tuple[str, str, str], list[tuple[str, str]]] = {}
    for i, p in enumerate(report.predictions):
        style = "bold green" if best.get((p.op, p.backend, p.size_bytes)) == p.algo else ""
        table.add_row(
            *(() if op else (p.op,)),
            p.algo,
            format_bytes(p.size_bytes) if p.busbw_gbps is not None else "-",
            format_time(p.time_us),
            format_time(p.latency_us),
            *(values[i] for c, values in cells.items() if not dropped.get(c, False)),
            style=style,
        )
        bases.setdefault((p.op, p.algo, p.fit), []).append((format_bytes(p.size_bytes), p.basis))
    how: list[RenderableType] = []
    for (_op, algo, fit), at_sizes in bases.items():
        how.extend(_bases(algo, fit, at_sizes))
    if unknown_error:
        legend = "error unknown: no measured point is near these sizes and this shape"
    else:
        # Not 'error: ...': that is how a failure's one line starts, and a legend on stdout read as one.
        legend = (
            "error column: the model's median error on measured points near that size and shape; ?: none measured near"
        )
    if not one_from:
        legend += " (from xF (xN): fitted at F ranks, predicted at N times that)"
    how.append(Wrapped(Text(legend)))
    choice = narrow_table(f"{op}: choice per size (fastest)" if op else "choice per size (fastest)")
    for col in ("size", "algo", "time") if op else ("op", "size", "algo", "time"):
        choice.add_column(col, no_wrap=True)
    for c in report.choice:
        size = format_bytes(c["size_bytes"]) if op_has_payload(c["op"]) else "-"
        choice.add_row(*(() if op else (c["op"],)), size, c["algo"], format_time(c["time_us"]))
    sized = any(op_has_payload(p.op) for p in report.predictions)
    return Group(table, *how, choice, *((render_crossovers(report.crossovers),) if sized else ()))


def _from_text(p: Prediction) -> str:
    """The fits a prediction came from, for the ``from`` column: ``x2``, or ``x2 (x4)`` four times over."""
    return f"x{p.fitted_world_size}" + ("" if p.world_size == p.fitted_world_size else f" (x{factor_text(p.scale)})")


def _bases(algo: str, fit: str, at_sizes: list[tuple[str, str]]) -> list[RenderableType]:
    """How one algorithm's times were priced (``at_sizes``: each size and its basis), said once: where
    the basis differs by size only in a few words (NCCL's pick, what the model misses there), the shared
    words with numbered gaps and a table of what fills them at each size; a basis that differs more,
    once per basis with its sizes."""
    by_basis: dict[str, list[str]] = {}
    for size, basis in at_sizes:
        by_basis.setdefault(basis, []).append(size)
    if len(by_basis) == 1:
        return [Wrapped(Text(f"{algo}: {fit}; {next(iter(by_basis))}"))]
    factored = factor([basis for _, basis in at_sizes])
    if factored is None:
        return [Wrapped(Text(f"{algo}: {fit}; {basis} ({', '.join(sizes)})")) for basis, sizes in by_basis.items()]
    table = narrow_table("", keep=1)
    table.add_column("size", justify="right", no_wrap=True)
    # Text, not markup: "[1]" and a basis's words are shown as written.
    for gap in range(factored.gaps):
        table.add_column(Text(f"[{gap + 1}]"))
    for (size, _), fills in zip(at_sizes, factored.fills, strict=True):
        table.add_row(size, *(Text(fill.strip(";, ")) for fill in fills))
    return [Wrapped(Text(f"{algo}: {fit}; {factored.template}; by size:")), table]
