"""The torch API and DDP hook take the rule set of the nodes a group's ranks run on, read once per group.

torch.distributed is not started here: the group of several nodes is a fake of the documented
contract of ``dist.all_gather_into_tensor(output_tensor, input_tensor, group)`` ("Gather tensors from
all ranks and put them in a single output tensor"; the output is "a concatenation of all the input
tensors along the primary dimension", in the group's rank order: torch/distributed/distributed_c10d.py,
torch 2.13). Each pretend rank of the group reports its host as the real ranks do (a fixed-width row
of host name and boot id, ``collbench/runtime/launch/membership.py``); this process is the rank under
test and sends its own row, the others' rows are those of the hosts named. ``dist.all_reduce`` is
faked too: the rules here are NCCL's native variants, which call it (``collbench.torch.collectives._all_reduce``).
tests/dist/test_torch_api_nodes.py runs the same choice on real gloo ranks.
"""

from __future__ import annotations

import gc
import os
import warnings
from typing import Any

import pytest
import torch
import torch.distributed as dist

import collbench.torch as ctorch
from collbench.errors import UserError
from collbench.profile.document import Profile, RuleSet
from collbench.profile.rules import Rule
from collbench.runtime.ddp import group_nodes
from collbench.runtime.host.environment import host_name
from collbench.runtime.launch import membership as membership_module
from collbench.runtime.launch.membership import (
    ROW_BYTES,
    TEST_BOOT_ID_ENV,
    GroupMemberships,
    HostReport,
    decode_report,
    encode_report,
)

P = {"segment_bytes": None, "layout": "rank-order"}


class Group:
    """A process group of pretend ranks, one host per rank (rank order); this process is ``rank``.

    Each pretend host is a boot id of its own; this process's is set as the namespace cluster sets it
    (``COLLBENCH_TEST_BOOT_ID``, membership.py's test hook) when the group is made, as every group here
    is made right before its first call.
    """

    def __init__(self, hosts: list[str], rank: int = 0) -> None:
        self.hosts, self.rank = hosts, rank
        os.environ[TEST_BOOT_ID_ENV] = f"boot-{hosts[rank]}"

    def size(self) -> int:
        return len(self.hosts)


