"""DEEPSEEKV4 (DeepSeek-V4) on the Python path beyond the goldens
(docs/spec/families_dsv4.md; the golden rows are test_spec_families.py's
``test_every_dsv4_golden_row``).

The expected numbers were computed by the spec itself (aiconfigurator
v0.11.0, Python engine step, run in-process on the merged data tree:
/work/diag/dsv4/offgolden_spec*.py, cp through scripts/spec_cp_points.py's
ModelConfig wrapper) and are compared bit for bit: TTFT (context) / TPOT
(generation) of 63 static steps -- DeepSeek-V4-Flash at tp 1 - 16, moe_tp 2,
attention dp, pp 2, context parallelism 2 / 4 / 8 (with a prefix), long
prompts, five databases (b200_sxm / gb200 / b300_sxm sglang 0.5.14,
b200_sxm vllm 0.24.0, b200_sxm trtllm 1.3.0rc23), DeepSeek-V4-Pro (HCA
layers first) and sgl-project/DeepSeek-V4-Flash-FP8 (fp8_block experts).
Plus the table behaviours of sections 3 - 4 (last wins, head collisions,
calibration), the quant rules of 1.2, the op lists of 2 and the misses of
4.6 / 5.
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

from aicsql.spec import data_dirs, engine_step, open_tree
from aicsql.spec.data import Database
from aicsql.spec.kernels import kernels_for
from aicsql.spec.kernels.dsv4 import topk_delta
from aicsql.spec.step import step_context
from aicsql.spec.step.engine import StepMiss
from aicsql.spec.step.families.deepseek_v4 import attention_groups

needs_data = require(have_data(open_tree), f"no perf data under {data_dirs()} (run the fetch step)")

FLASH = "deepseek-ai/DeepSeek-V4-Flash"
PRO = "deepseek-ai/DeepSeek-V4-Pro"
FLASH_FP8 = "sgl-project/DeepSeek-V4-Flash-FP8"
B200 = "b200_sxm/sglang/0.5.14"

# (model, db, phase, tp, moe_tp, moe_ep, batch, isl, osl, prefix, dp, pp, cp, the spec's TTFT / TPOT)
SPEC_STEPS = [
    (FLASH, 'b200_sxm/sglang/0.5.14', 'context', 4, 1, 4, 2, 2000, 40, 0, 1, 1, 1, 76.30708087043564),
    (FLASH, 'b200_sxm/sglang/0.5.14', 'generation', 4, 1, 4, 2, 2000, 40, 0, 1, 1, 1, 6.327926923907579),
    (FLASH, 'b200_sxm/sglang/0.5.14', 'context', 2, 1, 2, 3, 3000, 70, 0, 1, 1, 1, 180.79946908858918),
    (FLASH, 'b200_sxm/sglang/0.5.14', 'generation', 2, 1, 2, 3, 3000, 70, 0, 1, 1, 1, 7.461828217812581),
    (FLASH, 'b200_sxm/sglang/0.5.14', 'context', 1, 1, 1, 1, 500, 10, 0, 1, 1, 1, 43.53449876571006),
    (FLASH, 'b200_sxm/sglang/0.5.14', 'generation', 1, 1, 1, 1, 500, 10, 0, 1, 1, 1, 6.6287358890204455),
    (FLASH, 'b200_sxm/sglang/0.5.14', 'context', 8, 1, 8, 5, 20000, 100, 0, 1, 1, 1, 1404.268010897119),
    (FLASH, 'b200_sxm/sglang/0.5.14', 'generation', 8, 1, 8, 5, 20000, 100, 0, 1, 1, 1, 6.142338359484264),
    (FLASH, 'b200_sxm/sglang/0.5.14', 'context', 8, 1, 8, 64, 128, 300, 0, 1, 1, 1, 113.54144054846161),
    (FLASH, 'b200_sxm/sglang/0.5.14', 'generation', 8, 1, 8, 64, 128, 300, 0, 1, 1, 1, 8.791364643227409),
    (FLASH, 'b200_sxm/sglang/0.5.14', 'context', 8, 2, 4, 4, 1024, 40, 0, 1, 1, 1, 66.4471557983063),
    (FLASH, 'b200_sxm/sglang/0.5.14', 'generation', 8, 2, 4, 4, 1024, 40, 0, 1, 1, 1, 5.900792220435169),
    (FLASH, 'b200_sxm/sglang/0.5.14', 'context', 8, 1, 8, 2, 2048, 40, 512, 1, 1, 1, 54.85039720401608),
    (FLASH, 'b200_sxm/sglang/0.5.14', 'generation', 8, 1, 8, 2, 2048, 40, 0, 1, 1, 1, 5.75434783139216),
    (FLASH, 'b200_sxm/sglang/0.5.14', 'context', 4, 1, 4, 1, 100000, 3000, 0, 1, 1, 1, 3011.783166784527),
    (FLASH, 'b200_sxm/sglang/0.5.14', 'generation', 4, 1, 4, 1, 100000, 3000, 0, 1, 1, 1, 6.254708096038877),
    (FLASH, 'gb200/sglang/0.5.14', 'context', 8, 1, 8, 4, 1500, 64, 0, 1, 1, 1, 81.4058306483145),
    (FLASH, 'gb200/sglang/0.5.14', 'generation', 8, 1, 8, 4, 1500, 64, 0, 1, 1, 1, 5.813441059577099),
    (FLASH, 'gb200/sglang/0.5.14', 'context', 4, 1, 4, 16, 700, 33, 0, 1, 1, 1, 158.27081490565098),
    (FLASH, 'gb200/sglang/0.5.14', 'generation', 4, 1, 4, 16, 700, 33, 0, 1, 1, 1, 8.523994093948284),
    (FLASH, 'b300_sxm/sglang/0.5.14', 'context', 8, 1, 8, 2, 8192, 50, 0, 1, 1, 1, 214.6237266629103),
    (FLASH, 'b300_sxm/sglang/0.5.14', 'generation', 8, 1, 8, 2, 8192, 50, 0, 1, 1, 1, 5.440215702494143),
    (FLASH, 'b200_sxm/vllm/0.24.0', 'context', 8, 1, 8, 2, 2000, 40, 0, 1, 1, 1, 73.13625439819168),
    (FLASH, 'b200_sxm/vllm/0.24.0', 'generation', 8, 1, 8, 2, 2000, 40, 0, 1, 1, 1, 23.050025835612207),
    (FLASH, 'b200_sxm/vllm/0.24.0', 'context', 4, 1, 4, 16, 1024, 200, 0, 1, 1, 1, 242.08541498934864),
    (FLASH, 'b200_sxm/vllm/0.24.0', 'generation', 4, 1, 4, 16, 1024, 200, 0, 1, 1, 1, 19.712786034759826),
    (FLASH, 'b200_sxm/trtllm/1.3.0rc23', 'context', 8, 1, 8, 1, 4096, 64, 0, 1, 1, 1, 61.97838809034792),
    (FLASH, 'b200_sxm/trtllm/1.3.0rc23', 'generation', 8, 1, 8, 1, 4096, 64, 0, 1, 1, 1, 6.454217618933025),
    (FLASH, 'b200_sxm/trtllm/1.3.0rc23', 'context', 2, 1, 2, 8, 1000, 20, 0, 1, 1, 1, 152.58617887326824),
    (FLASH, 'b200_sxm/trtllm/1.3.0rc23', 'generation', 2, 1, 2, 8, 1000, 20, 0, 1, 1, 1, 9.194339772837598),
    (PRO, 'b200_sxm/sglang/0.5.14', 'context', 8, 1, 8, 2, 3000, 40, 0, 1, 1, 1, 212.28146803949863),
    (PRO, 'b200_sxm/sglang/0.5.14', 'generation', 8, 1, 8, 2, 3000, 40, 0, 1, 1, 1, 9.777636296154217),
    (PRO, 'b300_sxm/sglang/0.5.14', 'context', 4, 1, 4, 1, 1024, 20, 0, 1, 1, 1, 75.44008781348369),
    (PRO, 'b300_sxm/sglang/0.5.14', 'generation', 4, 1, 4, 1, 1024, 20, 0, 1, 1, 1, 9.044969800129815),
    (FLASH_FP8, 'b200_sxm/sglang/0.5.14', 'context', 8, 1, 8, 4, 1024, 40, 0, 1, 1, 1, 84.6925037368439),
    (FLASH_FP8, 'b200_sxm/sglang/0.5.14', 'generation', 8, 1, 8, 4, 1024, 40, 0, 1, 1, 1, 7.46324032147887),
    (FLASH_FP8, 'b200_sxm/vllm/0.24.0', 'context', 4, 1, 4, 2, 2048, 30, 0, 1, 1, 1, 102.04028245305993),
    (FLASH_FP8, 'b200_sxm/vllm/0.24.0', 'generation', 4, 1, 4, 2, 2048, 30, 0, 1, 1, 1, 23.863056174894528),
    (FLASH, 'b200_sxm/sglang/0.5.14', 'context', 2, 1, 8, 4, 1024, 40, 0, 4, 1, 1, 108.04986543897456),
    (FLASH, 'b200_sxm/sglang/0.5.14', 'generation', 2, 1, 8, 4, 1024, 40, 0, 4, 1, 1, 10.077060730595807),
    (FLASH, 'b200_sxm/sglang/0.5.14', 'context', 1, 1, 8, 2, 2048, 40, 0, 8, 1, 1, 134.7982692346383),
    (FLASH, 'b200_sxm/sglang/0.5.14', 'generation', 1, 1, 8, 2, 2048, 40, 0, 8, 1, 1, 9.17278897325593),
    (FLASH, 'b200_sxm/vllm/0.24.0', 'context', 2, 1, 8, 2, 1500, 40, 0, 4, 1, 1, 96.1382408171218),
    (FLASH, 'b200_sxm/vllm/0.24.0', 'generation', 2, 1, 8, 2, 1500, 40, 0, 4, 1, 1, 24.419225557585673),
    (FLASH, 'b200_sxm/trtllm/1.3.0rc23', 'context', 1, 1, 8, 2, 1024, 40, 0, 8, 1, 1, 80.85862423718466),
    (FLASH, 'b200_sxm/trtllm/1.3.0rc23', 'generation', 1, 1, 8, 2, 1024, 40, 0, 8, 1, 1, 9.978028814658096),
    (FLASH, 'b200_sxm/sglang/0.5.14', 'context', 4, 1, 4, 2, 2000, 40, 0, 1, 2, 1, 76.64476087043565),
    (FLASH, 'b200_sxm/sglang/0.5.14', 'generation', 4, 1, 4, 2, 2000, 40, 0, 1, 2, 1, 6.338090763907579),
    (FLASH, 'b200_sxm/sglang/0.5.14', 'context', 16, 1, 16, 2, 2000, 40, 0, 1, 1, 1, 187.2082842556819),
    (FLASH, 'b200_sxm/sglang/0.5.14', 'generation', 16, 1, 16, 2, 2000, 40, 0, 1, 1, 1, 9.601659653152968),
    (FLASH, 'b200_sxm/sglang/0.5.14', 'context', 1, 1, 2, 1, 4096, 20, 0, 1, 1, 2, 59.629499164599025),
    (FLASH, 'b200_sxm/sglang/0.5.14', 'generation', 1, 1, 2, 1, 4096, 20, 0, 1, 1, 2, 7.141059700398924),
    (FLASH, 'b200_sxm/sglang/0.5.14', 'context', 1, 1, 4, 2, 8192, 20, 0, 1, 1, 4, 109.26445411807416),
    (FLASH, 'b200_sxm/sglang/0.5.14', 'generation', 1, 1, 4, 2, 8192, 20, 0, 1, 1, 4, 6.248964506416506),
    (FLASH, 'b200_sxm/sglang/0.5.14', 'context', 1, 1, 8, 1, 12000, 20, 0, 1, 1, 8, 60.42441087436618),
    (FLASH, 'b200_sxm/sglang/0.5.14', 'generation', 1, 1, 8, 1, 12000, 20, 0, 1, 1, 8, 6.556712768357756),
    (FLASH, 'b200_sxm/sglang/0.5.14', 'context', 1, 1, 4, 1, 3000, 20, 1000, 1, 1, 4, 30.74138709688967),
    (FLASH, 'b200_sxm/sglang/0.5.14', 'generation', 1, 1, 4, 1, 3000, 20, 0, 1, 1, 4, 7.336066905332092),
    (FLASH, 'gb200/sglang/0.5.14', 'context', 1, 1, 4, 4, 4096, 20, 0, 1, 1, 4, 95.96171603168439),
    (FLASH, 'gb200/sglang/0.5.14', 'generation', 1, 1, 4, 4, 4096, 20, 0, 1, 1, 4, 7.48607427695751),
    (FLASH, 'b200_sxm/sglang/0.5.14', 'generation', 1, 1, 8, 1, 20000, 20, 0, 1, 1, 8, 6.687108537889006),
    (PRO, 'b200_sxm/sglang/0.5.14', 'context', 1, 1, 8, 1, 8192, 20, 0, 1, 1, 8, 175.69622465352737),
    (PRO, 'b200_sxm/sglang/0.5.14', 'generation', 1, 1, 8, 1, 8192, 20, 0, 1, 1, 8, 13.807614378399352),
]


def _run(model, db, phase, tp, moe_tp, moe_ep, batch, isl, osl, prefix=0, dp=1, pp=1, cp=1):
    tree = open_tree()
    ctx = step_context(tree, model, tree.resolve(db), True)
    return ctx, ctx.run(phase, tp, batch, isl, osl, moe_tp, moe_ep, prefix=prefix, dp=dp, pp=pp, cp=cp)


@needs_data
@pytest.mark.parametrize("case", SPEC_STEPS, ids=lambda c: f"{c[0].split('/')[1]}-{c[1]}-{c[2]}-tp{c[3]}-b{c[6]}-"
                                                         f"isl{c[7]}-dp{c[10]}-pp{c[11]}-cp{c[12]}")  # fmt: skip
def test_spec_steps(case):
    *args, expected = case
    _, result = _run(*args)
    assert result.total_ms == expected


@needs_data
def test_golden_walkthrough_values():
    """families_dsv4 8.2 - 8.4: the mHC values are the legacy 0.5.10 rows, the
    CSA util-hold at B 8 x isl 4096, the decode CSA less its v2 delta."""
    ctx = engine_step(FLASH, B200, "context", 8, 8, 4096, 128, 1, 8)
    rows = {(r["op_name"], r["op_index"]): r for r in ctx["rows"] if r["row_kind"] == "op"}
    assert rows[("context_mhc_pre", 1)]["total_ms"] == 1.2683 * 43
    csa = rows[("context_attention", 3)]
    assert csa["interp_path"] == "grid_util_hold" and csa["total_ms"] == 6.202520249891037 * 21.0
    assert csa["lookup_table"] == "query_context_deepseek_v4_attention_module"
    assert ctx["total_ms"] == 412.2250552538881
    gen = engine_step(FLASH, B200, "generation", 8, 8, 4096, 128, 1, 8)
    step1 = [r for r in gen["rows"] if r["row_kind"] == "op" and r["gen_step_index"] == 32]
    assert step1[3]["op_name"] == "generation_attention" and step1[3]["interp_path"] == "grid_interpolation"
    assert step1[3]["total_ms"] == (0.137525 - 0.0009678593750000001) * 21.0
    assert gen["total_ms"] == 7.93315317254213


@needs_data
def test_tables_are_last_wins():
    """families_dsv4 3.2 - 3.4: the union's *last* source wins every shared key."""
    tables = kernels_for(open_tree(), Database("b200_sxm", "sglang", "0.5.14")).dsv4
    mhc = tables.mhc_table()
    assert mhc["pre"][4][4096][1024] == 0.0637  # sglang/0.5.10; the 0.5.14 file says 0.0430
    assert mhc["pre"][4][4096][8] == 0.0207  # 0.5.14: 0.0187
    ctx = tables.context_table()["bfloat16"]["fp8"]["fp8_block"]
    assert ctx[16][4][0][1024][1] == 0.3308  # DeepSeek-V4-Pro tp 8 (0.5.14), not Flash tp 4 (0.2994)
    assert ctx[64][4][0][1024][1] == 0.3478  # the 0.5.10 Flash row collected at tp 8, stored as 64 heads
    assert ctx[8][4][0][1024][1] == 0.2707
    calib = tables.calibration()
    assert len(calib["v1"]) == 2391 and len(calib["v2"]) == 200
    assert calib["v1"][(0, 6144, 1)] == 0.045535000000000006  # DeepSeek-V4-Pro's (128-head) rows
    assert topk_delta(calib["v2"], 4128, 1, 8) == 0.0009678593750000001
    assert topk_delta(calib["v2"], 100000, 1, 1) == 0.030133249511718748
    assert topk_delta(None, 4128, 1, 8) == 0.0
    # vllm 0.24.0 ships no calibration: the CSA values are used as looked up
    assert kernels_for(open_tree(), Database("b200_sxm", "vllm", "0.24.0")).dsv4.calibration() is None


