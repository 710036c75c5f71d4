"""The DEEPSEEKV32 family on the Python path (docs/spec/families_dsa.md):
DeepSeek-V3.2 and GLM-5.x with DSA sparse attention. The wave-2 goldens run
in test_spec_families.py (test_every_dsa_golden_row); here the values the
spec computed in process off the golden points: direct lookups of the two DSA
tables (exact, interpolated, util-hold, skip-indexer rows, every miss
message), engine steps on other databases / layouts (the GLM-5.2 skip-indexer
amortisation on sglang, the cross-backend rows on trtllm / vllm), attention
dp, context parallelism (the DSA sub-kernel deltas) and aggregated serving
estimates (the indexer-aware KV cache). Every number is the spec's, bit for
bit. Data: the cache rule; missing data FAILS these tests.
"""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest

from _support import have_data, require

try:
    import aicsql.spec  # noqa: F401
except ImportError:
    _package = types.ModuleType("aicsql")
    _package.__path__ = [str(Path(__file__).resolve().parents[1] / "aicsql")]
    sys.modules["aicsql"] = _package
    import aicsql.spec  # noqa: F401

from aicsql.spec import data_dirs, engine_step, open_tree, step_latency
from aicsql.spec.data import Database
from aicsql.spec.kernels import PerfMiss, kernels_for
from aicsql.spec.kernels.dsa import context_sol, indexer_entry_bytes
from aicsql.spec.kernels.quant import FMHA_QUANTS, KV_QUANTS
from aicsql.spec.serving.api import estimate_agg
from aicsql.spec.serving.kvcache import kv_bytes_per_sequence
from aicsql.spec.sol import GEMM_QUANTS
from aicsql.spec.step import step_context
from aicsql.spec.step.model import load_model

needs_data = require(have_data(open_tree), f"no perf data under {data_dirs()} (run the fetch step)")

DS, GLM = "DeepseekV32ForCausalLM", "GlmMoeDsaForCausalLM"
DSV32 = "deepseek-ai/DeepSeek-V3.2"
GLM52 = "nvidia/GLM-5.2-NVFP4"
H_SGL = "h200_sxm/sglang/0.5.14"
B_TRT = "b200_sxm/trtllm/1.3.0rc20"

