"""Tune's decisions and every exported file, byte for byte, from committed results.

A committed results file (``example-results.jsonl``, the 4-ranks-on-2-cores example ``profiles/``
once held, and a fresh ``tune --quick`` of the 2-core development machine) goes through what
``tune`` does after it has measured: fits, selection, the profile; then through every export
(``env``, ``nccl-tuner``, ``ompi-rules``, the plugin's ``--show``). The outputs must equal the files
under ``tests/fixtures/golden/``. A change that moves code must leave them equal; a change that
means to alter a decision regenerates them
(``COLLBENCH_REGEN_GOLDEN=1 pytest tests/unit/test_tune_golden.py``) and says why in its commit.

Fitted figures are compared to 9 significant digits: the last digits of a least-squares fit move with
the numpy/scipy build (numpy 2.4.6 and scipy 1.17.1 differ from the goldens' in the 15th digit), and
no decision or export depends on them. White space is compared as one space (YAML folds long lines).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
from pathlib import Path

import pytest

from collbench.exporters.nccl_env import build_nccl_env
from collbench.exporters.nccl_tuner import build_nccl_tuner
from collbench.exporters.ompi_rules import build_ompi_rules
from collbench.results.io import read_rows
from collbench.tuning.pipeline import TuneConfig, decide

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "fixtures" / "golden"
RESULTS = {
    "example": GOLDEN / "example-results.jsonl",
    "tune-quick": GOLDEN / "tune-quick-results.jsonl",
}
REGENERATE = os.environ.get("COLLBENCH_REGEN_GOLDEN") == "1"
_FLOAT = re.compile(r"-?\d+\.\d+(?:[eE][-+]?\d+)?")


def _stable(text: str) -> str:
    """``text`` with every decimal number rounded to 9 significant digits and runs of white space as one
    space (YAML folds a flow mapping where its numbers make a line long)."""
    return " ".join(_FLOAT.sub(lambda m: f"{float(m.group()):.9g}", text).split())


def _outputs(name: str) -> dict[str, str]:
    rows = read_rows(RESULTS[name])
    config = TuneConfig(command=f"collbench tune ({name})")
    decided = decide(config, rows, topology=None, layout=None, notes=[])
    profile = dataclasses.replace(
        decided.profile,
        created="2026-01-01T00:00:00Z",
        versions={k: v for k, v in decided.profile.versions.items() if k != "python"},
    )
    outputs = {
        "profile.yaml": profile.to_yaml(),
        "fits.json": json.dumps([f.to_dict() for f in decided.fits], indent=1, sort_keys=True) + "\n",
        # Both results were measured over gloo: the NCCL exports are asked for anyway, as a user would.
        "nccl-tuner.conf": build_nccl_tuner(profile, from_other_backend=True).text,
        "nccl-env.sh": build_nccl_env(profile, from_other_backend=True).text,
        "ompi-rules.conf": build_ompi_rules(profile, from_other_backend=True).text,
    }
    if shutil.which("cc") or shutil.which("gcc"):
        from collbench.exporters.nccl_plugin import show

        picks = [dataclasses.astuple(r) for r in show(profile, from_other_backend=True)]
        outputs["plugin-show.json"] = json.dumps([[str(v) for v in row] for row in picks], indent=1) + "\n"
    return outputs


@pytest.mark.parametrize("name", sorted(RESULTS))
def test_tune_decisions_and_exports_unchanged(name: str) -> None:
    folder = GOLDEN / name
    for file, text in _outputs(name).items():
        path = folder / file
        if REGENERATE:
            folder.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            continue
        assert _stable(path.read_text()) == _stable(text), f"{name}/{file} differs from the committed golden file"
