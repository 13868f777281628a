"""What a machine is: devices, the links between them, and where that knowledge came from."""

from collbench.topology.model import (
    Device,
    DeviceKind,
    Link,
    LinkKind,
    LinkSource,
    NodeLink,
    Topology,
)

__all__ = ["Device", "DeviceKind", "Link", "LinkKind", "LinkSource", "NodeLink", "Topology"]