# Direct DSA lookups: (phase, db, b, s, prefix, heads, kv, fmha, gemm, architecture, skip_indexer,
# interp path, the spec's value or its PerfDataNotAvailableError message)
PROBES = [
    ('context', 'h200_sxm/sglang/0.5.14', 1, 1024, 0, 16, 'fp8', 'bfloat16', 'fp8_block', DS, False, 'exact_hit',
     0.8626),
    ('context', 'h200_sxm/sglang/0.5.14', 1, 1000, 0, 16, 'fp8', 'bfloat16', 'fp8_block', DS, False,
     'grid_interpolation', 0.8635890625),
    ('context', 'h200_sxm/sglang/0.5.14', 1, 20000, 0, 16, 'fp8', 'bfloat16', 'fp8_block', DS, False,
     'grid_util_hold', 25.6545763557444),
    ('context', 'h200_sxm/sglang/0.5.14', 1, 1024, 0, 8, 'fp8', 'bfloat16', 'bfloat16', GLM, True, 'exact_hit',
     0.8622),
    ('context', 'h200_sxm/sglang/0.5.14', 2, 3000, 100, 8, 'fp8', 'bfloat16', 'bfloat16', GLM, True,
     'grid_interpolation', 5.962597656250001),
    ('context', 'h200_sxm/sglang/0.5.14', 1, 50000, 0, 8, 'fp8', 'bfloat16', 'bfloat16', GLM, True, 'grid_util_hold',
     40.78818772233543),
    ('context', 'h200_sxm/sglang/0.5.14', 1, 1024, 0, 16, 'fp8', 'bfloat16', 'fp8_block', DS, True, 'miss',
     "Context DSA module data not available for system='h200_sxm', backend='sglang', version='0.5.14', "
     "architecture='DeepseekV32ForCausalLM', fmha_quant_mode=FMHAQuantMode.bfloat16, "
     'kvcache_quant_mode=KVCacheQuantMode.fp8, gemm_quant_mode=GEMMQuantMode.fp8_block, num_heads=16, s=1024, '
     'prefix=0, b=1. Missing silicon data for the requested lookup.'),
    ('context', 'h200_sxm/sglang/0.5.14', 1, 1024, 0, 16, 'fp8', 'fp8', 'fp8_block', DS, False, 'miss',
     "Context DSA module data not available for system='h200_sxm', backend='sglang', version='0.5.14', "
     "architecture='DeepseekV32ForCausalLM', fmha_quant_mode=FMHAQuantMode.fp8, "
     'kvcache_quant_mode=KVCacheQuantMode.fp8, gemm_quant_mode=GEMMQuantMode.fp8_block, num_heads=16, s=1024, '
     'prefix=0, b=1. Missing silicon data for the requested lookup.'),
    ('generation', 'h200_sxm/sglang/0.5.14', 1, 1025, 0, 16, 'fp8', None, 'fp8_block', DS, False, 'exact_hit',
     0.0826),
    ('generation', 'h200_sxm/sglang/0.5.14', 1, 1100, 0, 16, 'fp8', None, 'fp8_block', DS, False,
     'grid_interpolation', 0.082512109375),
    ('generation', 'h200_sxm/sglang/0.5.14', 2000, 1025, 0, 16, 'fp8', None, 'fp8_block', DS, False,
     'grid_util_hold', 7.349757978764857),
    ('generation', 'h200_sxm/sglang/0.5.14', 1, 1025, 0, 8, 'fp8', None, 'bfloat16', GLM, True, 'exact_hit', 0.052),
    ('generation', 'h200_sxm/sglang/0.5.14', 5, 7000, 0, 8, 'fp8', None, 'bfloat16', GLM, True, 'grid_interpolation',
     0.06333883666992188),
    ('context', 'b200_sxm/trtllm/1.3.0rc20', 1, 1024, 0, 8, 'fp8', 'bfloat16', 'nvfp4', DS, False, 'exact_hit',
     0.2208),
    ('context', 'b200_sxm/trtllm/1.3.0rc20', 2, 2500, 0, 16, 'fp8', 'bfloat16', 'fp8_block', DS, False,
     'grid_interpolation', 1.426601953125),
    ('context', 'b200_sxm/trtllm/1.3.0rc20', 1, 1024, 2048, 8, 'fp8', 'bfloat16', 'bfloat16', DS, False,
     'grid_util_hold', 0.36224869325066916),
    ('generation', 'b200_sxm/trtllm/1.3.0rc20', 1, 1025, 0, 8, 'fp8', None, 'nvfp4', DS, False, 'exact_hit', 0.0867),
    ('generation', 'b200_sxm/trtllm/1.3.0rc20', 3, 3333, 0, 16, 'fp8', None, 'fp8_block', DS, False,
     'grid_interpolation', 0.10476240234375),
    ('generation', 'b200_sxm/trtllm/1.3.0rc20', 1, 250000, 0, 8, 'fp8', None, 'bfloat16', DS, False,
     'grid_util_hold', 0.14868193555454087),
    ('generation', 'b200_sxm/trtllm/1.3.0rc20', 1, 1025, 0, 8, 'fp8', None, 'bfloat16', GLM, True, 'miss',
     "Generation DSA module skip_indexer perf data not loaded for system='b200_sxm', backend='trtllm', "
     "version='1.3.0rc20'."),
    ('context', 'h200_sxm/vllm/0.24.0', 1, 1024, 0, 8, 'fp8', 'bfloat16', 'nvfp4', DS, False, 'miss',
     "Context DSA module data not available for system='h200_sxm', backend='vllm', version='0.24.0', "
     "architecture='DeepseekV32ForCausalLM', fmha_quant_mode=FMHAQuantMode.bfloat16, "
     'kvcache_quant_mode=KVCacheQuantMode.fp8, gemm_quant_mode=GEMMQuantMode.nvfp4, num_heads=8, s=1024, prefix=0, '
     'b=1. Missing silicon data for the requested lookup.'),
    ('context', 'h200_sxm/vllm/0.24.0', 2, 2500, 0, 16, 'fp8', 'bfloat16', 'fp8_block', DS, False,
     'grid_interpolation', 6.018841796875),
    ('context', 'h200_sxm/vllm/0.24.0', 1, 1024, 2048, 8, 'fp8', 'bfloat16', 'bfloat16', DS, False, 'grid_util_hold',
     2.2930558827673666),
    ('generation', 'h200_sxm/vllm/0.24.0', 1, 1025, 0, 8, 'fp8', None, 'nvfp4', DS, False, 'miss',
     "Generation DSA module data not available for system='h200_sxm', backend='vllm', version='0.24.0', "
     "architecture='DeepseekV32ForCausalLM', kv_cache_dtype=KVCacheQuantMode.fp8, "
     'gemm_quant_mode=GEMMQuantMode.nvfp4, num_heads=8, s=1025, b=1. Missing silicon data for the requested lookup.'),
    ('generation', 'h200_sxm/vllm/0.24.0', 3, 3333, 0, 16, 'fp8', None, 'fp8_block', DS, False, 'grid_interpolation',
     0.17381406249999998),
    ('generation', 'h200_sxm/vllm/0.24.0', 1, 250000, 0, 8, 'fp8', None, 'bfloat16', DS, False, 'grid_util_hold',
     0.19754454348326325),
    ('generation', 'h200_sxm/vllm/0.24.0', 1, 1025, 0, 8, 'fp8', None, 'bfloat16', GLM, True, 'miss',
     "Generation DSA module skip_indexer perf data not loaded for system='h200_sxm', backend='vllm', "
     "version='0.24.0'."),
]

