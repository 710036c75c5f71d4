"""Input list for tests/goldens/serving_family_dp_goldens.parquet (split 'family_dp').

Attention DP (attention_dp_size 2 and 4; prefill_/decode_attention_dp_size for disagg) for
the HYBRIDMOE family (Llama-4-Scout) and the DEEPSEEK / KIMIK25 families (DeepSeek-V3,
Kimi-K2.5-NVFP4). See docs/spec/families_dp_cp.md.

    python3 scripts/spec_family_dp_points.py OUT.json
    nice -n 10 /work/specenv/bin/python scripts/spec_points.py OUT.json \
        tests/goldens/serving_family_dp_goldens.parquet --split family_dp

Parallel widths always satisfy tp * dp == moe_tp * moe_ep (the spec asserts it).
DEEPSEEK / KIMIK25 agg: the agg mixed step reads latency_dict["context_attention"], an op
these families do not have (theirs is context_mla_block). On the Python engine step that
dict is a defaultdict, so the read gives 0.0 instead of a KeyError (the whole MLA block is
priced in the step's pass 1 instead). One agg point per family records that; the rest are
disagg.
"""
import json
import sys

SCOUT = "meta-llama/Llama-4-Scout-17B-16E-Instruct"
DSV3 = "deepseek-ai/DeepSeek-V3"
KIMI = "nvidia/Kimi-K2.5-NVFP4"
GB_V = "gb200/vllm/0.24.0"
B_S = "b200_sxm/sglang/0.5.14"
B_T = "b200_sxm/trtllm/1.3.0rc20"
H_S = "h200_sxm/sglang/0.5.14"
H_T = "h200_sxm/trtllm/1.3.0rc20"

pts = []


def agg(model, db, tp, dp, etp, eep, bs, isl, osl, **kw):
    a = dict(tp_size=tp, attention_dp_size=dp, moe_tp_size=etp, moe_ep_size=eep,
             batch_size=bs, isl=isl, osl=osl, **kw)
    pts.append(dict(mode="agg", model=model, db=db, args=a))


def dis(model, db, isl, osl, p, d, pbs=1, pnw=1, dbs=16, dnw=1, **kw):
    """p, d = (tp, dp, moe_tp, moe_ep) of the prefill / decode worker."""
    a = dict(isl=isl, osl=osl,
             prefill_tp_size=p[0], prefill_attention_dp_size=p[1],
             prefill_moe_tp_size=p[2], prefill_moe_ep_size=p[3],
             prefill_batch_size=pbs, prefill_num_workers=pnw,
             decode_tp_size=d[0], decode_attention_dp_size=d[1],
             decode_moe_tp_size=d[2], decode_moe_ep_size=d[3],
             decode_batch_size=dbs, decode_num_workers=dnw, **kw)
    pts.append(dict(mode="disagg", model=model, db=db, args=a))


# ---------------- HYBRIDMOE: Llama-4-Scout (E 16, topk 1, bf16) ----------------
# vllm (gb200, 4 GPUs/node): all-reduce over G if tp>1, plus NCCL AG/RS of x*h*dp over G
agg(SCOUT, GB_V, 1, 2, 1, 2, 8, 1024, 128)
agg(SCOUT, GB_V, 1, 4, 1, 4, 16, 4096, 512)
agg(SCOUT, GB_V, 2, 2, 4, 1, 8, 1024, 128)            # tp>1 and dp>1 together, moe_tp 4
agg(SCOUT, GB_V, 1, 4, 4, 1, 1, 1024, 128)            # dp 4 with moe_tp only
# sglang non-deepep (b200): dp>1 alone -> AG / RS; tp>1 and dp>1 -> RS(attn_tp)+AG(G) / RS(G)+AG(attn_tp)
agg(SCOUT, B_S, 1, 2, 1, 2, 8, 1024, 128)
agg(SCOUT, B_S, 1, 4, 1, 4, 16, 1024, 128)
agg(SCOUT, B_S, 2, 2, 1, 4, 8, 4096, 512)
# trtllm SM100 (b200): dp>1 -> AG(x*h*dp) / RS(x*h*dp), full volume (HYBRIDMOE passes no quant_mode)
agg(SCOUT, B_T, 1, 2, 1, 2, 8, 1024, 128)
agg(SCOUT, B_T, 1, 4, 2, 2, 16, 1024, 128)
# error: trtllm with attention tp > 1 and dp > 1
agg(SCOUT, B_T, 2, 2, 1, 4, 8, 1024, 128)
# trtllm SM90 (h200): attention_tp>1 checked first, then dp
agg(SCOUT, H_T, 1, 2, 1, 2, 8, 1024, 128)
# disagg
dis(SCOUT, GB_V, 1024, 128, (4, 1, 4, 1), (1, 4, 1, 4), dbs=32)   # drift-report-like decode dp4
dis(SCOUT, GB_V, 4096, 512, (1, 4, 1, 4), (2, 2, 4, 1), pbs=1, dbs=16)
dis(SCOUT, B_S, 1024, 128, (1, 2, 1, 2), (2, 2, 1, 4), dbs=64)
dis(SCOUT, B_T, 1024, 128, (2, 1, 1, 2), (1, 4, 1, 4), dbs=64)

