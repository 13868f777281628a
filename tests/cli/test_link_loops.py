"""A symbolic link that loops is said as one, not as a missing file: predict --profile, export, compare
and import checked ``Path.exists()``, which is False for such a link, and said 'no such profile; make one
with `collbench tune`' of a file that is there, only unreadable (fit and report said it right)."""

from __future__ import annotations

from pathlib import Path

import pytest
from refused import refused_line

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "profiles" / "cpu-2core-gloo-2ranks-results.jsonl"


@pytest.mark.parametrize(
    "args",
    [
        ["predict", "--ranks", "8", "--profile", "{loop}"],
        ["export", "env", "{loop}"],
        ["compare", "{loop}", str(RESULTS)],
        ["import", "nccl-tests", "{loop}"],
    ],
)
def test_a_link_that_loops_is_said_as_one(tmp_path: Path, args: list[str]) -> None:
    loop = tmp_path / "loop.yaml"
    loop.symlink_to(loop)
    line = refused_line([a.format(loop=loop) for a in args])
    assert line == f"error: {loop}: cannot read: Too many levels of symbolic links", line
