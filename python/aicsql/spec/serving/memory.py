"""The memory model of a serving estimate: ``BaseBackend._get_memory_usage``
and the OOM / KV-budget checks of ``InferenceSummary`` (aiconfigurator
v0.11.0), written in the spec's order and types.

``weights``      ``0.0 + sum of get_weights()`` over the *context* op list, ``/ pp``
``activations``  ``2 * num_tokens * (num_heads * head_size) * coefficient[family][min(tp, 8)]``
                 (``num_tokens = (isl - prefix) * batch`` when 0), plus the MoE
                 workspace ``num_tokens * width * dp * E * topk / moe_ep / 128 * 4`` for
                 the families that pay it, floored at the backend's minimum, times
                 ``nextn + 1`` with MTP (every call: the spec scales the per-step
                 tokens to the verified ones, docs/spec/options.md 2.3 item 4), times
                 ``1.0 + overhead`` on sglang
``kvcache``      ``batch * bytes_per_sequence(seq_tokens) / 1``, with ``seq_tokens =
                 max_seq_len`` or ``isl + beam * osl`` (`kvcache.kv_bytes_per_sequence`:
                 ``max(0, seq_tokens) * kv_bytes * elements_per_token`` in general,
                 per layer type with the SWA window cap for GEMMA4MIX)
``nccl``         ``misc.nccl_mem[min(tp, 8)]`` of the system yaml
``others``       ``misc.other_mem`` (times ``1.0 + 0.20`` on sglang)
``encoder``      a colocated vision encoder's parts (GiB, `aicsql.spec.serving.encoder`),
                 times ``2**30``, added to each part last: not divided by pp, not scaled by
                 ``nextn + 1`` nor by sglang's overheads (docs/spec/options.md 4.7)
``total``        ``(weights + activations + kvcache + nccl + others) / 2**30``; every part
                 is divided by ``2**30`` on its own as well.

OOM: ``total >= gpu.mem_capacity / 2**30``. The KV budget check (TRT-LLM's
aggregated estimate only, and only when not OOM): ``kv > (capacity - (total
- kv)) * free_fraction * (1 - reserved) * (1 - tolerance)``, all in GiB.
"""

from __future__ import annotations

from typing import Dict, Optional

from .backends import MOE_WORKSPACE_FAMILIES, Backend
from .kvcache import kv_bytes_per_sequence

__all__ = ["ONE_GIB", "memory_usage", "is_oom", "kv_cache_oom", "capacity_bytes"]

ONE_GIB = 1 << 30


def _misc(system, key: str):
    doc = system.misc
    if key not in doc:
        raise ValueError(f"{system.path or system.name}: misc.{key} is missing (the serving memory model reads it)")
    return doc[key]


def capacity_bytes(system) -> int:
    gpu = system.gpu
    if "mem_capacity" not in gpu:
        raise ValueError(f"{system.path or system.name}: gpu.mem_capacity is missing (the serving memory model reads it)")
    return gpu["mem_capacity"]


def memory_usage(
    backend: Backend,
    system,
    model,
    weights: float,
    kv_elements_per_token: int,
    kv_bytes,
    tp: int,
    moe_ep: Optional[int],
    batch_size: int,
    beam_width: int,
    isl: int,
    osl: int,
    num_tokens=0,
    prefix=0,
    max_seq_len: Optional[int] = None,
    pp: int = 1,
    attention_dp: int = 1,
    nextn: int = 0,
    encoder_memory: Optional[Dict[str, float]] = None,
) -> Dict[str, float]:
    """The spec's memory dict (GiB): total, weights, activations, kvcache, nccl, others.

    ``weights``: `StepContext.weights` of the context op list (bytes, before the `/ pp`);
    ``kv_bytes``: the KV cache quant mode's bytes per element; ``nextn``: the
    MTP draft depth (the weights and the KV cache do not depend on it);
    ``encoder_memory``: the vision encoder's memory dict (GiB) or None."""
    weights = weights / pp
    h = model.heads * model.head_dim
    if num_tokens == 0:
        num_tokens = (isl - prefix) * batch_size
    tp_clamped = min(tp, 8)
    family = model.family
    activations = 2 * num_tokens * h * backend.activation_coefficient(family, tp_clamped)
    if family in MOE_WORKSPACE_FAMILIES and model.experts:
        moe_h = backend.moe_workspace_width(model, family, h)
        activations += num_tokens * moe_h * attention_dp * model.experts * model.topk / moe_ep / 128 * 4
    activations = max(activations, backend.min_activation_bytes)
    if nextn > 0:
        activations = activations * (nextn + 1)
    if backend.activation_overhead_frac > 0:
        activations *= 1.0 + backend.activation_overhead_frac
    seq_tokens = max_seq_len if max_seq_len is not None else isl + beam_width * osl
    per_sequence = kv_bytes_per_sequence(model, tp, kv_bytes, seq_tokens, kv_elements_per_token)
    kvcache = batch_size * per_sequence / 1  # CP keeps the full KV per rank: divisor 1
    nccl_table = _misc(system, "nccl_mem")
    if tp_clamped not in nccl_table:
        raise ValueError(
            f"{system.path or system.name}: misc.nccl_mem has no entry for tp = {tp_clamped} "
            f"(entries: {', '.join(str(k) for k in nccl_table)})"
        )
    nccl_mem = nccl_table[tp_clamped]
    others_mem = _misc(system, "other_mem")
    if backend.others_overhead_frac > 0:
        others_mem *= 1.0 + backend.others_overhead_frac
    if encoder_memory:
        weights += float(encoder_memory["weights"]) * ONE_GIB
        activations += float(encoder_memory["activations"]) * ONE_GIB
        kvcache += float(encoder_memory["kvcache"]) * ONE_GIB
        nccl_mem += float(encoder_memory["nccl"]) * ONE_GIB
        others_mem += float(encoder_memory["others"]) * ONE_GIB
    return {
        "total": (weights + activations + kvcache + nccl_mem + others_mem) / ONE_GIB,
        "weights": weights / ONE_GIB,
        "activations": activations / ONE_GIB,
        "kvcache": kvcache / ONE_GIB,
        "nccl": nccl_mem / ONE_GIB,
        "others": others_mem / ONE_GIB,
    }


def is_oom(memory: Dict[str, float], mem_capacity: int) -> bool:
    return memory["total"] >= (mem_capacity / (1 << 30))


def kv_cache_oom(memory: Dict[str, float], mem_capacity: int, free_fraction: float, reserved: float,
                 tolerance: float) -> bool:  # fmt: skip
    """``InferenceSummary._check_and_set_kv_cache_oom`` (False when already OOM)."""
    if is_oom(memory, mem_capacity):
        return False
    mem_cap_gib = mem_capacity / (1 << 30)
    kv_gib = memory.get("kvcache", 0.0)
    non_kv_gib = memory["total"] - kv_gib
    kv_budget = (mem_cap_gib - non_kv_gib) * free_fraction * (1 - reserved) * (1 - tolerance)
    return kv_gib > kv_budget
