"""The native calls of the newer ops, against fakes of torch.distributed's documented contract.

The contract (torch 2.13, torch/distributed/distributed_c10d.py docstrings):
* ``all_to_all_single(output, input, group=)``: "output: Gathered concatenated output tensor. input:
  Input tensor to scatter"; without split sizes "dim 0 ... must divide equally by world_size";
* ``scatter(tensor, scatter_list, src=, group=)``: "scatter_list ... (default is None, must be specified
  on the source rank)", "all Tensors in scatter_list must have the same size";
* ``gather(tensor, gather_list, dst=, group=)``: "gather_list ... same-sized tensors ... (default is
  None, must be specified on the destination rank)";
* ``batch_isend_irecv(p2p_op_list)`` "Returns: A list of distributed request objects" (each waited on);
  a send to oneself is refused (``_check_not_self_rank``), so one rank's shift is a copy;
* ``barrier``: "ProcessGroupNCCL implements barrier as an all_reduce of a 1-element tensor" and "now
  blocks the cpu thread till the completion": on NCCL the point runs that all-reduce, without the wait.

These fakes check what collbench hands torch on each rank (which tensors, views of which buffer, which
peers); tests/dist and tests/cli run the same calls on real gloo ranks.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.distributed as dist

from collbench.backends.nccl import BARRIER_NOTE
from collbench.runtime.cuda.native_groups import GRAPHED_OPS, graph_ops_note
from collbench.runtime.executor.buffers import fill, make_buffers
from collbench.runtime.sweep import native_calls
from collbench.schedules.ops import Op

GROUP = object()


class FakeDist:
    def __init__(self, monkeypatch: pytest.MonkeyPatch, backend: str) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.waited = 0
        monkeypatch.setattr(dist, "get_backend", lambda group=None: backend)
        for name in ("all_to_all_single", "scatter", "gather", "barrier", "all_reduce"):
            monkeypatch.setattr(dist, name, self._recorder(name))
        monkeypatch.setattr(
            dist,
            "P2POp",
            lambda fn, tensor, peer=None, group=None, group_peer=None: (
                fn,
                tensor,
                group_peer if group is not None else peer,
            ),
        )
        monkeypatch.setattr(dist, "batch_isend_irecv", self._batch)

    def _recorder(self, name: str) -> Any:
        def record(*args: Any, **kwargs: Any) -> None:
            self.calls.append((name, (args, kwargs)))

        return record

    def _batch(self, ops: list[Any]) -> list[Any]:
        self.calls.append(("batch_isend_irecv", ops))
        fake = self

        class Work:
            def wait(self) -> None:
                fake.waited += 1

        return [Work() for _ in ops]


def _bufs(op: Op, rank: int, n: int = 4, count: int = 16, root: int = 0, in_place: bool = False) -> Any:
    b = make_buffers(op, count, dtype=torch.float32, rank=rank, world_size=n, root=root, in_place=in_place)
    fill(b, "sum")
    return b


def test_all_to_all_passes_the_output_then_input_views_of_one_buffer(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeDist(monkeypatch, "nccl")
    b = _bufs(Op.ALL_TO_ALL, 1)
    native_calls.native_call(b, "sum", GROUP)()
    [(name, (args, kwargs))] = fake.calls
    assert name == "all_to_all_single" and kwargs == {"group": GROUP}
    out, inp = args
    assert out.data_ptr() == b.whole.data_ptr() + 16 * 4 and inp.data_ptr() == b.whole.data_ptr()
    assert out.numel() == inp.numel() == 16


@pytest.mark.parametrize("in_place", [False, True])
def test_scatter_and_gather_hand_the_root_its_block_views(monkeypatch: pytest.MonkeyPatch, in_place: bool) -> None:
    fake = FakeDist(monkeypatch, "gloo")
    n, root = 4, 2
    for rank in range(n):
        fake.calls.clear()
        s = _bufs(Op.SCATTER, rank, n, root=root, in_place=in_place)
        g = _bufs(Op.GATHER, rank, n, root=root, in_place=in_place)
        native_calls.native_call(s, "sum", GROUP)()
        native_calls.native_call(g, "sum", GROUP)()
        (sname, (sargs, skw)), (gname, (gargs, gkw)) = fake.calls
        assert (sname, gname) == ("scatter", "gather")
        assert skw == {"src": root, "group": GROUP} and gkw == {"dst": root, "group": GROUP}
        assert sargs[0] is s.output and gargs[0] is g.input
        if rank != root:
            assert sargs[1] is None and gargs[1] is None
            continue
        # The root's list: n same-sized views of its buffer, in block order (nothing copied around the call).
        for parts, whole in ((sargs[1], s.input), (gargs[1], g.output)):
            assert [p.numel() for p in parts] == [4] * n
            assert [p.data_ptr() for p in parts] == [whole.data_ptr() + 16 * j for j in range(n)]


def test_sendrecv_is_one_batch_to_the_next_rank_from_the_previous(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeDist(monkeypatch, "nccl")
    n = 3
    for rank in range(n):
        fake.calls.clear()
        b = _bufs(Op.SENDRECV, rank, n, count=8)
        call = native_calls.native_call(b, "sum", GROUP)
        call()
        call()
        assert [name for name, _ in fake.calls] == ["batch_isend_irecv"] * 2
        ops = fake.calls[0][1]
        assert [(fn, tensor.data_ptr(), peer) for fn, tensor, peer in ops] == [
            (dist.irecv, b.output.data_ptr(), (rank - 1) % n),
            (dist.isend, b.input.data_ptr(), (rank + 1) % n),
        ]
    assert fake.waited == 2 * 2 * n  # every request of every call waited on


def test_one_rank_sendrecv_is_a_copy_and_posts_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeDist(monkeypatch, "nccl")
    b = _bufs(Op.SENDRECV, 0, 1, count=8)
    native_calls.native_call(b, "sum", GROUP)()
    assert fake.calls == []
    assert torch.equal(b.output, b.input)


def test_barrier_is_dist_barrier_on_gloo_and_a_one_element_all_reduce_on_nccl(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeDist(monkeypatch, "gloo")
    b = _bufs(Op.BARRIER, 1, 3, count=0)
    native_calls.native_call(b, "sum", GROUP)()
    assert fake.calls == [("barrier", ((), {"group": GROUP}))]
    fake = FakeDist(monkeypatch, "nccl")
    native_calls.native_call(b, "sum", GROUP)()
    [(name, (args, kwargs))] = fake.calls
    assert name == "all_reduce" and kwargs == {"group": GROUP}
    (flag,) = args
    # One byte on the token's device: the rank's own GPU in a sweep, never a guessed one.
    assert flag.numel() == 1 and flag.dtype == torch.uint8 and flag.device == b.whole.device
    assert "all-reduce" in BARRIER_NOTE


def test_cuda_graphs_capture_barrier_but_not_the_grouped_send_recv_ops() -> None:
    cuda, cpu = torch.device("cuda", 0), torch.device("cpu")
    assert Op.BARRIER in GRAPHED_OPS and Op.ALL_REDUCE in GRAPHED_OPS
    assert not GRAPHED_OPS & {Op.ALL_TO_ALL, Op.SCATTER, Op.GATHER, Op.SENDRECV}
    note = graph_ops_note(True, cuda, [Op.ALL_REDUCE, Op.SENDRECV, Op.ALL_TO_ALL, Op.BARRIER])
    assert note.startswith("--cuda-graph: native all-to-all, sendrecv timed without CUDA graphs")
    assert graph_ops_note(True, cuda, [Op.ALL_REDUCE, Op.BARRIER]) == ""
    assert graph_ops_note(False, cuda, [Op.ALL_TO_ALL]) == graph_ops_note(True, cpu, [Op.ALL_TO_ALL]) == ""
