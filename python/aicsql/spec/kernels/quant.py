"""The non-GEMM quant modes of the spec (section 3): MoE, FMHA, KV cache, comm.

Each mode is the spec's triple (bytes per element "memory", compute
multiplier, name), kept in the types the spec's Python uses (``int`` except
the fractional ``9/16``), because the SOL formulas multiply by them and the
bits depend on int-versus-float operands. The GEMM modes live in
``aicsql.spec.sol`` (``GEMM_QUANTS``) and are reused unchanged.
"""

from __future__ import annotations

from typing import Dict

from ..sol import QuantMode

__all__ = [
    "MOE_QUANTS",
    "FMHA_QUANTS",
    "KV_QUANTS",
    "COMM_QUANTS",
    "moe_quant",
    "fmha_quant",
    "kv_quant",
]


def _table(*modes: QuantMode) -> Dict[str, QuantMode]:
    return {q.name: q for q in modes}


# Spec section 3 (all MoEQuantMode members; families_mla 5.3 for the 4-bit
# expert modes of Kimi and GPT-OSS, and the two loader re-labels of 5.2).
MOE_QUANTS = _table(
    QuantMode("bfloat16", 2, 1),
    QuantMode("fp8", 1, 2),
    QuantMode("int4_wo", 0.5, 1),
    QuantMode("fp8_block", 1, 2),
    QuantMode("w4afp8", 0.5, 2),
    QuantMode("nvfp4", 9 / 16, 4),
    QuantMode("w4a16_mxfp4", 0.5, 1),
    QuantMode("w4a8_mxfp4_mxfp8", 0.5, 2),
    QuantMode("w4a8_mxfp4_mxfp8_trtllm", 0.5, 2),
    QuantMode("w4a16_mxfp4_cutlass", 0.5, 1),
)
FMHA_QUANTS = _table(QuantMode("bfloat16", 2, 1), QuantMode("fp8", 1, 2), QuantMode("fp8_block", 1, 2))
KV_QUANTS = _table(QuantMode("bfloat16", 2, 0), QuantMode("fp8", 1, 0), QuantMode("int8", 1, 0))
COMM_QUANTS = _table(QuantMode("half", 2, 0))


def _lookup(table: Dict[str, QuantMode], kind: str, name: str) -> QuantMode:
    try:
        return table[name]
    except (KeyError, TypeError):
        raise ValueError(f"unsupported {kind} quant mode {name!r}; supported: {', '.join(table)}") from None


def moe_quant(name: str) -> QuantMode:
    return _lookup(MOE_QUANTS, "MoE", name)


def fmha_quant(name: str) -> QuantMode:
    return _lookup(FMHA_QUANTS, "FMHA", name)


def kv_quant(name: str) -> QuantMode:
    return _lookup(KV_QUANTS, "KV cache", name)
