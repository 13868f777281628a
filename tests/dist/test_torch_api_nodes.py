"""collbench.torch on real gloo ranks takes the rule set of the nodes each group's ranks report.

Three local processes, a file store, torch.distributed's own gloo groups; each rank pretends to be on
a host of its own by its boot id (``COLLBENCH_TEST_BOOT_ID``, the test hook of
``collbench/runtime/launch/membership.py``, as the namespace cluster sets it): rank 0 on host a, ranks
1 and 2 on host b. The profile was "measured" on 3 ranks on 1 node, whose ranks a node would put the
job on one node; the job's ranks are on 2, and the subgroups {0, 1} and {1, 2} on 2 and 1.
tests/unit/test_torch_group_nodes.py checks the same against a fake of several nodes.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from collbench.profile.document import Profile, RuleSet
from collbench.profile.rules import Rule

pytestmark = pytest.mark.dist

P = {"segment_bytes": None, "layout": "rank-order"}
HOSTS = ("a", "b", "b")


def nodes_profile() -> Profile:
    def rules(algo: str) -> tuple[Rule, ...]:
        return (Rule("all-reduce", 0, None, algo, P),)

    sets = (
        RuleSet(3, 1, rules("native")),
        RuleSet(3, 2, rules("ring"), predicted=True),
        RuleSet(2, 1, rules("recursive-doubling")),
        RuleSet(2, 2, rules("direct"), predicted=True),
    )
    return Profile(fingerprint="test", host="test", backend="gloo", rule_sets=sets)


def _worker(rank: int, world: int, store_path: str, out_dir: str) -> None:
    os.environ["COLLBENCH_TEST_BOOT_ID"] = f"pretend-{HOSTS[rank]}"
    import collbench.torch as ctorch

    dist.init_process_group("gloo", init_method=f"file://{store_path}", rank=rank, world_size=world)
    try:
        profile = nodes_profile()
        results: dict[str, Any] = {}
        # Every rank makes every group (torch's rule); only members call on it.
        groups = {"world": None, "0-1": dist.new_group([0, 1]), "1-2": dist.new_group([1, 2])}
        members = {"world": range(world), "0-1": (0, 1), "1-2": (1, 2)}
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always")
            for name, group in groups.items():
                if rank not in members[name]:
                    continue
                algos = []
                for count in (5, 1000):  # twice per group: its nodes are read on the first call
                    ours = torch.arange(count, dtype=torch.float64) * (rank + 1)
                    ref = ours.clone()
                    algos.append(str(ctorch.all_reduce(ours, profile=profile, group=group).algo))
                    dist.all_reduce(ref, group=group)
                    assert torch.equal(ours, ref), (name, count)
                results[name] = algos
        results["said"] = [str(w.message) for w in said if w.category is ctorch.GroupShape]
        torch.save(results, f"{out_dir}/rank{rank}.pt")
    finally:
        dist.destroy_process_group()


def test_each_group_runs_the_rules_of_the_nodes_its_ranks_report(tmp_path: Path) -> None:
    mp.start_processes(
        _worker, args=(3, str(tmp_path / "store"), str(tmp_path)), nprocs=3, join=True, start_method="spawn"
    )
    results = [torch.load(tmp_path / f"rank{r}.pt") for r in range(3)]
    for res in results:
        # 3 ranks on 2 nodes: the predicted 2-node set, not the measured 1-node one.
        assert res["world"] == ["ring", "ring"]
    assert results[0]["0-1"] == results[1]["0-1"] == ["direct", "direct"]  # hosts a and b
    assert results[1]["1-2"] == results[2]["1-2"] == ["recursive-doubling"] * 2  # both on host b
    assert "1-2" not in results[0] and "0-1" not in results[2]
    # Rank 0 says once per group it is in which shape it took; the others say nothing.
    assert results[0]["said"] == [
        "collbench: this group is 3 ranks on 2 nodes (by the host name and boot id each rank reports): it runs "
        "the profile's rules for 3 ranks on 2 nodes (predicted)",
        "collbench: this group is 2 ranks on 2 nodes (by the host name and boot id each rank reports): it runs "
        "the profile's rules for 2 ranks on 2 nodes (predicted)",
    ]
    assert results[1]["said"] == results[2]["said"] == []