# (model, db, tp, moe_tp, moe_ep, B, isl, osl, TTFT, TPOT) of the spec (families_dsa, verification status)
OFF_GOLDEN = [
    ('zai-org/GLM-5.2-FP8', 'b200_sxm/sglang/0.5.14', 8, 1, 8, 4, 2000, 70, 242.1798448421653, 10.385126160753721),
    ('nvidia/GLM-5.2-NVFP4', 'b200_sxm/sglang/0.5.14', 8, 1, 8, 2, 3000, 40, 182.45491616595285, 6.8862392818245555),
    ('deepseek-ai/DeepSeek-V3.2', 'h200_sxm/trtllm/1.3.0rc20', 4, 1, 4, 2, 3000, 70, 615.7166685269792,
     17.712263847938203),
    ('zai-org/GLM-5', 'gb200/vllm/0.24.0', 4, 1, 4, 1, 9000, 40, 666.4532965360999, 17.689207344385586),
    ('nvidia/GLM-5.2-NVFP4', 'b200_sxm/trtllm/1.3.0rc20', 4, 1, 4, 3, 1500, 50, 167.57805872042246,
     11.921366814754737),
    ('deepseek-ai/DeepSeek-V3.2', 'b300_sxm/sglang/0.5.14', 8, 2, 4, 16, 700, 100, 277.1489727296175,
     13.53052434684882),
    ('zai-org/GLM-5.2', 'h200_sxm/sglang/0.5.14', 8, 1, 8, 1, 1024, 128, 168.7131506338576, 10.809875060769338),
    ('nvidia/GLM-5-NVFP4', 'b200_sxm/trtllm/1.3.0rc20', 8, 1, 8, 2, 2048, 33, 141.71139453147984, 11.088355446247846),
    ('zai-org/GLM-5.1-FP8', 'h200_sxm/sglang/0.5.14', 4, 1, 4, 8, 512, 64, 254.832401035753, 27.026192528165733),
]

