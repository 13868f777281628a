"""Which GPU each local rank really uses: CUDA's numbering, not NVML's.

Rank ``i`` runs on ``cuda:i``, and CUDA numbers the GPUs it shows differently from NVML:

* ``CUDA_DEVICE_ORDER`` (CUDA C Programming Guide, "CUDA Environment Variables"): ``FASTEST_FIRST``
  (the default) "causes CUDA to enumerate the available devices in fastest to slowest order using a
  simple heuristic"; ``PCI_BUS_ID`` "orders devices by PCI bus ID in ascending order". NVML's index
  order carries no such promise (``nvmlDeviceGetHandleByIndex``: devices should be looked up by PCI
  id or UUID). The heuristic is undocumented: among identical GPUs it keeps PCI bus order, which is
  what is assumed here; GPUs of different models under ``FASTEST_FIRST`` cannot be placed with
  certainty, and that is said (set ``CUDA_DEVICE_ORDER=PCI_BUS_ID``).
* ``CUDA_VISIBLE_DEVICES``: a comma-separated list of indices into that order, or of GPU UUIDs
  (``GPU-8a3f...``; a unique prefix is enough). CUDA shows only the devices listed, in the order
  listed, and stops at the first entry it cannot resolve (the devices before it stay visible).
  ``MIG-...`` entries name MIG instances, which this topology does not describe. An empty value
  hides every GPU.

So the topology's GPUs are re-ordered (and cut) to CUDA's view, matched by PCI bus id and UUID.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from collbench.errors import ConfigError
from collbench.topology.model import Device, DeviceKind, Topology

VISIBLE = "CUDA_VISIBLE_DEVICES"
ORDER = "CUDA_DEVICE_ORDER"


@dataclasses.dataclass(frozen=True, slots=True)
class CudaView:
    """The GPUs CUDA shows, ``cuda:0`` first, and a note when the mapping rests on an assumption."""

    devices: tuple[Device, ...]
    note: str = ""


def _pci_key(d: Device) -> tuple[int, str]:
    # Devices without a bus id (hand-written topologies) keep their place after those with one.
    return (0, d.bus_id) if d.bus_id else (1, f"{d.index:08d}")


def enumeration_order(gpus: Sequence[Device], order: str | None) -> tuple[list[Device], str]:
    """The GPUs as CUDA enumerates them before ``CUDA_VISIBLE_DEVICES`` applies, and a note if unsure.

    Raises ConfigError for a ``CUDA_DEVICE_ORDER`` CUDA does not know.
    """
    value = (order or "FASTEST_FIRST").strip().upper()
    if value not in ("FASTEST_FIRST", "PCI_BUS_ID"):
        raise ConfigError(f"{ORDER}={order!r}: CUDA knows FASTEST_FIRST and PCI_BUS_ID")
    ordered = sorted(gpus, key=_pci_key)
    note = ""
    if value == "FASTEST_FIRST" and len({d.name for d in gpus}) > 1:
        note = (
            f"{ORDER} is FASTEST_FIRST and the GPUs differ ({', '.join(sorted({str(d.name) for d in gpus}))}): "
            f"CUDA's order is a guess here; set {ORDER}=PCI_BUS_ID so ranks map to known GPUs"
        )
    return ordered, note


def _resolve(entry: str, ordered: Sequence[Device]) -> Device | None:
    text = entry.strip()
    if text.isdigit() or (text.startswith("-") and text[1:].isdigit()):
        index = int(text)
        return ordered[index] if 0 <= index < len(ordered) else None
    if text.upper().startswith("MIG-"):
        raise ConfigError(f"{VISIBLE} names a MIG instance ({text}): collbench describes whole GPUs only")
    if text.upper().startswith("GPU-"):
        matches = [d for d in ordered if d.uuid and d.uuid.lower().startswith(text.lower())]
        if len(matches) > 1:
            raise ConfigError(f"{VISIBLE}: {text} is the start of {len(matches)} GPUs' UUIDs; give more of it")
        return matches[0] if matches else None
    return None


def cuda_view(gpus: Sequence[Device], env: Mapping[str, str]) -> CudaView:
    """The GPUs CUDA shows a process with environment ``env``, in ``cuda:N`` order.

    Raises ConfigError for a ``CUDA_VISIBLE_DEVICES`` that lists one GPU twice (two ranks would share
    it, which NCCL refuses), names a MIG instance, or gives an ambiguous UUID prefix.
    """
    ordered, note = enumeration_order(gpus, env.get(ORDER))
    visible = env.get(VISIBLE)
    if visible is None:
        return CudaView(tuple(ordered), note)
    shown: list[Device] = []
    for entry in visible.split(",") if visible.strip() else []:
        device = _resolve(entry, ordered)
        if device is None:
            # As CUDA does: the rest of the list is ignored.
            cut = f"{VISIBLE}={visible}: {entry.strip()!r} is no GPU here; CUDA ignores it and what follows"
            note = f"{note}; {cut}" if note else cut
            break
        if device in shown:
            raise ConfigError(f"{VISIBLE}={visible} lists {device.id} twice")
        shown.append(device)
    return CudaView(tuple(shown), note)


def in_cuda_order(topology: Topology, env: Mapping[str, str]) -> tuple[Topology, str]:
    """``topology`` with its GPUs cut and numbered as CUDA shows them, and a note (empty when sure).

    GPU ``k`` of the result (id ``GPUk``, index ``k``) is ``cuda:k``, so rank ``k`` runs on it, and
    the numbers agree with NCCL's (its XML files name GPUs by CUDA device number). Where that differs
    from NVML's numbering the device keeps it as ``nvml_index`` in its extra facts; bus id and UUID
    still name the physical GPU. Links of hidden GPUs go with them; no GPUs: returned as it is.
    """
    gpus = topology.gpus
    if not gpus:
        return topology, ""
    view = cuda_view(gpus, env)
    if list(view.devices) == list(gpus) and all(d.index == k and d.id == f"GPU{k}" for k, d in enumerate(gpus)):
        return topology, view.note
    if not view.devices:
        raise ConfigError(f"{VISIBLE}={env.get(VISIBLE, '')!r} hides every GPU of this machine")
    renamed: dict[str, str] = {}
    devices: list[Device] = []
    for k, d in enumerate(view.devices):
        renamed[d.id] = f"GPU{k}"
        extra = d.extra if d.index == k else (*d.extra, ("nvml_index", str(d.index)))
        devices.append(dataclasses.replace(d, id=f"GPU{k}", index=k, extra=extra))
    hidden = {d.id for d in gpus} - set(renamed)
    links = tuple(
        dataclasses.replace(lk, a=renamed.get(lk.a, lk.a), b=renamed.get(lk.b, lk.b))
        for lk in topology.links
        if not (lk.ends & hidden)
    )
    others = tuple(d for d in topology.devices if d.kind != DeviceKind.GPU)
    return dataclasses.replace(topology, devices=(*devices, *others), links=links), view.note
