"""collbench.torch refuses a profile it cannot follow with collbench's own error, on every rank alike,
before any rank sends anything: the job does not hang.

The attacker's job: both ranks hung (60-117 s) on a profile of a billion segments or 5,000 rings; a tree
with a cycle raised a bare AssertionError inside the job; a 1-byte segment a ValueError from deep inside.
"""

from __future__ import annotations

import datetime
import json
import multiprocessing
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import yaml

from collbench.profile.document import Profile, RuleSet
from collbench.profile.rules import Rule

pytestmark = pytest.mark.dist

REPO = Path(__file__).resolve().parents[2]
WAIT_S = 90


def _profile(params: dict[str, object]) -> Profile:
    rules = (Rule("all-reduce", 0, None, "tree", params),)
    return Profile(fingerprint="test", host="test", backend="gloo", rule_sets=(RuleSet(2, 1, rules),))


def _worker(rank: int, store: str, out: str, cyclic_profile: str) -> None:
    import collbench.torch as ctorch
    from collbench.errors import CollbenchError

    dist.init_process_group(
        "gloo", init_method=f"file://{store}", rank=rank, world_size=2, timeout=datetime.timedelta(seconds=30)
    )
    said: dict[str, str] = {}
    tensor = torch.ones(1024, dtype=torch.float32)
    for name, params in (("1-byte segment", {"segment_bytes": 1}), ("1e9 segments", {"segments": 10**9})):
        try:
            ctorch.all_reduce(tensor, _profile(params))
        except CollbenchError as exc:
            said[name] = f"{type(exc).__name__}: {exc}"
    # The profile's path where the loaded profile goes: an AttributeError from deep inside, before.
    for name, call in (
        ("path as all_reduce's profile", lambda: ctorch.all_reduce(tensor, cyclic_profile)),  # type: ignore[arg-type]
        ("path as the hook's profile", lambda: ctorch.ddp_comm_hook(Path(cyclic_profile))),  # type: ignore[arg-type]
    ):
        try:
            call()
        except CollbenchError as exc:
            said[name] = f"{type(exc).__name__}: {exc}"
    try:
        Profile.load(cyclic_profile)
    except CollbenchError as exc:
        said["tree with a cycle"] = f"{type(exc).__name__}: {exc}"
    # Nothing was sent: the ranks still meet, and the tensor is as it was.
    dist.barrier()
    said["tensor untouched"] = str(bool(torch.equal(tensor, torch.ones(1024))))
    Path(out, f"rank{rank}.json").write_text(json.dumps(said))
    dist.destroy_process_group()


def test_every_rank_raises_the_same_error_before_anything_is_sent(tmp_path: Path) -> None:
    data = yaml.safe_load((REPO / "profiles" / "cpu-2core-gloo-2ranks.yaml").read_text())
    data["rule_sets"][0]["layout"]["trees"] = [[1, 0]]
    cyclic = tmp_path / "cyclic.yaml"
    cyclic.write_text(yaml.safe_dump(data))
    context = multiprocessing.get_context("spawn")
    procs = [
        context.Process(target=_worker, args=(r, str(tmp_path / "store"), str(tmp_path), str(cyclic))) for r in (0, 1)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(WAIT_S)
    hung = [p for p in procs if p.is_alive()]
    for p in hung:
        p.kill()
    assert not hung, "a rank hung"
    assert [p.exitcode for p in procs] == [0, 0]
    said = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert said[0] == said[1]  # every rank alike
    assert said[0]["1-byte segment"].startswith("ConfigError: the profile's all-reduce rule at 0 bytes has segments")
    assert "a schedule takes 1 to 64" in said[0]["1e9 segments"]
    assert said[0]["path as all_reduce's profile"] == (
        f"ConfigError: profile is a str {str(cyclic)!r}, not a collbench.Profile: load the file once with "
        "collbench.Profile.load(path) and pass what it returns"
    )
    assert said[0]["path as the hook's profile"].startswith("ConfigError: profile is a PosixPath")
    assert (
        said[0]["tree with a cycle"].startswith("InputFileError:")
        and "trees[0]: has 0 roots" in said[0]["tree with a cycle"]
    )
    assert said[0]["tensor untouched"] == "True"


def _root_list_worker(store: str, out: str) -> None:
    import collbench.torch as ctorch
    from collbench.errors import CollbenchError

    dist.init_process_group(
        "gloo", init_method=f"file://{store}", rank=0, world_size=1, timeout=datetime.timedelta(seconds=30)
    )
    profile = Profile.load(REPO / "profiles" / "cpu-2core-gloo-2ranks.yaml")
    tensor = torch.ones(4)
    lists = {"none": None, "two for one rank": [torch.ones(4), torch.ones(4)], "a block of 3": [torch.ones(3)]}
    said: dict[str, str] = {}
    for name, given in lists.items():
        for op, call in (("scatter", ctorch.scatter), ("gather", ctorch.gather)):
            try:
                call(tensor, given, profile)
            except CollbenchError as exc:
                said[f"{op}: {name}"] = f"{type(exc).__name__}: {exc}"
    Path(out, "said.json").write_text(json.dumps(said))
    dist.destroy_process_group()


def test_the_roots_list_is_checked_alike_for_scatter_and_gather(tmp_path: Path) -> None:
    # The rank that holds the list (one rank here: the root) refuses one that is not a block per rank.
    proc = multiprocessing.get_context("spawn").Process(
        target=_root_list_worker, args=(str(tmp_path / "store"), str(tmp_path))
    )
    proc.start()
    proc.join(WAIT_S)
    if proc.is_alive():
        proc.kill()
    assert proc.exitcode == 0
    said = json.loads((tmp_path / "said.json").read_text())
    for name in ("none", "two for one rank", "a block of 3"):
        assert said[f"scatter: {name}"] == "ConfigError: scatter's source needs a list of 1 tensors of 4 elements each"
        assert (
            said[f"gather: {name}"] == "ConfigError: gather's destination needs a list of 1 tensors of 4 elements each"
        )
