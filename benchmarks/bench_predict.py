"""Are predictions right? Fit published nccl-tests logs, predict the others of the same system, compare.

Every all-reduce log in ``tests/fixtures/real/`` is fitted as ``collbench fit`` does. Then:

* scale pairs: each log of a system predicts each other log of that system at the other's world size,
  node count and sizes (GB200 NVL72 at 72, 144 and 1,440 ranks; DGX A100 on 2 and 4 nodes; the three
  p5 2-node logs, H100 8x2, one another at their own sizes);
* held-out pairs: the same with a log of ``benchmarks/heldout/`` on either side (one p5 node; OCI's
  GB200 at 4, 128 and 192 ranks; one H100 InfiniBand cluster at 2, 4 and 8 nodes, whose logs pair
  among themselves), reported apart: logs found after the model was changed for the pairs above, to
  tell a change that fits those pairs from one that holds elsewhere;
* leave one size out: each log's fit without one size predicts that size, at the log's own shape.

Beside every collbench prediction stands NCCL's own cost model on the same pair
(``collbench/models/nccl_cost.py``: NVIDIA/nccl v2.30.7 ``src/graph/tuning.cc``, ring and tree, its
own latencies, exactly, tree correction steps included), given what NCCL's topology search would find
and a log does not say: the bus bandwidth, read as the source log's peak busbw. collbench's
prediction of ``native`` keeps NCCL's structure and fits its latency scale and bus bandwidth to every
point of the source log (``models/predict.py``). Errors are ``|predicted - published| / published``
of the published time (the smaller of in place and out of place, as ``fit`` takes it).

    python benchmarks/bench_predict.py [--details] [--json out.json] [--nics]

Each log's run is described as its source describes it: the GPU (``predict --gpu``) where the rank
lines do not name it, and ``predict --no-nvls`` where the run's published job set
``NCCL_NVLS_ENABLE=0`` (``NO_NVLS``: CoreWeave's GB200 runs), for the source's calibration and the
asked shape alike.

``--nics`` gives predict each system's published NICs (``NICS``: ``predict --nics N --nic-gbps G``):
NCCL's model's channels, NVLS-tree and the NICs' floor across nodes; without it, none.

Targets: the median error over the scale pairs at or below NCCL's model's; no collbench prediction
that decreases with size, nor as ranks are added: the ``ranks`` count sweeps every rank count at the
source's ranks a node (the last node part-full where they do not divide), the ``full nodes`` count
only the counts that fill their nodes (the same size and ranks a node, one node more). A fall that is
NCCL's choice (its own figures pick a family the fitted ones price dearer at the smaller shape, whose
cheapest is not below the larger: NCCL's pick falls, not the model's cheapest; :func:`sweep_ranks`) is
still a prediction that decreases and counts against the target: the ``full nodes`` column shows it
beside the rest (``+N NCCL's choice``), the ``ranks`` count keeps it and says how many. Node counts:
GB200 logs are counted in NVL72 racks (72 GPUs an NVLink domain); the others as their logs or sources
say (8 GPUs a node).
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import math
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

from collbench.errors import UserError
from collbench.importers.nccl_tests import read_nccl_tests
from collbench.models.fit import fit_results
from collbench.models.fitted import Fit
from collbench.models.link_floor import with_gpu
from collbench.models.nccl_cost import nccl_time_us, peak_bus_bw_gbps
from collbench.models.nccl_graph import NodeFacts
from collbench.models.nccl_machine import Arch, NcclMachine
from collbench.models.predict import PredictReport, predict, price_fits
from collbench.models.predict_defaults import default_nodes, measured_per_node
from collbench.models.priced import Shapes
from collbench.results.noise import decision_time_us
from collbench.results.row import ResultRow
from collbench.schedules.ops import Op

REAL = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "real"
HELDOUT = Path(__file__).resolve().parent / "heldout"
"""Published logs kept out of the tests and of every change to the model: held-out pairs (SOURCES.md)."""


@dataclass(frozen=True, slots=True)
class Log:
    name: str
    file: str
    system: str
    nodes: int
    arch: Arch
    nvlink: bool = True
    rccl: bool = False
    gpu: str = ""
    """The GPU, where the log's rank lines do not name one that is listed (``predict --gpu``)."""
    heldout: bool = False
    """Kept in ``benchmarks/heldout/``: its pairs are reported apart and were never looked at while
    changing the model."""
    ranks: int | None = None
    """The rank count, where the log prints neither rank lines nor a busbw/algbw ratio that names one
    (``import --ranks``); else read from the log."""
    op: str | None = None
    """The collective, where the log names no test (``import --op``)."""
    nvls: bool = True
    """False where the run's published job sets ``NCCL_NVLS_ENABLE=0`` (``predict --no-nvls``; ``NO_NVLS``)."""


