"""One module per algorithm family; importing this package registers them all."""

from collbench.schedules.algorithms import direct, one_shot, recursive, ring, tree
from collbench.schedules.registry import NATIVE, register

register(NATIVE)

__all__ = ["direct", "one_shot", "recursive", "ring", "tree"]
