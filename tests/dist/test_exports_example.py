"""The whole training job docs/exports.md gives a new user runs as the page says it does.

The page's other Python lines are fragments (``tensor``, ``tp_group``, ``ddp_model`` come from the
reader's job); this one is a script to start from, so it is run exactly as shown: the ```python block
that opens with ``# train.py``, two torchrun-style ranks over gloo, beside the example profile copied
as ``collbench-profile.yaml``.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from launcher_env import REPO, torchrun_job

pytestmark = pytest.mark.dist


def _script() -> str:
    page = (REPO / "docs" / "exports.md").read_text(encoding="utf-8")
    found = re.findall(r"```python\n(# train\.py\n.*?)```", page, re.S)
    assert len(found) == 1, "docs/exports.md holds one ```python block opening with '# train.py'"
    return str(found[0])


def test_the_pages_training_script_runs_as_it_says(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(_script(), encoding="utf-8")
    shutil.copy(REPO / "profiles" / "cpu-2core-gloo-2ranks.yaml", tmp_path / "collbench-profile.yaml")
    done = torchrun_job(2, ["train.py"], tmp_path, timeout_s=300)
    for rank, proc in enumerate(done):
        assert proc.returncode == 0, f"rank {rank}: exit {proc.returncode}\n{proc.stderr[-3000:]}"
    out0 = done[0].stdout.splitlines()
    # What the page says rank 0 prints: the rule at 400,000 B, the summed elements, the hook registered.
    assert "all-reduce of 400,000 B on 2 ranks: recursive-doubling; every element 3.0" in out0
    assert "DDP hook: registered" in out0
    # The warning as the page shows it, at train.py's own line: the page showed one from another script
    # ('train.py:6: ... rule = collbench.torch.all_reduce(t, ...)'), which a reader running this one never saw.
    page = (REPO / "docs" / "exports.md").read_text(encoding="utf-8")
    shown = re.search(r"```\n(train\.py:\d+: GroupShape: .*?\n.*?)\n```", page)
    assert shown is not None, "docs/exports.md shows the GroupShape warning of train.py"
    assert shown.group(1) in done[0].stderr
    # Each rank ends with the same weights: the hook's all-reduce averaged the gradients alike.
    sums = [next(line.split(": ", 1)[1] for line in p.stdout.splitlines() if line.startswith(f"rank {r}:"))
            for r, p in enumerate(done)]  # fmt: skip
    assert sums[0] == sums[1] and sums[0].startswith("weights sum ")
