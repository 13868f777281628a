"""Rich renderings of a tuning profile: the rules table (and the fits behind them)."""

from __future__ import annotations

import math
from typing import Any

from rich.console import Group, RenderableType
from rich.text import Text

from collbench.cli.render.styles import (
    ALPHA_AT_ZERO,
    BETA_AT_ZERO,
    alpha_at_zero_note,
    beta_at_zero_note,
    narrow_table,
    one_value,
    r2_text,
    unused_fits,
)
from collbench.models.fitted import op_has_payload
from collbench.profile.document import Profile
from collbench.profile.rules import GAIN_LEGEND, gain_text
from collbench.units import factor_text, format_bytes, ranks_on_nodes


def _bytes(n: int | None) -> str:
    """A range bound: unbounded (None) as ``∞``."""
    return "∞" if n is None else format_bytes(n)


def _us(value: float | None) -> str:
    if value is None:
        return "-"
    if value >= 1000:
        return f"{value / 1000:.2f} ms"
    # Below 10 us a tenth is a large share: Open MPI's 1.49 and 1.51 us both read '1.5 us' in a check,
    # beside a regret of 1.008 that the times then did not show.
    return f"{value:.2f} us" if value < 10 else f"{value:.1f} us"


def _params(params: dict[str, Any], max_bytes: int | None) -> str:
    parts = []
    if params.get("segment_bytes") and _cuts_segments(int(params["segment_bytes"]), max_bytes):
        parts.append(f"seg {_bytes(int(params['segment_bytes']))}")
    if params.get("channels"):
        parts.append(f"{params['channels']} ch")
    if params.get("layout") and params["layout"] != "rank-order":
        # 'layout topology', as the report writes it: 'topology' alone under an algorithm read as a stray word.
        parts.append(f"layout {params['layout']}")
    if params.get("protocol"):
        parts.append(str(params["protocol"]))
    # One a line under the algorithm: joined with commas, a second one wrapped to the column's left edge.
    return "\n  ".join(parts) or "-"


def _cuts_segments(segment_bytes: int, max_bytes: int | None) -> bool:
    """Whether a rule's segment size changes what it runs: only where its range reaches above it. A
    sweep records its segment size on every row, but a message no larger is one segment (a pipelined
    tree's, a transfer the executor cuts, Open MPI's segsize): 'direct, seg 4 MiB' under a rule for
    0-45 KiB read as a setting that mattered."""
    return max_bytes is None or max_bytes > segment_bytes


