"""predict fed a fits file or profile whose values have the wrong kind: one error line, exit 2.

Each case is the real example profile (or its ``fit --json``) with one value changed, as a hand edit
or another tool might leave it; each of these was a traceback (OverflowError, TypeError,
ZeroDivisionError) before.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from refused import refused_line
from typer.testing import CliRunner

from collbench.cli.app import app

REPO = Path(__file__).resolve().parents[2]
PROFILE = REPO / "profiles" / "cpu-2core-gloo-2ranks.yaml"


def _edited(edit: str) -> dict[str, Any]:
    data = copy.deepcopy(yaml.safe_load(PROFILE.read_text()))
    if edit == "min_bytes inf":
        data["fits"][0]["min_bytes"] = float("inf")
    elif edit == "points nan":
        data["fits"][0]["points"] = float("nan")
    elif edit == "segments -1":
        data["fits"][0]["segments"] = -1
    elif edit == "segments text":
        data["fits"][0]["segments"] = "none"
    elif edit == "rule set of 0 ranks":
        data["rule_sets"][0]["world_size"] = 0
    elif edit == "usable text":
        for fit in data["fits"]:
            fit["usable"] = "false"
    elif edit == "sizes upturned":
        data["fits"][0]["min_bytes"], data["fits"][0]["max_bytes"] = 1048576, 512
    return data


@pytest.mark.parametrize(
    ("edit", "names"),
    [
        ("min_bytes inf", "min_bytes"),
        ("points nan", "points"),
        ("segments -1", "segments"),
        ("segments text", "segments"),
        ("rule set of 0 ranks", "world_size"),
    ],
)
def test_a_profile_with_a_value_of_the_wrong_kind_is_one_error(tmp_path: Path, edit: str, names: str) -> None:
    path = tmp_path / "profile.yaml"
    path.write_text(yaml.safe_dump(_edited(edit)))
    line = refused_line(["predict", "--profile", str(path), "--ranks", "8"])
    assert str(path) in line and names in line


@pytest.mark.parametrize(
    ("edit", "names"),
    [
        ("min_bytes inf", "min_bytes"),
        ("points nan", "points"),
        ("segments -1", "segments"),
        # Read by its truth, "false" was a usable fit (the profile's schema refuses it; fits files did not).
        ("usable text", "usable is 'false'; it must be true or false"),
        ("sizes upturned", "min_bytes 1048576 and max_bytes 512 are no range of sizes"),
    ],
)
def test_fits_with_a_value_of_the_wrong_kind_are_one_error(tmp_path: Path, edit: str, names: str) -> None:
    # `fit --json` output as a user's script rewrote it (Python's json writes Infinity and NaN).
    path = tmp_path / "fits.json"
    path.write_text(json.dumps({"fits": _edited(edit)["fits"]}))
    for extra in ([], ["--hierarchy", "2"]):
        line = refused_line(["predict", "--fits", str(path), "--ranks", "8", *extra])
        assert str(path) in line and names in line


def test_the_unedited_profile_still_predicts(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["predict", "--profile", str(PROFILE), "--ranks", "8"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "predicted at 8 ranks" in result.output