LOGS = (
    Log("gb200-72", "all_reduce_perf-gb200-72rank-one-rank-line.log", "gb200", 1, "blackwell", gpu="GB200",
        nvls=False),
    Log("gb200-144", "all_reduce_perf-gb200-144rank-one-rank-line.log", "gb200", 2, "blackwell", gpu="GB200",
        nvls=False),
    Log("gb200-1440", "all_reduce_perf-gb200-1440rank-one-rank-line.log", "gb200", 20, "blackwell", gpu="GB200",
        nvls=False),
    Log("dgx-a100-2n", "all_reduce_perf-dgx-a100-2node-k8s-legacy.log", "dgx-a100", 2, "ampere", gpu="A100"),
    Log("dgx-a100-4n", "all_reduce_perf-dgx-a100-4node-slurm-legacy.log", "dgx-a100", 4, "ampere", gpu="A100"),
    Log("p5-eks", "all_reduce_perf-h100-2node-mpirun-tag-output-eks.log", "p5", 2, "hopper", gpu="H100"),
    Log("p5-mpijob", "all_reduce_perf-p5-2node-mpijob-readme-excerpt.log", "p5", 2, "hopper", gpu="H100"),
    Log("p5-srun", "all_reduce_perf-p5-2node-srun-label-readme-excerpt.log", "p5", 2, "hopper", gpu="H100"),
    Log("h100-gcp", "all_reduce_perf-h100-2node-mpirun-gcp.log", "a3-mega", 2, "hopper", gpu="H100"),
    Log("p4de", "all_reduce_perf-p4de-2node-srun-label-readme-excerpt.log", "p4de", 2, "ampere", gpu="A100"),
    Log("roce-16", "all_reduce_perf-16rank-k8s-roce-legacy.log", "roce-16", 2, "ampere"),
    Log("2080ti-x2", "all_reduce_perf-2080ti-x2-autodl.log", "2080ti", 1, "volta", nvlink=False),
    Log("mi300x", "all_reduce_perf-mi300x-2node-rccl-tests-no-group.log", "mi300x", 2, "hopper", rccl=True),
    Log("mi355x", "all_reduce_perf-mi355x-2node-rccl-tests-no-footer.log", "mi355x", 2, "hopper", rccl=True),
    # Held out (benchmarks/heldout/SOURCES.md): one more shape of two systems above.
    Log("p5-1node", "all_reduce_perf-p5-1node-aws-batch-tag-output.log", "p5", 1, "hopper", gpu="H100", heldout=True),
    Log("gb200-oci-4", "all_reduce_perf-gb200-oci-4rank-one-host.log", "gb200", 1, "blackwell", gpu="GB200",
        heldout=True, op="all-reduce"),
    Log("gb200-oci-128", "all_reduce_perf-gb200-oci-128rank-2racks.log", "gb200", 2, "blackwell", gpu="GB200",
        heldout=True, op="all-reduce"),
    Log("gb200-oci-192", "all_reduce_perf-gb200-oci-192rank-3racks.log", "gb200", 3, "blackwell", gpu="GB200",
        heldout=True, ranks=192, op="all-reduce"),
    # Held out: one H100 cluster (8 nodes of 8 GPUs, 8 x 400G InfiniBand) at 2, 4 and 8 nodes, default settings.
    Log("h100-ib-16", "all_reduce_perf-h100-ib-16rank-2node-issue-comment.log", "h100-ib", 2, "hopper", gpu="H100",
        heldout=True),
    Log("h100-ib-32", "all_reduce_perf-h100-ib-32rank-4node-issue-comment.log", "h100-ib", 4, "hopper", gpu="H100",
        heldout=True),
    Log("h100-ib-64", "all_reduce_perf-h100-ib-64rank-8node-issue-comment.log", "h100-ib", 8, "hopper", gpu="H100",
        heldout=True),
)  # fmt: skip


