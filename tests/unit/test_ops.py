import itertools

import pytest

from collbench.errors import UnknownNameError
from collbench.schedules.ops import Op, chunk_bounds, parse_dtype, parse_redop


@pytest.mark.parametrize("count,parts", [(0, 3), (1, 4), (10, 3), (12, 4), (1004, 3), (7, 7)])
def test_chunk_bounds_cover_the_buffer_contiguously(count: int, parts: int) -> None:
    bounds = chunk_bounds(count, parts)
    assert len(bounds) == parts
    assert bounds[0][0] == 0 and bounds[-1][1] == count
    for (_, stop), (start, _) in itertools.pairwise(bounds):
        assert stop == start
    sizes = [b - a for a, b in bounds]
    assert max(sizes) - min(sizes) <= 1


def test_busbw_factors_follow_nccl_tests() -> None:
    assert Op.ALL_REDUCE.spec.busbw_factor(4) == pytest.approx(1.5)
    assert Op.ALL_GATHER.spec.busbw_factor(4) == pytest.approx(0.75)
    assert Op.REDUCE_SCATTER.spec.busbw_factor(8) == pytest.approx(7 / 8)
    assert Op.BROADCAST.spec.busbw_factor(8) == 1.0
    assert Op.REDUCE.spec.busbw_factor(3) == 1.0


def test_names_parse_and_unknown_names_list_the_known_ones() -> None:
    assert Op.parse("allreduce") is Op.ALL_REDUCE
    assert Op.parse("reduce_scatter") is Op.REDUCE_SCATTER
    assert parse_dtype("bf16") == "bfloat16"
    assert parse_redop("MAX") == "max"
    with pytest.raises(UnknownNameError, match="all-gather"):
        Op.parse("alltoallv")
    with pytest.raises(UnknownNameError, match="float32"):
        parse_dtype("float8")
