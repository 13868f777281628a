"""The report page: every section, well-formed SVG, the profile's rules, noise marks, and no network."""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
import xml.etree.ElementTree as ET
from html.parser import HTMLParser

import pytest
from report_inputs import a100_topology, example_profile, with_stalls

from collbench.errors import UserError
from collbench.models.fit import fit_results
from collbench.profile.document import Profile
from collbench.report.page import SECTION_IDS, ReportInputs, build_report
from collbench.report.svg import Band, Marker, Point, Series, band_chart, log_chart
from collbench.results.io import read_rows
from collbench.units import size_label

NOW = dt.datetime(2026, 11, 23, 12, 0, tzinfo=dt.timezone.utc)
SVG_NS = "{http://www.w3.org/2000/svg}"


class _Ids(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.ids: list[str] = []
        self.srcs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if name == "id" and value:
                self.ids.append(value)
            if name in ("src", "href") and value and not value.startswith("#"):
                self.srcs.append(value)


def _svgs(html: str) -> list[ET.Element]:
    return [ET.fromstring(m) for m in re.findall(r"<svg .*?</svg>", html, flags=re.S)]


@pytest.fixture(scope="module")
def example_html() -> str:
    from report_inputs import EXAMPLE_RESULTS

    rows = read_rows(EXAMPLE_RESULTS)
    inputs = ReportInputs(rows=tuple(with_stalls(rows)), profile=_refitted_profile(), topology=a100_topology())
    return build_report(inputs, now=NOW)


def _refitted_profile() -> Profile:
    """The example profile with its fits made again from its rows. The file's own fits predate the
    usability bound (each misses a point of its own by 30-96%), so none of them would be drawn; made
    now, direct, native and tree follow their points and the other five say they cannot."""
    from report_inputs import EXAMPLE_RESULTS

    return dataclasses.replace(example_profile(), fits=tuple(fit_results(read_rows(EXAMPLE_RESULTS)).fits))


def test_every_section_and_nothing_fetched(example_html: str) -> None:
    parser = _Ids()
    parser.feed(example_html)
    for section in SECTION_IDS:
        assert section in parser.ids
    assert "op-all-reduce-gloo-4" in parser.ids and "js-errors" in parser.ids
    # Opens offline: no external script, stylesheet, image or font.
    assert parser.srcs == []
    assert "http://" not in example_html.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "https://" not in example_html


def test_svgs_are_well_formed_and_draw_every_algorithm(example_html: str) -> None:
    svgs = _svgs(example_html)
    charts = [s for s in svgs if s.get("class") == "chart"]
    assert len(charts) == 2  # busbw and time of the one op
    algos = {"direct", "native", "one-shot", "rabenseifner", "recursive-doubling", "ring", "tree", "two-tree"}
    for chart in charts:
        legend = {t.text for t in chart.iter(f"{SVG_NS}text") if t.get("class") == "legend"}
        assert legend == algos
        # Measured lines, dashed model curves (one per usable fit, none for a fit that misses its
        # points), spread bars, points with hover text.
        kinds = [e.get("class") for e in chart.iter(f"{SVG_NS}polyline")]
        usable = [f for f in _refitted_profile().fits if f.usable]
        assert kinds.count("measured") == len(algos) and kinds.count("model") == len(usable) == 3
        assert sum(1 for e in chart.iter(f"{SVG_NS}line") if e.get("class") == "spread") > 100
        # Every 7th row stalled 20% of its iterations: those points carry the red ring.
        assert sum(1 for e in chart.iter(f"{SVG_NS}circle") if e.get("class") == "noisy") > 10
    machine = next(s for s in svgs if s.get("class") == "machine")
    assert len([g for g in machine.iter(f"{SVG_NS}g") if g.get("class") == "ring"]) == 1
    assert len([g for g in machine.iter(f"{SVG_NS}g") if g.get("class") == "tree"]) == 2
    # Every GPU pair (NV4), and each NIC to its one GPU behind the same switch (PXB); the 22 SYS paths
    # through the CPU stay in the matrix only.
    links = [e.findtext(f"{SVG_NS}title") or "" for e in machine.iter(f"{SVG_NS}line") if e.get("class") == "link"]
    assert sorted(t.split(":")[1].split(",")[0].strip() for t in links) == ["nvlink x4"] * 6 + ["pxb x1"] * 4


def test_crossovers_rules_and_provenance(example_html: str) -> None:
    profile = example_profile()
    # The models cross from tree to direct at 9 KiB (the tree priced in the 4 MiB segments its rows ran
    # in; 16 KiB when it was priced as one segment), but the rules (from the measurements) switch
    # between 64 and 128 KiB: the report does not mark a crossing its profile contradicts, and says so.
    assert "crossover" in example_html and "tree | direct" not in example_html
    assert "the models cross from tree to direct at 9.0K; the profile&#x27;s rules" in example_html
    assert "switch from tree to direct at 90.5K: the crossing is not marked" in example_html
    for rule in profile.rules:
        assert f"{rule.min_bytes} ({size_label(rule.min_bytes)})" in example_html
    assert example_html.count('class="band"') == len(profile.rules)
    assert "4 ranks, 1 node: measured" in example_html
    for fact in (profile.command, profile.created, profile.fingerprint, "2.13.0+cpu", "2026-11-23 12:00:00 UTC"):
        assert fact in example_html
    # nccl-tests' columns, sortable.
    assert 'class="sortable results"' in example_html and ">busbw (GB/s)</th>" in example_html
    assert ">stall %</th>" in example_html


def test_a_predicted_rule_set_is_drawn_hatched() -> None:
    from report_inputs import EXAMPLE_RESULTS

    profile = example_profile()
    data = profile.to_dict()
    shapes = data["rule_sets"]
    shapes.append({**shapes[0], "world_size": 64, "predicted": True, "layout": None})
    two = Profile.from_dict(data)
    html = build_report(ReportInputs(rows=tuple(read_rows(EXAMPLE_RESULTS)), profile=two), now=NOW)
    assert "64 ranks, 1 node: predicted" in html and 'fill="url(#hatch)"' in html
    assert "Hatched bands and rules marked <em>predicted</em>" in html
    # A profile of measured shapes only draws nothing hatched: the legend of hatching is not there either.
    measured = build_report(ReportInputs(rows=tuple(read_rows(EXAMPLE_RESULTS)), profile=profile), now=NOW)
    assert 'fill="url(#hatch)"' not in measured and "Hatched bands" not in measured


def test_without_profile_or_topology_or_stalls_the_sections_say_so() -> None:
    from report_inputs import EXAMPLE_RESULTS

    rows = [r for r in read_rows(EXAMPLE_RESULTS) if r.algo in ("ring", "tree")]
    html = build_report(ReportInputs(rows=tuple(rows)), now=NOW)
    assert "No topology given" in html and "No profile given" in html
    assert "no noise marks" in html and "noisy" not in html.split("<body>")[1].split("</style>")[-1].replace(
        "svg .noisy", ""
    )
    # The models are fitted here when no profile brings them.
    assert "here, from the rows" in html and 'class="model"' in html
    with pytest.raises(UserError, match="no result rows"):
        build_report(ReportInputs(rows=()))


def test_log_chart_ticks_and_escaping() -> None:
    pts = tuple(Point(float(2**k), 10.0 * k, 9.0 * k, 12.0 * k, f"<{k}>") for k in range(4, 21))
    svg = log_chart(
        [Series("a<b", "#123456", pts)], title="t&t", x_label="size", y_label="us", markers=[Marker(4096, "x|y")]
    )
    root = ET.fromstring(svg)
    ticks = [t.text for t in root.iter(f"{SVG_NS}text") if t.get("class") == "tick"]
    assert ticks[:3] == ["16B", "128B", "1K"] and "512K" in ticks and "100" in ticks
    assert "a&lt;b" in svg and "t&amp;t" in svg
    assert len([c for c in root.iter(f"{SVG_NS}circle")]) == len(pts)
    empty = ET.fromstring(log_chart([], title="none", x_label="x", y_label="y"))
    assert "no points" in "".join(empty.itertext())


def test_band_chart_clips_to_the_axis() -> None:
    bands = [Band(0, 4095, "tree", "#111111", "a"), Band(4096, None, "ring", "#222222", "b", hatched=True)]
    root = ET.fromstring(band_chart(bands, lo=256, hi=1 << 24, title="x"))
    rects = [r for r in root.iter(f"{SVG_NS}rect") if r.get("class") == "band"]
    assert len(rects) == 2
    x0, w0 = float(rects[0].get("x", 0)), float(rects[0].get("width", 0))
    x1, w1 = float(rects[1].get("x", 0)), float(rects[1].get("width", 0))
    assert x0 == pytest.approx(10.0) and x0 + w0 == pytest.approx(x1, abs=0.2)
    assert x1 + w1 == pytest.approx(750.0)


def test_two_mode_points_are_marked_too() -> None:
    from dataclasses import replace

    from report_inputs import EXAMPLE_RESULTS

    rows = [r for r in read_rows(EXAMPLE_RESULTS) if r.algo == "ring"]
    marked = [replace(r, bimodal=r.size_bytes == 4096) for r in rows]
    html = build_report(ReportInputs(rows=tuple(marked)), now=NOW)
    charts = [s for s in _svgs(html) if s.get("class") == "chart"]
    for chart in charts:
        rings = [c for c in chart.iter(f"{SVG_NS}circle") if c.get("class") == "noisy"]
        assert len(rings) == 1 and "two modes" in (rings[0].findtext(f"{SVG_NS}title") or "")


def test_nccl_tests_rows_claim_no_spread() -> None:
    # An imported log holds one time per row (nccl-tests' mean over its iterations) in every time
    # field: the hover text gave it as p25, fastest, p50 and slowest alike, and the note said the rows
    # were recorded before sweeps measured stalls.
    from html import unescape
    from pathlib import Path

    from collbench.importers.nccl_tests import read_nccl_tests

    log = Path(__file__).parents[1] / "fixtures" / "real" / "all_reduce_perf-h100-2node-mpirun-gcp.log"
    html = unescape(build_report(ReportInputs(rows=tuple(read_nccl_tests(log))), now=NOW))
    assert "nccl-tests' mean over its iterations (no spread recorded)" in html
    assert "iterations: fastest" not in html and "recorded before sweeps" not in html
    assert "These rows are nccl-tests' times, each the mean over its iterations" in html
    # Rows collbench measured keep their spread beside them on one page.
    from report_inputs import EXAMPLE_RESULTS

    both = unescape(build_report(ReportInputs(rows=(*read_rows(EXAMPLE_RESULTS), *read_nccl_tests(log))), now=NOW))
    assert "iterations: fastest" in both and "(no spread recorded)" in both


def test_a_narrow_time_axis_still_has_numbers_to_read() -> None:
    # Times from 180 to 260 us (a 2-rank gloo all-reduce at 1-64 KiB) fall between 1-2-5 steps but one:
    # the axis said only "200".
    pts = tuple(Point(float(2**k), 180.0 + 5 * (k - 10), 175.0, 262.0, "") for k in range(10, 17))
    root = ET.fromstring(log_chart([Series("ring", "#123456", pts)], title="t", x_label="size", y_label="us"))
    ticks = [t.text for t in root.iter(f"{SVG_NS}text") if t.get("class") == "tick" and "K" not in (t.text or "")]
    assert len(ticks) >= 3 and "200" in ticks, ticks
    values = [float(t or "nan") for t in ticks]
    assert values == sorted(values) and all(170 <= v <= 270 for v in values), ticks


def test_the_machine_section_names_each_fingerprint(example_html: str) -> None:
    # It said "fingerprint X" of the topology's, beside a profile that carries the machine's (another).
    from collbench.profile.document import machine_fingerprint

    topo = a100_topology()
    assert (
        f"fingerprints: topology <code>{topo.fingerprint}</code> (in result rows), "
        f"machine <code>{machine_fingerprint(topo)}</code> (in profiles)."
    ) in example_html
