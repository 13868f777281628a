"""NCCL (torch.distributed): one rank per GPU, collbench's schedules and NCCL's own collectives.

NCCL's own collective can be forced to one algorithm x protocol x channel count per op
(``native:<algo>/<proto>@<N>ch``, :mod:`collbench.nccl.variants`), for the ops NCCL chooses an algorithm
for, on the versions and communicator shapes that run it (:mod:`collbench.nccl.support`). Its profiles
feed NCCL's exports (the tuner plugin's config, ``NCCL_ALGO``/``NCCL_PROTO``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from collbench.backends.base import NCCL_EXPORTS, Backend, Here, SweepOptions
from collbench.errors import UserError
from collbench.nccl.support import CommShape, tune_variants, unsupported_reason
from collbench.nccl.variants import check_variant_supported, parse_native_variant, parse_version
from collbench.schedules.ops import Op

ONE_RANK_NO_ALGORITHM = (
    "NCCL runs no algorithm on one rank (ncclLaunchOneRank in NCCL's src/enqueue.cc: a copy, or nothing at "
    "all in place)"
)
BARRIER_NOTE = (
    "barrier native on nccl: timed as the one-element all-reduce torch's ProcessGroupNCCL barrier runs "
    "(torch's dist.barrier docs), on each rank's own GPU, without the host wait dist.barrier adds"
)


class Nccl(Backend):
    name: ClassVar[str] = "nccl"
    library: ClassVar[str] = "NCCL"
    own_choices: ClassVar[str] = "NCCL's own algorithms, protocols and channel counts"
    torch_backend: ClassVar[str | None] = "nccl"
    on_gpu: ClassVar[bool] = True
    premultiplied_avg: ClassVar[bool] = True
    feeds: ClassVar[frozenset[str]] = frozenset({NCCL_EXPORTS})
    native_formula: ClassVar[bool] = True
    barrier_as_all_reduce: ClassVar[bool] = True

    def native_notes(self, op: Op | None, world_size: int) -> list[str]:
        if op is None:
            return [f"{ONE_RANK_NO_ALGORITHM}: native rows carry no nccl_algo or nccl_proto"] if world_size == 1 else []
        return [BARRIER_NOTE] if not op.spec.payload else []

    def unusable_reason(self, local_ranks: int, here: Here) -> str | None:
        if here.gpus() == 0:
            return "--backend nccl needs CUDA GPUs and none is visible here; use --backend gloo"
        here.check_nccl_usable(local_ranks)
        return None

    def chosen_by_auto(self, local_ranks: int, here: Here) -> bool:
        gpus = here.gpus()
        return gpus > 0 and gpus >= local_ranks

    def comm_shape(self, world_size: int, nodes: int, here: Here) -> CommShape:
        # CollNet needs NCCL_COLLNET_ENABLE=1 (NCCL's collnetEnable) and a plugin; without the variable it is off.
        collnet = here.environ("NCCL_COLLNET_ENABLE", "0").strip() == "1"
        return CommShape(world_size=world_size, nodes=nodes, collnet=collnet)

    def forced_problem(self, algo: str) -> str | None:
        try:
            parse_native_variant(algo)
        except UserError as exc:
            return str(exc)
        return None

    def version(self, here: Here) -> str:
        return here.nccl_version()

    def forced_variants(
        self,
        options: SweepOptions,
        key: str,
        ops: list[Op],
        per_op: dict[Op, list[str]],
        skipped: list[str],
        here: Here,
    ) -> None:
        variant = parse_native_variant(key)
        text = here.nccl_version()
        version = parse_version(text) if text else None
        if version is not None:
            # NCCL fails communicator creation on an algorithm it does not know: refuse it here, in one line.
            check_variant_supported(variant, version)
        shape = self.comm_shape(*here.job_shape(options.world_size), here)
        if shape.world_size == 1:
            # Rows of a forced variant would name an algorithm that never ran.
            skipped.append(f"{variant.name}: {ONE_RANK_NO_ALGORITHM}, so there is nothing to force; skipped")
            return
        reasons: list[str] = []
        for op in (op for op in ops if op.spec.nccl_tuned):
            reason = unsupported_reason(op.value, variant.algo, variant.proto, version, shape)
            if reason is not None:
                reasons.append(f"{variant.name} {op.value}: {reason}; skipped")
            elif variant.name not in per_op[op]:
                # The canonical spelling, so that rows, resume keys and NCCL_ALGO agree however it was typed.
                per_op[op].append(variant.name)
        untuned = [op.value for op in ops if not op.spec.nccl_tuned and op.spec.torch_native]
        if untuned:
            # NCCL runs these as grouped ncclSend/ncclRecv: no algorithm or protocol to force (one line).
            reasons.append(
                f"{variant.name} {', '.join(untuned)}: NCCL runs these as grouped send/recv, with no algorithm or "
                "protocol to force; skipped"
            )
        if no_scan := [op.value for op in ops if not op.spec.torch_native]:
            reasons.append(f"{variant.name} {', '.join(no_scan)}: NCCL has no scan; skipped")
        skipped.extend(reasons)

    def tune_variants(self, ops: Sequence[str], shape: CommShape, here: Here) -> tuple[str, ...]:
        """Every op's :func:`collbench.nccl.support.tune_variants` on this NCCL, once each, in the order of the
        first op that runs it: NCCL's exports must be chosen among what NCCL itself runs, measured."""
        text = here.nccl_version()
        return variant_names(ops, parse_version(text) if text else None, shape)


def variant_names(ops: Sequence[str], version: tuple[int, int, int] | None, shape: CommShape) -> tuple[str, ...]:
    """Every op's :func:`tune_variants`, once each, in the order of the first op that runs it."""
    chosen = list(Op) if any(o.strip().lower() == "all" for o in ops) else [Op.parse(o) for o in ops]
    names: dict[str, None] = {}
    for op in chosen:
        names.update((v.name, None) for v in tune_variants(op.value, version, shape))
    return tuple(names)


NCCL = Nccl()
