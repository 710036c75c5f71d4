#!/usr/bin/env python3
"""Write the point list of ``serving_options_goldens.parquet``: ``cli_estimate``
points with the spec's user-facing options turned (docs/spec/options.md).

Every option of ``cli_estimate`` that docs/spec/options.md restates is turned
at least five times alone and again in combinations, on dense, MoE and MLA
models, agg and disagg, over databases of all three backends, plus the
malformed arguments and the deployments the spec refuses (KeyError for an
unknown quant name, the nextn checks, the explicit-fmha-fp8 refusal, the
fp8_block MoE split rule, a quant mode without a table, OOM through MTP
activations). The bases are points of the existing goldens that price with
every option at its default, so a difference is the option's.

    python3 scripts/spec_options_points.py > /tmp/options_points.json
    nice -n 10 /work/specenv/bin/python scripts/spec_points.py /tmp/options_points.json \\
        tests/goldens/serving_options_goldens.parquet --split options

The list is deterministic (no randomness); point ids count up from 0 in the
order written here.
"""

from __future__ import annotations

import json
import sys

# Bases: (name, mode, model, db, args); all price at the spec's defaults.
AGG_DENSE_VLLM = ("agg", "Qwen/Qwen3-32B-FP8", "h200_sxm/vllm/0.19.0",
                  {"tp_size": 8, "batch_size": 64, "isl": 1024, "osl": 256, "prefix": 0})
AGG_DENSE_BF16_VLLM = ("agg", "Qwen/Qwen3-32B", "gb200/vllm/0.19.0",
                       {"tp_size": 4, "batch_size": 16, "isl": 1024, "osl": 128, "prefix": 0})
AGG_DENSE_SGLANG = ("agg", "meta-llama/Meta-Llama-3.1-8B", "gb200/sglang/0.5.14",
                    {"tp_size": 8, "batch_size": 4, "isl": 1024, "osl": 128, "prefix": 0})
AGG_DENSE_TRTLLM = ("agg", "Qwen/Qwen3-32B-FP8", "h200_sxm/trtllm/1.3.0rc10",
                    {"tp_size": 8, "batch_size": 16, "isl": 8192, "osl": 512, "prefix": 0, "ctx_tokens": 2048})
AGG_MOE_VLLM = ("agg", "Qwen/Qwen3-30B-A3B", "gb200/vllm/0.19.0",
                {"tp_size": 4, "batch_size": 128, "isl": 8192, "osl": 512, "prefix": 0, "ctx_tokens": 512,
                 "moe_tp_size": 4, "moe_ep_size": 1})
AGG_MOE_EP_TRTLLM = ("agg", "Qwen/Qwen3-30B-A3B", "h200_sxm/trtllm/1.3.0rc10",
                     {"tp_size": 4, "batch_size": 32, "isl": 1024, "osl": 128, "prefix": 0,
                      "moe_tp_size": 1, "moe_ep_size": 4})
AGG_MLA_SGLANG = ("agg", "deepseek-ai/DeepSeek-V3", "h200_sxm/sglang/0.5.14",
                  {"tp_size": 8, "batch_size": 16, "isl": 1024, "osl": 128, "prefix": 0,
                   "moe_tp_size": 1, "moe_ep_size": 8})
AGG_MLA_TRTLLM = ("agg", "deepseek-ai/DeepSeek-V3", "h200_sxm/trtllm/1.3.0rc20",
                  {"tp_size": 8, "batch_size": 32, "isl": 2048, "osl": 256, "prefix": 0,
                   "moe_tp_size": 1, "moe_ep_size": 8})
DISAGG_DENSE_VLLM = ("disagg", "Qwen/Qwen3-32B-FP8", "h200_sxm/vllm/0.19.0",
                     {"isl": 1024, "osl": 128, "prefix": 0, "prefill_tp_size": 2, "prefill_batch_size": 2,
                      "prefill_num_workers": 1, "decode_tp_size": 1, "decode_batch_size": 16,
                      "decode_num_workers": 1})
DISAGG_DENSE_SGLANG = ("disagg", "Qwen/Qwen3-32B", "gb200/sglang/0.5.14",
                       {"isl": 1024, "osl": 128, "prefix": 0, "prefill_tp_size": 2, "prefill_batch_size": 1,
                        "prefill_num_workers": 2, "decode_tp_size": 8, "decode_batch_size": 16,
                        "decode_num_workers": 1})
