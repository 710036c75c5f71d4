"""Quant modes, system constants and the GEMM speed-of-light (docs/spec 3 and 5.2).

Numbers are kept in the types the spec's Python sees: the system yaml's
integers stay Python ``int`` (``mem_bw: 4800000000000``), the quant
multipliers are ``int`` except the fractional ones (``0.5``, ``0.5625``).
That matters for bits: ``2*m*n*k / flops`` on two ints is Python's correctly
rounded integer true division, which is what the spec computes.
"""

from __future__ import annotations

from typing import Dict, NamedTuple, Optional, Union

import yaml

__all__ = ["QuantMode", "GEMM_QUANTS", "GEMM_TABLELESS", "gemm_quant", "gemm_mode", "SystemSpec", "gemm_sol"]

Number = Union[int, float]


class QuantMode(NamedTuple):
    """A GEMM quant mode: bytes per element ("memory"), compute multiplier, name."""

    name: str
    memory: Number
    compute: int

    def python_repr(self) -> str:
        """How the spec's Python prints the enum member (used in miss messages)."""
        return (
            f"<GEMMQuantMode.{self.name}: QuantMapping(memory={self.memory}, "
            f"compute={self.compute}, name='{self.name}')>"
        )

    @property
    def table_slice(self) -> str:
        """The `gemm_dtype` slice a lookup reads (docs/spec 8.1: fp8_static reads fp8)."""
        return "fp8" if self.name == "fp8_static" else self.name


# Spec section 3, GEMM row, in the spec's order.
GEMM_QUANTS: Dict[str, QuantMode] = {
    q.name: q
    for q in (
        QuantMode("bfloat16", 2, 1),
        QuantMode("fp8", 1, 2),
        QuantMode("fp8_static", 1, 2),
        QuantMode("fp8_block", 1, 2),
        QuantMode("nvfp4", 9 / 16, 4),
        QuantMode("int8_wo", 1, 1),
        QuantMode("int4_wo", 0.5, 1),
        QuantMode("sq", 1, 2),
    )
}


# The spec's GEMMQuantMode members no database has a table for: only a quant
# override names one (docs/spec/options.md 1.1), and every lookup keyed on it
# misses, as the spec's does (GEMM_QUANTS, the modes the GEMM functions take,
# leaves them out).
GEMM_TABLELESS: Dict[str, QuantMode] = {"fp8_ootb": QuantMode("fp8_ootb", 1, 2)}


def gemm_mode(name: str) -> QuantMode:
    """The quant mode an op is built with: `GEMM_QUANTS` or `GEMM_TABLELESS`."""
    q = GEMM_QUANTS.get(name)
    return q if q is not None else GEMM_TABLELESS[name]


def gemm_quant(name: str) -> QuantMode:
    """The quant mode called `name`; ValueError naming it and listing the valid ones."""
    try:
        return GEMM_QUANTS[name]
    except (KeyError, TypeError):
        if isinstance(name, str) and name in GEMM_TABLELESS:
            raise ValueError(f"GEMM quant mode {name!r} has no table in any database (only a quant override may "
                             f"name it); valid modes: {', '.join(GEMM_QUANTS)}") from None  # fmt: skip
        raise ValueError(f"unknown GEMM quant mode {name!r}; valid modes: {', '.join(GEMM_QUANTS)}") from None


class SystemSpec:
    """The GPU constants of `systems/<system>.yaml` that the GEMM SOL uses."""

    def __init__(self, name: str, doc: dict, path: Optional[str] = None):
        self.name = name
        self.path = path
        gpu = doc.get("gpu") or {}
        try:
            self.mem_bw = gpu["mem_bw"]
            self.bfloat16_tc_flops = gpu["bfloat16_tc_flops"]
        except KeyError as e:
            raise ValueError(f"{path or name}: gpu.{e.args[0]} is missing") from None
        self.fp8_tc_flops = gpu.get("fp8_tc_flops")
        self.fp4_tc_flops = gpu.get("fp4_tc_flops")

    @classmethod
    def from_yaml(cls, name: str, path: str) -> "SystemSpec":
        with open(path, "r", encoding="utf-8") as f:
            return cls(name, yaml.safe_load(f) or {}, path)

    def flops(self, q: QuantMode) -> Number:
        """Tensor-core FLOP/s for the quant's compute multiplier (docs/spec 5.2)."""
        key = {1: self.bfloat16_tc_flops, 2: self.fp8_tc_flops, 4: self.fp4_tc_flops}.get(q.compute)
        if key is None:
            # "if the key is missing: bfloat16_tc_flops * compute(q)"
            return self.bfloat16_tc_flops * q.compute
        return key


def gemm_sol(system: SystemSpec, q: QuantMode, m: int, n: int, k: int) -> float:
    """Speed-of-light latency in ms of an m x k by k x n GEMM (docs/spec 5.2).

    The memory term charges all three matrices at the weight byte width of q.
    Written exactly as the spec's formula so the float operations (and their
    order) are the spec's.
    """
    compute_ms = 2 * m * n * k / system.flops(q) * 1000
    memory_ms = q.memory * (m * n + m * k + n * k) / system.mem_bw * 1000
    return max(compute_ms, memory_ms)
