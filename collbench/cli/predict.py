"""`collbench predict`: times per algorithm at world sizes no one here has, from fitted models."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from collbench.cli.console import console, print_note
from collbench.cli.options import split_values
from collbench.errors import ConfigError, InputFileError
from collbench.models.link_floor import with_gpu
from collbench.models.predict_defaults import default_nodes, uneven_note
from collbench.models.stored import PREDICT_NODES_ADVICE, fit_nvlink_domain_note, load_fits, nodes_measured
from collbench.units import MAX_BYTES, check_nodes, check_ranks, parse_size

DEFAULT_SIZES = "1K,8K,64K,512K,4M,32M,256M,1G"

if TYPE_CHECKING:
    from collbench.models.nccl_graph import NodeFacts
    from collbench.models.nccl_machine import Arch


MAX_PREDICT_SIZES = 256
"""The most sizes one predict prices (every algorithm at each): a table of 256 rows is already more than read."""


def _arch(name: str) -> Arch:
    from collbench.models.nccl_machine import ARCHS

    for arch in ARCHS:
        if arch == name:
            return arch
    raise ConfigError(f"--nccl-arch {name!r}: expected one of {', '.join(ARCHS)}")


NO_NVLS_HELP = (
    "The runs set NCCL_NVLS_ENABLE=0: NCCL's model runs ring and tree where it would run NVLS, for the measured "
    "shape and the asked one."
)
"""``--no-nvls``'s help, one wording for predict, profile predict and tune --predict-ranks."""


MAX_NICS = 1024
"""The most NICs a node may be said to have (NCCL's topology holds up to 32 a host; an NVL72 rack 72)."""
MAX_NIC_GBPS = 10_000.0
"""The fastest NIC one may name, GB/s a direction (today's are 50-100)."""


def _node_facts(nics: int | None, nic_gbps: float | None, collnet: bool, nvls: bool = True) -> NodeFacts:
    """The nodes' NICs, CollNet plugin and NVLS setting as given; raises ConfigError for one of the NIC
    options without the other, or a count or speed out of range."""
    from collbench.models.nccl_graph import NodeFacts

    if (nics is None) != (nic_gbps is None):
        raise ConfigError("--nics and --nic-gbps go together: the NICs a node and each one's speed in GB/s")
    if nics is not None and not 1 <= nics <= MAX_NICS:
        raise ConfigError(f"--nics must be 1 to {MAX_NICS:,}, got {nics}")
    if nic_gbps is not None and not (0 < nic_gbps <= MAX_NIC_GBPS and math.isfinite(nic_gbps)):
        raise ConfigError(f"--nic-gbps must be a speed above 0 and at most {MAX_NIC_GBPS:,.0f} GB/s, got {nic_gbps}")
    return NodeFacts(nics=nics or 0, nic_gbps=nic_gbps, collnet=collnet, nvls=nvls)