@needs_data
def test_op_lists_and_weights():
    """families_dsv4 1.4, 2.1, 2.2, 4.1, 4.2: attention groups in first-appearance
    order with SWA counted as HCA; op names, kinds and counts; weights."""
    tree = open_tree()
    flash = step_context(tree, FLASH, tree.resolve(B200), True)
    pro = step_context(tree, PRO, tree.resolve(B200), True)
    assert attention_groups(flash.model.dsv4.compress_ratios) == [(4, 21), (128, 22)]
    assert attention_groups(pro.model.dsv4.compress_ratios) == [(128, 31), (4, 30)]
    assert attention_groups((4, 0, 4)) == [(4, 2), (128, 1)]
    _, _, ops = flash.layout("context", 8, 1, 8)
    assert [(op.name, op.kind, op.count) for op in ops] == [
        ("context_embedding", "Embedding", 1), ("context_mhc_pre", "DeepSeekV4MHCModule", 43),
        ("context_attn_norm", "ElementWise", 43), ("context_attention", "ContextDeepSeekV4AttentionModule", 21.0),
        ("context_attention", "ContextDeepSeekV4AttentionModule", 22.0),
        ("context_mhc_post", "DeepSeekV4MHCModule", 43), ("context_ffn_norm", "ElementWise", 43),
        ("context_shared_gate_up_gemm", "GEMM", 43), ("context_shared_act_gate", "ElementWise", 43),
        ("context_shared_ffn2_gemm", "GEMM", 43), ("context_router_gemm", "GEMM", 43),
        ("context_moe_pre_dispatch", "MoEDispatch", 43), ("context_moe", "MoE", 43),
        ("context_moe_post_dispatch", "MoEDispatch", 43), ("context_logits_gemm", "GEMM", 1),
        ("context_p2p", "P2P", 0)]  # fmt: skip
    assert [op.weights() for op in ops[:5]] == [1059061760, 67637796, 0.0, 892244640.0, 605553344.0]
    assert flash.weights(ops) == 20364048808.0
    _, _, gen = flash.layout("generation", 8, 1, 8)
    assert [op.name for op in gen] == [
        "generation_embedding", "generation_mhc_pre", "generation_attn_norm", "generation_attention",
        "generation_attention", "generation_mhc_post", "generation_ffn_norm", "generation_moe_overlap",
        "generation_logits_gemm", "generation_p2p"]  # fmt: skip
    overlap = gen[7]
    assert [op.name for op in overlap.group_a] == ["generation_router_gemm", "generation_moe_pre_dispatch",
                                                   "generation_moe", "generation_moe_post_dispatch"]  # fmt: skip
    assert {(op.attn_cp, op.is_context) for op in overlap.group_a if op.kind == "MoEDispatch"} == {(1, True)}
    _, _, ops = pro.layout("context", 8, 1, 8)
    assert [(op.g.ratio, op.count) for op in ops if op.kind == "ContextDeepSeekV4AttentionModule"] == [(128, 31.0),
                                                                                                       (4, 30.0)]


