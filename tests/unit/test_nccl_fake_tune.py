"""NCCL's own knobs in ``tune``, against a fake NCCL that keeps NCCL's documented contract.

There is no GPU here, so the communicator is a fake that reads its settings where NCCL does
(NVIDIA/nccl v2.17 to v2.30):

* ``NCCL_ALGO``/``NCCL_PROTO``: ``ncclGetEnv`` (not cached) in ``ncclTopoTuneModel``
  (``src/graph/tuning.cc``), for every communicator NCCL sets up.
* ``NCCL_MIN_NCHANNELS``/``NCCL_MAX_NCHANNELS``: ``NCCL_PARAM``s of ``src/graph/connect.cc``, which
  keep the first value read in a function-local static (``src/include/param.h``): once per process.
* ``ncclConfig_t`` ``minCTAs``/``maxCTAs``: per communicator; ``ncclTopoPostset`` (``src/graph/
  connect.cc``) sets ``nChannels = max(max(envMin, minCTAs), min(nChannels, min(envMax, maxCTAs)))``.
  torch hands it over as ``ProcessGroupNCCL.Options().config.min_ctas``/``max_ctas`` to
  ``new_group(pg_options=...)`` (``torch/csrc/distributed/c10d/init.cpp``).

Its collective's time depends on what the communicator read at creation, so a variant whose settings
did not reach its communicator would time as NCCL's own choice and could not win.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.distributed as dist
from typer.testing import CliRunner

from collbench.backends.nccl import variant_names
from collbench.cli.app import app
from collbench.exporters.nccl_tuner import build_nccl_tuner
from collbench.nccl.support import CommShape
from collbench.nccl.variants import is_native, parse_native_variant, variant_process_env
from collbench.profile.document import Profile
from collbench.results.io import read_rows
from collbench.results.row import ResultRow
from collbench.runtime.cuda import nccl
from collbench.runtime.cuda.native_groups import NativeGroups
from collbench.runtime.sweep.plan import sweep_sizes
from collbench.tuning.config import TuneConfig

ROOT = Path(__file__).resolve().parents[2]
TOPOLOGY = ROOT / "docs" / "cpu-2core-gloo-2ranks-topology.yaml"
NCCL_VERSION = "2.27.3"
SEARCH_CHANNELS = 16
"""The channels the fake's topology search finds (before the bounds are applied)."""
MAXCHANNELS = 64


@dataclass
class FakeConfig:
    """``ncclConfig_t``'s channel bounds, at NCCL's defaults (``NCCL_CONFIG_INITIALIZER``)."""

    min_ctas: int = 1
    max_ctas: int = MAXCHANNELS


class FakeOptions:
    def __init__(self) -> None:
        self.config = FakeConfig()


@dataclass(frozen=True)
class FakeComm:
    """What a communicator read when it was made."""

    algo: str | None
    proto: str | None
    channels: int


class FakeNccl:
    """Communicators made as NCCL makes them: env per communicator, channel env once per process."""

    def __init__(self) -> None:
        self.params: dict[str, int] = {}
        self.made: list[FakeComm] = []
        self.default = FakeComm(None, None, SEARCH_CHANNELS)

    def _param(self, name: str, default: int) -> int:
        if name not in self.params:  # NCCL_PARAM: the first read is kept for the process
            self.params[name] = int(os.environ.get(name, default))
        return self.params[name]

    def new_group(self, ranks: Any = None, backend: str | None = None, pg_options: Any = None) -> FakeComm:
        assert backend == "nccl"
        config = pg_options.config if pg_options is not None else FakeConfig()
        low = max(self._param("NCCL_MIN_NCHANNELS", 0), config.min_ctas)
        high = min(self._param("NCCL_MAX_NCHANNELS", MAXCHANNELS), config.max_ctas)
        comm = FakeComm(os.environ.get("NCCL_ALGO"), os.environ.get("NCCL_PROTO"), max(low, min(SEARCH_CHANNELS, high)))
        self.made.append(comm)
        return comm


@pytest.fixture
def fake_nccl(monkeypatch: pytest.MonkeyPatch) -> FakeNccl:
    fake = FakeNccl()
    real_zeros = torch.zeros
    monkeypatch.setattr(dist, "new_group", fake.new_group)
    monkeypatch.setattr(dist, "all_reduce", lambda *a, **k: None)
    monkeypatch.setattr(dist, "destroy_process_group", lambda *a, **k: None)
    monkeypatch.setattr(dist, "ProcessGroupNCCL", type("ProcessGroupNCCL", (), {"Options": FakeOptions}), raising=False)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: None)
    monkeypatch.setattr(torch, "zeros", lambda *a, **k: real_zeros(*a))  # no GPU to put the probe on
    for name in ("NCCL_ALGO", "NCCL_PROTO", "NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS"):
        monkeypatch.delenv(name, raising=False)
    return fake


