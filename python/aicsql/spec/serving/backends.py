"""The serving backends' policies: what ``TRTLLMBackend``, ``VLLMBackend`` and
``SGLANGBackend`` (aiconfigurator v0.11.0, ``aic-core/.../sdk/backends``)
override of ``BaseBackend`` for an aggregated (IFB) estimate and the memory
model.

| hook | base (trtllm, sglang) | vllm |
|---|---|---|
| decode tokens of a mixed step | ``max(1, int(b // (steps / osl)))`` when ``steps >= osl``, else ``max(1, b - ceil(ctx / isl))`` | always ``max(1, b - ceil(ctx / isl))`` |
| mixed steps counted in TPOT | trtllm, sglang: ``max(1, mix - 3)`` (base: ``mix``) | ``mix`` |
| TTFT queueing factor | ``min(2 + (steps - 3) / 2 / 10, 4)`` | ``1.0`` if ``b <= 1`` else ``min(1 + log2(b) / 8, 2.0)`` |
| prefill dispatch overhead | 0.0 | ``num_layers * 0.8`` ms |
| throughput cap | none | Little's law: ``b * (osl - 1) * 1000.0 / request_latency`` |
| mixed-step efficiency | 1.0 | 1.0 |

Memory (``_get_memory_usage``): activation coefficients per family and tp
(clamped to 8; ``default`` for families not in the table; vllm reuses
trtllm's table), a minimum activation of 70 MiB (sglang 90 MiB), sglang adds
15 % to the activations and 20 % to the other memory. The MoE block-scale
workspace is paid by GEMMA4MIX / DEEPSEEK / DEEPSEEKV32 / DEEPSEEKV4 /
KIMIK25 with experts; its width is the model's hidden size on sglang, and
``num_heads * head_size`` (except GEMMA4MIX) on trtllm and vllm.

TRT-LLM alone sizes an aggregated estimate's activations with its
``max_num_tokens`` (8192) and the KV cache with ``max_seq_len = isl + osl``,
and checks the KV budget (free fraction 0.9, reserved 0.015, tolerance 0.02).

Numbers keep the spec's Python types and evaluation order (the callers pass
float counts where the spec has numpy floats).
"""

from __future__ import annotations

import math
from typing import Dict, Optional

__all__ = ["Backend", "backend_for", "MOE_WORKSPACE_FAMILIES"]

MOE_WORKSPACE_FAMILIES = ("GEMMA4MIX", "DEEPSEEK", "DEEPSEEKV32", "DEEPSEEKV4", "KIMIK25")

_TRTLLM_COEFFICIENTS: Dict[str, Dict[int, float]] = {
    "GPT": {1: 10, 2: 6, 4: 5, 8: 5},
    "LLAMA": {1: 11, 2: 6.5, 4: 5, 8: 5},
    "MOE": {1: 22, 2: 13, 4: 10, 8: 10},
    "GEMMA4MIX": {1: 22, 2: 13, 4: 10, 8: 10},
    "DEEPSEEK": {1: 22, 2: 13, 4: 10, 8: 10},
    "DEEPSEEKV32": {1: 22, 2: 13, 4: 10, 8: 10},
    "DEEPSEEKV4": {1: 22, 2: 13, 4: 10, 8: 10},
    "KIMIK25": {1: 22, 2: 13, 4: 10, 8: 10},
    "default": {1: 10, 2: 6, 4: 5, 8: 5},
}
_SGLANG_COEFFICIENTS: Dict[str, Dict[int, float]] = {
    "GPT": {1: 13, 2: 8, 4: 6.5, 8: 6.5},
    "LLAMA": {1: 14, 2: 8.5, 4: 6.5, 8: 6.5},
    "MOE": {1: 28, 2: 17, 4: 13, 8: 13},
    "GEMMA4MIX": {1: 28, 2: 17, 4: 13, 8: 13},
    "DEEPSEEK": {1: 28, 2: 17, 4: 13, 8: 13},
    "DEEPSEEKV32": {1: 28, 2: 17, 4: 13, 8: 13},
    "DEEPSEEKV4": {1: 28, 2: 17, 4: 13, 8: 13},
    "KIMIK25": {1: 28, 2: 17, 4: 13, 8: 13},
    "default": {1: 13, 2: 8, 4: 6.5, 8: 6.5},
}

# TRT-LLM's agg / KV-budget constants (trtllm_backend.py).
TRTLLM_MAX_NUM_TOKENS = 8192
TRTLLM_FREE_GPU_MEMORY_FRACTION = 0.9
TRTLLM_KV_CACHE_RESERVED_FRACTION = 0.015
TRTLLM_KV_CACHE_TOLERANCE = 0.02