@needs_data
def test_quant_modes():
    """families_dsv4 1.2: fmha bfloat16 and kv fp8 always; FP4 experts are
    w4a8_mxfp4_mxfp8, re-labelled on sglang per GPU generation."""
    tree = open_tree()

    def quants(model, db, phase="context"):
        return step_context(tree, model, tree.resolve(db), True).quants(phase).as_dict()

    assert quants(FLASH, B200) == {"gemm": "fp8_block", "moe": "w4a8_mxfp4_mxfp8_trtllm", "kvcache": "fp8",
                                   "fmha": "bfloat16", "comm": "half"}  # fmt: skip
    assert quants(FLASH, "h200_sxm/sglang/0.5.14", "generation")["moe"] == "w4a16_mxfp4_cutlass"
    assert quants(FLASH, "b200_sxm/vllm/0.24.0")["moe"] == "w4a8_mxfp4_mxfp8"
    assert quants(FLASH, "b200_sxm/trtllm/1.3.0rc23")["moe"] == "w4a8_mxfp4_mxfp8"
    assert quants(FLASH_FP8, B200)["moe"] == "fp8_block"
    assert quants("nvidia/DeepSeek-V4-Flash-NVFP4", B200) == {
        "gemm": "nvfp4", "moe": "w4a8_mxfp4_mxfp8_trtllm", "kvcache": "fp8", "fmha": "bfloat16", "comm": "half"}


