"""Readers of results measured by other tools, into collbench's result rows."""

from __future__ import annotations

from collbench.importers.nccl_tests import looks_like_nccl_tests, read_nccl_tests

__all__ = ["looks_like_nccl_tests", "read_nccl_tests"]