# Attention dp > 1: (model, db, tp, dp, moe_tp, moe_ep, B, isl, osl, TTFT, TPOT) of the spec's static steps
DP = [
    ('deepseek-ai/DeepSeek-V3.2', 'h200_sxm/sglang/0.5.14', 2, 4, 1, 8, 4, 1500, 70, 819.4957379664869,
     23.430674263020737),
    ('nvidia/GLM-5.2-NVFP4', 'b200_sxm/trtllm/1.3.0rc20', 1, 8, 1, 8, 2, 2048, 40, 372.37923167173716,
     20.430139329996614),
    ('zai-org/GLM-5.2-FP8', 'gb200/vllm/0.24.0', 2, 2, 1, 4, 2, 1024, 40, 424.30317569284637, 83.45057139143414),
]

# Aggregated serving estimates: (model, db, parallel, B, isl, osl, TTFT, TPOT, memory GiB) of cli_estimate agg
AGG = [
    ('deepseek-ai/DeepSeek-V3.2', 'h200_sxm/sglang/0.5.14', 'tp8pp1dp1etp1ep8', 8, 2000, 200, 355.2691962608504,
     22.249715773697506, 90.59336171150208),
    ('nvidia/GLM-5.2-NVFP4', 'b200_sxm/trtllm/1.3.0rc20', 'tp8pp1dp1etp1ep8', 16, 1024, 256, 153.38841396239513,
     16.92998944445837, 64.72262573242188),
    ('zai-org/GLM-5.2-FP8', 'b200_sxm/sglang/0.5.14', 'tp8pp1dp1etp1ep8', 4, 3000, 100, 292.59336103373033,
     11.819324111227642, 99.17858059406281),
    ('nvidia/GLM-5.1-NVFP4', 'gb200/vllm/0.24.0', 'tp4pp1dp1etp1ep4', 8, 1500, 300, 494.97663305150303,
     29.900008801895133, 111.64802122116089),
]


def _kernels(db: str):
    return kernels_for(open_tree(), Database(*db.split("/")))


@needs_data
def test_dsa_lookups_against_the_spec():
    """families_dsa 5, 6: 27 direct lookups (both tables, both kinds, three
    backends incl. the cross-backend rows), their values, interp paths and
    miss messages equal the spec's."""
    for phase, db, b, s, prefix, n, kv, fmha, gemm, arch, skip, path, want in PROBES:
        k = _kernels(db)
        kvq, gq = KV_QUANTS[kv], GEMM_QUANTS[gemm]
        try:
            if phase == "context":
                got = k.dsa_context.query(b, s, n, kvq, gq, arch, skip, prefix, FMHA_QUANTS[fmha])
            else:
                got = k.dsa_generation.query(b, s, n, kvq, gq, arch, skip)
        except PerfMiss as miss:
            assert path == "miss" and miss.reason == want, (phase, db, b, s, miss.reason)
            continue
        assert got == (want, path), (phase, db, b, s, prefix, n, got, want, path)


