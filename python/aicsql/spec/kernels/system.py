"""System constants and the speed-of-light formulas of the engine step
(docs/spec sections 5.1 and 5.3 - 5.9; the MLA and quantisation-overhead
tables' SOLs of docs/spec/families_mla_gptoss_fp8static.md 7.3 and 7.4).

Every formula is written the way the spec writes it, operand for operand and
left to right: the yaml's integers stay Python ``int`` so ``2*b*n*d*2*kv_len
/ flops`` is an integer true division (correctly rounded), exactly what the
spec computes. Changing the association order, or pre-computing a float
constant, changes the last bits.

The GEMM SOL (5.2) is ``aicsql.spec.sol.gemm_sol`` and is reused unchanged;
`StepSystem.gemm` is the ``SystemSpec`` it takes.
"""

from __future__ import annotations

import math
from typing import Optional, Tuple, Union

from ..sol import QuantMode, SystemSpec

__all__ = ["StepSystem"]

Number = Union[int, float]


class StepSystem:
    """The fields of ``systems/<system>.yaml`` the engine step reads (docs/spec 5)."""

    def __init__(self, name: str, doc: dict, path: Optional[str] = None):
        self.name = name
        self.path = path
        self.gemm = SystemSpec(name, doc, path)  # the GEMM path's view of the same yaml
        gpu = doc.get("gpu") or {}
        node = doc.get("node") or {}
        misc = doc.get("misc") or {}

        def need(section: dict, section_name: str, key: str):
            try:
                return section[key]
            except KeyError:
                raise ValueError(f"{path or name}: {section_name}.{key} is missing") from None

        self.mem_bw = need(gpu, "gpu", "mem_bw")
        self.mem_bw_empirical_scaling_factor = need(gpu, "gpu", "mem_bw_empirical_scaling_factor")
        self.mem_empirical_constant_latency = need(gpu, "gpu", "mem_empirical_constant_latency")
        self.bfloat16_tc_flops = need(gpu, "gpu", "bfloat16_tc_flops")
        self.sm_version = gpu.get("sm_version", -1)
        self.num_gpus_per_node = need(node, "node", "num_gpus_per_node")
        self.num_gpus_per_rack = node.get("num_gpus_per_rack", math.inf)  # optional, default infinity
        self.intra_node_bw = need(node, "node", "intra_node_bw")
        self.inter_node_bw = need(node, "node", "inter_node_bw")
        # Optional; falls back to the inter-node bandwidth (docs/spec 5.1).
        self.inter_rack_bw = node.get("inter_rack_bw", self.inter_node_bw)
        self.p2p_latency = node.get("p2p_latency")
        # The whole sections, for the serving memory model (gpu.mem_capacity,
        # misc.nccl_mem, misc.other_mem: aicsql.spec.serving.memory).
        self.gpu = dict(gpu)
        self.misc = dict(misc)
        self.nccl_version = misc.get("nccl_version")
        if self.nccl_version is not None:
            self.nccl_version = str(self.nccl_version)

    # ---- 5.1 ------------------------------------------------------------------

    def bw(self, g: int) -> Number:
        """Point-to-point bandwidth (B/s) for a collective over g GPUs."""
        if g <= self.num_gpus_per_node:
            return self.intra_node_bw
        if g <= self.num_gpus_per_rack:
            return self.inter_node_bw
        return self.inter_rack_bw

    # ---- 5.5 ------------------------------------------------------------------

    def mem_op(self, nbytes: int) -> float:
        """A memory-bound op moving `nbytes` (SILICON mode: the empirical formula)."""
        return (
            nbytes / (self.mem_bw * self.mem_bw_empirical_scaling_factor) + self.mem_empirical_constant_latency
        ) * 1000

    # ---- 5.3 ------------------------------------------------------------------

    def context_attention_sol(
        self, b: int, s: int, prefix: int, n: int, n_kv: int, d: int, w: int, q_kv: QuantMode, q_f: QuantMode
    ) -> float:
        full = s + prefix
        if w > 0 and full > w:
            ops = 2 * b * (full - prefix) * w * n * d * 2
        else:
            ops = 2 * b * (full**2 - prefix**2) * n * d * 2 / 2
        mem = 2 * b * (2 * n * (full - prefix) * d) + q_kv.memory * b * (2 * n_kv * full * d)
        return max(ops / self.bfloat16_tc_flops * 1000 / q_f.compute, mem / self.mem_bw * 1000)

    def encoder_attention_sol(self, b: int, s: int, n: int, d: int, q_f: QuantMode) -> float:
        """The vision encoder's attention (families_hybrid 3.6): non-causal, so
        the full ``s^2`` of math (no halving); Q, K, V read and the output
        written once, 2-byte values, no KV cache."""
        ops = 2 * b * s * s * n * d * 2
        mem = 2 * b * (3 * n * s * d + n * s * d)
        return max(ops / self.bfloat16_tc_flops * 1000 / q_f.compute, mem / self.mem_bw * 1000)

    # ---- 5.4 ------------------------------------------------------------------

    def generation_attention_sol(self, b: int, s: int, n: int, n_kv: int, d: int, w: int, q_kv: QuantMode) -> float:
        kv_len = min(s - 1, w) if w > 0 else s - 1
        mult = 2 if q_kv.name == "fp8" else 1
        ops = 2 * b * n * d * 2 * kv_len
        mem = b * (n * d * 2 + 2 * n_kv * kv_len * d * q_kv.memory + n * d * 2)
        return max(ops / self.bfloat16_tc_flops * 1000 / mult, mem / self.mem_bw * 1000)

    # ---- 5.6 ------------------------------------------------------------------

    def custom_allreduce_sol(self, tp: int, size: Number) -> float:
        if tp == 1:
            return 0
        return 2 * size * 2 / tp * (tp - 1) / self.bw(tp) * 1000

    # ---- 5.7 ------------------------------------------------------------------

    def nccl_sol(self, q: QuantMode, g: int, op: str, size: Number) -> float:
        sol = q.memory * size * (g - 1) / g / self.bw(g) * 1000
        if op == "all_reduce":
            return sol * 2  # a power-of-two factor: exact wherever it is applied
        return sol

    # ---- 5.8 ------------------------------------------------------------------

    def moe_sol(
        self,
        tokens: Number,
        h: int,
        inter: int,
        topk: int,
        e: int,
        etp: int,
        eep: int,
        q: QuantMode,
        gated: bool = True,
    ) -> float:
        gates = 3 if gated else 2
        tt = tokens * topk
        ops = tt * h * inter * gates * 2 // eep // etp
        mem = q.memory * (
            tt // eep * h * 2 + tt // eep * inter * gates // etp + h * inter * gates // etp * min(e // eep, tt // eep)
        )
        return max(ops / (self.bfloat16_tc_flops * q.compute) * 1000, mem / self.mem_bw * 1000)

    # ---- 5.9 ------------------------------------------------------------------

    def p2p_latency_ms(self, nbytes: int) -> float:
        return (nbytes / self.inter_node_bw + self.p2p_latency) * 1000

    # ---- families_mla 7.3: MLA tables ------------------------------------------

    def context_mla_sol(self, b: int, s: int, prefix: int, n: int, q_kv: QuantMode, q_f: QuantMode) -> float:
        """Context MLA (granular and module tables): 192 + 128 wide q/k, causal."""
        full = s + prefix
        ops = b * n * 2 / 2 * (192 + 128) * (full * full - prefix * prefix)
        mem = b * n * (q_kv.memory * full * (192 + 128) + 2 * s * (192 + 128))
        return max(ops / self.bfloat16_tc_flops * 1000 / q_f.compute, mem / self.mem_bw * 1000)

    def _generation_mla_terms(self, b: int, s: int, n: int, q_kv: QuantMode) -> Tuple[float, float]:
        """(math, memory) ms of the decode MLA kernel; fp8 kv computes at the fp8 FMHA rate."""
        compute = 2 if q_kv.name == "fp8" else 1
        ops = 2 * b * n * 1088 * s
        mem = b * (n * 1088 * 2 + (s - 1) * 576 * q_kv.memory)
        return ops / self.bfloat16_tc_flops * 1000 / compute, mem / self.mem_bw * 1000

    def generation_mla_sol(self, b: int, s: int, n: int, q_kv: QuantMode) -> float:
        return max(*self._generation_mla_terms(b, s, n, q_kv))

    def generation_mla_module_sol(self, b: int, s: int, n: int, q_kv: QuantMode, q_gemm: QuantMode) -> float:
        """The decode MLA terms plus both BMMs, added per component before the max."""
        math_ms, mem_ms = self._generation_mla_terms(b, s, n, q_kv)
        bmm_ops = 2 * 2 * b * n * 128 * 512
        bmm_mem = 2 * n * (b * 640 + 128 * 512) * q_gemm.memory
        math_ms += bmm_ops / (self.bfloat16_tc_flops * q_gemm.compute) * 1000
        mem_ms += bmm_mem / self.mem_bw * 1000
        return max(math_ms, mem_ms)

    def mla_bmm_sol(self, tokens: int, n: int, q: QuantMode) -> float:
        ops = 2 * tokens * n * 128 * 512
        mem = n * (tokens * 640 + 128 * 512) * q.memory
        return max(ops / (self.bfloat16_tc_flops * q.compute) * 1000, mem / self.mem_bw * 1000)

    # ---- families_mla 7.4: quantisation-overhead tables ------------------------------

    def compute_scale_sol(self, m: Number, k: Number) -> float:
        return 2 * m * k / self.mem_bw * 1000.0

    def scale_matrix_sol(self, m: Number, k: Number) -> float:
        return 3 * m * k / self.mem_bw * 1000.0