@needs_data
def test_misses_and_refusals():
    """families_dsv4 4.6, 5: the first op that misses names the table and the spec's reason."""
    with pytest.raises(ValueError, match=r"context_attention: perf data not available in dsv4_csa_context_module_perf:"
                                         r".* No DeepSeek-V4 context attention silicon data for num_heads=8, "
                                         r"compress_ratio=4, loaded cr keys=\[128\]\."):  # fmt: skip
        engine_step(FLASH, "rtx_pro_6000_server/sglang/0.5.14", "context", 8, 2, 2000, 40, 1, 8)
    with pytest.raises(ValueError, match=r"context_mhc_pre: perf data not available in mhc_module_perf: .*"
                                         r"DeepSeek-V4 mHC module data not loaded for system='a100_sxm', "
                                         r"backend='sglang', version='0.5.12'\."):  # fmt: skip
        engine_step(FLASH, "a100_sxm/sglang/0.5.12", "context", 8, 2, 2000, 40, 1, 8)
    with pytest.raises(ValueError, match=r"context_attention: .*DeepSeek-V4 context attention module data not loaded "
                                         r"for system='h200_sxm', backend='trtllm', version='1.3.0rc20'\."):  # fmt: skip
        engine_step(FLASH, "h200_sxm/trtllm/1.3.0rc20", "context", 8, 2, 2000, 40, 1, 8)
    with pytest.raises(ValueError, match=r"generation_attention: .*generation attention module data not loaded"):
        engine_step(FLASH, "h200_sxm/trtllm/1.3.0rc20", "generation", 8, 2, 2000, 40, 1, 8)
    with pytest.raises(ValueError, match=r"requested slice \('bfloat16', 'fp8', 'nvfp4'\) is not available"):
        engine_step("nvidia/DeepSeek-V4-Flash-NVFP4", B200, "context", 8, 2, 2000, 40, 1, 8)
    with pytest.raises(ValueError, match=r"generation_moe_overlap: perf data not available in moe_perf"):
        engine_step(FLASH, "h200_sxm/sglang/0.5.14", "generation", 8, 2, 2000, 40, 1, 8)
    with pytest.raises(StepMiss, match=r"DSA CP: isl=20000 exceeds the collected sparse-kernel grid "
                                         r"\(max isl=16384\)"):  # fmt: skip
        _run(FLASH, B200, "context", 1, 1, 8, 1, 20000, 20, cp=8)
    # sglang CP needs tp = dp = 1; trtllm / vllm have none
    with pytest.raises(ValueError, match=r"sglang CP requires tp_size=1"):
        _run(FLASH, B200, "context", 2, 1, 4, 1, 4096, 20, cp=2)
    with pytest.raises(ValueError, match=r"context parallelism \(cp = 2\) is not supported"):
        _run(FLASH, "b200_sxm/vllm/0.24.0", "context", 1, 1, 2, 1, 4096, 20, cp=2)
    with pytest.raises(ValueError, match=r"moe_tp \* moe_ep = 2 \* 2 != tp = 8"):
        engine_step(FLASH, B200, "context", 8, 1, 1024, 128, 2, 2)