class FakeDist:
    """What collbench.torch asks of torch.distributed, for one process in pretend groups."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, global_rank: int = 0) -> None:
        self.gathers: list[tuple[int, int]] = []  # (output bytes, input bytes) of each all-gather
        self.reduced: list[int] = []
        monkeypatch.setattr(dist, "is_initialized", lambda: True)
        monkeypatch.setattr(dist, "get_world_size", lambda group=None: group.size())
        monkeypatch.setattr(dist, "get_rank", lambda group=None: global_rank if group is None else group.rank)
        monkeypatch.setattr(dist, "get_backend", lambda group=None: "nccl")
        monkeypatch.setattr(dist, "all_gather_into_tensor", self.all_gather_into_tensor)
        monkeypatch.setattr(dist, "all_gather_single", None, raising=False)
        monkeypatch.setattr(dist, "all_reduce", lambda tensor, op=None, group=None: self.reduced.append(tensor.numel()))
        monkeypatch.setenv(TEST_BOOT_ID_ENV, "")  # restored after the test, whatever the groups set
        # A process's memberships start empty in every test, gathered through the fake above.
        monkeypatch.setattr(membership_module, "GROUPS", GroupMemberships())

    def all_gather_into_tensor(self, output: torch.Tensor, input: torch.Tensor, group: Group) -> None:
        assert output.dtype == input.dtype == torch.uint8 and output.numel() == input.numel() * group.size()
        self.gathers.append((output.numel(), input.numel()))
        mine = bytes(input.tolist())  # this rank's own row, as it sent it: this machine's name, its host's boot id
        assert decode_report(mine) == HostReport(host_name(), f"boot-{group.hosts[group.rank]}")
        rows = [encode_report(HostReport(host_name(), f"boot-{host}")) for host in group.hosts]
        rows[group.rank] = mine
        output.copy_(torch.tensor(list(b"".join(rows)), dtype=torch.uint8))


def _profile(world: int, measured_nodes: int, predicted: dict[int, str]) -> Profile:
    """Native ring where measured; the predicted sets of other node counts each a variant of their own."""
    sets = [RuleSet(world, measured_nodes, (Rule("all-reduce", 0, None, "native:ring", P),))]
    for nodes, algo in predicted.items():
        sets.append(RuleSet(world, nodes, (Rule("all-reduce", 0, None, algo, P),), predicted=True))
    return Profile(fingerprint="test", host="test", backend="nccl", rule_sets=tuple(sets))


def test_a_group_takes_the_rule_set_of_the_nodes_its_ranks_report(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeDist(monkeypatch)
    # Measured on 4 ranks on 1 node; the job runs them 2 a node.
    profile = _profile(4, 1, {2: "native:tree", 4: "native:ring/ll"})
    group = Group(["a", "a", "b", "b"])
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        rules = [ctorch.all_reduce(torch.ones(n), profile=profile, group=group) for n in (1, 100, 10_000)]
    assert {r.algo for r in rules} == {"native:tree"}
    assert fake.reduced == [1, 100, 10_000]
    # One gather for the group, of one row per rank: O(group size) bytes, whatever the calls after it.
    assert fake.gathers == [(4 * ROW_BYTES, ROW_BYTES)]
    told = [str(w.message) for w in said if w.category is ctorch.GroupShape]
    # Said at the user's line that asked (here, this test's), not inside collbench.
    assert [w.filename for w in said if w.category is ctorch.GroupShape] == [__file__]
    assert told == [
        "collbench: this group is 4 ranks on 2 nodes (by the host name and boot id each rank reports): it runs "
        "the profile's rules for 4 ranks on 2 nodes (predicted)"
    ]


def test_uneven_nodes_are_read_where_the_measured_ranks_a_node_would_say_otherwise(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    FakeDist(monkeypatch)
    # 3 ranks measured on 1 node: kept at 3 a node (no group to ask), 3 ranks are 1 node; the job's are
    # 1 on host a and 2 on host b.
    profile = _profile(3, 1, {2: "native:tree"})
    assert profile.rule_set(3).nodes == 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ctorch.GroupShape)
        assert ctorch.all_reduce(torch.ones(8), profile=profile, group=Group(["a", "b", "b"])).algo == "native:tree"
        # Each group is read for itself: a group of the two ranks on host b is on one node.
        pair = _profile(2, 1, {2: "native:tree"})
        assert ctorch.all_reduce(torch.ones(8), profile=pair, group=Group(["b", "b"], rank=1)).algo == "native:ring"
        assert ctorch.all_reduce(torch.ones(8), profile=pair, group=Group(["a", "b"], rank=1)).algo == "native:tree"


def test_a_shape_the_profile_lacks_is_one_error_naming_the_shapes_and_how_to_add_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake = FakeDist(monkeypatch)
    profile = _profile(4, 1, {2: "native:tree"})
    group = Group(["a", "b", "c", "d"])  # a rank a node
    for _ in range(2):
        with pytest.raises(UserError) as raised:
            ctorch.all_reduce(torch.ones(8), profile=profile, group=group)
        assert str(raised.value) == (
            "the profile has no rules for 4 ranks on 4 nodes; it has: 4 ranks on 1 node, 4 ranks on 2 nodes "
            "(predicted) (measure it with `collbench tune` on that shape, or add it predicted from the profile's "
            "fits: `collbench profile predict PROFILE --ranks 4:4`)"
        )
    assert len(fake.gathers) == 1 and fake.reduced == []  # gathered once, nothing reduced


class _Bucket:
    def __init__(self, buffer: torch.Tensor) -> None:
        self._buffer = buffer

    def buffer(self) -> torch.Tensor:
        return self._buffer


def test_the_hook_reads_the_nodes_once_and_only_rank_0_says_it(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeDist(monkeypatch, global_rank=1)
    issued: list[int] = []

    class Work:
        def __init__(self, tensor: torch.Tensor) -> None:
            self.done: torch.futures.Future[list[torch.Tensor]] = torch.futures.Future()
            self.done.set_result([tensor])

        def get_future(self) -> torch.futures.Future[list[torch.Tensor]]:
            return self.done

    def all_reduce(tensor: torch.Tensor, group: Any = None, async_op: bool = False) -> Work:
        issued.append(tensor.numel())
        return Work(tensor)  # as a sum over ranks that all hold the same: the tensor itself

    monkeypatch.setattr(dist, "all_reduce", all_reduce)
    # collbench's ring where measured (1 node); native on 2 nodes, where the job's ranks are.
    measured = RuleSet(4, 1, (Rule("all-reduce", 0, None, "ring", P),))
    predicted = RuleSet(4, 2, (Rule("all-reduce", 0, None, "native", P),), predicted=True)
    profile = Profile(fingerprint="t", host="t", backend="nccl", rule_sets=(measured, predicted))
    hook = ctorch.ddp_comm_hook(profile)
    group = Group(["a", "b", "a", "b"], rank=1)  # mpirun --map-by node over two hosts
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # rank 1 says nothing
        results = [hook(group, _Bucket(torch.full((n,), 4.0))).wait() for n in (10, 1000, 10)]  # type: ignore[arg-type]
    assert issued == [10, 1000, 10]  # torch's own allreduce_hook every time: the 2-node rules are native
    assert all(torch.equal(r, torch.ones_like(r)) for r in results)  # divided by the group's size once
    assert len(fake.gathers) == 1


def test_a_group_gone_is_forgotten_and_a_new_one_gathered(monkeypatch: pytest.MonkeyPatch) -> None:
    gathered: list[Any] = []

    def gather(group: Any, world: int, device: Any) -> Any:
        gathered.append(group)
        return membership_module.membership([HostReport(h, "") for h in group.hosts])

    groups = GroupMemberships(gather)
    first = Group(["a", "b"])
    assert groups.of(first, 2).nodes == 2 and groups.of(first, 2).nodes == 2
    assert groups.known(first) and len(gathered) == 1
    gathered.clear()
    del first
    gc.collect()
    second = Group(["a", "a"])
    assert groups.of(second, 2).nodes == 1 and len(gathered) == 1
    assert len(groups._found) == 1  # the first group's entry went with it


@pytest.mark.parametrize(("backend", "device"), [("nccl", torch.device("cuda", 3)), ("gloo", torch.device("cpu"))])
def test_the_rows_are_gathered_where_the_groups_backend_takes_tensors(
    monkeypatch: pytest.MonkeyPatch, backend: str, device: torch.device
) -> None:
    # NCCL's collectives take tensors on the rank's current CUDA device (torch.distributed's docs: "it is
    # the user's responsibility to ensure that this is set so that each rank has an individual GPU, via
    # torch.cuda.set_device()"); gloo's take CPU tensors. A machine with a GPU is faked: none is here.
    FakeDist(monkeypatch)
    monkeypatch.setattr(dist, "get_backend", lambda group=None: backend)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 3)
    asked: list[Any] = []

    def gather(group: Any, world: int, where: Any) -> Any:
        asked.append(where)
        return membership_module.membership([HostReport(h, "") for h in group.hosts])

    monkeypatch.setattr(membership_module, "GROUPS", GroupMemberships(gather))
    assert group_nodes(Group(["a", "b"])) == (2, True)
    assert asked == [device]


def test_a_group_of_another_backend_than_the_profiles_is_told_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A profile of `tune --backend mpi` ran in a torchrun gloo job without a word: its Open MPI rules
    ('native:recursive_doubling' at 9.75-22.6 KiB) called gloo's own all_reduce. Said once per group, by
    rank 0, beside the group's shape; a profile of the group's own backend says nothing of it."""
    fake = FakeDist(monkeypatch)  # the group's backend: nccl
    rules = (Rule("all-reduce", 0, None, "native", P),)
    mpi = Profile(fingerprint="t", host="t", backend="mpi", rule_sets=(RuleSet(2, 1, rules),))
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        group = Group(["a", "a"])
        for _ in range(3):
            ctorch.all_reduce(torch.ones(8), profile=mpi, group=group)
    told = [str(w.message) for w in said if w.category is ctorch.OtherBackend]
    assert told == [
        "collbench: the profile was measured over mpi, and this group runs nccl: its rules say which algorithm "
        "was fastest over mpi, not over nccl (a native rule, forced variant or not, calls nccl's own collective "
        "here); `collbench tune --backend nccl` measures this one"
    ]
    assert [w.filename for w in said if w.category is ctorch.OtherBackend] == [__file__]
    assert fake.reduced == [8, 8, 8]
    own = Profile(fingerprint="t", host="t", backend="nccl", rule_sets=(RuleSet(2, 1, rules),))
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        ctorch.all_reduce(torch.ones(8), profile=own, group=Group(["a", "a"]))
    assert not [w for w in said if w.category is ctorch.OtherBackend]
    monkeypatch.setattr(dist, "get_backend", lambda group=None: "cpu:gloo,cuda:nccl")
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        ctorch.all_reduce(torch.ones(8), profile=own, group=Group(["b", "b"]))
    assert not [w for w in said if w.category is ctorch.OtherBackend]