def predict(
    ranks: Annotated[int, typer.Option("--ranks", help="World size to predict for.")],
    profile: Annotated[
        Path | None, typer.Option("--profile", metavar="PROFILE.yaml", help="A profile with fits.")
    ] = None,
    fits: Annotated[
        Path | None, typer.Option("--fits", metavar="FITS.json", help="`collbench fit --json` output.")
    ] = None,
    nodes: Annotated[
        int | None,
        typer.Option(
            "--nodes", help="Nodes the ranks spread over (default: as many as keep the measured ranks a node)."
        ),
    ] = None,
    op: Annotated[
        list[str] | None, typer.Option("--op", metavar="OP[,OP...]", help="Only these collectives (commas or repeats).")
    ] = None,
    sizes: Annotated[
        str, typer.Option("--sizes", metavar="SIZE[,SIZE...]", help="Comma-separated sizes (K/M/G = 1024^n).")
    ] = DEFAULT_SIZES,
    json_out: Annotated[bool, typer.Option("--json", help="Print the prediction as JSON, nothing else.")] = False,
    measured_nodes: Annotated[
        int | None,
        typer.Option(
            "--measured-nodes",
            help="Nodes the fits were measured on, where the fits do not say it (`fit --json` of rows that did not).",
        ),
    ] = None,
    gpu: Annotated[
        str | None,
        typer.Option(
            "--gpu",
            metavar="NAME",
            help="The GPU the fits were measured on, where they do not name one (GB200, H100, A100, ...).",
        ),
    ] = None,
    nccl_arch: Annotated[
        str | None,
        typer.Option(
            "--nccl-arch",
            metavar="NAME",
            help="GPU generation for NCCL's model of native: volta, ampere, hopper, blackwell "
            "(default: the fits' GPU, else hopper).",
        ),
    ] = None,
    nics: Annotated[
        int | None,
        typer.Option(
            "--nics",
            metavar="N",
            help="NICs a node (with --nic-gbps): NCCL's channels and NVLS-tree across nodes, and the "
            "least time the NICs allow.",
        ),
    ] = None,
    nic_gbps: Annotated[
        float | None,
        typer.Option("--nic-gbps", metavar="G", help="Each NIC's speed, GB/s a direction (400 Gb/s is 50)."),
    ] = None,
    collnet: Annotated[
        bool,
        typer.Option(
            "--collnet", help="A CollNet plugin is loaded (NCCL_COLLNET_ENABLE=1): NCCL's model may pick CollNet."
        ),
    ] = False,
    no_nvls: Annotated[
        bool,
        typer.Option(
            "--no-nvls",
            help=NO_NVLS_HELP,
        ),
    ] = False,
    hierarchy: Annotated[
        int | None,
        typer.Option(
            "--hierarchy",
            metavar="K",
            help="Compare ring, hierarchical and two-tree all-reduce on nodes of K ranks, 1 node up to --ranks.",
        ),
    ] = None,
) -> None:
    """Predict times per algorithm at world sizes no one here has."""
    if (profile is None) == (fits is None):
        raise ConfigError("give exactly one of --profile P or --fits F")
    check_ranks(ranks, 2, "predict")  # before anything is assumed from it (the nodes)
    for option, count in (("--nodes", nodes), ("--measured-nodes", measured_nodes)):
        if count is not None:
            check_nodes(count, "predict", option)
    if hierarchy is not None:
        _refuse_beside_hierarchy(nodes, op, measured_nodes, gpu, nccl_arch, nics, nic_gbps, collnet, no_nvls)
    from collbench.cli.render.models import render_prediction
    from collbench.models.nccl_machine import ARCHS
    from collbench.models.predict import pick_fits
    from collbench.models.predict import predict as predict_times

    profile_nodes: dict[int, int] | None = None
    if profile is not None:
        from collbench.profile.document import Profile

        # Read once, and checked whole as every command that reads a profile checks it (predict took its
        # fits alone, and a profile with broken rules or of a schema to come predicted, exit 0).
        read = Profile.load(profile)
        if not read.fits:
            raise InputFileError(str(profile), "has no fits to predict from (the 'fits' list is empty or absent)")
        loaded, profile_nodes = list(read.fits), read.nodes_measured()
    else:
        assert fits is not None  # exactly one of the two, checked above
        loaded = load_fits(fits)
    asked = [s for s in sizes.split(",") if s.strip()]
    if len(asked) > MAX_PREDICT_SIZES:
        # Each size is priced for every algorithm: 10,000 sizes took minutes.
        raise ConfigError(f"--sizes lists {len(asked):,} sizes; predict takes at most {MAX_PREDICT_SIZES}")
    size_list = sorted({parse_size(s, "--sizes") for s in asked})
    if not size_list:
        # '--sizes ,,' printed the nodes it assumed, then 'no sizes to predict': two lines, the first moot.
        raise ConfigError(f"--sizes {sizes!r} names no size; give sizes such as 4K,1M")
    if size_list[0] == 0:
        # As fit says of a 0-byte row: NCCL returns at once for a count of 0, so a 0-byte call has no
        # time to predict; a fit's alpha there would be a latency no call pays.
        raise ConfigError(
            "--sizes 0: a call of 0 bytes moves no data (NCCL returns at once); give sizes of 1 byte or more"
        )
    if size_list[-1] >= MAX_BYTES:
        # 999999999G was priced (976562 TiB, 4e9 s): no rank holds such a message, no file records one.
        raise ConfigError(
            f"--sizes {size_list[-1]}: sizes are below 2^50 bytes (1 PiB), more than any rank's message "
            "(K/M/G are powers of 1024)"
        )
    if hierarchy is not None:
        # Imported here only: the comparison's own module (models/hierarchy.py) and table.
        from collbench.cli.predict_hierarchy import run as run_hierarchy

        run_hierarchy(loaded, hierarchy, ranks, size_list, json_out)
        return
    op_names = [o for o in split_values(op) if o.lower() != "all"]
    arch = nccl_arch.strip().lower() if nccl_arch is not None else None
    if arch is not None and arch not in ARCHS:
        raise ConfigError(f"--nccl-arch {nccl_arch!r}: expected one of {', '.join(ARCHS)}")
    facts = _node_facts(nics, nic_gbps, collnet, nvls=not no_nvls)
    nccl_only = [
        flag
        for flag, given in (("--collnet", collnet), ("--nccl-arch", arch is not None), ("--no-nvls", no_nvls))
        if given
    ]
    refuse_nccl_only(nccl_only, {f.backend for f in loaded}, "these fits are")
    if gpu is not None:
        loaded = with_gpu(loaded, gpu)
    measured = nodes_measured(loaded, measured_nodes, profile_nodes)
    if measured_nodes is None:
        # A GB200 log's hosts are the trays of one NVLink domain, which NCCL counts as one node.
        said = {fit_nvlink_domain_note(f, measured.get(f.world_size), PREDICT_NODES_ADVICE) for f in loaded}
        for line in sorted(n for n in said if n is not None):
            print_note("note", line)
    if nodes is not None and (uneven := uneven_note(ranks, nodes, measured)) is not None:
        # Predicted, as the default node count's part-full last node is: refused here, it was accepted there.
        print_note("note", uneven)
    if nodes is None and any(not f.distrust() for f in pick_fits(loaded, op_names or None)):
        nodes, assumed = default_nodes(ranks, measured)
        print_note("assumed", assumed)
    report = predict_times(
        loaded,
        ranks,
        size_list,
        # With no fit it may use for the ops asked, predict refuses (saying why, and what to measure)
        # before any shape is priced: asking first for the nodes would only defer that.
        nodes=1 if nodes is None else nodes,
        ops=op_names or None,
        measured_nodes=measured,
        nccl_arch=None if arch is None else _arch(arch),
        nccl_facts=facts,
    )
    # One line a fit: a refusal's own reasons are joined by '; ' too, so joined fits read as one run-on.
    for refused in report.refused:
        print_note("not extrapolated", refused)
    for line in report.notes:
        print_note("note", line)
    if json_out:
        typer.echo(json.dumps(report.to_dict(), indent=2))
        return
    console.print(render_prediction(report))


