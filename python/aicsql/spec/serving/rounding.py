"""The spec's summary rounding: its frames are ``DataFrame(...).round(3)``."""

from __future__ import annotations

import math

__all__ = ["numpy_round3", "round3_row"]


def numpy_round3(x):
    """``numpy.round(x, 3)`` (what ``DataFrame.round(3)`` does to a float64
    column): ``rint(x * 1000.0) / 1000.0``, ties to even at the scaled value.
    Python's ``round(x, 3)`` rounds the exact decimal value instead and
    differs (``round(1.0015, 3) == 1.001``, numpy gives 1.002). Non-floats
    (int columns) are left alone, as pandas leaves them."""
    if not isinstance(x, float) or math.isnan(x) or math.isinf(x):
        return x
    y = x * 1000.0
    r = round(y)  # ties to even on the exact binary value = rint
    if r == 0:
        return math.copysign(0.0, y)
    return r / 1000.0


def round3_row(row: dict) -> dict:
    """A one-row frame's ``.round(3)``: every float field rounded, the rest as is."""
    return {k: numpy_round3(v) for k, v in row.items()}