@needs_data
def test_dsa_walkthroughs():
    """families_dsa 9.2 - 9.4: the golden lookups and the skip amortisation."""
    ctx = engine_step(DSV32, H_SGL, "context", 8, 1, 1024, 128, 1, 8)
    attn = [r for r in ctx["rows"] if r["op_name"] == "context_attention"][0]
    assert attn["total_ms"] == 0.8626 * 61 and attn["op_kind"] == "ContextDSAModule" and attn["quant"] == ""
    assert attn["lookup_table"] == "query_context_dsa_module" and attn["interp_path"] == "exact_hit"
    gate_up = [r for r in ctx["rows"] if r["op_name"] == "context_shared_gate_up_gemm"][0]
    assert '"args": [1024, 4096, 7168, "fp8_block"]' in gate_up["lookup_args"]  # I_moe // moe_tp, not // tp
    assert ctx["total_ms"] == 119.26205063111468
    gen = engine_step(GLM52, B_TRT, "generation", 8, 1, 1024, 128, 1, 8)
    at = [r for r in gen["rows"] if r["op_name"] == "generation_attention" and r["gen_s"] == 1057][0]
    assert at["total_ms"] == (0.0694 + (0.2071 - 0.0694) * (32 / 1024)) * 78.0 == 5.748843750000001
    assert gen["quants"] == {"gemm": "nvfp4", "moe": "nvfp4", "kvcache": "fp8", "fmha": "bfloat16", "comm": "half"}
    # GLM-5.2 (bf16) on sglang: w = 21/78 of the full rows, the rest skip-indexer rows
    w = 21 / 78
    ctx = engine_step("zai-org/GLM-5.2", H_SGL, "context", 8, 1, 1024, 128, 1, 8)
    attn = [r for r in ctx["rows"] if r["op_name"] == "context_attention"][0]
    assert attn["total_ms"] == (w * 0.4492 + (1.0 - w) * 0.7502) * 78 == 52.1946
    gen = engine_step("zai-org/GLM-5.2", H_SGL, "generation", 8, 1, 1024, 128, 1, 8)
    at = [r for r in gen["rows"] if r["op_name"] == "generation_attention" and r["gen_s"] == 1025][0]
    assert at["total_ms"] == (w * 0.074 + (1.0 - w) * 0.042) * 78.0 == 3.9480000000000004


@needs_data
def test_dsa_engine_steps_against_the_spec():
    """families_dsa verification status: 9 off-golden configs, both phases,
    TTFT and TPOT equal the spec's; DeepSeek-V3.2 on a database without a DSA
    table misses at the attention op with the spec's message."""
    for model, db, tp, etp, eep, b, isl, osl, ttft, tpot in OFF_GOLDEN:
        assert step_latency(model, db, "context", tp, b, isl, osl, etp, eep) == ttft, (model, db)
        assert step_latency(model, db, "generation", tp, b, isl, osl, etp, eep) == tpot, (model, db)
    miss = (r"^context_attention: .*Context DSA module data not available for system='a100_sxm', "
            r"backend='sglang', version='0.5.10', architecture='DeepseekV32ForCausalLM', "
            r"fmha_quant_mode=FMHAQuantMode.bfloat16, kvcache_quant_mode=KVCacheQuantMode.fp8, "
            r"gemm_quant_mode=GEMMQuantMode.fp8_block, num_heads=16, s=1024, prefix=0, b=1. Missing silicon data")
    with pytest.raises(ValueError, match=miss):
        engine_step(DSV32, "a100_sxm/sglang/0.5.10", "context", 8, 1, 1024, 128, 1, 8)
    with pytest.raises(ValueError, match=r"^generation_attention: .*Generation DSA module data not available .* "
                                         r"num_heads=16, s=1025, b=1\."):  # fmt: skip
        engine_step(DSV32, "a100_sxm/sglang/0.5.10", "generation", 8, 1, 1024, 128, 1, 8)


@needs_data
def test_dsa_attention_dp_against_the_spec():
    """dp reaches the MoE ops only (as DEEPSEEK): sglang tp 2 x dp 4, trtllm
    SM 100 dp 8 (the nvfp4-compressed all-gather), vllm tp 2 x dp 2."""
    for model, db, tp, dp, etp, eep, b, isl, osl, ttft, tpot in DP:
        assert step_latency(model, db, "context", tp, b, isl, osl, etp, eep, dp=dp) == ttft, (model, db)
        assert step_latency(model, db, "generation", tp, b, isl, osl, etp, eep, dp=dp) == tpot, (model, db)