NICS: dict[str, tuple[int, float, str]] = {
    "gb200": (72, 50.0, "4 ConnectX-7 a 4-GPU tray (Crusoe's MLPerf GB200-NVL72 system description; OCI's "
              "mpirun names 4 HCAs a host), 18 trays a rack, 400 Gb/s NDR (NVIDIA Mission Control's NVLink page)"),
    "dgx-a100": (8, 25.0, "8 x 200G HCA (ConnectX-6 HDR) a DGX A100 (NVIDIA/deepops, the 2-node log's page)"),
    "h100-ib": (8, 50.0, "8 x 400 Gb/s InfiniBand a node (nccl-tests issue 309: the cluster's owner, asked 'are you "
                "also running on IB 400G network?', 'yes, we are', and ~400 GB/s busbw 'the IB limit of our network')"),
    "p5": (32, 12.5, "32 EFA devices a p5.48xlarge (aws-samples' nccl-tests README, `vpc.amazonaws.com/efa: 32`; "
           "AWS's EFA guide), 3,200 Gb/s together"),
}  # fmt: skip
"""The NICs a node of each system, and each one's speed in GB/s a direction, as published (``--nics``:
``predict --nics N --nic-gbps G``); a GB200 "node" here is a rack, one NVLink domain."""


NO_NVLS = (
    "CoreWeave's GB200 NVL72 example jobs, whose runs its README publishes (NCCL 2.26.2, the 72-rank run's "
    "-b 512M -e 8G): `export NCCL_NVLS_ENABLE=0` in slurm/nccl-test-distributed-gb200-nvl72-enroot.slurm "
    "(coreweave/nccl-tests a736384, 'fix(slurm): disable NVLS ... per NV ask', 2025-04-14) and "
    "`-x NCCL_NVLS_ENABLE=0` in the MPIJob bee97e7 added with the runs (2025-05-05); 3042386 re-enabled it "
    "(2025-08-26). The logs do not print it; their times agree with it (the ring's ~600 us a call at 72 ranks)"
)
"""Why the CoreWeave GB200 logs are given ``predict --no-nvls`` (``Log.nvls``)."""


def facts_of(log: Log, nics: bool, nvls: bool | None = None) -> NodeFacts | None:
    """What ``predict`` is given of ``log``'s nodes: its system's NICs (``predict --nics``) where asked
    and published, and ``--no-nvls`` where the runs disabled NVLS (``nvls``: the measured runs', default
    ``log``'s own); None where neither."""
    off = not (log.nvls if nvls is None else nvls)
    if (not nics or log.system not in NICS) and not off:
        return None
    count, gbps, _ = NICS[log.system] if nics and log.system in NICS else (0, None, "")
    return NodeFacts(nics=count, nic_gbps=gbps, nvls=not off)


@dataclass
class Loaded:
    log: Log
    world: int
    times: dict[int, float]
    """Published time (us) per size: the smaller of in place and out of place."""
    rows: list[ResultRow]


def load(log: Log) -> Loaded:
    folder = HELDOUT if log.heldout else REAL
    rows = read_nccl_tests(folder / log.file, op=log.op, ranks=log.ranks)
    rows = [r for r in rows if r.wrong == 0 and r.size_bytes > 0]
    times: dict[int, float] = {}
    for r in rows:
        times[r.size_bytes] = min(times.get(r.size_bytes, math.inf), decision_time_us(r))
    return Loaded(log, rows[0].world_size, times, rows)


