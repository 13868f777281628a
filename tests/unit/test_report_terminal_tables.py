"""Every table collbench prints fits an 80-column terminal with every algorithm name whole: the tune
and profile rules, the profile's fits, tune --check, fit, predict and sweep results,
rendered as users see them (Rich at width 80), with the longest names at once (recursive-doubling,
rabenseifner, reduce-scatter) and several ops and shapes. (tests/cli/test_80_columns.py runs the
commands themselves.)"""

from __future__ import annotations

import re
from dataclasses import replace
from io import StringIO

from report_inputs import EXAMPLE_RESULTS, example_profile
from rich.console import Console, RenderableType

from collbench.cli.render.check import render_check
from collbench.cli.render.models import render_fits as render_fit_report
from collbench.cli.render.models import render_prediction
from collbench.cli.render.profile import render_fits, render_rules
from collbench.cli.render.results import results_tables
from collbench.models.fit import fit_results
from collbench.models.predict import predict
from collbench.profile.document import Profile
from collbench.results.io import read_rows
from collbench.results.row import ResultRow
from collbench.schedules.registry import algorithm_names
from collbench.tuning.check import RuleCheck
from collbench.units import format_bytes

WIDTH = 80
LONG = ("recursive-doubling", "rabenseifner")


def _render(renderable: RenderableType) -> str:
    return _render_at(renderable, WIDTH)


def _render_at(renderable: RenderableType, width: int) -> str:
    console = Console(width=width, file=StringIO(), color_system=None, legacy_windows=False)
    console.print(renderable)
    out = console.file.getvalue()  # type: ignore[attr-defined]
    assert isinstance(out, str)
    return out


def _assert_whole(out: str, names: set[str]) -> None:
    lines = out.splitlines()
    assert max(len(line.rstrip()) for line in lines) <= WIDTH, out
    assert "…" not in out, out
    words = {w.strip("│┃,;:()") for line in lines for w in line.split()}
    for name in names:
        assert name in words, f"{name} is not whole in:\n{out}"


def _rows() -> list[ResultRow]:
    return read_rows(EXAMPLE_RESULTS)


def _profile() -> Profile:
    """The example profile with the longest names chosen, two ops, and a second, predicted shape."""
    data = example_profile().to_dict()
    shape = data["rule_sets"][0]
    rules = shape["rules"]
    rules[0]["algo"], rules[1]["algo"] = LONG
    rules += [
        {**rules[0], "op": "reduce-scatter", "algo": "rabenseifner"},
        {**rules[1], "op": "reduce-scatter", "algo": "ring", "max_bytes": None},
    ]
    data["rule_sets"].append({**shape, "world_size": 64, "nodes": 8, "predicted": True, "layout": None})
    for fit in data["fits"][:2]:
        data["fits"].append({**fit, "op": "reduce-scatter"})
    return Profile.from_dict(data)


def test_profile_rules_and_fits() -> None:
    profile = _profile()
    _assert_whole(_render(render_rules(profile)), {*LONG, "reduce-scatter", "all-reduce"})
    _assert_whole(_render(render_rules(example_profile())), {"tree", "direct", "ring"})
    fits = {f.algo for f in profile.fits}
    assert set(LONG) <= fits
    out = _render(render_fits(profile))
    _assert_whole(out, fits | {"reduce-scatter"})
    # R² whole: three decimals, never "0.99…".
    for fit in profile.fits:
        assert f"{fit.r2:.3f}" in out


def test_rule_segment_size_only_where_it_cuts_segments() -> None:
    """Every row records the sweep's segment size, but a message no larger than it is one segment:
    'seg 4 MiB' under a rule for 0-90.5 KiB read as a setting that mattered. A rule whose range
    reaches above it keeps it (direct to 5.66 MiB, ring to no bound: their transfers are cut)."""
    out = _render(render_rules(example_profile()))
    lines = out.splitlines()
    under = {
        algo: [below.strip() for below in lines[i + 1 : i + 3] if below.startswith(" " * 20)]
        for i, line in enumerate(lines)
        for algo in ("tree", "ring", "direct")
        if f"  {algo}  " in line
    }
    # One parameter a line, the layout named as one ('topology' alone read as a stray word).
    assert under["tree"] == ["layout topology"], out
    assert under["direct"] == ["seg 4 MiB", "layout topology"], out
    assert under["ring"] == ["seg 4 MiB", "layout topology"], out


