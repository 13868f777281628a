"""Colours shared by the renderings: one per kind of link, best (green) to worst (red)."""

from __future__ import annotations

from collbench.topology.model import LinkKind

LINK_STYLES: dict[LinkKind, str] = {
    LinkKind.NVLINK: "bold green",
    LinkKind.NVSWITCH: "bold green",
    LinkKind.PIX: "cyan",
    LinkKind.PXB: "cyan",
    LinkKind.PHB: "yellow",
    LinkKind.NODE: "yellow",
    LinkKind.SYS: "red",
    LinkKind.LOOPBACK: "blue",
    LinkKind.NET: "magenta",
    LinkKind.MEASURED: "magenta",
}
