"""What ``sweep --backend mpi`` measures for all-to-all, gather, scatter, barrier and sendrecv, from
Open MPI 4.1's table (collbench.ompi.algorithms), without Open MPI: tests/mpi runs the real one."""

from __future__ import annotations

import pytest

from collbench.backends.mpi import mpi_algos
from collbench.errors import NotApplicableError
from collbench.ompi.algorithms import OPEN_MPI_4_1, UNTUNED, known_algos, takes_segment
from collbench.runtime.sweep.plan import SweepConfig
from collbench.schedules.ops import Op

NEW = [Op.ALL_TO_ALL, Op.GATHER, Op.SCATTER, Op.BARRIER, Op.SENDRECV]


def _algos(*names: str, ops: list[Op] = NEW) -> tuple[dict[Op, list[str]], list[str]]:
    skipped: list[str] = []
    config = SweepConfig(backend="mpi", world_size=3, algos=names)
    return mpi_algos(config, ops, skipped, OPEN_MPI_4_1), skipped


def test_every_op_has_an_open_mpi_collective_and_sendrecv_none_to_force() -> None:
    assert all(op.spec.mpi_name for op in Op) and Op.SENDRECV.spec.mpi_name == "sendrecv"
    assert {"sendrecv"} == UNTUNED and "sendrecv" not in OPEN_MPI_4_1


def test_all_is_native_and_every_forcible_algorithm_in_open_mpis_order() -> None:
    per_op, skipped = _algos("all")
    assert per_op[Op.ALL_TO_ALL] == [
        "native", "native:linear", "native:pairwise", "native:modified_bruck", "native:linear_sync", "native:two_proc",
    ]  # fmt: skip
    assert per_op[Op.GATHER] == ["native", "native:basic_linear", "native:binomial", "native:linear_sync"]
    assert per_op[Op.SCATTER] == ["native", "native:basic_linear", "native:binomial", "native:linear_nb"]
    assert per_op[Op.BARRIER] == [
        "native", "native:linear", "native:double_ring", "native:recursive_doubling", "native:bruck",
        "native:two_proc", "native:tree",
    ]  # fmt: skip
    assert per_op[Op.SENDRECV] == ["native"]
    assert skipped == []


def test_a_forced_name_some_ops_lack_is_one_line_per_name() -> None:
    per_op, skipped = _algos("native:binomial", "native:pairwise")
    assert per_op == {
        Op.ALL_TO_ALL: ["native:pairwise"],
        Op.GATHER: ["native:binomial"],
        Op.SCATTER: ["native:binomial"],
        Op.BARRIER: [],
        Op.SENDRECV: [],
    }
    assert skipped == [
        "native:binomial all-to-all, barrier: Open MPI's alltoall, barrier have no such algorithm; skipped",
        "native:pairwise gather, scatter, barrier: Open MPI's gather, scatter, barrier have no such algorithm; skipped",
        "native:binomial, native:pairwise sendrecv: MPI_Sendrecv is point-to-point, coll/tuned has no algorithm for "
        "it (native only); skipped",
    ]


def test_sendrecv_alone_with_a_forced_name_is_refused_in_one_line() -> None:
    with pytest.raises(NotApplicableError, match=r"MPI_Sendrecv is point-to-point.*--algo native"):
        _algos("native:linear", ops=[Op.SENDRECV])


def test_segment_sizes_only_where_open_mpi_reads_one() -> None:
    # coll_tuned_gather_decision.c passes segsize to linear_sync only; alltoall, scatter, barrier never.
    assert takes_segment("gather", "linear_sync")
    assert not any(takes_segment(c, a.name) for c in ("alltoall", "scatter", "barrier") for a in OPEN_MPI_4_1[c])
    assert {"native:modified_bruck", "native:linear_nb", "native:double_ring", "native:tree"} <= known_algos()


def test_a_tune_over_open_mpi_measures_every_forcible_algorithm_of_the_new_ops(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from collbench.runtime.mpi import plan as mpi_plan
    from collbench.tuning.candidates import tune_candidates
    from collbench.tuning.config import TuneConfig
    from collbench.tuning.sweeps import algorithm_order

    def mpi_variant_names(config: TuneConfig) -> tuple[str, ...]:
        # collbench's own algorithms do not run inside Open MPI: the backend leaves them out.
        return tune_candidates(config, algorithm_order(config.ops))

    monkeypatch.setattr(mpi_plan, "installed_algorithms", lambda: OPEN_MPI_4_1)
    names = mpi_variant_names(TuneConfig(backend="mpi", ops=("all-to-all", "barrier", "sendrecv")))
    assert names[0] == "native"
    assert set(names) == {"native"} | {a.algo for c in ("alltoall", "barrier") for a in OPEN_MPI_4_1[c]}
    assert len(names) == len(set(names))  # native:linear is alltoall's and barrier's: once
    assert mpi_variant_names(TuneConfig(backend="mpi", ops=("sendrecv",))) == ("native",)