def test_check() -> None:
    profile = _profile()
    checks = [
        RuleCheck(rule, rule.at_bytes or 1, 1234.5, best, 1000.0, 1.2345, 0.0123, faulted=True)
        for rule_set in profile.rule_sets
        for rule in rule_set.rules
        for best in (("recursive-doubling",) if rule.op == "all-reduce" else ("rabenseifner",))
    ]
    out = _render(render_check(checks, "64 ranks on 8 node(s)"))
    _assert_whole(out, {*LONG, "reduce-scatter"})
    # A beaten rule says so in words (the red is lost when piped or logged), and only a beaten one.
    assert out.count("1.234±0.012 beaten") == len(checks), out
    # One table per op, not split in parts: its natural width fits 80 columns, so piped output (Rich
    # then renders at 160, cli/console.py) fits too. The fastest, where it is not the chosen, is the
    # line under its rule, with its time.
    wide = _render_at(render_check(checks, "64 ranks on 8 node(s)"), 160)
    table = [line for line in wide.splitlines() if not line.startswith("64 ranks")]
    assert max(len(line.rstrip()) for line in table) <= WIDTH, wide
    assert wide.count("from") == 2 and out.count("from") == 2, out  # two ops, one table each
    faster = [line.split() for line in out.splitlines() if line.startswith(" ") and line.rstrip().endswith(" fastest")]
    beaten_by = [[c.best_algo, "1.00", "ms", "fastest"] for c in checks if c.best_algo != c.rule.algo]
    assert sorted(faster) == sorted(beaten_by), out
    held = [replace(c, faulted=False) for c in checks]
    out = _render(render_check(held, "64 ranks on 8 node(s)"))
    assert "1.234±0.012" in out and "beaten" not in out, out


def test_times_below_10_us_keep_two_decimals() -> None:
    """tune --check of an Open MPI profile showed the chosen and the fastest both as '1.5 us' beside a
    regret of 1.008: a tenth of a microsecond is 7% there."""
    rule = example_profile().rule_sets[0].rules[0]
    out = _render(
        render_check([RuleCheck(rule, 2048, 1.5123, "direct", 1.4998, 1.008, 0.036, faulted=False)], "2 ranks")
    )
    assert "1.51 us" in out and "1.50 us" in out, out
    assert "53.0 us" in _render(
        render_check([RuleCheck(rule, 2048, 53.04, "direct", 52.7, 1.006, 0.04, faulted=False)], "2 ranks")
    )


def test_fit_and_predict() -> None:
    report = fit_results(_rows())
    names = {f.algo for f in report.fits}
    assert set(LONG) <= names
    _assert_whole(_render(render_fit_report(report)), names)
    predicted = predict(report.fits, 8, [1024, 1 << 20, 1 << 24])
    _assert_whole(_render(render_prediction(predicted)), {p.algo for p in predicted.predictions})


def test_sweep_results() -> None:
    rows = [r for r in _rows() if r.algo in LONG]
    rows += [replace(r, op="reduce-scatter", in_place=not r.in_place) for r in rows]
    for table in results_tables(rows):
        _assert_whole(_render(table), set())
    out = "".join(_render(t) for t in results_tables(rows))
    _assert_whole(out, {*LONG})


def test_every_registered_algorithm_is_covered() -> None:
    assert set(LONG) <= set(algorithm_names())
    assert max(algorithm_names(), key=len) == "recursive-doubling"


def test_compare() -> None:
    from collbench.cli.compare import _points_table, _summary_table
    from collbench.report.compare import compare_rows

    base = [r for r in _rows() if r.algo in LONG]
    base += [replace(r, op="reduce-scatter") for r in base]
    new = [replace(r, time_us=r.time_us * 1.3) for r in base]
    comparison = compare_rows(base, new, threshold=0.05)
    out = _render(_points_table(comparison, list(comparison.changes), 0.05)) + _render(_summary_table(comparison))
    _assert_whole(out, {*LONG, "reduce-scatter"})


def _parts(out: str) -> list[list[str]]:
    """A split table's parts: SplitTable prints a blank line between them."""
    parts: list[list[str]] = [[]]
    for line in out.splitlines():
        if line.strip():
            parts[-1].append(line)
        elif parts[-1]:
            parts.append([])
    return [p for p in parts if p]


def test_predict_in_parts_names_the_size_in_each() -> None:
    # Two ops make the table wider than 80 columns: its second part held op, algorithm, simulated and
    # from, so the eight rows of one algorithm (one per size) could not be told apart. (Tree fitted at
    # 2 ranks, the rest at 4: the rows come from two world sizes, so the from column stays.)
    rows = [replace(r, world_size=2) if r.algo == "tree" else r for r in _rows()]
    rows += [replace(r, op="reduce-scatter") for r in rows]
    report = predict(fit_results(rows).fits, 4, [1024, 1 << 20, 1 << 24])
    table = render_prediction(report).renderables[0]
    parts = _parts(_render(table))
    assert len(parts) >= 2, parts
    for part in parts:
        header = next(line for line in part if line.lstrip().startswith("op "))
        assert header.split()[:3] == ["op", "algo", "size"], part
        body = [line for line in part if line.startswith(("all-reduce", "reduce-scatter"))]
        assert body and all(re.search(r" \d+ (B|KiB|MiB) ", line) for line in body), part


