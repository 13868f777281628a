"""collbench.units: the one size parser every command reads sizes with, and the size labels."""

from __future__ import annotations

import pytest

from collbench.errors import ConfigError
from collbench.units import factor_text, format_bytes, parse_size, size_label


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("0", 0),
        ("8", 8),
        ("4096", 4096),
        ("8B", 8),
        ("64K", 65536),
        ("64k", 65536),
        ("64KB", 65536),
        ("64KiB", 65536),
        ("64Ki", 65536),
        ("1M", 1 << 20),
        ("1MiB", 1 << 20),
        ("2g", 2 << 30),
        ("1G", 1 << 30),
        (" 4 K ", 4096),
        ("1.5M", 3 << 19),  # nccl-tests reads -b 1.5M as 1572864 bytes
        ("0.5K", 512),
        ("2.0", 2),
    ],
)
def test_sizes_read_as_nccl_tests_reads_them(text: str, size: int) -> None:
    assert parse_size(text) == size


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("0.5", "not a whole number of bytes"),  # never truncated to 0
        ("1.1K", "not a whole number of bytes"),
        ("1.00000000000000001K", "not a whole number of bytes"),  # a float would round it to 1024
        ("twelve", "not a size"),
        ("12Q", "not a size"),
        ("1T", "not a size"),
        ("\u0661\u0662\u0668", "not a size"),  # Arabic-Indic digits: 128 to int() and to \d, not to nccl-tests
        ("\uff18K", "not a size"),  # a full-width 8
        ("-1", "not a size"),
        ("1e3", "not a size"),
        (".5K", "not a size"),
        ("8i", "not a size"),
        ("", "not a size"),
        ("lots", "not a byte count"),
    ],
)
def test_what_is_not_a_whole_number_of_bytes_is_refused(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        parse_size(text, "-b/--min-bytes")
    assert str(info.value).startswith(f"-b/--min-bytes {text!r} ")


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


@pytest.mark.parametrize(
    ("size", "label"),
    [
        (0, "0 B"),
        (1000, "1000 B"),
        (1024, "1 KiB"),
        (1536, "1.5 KiB"),
        (92682, "90.5 KiB"),
        (5931642, "5.66 MiB"),
        (3 << 20, "3 MiB"),
        (2 << 30, "2 GiB"),
        (3 << 40, "3 TiB"),
        (1047552, "1023 KiB"),  # not 1.02e+03 KiB: whole units from 1000 up
        (1000 << 20, "1000 MiB"),
    ],
)
def test_format_bytes_in_powers_of_1024_to_three_digits(size: int, label: str) -> None:
    assert format_bytes(size) == label


@pytest.mark.parametrize(
    ("factor", "text"),
    [(64.0, "64"), (1024.0, "1024"), (16384 / 3, "5461"), (21.333, "21.3"), (999.4, "999"), (999.6, "1000")],
)
def test_a_multiplier_never_in_scientific_notation(factor: float, text: str) -> None:
    # predict from fits at 16 ranks to 16,384 said 'x1.02e+03' in its title and certainty.
    assert factor_text(factor) == text