def test_each_variant_reaches_its_own_communicator(fake_nccl: FakeNccl) -> None:
    names = ["native:ring/ll@4ch", "native:tree/simple", "native:ring/simple@32ch", "native:*/ll128"]
    for name in names:
        with nccl.variant_group(parse_native_variant(name)):
            pass
    assert fake_nccl.made == [
        FakeComm("Ring", "LL", 4),
        FakeComm("Tree", "Simple", SEARCH_CHANNELS),
        FakeComm("Ring", "Simple", 32),
        FakeComm(None, "LL128", SEARCH_CHANNELS),
    ]
    assert "NCCL_ALGO" not in os.environ and "NCCL_PROTO" not in os.environ


def test_channel_variables_would_reach_only_the_first_communicator(fake_nccl: FakeNccl) -> None:
    # Why the channel count goes through the communicator's config: set through the environment, the
    # first communicator's value stays for the whole process.
    for name in ("native:ring/simple@4ch", "native:ring/simple@32ch"):
        with nccl.applied_env(variant_process_env(parse_native_variant(name))):
            dist.new_group(backend="nccl")
    assert [c.channels for c in fake_nccl.made] == [4, 4]


SMALL_WINNER = "native:ring/ll@4ch"
LARGE_WINNER = "native:ring/simple@32ch"
OWN_WINNER = "recursive-doubling"

_PROTOCOL_COST: dict[str | None, tuple[float, float]] = {
    # (latency us, bytes per us at SEARCH_CHANNELS channels)
    "LL": (8.0, 2000.0),
    "LL128": (12.0, 8000.0),
    "Simple": (25.0, 16000.0),
}


def comm_time_us(comm: FakeComm, size: int) -> float:
    """The fake NCCL's time for one all-reduce of ``size`` bytes on ``comm``: more channels move more
    bytes per microsecond and cost more latency; Tree and NVLS are slower than Ring here; NCCL's own
    choice (nothing forced) lands 10% above the best protocol at its own channel count."""
    if comm.algo is None and comm.proto is None:
        best = min(comm_time_us(dataclasses.replace(comm, algo="Ring", proto=p), size) for p in _PROTOCOL_COST)
        return best * 1.10
    latency, rate = _PROTOCOL_COST[comm.proto or "Simple"]
    latency += 0.5 * comm.channels
    rate *= min(comm.channels, 32) / SEARCH_CHANNELS
    time = latency + size / rate
    return time * {"Ring": 1.0, "Tree": 1.2, "NVLS": 1.5}.get(comm.algo or "Ring", 1.0)


def own_time_us(algo: str, size: int) -> float:
    """collbench's own algorithms: recursive doubling wins a band of mid sizes, the others are slow."""
    if algo == OWN_WINNER:
        return 14.0 + size / 3000.0
    return 3.0 * (30.0 + size / 4000.0)


def fake_run_sweep(fake: FakeNccl, measured: list[tuple[str, FakeComm | None]]) -> Callable[..., list[ResultRow]]:
    def run_sweep(config: Any, progress: Any = None) -> list[ResultRow]:
        sizes = sweep_sizes(config.min_bytes, config.max_bytes, config.step_factor, 4)
        points = [(op, algo, size) for size in sizes for op in config.ops for algo in config.algos]
        rows: list[ResultRow] = []
        with NativeGroups([algo for _, algo, _ in points]) as groups:
            for index, (op, algo, size) in enumerate(points):
                comm: FakeComm | None = None
                if is_native(algo):
                    group = groups.group(algo)
                    comm = fake.default if group is None else group
                    time = comm_time_us(comm, size)
                else:
                    time = own_time_us(algo, size)
                measured.append((algo, comm))
                rows.append(_row(op, algo, size, time))
                groups.done_with(index)
        return rows

    return run_sweep


def _row(op: str, algo: str, size: int, time: float) -> ResultRow:
    return ResultRow(
        op=op,
        algo=algo,
        backend="nccl",
        world_size=2,
        dtype="float32",
        redop="sum",
        in_place=True,
        size_bytes=size,
        count=size // 4,
        iters=20,
        time_us=time,
        time_us_mean=time,
        time_us_min=time,
        time_us_max=time,
        algbw_gbps=size / time / 1e3,
        busbw_gbps=size / time / 1e3,
        wrong=0,
        time_us_p25=time,
        backend_version=NCCL_VERSION,
    )


