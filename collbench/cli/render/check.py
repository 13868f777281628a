"""Rich rendering of ``collbench tune --check``: per rule, the regret of its choice with its uncertainty."""

from __future__ import annotations

from rich.table import Table

from collbench.cli.render.profile import _bytes, _us
from collbench.tuning.check import RuleCheck, geomean_regret
from collbench.tuning.selection import DEFAULT_SIGMAS


def render_check(checks: list[RuleCheck], shape: str | None = None) -> Table:
    """One row per rule: range, chosen algorithm, size checked, its time, the best one's, the regret.

    ``shape`` names the rule set's shape in the title, for a profile of several.
    """
    title = (
        "re-measured: regret = time of the chosen / time of the fastest, rounds at one speed (+- one standard error)"
    )
    if shape is not None:
        title = f"{shape}, {title}"
    table = Table(title=title, title_justify="left")
    for col, just in (
        ("op", "left"),
        ("from", "right"),
        ("to", "right"),
        ("chosen", "left"),
        ("at", "right"),
        ("chosen time", "right"),
        ("fastest", "left"),
        ("fastest time", "right"),
        ("regret", "right"),
    ):
        table.add_column(col, justify=just)  # type: ignore[arg-type]
    for c in checks:
        if c.regret is None or c.regret_err is None:
            regret = "not measured"
        else:
            regret = f"{c.regret:.3f} ± {c.regret_err:.3f}"
            if c.faulted:
                regret = f"[red]{regret}[/red]"
        table.add_row(
            c.rule.op,
            _bytes(c.rule.min_bytes),
            _bytes(c.rule.max_bytes),
            c.rule.algo,
            _bytes(c.size_bytes),
            _us(c.chosen_us),
            c.best_algo,
            _us(c.best_us),
            regret,
        )
    return table


def check_summary(checks: list[RuleCheck]) -> str:
    """One line: the geometric-mean regret, and how many rules the re-measurement faults."""
    geo = geomean_regret(checks)
    faulted = sum(c.faulted for c in checks)
    mean = "-" if geo is None else f"{geo:.3f}"
    return (
        f"geometric-mean regret {mean} over {len(checks)} rule(s); {faulted} beaten beyond the noise "
        f"({DEFAULT_SIGMAS:g} standard errors)"
    )
