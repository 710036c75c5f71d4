"""Input list for tests/goldens/serving_pp_goldens.parquet (split 'pp').

    python3 scripts/spec_pp_points.py OUT.json
    /work/specenv/bin/python scripts/spec_points.py OUT.json tests/goldens/serving_pp_goldens.parquet --split pp
"""
import json
import sys
V, T, S = "h200_sxm/vllm/0.19.0", "h200_sxm/trtllm/1.3.0rc10", "h200_sxm/sglang/0.5.10"
Q32F, L8, M30 = "Qwen/Qwen3-32B-FP8", "meta-llama/Meta-Llama-3.1-8B", "Qwen/Qwen3-30B-A3B"
Q235F, L405, Q32 = "Qwen/Qwen3-235B-A22B-FP8", "meta-llama/Meta-Llama-3.1-405B", "Qwen/Qwen3-32B"
pts = []
def agg(model, db, pp, tp, bs, isl, osl, prefix=0, **kw):
    a = dict(tp_size=tp, pp_size=pp, batch_size=bs, isl=isl, osl=osl, prefix=prefix, **kw)
    pts.append(dict(mode="agg", model=model, db=db, args=a))
def dis(model, db, isl, osl, prefix=0, **kw):
    a = dict(isl=isl, osl=osl, prefix=prefix, **kw)
    pts.append(dict(mode="disagg", model=model, db=db, args=a))

# --- agg, dense
agg(Q32F, V, 2, 1, 1, 1024, 128)
agg(Q32F, V, 2, 2, 16, 4096, 512)
agg(Q32F, V, 4, 1, 64, 1024, 128)
agg(Q32F, T, 2, 2, 64, 4096, 512)
agg(Q32F, T, 4, 2, 16, 1024, 128)
agg(Q32F, S, 2, 4, 64, 1024, 128)
agg(Q32F, S, 4, 1, 1, 4096, 512)
agg(L8, V, 2, 1, 64, 4096, 512)
agg(L8, V, 4, 2, 16, 1024, 128)
agg(L8, T, 2, 4, 1, 1024, 128)
agg(L8, T, 4, 1, 64, 4096, 512)
agg(L8, S, 2, 2, 16, 4096, 512)
agg(L8, S, 4, 4, 64, 1024, 128)
# prefix > 0
agg(Q32F, V, 2, 2, 16, 4096, 512, prefix=1024)
agg(L8, T, 4, 1, 64, 1024, 128, prefix=512)
agg(Q32F, S, 2, 1, 16, 1024, 128, prefix=256)
# ctx_tokens budget below isl with pp
agg(L8, V, 2, 1, 16, 4096, 512, ctx_tokens=2048)
# --- agg, MoE (tp*dp == moe_tp*moe_ep)
agg(M30, V, 2, 1, 16, 1024, 128, moe_tp_size=1, moe_ep_size=1)
agg(M30, V, 2, 2, 64, 4096, 512, moe_tp_size=1, moe_ep_size=2)
agg(M30, T, 2, 2, 16, 1024, 128, moe_tp_size=2, moe_ep_size=1)
agg(M30, T, 4, 1, 64, 4096, 512, moe_tp_size=1, moe_ep_size=1)
agg(M30, S, 2, 4, 1, 1024, 128, moe_tp_size=1, moe_ep_size=4)
agg(M30, S, 4, 2, 16, 4096, 512, moe_tp_size=1, moe_ep_size=2)
agg(M30, T, 2, 4, 64, 1024, 128, moe_tp_size=1, moe_ep_size=4, prefix=512)
# attention DP 2 with pp 2 (tp 1, dp 2 -> moe_tp*moe_ep == 2)
agg(M30, V, 2, 1, 16, 1024, 128, attention_dp_size=2, moe_tp_size=1, moe_ep_size=2)
agg(M30, T, 2, 1, 16, 1024, 128, attention_dp_size=2, moe_tp_size=1, moe_ep_size=2)
agg(M30, S, 2, 1, 64, 4096, 512, attention_dp_size=2, moe_tp_size=1, moe_ep_size=2)
# num_layers not divisible by pp (the spec only warns): 94 and 126 layers, pp 4
agg(Q235F, S, 4, 4, 16, 1024, 128, moe_tp_size=1, moe_ep_size=4)
agg(L405, T, 4, 8, 16, 1024, 128)
# OOM: 405B bf16 on tp2 pp2
agg(L405, V, 2, 2, 16, 1024, 128)
# batch above the KV-cache budget but not OOM (kv_cache_warning; TRT-LLM's 0.9 free fraction)
agg(Q32, T, 2, 1, 88, 4096, 512)

