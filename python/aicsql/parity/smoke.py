"""The fixed subsets of the support-matrix scan (``--subset``).

``ci``: sixteen entries chosen to cover each backend, both modes, dense and
MoE models, sglang's context-parallel prefill workers, the two entries of
upstream's drift report and the triggers of drifts fixed since, and three
second-wave families, all with a quick Python search (about 80 s together
on one core). CI runs it on every change
(``python/tests/test_parity_search.py``); the whole matrix is a long job
that resumes.

Every drift found and fixed adds the entry that triggered it here (the
upstream lesson: a parity fix without its trigger in the smoke set comes
back), with a comment saying which drift it guards.

Keys are upstream's entry keys: ``model|system|backend|version|mode``.
"""

from __future__ import annotations

__all__ = ["SUBSETS", "CI"]

CI = (
    # dense (LLAMA family) on vllm, both modes: the model of docs/spec/search.md's golden case
    "meta-llama/Meta-Llama-3.1-8B|h200_sxm|vllm|0.24.0|agg",
    "meta-llama/Meta-Llama-3.1-8B|h200_sxm|vllm|0.24.0|disagg",
    # dense on trtllm, an older GPU generation
    "Qwen/Qwen3-0.6B|a100_sxm|trtllm|1.0.0|agg",
    # sglang disagg: context-parallel prefill workers (rows counted with fewer GPUs than they use)
    "Qwen/Qwen3-0.6B|h200_sxm|sglang|0.5.16|disagg",
    # MoE (MOE family), 32 GPUs: moe_tp x moe_ep and attention-dp layouts
    "Qwen/Qwen3-30B-A3B|b200_sxm|vllm|0.24.0|agg",
    # upstream drift report, entry 1 (found on vllm 0.19.0, which this matrix no longer lists): tp 8 puts
    # the qkv GEMM at (m, 1280, 5120) fp8_block, a site transfer with a distance tie at its 4th neighbour
    "Qwen/Qwen3-32B-FP8|h200_sxm|vllm|0.24.0|agg",
    # upstream drift report, entry 2 (this very entry): every GEMM of tp 4 is a site transfer, the proj
    # GEMM with a distance tie at its 4th neighbour (docs/spec/families_hybrid_vl_databases.md 1.8)
    "meta-llama/Llama-4-Scout-17B-16E-Instruct|gb200|vllm|0.24.0|disagg",
    # a drift found by this scan (fixed in 6b151ec): the agg walk's balance-equivalent skip must span every
    # batch size of a layout (the spec's capped_b, sweep.py:294); Rust reset it per batch size and kept extra
    # (320..512, ctx 256) points. Kind A, the extra points pushed others out of the top 10 (sglang cp):
    "meta-llama/Meta-Llama-3.1-8B|rtx_pro_6000_server|sglang|0.5.14|agg",
    # kind B, the extra points turned a seq/s tie at the top-10 cut (ctx 2048 vs 5632 at 71.232):
    "Qwen/Qwen3-1.7B|a100_sxm|vllm|0.14.0|agg",
    # second-wave families: gated-delta-net layers (QWEN35), the DSA module tables on trtllm with GLM's
    # bf16 overrides (DEEPSEEKV32), Gemma 4's per-layer-type KV cache in both worker kinds (GEMMA4MIX)
    "Qwen/Qwen3.5-27B|h200_sxm|sglang|0.5.14|agg",
    "nvidia/GLM-5.2-NVFP4|b200_sxm|trtllm|1.3.0rc20|agg",
    "google/gemma-4-26B-A4B|h200_sxm|sglang|0.5.14|disagg",
    # a drift found by this scan (fixed in 53256cd): a DeepSeek-V4 decode worker is labelled with the FMHA
    # mode its checkpoint's quant fields imply (fp8; the spec's task infers it without the architecture), not
    # the bfloat16 the family prices; Rust labelled it bfloat16 (every DeepSeek-V4 disagg entry)
    "deepseek-ai/DeepSeek-V4-Pro|b200_sxm|trtllm|1.3.0rc23|disagg",
    # drifts found by this scan (fixed in 76f9b42 and f435cd2): context parallelism on sglang 0.5.14, which
    # Rust refused for the two sparse-attention families while the spec prices it through their sub-kernel
    # tables. GLM-5.2's DSA layer (glm5_* mqa / top-k swaps, the all-gathers, each of the full and skip layers
    # scaled before the mix) in its cp prefill workers:
    "zai-org/GLM-5.2|gb200|sglang|0.5.14|disagg",
    # DeepSeek-V4's CSA / HCA modules (paged-MQA-logits chunks, v1_top_last) in its cp prefill workers:
    "deepseek-ai/DeepSeek-V4-Pro|gb200|sglang|0.5.14|disagg",
    # and, once Rust priced them, the aggregated cp layouts the spec cannot price: its mixed step hands the
    # CSA module a numpy-float length its MQA chunk loop cannot range over (TypeError), so none survive
    "deepseek-ai/DeepSeek-V4-Pro|b200_sxm|sglang|0.5.14|agg",
)

SUBSETS = {"ci": CI}
