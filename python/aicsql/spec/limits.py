"""Bounds on the work of one estimate (the same documented limits as the
Rust path). No real deployment comes near them; they keep one call in a SQL
scan from running for minutes (a decode step costs ``osl / 32`` sampled
steps). Beyond a limit a call raises ValueError naming the argument."""

from __future__ import annotations

from typing import Optional

MAX_BATCH = 65_536
MAX_ISL = 2**24
MAX_OSL = 2**20
MAX_TOKENS = 2**32  # batch * isl of one context step
MAX_PARALLEL = 4_096  # each of tp, moe_tp, moe_ep, dp, pp, cp

__all__ = ["MAX_BATCH", "MAX_ISL", "MAX_OSL", "MAX_TOKENS", "MAX_PARALLEL", "check_step", "check_image_tokens"]


def _check(name: str, value: int, limit: int) -> None:
    if value > limit:
        raise ValueError(f"{name} = {value} exceeds the limit of {limit} (aicsql bounds the work of one call)")


def check_step(tp: int, batch: int, isl: int, osl: int, moe_tp: Optional[int], moe_ep: Optional[int],
               dp: Optional[int] = None, pp: Optional[int] = None, cp: Optional[int] = None) -> None:  # fmt: skip
    """Raises ValueError for the first argument beyond its limit."""
    _check("batch", batch, MAX_BATCH)
    _check("isl", isl, MAX_ISL)
    _check("osl", osl, MAX_OSL)
    _check("batch * isl", batch * isl, MAX_TOKENS)
    for name, value in (("tp", tp), ("moe_tp", moe_tp), ("moe_ep", moe_ep), ("dp", dp), ("pp", pp), ("cp", cp)):
        if value is not None:
            _check(name, value, MAX_PARALLEL)


def check_image_tokens(batch: int, isl: int, image_tokens: int) -> None:
    """The bounds of `check_step` on the LLM's effective input, the text's
    `isl` plus a request's `image_tokens` (a vision-language estimate's
    images, docs/spec/options.md 4.4): ValueError naming the image tokens."""
    if image_tokens <= 0:
        return
    _check(f"isl + image tokens ({isl} + {image_tokens})", isl + image_tokens, MAX_ISL)
    _check(f"batch * (isl + image tokens) ({batch} * ({isl} + {image_tokens}))", batch * (isl + image_tokens),
           MAX_TOKENS)  # fmt: skip
