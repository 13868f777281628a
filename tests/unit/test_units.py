"""collbench.units: the one size label the terminal tables and the report share."""

from __future__ import annotations

import pytest

from collbench.units import size_label


@pytest.mark.parametrize(
    ("size", "label"),
    [
        (0, "0B"),
        (8, "8B"),
        (1023, "1023B"),
        (1024, "1K"),
        (1536, "1.5K"),
        (4 << 20, "4M"),
        (3 << 30, "3G"),
        (5 << 40, "5120G"),  # nccl-tests has no T either
        ((1 << 30) + 1, "1G"),  # within float error of a whole number
        (1.5 * (1 << 20), "1.5M"),
    ],
)
def test_sizes_read_as_nccl_tests_writes_them(size: float, label: str) -> None:
    assert size_label(size) == label