@needs_data
def test_dsa_context_parallelism_against_the_spec():
    """families_dsa 7: the per-card module plus the mqa / top-k deltas and the
    two all-gathers (GLM sub-kernel tables, sglang 0.5.14), the floor-split
    add-norms, the CP dispatches; the two CP misses."""
    tree = open_tree()
    cases = [
        ("zai-org/GLM-5", H_SGL, 2, 1, 4096, 0, 94.62958049999999, 2.2787232, 9.60921, 697.2407037272624),
        ("zai-org/GLM-5", H_SGL, 2, 1, 2048, 1000, 44.24585716992188, 0.7571616000000001, 3.549569765625,
         380.70618017174723),
        ("zai-org/GLM-5.2", "b200_sxm/sglang/0.5.14", 4, 2, 3000, 0, 44.330488681640624, 1.1675688311688313,
         9.037034296875, 208.6429457318364),
        ("nvidia/GLM-5.2-NVFP4", "gb200/sglang/0.5.14", 8, 3, 5000, 100, 96.50625671691893, 1.3344364800000001,
         23.00878169433594, 255.6444516468048),
    ]  # fmt: skip
    for model, db, cp, b, isl, prefix, attention, norm, dispatch, ttft in cases:
        ctx = step_context(tree, model, Database(*db.split("/")), True)
        res = ctx.run("context", 1, b, isl, 2, 1, cp, prefix=prefix, cp=cp)
        by = res.by_name
        assert (by["context_attention"], by["context_add_norm_1"], by["context_moe_pre_dispatch"]) == \
            (attention, norm, dispatch), (model, db, cp)  # fmt: skip
        assert res.total_ms == ttft, (model, db, cp)
    # decode at cp > 1: the DSA op is unchanged, the dispatches take the CP decode branch
    # (nothing before the experts, an all-reduce after)
    assert step_latency("zai-org/GLM-5", H_SGL, "generation", 1, 2, 4096, 70, 1, 2, cp=2) == 26.40474340014058
    assert step_latency("zai-org/GLM-5.2", "b200_sxm/sglang/0.5.14", "generation", 1, 8, 3000, 40, 1, 4,
                        cp=4) == 27.647498401014335  # fmt: skip
    with pytest.raises(ValueError, match=r"DSA CP: isl=20000 exceeds the collected sparse-kernel grid "
                                         r"\(max isl=16384\)"):  # fmt: skip
        step_latency("zai-org/GLM-5.2-FP8", H_SGL, "context", 1, 1, 20000, 2, 1, 2, cp=2)
    miss = (r"DSA CP modeling needs sparse tables \['mqa', 'topk_last', 'topk_flat'\] for DeepseekV32ForCausalLM "
            r"\(num_heads=128\); collect dsv32_mqa_logits/dsv32_topk first")
    with pytest.raises(ValueError, match=miss):
        step_latency(DSV32, H_SGL, "context", 1, 1, 4096, 2, 1, 2, cp=2)
    with pytest.raises(ValueError, match=r"not supported for model_family='DEEPSEEKV32' on backend='trtllm'"):
        step_latency(GLM52, B_TRT, "context", 1, 1, 1024, 2, 1, 2, cp=2)


@needs_data
def test_dsa_rust_serving_estimates_equal_the_spec():
    """The same aggregated spec points through the Rust `estimate_agg` (SQL),
    bit for bit: skip-indexer amortisation, bf16 overrides and the
    indexer-aware KV cache on the Rust code."""
    import aicsql

    ctx = aicsql.context()
    for model, db, parallel, b, isl, osl, ttft, tpot, memory in AGG:
        sql = f"SELECT estimate_agg('{model}', '{db}', '{parallel}', {b}, {isl}, {osl}) AS r"
        row = ctx.sql(sql).to_pylist()[0]["r"]
        assert (row["ttft_ms"], row["tpot_ms"], row["memory_gib"]) == (ttft, tpot, memory), (model, db, row)


