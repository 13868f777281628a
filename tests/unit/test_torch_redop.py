"""collbench.torch takes a reduction as torch.distributed does (issue 34: ``op=dist.ReduceOp.MAX`` raised
``unknown reduction <RedOpType.MAX: 4>``).

torch's contract (https://pytorch.org/docs/stable/distributed.html#torch.distributed.ReduceOp):
``ReduceOp`` is "an enum-like class for available reduction operations: SUM, PRODUCT, MIN, MAX, BAND,
BOR, BXOR, and PREMUL_SUM" (AVG with NCCL); ``dist.ReduceOp.MAX`` is a ``ReduceOp.RedOpType`` member,
and ``dist.ReduceOp(dist.ReduceOp.MAX)`` an instance that compares equal to it. The real torch here.
"""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist

import collbench.torch as ctorch
from collbench.errors import ConfigError
from collbench.profile.document import Profile, RuleSet
from collbench.profile.rules import Rule
from collbench.runtime.executor.reduce import redop_name


@pytest.mark.parametrize(
    ("given", "name"),
    [
        ("sum", "sum"),
        (" MAX ", "max"),
        ("avg", "avg"),
        (dist.ReduceOp.SUM, "sum"),
        (dist.ReduceOp.PRODUCT, "prod"),
        (dist.ReduceOp.MIN, "min"),
        (dist.ReduceOp.MAX, "max"),
        (dist.ReduceOp.AVG, "avg"),
        (dist.ReduceOp.RedOpType.MAX, "max"),
        (dist.ReduceOp(dist.ReduceOp.MIN), "min"),
    ],
)
def test_reductions_as_collbench_or_torch_names_them(given: object, name: str) -> None:
    assert redop_name(given) == name


@pytest.mark.parametrize("given", [dist.ReduceOp.BAND, dist.ReduceOp.BXOR, dist.ReduceOp(dist.ReduceOp.BOR)])
def test_torch_reductions_collbench_has_no_schedule_for_are_refused_by_name(given: object) -> None:
    with pytest.raises(ConfigError, match=r"reduction ReduceOp\.B(AND|OR|XOR) is not one collbench runs"):
        redop_name(given)


@pytest.mark.parametrize("given", ["bogus", 4, None])
def test_other_values_are_unknown(given: object) -> None:
    with pytest.raises(ConfigError, match="unknown reduction"):
        redop_name(given)


def test_all_reduce_reads_the_reduction_before_anything_else() -> None:
    """Not initialised: a torch reduction it runs gets that error, one it does not gets its own."""
    assert not dist.is_initialized()
    rules = (Rule("all-reduce", 0, None, "ring", {"segment_bytes": None, "layout": "rank-order"}),)
    profile = Profile(fingerprint="test", host="test", backend="gloo", rule_sets=(RuleSet(2, 1, rules),))
    with pytest.raises(ConfigError, match="not initialised"):
        ctorch.all_reduce(torch.ones(4), profile, op=dist.ReduceOp.MAX)
    with pytest.raises(ConfigError, match="BAND is not one collbench runs"):
        ctorch.all_reduce(torch.ones(4), profile, op=dist.ReduceOp.BAND)
