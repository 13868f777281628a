"""A tune's profile says what measured its fits, as a fits file (``fit -O``) does.

Fits files recorded their rows' source since 34e9ff5 ('source': collbench, nccl-tests or mixed); the
copy a tune stored in its profile did not, so ``predict --profile`` could not say "fitted from
collbench's own rows" of it. A profile written before says nothing of it and still loads. Nor did it
keep the nodes and device its rows said (``predict`` reads a GPU's generation and links from the
device), which fit's files kept: both now come from ``models.stored.with_group``, one home.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import yaml
from typer.testing import CliRunner

from collbench.cli.app import app
from collbench.models.fitted import MIXED_SOURCES, fitted_from
from collbench.profile.document import Profile
from collbench.results.io import read_rows, write_rows
from collbench.results.row import DEFAULT_SOURCE, NCCL_TESTS_SOURCE, ResultRow
from collbench.tuning.pipeline import TuneConfig, decide

RESULTS = Path(__file__).resolve().parents[1] / "fixtures" / "golden" / "example-results.jsonl"


def _profile(rows: list[ResultRow]) -> Profile:
    return decide(TuneConfig(command="collbench tune"), rows, topology=None, layout=None, notes=[]).profile


def test_a_tunes_profile_keeps_what_measured_its_fits(tmp_path: Path) -> None:
    rows = read_rows(RESULTS)
    assert {r.source for r in rows} == {DEFAULT_SOURCE}
    saved = _profile(rows).save(tmp_path / "p.yaml")
    fits = yaml.safe_load(saved.read_text())["fits"]
    assert fits and {f["source"] for f in fits} == {DEFAULT_SOURCE}
    loaded = Profile.load(saved)
    assert {fitted_from(f) for f in loaded.fits} == {"fitted from collbench's own rows"}


def test_a_group_of_rows_from_two_sources_is_said_mixed() -> None:
    rows = read_rows(RESULTS)
    # One group's rows (ring's) half from an imported log: that fit alone is mixed.
    ring = [i for i, r in enumerate(rows) if r.algo == "ring"]
    assert len(ring) >= 2
    for i in ring[::2]:
        rows[i] = dataclasses.replace(rows[i], source=NCCL_TESTS_SOURCE)
    sources = {f.algo: f.source for f in _profile(rows).fits}
    assert sources.pop("ring") == MIXED_SOURCES
    assert set(sources.values()) == {DEFAULT_SOURCE}


def test_a_profile_from_before_without_the_source_still_loads(tmp_path: Path) -> None:
    data = _profile(read_rows(RESULTS)).to_dict()
    for fit in data["fits"]:
        del fit["source"]
    old = tmp_path / "old.yaml"
    old.write_text(yaml.safe_dump(data))
    loaded = Profile.load(old)
    assert loaded.fits and {f.source for f in loaded.fits} == {""}
    assert {fitted_from(f) for f in loaded.fits} == {""}  # nothing said rather than a guess


def test_a_tunes_fits_say_what_fits_files_say_of_the_same_rows(tmp_path: Path) -> None:
    # GPU rows: the device is what predict reads the generation and NVLink of (models/predict.py).
    rows = [dataclasses.replace(r, device_name="NVIDIA H100 80GB HBM3") for r in read_rows(RESULTS)]
    rows_path = tmp_path / "rows.jsonl"
    write_rows(rows_path, rows)
    fits_path = tmp_path / "f.json"
    result = CliRunner().invoke(app, ["fit", str(rows_path), "-O", str(fits_path)])
    assert result.exit_code == 0, result.output
    said = ("nodes", "device", "source")
    from_fit = {(f["op"], f["algo"]): tuple(f.get(k) for k in said) for f in json.loads(fits_path.read_text())["fits"]}
    loaded = Profile.load(_profile(rows).save(tmp_path / "p.yaml"))
    from_tune = {(f.op, f.algo): (f.nodes, f.device, f.source) for f in loaded.fits}
    assert from_tune == from_fit
    assert set(from_tune.values()) == {(1, "NVIDIA H100 80GB HBM3", DEFAULT_SOURCE)}