def refuse_nccl_only(given: Sequence[str], backends: Iterable[str], whose: str) -> None:
    """ConfigError where options that reach NCCL's own model alone (``given``: ``--no-nvls``, ...) are
    asked of measurements none of whose ``backends`` is NCCL's native (on gloo or MPI fits they changed
    nothing); ``whose`` names them in the line ("these fits are", "this tune measures")."""
    from collbench.models.predict import native_modelled

    named = sorted(set(backends))
    if not given or any(native_modelled(b) for b in named):
        return
    raise ConfigError(
        f"{' and '.join(given)} {'describe' if len(given) > 1 else 'describes'} NCCL's own choice, "
        f"and {whose} {', '.join(named)}'s: leave {'them' if len(given) > 1 else 'it'} out"
    )


def _refuse_beside_hierarchy(
    nodes: int | None,
    op: list[str] | None,
    measured_nodes: int | None,
    gpu: str | None,
    nccl_arch: str | None,
    nics: int | None,
    nic_gbps: float | None,
    collnet: bool,
    no_nvls: bool = False,
) -> None:
    """ConfigError naming the options --hierarchy does not take: its comparison is all-reduce on nodes of K
    ranks from one node up, priced from the fits' own links ('--hierarchy 4 --op broadcast' printed the
    all-reduce comparison and said nothing of --op)."""
    other_ops = [o for o in split_values(op) if o.strip().lower() not in ("all-reduce", "all")]
    ignored = [
        flag
        for flag, given in (
            ("--nodes", nodes is not None),
            ("--op", bool(other_ops)),
            ("--measured-nodes", measured_nodes is not None),
            ("--gpu", gpu is not None),
            ("--nccl-arch", nccl_arch is not None),
            ("--nics", nics is not None),
            ("--nic-gbps", nic_gbps is not None),
            ("--collnet", collnet),
            ("--no-nvls", no_nvls),
        )
        if given
    ]
    if ignored:
        raise ConfigError(
            f"--hierarchy compares all-reduce on nodes of K ranks, from one node up to --ranks, from the fits' own "
            f"links: leave out {', '.join(ignored)}"
        )