def render_rules(profile: Profile) -> RenderableType:
    """Per communicator shape a table, one row per rule: (op,) size range, algorithm, parameters,
    times and gain over native; predicted shapes say so in their title.

    Fits 80 columns with every value whole: the shape and, where the rules share one, the op are said
    in the title rather than in a column, and a rule's parameters go under its algorithm (wrapped at
    word boundaries) rather than in a column of their own."""
    several = len(profile.rule_sets) > 1
    tables: list[RenderableType] = []
    if several:
        tables.append(
            Text(f"{profile.backend}, {len(profile.rule_sets)} communicator shapes, machine {profile.fingerprint}")
        )
    for rule_set in profile.rule_sets:
        op = one_value(r.op for r in rule_set.rules)
        shape = ranks_on_nodes(rule_set.world_size, rule_set.nodes)
        certainty = None
        if rule_set.predicted:
            # A predicted set's times are models with no run of the shape behind them: said as predict
            # says its own ('error unknown'), so that '333.3 us' under 'model' is not read as a finding.
            certainty = Text(
                f"{shape}: model times, no run of this shape checks them: error unknown",
                style="dim",
            )
        shape += " (predicted)" if rule_set.predicted else ""
        if rule_set.predicted and profile.fits:
            # How far the rules reach past what was measured, as predict's title says it: the fits at
            # the largest world size are the ones predicted from (models.predict.pick_fits).
            fitted = max(f.world_size for f in profile.fits)
            shape += f" from fits at {fitted} ranks, x{factor_text(rule_set.world_size / fitted)}"
        title = (f"{op}, " if op else "") + (
            shape if several else f"{profile.backend}, {shape}, machine {profile.fingerprint}"
        )
        table = narrow_table(title, keep=2 if op else 3)
        columns = [
            ("from", "right", True),
            ("to", "right", True),
            ("algorithm", "left", False),
            ("at", "right", True),
            ("measured", "right", True),
            ("model", "right", True),
            ("vs\nnative", "right", True),
        ]
        if op is None:
            columns.insert(0, ("op", "left", True))
        for col, just, no_wrap in columns:
            table.add_column(col, justify=just, no_wrap=no_wrap)  # type: ignore[arg-type]
        for rule in rule_set.rules:
            gain = gain_text(rule)
            style = "green" if rule.gain_vs_native and rule.gain_vs_native > 1.0 and not rule.algo.own_choice else None
            if rule_set.predicted:
                style = "dim"
            params = _params(rule.params, rule.max_bytes)
            algorithm = Text(rule.algo)
            if params != "-":
                algorithm.append(f"\n  {params}", style="dim")
            cells: list[RenderableType] = [
                _bytes(rule.min_bytes),
                _bytes(rule.max_bytes),
                algorithm,
                _bytes(rule.at_bytes),
                _us(rule.measured_us),
                _us(rule.predicted_us),
                gain,
            ]
            table.add_row(*(cells if op else [rule.op, *cells]), style=style)
        tables.append(table)
        if any(r.gain_err is not None for r in rule_set.rules):
            tables.append(Text(GAIN_LEGEND, style="dim"))
        if certainty is not None:
            tables.append(certainty)
    return tables[0] if len(tables) == 1 else Group(*tables)


def render_fits(profile: Profile) -> RenderableType:
    """The fitted models the profile carries: alpha, the bandwidth beta implies, and the fit quality.

    Fits 80 columns: names and numbers never wrap; why a fit is not used is said under the table. A profile of
    several shapes has a fit per algorithm and rank count: a ranks column tells them apart (one rank
    count is said in the title)."""
    op = one_value(f.op for f in profile.fits)
    ranks = one_value(str(f.world_size) for f in profile.fits)
    title = f"fitted models of {op}" if op else "fitted models"
    table = narrow_table(title + (f", {ranks} ranks" if ranks else ""), keep=1 + (op is None) + (ranks is None))
    columns = ["algorithm", "alpha", "beta", "R²", "median\nerr", "worst\nerr", "use"]
    if ranks is None:
        columns.insert(1, "ranks")
    if op is None:
        columns.insert(0, "op")
    for col in columns:
        table.add_column(col, justify="left" if col in ("op", "algorithm", "use") else "right", no_wrap=True)
    unused: list[tuple[str, str]] = []
    for fit in sorted(profile.fits, key=lambda f: (f.op, f.algo, f.world_size)) if ranks is None else profile.fits:
        beta = fit.beta_gbps
        why = fit.distrust()
        cells = [
            fit.algo,
            *(() if ranks else (str(fit.world_size),)),
            ALPHA_AT_ZERO if fit.alpha_us == 0 else _us(fit.alpha_us),
            # A barrier moves no data: no bandwidth to fit, by its nature.
            "-" if not op_has_payload(fit.op) else BETA_AT_ZERO if beta is None else f"{beta:.3g} GB/s",
            r2_text(fit.r2),
            _pct(fit.median_abs_pct_error),
            _pct(fit.max_abs_pct_error),
            Text("no", "red") if why else "yes",
        ]
        table.add_row(*(cells if op else [fit.op, *cells]))
        if why:
            named = " ".join([*(() if op else (fit.op,)), fit.algo, *(() if ranks else (f"x{fit.world_size}",))])
            unused.append((named, why))
    notes = [
        *unused_fits(unused),
        *alpha_at_zero_note(f.alpha_us for f in profile.fits),
        *beta_at_zero_note(f.beta_gbps for f in profile.fits if op_has_payload(f.op)),
    ]
    return Group(table, *notes) if notes else table


def _pct(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:.1f}%"
