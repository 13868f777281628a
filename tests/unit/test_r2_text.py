"""R^2 as the fit tables print it: a value that rounds to zero from below is 0.000, never -0.000."""

from __future__ import annotations

import math

from collbench.cli.render.styles import r2_text


def test_negative_zero_prints_plain_zero() -> None:
    assert r2_text(-0.0001) == "0.000"
    assert r2_text(-0.0) == "0.000"
    assert r2_text(-0.0004999) == "0.000"


def test_other_values_keep_their_sign_and_figures() -> None:
    assert r2_text(0.9987) == "0.999"
    assert r2_text(-0.0006) == "-0.001"
    assert r2_text(-1.25) == "-1.250"
    assert r2_text(math.nan) == "-"