# ---------------- DEEPSEEK: DeepSeek-V3 (E 256, topk 8, fp8_block) ----------------
# agg raises KeyError('context_attention') -> one error point
agg(DSV3, H_S, 2, 4, 1, 8, 8, 1024, 128)             # no error on the Python step (see doc 8.1)
# sglang (h200): combined attention tp x dp
dis(DSV3, H_S, 1024, 128, (8, 1, 1, 8), (2, 4, 1, 8), dbs=32)
dis(DSV3, H_S, 4096, 512, (4, 2, 1, 8), (1, 8, 1, 8), dbs=16)
dis(DSV3, H_S, 1024, 128, (2, 4, 1, 8), (4, 2, 1, 8), pbs=2, dbs=64)
# trtllm SM90 (h200): dp only (tp 1)
dis(DSV3, H_T, 1024, 128, (8, 1, 1, 8), (1, 8, 1, 8), dbs=32)
dis(DSV3, H_T, 4096, 512, (1, 8, 1, 8), (8, 1, 1, 8), dbs=16)
# trtllm SM100 (b200): fp8_block dispatch volume halved for the all-gather only
dis(DSV3, B_T, 1024, 128, (8, 1, 1, 8), (1, 8, 1, 8), dbs=32)
dis(DSV3, B_T, 4096, 512, (1, 8, 1, 8), (8, 1, 1, 8), dbs=16)
# error: trtllm tp>1 with dp>1 (decode side)
dis(DSV3, H_T, 1024, 128, (8, 1, 1, 8), (2, 4, 1, 8), dbs=32)

# ---------------- KIMIK25: Kimi-K2.5-NVFP4 (E 384, topk 8, nvfp4) ----------------
agg(KIMI, B_T, 1, 4, 1, 4, 8, 1024, 128)              # no error on the Python step (see doc 8.1)
dis(KIMI, B_T, 1024, 128, (4, 1, 1, 4), (1, 4, 1, 4), dbs=32)
dis(KIMI, B_T, 4096, 512, (1, 2, 1, 2), (1, 8, 1, 8), dbs=16)   # OOM error: dp does not shard the experts
dis(KIMI, B_T, 1024, 128, (1, 4, 1, 4), (1, 4, 1, 4), pbs=2, dbs=64)
dis(KIMI, B_S, 1024, 128, (4, 1, 1, 4), (2, 2, 1, 4), dbs=32)
dis(KIMI, B_S, 4096, 512, (1, 4, 1, 4), (1, 4, 1, 4), dbs=16)
# error: trtllm tp>1 with dp>1 (prefill side)
dis(KIMI, B_T, 1024, 128, (2, 2, 1, 4), (1, 4, 1, 4), dbs=32)

for i, p in enumerate(pts):
    p["point_id"] = i
    p["split"] = "family_dp"
with open(sys.argv[1] if len(sys.argv) > 1 else "family_dp_points.json", "w") as out:
    json.dump(pts, out, indent=1)
print(len(pts), "points")