# --- disagg
# pp on both sides
dis(Q32F, V, 1024, 128, prefill_tp_size=1, prefill_pp_size=2, prefill_batch_size=1, prefill_num_workers=1,
    decode_tp_size=2, decode_pp_size=2, decode_batch_size=16, decode_num_workers=1)
# pp on prefill only
dis(Q32F, T, 4096, 512, prefill_tp_size=2, prefill_pp_size=2, prefill_batch_size=1, prefill_num_workers=2,
    decode_tp_size=2, decode_pp_size=1, decode_batch_size=64, decode_num_workers=1)
# pp on decode only
dis(L8, S, 1024, 128, prefill_tp_size=1, prefill_pp_size=1, prefill_batch_size=2, prefill_num_workers=1,
    decode_tp_size=1, decode_pp_size=2, decode_batch_size=64, decode_num_workers=2)
# shared pp_size / tp_size fallback (both sides pp 4)
dis(L8, V, 4096, 512, tp_size=1, pp_size=4, prefill_batch_size=1, prefill_num_workers=1,
    decode_batch_size=16, decode_num_workers=1)
# different pp per side, prefix > 0
dis(L8, T, 4096, 512, prefix=1024, prefill_tp_size=1, prefill_pp_size=4, prefill_batch_size=1, prefill_num_workers=1,
    decode_tp_size=1, decode_pp_size=2, decode_batch_size=64, decode_num_workers=1)
dis(Q32F, S, 1024, 128, tp_size=2, pp_size=2, prefill_batch_size=2, prefill_num_workers=1,
    decode_batch_size=64, decode_num_workers=1)
# MoE
dis(M30, V, 1024, 128, prefill_tp_size=2, prefill_pp_size=2, prefill_moe_tp_size=1, prefill_moe_ep_size=2,
    prefill_batch_size=2, prefill_num_workers=1,
    decode_tp_size=4, decode_pp_size=2, decode_moe_tp_size=1, decode_moe_ep_size=4, decode_batch_size=64, decode_num_workers=1)
dis(M30, T, 4096, 512, prefill_tp_size=2, prefill_pp_size=1, prefill_moe_tp_size=1, prefill_moe_ep_size=2,
    prefill_batch_size=1, prefill_num_workers=2,
    decode_tp_size=1, decode_pp_size=4, decode_moe_tp_size=1, decode_moe_ep_size=1, decode_batch_size=16, decode_num_workers=1)
dis(M30, S, 4096, 512, prefill_tp_size=4, prefill_pp_size=2, prefill_moe_tp_size=1, prefill_moe_ep_size=4,
    prefill_batch_size=1, prefill_num_workers=1,
    decode_tp_size=2, decode_pp_size=1, decode_moe_tp_size=2, decode_moe_ep_size=1, decode_batch_size=64, decode_num_workers=1)
# MoE, attention DP 2 on decode with pp 2
dis(M30, S, 1024, 128, prefill_tp_size=2, prefill_pp_size=2, prefill_moe_tp_size=1, prefill_moe_ep_size=2,
    prefill_batch_size=2, prefill_num_workers=1,
    decode_tp_size=1, decode_pp_size=2, decode_attention_dp_size=2, decode_moe_tp_size=1, decode_moe_ep_size=2,
    decode_batch_size=64, decode_num_workers=1)
# 94 layers, prefill pp 4
dis(Q235F, T, 1024, 128, prefill_tp_size=4, prefill_pp_size=4, prefill_moe_tp_size=1, prefill_moe_ep_size=4,
    prefill_batch_size=1, prefill_num_workers=1,
    decode_tp_size=8, decode_pp_size=1, decode_moe_tp_size=1, decode_moe_ep_size=8, decode_batch_size=64, decode_num_workers=1)

for i, p in enumerate(pts):
    p["point_id"] = i
    p["split"] = "pp"
with open(sys.argv[1] if len(sys.argv) > 1 else "pp_points.json", "w") as out:
    json.dump(pts, out, indent=1)
print(len(pts), "points")