DISAGG_MOE_TRTLLM = ("disagg", "Qwen/Qwen3-30B-A3B", "h200_sxm/trtllm/1.3.0rc10",
                     {"isl": 1024, "osl": 128, "prefix": 0, "prefill_tp_size": 4, "prefill_batch_size": 2,
                      "prefill_num_workers": 1, "prefill_moe_tp_size": 1, "prefill_moe_ep_size": 4,
                      "decode_tp_size": 4, "decode_batch_size": 16, "decode_num_workers": 2,
                      "decode_moe_tp_size": 1, "decode_moe_ep_size": 4})
DISAGG_MOE_VLLM = ("disagg", "Qwen/Qwen3-235B-A22B-FP8", "gb200/vllm/0.19.0",
                   {"isl": 4000, "osl": 1000, "prefix": 0, "prefill_tp_size": 8, "prefill_batch_size": 1,
                    "prefill_num_workers": 2, "prefill_moe_tp_size": 1, "prefill_moe_ep_size": 8,
                    "decode_tp_size": 4, "decode_batch_size": 8, "decode_num_workers": 1,
                    "decode_moe_tp_size": 1, "decode_moe_ep_size": 4})
AGG_VL_SGLANG = ("agg", "Qwen/Qwen3-VL-8B-Instruct", "h200_sxm/sglang/0.5.14",
                 {"tp_size": 2, "batch_size": 8, "isl": 1024, "osl": 128, "prefix": 0})
AGG_VL_VLLM = ("agg", "Qwen/Qwen3-VL-8B-Instruct", "h200_sxm/vllm/0.24.0",
               {"tp_size": 1, "batch_size": 8, "isl": 512, "osl": 128, "prefix": 0})
DISAGG_VL_TRTLLM = ("disagg", "Qwen/Qwen3-VL-8B-Instruct", "h200_sxm/trtllm/1.3.0rc20",
                    {"isl": 1024, "osl": 128, "prefix": 0, "prefill_tp_size": 2, "prefill_batch_size": 1,
                     "prefill_num_workers": 1, "decode_tp_size": 2, "decode_batch_size": 16,
                     "decode_num_workers": 1})


def point(base, **options):
    mode, model, db, args = base
    merged = dict(args)
    merged.update(options)
    return {"mode": mode, "model": model, "db": db, "args": merged}