def test_tune_measures_every_nccl_variant_and_keeps_two_selections(
    fake_nccl: FakeNccl, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import collbench.runtime.host.environment as environment
    import collbench.runtime.launch.ranks as ranks
    import collbench.runtime.sweep.run as sweep_run

    measured: list[tuple[str, FakeComm | None]] = []
    # The GPU side of the contract: nccl resolves where GPUs are, and torch reports its NCCL's version.
    monkeypatch.setattr(ranks, "resolve_backend", lambda backend, local: "nccl")
    monkeypatch.setattr(environment, "nccl_version", lambda: NCCL_VERSION)
    monkeypatch.setattr(sweep_run, "run_sweep", fake_run_sweep(fake_nccl, measured))
    output = tmp_path / "profile.yaml"
    args = ["tune", "--ranks", "2", "--backend", "nccl", "--quick", "--topology", str(TOPOLOGY), "-O", str(output)]
    done = CliRunner().invoke(app, args)
    assert done.exit_code == 0, done.output
    config = TuneConfig(ranks=2, backend="nccl", quick=True, output=output, topology_path=TOPOLOGY)
    rows_measured = read_rows(config.rows_path)
    # The terminal shows both selections.
    shown = " ".join(done.stdout.split())
    assert "Among NCCL's own variants only (what export nccl-plugin, nccl-tuner and env follow)" in shown
    assert SMALL_WINNER in shown and OWN_WINNER in shown

    # Every runnable algorithm x protocol x channel count of NCCL 2.27 on 2 ranks of one node was
    # measured as a row of its own, on a communicator that read exactly that variant's settings.
    expected = variant_names(["all-reduce"], (2, 27, 3), CommShape(world_size=2, nodes=1))
    assert len(expected) == 28 and SMALL_WINNER in expected and LARGE_WINNER in expected
    sizes = sweep_sizes(config.depth.min_bytes, config.depth.max_bytes, config.depth.step_factor, 4)
    for name in expected:
        variant = parse_native_variant(name)
        rows = [r for r in rows_measured if r.algo == name]
        assert len({(r.size_bytes, r.tune_round) for r in rows}) == len(rows) >= len(sizes) * config.depth.rounds
        comms = {comm for algo, comm in measured if algo == name}
        channels = SEARCH_CHANNELS if variant.channels is None else variant.channels
        assert comms == {FakeComm(variant.algo, variant.proto, channels)}

    # Both selections are in the saved profile: among NCCL's own variants, and among everything.
    profile = Profile.load(output)
    shape = profile.default_set
    assert shape.nccl_rules is not None
    assert all(is_native(r.algo) for r in shape.nccl_rules)
    assert shape.nccl_rules[0].algo == SMALL_WINNER and shape.nccl_rules[-1].algo == LARGE_WINNER
    overall = [r.algo for r in shape.rules]
    assert overall[0] == SMALL_WINNER and overall[-1] == LARGE_WINNER and OWN_WINNER in overall
    assert OWN_WINNER not in [r.algo for r in shape.nccl_rules]
    # The Python API runs the overall selection: collbench's own algorithm where it won.
    middle = next(r for r in shape.rules if r.algo == OWN_WINNER)
    assert profile.select("all-reduce", middle.min_bytes).algo == OWN_WINNER

    # The NCCL exports are built from NCCL's own selection, the won channel counts included, and
    # point at the API where collbench's own algorithm won.
    text = build_nccl_tuner(profile).text
    lines = [line for line in text.splitlines() if not line.startswith("#")]
    assert lines[0] == f"allreduce,0,{shape.nccl_rules[0].max_bytes},ring,ll,4,1,2"
    assert lines[-1] == f"allreduce,{shape.nccl_rules[-1].min_bytes},-1,ring,simple,32,1,2"
    assert not any(",recursive" in line for line in lines)
    assert f"collbench's {OWN_WINNER} wins overall" in text and "Python API" in text
    done = CliRunner().invoke(app, ["export", "nccl-tuner", str(output)])
    assert done.exit_code == 0, done.output
    assert done.stdout == text


def test_thorough_tune_sweeps_every_variant_and_segments_only_its_own_algorithms(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import collbench.runtime.host.environment as environment
    import collbench.runtime.launch.ranks as ranks
    import collbench.runtime.sweep.run as sweep_run
    from collbench.tuning.placement import Placement
    from collbench.tuning.sweeps import fixed_rounds

    configs: list[Any] = []

    def record(config: Any, progress: Any = None) -> list[ResultRow]:
        configs.append(config)
        return [_row(op, algo, config.min_bytes, 10.0) for op in config.ops for algo in config.algos]

    monkeypatch.setattr(ranks, "resolve_backend", lambda backend, local: "nccl")
    monkeypatch.setattr(environment, "nccl_version", lambda: NCCL_VERSION)
    monkeypatch.setattr(sweep_run, "run_sweep", record)
    config = TuneConfig(ranks=2, backend="nccl", output=tmp_path / "p.yaml")
    fixed_rounds(config, Placement(), None)
    expected = set(variant_names(["all-reduce"], (2, 27, 3), CommShape(world_size=2, nodes=1)))
    whole = [c for c in configs if c.segment_bytes is None]
    second = [c for c in configs if c.segment_bytes is not None]
    assert len(whole) == config.depth.rounds and all(expected <= set(c.algos) for c in whole)
    # The second segment size is a parameter of collbench's pipelined schedules, not of NCCL's.
    assert second and not any(is_native(a) for c in second for a in c.algos)
