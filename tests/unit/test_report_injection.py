"""Every text the report takes from a file reaches the page escaped: a results file (JSONL, CSV or
Parquet), a profile and a topology whose names hold markup make a page with no element, attribute or
script that the files wrote. The page in a real browser: tests/browser/test_report_chromium.py."""

from __future__ import annotations

import re
from dataclasses import replace
from html.parser import HTMLParser
from pathlib import Path

import pytest
from report_inputs import EXAMPLE_PROFILE, EXAMPLE_RESULTS
from typer.testing import CliRunner

from collbench.cli.app import app
from collbench.results.io import read_rows, write_rows
from collbench.results.row import ResultRow
from collbench.topology.io import save_topology
from collbench.topology.model import Device, DeviceKind, Link, LinkKind, Topology

PAYLOAD = (
    "x\"'><script>document.title='PWNED'</script><img src=x onerror=\"document.title='PWNED'\">"
    "</script><!--<svg onload=alert(1)>"
)
"""Breaks out of a text node, an attribute in either quotes, an SVG title and a script's data."""

TEXT_FIELDS = (
    "backend",
    "host",
    "layout",
    "torch_version",
    "backend_version",
    "cuda_version",
    "driver_version",
    "device_name",
    "nccl_algo",
    "nccl_proto",
    "topology_fingerprint",
    "source",
)


def hostile_rows() -> list[ResultRow]:
    rows = [r for r in read_rows(EXAMPLE_RESULTS) if r.algo in ("ring", "tree")]
    return [replace(r, **{f: PAYLOAD for f in TEXT_FIELDS}) for r in rows]


def hostile_topology() -> Topology:
    devices = tuple(
        Device(id=f"CPU{i}", kind=DeviceKind.CPU, index=i, name=PAYLOAD, bus_id=None, host=PAYLOAD) for i in range(4)
    )
    links = tuple(
        Link(f"CPU{i}", f"CPU{j}", LinkKind.LOOPBACK, bandwidth_gbps=10.0) for i in range(4) for j in range(i + 1, 4)
    )
    return Topology(host=PAYLOAD, devices=devices, links=links, source="host", note=PAYLOAD)


def hostile_profile(tmp_path: Path) -> Path:
    text = EXAMPLE_PROFILE.read_text()
    text = re.sub(r"^command: .*$", "command: " + repr(PAYLOAD).replace("\\'", "''"), text, count=1, flags=re.M)
    path = tmp_path / "hostile.yaml"
    path.write_text(text)
    return path


class _Elements(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.handlers: list[str] = []
        self.comments: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.handlers += [f"{tag} {name}" for name, _ in attrs if name.startswith("on")]

    def handle_comment(self, data: str) -> None:
        self.comments.append(data)


def assert_no_payload(html: str) -> None:
    """No element, event handler or comment came from a file: the page has its own two scripts only,
    and no raw piece of the payload is left."""
    parser = _Elements()
    parser.feed(html)
    assert parser.tags.count("script") == 2, parser.tags.count("script")
    assert "img" not in parser.tags
    assert parser.handlers == []
    assert parser.comments == []
    for raw in ("<script>document", "<img", 'onerror="', "<!--", "<svg onload", "'PWNED'"):
        assert raw not in html, raw


def _write(rows: list[ResultRow], path: Path) -> Path:
    write_rows(path, rows)
    return path


@pytest.mark.parametrize("suffix", [".jsonl", ".csv", ".parquet"])
def test_a_hostile_results_file_reaches_the_page_escaped(tmp_path: Path, suffix: str) -> None:
    results = _write(hostile_rows(), tmp_path / f"hostile{suffix}")
    assert {r.backend for r in read_rows(results)} == {PAYLOAD}  # the file really holds it
    topo = tmp_path / "topo.yaml"
    save_topology(hostile_topology(), topo)
    out = tmp_path / "report.html"
    run = CliRunner().invoke(
        app,
        [
            "report",
            str(results),
            "--topology",
            str(topo),
            "--profile",
            str(hostile_profile(tmp_path)),
            "--output",
            str(out),
        ],
    )
    assert run.exit_code == 0, run.output
    html = out.read_text()
    assert_no_payload(html)
    # Shown as text, not lost: the escaped payload is on the page.
    assert "&lt;script&gt;document.title=" in html