# The spec's cli_estimate (agg: full precision; disagg: its 3 decimals) for DeepSeek-V4
# (/work/diag/dsv4/serving_points.json through scripts/spec_points.py):
# (model, db, parallel label, batch, isl, osl, ttft, tpot, tokens/s/gpu, memory GiB)
SPEC_AGG = [
    (FLASH, B200, "tp8pp1dp1etp1ep8", 8, 1024, 128, 60.43642839523007, 7.365728671656257, 126.8353691514768,
     24.64838220030069),
    (FLASH, B200, "tp4pp1dp1etp1ep4", 16, 4096, 256, 227.65401472149165, 12.762846260479371, 292.53840949719955,
     44.97441001683474),
    (FLASH, "b200_sxm/vllm/0.24.0", "tp8pp1dp1etp1ep8", 4, 2048, 128, 125.31186343290312, 20.051138743411165,
     23.766691331847667, 24.553617872297764),
    (FLASH, "b200_sxm/trtllm/1.3.0rc23", "tp8pp1dp1etp1ep8", 8, 1024, 128, 72.27482092030242, 7.788994267467259,
     118.69261915599046, 29.4804824963212),
    (FLASH, "gb200/sglang/0.5.14", "tp2pp1dp2etp1ep4", 16, 2048, 256, 155.25678405233555, 13.973410626862421,
     549.7118305222658, 45.384394116699696),
    (PRO, B200, "tp8pp1dp1etp1ep8", 64, 8192, 1024, 1190.8671911207111, 37.437402088059315, 209.2199000754965,
     121.49223959892988),
    (FLASH, B200, "tp1pp1dp1etp1ep1", 64, 8192, 1024, 716.2408544445121, 30.561180400115656, 2062.7504470838076,
     162.99990369826554),
]  # fmt: skip


