"""The report's charts read as the decisions do: points at the p25, busbw bars that run from the p50's
busbw up to the fastest iteration's (busbw falls as time grows), axes that span what was measured,
labels inside the drawing, and a machine drawing sized to what it shows."""

from __future__ import annotations

import datetime as dt
import math
import re
import xml.etree.ElementTree as ET
from dataclasses import replace

import pytest
from report_inputs import EXAMPLE_RESULTS

from collbench.report.page import ReportInputs, build_report
from collbench.report.svg import Marker, Point, Series, log_chart
from collbench.results.io import read_rows
from collbench.results.row import ResultRow
from collbench.schedules.ops import Op
from collbench.topology.model import Device, DeviceKind, Link, LinkKind, Topology
from collbench.units import size_label

NOW = dt.datetime(2026, 11, 23, 12, 0, tzinfo=dt.timezone.utc)
SVG = "{http://www.w3.org/2000/svg}"
KIB = 1024


def _rows() -> list[ResultRow]:
    """Two algorithms on 4 ranks; native at 512 KiB had one 80 ms stall (p50 194 us) as on a busy
    3 GB/s machine: its slowest iteration must not set the scale of either chart."""
    template = next(r for r in read_rows(EXAMPLE_RESULTS) if r.algo == "ring")
    out = []
    for algo, base_us in (("native", 40.0), ("ring", 60.0)):
        for k in range(10, 23, 2):
            size = 1 << k
            p25 = base_us + size / 3e3  # about 3 GB/s of algorithm bandwidth at the top
            p50, fastest, slowest = 1.15 * p25, 0.9 * p25, 3.0 * p25
            if algo == "native" and size == 512 * KIB:
                p50, slowest = 194.0, 80_000.0
                p25, fastest = 170.0, 150.0
            out.append(
                replace(
                    template,
                    algo=algo,
                    size_bytes=size,
                    count=size // 4,
                    time_us=p50,
                    time_us_p25=p25,
                    time_us_min=fastest,
                    time_us_max=slowest,
                    time_us_mean=p50,
                )
            )
    return out


def _charts(html: str) -> dict[str, ET.Element]:
    svgs = [ET.fromstring(m) for m in re.findall(r'<svg [^>]*class="chart".*?</svg>', html, flags=re.S)]
    return {("busbw" if (s.get("aria-label") or "").endswith("busbw") else "time"): s for s in svgs}


def _y_scale(chart: ET.Element) -> tuple[float, float]:
    """(a, b) with log10(value) = a + b * y, from the y axis' tick labels (those anchored at their end)."""
    ticks = [
        (float(t.get("y", 0)) - 4, float(t.text or "nan"))
        for t in chart.iter(f"{SVG}text")
        if t.get("class") == "tick" and t.get("text-anchor") == "end"
    ]
    (y0, v0), (y1, v1) = ticks[0], ticks[-1]
    b = (math.log10(v1) - math.log10(v0)) / (y1 - y0)
    return math.log10(v0) - b * y0, b


def _y_ticks(chart: ET.Element) -> list[float]:
    return [
        float(t.text or "nan")
        for t in chart.iter(f"{SVG}text")
        if t.get("class") == "tick" and t.get("text-anchor") == "end"
    ]


@pytest.fixture(scope="module")
def html() -> str:
    return build_report(ReportInputs(rows=tuple(_rows())), now=NOW)


def test_busbw_bars_run_from_the_p50_up_to_the_fastest_iteration(html: str) -> None:
    chart = _charts(html)["busbw"]
    factor = Op.parse("all-reduce").spec.busbw_factor(4)
    a, b = _y_scale(chart)
    rows = {(r.algo, r.size_bytes): r for r in _rows()}
    bars = [e for e in chart.iter(f"{SVG}line") if e.get("class") == "spread"]
    dots = [c for c in chart.iter(f"{SVG}circle") if c.get("class") is None]
    assert len(bars) == len(dots) == len(rows)
    for bar, dot in zip(bars, dots, strict=True):
        tip = dot.findtext(f"{SVG}title") or ""
        algo, label = tip.split(" ")[:2]
        size = next(s for a, s in rows if a == algo and size_label(s) + ":" == label)
        r = rows[(algo, size)]
        top_y = min(float(bar.get("y1", 0)), float(bar.get("y2", 0)))
        bottom_y = max(float(bar.get("y1", 0)), float(bar.get("y2", 0)))
        fastest = factor * size / r.time_us_min / 1e3
        p50 = factor * size / r.time_us / 1e3
        assert 10 ** (a + b * top_y) == pytest.approx(fastest, rel=0.03), tip
        assert 10 ** (a + b * bottom_y) == pytest.approx(p50, rel=0.03), tip
        # The point is the p25's busbw, inside its bar.
        assert r.time_us_p25 is not None
        point = 10 ** (a + b * float(dot.get("cy", 0)))
        assert point == pytest.approx(factor * size / r.time_us_p25 / 1e3, rel=0.03), tip
        assert "p25" in tip and "fastest" in tip and "slowest" in tip


