"""The report's wording and what it names: plurals, ∞ as the terminal writes it, no caption for lines
not drawn, the selection in words, a mixed report's links told apart, and for a multi-shape tune the
results files that exist and the rings of the shape drawn."""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
from pathlib import Path

from report_inputs import EXAMPLE_RESULTS, example_profile
from synthetic_rows import make_rows

from collbench.profile.document import Profile, ProfileLayout, RuleSet
from collbench.report.page import ReportInputs, build_report, write_beside_profile
from collbench.results.io import read_rows
from collbench.results.row import ResultRow
from collbench.topology.model import Device, DeviceKind, Link, LinkKind, Topology

NOW = dt.datetime(2026, 11, 23, 12, 0, tzinfo=dt.timezone.utc)


def _cpus(n: int, links: int | None = None) -> Topology:
    devices = tuple(Device(id=f"CPU{i}", kind=DeviceKind.CPU, index=i, host="vm") for i in range(n))
    pairs = [(a, b) for a in range(n) for b in range(a + 1, n)][:links]
    return Topology(
        host="vm",
        devices=devices,
        links=tuple(Link(f"CPU{a}", f"CPU{b}", LinkKind.LOOPBACK, bandwidth_gbps=10.0) for a, b in pairs),
        source="host",
    )


def _page(**changes: object) -> str:
    inputs = ReportInputs(rows=tuple(read_rows(EXAMPLE_RESULTS)), profile=example_profile(), topology=_cpus(4))
    return build_report(dataclasses.replace(inputs, **changes), now=NOW)  # type: ignore[arg-type]


def _text(html: str) -> str:
    return re.sub(r"<[^>]+>", " ", html)


def test_one_link_is_singular_and_unbounded_rules_say_infinity() -> None:
    page = _page(topology=_cpus(2))
    assert "1 link;" in page and "1 links" not in page
    assert "6 links;" in _page()
    rules = re.search(r'<table class="rules">.*?</table>', page, flags=re.S)
    assert rules is not None
    cells = re.findall(r"<td>([^<]*)</td>", rules.group(0))
    assert "∞" in cells and "inf" not in cells
    assert not re.search(r"-inf\b", page)


def test_the_crossover_caption_is_there_only_where_crossovers_are_drawn() -> None:
    # Recursive doubling is faster below ~430 KiB, the ring above (as tests/unit/test_report_crossovers).
    rows = make_rows("ring", 8, 10.0, 1e-3 / 5, 0.0, noise=0.0, seed=0)
    rows += make_rows("recursive-doubling", 8, 10.0, 1e-3 / 5, 0.0, noise=0.0, seed=0)
    drawn = build_report(ReportInputs(rows=tuple(rows)), now=NOW)
    assert '<ul class="crossovers">' in drawn and "Vertical lines: crossovers of the models." in drawn
    one_algo = build_report(ReportInputs(rows=tuple(r for r in rows if r.algo == "ring")), now=NOW)
    assert '<ul class="crossovers">' not in one_algo and "crossovers of the models" not in one_algo


def test_the_selection_is_a_row_per_setting_in_words() -> None:
    text = _text(_page())
    assert "selection: min gain" in text and "selection: max threshold" in text
    assert '{"min_gain"' not in text and "{&quot;" not in text


def test_a_mixed_report_names_the_backend_where_two_sections_share_an_op_and_rank_count() -> None:
    rows = tuple(read_rows(EXAMPLE_RESULTS))
    mixed = rows + tuple(dataclasses.replace(r, backend="mpi") for r in rows)
    nav = re.search(r"<nav>.*?</nav>", _page(rows=mixed, profile=None), flags=re.S)
    assert nav is not None
    labels = re.findall(r"<a [^>]*>([^<]*)</a>", nav.group(0))
    ops = [label for label in labels if " x" in label]
    assert len(ops) == len(set(ops)) == 2 and all(label.endswith(("(gloo)", "(mpi)")) for label in ops), ops
    single = re.search(r"<nav>.*?</nav>", _page(), flags=re.S)
    assert single is not None and "all-reduce x4</a>" in single.group(0)


def _two_shapes() -> tuple[tuple[ResultRow, ...], Profile]:
    """The example's rows and rules at 4 ranks, and the same at 2 ranks with a ring of its own."""
    profile = example_profile()
    four = profile.rule_sets[0]
    two = RuleSet(world_size=2, nodes=1, rules=four.rules, layout=ProfileLayout("topology", rings=((1, 0),), trees=()))
    rows = tuple(read_rows(EXAMPLE_RESULTS))
    rows += tuple(dataclasses.replace(r, world_size=2) for r in rows)
    return rows, dataclasses.replace(profile, rule_sets=(two, four))


def test_a_multi_shape_report_draws_the_largest_shapes_rings_and_names_the_files_written(tmp_path: Path) -> None:
    rows, profile = _two_shapes()
    shapes = [tmp_path / "p-2ranks-results.jsonl", tmp_path / "p-4ranks-results.jsonl"]
    path, why = write_beside_profile(tmp_path / "p.yaml", rows, profile, _cpus(4), shapes)
    assert why is None and path is not None
    page = path.read_text()
    assert "the profile&#x27;s layout &#x27;topology&#x27; for 4 ranks" in page
    assert "ring 0: 0 &rarr; 1 &rarr; 2 &rarr; 3" in page and "ring 0: 1 &rarr; 0" not in page
    named = re.search(r"<th>result files</th><td>([^<]*)</td>", page)
    assert named is not None and named.group(1) == ", ".join(map(str, shapes))