def points():
    out = []
    add = lambda base, **o: out.append(point(base, **o))  # noqa: E731

    # -- 1. quantisation overrides, alone -------------------------------------
    # kvcache (5+)
    add(AGG_DENSE_BF16_VLLM, kvcache_quant_mode="fp8")
    add(AGG_DENSE_VLLM, kvcache_quant_mode="bfloat16")
    add(AGG_DENSE_SGLANG, kvcache_quant_mode="fp8")
    add(AGG_DENSE_TRTLLM, kvcache_quant_mode="bfloat16")
    add(AGG_MOE_VLLM, kvcache_quant_mode="fp8")
    add(DISAGG_DENSE_SGLANG, kvcache_quant_mode="fp8")
    add(AGG_MLA_SGLANG, kvcache_quant_mode="bfloat16")
    add(AGG_DENSE_SGLANG, kvcache_quant_mode="int8")
    # gemm (5+)
    add(AGG_DENSE_BF16_VLLM, gemm_quant_mode="fp8")
    add(AGG_DENSE_VLLM, gemm_quant_mode="bfloat16")
    add(AGG_DENSE_SGLANG, gemm_quant_mode="fp8_block")
    add(AGG_DENSE_TRTLLM, gemm_quant_mode="nvfp4")          # Hopper: no nvfp4 table
    add(DISAGG_DENSE_VLLM, gemm_quant_mode="fp8_block")
    add(AGG_MOE_EP_TRTLLM, gemm_quant_mode="fp8")
    add(AGG_DENSE_BF16_VLLM, gemm_quant_mode="int4_wo")
    # moe (5+)
    add(AGG_MOE_VLLM, moe_quant_mode="fp8")
    add(AGG_MOE_VLLM, moe_quant_mode="fp8_block")           # I=768, moe_tp 4: split rule
    add(AGG_MOE_EP_TRTLLM, moe_quant_mode="fp8_block")      # moe_tp 1: allowed
    add(AGG_MOE_EP_TRTLLM, moe_quant_mode="nvfp4")
    add(DISAGG_MOE_TRTLLM, moe_quant_mode="fp8")
    add(DISAGG_MOE_VLLM, moe_quant_mode="bfloat16")
    add(AGG_MLA_SGLANG, moe_quant_mode="bfloat16")
    # fmha (5+)
    add(AGG_DENSE_VLLM, fmha_quant_mode="fp8")               # vllm: explicit fp8 kept or refused
    add(AGG_DENSE_BF16_VLLM, fmha_quant_mode="fp8")
    add(AGG_DENSE_SGLANG, fmha_quant_mode="fp8")
    add(AGG_DENSE_TRTLLM, fmha_quant_mode="bfloat16")
    add(AGG_DENSE_TRTLLM, fmha_quant_mode="fp8")
    add(DISAGG_DENSE_VLLM, fmha_quant_mode="bfloat16")
    add(AGG_MLA_TRTLLM, fmha_quant_mode="bfloat16")
    # comm (5): a label only on these paths
    add(AGG_DENSE_VLLM, comm_quant_mode="fp8")
    add(AGG_DENSE_SGLANG, comm_quant_mode="int8")
    add(AGG_MOE_VLLM, comm_quant_mode="fp8")
    add(DISAGG_DENSE_SGLANG, comm_quant_mode="half")
    add(AGG_MLA_SGLANG, comm_quant_mode="fp8")

    # -- 2. MTP ---------------------------------------------------------------
    add(AGG_DENSE_VLLM, nextn=1, nextn_accepted=0.8)
    add(AGG_DENSE_VLLM, nextn=2, nextn_accepted=1.4)
    add(AGG_DENSE_SGLANG, nextn=2, nextn_accepted=1.4)
    add(AGG_DENSE_TRTLLM, nextn=3, nextn_accepted=2.1)
    add(AGG_MOE_VLLM, nextn=1, nextn_accepted=0.7)
    add(AGG_MLA_SGLANG, nextn=1, nextn_accepted=0.9)
    add(AGG_MLA_TRTLLM, nextn=3, nextn_accepted=2.4)
    add(DISAGG_DENSE_VLLM, nextn=2, nextn_accepted=1.4)
    add(DISAGG_MOE_TRTLLM, nextn=1, nextn_accepted=0.85)
    add(DISAGG_MOE_VLLM, nextn=2, nextn_accepted=1.6)
    add(AGG_DENSE_VLLM, nextn=2, nextn_accepted=0.0)         # cost, no benefit
    add(AGG_DENSE_SGLANG, nextn=1, nextn_accepted=1.0)       # the upper bound
    add(AGG_MLA_SGLANG, nextn="auto", nextn_accepted=0.8)    # DeepSeek-V3: 1 MTP layer
    add(AGG_DENSE_VLLM, nextn="auto", nextn_accepted=0.5)    # Qwen3: none -> off, a ignored
    add(AGG_DENSE_VLLM, nextn=0, nextn_accepted=5.0)         # a ignored at n = 0

    # -- 3. memory fraction, max_seq_len (trtllm agg only) ---------------------
    add(AGG_DENSE_TRTLLM, free_gpu_memory_fraction=0.5)
    add(AGG_DENSE_TRTLLM, free_gpu_memory_fraction=0.05)     # KV warning
    add(AGG_MOE_EP_TRTLLM, free_gpu_memory_fraction=0.85)
    add(AGG_DENSE_VLLM, free_gpu_memory_fraction=0.5)        # ignored on vllm
    add(DISAGG_DENSE_SGLANG, free_gpu_memory_fraction=0.5)   # ignored on disagg
    add(AGG_MLA_TRTLLM, free_gpu_memory_fraction=0.3)
    add(AGG_DENSE_TRTLLM, max_seq_len=16384)
    add(AGG_DENSE_TRTLLM, max_seq_len=131072)
    add(AGG_MOE_EP_TRTLLM, max_seq_len=4096)
    add(AGG_DENSE_SGLANG, max_seq_len=16384)                 # ignored on sglang
    add(AGG_MLA_TRTLLM, max_seq_len=65536)

    # -- 4. images (Qwen3-VL), and ignored elsewhere ---------------------------
    add(AGG_VL_SGLANG, image_height=448, image_width=448, num_images=1)
    add(AGG_VL_SGLANG, image_height=1024, image_width=768, num_images=2)
    add(AGG_VL_VLLM, image_height=448, image_width=448, num_images=4)
    add(AGG_VL_SGLANG, image_height=448, image_width=448, num_images=1, enable_encoder_dp=False)
    add(DISAGG_VL_TRTLLM, image_height=448, image_width=448, num_images=1)
    add(DISAGG_VL_TRTLLM, image_height=896, image_width=448, num_images=3, enable_encoder_dp=False)
    add(AGG_VL_SGLANG)                                       # text only, encoder built
    add(AGG_DENSE_SGLANG, image_height=448, image_width=448)  # not a VL model: ignored
    add(AGG_VL_VLLM, image_height=10, image_width=10)         # under one merged patch: no image path

    # -- combinations ---------------------------------------------------------
    add(AGG_DENSE_BF16_VLLM, gemm_quant_mode="fp8", kvcache_quant_mode="fp8", nextn=2, nextn_accepted=1.5)
    add(AGG_DENSE_SGLANG, gemm_quant_mode="fp8", kvcache_quant_mode="fp8", fmha_quant_mode="fp8")
    add(AGG_MOE_VLLM, moe_quant_mode="fp8", gemm_quant_mode="fp8", kvcache_quant_mode="fp8")
    add(AGG_DENSE_TRTLLM, kvcache_quant_mode="bfloat16", free_gpu_memory_fraction=0.6, max_seq_len=32768)
    add(AGG_DENSE_TRTLLM, nextn=1, nextn_accepted=0.9, free_gpu_memory_fraction=0.7)
    add(DISAGG_DENSE_SGLANG, gemm_quant_mode="fp8", kvcache_quant_mode="fp8", nextn=1, nextn_accepted=0.8)
    add(DISAGG_MOE_TRTLLM, moe_quant_mode="fp8", kvcache_quant_mode="fp8", comm_quant_mode="fp8")
    add(AGG_MLA_SGLANG, nextn=2, nextn_accepted=1.2, kvcache_quant_mode="fp8")
    add(AGG_VL_SGLANG, image_height=448, image_width=448, nextn=1, nextn_accepted=0.5, kvcache_quant_mode="fp8")
    add(AGG_MOE_EP_TRTLLM, moe_quant_mode="fp8_block", gemm_quant_mode="fp8_block", kvcache_quant_mode="fp8",
        max_seq_len=8192)

    # -- malformed arguments --------------------------------------------------
    add(AGG_DENSE_VLLM, kvcache_quant_mode="fp4")            # KeyError
    add(AGG_DENSE_VLLM, gemm_quant_mode="FP8")               # case-sensitive
    add(AGG_MOE_VLLM, moe_quant_mode="mxfp4")
    add(AGG_DENSE_VLLM, nextn=2)                             # accepted missing
    add(AGG_DENSE_VLLM, nextn=2, nextn_accepted=2.5)         # above nextn
    add(AGG_DENSE_VLLM, nextn=-1, nextn_accepted=0.0)
    add(AGG_DENSE_VLLM, nextn=1.5, nextn_accepted=0.5)
    add(DISAGG_DENSE_VLLM, nextn=1, nextn_accepted=-0.1)

    # -- deployments refused --------------------------------------------------
    add(AGG_DENSE_TRTLLM, batch_size=256, nextn=3, nextn_accepted=1.0)  # activations x4
    add(DISAGG_MOE_VLLM, moe_quant_mode="fp8_block", decode_moe_tp_size=4, decode_moe_ep_size=1)
    add(DISAGG_MOE_TRTLLM, moe_quant_mode="fp8_block", decode_moe_tp_size=4, decode_moe_ep_size=1)  # 768/4 % 128
    add(AGG_DENSE_TRTLLM, batch_size=128, free_gpu_memory_fraction=0.02)   # KV over budget: a warning
    add(AGG_MOE_EP_TRTLLM, batch_size=256, isl=8192, free_gpu_memory_fraction=0.05, max_seq_len=65536)

    # -- the enums' rarer members (appended, so the ids above stay) -------------
    add(AGG_DENSE_TRTLLM, gemm_quant_mode="fp8_ootb")        # no table of its own: SOL-derived
    add(AGG_DENSE_BF16_VLLM, gemm_quant_mode="fp8_ootb")
    add(DISAGG_DENSE_SGLANG, gemm_quant_mode="fp8_ootb")
    add(AGG_DENSE_SGLANG, fmha_quant_mode="fp8_block")       # sglang wide-EP's name
    add(AGG_MLA_SGLANG, fmha_quant_mode="fp8_block")
    add(AGG_DENSE_TRTLLM, fmha_quant_mode="fp8_block")
    add(DISAGG_DENSE_VLLM, fmha_quant_mode="fp8_block")
    return out


def main() -> int:
    json.dump(points(), sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
