"""One module per algorithm family; importing this package registers them all."""

from collbench.schedules.registry import NATIVE, register

register(NATIVE)
