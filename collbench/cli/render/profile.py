"""Rich renderings of a tuning profile: the rules table (and the fits behind them)."""

from __future__ import annotations

import math
from typing import Any

from rich.table import Table

from collbench.profile.document import Profile
from collbench.units import format_bytes


def _bytes(n: int | None) -> str:
    """A range bound: unbounded (None) as ``∞``."""
    return "∞" if n is None else format_bytes(n)


def _us(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value / 1000:.2f} ms" if value >= 1000 else f"{value:.1f} us"


def _params(params: dict[str, Any]) -> str:
    parts = []
    if params.get("segment_bytes"):
        parts.append(f"seg {_bytes(int(params['segment_bytes']))}")
    if params.get("channels"):
        parts.append(f"{params['channels']} ch")
    if params.get("layout") and params["layout"] != "rank-order":
        parts.append(str(params["layout"]))
    if params.get("protocol"):
        parts.append(str(params["protocol"]))
    return ", ".join(parts) or "-"


def render_rules(profile: Profile) -> Table:
    """One row per rule: (shape,) op, size range, algorithm, parameters, times and gain over native.

    With several rule sets a first column names each rule's shape, and predicted shapes say so.
    """
    several = len(profile.rule_sets) > 1
    if several:
        title = f"{profile.backend}, {len(profile.rule_sets)} communicator shapes, machine {profile.fingerprint}"
    else:
        title = f"{profile.backend}, {profile.world_size} ranks, {profile.nodes} node(s), machine {profile.fingerprint}"
    table = Table(title=title, title_justify="left")
    columns = [
        ("op", "left"),
        ("from", "right"),
        ("to", "right"),
        ("algorithm", "left"),
        ("params", "left"),
        ("at", "right"),
        ("measured", "right"),
        ("predicted", "right"),
        ("vs native", "right"),
    ]
    if several:
        columns.insert(0, ("ranks", "left"))
    for col, just in columns:
        table.add_column(col, justify=just)  # type: ignore[arg-type]
    for rule_set in profile.rule_sets:
        shape = f"{rule_set.world_size} on {rule_set.nodes} node(s)" + (" predicted" if rule_set.predicted else "")
        for rule in rule_set.rules:
            gain = "-" if rule.gain_vs_native is None else f"{rule.gain_vs_native:.2f}x"
            style = "green" if rule.gain_vs_native and rule.gain_vs_native > 1.0 and rule.algo != "native" else None
            if rule_set.predicted:
                style = "dim"
            cells = [
                rule.op,
                _bytes(rule.min_bytes),
                _bytes(rule.max_bytes),
                rule.algo,
                _params(rule.params),
                _bytes(rule.at_bytes),
                _us(rule.measured_us),
                _us(rule.predicted_us),
                gain,
            ]
            table.add_row(*([shape, *cells] if several else cells), style=style)
    return table


def render_fits(profile: Profile) -> Table:
    """The fitted models the profile carries: alpha, the bandwidth beta implies, and the fit quality."""
    table = Table(title="fitted models", title_justify="left")
    for col in ("op", "algorithm", "alpha", "beta", "R^2", "median err", "worst err", "use"):
        table.add_column(col, justify="left" if col in ("op", "algorithm", "use") else "right")
    for fit in profile.fits:
        beta = fit.beta_gbps
        why = fit.distrust()
        table.add_row(
            fit.op,
            fit.algo,
            _us(fit.alpha_us),
            "-" if beta is None else f"{beta:.3g} GB/s",
            "-" if math.isnan(fit.r2) else f"{fit.r2:.3f}",
            _pct(fit.median_abs_pct_error),
            _pct(fit.max_abs_pct_error),
            f"[red]no: {why}[/red]" if why else "yes",
        )
    return table


def _pct(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:.1f}%"
