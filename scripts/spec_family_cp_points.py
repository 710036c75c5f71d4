"""Input list for tests/goldens/serving_family_cp_goldens.parquet (split 'family_cp').

Context parallelism (cp 2 / 4 / 8, sglang only) for the HYBRIDMOE family (Llama-4-Scout,
MiMo-V2-Flash) and the DEEPSEEK / KIMIK25 families (DeepSeek-V3, Kimi-K2.5-NVFP4). See
docs/spec/families_dp_cp.md sections 3 and 6. The spec's cli_estimate has no cp argument, so
these points run through scripts/spec_cp_points.py (cli_estimate's agg / disagg path on the
spec's lower-level API, with ModelConfig.cp_size set as the spec's search sets it):

    python3 scripts/spec_family_cp_points.py OUT.json
    nice -n 10 /work/specenv/bin/python scripts/spec_cp_points.py OUT.json \
        tests/goldens/serving_family_cp_goldens.parquet --split family_cp --cross-check

Args: agg points carry ``cp_size``, disagg points ``prefill_cp_size`` and ``decode_cp_size``
(always present, 1 for a non-cp side). Under cp the spec requires tp = dp = 1 on sglang
(ValueError otherwise) and tp * dp * cp == moe_tp * moe_ep, so every cp side has
moe_tp * moe_ep == cp. Two disagg points put cp on the decode side too: run_disagg prices them,
but the spec's search never builds them (task_v2.iter_parallel raises for decode cp > 1:
"CP is modeled for prefill only").
"""
import json
import sys

SCOUT = "meta-llama/Llama-4-Scout-17B-16E-Instruct"
MIMO = "XiaomiMiMo/MiMo-V2-Flash"
DSV3 = "deepseek-ai/DeepSeek-V3"
KIMI = "nvidia/Kimi-K2.5-NVFP4"
B_S = "b200_sxm/sglang/0.5.14"
H_S = "h200_sxm/sglang/0.5.14"

pts = []


def agg(model, db, cp, etp, eep, bs, isl, osl, tp=1, dp=1, **kw):
    a = dict(tp_size=tp, attention_dp_size=dp, cp_size=cp, moe_tp_size=etp, moe_ep_size=eep,
             batch_size=bs, isl=isl, osl=osl, **kw)
    pts.append(dict(mode="agg", model=model, db=db, args=a))


def dis(model, db, isl, osl, p, d, pbs=1, pnw=1, dbs=16, dnw=1, **kw):
    """p, d = (tp, dp, cp, moe_tp, moe_ep) of the prefill / decode worker."""
    a = dict(isl=isl, osl=osl,
             prefill_tp_size=p[0], prefill_attention_dp_size=p[1], prefill_cp_size=p[2],
             prefill_moe_tp_size=p[3], prefill_moe_ep_size=p[4],
             prefill_batch_size=pbs, prefill_num_workers=pnw,
             decode_tp_size=d[0], decode_attention_dp_size=d[1], decode_cp_size=d[2],
             decode_moe_tp_size=d[3], decode_moe_ep_size=d[4],
             decode_batch_size=dbs, decode_num_workers=dnw, **kw)
    pts.append(dict(mode="disagg", model=model, db=db, args=a))


# ---------------- agg ----------------
# HYBRIDMOE: Llama-4-Scout (E 16, topk 1, bf16; 24 global + 24 SWA MoE layers)
agg(SCOUT, B_S, 2, 1, 2, 8, 1024, 128)
agg(SCOUT, B_S, 2, 2, 1, 32, 4096, 512)               # moe_tp only
agg(SCOUT, B_S, 4, 1, 4, 16, 4096, 512)
agg(SCOUT, B_S, 4, 2, 2, 1, 1024, 128)                # moe_tp x moe_ep
agg(SCOUT, B_S, 8, 1, 8, 64, 1024, 512)
agg(SCOUT, H_S, 2, 1, 2, 8, 1024, 128)                # SM90 data
agg(SCOUT, B_S, 2, 1, 4, 8, 1024, 128, tp=2)          # error: sglang cp needs tp = dp = 1
# HYBRIDMOE: MiMo-V2-Flash (different SWA / global dims, dense layer 0)
agg(MIMO, B_S, 4, 1, 4, 8, 1024, 128)
agg(MIMO, B_S, 8, 1, 8, 16, 4096, 512)
# DEEPSEEK: DeepSeek-V3 (fp8_block; agg prices the MLA block in pass 1, see doc 8.1)
agg(DSV3, H_S, 8, 1, 8, 8, 1024, 128)
agg(DSV3, B_S, 8, 1, 8, 32, 4096, 512)
agg(DSV3, H_S, 4, 1, 4, 8, 1024, 128)                 # OOM: cp does not shard attention / KV
# KIMIK25: Kimi-K2.5-NVFP4
agg(KIMI, B_S, 4, 1, 4, 8, 1024, 128)
agg(KIMI, B_S, 8, 1, 8, 16, 4096, 512)

# ---------------- disagg: cp prefill, non-cp decode ----------------
dis(SCOUT, B_S, 1024, 128, (1, 1, 2, 1, 2), (4, 1, 1, 4, 1), dbs=32)        # decode tp4, moe_tp 4
dis(SCOUT, B_S, 4096, 512, (1, 1, 4, 1, 4), (1, 4, 1, 1, 4), dbs=64)        # decode dp4
dis(SCOUT, H_S, 1024, 128, (1, 1, 4, 2, 2), (2, 1, 1, 1, 2), pnw=2, dbs=32)  # 2 prefill workers
dis(MIMO, B_S, 4096, 512, (1, 1, 4, 1, 4), (4, 1, 1, 1, 4), dbs=32)
dis(DSV3, H_S, 1024, 128, (1, 1, 8, 1, 8), (8, 1, 1, 1, 8), dbs=32)         # decode tp8 ep8
dis(DSV3, B_S, 4096, 512, (1, 1, 8, 1, 8), (1, 8, 1, 1, 8), dbs=64)         # decode dp8 ep8
dis(DSV3, B_S, 1024, 128, (1, 1, 4, 1, 4), (8, 1, 1, 1, 8), dbs=32)         # OOM on the prefill side
dis(KIMI, B_S, 1024, 128, (1, 1, 4, 1, 4), (4, 1, 1, 1, 4), dbs=32)
dis(KIMI, B_S, 4096, 512, (1, 1, 8, 1, 8), (1, 8, 1, 1, 8), pbs=2, dbs=64)
dis(KIMI, B_S, 1024, 128, (1, 2, 2, 1, 4), (4, 1, 1, 1, 4), dbs=32)         # error: prefill dp 2 with cp 2

# ---------------- disagg: cp on the decode side too (priced; the search never builds these) ----
dis(SCOUT, B_S, 1024, 128, (1, 1, 2, 1, 2), (1, 1, 2, 1, 2), dbs=32)
dis(DSV3, H_S, 1024, 128, (1, 1, 8, 1, 8), (1, 1, 8, 1, 8), dbs=32)

for i, p in enumerate(pts):
    p["point_id"] = i
    p["split"] = "family_cp"
with open(sys.argv[1] if len(sys.argv) > 1 else "family_cp_points.json", "w") as out:
    json.dump(pts, out, indent=1)
print(len(pts), "points")
