"""The KV cache of one sequence and its inverse, per model family
(aiconfigurator v0.11.0: ``BaseModel.get_kvcache_bytes_per_sequence`` /
``get_kvcache_max_tokens`` / ``_binary_search_kvcache_max_tokens`` and
``Gemma4MixModel``'s overrides; docs/spec/families_qwen35_gemma4.md 9).

``kv_bytes_per_sequence(model, tp, kv_bytes, seq_len)``
    base: ``max(0, seq_len) * kv_bytes * elements_per_token`` (a Python int,
    as the spec's);
    GEMMA4MIX: per layer type, the SWA layers capped at the window --
    ``float(swa_layers * ceil(swa Hkv / tp) * swa_d * 2 * kv_bytes *
    min(s, window) + global_layers * ceil(global Hkv / tp) * global_d * 2 *
    kv_bytes * s)`` with ``s = max(0, seq_len)`` (no cap when the window is 0),
    integer arithmetic then one conversion to float.
    DEEPSEEKV32: ``L * max(0, seq_len) * (kv_lora_rank * kv_bytes +
    qk_rope_head_dim * 2 + index_head_dim + ceil(index_head_dim / 128) * 4)``
    (the FP8 indexer cache included; docs/spec/families_dsa.md 8).
    DEEPSEEKV4: per layer, window-capped and compressed entries plus the
    compressor / indexer state (docs/spec/families_dsv4.md 7.1), a float.

``kv_max_tokens(model, tp, kv_bytes, budget)``: the longest single sequence
whose KV fits in ``budget`` bytes. base: ``int(budget // bytes(1))`` (0 when
either is <= 0); GEMMA4MIX and DEEPSEEKV4: the spec's doubling-then-bisection
search over ``kv_bytes_per_sequence`` (see `search_max_tokens`).
"""

from __future__ import annotations

from typing import Callable, Optional

from ..kernels.dsa import indexer_entry_bytes
from ..step.model import DEEPSEEKV32, DEEPSEEKV4, GEMMA4MIX

__all__ = ["kv_bytes_per_sequence", "kv_max_tokens", "search_max_tokens"]


def _gemma4_bytes(model, tp: int, kv_bytes, seq_len: int) -> float:
    g = model.gemma4
    s = max(0, seq_len)
    swa_layers, glob_layers = g.layer_counts()
    swa_nkv, glob_nkv = g.kv_heads_per_gpu(tp)
    swa_seq = min(s, g.sliding_window_size) if g.sliding_window_size > 0 else s
    swa = swa_layers * swa_nkv * g.swa_head_dim * 2 * kv_bytes * swa_seq
    glob = glob_layers * glob_nkv * g.global_head_dim * 2 * kv_bytes * s
    return float(swa + glob)


def kv_bytes_per_sequence(model, tp: int, kv_bytes, seq_len: int, elements_per_token: Optional[int] = None):
    """KV cache bytes of one sequence of ``seq_len`` tokens on one GPU (the
    spec's ``get_kvcache_bytes_per_sequence``). ``elements_per_token``: the
    base formula's count when the caller has it (``model.kv_elements_per_token(tp)``)."""
    if model.family == GEMMA4MIX and model.gemma4 is not None:
        return _gemma4_bytes(model, tp, kv_bytes, seq_len)
    if model.family == DEEPSEEKV32 and model.dsa is not None:
        # families_dsa 8: L * s * (kv_lora * kv bytes + rope * 2 + the FP8 indexer entry), integers
        d = model.dsa
        return model.num_layers * max(0, seq_len) * (d.kv_lora_rank * kv_bytes + d.qk_rope_head_dim * 2
                                                     + indexer_entry_bytes(d.index_head_dim))  # fmt: skip
    if model.family == DEEPSEEKV4 and model.dsv4 is not None:
        from ..step.families.deepseek_v4 import kv_bytes_per_sequence as dsv4_bytes

        return dsv4_bytes(model, kv_bytes, seq_len)
    if elements_per_token is None:
        elements_per_token = model.kv_elements_per_token(tp)
    return max(0, seq_len) * kv_bytes * elements_per_token


def search_max_tokens(bytes_of: Callable[[int], float], budget, context_length: int) -> int:
    """``_binary_search_kvcache_max_tokens``: ``budget`` as a float; 0 when it
    is <= 0 or ``bytes_of(1) <= 0``. Doubling from 1 while ``bytes_of(hi) <=
    budget``: when the doubled length's bytes *equal* the current ones the
    cache has saturated and the answer is ``context_length`` (or the doubled
    length when that is <= 0). Then bisection on ``(hi // 2, hi)`` with
    ``mid = (lo + hi) // 2`` keeping ``bytes_of(lo) <= budget < bytes_of(hi)``
    until ``lo + 1 == hi``; the answer is ``lo``."""
    budget = float(budget)
    if budget <= 0.0:
        return 0
    hi, hi_bytes = 1, bytes_of(1)
    if hi_bytes <= 0.0:
        return 0
    while hi_bytes <= budget:
        nxt = hi * 2
        nxt_bytes = bytes_of(nxt)
        if nxt_bytes == hi_bytes:
            return int(context_length) if context_length > 0 else nxt
        hi, hi_bytes = nxt, nxt_bytes
    lo = hi // 2
    while lo + 1 < hi:
        mid = (lo + hi) // 2
        if bytes_of(mid) <= budget:
            lo = mid
        else:
            hi = mid
    return lo


def kv_max_tokens(model, tp: int, kv_bytes, budget) -> int:
    """The spec's ``get_kvcache_max_tokens(budget)``: the token capacity of a
    KV byte budget on one GPU (the native ``estimate_kv_cache``'s inverse)."""
    if model.family == GEMMA4MIX and model.gemma4 is not None:
        return search_max_tokens(lambda s: _gemma4_bytes(model, tp, kv_bytes, s), budget,
                                 model.gemma4.context_length)  # fmt: skip
    if model.family == DEEPSEEKV4 and model.dsv4 is not None:  # never saturates: the context length is unused
        return search_max_tokens(lambda s: kv_bytes_per_sequence(model, tp, kv_bytes, s), budget, 0)
    budget = float(budget)
    per_token = kv_bytes_per_sequence(model, tp, kv_bytes, 1)
    if budget <= 0.0 or per_token <= 0.0:
        return 0
    return int(budget // per_token)
