"""Rich rendering of ``collbench tune --check``: per rule, the regret of its choice with its uncertainty."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import Path

from rich.console import Group, RenderableType

from collbench.cli.render.profile import _bytes, _us
from collbench.cli.render.styles import narrow_table
from collbench.profile.document import Profile, RuleSet
from collbench.tuning.check import RuleCheck, geomean_regret
from collbench.units import counted


def render_check(checks: list[RuleCheck], shape: str | None = None) -> RenderableType:
    """Per op a table, one row per rule: range, size checked, chosen algorithm, its time, the regret;
    where another algorithm was the fastest, a line under the rule names it with its time. ``shape``
    names the rule set's shape in the title, for a profile of several.

    Fits 80 columns with every value whole, piped as on a terminal: the op is in each table's title,
    not a column, and one column holds both algorithms (a column for the fastest's name and one for
    its time made the table 100 wide, split in two parts at 80 columns). Narrower still, the table
    prints in parts that repeat the range (SplitTable)."""
    ops: list[str] = list(dict.fromkeys(c.rule.op.value for c in checks)) or [""]
    tables = []
    for op in ops:
        title = f"{op} re-measured: " if op else "re-measured: "
        title += "regret = chosen / fastest time (± one standard error)"
        table = narrow_table((f"{shape}, " if shape else "") + title, keep=2)
        for col, just in (
            ("from", "right"),
            ("to", "right"),
            ("at", "right"),
            ("chosen, fastest", "left"),
            ("time", "right"),
            ("regret", "left"),
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
            at = _bytes(c.size_bytes)
            table.add_row(_bytes(c.rule.min_bytes), _bytes(c.rule.max_bytes), at, c.rule.algo, _us(c.chosen_us), regret)
            if c.best_algo != c.rule.algo:
                table.add_row("", "", "", c.best_algo, _us(c.best_us), "fastest")
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


RETUNE_PATHS = ("--output", "-O", "--results", "--plot")
"""The recorded tune's options that name its files: the re-tune writes beside them, never over them."""
MAX_RANGES_NAMED = 3


def retune_advice(path: Path, profile: Profile, beaten: Sequence[tuple[RuleSet, RuleCheck]]) -> str | None:
    """The next step after a check that beat ``beaten`` rules, in one line (printed after ``next: ``):
    tune again, as the profile's own tune command (else one built from the shapes beaten), into a new file
    beside ``path`` (the old profile and its measured rows stay, to compare), then check that one. A tune
    decides a shape's sizes together (each rule's boundaries come from its neighbours' winners), so the
    shape is re-tuned, not one rule.
    None when no rule is beaten."""
    if not beaten:
        return None
    several = len({rule_set.shape for rule_set, _ in beaten}) > 1
    ranges: dict[str, list[str]] = {}
    for rule_set, c in beaten:
        where = (f"{rule_set.shape_label}, " if several else "") + c.rule.op.value
        ranges.setdefault(where, []).append(f"{_bytes(c.rule.min_bytes)}-{_bytes(c.rule.max_bytes)}")
    named = []
    for where, spans in ranges.items():
        shown = spans[:MAX_RANGES_NAMED] + (
            [f"{len(spans) - MAX_RANGES_NAMED} more"] if len(spans) > MAX_RANGES_NAMED else []
        )
        named.append(f"{where} {', '.join(shown)}")
    new = path.with_name(f"{path.stem}-retuned{path.suffix}")
    return (
        f"re-tune where a rule is beaten ({'; '.join(named)}): `{_retune_command(profile, beaten, new)}`, "
        f"then check that profile (`collbench tune --check {shlex.quote(str(new))}`)"
    )


def _retune_command(profile: Profile, beaten: Sequence[tuple[RuleSet, RuleCheck]], new: Path) -> str:
    """The tune that made ``profile`` (its recorded command) writing to ``new``; where it records none
    (an older or merged profile), a tune of the shapes and ops beaten on its backend."""
    try:
        recorded = shlex.split(profile.command)
    except ValueError:
        recorded = []
    if recorded[:2] == ["collbench", "tune"]:
        parts: list[str] = []
        skip = False
        for token in recorded:
            if skip:
                skip = False
            elif token in RETUNE_PATHS:
                skip = True
            elif token.split("=", 1)[0] not in RETUNE_PATHS:
                parts.append(token)
    else:
        parts = ["collbench", "tune"]
        sets = list({rule_set.shape: rule_set for rule_set, _ in beaten}.values())
        # Several nodes run under a launcher, which sets the ranks itself (tune refuses --ranks there).
        if all(s.nodes == 1 for s in sets):
            parts += ["--ranks", ",".join(str(s.world_size) for s in sets)]
        parts += ["--backend", profile.backend]
        ops = list(dict.fromkeys(op for s in sets for op in s.ops))
        if ops != ["all-reduce"]:
            parts += ["--op", ",".join(ops)]
    return shlex.join([*parts, "-O", str(new)])