def nccl_machine(src: Loaded, sizes: list[int] | None = None) -> NcclMachine:
    """NCCL's model given the source log's peak bus bandwidth (what its topology search would find)."""
    use = sorted(sizes if sizes is not None else src.times)
    bus = peak_bus_bw_gbps(Op.ALL_REDUCE, src.world, [float(s) for s in use], [src.times[s] for s in use])
    return NcclMachine(bus_bw_gbps=bus, arch=src.log.arch, nvlink=src.log.nvlink)


def only_fit(rows: list[ResultRow], log: Log | None = None) -> Fit:
    """The log's one fit, with its GPU as ``collbench fit`` records it (and ``predict --gpu`` names it)."""
    (fit,) = fit_results(rows).fits
    devices = {r.device_name for r in rows}
    if len(devices) == 1:
        fit = dataclasses.replace(fit, device=devices.pop())
    if log is not None and log.gpu:
        (fit,) = with_gpu([fit], log.gpu)
    return fit


def sweep_ranks(
    sources: list[Loaded], fits: list[Fit], sizes: list[int], up_to: int, nics: bool = False
) -> tuple[tuple[int, int, int, int], tuple[int, int, int]]:
    """(decreases, adjacent pairs, NVLS's within one node, NCCL's choice among the decreases) and
    (decreases but NCCL's choice, adjacent pairs, NCCL's choice) at full nodes only: the sources' fits
    asked together at every rank count 2..``up_to`` (all to 64, then 8 a doubling), at the largest
    source's ranks a node (predict's default node count, its last node part-full where they do not
    divide), at ``sizes``. A decrease where NCCL's model picks NVLS on one
    node is counted apart: the switch reduces, each GPU sends its buffer once whatever the ranks, and
    NCCL's model gives NVLS a head (a channel) a GPU, so its time falls as GPUs join the node
    (tests/unit/test_predict_one_model). The second count compares each rank count that fills its
    nodes (every multiple of the ranks a node up to ``up_to``, priced where the first sweep has none)
    with the next (the issue's "at fixed size and ranks per node"), beside the first, which is
    stricter (a part-full last node). A decrease is NCCL's choice where, at the smaller shape, NCCL's own
    figures pick a family the fitted ones price dearer, and what they price cheapest there
    (``Priced.fastest_us``) is not below the time at the larger shape: had NCCL run that, nothing would
    fall; its own pick does. The ``ranks`` count keeps them, the ``full nodes`` count puts them apart."""
    ranks = sorted({*range(2, min(up_to, 64) + 1), *(int(64 * 2 ** (i / 8)) for i in range(80)), up_to})
    swept = {r for r in ranks if r <= up_to}
    measured = {src.world: src.log.nodes for src in sources}
    kept = measured_per_node(measured)
    per_node = kept[0] // kept[1] if kept is not None else 0
    filled = {k * per_node for k in range(1, up_to // per_node + 1) if k * per_node >= 2} if per_node else set()
    log = sources[0].log
    previous: tuple[list[float], list[float]] | None = None
    previous_full: tuple[list[float], list[float]] | None = None
    decreases = pairs = nvls = choice = full_decreases = full_pairs = full_choice = 0
    for n in sorted(swept | filled):
        nodes, _ = default_nodes(n, measured)
        entries, _, _ = price_fits(fits, n, nodes, shapes=Shapes(measured), nccl_arch=log.arch,
                                   nccl_nvlink=log.nvlink, nccl_facts=facts_of(log, nics))  # fmt: skip
        if not entries:
            return (0, 0, 0, 0), (0, 0, 0)
        times = [entries[0].time_us(s) for s in sizes]
        fastest = [(entries[0].fastest_us or entries[0].time_us)(s) for s in sizes]
        # NVLS within one node, whose time NCCL's model lets fall as GPUs join the node.
        apart = [nodes == 1 and "picks nvls/" in entries[0].basis(s) for s in sizes]
        if n in swept:
            if previous is not None:
                pairs += len(sizes)
                for a, cheapest, b, nvls_here in zip(*previous, times, apart, strict=True):
                    if b < a and nvls_here:
                        nvls += 1
                    elif b < a:
                        decreases += 1
                        choice += cheapest <= b
            previous = times, fastest
        if n in filled:
            if previous_full is not None:
                full_pairs += len(sizes)
                for a, cheapest, b, nvls_here in zip(*previous_full, times, apart, strict=True):
                    if b < a and not nvls_here:
                        full_choice += cheapest <= b
                        full_decreases += cheapest > b
            previous_full = times, fastest
    return (decreases, pairs, nvls, choice), (full_decreases, full_pairs, full_choice)


@dataclass
class PairResult:
    source: str
    target: str
    sizes: list[int]
    published: list[float]
    ours: list[float] | None
    nccl: list[float] | None
    why_not_ours: str = ""
    decreasing: int = 0
    """Predictions smaller than the one at the next smaller size."""
    same_scale: bool = False
    """Source and target at the same ranks and nodes: a check of the fit, not of a scale change."""
    rank_decreases: tuple[int, int, int, int] = (0, 0, 0, 0)
    """(decreases, adjacent pairs, NVLS's within one node, NCCL's choice among the decreases) over rank
    counts 2..the larger world size at the source's ranks a node."""
    full_node_decreases: tuple[int, int, int] = (0, 0, 0)
    """(decreases but NCCL's choice, adjacent pairs, NCCL's choice) among those rank counts that fill
    their nodes."""
    raised: int = 0
    """Predictions raised to the links' floor (a time the links cannot carry, before the floor)."""


def _errors(pred: list[float] | None, published: list[float]) -> list[float]:
    if pred is None:
        return []
    return [100 * abs(p - t) / t for p, t in zip(pred, published, strict=True)]


def _predict_pair(
    result: PairResult, fits: list[Fit], dst: Loaded, sources: list[Loaded], facts_from: Loaded, nics: bool
) -> PredictReport:
    """``dst``'s sizes predicted from ``fits`` (measured on ``sources``), NCCL's facts (architecture,
    NVLink, NICs) those of ``facts_from``'s log, into ``result``: the times and how many fall as the size
    grows. Returns predict's report."""
    report = predict(
        fits,
        dst.world,
        result.sizes,
        nodes=dst.log.nodes,
        measured_nodes={src.world: src.log.nodes for src in sources},
        nccl_arch=facts_from.log.arch,
        nccl_nvlink=facts_from.log.nvlink,
        simulate_max_ranks=0,
        # NVLS as the measured runs had it: the fits are theirs (one setting per system's sources here).
        nccl_facts=facts_of(facts_from.log, nics, nvls=sources[0].log.nvls),
    )
    result.ours = [p.time_us for p in report.predictions]
    result.decreasing = sum(1 for a, b in itertools.pairwise(result.ours) if b < a)
    return report


def scale_pair(src: Loaded, dst: Loaded, fit: Fit, nics: bool = False) -> PairResult:
    sizes = sorted(dst.times)
    published = [dst.times[s] for s in sizes]
    result = PairResult(src.log.name, dst.log.name, sizes, published, None, None)
    if fit.distrust():
        result.why_not_ours = f"source fit not usable: {fit.distrust()}"
    else:
        report = _predict_pair(result, [fit], dst, [src], src, nics)
        result.raised = sum(1 for p in report.predictions if "links' floor" in p.basis)
        result.rank_decreases, result.full_node_decreases = sweep_ranks(
            [src], [fit], sizes, max(src.world, dst.world), nics
        )
    result.same_scale = src.world == dst.world and src.log.nodes == dst.log.nodes
    if not src.log.rccl:
        machine = nccl_machine(src)
        result.nccl = [nccl_time_us(machine, Op.ALL_REDUCE, dst.world, dst.log.nodes, float(s)) for s in sizes]
    return result


_SMALL_SIZES = (8, 1 << 16, 1 << 20, 1 << 24, 1 << 28)


def together(dst: Loaded, sources: list[Loaded], nics: bool = False) -> PairResult:
    """``dst`` predicted from the rows of ``sources`` fitted together, as ``collbench fit A B C`` then
    ``predict`` would (rows of one shape in one fit): predict picks the fit whose links NCCL's model
    uses at the asked shape (``_pick_for``). NCCL's model stands beside it with the peak busbw of the
    logs of the picked fit's shape."""
    sizes = sorted(dst.times)
    published = [dst.times[s] for s in sizes]
    names = "+".join(src.log.name for src in sources)
    result = PairResult(names, dst.log.name, sizes, published, None, None)
    fits = [f for f in fit_results([r for src in sources for r in src.rows]).fits if not f.distrust()]
    gpus = {src.log.gpu for src in sources}
    if fits and len(gpus) == 1 and "" not in gpus:
        fits = with_gpu(fits, gpus.pop())
    if not fits:
        result.why_not_ours = "no usable fit"
        return result
    report = _predict_pair(result, fits, dst, sources, dst, nics)
    # Fits hand over where ranks cross a node class: checked from 8 B up, not only at the target's sizes.
    swept = sorted({*sizes, *_SMALL_SIZES})
    result.rank_decreases, result.full_node_decreases = sweep_ranks(
        sources, fits, swept, max(src.world for src in [dst, *sources]), nics
    )
    used = [src for src in sources if src.world == report.predictions[0].fitted_world_size]
    result.source = f"{names} (used: x{used[0].world})"
    if not any(src.log.rccl for src in used):
        machine = nccl_machine(max(used, key=lambda src: len(src.times)))
        result.nccl = [nccl_time_us(machine, Op.ALL_REDUCE, dst.world, dst.log.nodes, float(s)) for s in sizes]
    return result


def leave_one_out(src: Loaded, nics: bool = False) -> PairResult:
    sizes = sorted(src.times)
    published, ours, nccl = [], [], []
    why = ""
    unusable = 0
    for s in sizes:
        rest = [r for r in src.rows if r.size_bytes != s]
        published.append(src.times[s])
        try:
            fit = only_fit(rest, src.log)
        except UserError as exc:
            why = f"cannot fit without a size: {exc}"
            ours = []
            break
        if fit.distrust():
            unusable += 1
            why = why or f"e.g. {_size(s)}: {fit.distrust()}"
            ours.append(math.nan)
        else:
            (p,) = predict([fit], src.world, [s], nodes=src.log.nodes, measured_nodes={src.world: src.log.nodes},
                           nccl_arch=src.log.arch, nccl_nvlink=src.log.nvlink, simulate_max_ranks=0,
                           nccl_facts=facts_of(src.log, nics)).predictions  # fmt: skip
            ours.append(p.time_us)
        if not src.log.rccl:
            machine = nccl_machine(src, [x for x in sizes if x != s])
            nccl.append(nccl_time_us(machine, Op.ALL_REDUCE, src.world, src.log.nodes, float(s)))
    kept = [i for i, v in enumerate(ours) if not math.isnan(v)] if ours else []
    if unusable:
        why = f"{unusable} of {len(sizes)} sizes left out: the fit without them is not usable ({why})"
    return PairResult(
        src.log.name,
        "(itself)",
        [sizes[i] for i in kept],
        [published[i] for i in kept],
        [ours[i] for i in kept] if ours else None,
        [nccl[i] for i in kept] if nccl and ours else (nccl or None),
        why,
    )


def _median(pred: list[float], published: list[float]) -> float:
    return statistics.median(_errors(pred, published))


def _cells(r: PairResult, *before_errors: str) -> str:
    """A pair's cells in both tables of pairs: its sizes, ``before_errors``, collbench's and NCCL's model's
    median / worst error, and its decreases in size and in rank count."""
    e_ours, e_nccl = _errors(r.ours, r.published), _errors(r.nccl, r.published)
    ours_text = _fmt_err(e_ours) if e_ours else r.why_not_ours
    dec, adjacent, nvls, choice = r.rank_decreases
    full, full_adjacent, full_choice = r.full_node_decreases
    ranks = f"{dec}" + (f" ({choice} NCCL's choice)" if choice else "") + (f" (+{nvls} NVLS)" if nvls else "")
    full_text = f"{full}" + (f" (+{full_choice} NCCL's choice)" if full_choice else "")
    return (
        f"| {_size(r.sizes[0])}-{_size(r.sizes[-1])} {''.join(f'| {c} ' for c in before_errors)}"
        f"| {ours_text} | {_fmt_err(e_nccl)} "
        f"| {r.decreasing} / {ranks} of {adjacent} | {full_text} of {full_adjacent} |"
    )


def _print_pairs(title: str, pairs: list[PairResult], loaded: dict[str, Loaded]) -> tuple[list[float], list[float]]:
    """One table of pairs; returns the collbench and NCCL medians of those with predictions."""
    print(title + ", collbench vs NCCL's own model")
    print(
        "| source -> target | ranks | nodes | sizes | collbench | NCCL's model | decreasing: size / ranks "
        "| full nodes | raised |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    ours_medians, nccl_medians = [], []
    for r in pairs:
        src, dst = loaded[r.source], loaded[r.target]
        e_ours, e_nccl = _errors(r.ours, r.published), _errors(r.nccl, r.published)
        if e_ours:
            ours_medians.append(statistics.median(e_ours))
        if e_nccl:
            nccl_medians.append(statistics.median(e_nccl))
        where = f"| {r.source} -> {r.target} | {src.world} -> {dst.world} | {src.log.nodes} -> {dst.log.nodes} "
        print(f"{where}{_cells(r)} {r.raised} |")
    return ours_medians, nccl_medians


def _summary(pairs: list[PairResult], ours_medians: list[float], nccl_medians: list[float]) -> None:
    """The targets over ``pairs``: at or below NCCL's model, median within 15%, nothing decreasing."""
    if not (ours_medians and nccl_medians):
        return
    both = [r for r in pairs if r.ours and r.nccl]
    at_or_below = sum(1 for r in both if _median(r.ours or [], r.published) <= _median(r.nccl or [], r.published))
    print(
        f"\nacross the {len(pairs)} pairs: median of the pairs' median errors, collbench "
        f"{statistics.median(ours_medians):.1f}%, NCCL's model {statistics.median(nccl_medians):.1f}%; "
        f"collbench at or below NCCL's model on {at_or_below} of {len(both)}; median within 15% on "
        f"{sum(1 for m in ours_medians if m <= 15)} of {len(ours_medians)}; decreasing in size "
        f"{sum(r.decreasing for r in pairs)}, in rank count {sum(r.rank_decreases[0] for r in pairs)} of "
        f"{sum(r.rank_decreases[1] for r in pairs)} adjacent pairs (and {sum(r.rank_decreases[2] for r in pairs)} "
        f"where NCCL's model picks NVLS within one node; {sum(r.rank_decreases[3] for r in pairs)} of the "
        "decreases NCCL's choice), at full nodes only "
        f"{sum(r.full_node_decreases[0] for r in pairs)} of {sum(r.full_node_decreases[1] for r in pairs)} "
        f"(and {sum(r.full_node_decreases[2] for r in pairs)} NCCL's choice: its own figures pick a family the "
        "fitted ones price dearer at the smaller shape); "
        "raised to the links' floor "
        f"{sum(r.raised for r in pairs)} (0 predictions above what the links carry after it)"
    )


def _fmt_err(errors: list[float]) -> str:
    if not errors:
        return "-"
    return f"{statistics.median(errors):.1f} / {max(errors):.0f}"


def _size(n: int) -> str:
    for unit, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale}{unit}"
    return str(n)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--details", action="store_true", help="Print predicted vs published per size.")
    parser.add_argument("--json", type=Path, help="Write every number here.")
    parser.add_argument(
        "--nics",
        action="store_true",
        help="Give predict each system's published NICs (predict --nics N --nic-gbps G; NICS above).",
    )
    args = parser.parse_args()
    started = time.perf_counter()
    loaded = {log.name: load(log) for log in LOGS}
    fits = {name: only_fit(item.rows, item.log) for name, item in loaded.items()}
    pairs: list[PairResult] = []
    # A log whose fit is not usable (two sizes for two parameters) predicts nothing: it is a target only.
    targets_only = {name: fit.distrust() for name, fit in fits.items() if fit.distrust()}
    for src in loaded.values():
        for dst in loaded.values():
            if src is not dst and src.log.system == dst.log.system and src.log.name not in targets_only:
                pairs.append(scale_pair(src, dst, fits[src.log.name], args.nics))
    loo = [leave_one_out(item, args.nics) for item in loaded.values()]
    held = [r for r in pairs if loaded[r.source].log.heldout or loaded[r.target].log.heldout]
    kept = [r for r in pairs if not (loaded[r.source].log.heldout or loaded[r.target].log.heldout)]
    real = [r for r in kept if not r.same_scale]
    same = [r for r in kept if r.same_scale]
    title = "scale pairs (another rank or node count): median / worst error (%) of the time"
    _summary(real, *_print_pairs(title, real, loaded))
    _print_pairs("\nsame-scale pairs (other runs at the same ranks and nodes; not in the medians)", same, loaded)
    _summary(held, *_print_pairs(
        "\nheld-out pairs (a log of benchmarks/heldout/ on either side; never tuned against)", held, loaded
    ))  # fmt: skip
    for name, why in targets_only.items():
        print(f"{name}: a target only, its fit is not usable ({why})")
    print(
        "\ntogether: each log from every other log of its system fitted together (`fit A B C`, then `predict`"
        " picks the fit whose links NCCL's model uses at that shape; held-out logs are targets only):"
        " median / worst error (%)"
    )
    print(
        "| target | ranks | nodes | sizes | from | collbench | NCCL's model | decreasing: size / ranks | full nodes |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for dst in loaded.values():
        # Held-out logs are never sources: a log's system as the committed logs show it.
        sources = [
            src
            for src in loaded.values()
            if src is not dst and src.log.system == dst.log.system and not src.log.heldout
            and src.log.name not in targets_only
        ]  # fmt: skip
        if len(sources) < 2 or dst.log.rccl:
            continue
        r = together(dst, sources, args.nics)
        where = f"| {dst.log.name}{' (held out)' if dst.log.heldout else ''} | {dst.world} | {dst.log.nodes} "
        print(f"{where}{_cells(r, r.source)}")
    print("\nleave one size out (the log's own shape): median / worst error (%)")
    print("| log | ranks | sizes | collbench | NCCL's model |")
    print("| --- | --- | --- | --- | --- |")
    for r in loo:
        e_ours, e_nccl = _errors(r.ours, r.published), _errors(r.nccl, r.published) if r.ours else []
        extra = f" ({r.why_not_ours})" if r.why_not_ours else ""
        nccl_text = "- (RCCL)" if loaded[r.source].log.rccl else _fmt_err(e_nccl)
        print(f"| {r.source} | {loaded[r.source].world} | {len(r.sizes)} | {_fmt_err(e_ours)}{extra} | {nccl_text} |")
    if args.details:
        for r in pairs:
            print(f"\n{r.source} -> {r.target}: size, published us, collbench us (busbw), NCCL's model us (busbw)")
            factor = Op.ALL_REDUCE.spec.busbw_factor(loaded[r.target].world)
            for i, s in enumerate(r.sizes):
                pub = r.published[i]
                row = [f"{_size(s):>6}", f"{pub:10.1f} ({s / pub / 1e3 * factor:7.1f})"]
                for pred in (r.ours, r.nccl):
                    row.append("-" if pred is None else f"{pred[i]:10.1f} ({s / pred[i] / 1e3 * factor:7.1f})")
                print("  " + "  ".join(row))
    print(f"\n{time.perf_counter() - started:.1f} s")
    if args.json:
        args.json.write_text(json.dumps([r.__dict__ for r in pairs + loo], indent=1))


if __name__ == "__main__":
    main()