def test_compare_in_parts_names_the_size_in_each() -> None:
    from collbench.cli.compare import _points_table
    from collbench.report.compare import compare_rows

    base = [r for r in _rows() if r.algo in LONG]
    base += [replace(r, op="reduce-scatter", dtype="bfloat16") for r in base]
    new = [replace(r, time_us=r.time_us * 1.3) for r in base]
    comparison = compare_rows(base, new, threshold=0.05)
    parts = _parts(_render(_points_table(comparison, list(comparison.changes), 0.05)))
    assert len(parts) >= 2, parts
    for part in parts:
        header = next(line for line in part if line.lstrip().startswith("op "))
        assert header.split()[:4] == ["op", "algo", "dtype", "size"], part


def test_fit_of_gamma_zero_says_so_in_words() -> None:
    # The joint gamma of a reducing op fitted as 0 has no 1/gamma: the title read "1/gamma - GB/s".
    report = fit_results(_rows())
    zero = replace(report, fits=[replace(f, gamma_us_per_byte=0.0, gamma_folded=False) for f in report.fits])
    out = _render(render_fit_report(zero))
    assert "4 ranks; gamma fitted as 0" in out and "1/gamma - GB/s" not in out
    assert "1/gamma" in _render(render_fit_report(report))


def test_a_note_shared_by_algorithms_is_one_line() -> None:
    """A sweep of one world size folds gamma into beta for every algorithm of a reducing op: the same
    'gamma folded into beta: ...' under each took a line per algorithm (five for one fact)."""
    report = fit_results(_rows())
    folded = "gamma folded into beta: one algorithm at one world size cannot tell them apart"
    shared = replace(report, fits=[replace(f, note=folded, segments=()) for f in report.fits])
    out = _render(render_fit_report(shared))
    text = " ".join(out.split())
    algos = ", ".join(f.algo for f in shared.fits)
    assert text.count(folded) == 1, out
    assert f"all-reduce {algos} x{shared.fits[0].world_size}: {folded}" in text, out
    one_other = replace(shared, fits=[replace(shared.fits[0], note="another note"), *shared.fits[1:]])
    text = " ".join(_render(render_fit_report(one_other)).split())
    assert text.count(folded) == 1 and f"all-reduce {shared.fits[0].algo} x" in text


def test_an_alpha_fitted_as_0_is_marked_and_said_under_the_tables() -> None:
    # Non-negative least squares stops alpha at 0 where the sizes measured do not resolve a latency (a
    # cluster's tune at 512 KiB-16 MiB fitted six of eight so): "0.0 us" read as a latency of nothing.
    report = fit_results(_rows())
    zero = replace(report, fits=[replace(report.fits[0], alpha_us=0.0), *report.fits[1:]])
    out = _render(render_fit_report(zero))
    assert "0*" in out and "alpha fitted as 0: the latency is below what the measured sizes resolve" in out
    assert "0*" not in _render(render_fit_report(report)) and "alpha fitted as 0" not in _render(
        render_fit_report(report)
    )
    data = example_profile().to_dict()
    data["fits"][0]["alpha_us"] = 0.0
    shown = _render(render_fits(Profile.from_dict(data)))
    assert "0*" in shown and "0.0 us" not in shown and "alpha fitted as 0" in shown


def test_predict_says_what_every_row_shares_once() -> None:
    # Predicted away from the measured 4 ranks, every row came from the same fits (x4 (x2)), no error
    # is known and, for 2048 ranks, nothing is simulated: at 80 columns the rows took a second table of
    # algo, size and "x4 (x512)" alone, every line the same.
    report = predict(fit_results(_rows()).fits, 2048, [1024, 1 << 20, 1 << 24])
    out = _render(render_prediction(report))
    _assert_whole(out, {p.algo for p in report.predictions})
    table = _render(render_prediction(report).renderables[0])
    assert len(_parts(table)) == 1, table
    assert table.splitlines()[0].rstrip() == "all-reduce, predicted at 2048 ranks on 1 node from fits at 4 ranks (x512)"
    header = next(line for line in table.splitlines() if line.startswith("algo "))
    assert header.split() == ["algo", "size", "time", "latency", "GB/s"], table
    assert table.count("x512") == 1 and "?" not in table and "from" not in header
    for p in report.predictions:  # each prediction one row, said once
        named = [p.algo, *format_bytes(p.size_bytes).split()]
        assert sum(line.split()[:3] == named for line in table.splitlines()) == 1
    assert "error unknown: no measured point is near these sizes and this shape" in " ".join(out.split())
    # The choice per size: its one op in the title, not in every row.
    assert "all-reduce: choice per size (fastest)" in out
    assert not [line for line in out.split("choice per size")[1].splitlines() if line.startswith("all-reduce ")]


