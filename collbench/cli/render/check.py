"""Rich rendering of ``collbench tune --check``: per rule, the regret of its choice with its uncertainty."""

from __future__ import annotations

from rich.console import Group, RenderableType

from collbench.cli.render.profile import _bytes, _us
from collbench.cli.render.styles import narrow_table
from collbench.tuning.check import RuleCheck, geomean_regret
from collbench.units import counted


def render_check(checks: list[RuleCheck], shape: str | None = None) -> RenderableType:
    """Per op a table, one row per rule: range, chosen algorithm, size checked, its time, the best
    one's, the regret. ``shape`` names the rule set's shape in the title, for a profile of several.

    Fits 80 columns with every value whole: the op is in each table's title, not a column; narrower,
    the table prints in parts that repeat the range (SplitTable)."""
    title = "re-measured: regret = time of the chosen / time of the fastest, rounds at one speed (± one standard error)"
    ops: list[str] = list(dict.fromkeys(c.rule.op.value for c in checks)) or [""]
    tables = []
    for op in ops:
        table = narrow_table((f"{shape}, " if shape else "") + title + (f": {op}" if op else ""), keep=2)
        for col, just in (
            ("from", "right"),
            ("to", "right"),
            ("chosen", "left"),
            ("at", "right"),
            ("chosen\ntime", "right"),
            ("fastest", "left"),
            ("fastest\ntime", "right"),
            ("regret", "right"),
        ):
            table.add_column(col, justify=just, no_wrap=True)  # type: ignore[arg-type]
        for c in checks:
            if c.rule.op != op:
                continue
            if c.regret is None or c.regret_err is None:
                regret = "not measured"
            else:
                regret = f"{c.regret:.3f}±{c.regret_err:.3f}"
                if c.faulted:
                    # In words, not in red alone: piped, logged or without colour the summary counted
                    # '1 beaten' and no row said which.
                    regret = f"[red]{regret} beaten[/red]"
            table.add_row(
                _bytes(c.rule.min_bytes),
                _bytes(c.rule.max_bytes),
                c.rule.algo,
                _bytes(c.size_bytes),
                _us(c.chosen_us),
                c.best_algo,
                _us(c.best_us),
                regret,
            )
        tables.append(table)
    return tables[0] if len(tables) == 1 else Group(*tables)


def check_summary(checks: list[RuleCheck]) -> str:
    """One line: the geometric-mean regret, and how many rules the re-measurement faults."""
    geo = geomean_regret(checks)
    faulted = sum(c.faulted for c in checks)
    mean = "-" if geo is None else f"{geo:.3f}"
    return (
        f"geometric-mean regret {mean} over {counted(len(checks), 'rule')}; {faulted} beaten beyond the noise "
        "(as a tune's winner: beyond the noise bar and ahead round by round)"
    )