class Backend:
    """``BaseBackend``'s hooks; the subclasses below override what the spec's do."""

    name = ""
    coefficients: Dict[str, Dict[int, float]] = _TRTLLM_COEFFICIENTS
    min_activation_bytes = 70 * 1024 * 1024
    activation_overhead_frac = 0.0
    others_overhead_frac = 0.0

    # ---- memory ------------------------------------------------------------------------

    def moe_workspace_width(self, model, family: str, h: int) -> int:
        return model.hidden  # the residual hidden size

    def activation_coefficient(self, family: str, tp_clamped: int):
        table = self.coefficients
        coeffs = table.get(family, table.get("default", {1: 10, 2: 6, 4: 5, 8: 5}))
        try:
            return coeffs[tp_clamped]
        except KeyError:
            raise ValueError(
                f"tp = {tp_clamped} has no activation coefficient in the spec's {self.name} memory model "
                f"(tp 1, 2, 4 or 8, larger tp counts as 8)"
            ) from None

    # ---- aggregated (IFB) scheduling ---------------------------------------------------

    def mix_step_gen_tokens(self, b: int, ctx_tokens: int, isl: int, osl: int) -> int:
        steps_to_finish_ctx = float(math.ceil(isl * b / ctx_tokens))
        if steps_to_finish_ctx >= osl:
            return max(1, int(b // (steps_to_finish_ctx / osl)))
        return max(1, b - int(math.ceil(ctx_tokens / isl)))

    def mix_step_efficiency(self, ctx_tokens, gen_tokens) -> float:
        return 1.0

    def tpot_mix_steps(self, num_mix_steps):
        return num_mix_steps

    def ttft_queuing_factor(self, b: int, steps_to_finish_ctx: float) -> float:
        return min(2 + (steps_to_finish_ctx - 3) / 2 / 10, 4)

    def prefill_dispatch_overhead_ms(self, model) -> float:
        return 0.0

    def throughput_cap(self, step_throughput: float, ttft: float, tpot: float, b: int, osl: int) -> float:
        return step_throughput

    # ---- TRT-LLM's extra agg keyword arguments (none elsewhere) --------------------------

    def agg_memory_kwargs(self, num_tokens, isl: int, osl: int, max_seq_len: Optional[int] = None) -> dict:
        """The aggregated memory call's arguments; ``max_seq_len`` (the
        caller's option) is ignored but on trtllm."""
        return {"num_tokens": num_tokens}

    def kv_check(self, free_gpu_memory_fraction=None) -> Optional[tuple]:
        """(free_gpu_memory_fraction, reserved, tolerance) of the KV budget
        check, or None (the caller's fraction is ignored but on trtllm)."""
        return None


class TRTLLMBackend(Backend):
    name = "trtllm"

    def moe_workspace_width(self, model, family: str, h: int) -> int:
        if family == "GEMMA4MIX":
            return model.hidden
        return h

    def tpot_mix_steps(self, num_mix_steps):
        return max(1, num_mix_steps - 3)

    def agg_memory_kwargs(self, num_tokens, isl: int, osl: int, max_seq_len: Optional[int] = None) -> dict:
        # max_seq_len given, else isl + beam_width * osl, beam width 1
        if max_seq_len is None:
            max_seq_len = isl + 1 * osl
        return {"num_tokens": TRTLLM_MAX_NUM_TOKENS, "max_seq_len": max_seq_len}

    def kv_check(self, free_gpu_memory_fraction=None) -> Optional[tuple]:
        fraction = TRTLLM_FREE_GPU_MEMORY_FRACTION if free_gpu_memory_fraction is None else free_gpu_memory_fraction
        return (fraction, TRTLLM_KV_CACHE_RESERVED_FRACTION, TRTLLM_KV_CACHE_TOLERANCE)


class VLLMBackend(Backend):
    name = "vllm"
    moe_workspace_width = TRTLLMBackend.moe_workspace_width

    def mix_step_gen_tokens(self, b: int, ctx_tokens: int, isl: int, osl: int) -> int:
        return max(1, b - int(math.ceil(ctx_tokens / isl)))

    def prefill_dispatch_overhead_ms(self, model) -> float:
        return model.num_layers * 0.8

    def ttft_queuing_factor(self, b: int, steps_to_finish_ctx: float) -> float:
        if b <= 1:
            return 1.0
        return float(min(1.0 + math.log2(b) / 8.0, 2.0))

    def throughput_cap(self, step_throughput: float, ttft: float, tpot: float, b: int, osl: int) -> float:
        request_latency_ms = ttft + tpot * max(osl - 1, 0)
        if request_latency_ms <= 0:
            return step_throughput
        ll_throughput = b * max(osl - 1, 0) * 1000.0 / request_latency_ms
        return min(step_throughput, ll_throughput)


class SGLANGBackend(Backend):
    name = "sglang"
    coefficients = _SGLANG_COEFFICIENTS
    min_activation_bytes = 90 * 1024 * 1024
    activation_overhead_frac = 0.15
    others_overhead_frac = 0.20

    def tpot_mix_steps(self, num_mix_steps):
        return max(1, num_mix_steps - 3)


_BACKENDS = {"trtllm": TRTLLMBackend(), "vllm": VLLMBackend(), "sglang": SGLANGBackend()}


def backend_for(name: str) -> Backend:
    try:
        return _BACKENDS[name]
    except KeyError:
        raise ValueError(f"unsupported serving backend {name!r}; supported: {', '.join(_BACKENDS)}") from None