def test_predict_from_fits_of_several_world_sizes_says_each_rows() -> None:
    rows = [replace(r, world_size=2) if r.algo == "tree" else r for r in _rows()]
    report = predict(fit_results(rows).fits, 8, [1024, 1 << 20])
    table = _render(render_prediction(report).renderables[0])
    assert table.splitlines()[0].rstrip() == "all-reduce, predicted at 8 ranks on 1 node"
    for p in report.predictions:
        line = next(
            line for line in table.splitlines() if line.split()[:3] == [p.algo, *format_bytes(p.size_bytes).split()]
        )
        assert line.endswith("x2 (x4)" if p.algo == "tree" else "x4 (x2)"), table


def test_a_title_wider_than_its_table_is_one_line_above_it() -> None:
    # Rich wraps a title at its table's width: the choice per size of one algorithm printed its title
    # in pieces of 23 columns ("all-reduce: choice per" / "size (fastest)").
    report = predict(fit_results(_rows()).fits, 1024, [1024, 1 << 20])
    lines = _render(render_prediction(report)).splitlines()
    assert "all-reduce: choice per size (fastest)" in [line.rstrip() for line in lines]


def test_a_beta_fitted_as_0_is_marked_and_said() -> None:
    # A quick tune at 1-64 KiB on 3 ranks fitted three usable fits with beta 0: the tables printed '-'
    # in the bandwidth column with no word (as alpha's '0.0 us' before '0*').
    profile = example_profile()
    fits = list(profile.fits)
    i = next(n for n, f in enumerate(fits) if f.beta_gbps is not None)
    before = _render(render_fits(profile)).count("∞*")
    fits[i] = replace(fits[i], beta_us_per_byte=0.0, segments=())
    out = _render(render_fits(replace(profile, fits=tuple(fits))))
    assert re.search(rf"^{re.escape(fits[i].algo)}\s.*\s∞\*\s", out, re.M), out
    assert "∞* beta fitted as 0" in out and "measure larger sizes" in out, out
    assert out.count("∞*") == before + 1 + (before == 0), out  # the row, and the note once
    report = fit_results(_rows())
    plain = [f for f in report.fits if f.beta_gbps is not None and not f.segments]
    out = _render(render_fit_report(replace(report, fits=plain)))
    assert "∞*" not in out, out
    out = _render(render_fit_report(replace(report, fits=[replace(plain[0], beta_us_per_byte=0.0)])))
    assert out.count("∞*") == 2 and "∞* beta fitted as 0" in out, out


def test_the_beta_mark_is_explained_under_the_last_table_that_shows_it() -> None:
    # fit printed the legend of '∞*' under the fits' table, before the segments' tables that held the
    # only marks (the example results: one-shot, recursive-doubling and two-tree below 1 MiB).
    report = fit_results(_rows())
    out = _render(render_fit_report(report)).splitlines()
    legend = [n for n, line in enumerate(out) if line.startswith("∞* beta fitted as 0")]
    marks = [n for n, line in enumerate(out) if "∞*" in line and n not in legend]
    assert len(legend) == 1 and marks, "\n".join(out)
    assert legend[0] > max(marks), "\n".join(out)
    assert any(line.startswith("segments of") for line in out[: marks[0]]), "\n".join(out)
    # A mark in the fits' table alone keeps its legend under that table, before any segments' table.
    plain = [f for f in report.fits if f.beta_gbps is not None]
    plain = [f for f in plain if all(s.to_dict()["beta_gbps"] is not None for s in f.segments)]
    assert any(f.segments for f in plain[1:])
    fits = [replace(plain[0], beta_us_per_byte=0.0, segments=()), *plain[1:]]
    out = _render(render_fit_report(replace(report, fits=fits))).splitlines()
    legend = [n for n, line in enumerate(out) if line.startswith("∞* beta fitted as 0")]
    first_segments = next(n for n, line in enumerate(out) if line.startswith("segments of"))
    marks = [n for n, line in enumerate(out) if "∞*" in line and n not in legend]
    assert len(legend) == 1 and max(marks) < legend[0] < first_segments, "\n".join(out)


def test_a_piecewise_fit_says_its_segments_once() -> None:
    # "all-reduce native x2: piecewise: 3 segments, breaks at 262144, 2097152 bytes" printed above the
    # table "segments of all-reduce native x2" whose from/to columns say the same.
    report = fit_results(_rows())
    assert any(f.segments for f in report.fits)
    out = _render(render_fit_report(report))
    assert "segments of all-reduce" in out and "piecewise:" not in out and "breaks at" not in out