@needs_data
@pytest.mark.parametrize("case", SPEC_AGG, ids=lambda c: f"{c[0].split('/')[1]}-{c[1]}-{c[2]}-b{c[3]}-isl{c[4]}")
def test_spec_agg_estimates(case):
    """families_dsv4 7: the serving memory model with the DSv4 KV cache (per
    layer, window-capped + compressed + state, not divided by tp)."""
    from aicsql.spec.serving import estimate_agg

    model, db, parallel, batch, isl, osl, ttft, tpot, per_gpu, memory = case
    got = estimate_agg(model, db, parallel, batch, isl, osl, on_miss="error")
    assert (got["ttft_ms"], got["tpot_ms"], got["tokens_per_s_per_gpu"], got["memory_gib"]) == (ttft, tpot, per_gpu,
                                                                                                 memory)  # fmt: skip
    assert got["moe"] == ("w4a8_mxfp4_mxfp8" if "/sglang/" not in db else "w4a8_mxfp4_mxfp8_trtllm")


@needs_data
def test_spec_disagg_estimates():
    from aicsql.spec.serving import estimate_disagg

    got = estimate_disagg(FLASH, B200, "tp8pp1dp1etp1ep8", 1, 1, "tp8pp1dp1etp1ep8", 32, 1, 2048, 256,
                          on_miss="error")  # fmt: skip
    assert (got["ttft_ms"], got["tpot_ms"], got["tokens_per_s_per_gpu"]) == (75.816, 8.847, 208.788)
    got = estimate_disagg(FLASH, "b200_sxm/vllm/0.24.0", "tp4pp1dp1etp1ep4", 2, 2, "tp8pp1dp1etp1ep8", 16, 1, 1024,
                          128, on_miss="error")  # fmt: skip
    assert (got["ttft_ms"], got["tpot_ms"], got["tokens_per_s_per_gpu"]) == (108.644, 20.307, 45.661)


@needs_data
def test_kv_cache_size():
    """families_dsv4 7.1: one sequence's KV bytes (Flash: 11,345,920 bytes of fixed state)."""
    from aicsql.spec.serving.kvcache import kv_bytes_per_sequence, kv_max_tokens

    tree = open_tree()
    model = step_context(tree, FLASH, tree.resolve(B200), True).model
    assert [kv_bytes_per_sequence(model, 8, 1, s) for s in (0, 1, 1025, 4224)] == [11345920.0, 11367936.0,
                                                                                     17342464.0, 27275264.0]
    assert kv_bytes_per_sequence(model, 1, 1, 1025) == 17342464.0  # not divided by tp
    n = kv_max_tokens(model, 8, 1, 1e9)
    assert kv_bytes_per_sequence(model, 8, 1, n) <= 1e9 < kv_bytes_per_sequence(model, 8, 1, n + 1)