@needs_data
def test_dsa_serving_estimates_against_the_spec():
    """families_dsa 8: aggregated estimates (cli_estimate agg in process): the
    mixed step separates context_attention, the KV cache carries the FP8
    indexer cache (132 bytes per token and layer) and a 2-byte rope part."""
    for model, db, parallel, b, isl, osl, ttft, tpot, memory in AGG:
        row = estimate_agg(model, db, parallel, b, isl, osl, on_miss="error")
        assert (row["ttft_ms"], row["tpot_ms"], row["memory_gib"]) == (ttft, tpot, memory), (model, db)
    tree = open_tree()
    ds = load_model(tree, DSV32)
    assert indexer_entry_bytes(128) == 132
    assert kv_bytes_per_sequence(ds, 8, 1, 1) == 61 * (512 + 128 + 132) == 47092
    glm = load_model(tree, "zai-org/GLM-5")
    assert kv_bytes_per_sequence(glm, 8, 2, 10) == 78 * 10 * (512 * 2 + 128 + 132)


@needs_data
def test_dsa_config_parsing():
    """families_dsa 1.3, 2.2, 2.3: the full-layer fraction and the per-op quant
    overrides of the shipped checkpoints."""
    tree = open_tree()
    expect = {
        # model: (w on sglang, DSA GEMMs bf16, shared GEMMs bf16, checkpoint gemm / kv)
        DSV32: (1.0, False, False, "fp8_block", "fp8"),
        "zai-org/GLM-5": (1.0, False, False, "bfloat16", "bfloat16"),
        "zai-org/GLM-5-FP8": (1.0, True, False, "fp8_block", "fp8"),  # layer norms named ...self_attn...
        "nvidia/GLM-5-NVFP4": (1.0, True, False, "nvfp4", "fp8"),
        "nvidia/GLM-5.1-NVFP4": (1.0, True, True, "nvfp4", "fp8"),
        "zai-org/GLM-5.2-FP8": (21 / 78, True, False, "fp8_block", "fp8"),
        GLM52: (21 / 78, True, True, "nvfp4", "fp8"),
    }
    for model, (w, attn_bf16, shared_bf16, gemm, kv) in expect.items():
        m = load_model(tree, model)
        assert m.family == "DEEPSEEKV32" and m.is_moe and m.distribution == "power_law_1.01", model
        got = (m.dsa.sglang_full_fraction, m.dsa.attention_unquantized, m.dsa.shared_experts_unquantized,
               m.quant.gemm, m.quant.kv)  # fmt: skip
        assert got == (w, attn_bf16, shared_bf16, gemm, kv), (model, got)
    # the lookups' dims are the architecture's constants, the SOL integer terms first
    system = _kernels(H_SGL).system
    q = GEMM_QUANTS["fp8_block"]
    sol = context_sol(system, DS, 1, 1024, 0, 16, KV_QUANTS["fp8"], FMHA_QUANTS["bfloat16"], q, False)
    assert sol == context_sol(system, "SomethingElse", 1, 1024, 0, 16, KV_QUANTS["fp8"], FMHA_QUANTS["bfloat16"], q,
                              False)  # an unknown architecture takes DeepSeek-V3.2's dims  # fmt: skip
    # trtllm and vllm never amortise; heads are H // tp (GLM 64 // 8)
    ctx = step_context(tree, "zai-org/GLM-5.2", Database(*B_TRT.split("/")), True)
    _, _, ops = ctx.layout("context", 8, 1, 8)
    attention = [op for op in ops if op.name == "context_attention"][0]
    assert (attention.w, attention.heads) == (1.0, 8)
    assert [op.name for op in ops] == [
        "context_embedding", "context_add_norm_1", "context_attention", "context_add_norm_2",
        "context_shared_gate_up_gemm", "context_shared_act_gate", "context_shared_ffn2_gemm", "context_router_gemm",
        "context_moe_pre_dispatch", "context_moe", "context_moe_post_dispatch", "context_logits_gemm", "context_p2p",
    ]  # fmt: skip