def test_axes_span_the_measured_range_not_the_stalls(html: str) -> None:
    charts = _charts(html)
    factor = Op.parse("all-reduce").spec.busbw_factor(4)
    rows = _rows()
    fastest_bw = max(factor * r.size_bytes / r.time_us_min / 1e3 for r in rows)
    slowest_bw = min(factor * r.size_bytes / r.time_us / 1e3 for r in rows)
    bw_ticks = _y_ticks(charts["busbw"])
    # No more than a decade either side of what was measured (not 0.001-1,000 GB/s on a 3 GB/s machine).
    assert max(bw_ticks) <= 10 * fastest_bw and min(bw_ticks) >= slowest_bw / 10, bw_ticks
    time_ticks = _y_ticks(charts["time"])
    assert max(time_ticks) <= 10 * max(r.time_us for r in rows), time_ticks  # not the 80 ms stall
    # Each chart says what its points and bars are.
    for chart in charts.values():
        note = " ".join(t.text or "" for t in chart.iter(f"{SVG}text") if t.get("class") == "legend-note")
        assert "p25" in note and "fastest iteration" in note and "p50" in note
        assert "p25" in (chart.get("aria-label", "") + "".join(chart.itertext()))


def test_labels_stay_inside_the_chart() -> None:
    """A crossover near the right edge writes its label leftwards; a long legend wraps and the chart
    grows to hold it."""
    pts = tuple(Point(float(2**k), 10.0 * k, 9.0 * k, 12.0 * k, "") for k in range(4, 21))
    series = [Series(f"algorithm-with-a-long-name-{i}", "#123456", pts) for i in range(6)]
    svg = ET.fromstring(
        log_chart(
            series,
            title="t",
            x_label="size",
            y_label="us",
            markers=[Marker(2.0**20, "recursive-doubling | rabenseifner")],
            width=600,
            legend_note="points: p25",
        )
    )
    width, height = float(svg.get("width", 0)), float(svg.get("height", 0))
    label = next(t for t in svg.iter(f"{SVG}text") if t.get("class") == "marker-label")
    assert label.get("text-anchor") == "end" and float(label.get("x", 0)) < width
    assert max(float(t.get("y", 0)) for t in svg.iter(f"{SVG}text")) < height - 4


def _cpu_topology(n: int) -> Topology:
    devices = tuple(Device(id=f"CPU{i}", kind=DeviceKind.CPU, index=i, host="vm") for i in range(n))
    links = tuple(
        Link(f"CPU{i}", f"CPU{j}", LinkKind.LOOPBACK, bandwidth_gbps=10.0) for i in range(n) for j in range(i + 1, n)
    )
    return Topology(host="vm", devices=devices, links=links, source="host")


def test_two_cpu_ranks_take_a_small_drawing() -> None:
    rows = [r for r in read_rows(EXAMPLE_RESULTS) if r.algo in ("ring", "direct")]
    rows = [replace(r, world_size=2) for r in rows]
    page = build_report(ReportInputs(rows=tuple(rows), topology=_cpu_topology(2)), now=NOW)
    machine = ET.fromstring(re.findall(r'<svg [^>]*class="machine".*?</svg>', page, flags=re.S)[0])
    assert float(machine.get("width", 0)) <= 260 and float(machine.get("height", 0)) <= 320


def test_the_evidence_column_is_words() -> None:
    from report_inputs import example_profile

    from collbench.profile.rules import Rule

    profile = example_profile()
    data = profile.to_dict()
    rule = data["rule_sets"][0]["rules"][0]
    rule.update(tie_with=["native", "ring (seg=65536)"], separation=0.234, noise=0.05)
    page = build_report(
        ReportInputs(rows=tuple(read_rows(EXAMPLE_RESULTS)), profile=type(profile).from_dict(data)), now=NOW
    )
    assert Rule.from_dict(rule).separation == 0.234
    evidence = re.findall(r'<td class="evidence">(.*?)</td>', page)
    # 23% apart beyond a noise of 5% at the rule's size: the ties were at its other sizes.
    assert (
        "the next fastest 23% slower; noise 5%; tied at other sizes of the range with native, ring (one segment up to "
        "64K, segments of 64K above)" in evidence
    )
    rule.update(separation=0.03)
    within = build_report(
        ReportInputs(rows=tuple(read_rows(EXAMPLE_RESULTS)), profile=type(profile).from_dict(data)), now=NOW
    )
    assert (
        "the next fastest 3% slower; noise 5%; tied with native, ring (one segment up to 64K, segments of 64K above)"
        in within
    )
    assert not any("{" in e or "[" in e or "&quot;" in e for e in evidence), evidence


def test_a_rule_below_its_segment_size_says_it_ran_whole() -> None:
    """'segments of 4M' was the params of a rule from 0 to 90.5K (the example profile's tree): each of its
    sizes ran as one segment. Said per rule range: below, across and above the segment size."""
    from report_inputs import example_profile

    profile = example_profile()
    rules = profile.rule_sets[0].rules
    assert [(r.min_bytes, r.max_bytes) for r in rules] == [(0, 92681), (92682, 5931641), (5931642, None)]
    assert {r.params["segment_bytes"] for r in rules} == {4 << 20}
    page = build_report(ReportInputs(rows=tuple(read_rows(EXAMPLE_RESULTS)), profile=profile), now=NOW)
    assert re.findall(r'<td class="params">(.*?)</td>', page) == [
        "one segment of up to 4M, layout topology",
        "one segment up to 4M, segments of 4M above, layout topology",
        "segments of 4M, layout topology",
    ]


def test_a_chart_of_only_zero_byte_calls_is_empty() -> None:
    """Rows of only 0-byte calls (nccl-tests -b 0 -e 0) ended report in min()'s ValueError traceback: a log
    axis of sizes has no place for 0. The chart says it has no points (tests/cli: the page is written)."""
    zero = Series("ring", "#000", (Point(0.0, 5.0, 4.0, 6.0, "0 B"),), ((0.0, 5.0),))
    assert "no points" in log_chart([zero], title="t", x_label="x", y_label="y")
