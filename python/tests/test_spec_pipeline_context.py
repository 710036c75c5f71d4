"""Pipeline (pp > 1) and context (cp > 1) parallelism on the Python path.

pp: what aiconfigurator v0.11.0 changes, recomputed from the spec's rules --
the ``*_p2p`` op (``count = pp - 1``; ``(ceil(x / seq_split) * h * 2 /
inter_node_bw + p2p_latency) * 1000`` per hand-off), every layer kept in the
step, the weights (not the KV cache) divided by pp, ``run_agg``'s ``pp * dp``
throughput / concurrency scale and ``tp * pp * dp * cp`` GPUs, ``run_static``'s
requests/s times pp, the OOM message -- for a dense and a MoE model, agg and
disagg. The spec-computed pp goldens (``tests/goldens/
serving_pp_goldens.parquet``, 42 ``cli_estimate`` points) are priced in
test_spec_serving.py next to the serving goldens.

cp: the refusals the spec makes (cp > 1 off sglang; sglang CP with tp > 1
or attention dp > 1), each naming its reason, and the step's CP ops
recomputed from the tables (the numbers against the spec are the 680 search
candidates at cp > 1 of test_spec_search.py).
"""

from __future__ import annotations

import json
import math

import pytest

from aicsql.spec import open_tree
from aicsql.spec.kernels import COMM_QUANTS, kernels_for
from aicsql.spec.serving import estimate_agg, estimate_disagg, estimate_memory, numpy_round3
from aicsql.spec.step import engine_step, step_latency

from _support import have_data, require

needs_data = require(have_data(open_tree), "the perf data are missing")

DENSE = "meta-llama/Meta-Llama-3.1-8B"
MOE = "Qwen/Qwen3-30B-A3B"
HALF = COMM_QUANTS["half"]

# (model, db, tp, moe_tp, moe_ep, hidden size)
PP_CASES = [
    pytest.param(DENSE, "h200_sxm/vllm/0.19.0", 2, None, None, 4096, id="llama-8b-vllm-tp2"),
    pytest.param(MOE, "h200_sxm/sglang/0.5.14", 2, 1, 2, 2048, id="qwen3-30b-a3b-sglang-tp2"),
]


def _system(db: str):
    tree = open_tree()
    return kernels_for(tree, tree.resolve(db, "", "latest"), True).system


def _label(tp, pp, moe_tp, moe_ep, dp=1, cp=1) -> str:
    return f"tp{tp}pp{pp}dp{dp}etp{moe_tp}ep{moe_ep}" + (f"cp{cp}" if cp > 1 else "")


def _ops(step: dict, sample=None) -> dict:
    """op name -> row of one step (generation: the sample at gen_step_index `sample`)."""
    return {r["op_name"]: r for r in step["rows"] if r["row_kind"] == "op" and r["gen_step_index"] == sample}


def _p2p_ms(system, x, h, pp, split=1) -> float:
    """The spec's P2P op: (pp - 1) hand-offs of ceil(x / split) * h 2-byte values."""
    size = -(-x // split) * h
    return (size * 2 / system.inter_node_bw + system.p2p_latency) * 1000 * (pp - 1)


# ---- pp: the step --------------------------------------------------------------------------------


@needs_data
@pytest.mark.parametrize("model, db, tp, moe_tp, moe_ep, h", PP_CASES)
@pytest.mark.parametrize("pp", [2, 4])
def test_pp_step_adds_the_p2p_hand_offs(model, db, tp, moe_tp, moe_ep, h, pp):
    system = _system(db)
    batch, isl, osl = 4, 1024, 100
    one = engine_step(model, db, "context", tp, batch, isl, osl, moe_tp, moe_ep)
    ctx = engine_step(model, db, "context", tp, batch, isl, osl, moe_tp, moe_ep, pp=pp)
    ops1, ops = _ops(one), _ops(ctx)
    assert list(ops) == list(ops1)  # every layer stays in the step: the same ops, the same counts
    assert [r["count"] for r in ops.values() if r["op_name"] != "context_p2p"] == \
        [r["count"] for r in ops1.values() if r["op_name"] != "context_p2p"]  # fmt: skip
    p2p = ops["context_p2p"]
    assert p2p["count"] == pp - 1 and ops1["context_p2p"]["total_ms"] == 0.0
    assert p2p["total_ms"] == _p2p_ms(system, batch * isl, h, pp)
    for name, row in ops.items():
        if name != "context_p2p":
            assert row["total_ms"] == ops1[name]["total_ms"], name
    # the P2P op is the last name the step sums
    assert ctx["total_ms"] == one["total_ms"] + p2p["total_ms"]

    one = engine_step(model, db, "generation", tp, batch, isl, osl, moe_tp, moe_ep)
    gen = engine_step(model, db, "generation", tp, batch, isl, osl, moe_tp, moe_ep, pp=pp)
    p2p = _ops(gen, 0)["generation_p2p"]
    assert p2p["count"] == (pp - 1) * 1.0
    assert p2p["total_ms"] == _p2p_ms(system, batch, h, pp)  # decode: x = batch tokens
    hand_offs = 0.0
    for i in range(0, osl - 1, 32):
        hand_offs += _ops(gen, i)["generation_p2p"]["total_ms"] * min(32, osl - 1 - i)
    assert gen["phase_latency_ms"] == one["phase_latency_ms"] + hand_offs
    assert step_latency(model, db, "generation", tp, batch, isl, osl, moe_tp, moe_ep, pp=pp) == gen["total_ms"]


# ---- pp: the serving estimates ---------------------------------------------------------------------


@needs_data
@pytest.mark.parametrize("model, db, tp, moe_tp, moe_ep, h", PP_CASES)
def test_pp_agg(model, db, tp, moe_tp, moe_ep, h):
    system = _system(db)
    b, isl, osl = 16, 1024, 128
    one = estimate_agg(model, db, _label(tp, 1, moe_tp, moe_ep), b, isl, osl, on_miss="error")
    e = estimate_agg(model, db, _label(tp, 2, moe_tp, moe_ep), b, isl, osl, on_miss="error")
    assert e["reason"] is None and e["parallel"] == _label(tp, 2, moe_tp, moe_ep)
    assert (e["tp"], e["pp"], e["dp"], e["cp"]) == (tp, 2, 1, 1)
    assert e["num_total_gpus"] == tp * 2 and e["concurrency"] == b * 2 and e["global_bs"] == b
    assert e["tokens_per_s_per_gpu"] == e["tokens_per_s"] / 2 / tp / 1 / 1
    assert e["seq_per_s"] == e["request_rate"] == e["tokens_per_s"] / (osl - 1)
    assert e["seq_per_s_per_gpu"] == e["seq_per_s"] / 2 / tp / 1 / 1
    # a decode-only step of b tokens pays one hand-off of b tokens (the last op name)
    assert one["num_genonly_steps"] > 0
    assert e["genonly_step_ms"] == one["genonly_step_ms"] + _p2p_ms(system, b, h, 2)
    # the mixed step's pass 1 (batch 1, ctx + gen tokens) hands its tokens off too
    gen_tokens = b - 1  # ctx_tokens = isl: one context request, the rest decode
    assert e["mix_step_ms"] == pytest.approx(one["mix_step_ms"] + _p2p_ms(system, isl + gen_tokens, h, 2), rel=1e-13)

    # memory: the weights split over the stages, the KV cache does not
    m1 = estimate_memory(model, db, _label(tp, 1, moe_tp, moe_ep), b, isl, osl)
    m = estimate_memory(model, db, _label(tp, 2, moe_tp, moe_ep), b, isl, osl)
    assert m["weights_gib"] == m1["weights_gib"] / 2
    for part in ("activations_gib", "kvcache_gib", "nccl_gib", "others_gib"):
        assert m[part] == m1[part], part
    assert m["total_gib"] == e["memory_gib"] < one["memory_gib"]
    # an integer tp still means pp = 1
    assert estimate_agg(model, db, tp, b, isl, osl, None, None, moe_tp, moe_ep) == one


@needs_data
@pytest.mark.parametrize("model, db, tp, moe_tp, moe_ep, h", PP_CASES)
def test_pp_disagg(model, db, tp, moe_tp, moe_ep, h):
    isl, osl = 1024, 128
    p_bs, p_workers, d_bs, d_workers = 1, 2, 32, 1
    p1 = estimate_disagg(model, db, _label(tp, 1, moe_tp, moe_ep), p_bs, p_workers, _label(tp, 1, moe_tp, moe_ep),
                         d_bs, d_workers, isl, osl, on_miss="error")  # fmt: skip
    d = estimate_disagg(model, db, _label(tp, 2, moe_tp, moe_ep), p_bs, p_workers, _label(tp, 2, moe_tp, moe_ep),
                        d_bs, d_workers, isl, osl, on_miss="error")  # fmt: skip
    assert d["reason"] is None
    assert d["prefill_parallel"] == d["decode_parallel"] == _label(tp, 2, moe_tp, moe_ep)
    assert (d["prefill_pp"], d["decode_pp"], d["prefill_tp"], d["decode_tp"]) == (2, 2, tp, tp)
    # _build_disagg_summary_dict: pp * tp * dp GPUs per worker
    assert d["num_total_gpus"] == 2 * tp * p_workers + 2 * tp * d_workers
    assert d["seq_per_s_per_gpu"] == numpy_round3(d["seq_per_s"] / d["num_total_gpus"])
    # run_static: requests/s = global_bs / request_latency * 1000 * pp (at 3 decimals: the TTFT
    # of the row is the prefill one rounded, times 1.8 and rounded again)
    ttft = d["ttft_ms"] / 1.8
    assert d["prefill_seq_per_s_per_worker"] == pytest.approx(p_bs / ttft * 1000 * 2, rel=2e-3)
    assert d["decode_seq_per_s_per_worker"] == pytest.approx(d_bs / (d["tpot_ms"] * (osl - 1)) * 1000 * 2, rel=2e-3)
    # the stages hold half the weights each; the hand-offs make the steps slower
    assert d["prefill_memory_gib"] < p1["prefill_memory_gib"] and d["decode_memory_gib"] < p1["decode_memory_gib"]
    assert d["tpot_ms"] > p1["tpot_ms"]
    assert d["seq_per_s"] == numpy_round3(min(d["prefill_seq_per_s_per_worker"] * p_workers * 0.9,
                                              d["decode_seq_per_s_per_worker"] * d_workers * 0.92))  # fmt: skip


@needs_data
def test_pp_oom_names_pp():
    """cli_estimate's agg OOM message prints the pipeline size."""
    model, db = "Qwen/Qwen3-32B", "gb200/sglang/0.5.14"
    e = estimate_agg(model, db, "tp1pp2dp1etpNoneepNone", 512, 8192, 512)
    assert e["ttft_ms"] is None
    assert e["reason"] == (
        f"OOM: the model '{model}' does not fit in GPU memory on system 'gb200' with the given parallelism "
        "(tp=1, pp=2, dp=1). Try increasing tp_size/pp_size, using a quantized model, or using a system with more "
        "VRAM per GPU."
    )
    assert estimate_memory(model, db, "tp1pp2dp1etpNoneepNone", 512, 8192, 512)["fits"] is False


@needs_data
def test_pp_of_other_families_prices():
    """HYBRIDMOE and DEEPSEEK build their P2P ops from pp too (DeepSeek's context P2P never splits by cp)."""
    db = "h200_sxm/sglang/0.5.14"
    system = _system(db)
    for model, tp, moe_tp, moe_ep, h in (("XiaomiMiMo/MiMo-V2-Flash", 4, 1, 4, 4096),
                                         ("deepseek-ai/DeepSeek-V3", 8, 1, 8, 7168)):  # fmt: skip
        step = engine_step(model, db, "context", tp, 1, 1024, 2, moe_tp, moe_ep, pp=2)
        assert _ops(step)["context_p2p"]["total_ms"] == _p2p_ms(system, 1024, h, 2)


# ---- cp: refusals ------------------------------------------------------------------------------------


@needs_data
@pytest.mark.parametrize(
    "model, db, parallel",
    [
        (DENSE, "h200_sxm/vllm/0.19.0", "tp1pp1dp1etpNoneepNonecp2"),
        (MOE, "h200_sxm/vllm/0.19.0", "tp1pp1dp1etp1ep2cp2"),
        (DENSE, "h200_sxm/trtllm/1.3.0rc23", "tp1pp1dp1etpNoneepNonecp4"),
        (MOE, "h200_sxm/trtllm/1.3.0rc23", "tp1pp1dp1etp2ep2cp4"),
    ],
)  # fmt: skip
def test_cp_is_sglang_only(model, db, parallel):
    backend = db.split("/")[1]
    match = rf"context parallelism \(cp = \d\) is not supported .* on backend='{backend}'"
    with pytest.raises(ValueError, match=match):
        estimate_agg(model, db, parallel, 4, 1024, 128)
    with pytest.raises(ValueError, match=match):
        estimate_disagg(model, db, parallel, 1, 1, "tp2pp1dp1etpNoneepNone" if model == DENSE else "tp2pp1dp1etp1ep2",
                        8, 1, 1024, 128)  # fmt: skip
    moe_tp, moe_ep = (None, None) if model == DENSE else (1, None)
    cp = int(parallel.rsplit("cp", 1)[1])
    with pytest.raises(ValueError, match=match):
        step_latency(model, db, "context", 1, 4, 1024, 2, moe_tp, moe_ep, cp=cp)


@needs_data
def test_sglang_cp_needs_tp1_and_dp1():
    db = "gb200/sglang/0.5.14"
    with pytest.raises(ValueError, match=r"sglang CP requires tp_size=1 and attention_dp_size=1 .*Got tp_size=2, "
                                         r"attention_dp_size=1, cp_size=2"):  # fmt: skip
        estimate_agg(DENSE, db, "tp2pp1dp1etpNoneepNonecp2", 4, 1024, 128)
    with pytest.raises(ValueError, match=r"sglang CP requires .*Got tp_size=2, attention_dp_size=1, cp_size=2"):
        estimate_agg(MOE, db, "tp2pp1dp1etp1ep4cp2", 4, 1024, 128)
    with pytest.raises(ValueError, match=r"sglang CP requires .*Got tp_size=1, attention_dp_size=2, cp_size=2"):
        estimate_agg(MOE, db, "tp1pp1dp2etp1ep4cp2", 4, 1024, 128)
    with pytest.raises(ValueError, match=r"sglang CP requires .*attention_dp_size=2"):
        estimate_disagg(MOE, db, "tp1pp1dp2etp2ep2cp2", 1, 1, "tp1pp1dp4etp1ep4", 8, 1, 1024, 128)
    with pytest.raises(ValueError, match=r"sglang CP requires .*Got tp_size=2"):
        step_latency(DENSE, db, "context", 2, 4, 1024, 2, cp=2)
    # cp joins the MoE width: tp * dp * cp = moe_tp * moe_ep
    with pytest.raises(ValueError, match=r"moe_tp \* moe_ep = 1 \* 2 != tp \* dp \* cp = 1 \* 1 \* 4 = 4"):
        estimate_agg(MOE, db, "tp1pp1dp1etp1ep2cp4", 4, 1024, 128)
    with pytest.raises(ValueError, match="cp = 0"):
        step_latency(DENSE, db, "context", 1, 4, 1024, 2, cp=0)


# ---- cp: the step ------------------------------------------------------------------------------------


def _args(row) -> list:
    return json.loads(row["lookup_args"])["args"]


@needs_data
@pytest.mark.parametrize("cp", [2, 4])
def test_cp_dense_step(cp):
    """LLAMA on sglang: the token-major context ops at ceil(x / cp), the zigzag attention
    pair, the KV all-gather after the attention; generation unchanged."""
    db, b, isl = "gb200/sglang/0.5.14", 3, 1001
    tree = open_tree()
    k = kernels_for(tree, tree.resolve(db, "", "latest"), True)
    one = _ops(engine_step(DENSE, db, "context", 1, b, isl, 2))
    step = engine_step(DENSE, db, "context", 1, b, isl, 2, cp=cp)
    ops = _ops(step)
    names = list(ops)
    assert names.index("context_cp_all_gather") == names.index("context_attention") + 1
    assert [n for n in names if n != "context_cp_all_gather"] == list(one)
    x = b * isl
    per_rank = -(-x // cp)
    for name in ("context_qkv_gemm", "context_proj_gemm", "context_gate_ffn1_gemm", "context_ffn2_gemm"):
        assert _args(ops[name])[0] == per_rank, name
    assert _args(ops["context_logits_gemm"])[0] == -(-b // cp)  # the logits GEMM's batch rows split too
    for name in ("context_embedding", "context_add_norm_1", "context_add_norm_2", "context_act_gate"):
        assert ops[name]["total_ms"] < one[name]["total_ms"], name
    # the attention: rank 0's chunks of c = ceil(isl / (2 cp)) tokens, after 0 and after isl - c
    c = max(1, -(-isl // (2 * cp)))
    assert _args(ops["context_attention"])[:3] == [b, c, 0]
    # the all-gather: L layers, all_gather over cp GPUs of x * (KV bytes per token per layer / 2)
    L, kv_heads, d = 32, 8, 128
    elements = 1 * 2 * (kv_heads * d * L * 2) / L / 2
    gather = ops["context_cp_all_gather"]
    assert gather["count"] == L and _args(gather) == ["half", cp, "all_gather", x * elements]
    assert gather["total_ms"] == k.nccl.query(HALF, "all_gather", cp, x * elements)[0] * L
    # decode is not context-parallel
    for phase in ("generation",):
        assert engine_step(DENSE, db, phase, 1, b, isl, 64, cp=cp)["rows"] == engine_step(DENSE, db, phase, 1, b, isl,
                                                                                         64)["rows"]  # fmt: skip


@needs_data
def test_cp_moe_dispatch_and_experts():
    """MOE on sglang at cp = 2 (moe width 2): context dispatches all-gather / reduce-scatter the
    unsplit volume over the cp ranks, the experts see every token; decode dispatches all-reduce."""
    db, b, isl, cp, h = "gb200/sglang/0.5.14", 2, 512, 2, 2048
    tree = open_tree()
    k = kernels_for(tree, tree.resolve(db, "", "latest"), True)
    ops = _ops(engine_step(MOE, db, "context", 1, b, isl, 2, 1, 2, cp=cp))
    x = b * isl
    L = ops["context_moe_pre_dispatch"]["count"]
    assert ops["context_moe_pre_dispatch"]["total_ms"] == k.nccl.query(HALF, "all_gather", 2, x * h)[0] * L
    assert ops["context_moe_post_dispatch"]["total_ms"] == k.nccl.query(HALF, "reduce_scatter", 2, x * h)[0] * L
    assert json.loads(ops["context_moe"]["lookup_args"])["kwargs"]["num_tokens"] == x
    assert _args(ops["context_router_gemm"])[0] == x // cp
    gen = _ops(engine_step(MOE, db, "generation", 1, b, isl, 2, 1, 2, cp=cp), 0)
    ar = k.custom_allreduce.query(2, b * h)[0]
    assert gen["generation_moe_pre_dispatch"]["total_ms"] == gen["generation_moe_post_dispatch"]["total_ms"] == \
        gen["generation_moe_pre_dispatch"]["count"] * ar  # fmt: skip


@needs_data
def test_cp_serving_layout():
    """cp in the label: agg GPUs tp * pp * dp * cp and per-GPU values / cp; the
    disaggregated row counts pp * tp * dp per worker (the spec leaves cp out there)."""
    db = "gb200/sglang/0.5.14"
    e = estimate_agg(MOE, db, "tp1pp1dp1etp1ep4cp4", 64, 4000, 500, on_miss="error")
    assert (e["parallel"], e["cp"], e["num_total_gpus"], e["concurrency"]) == ("tp1pp1dp1etp1ep4cp4", 4, 4, 64)
    assert e["tokens_per_s_per_gpu"] == e["tokens_per_s"] / 1 / 1 / 1 / 4
    assert e["seq_per_s_per_gpu"] == e["seq_per_s"] / 1 / 1 / 1 / 4
    # cp with pp: both in the label and the GPU count
    e = estimate_agg(MOE, db, "tp1pp2dp1etp2ep1cp2", 64, 4000, 500, on_miss="error")
    assert (e["parallel"], e["pp"], e["cp"], e["num_total_gpus"]) == ("tp1pp2dp1etp2ep1cp2", 2, 2, 4)
    assert e["tokens_per_s_per_gpu"] == e["tokens_per_s"] / 2 / 1 / 1 / 2
    d = estimate_disagg(MOE, db, "tp1pp1dp1etp2ep2cp4", 1, 1, "tp1pp1dp4etp1ep4", 64, 1, 4000, 500, on_miss="error")
    assert d["prefill_parallel"] == "tp1pp1dp1etp2ep2cp4" and d["num_total_gpus"] == 1 * 1 + 4 * 1
    assert d["seq_per_s_per_gpu"] == numpy_round3(d["seq_per_s"] / 5)


@needs_data
def test_cp_other_families():
    """HYBRIDMOE (per-attention-type KV all-gathers at the end, decode dispatches: nothing
    before, an all-reduce after) and DEEPSEEK (MLA latent all-gather after the block)."""
    db = "h200_sxm/sglang/0.5.14"
    ctx = _ops(engine_step("XiaomiMiMo/MiMo-V2-Flash", db, "context", 1, 2, 1024, 2, 1, 4, cp=4))
    names = list(ctx)
    assert names[-3:] == ["context_p2p", "context_cp_all_gather_global", "context_cp_all_gather_swa"]
    assert (ctx["context_cp_all_gather_global"]["count"], ctx["context_cp_all_gather_swa"]["count"]) == (39, 9)
    gen = _ops(engine_step("XiaomiMiMo/MiMo-V2-Flash", db, "generation", 1, 2, 1024, 2, 1, 4, cp=4), 0)
    assert gen["generation_global_moe_pre_dispatch"]["total_ms"] == 0.0
    assert gen["generation_global_moe_post_dispatch"]["lookup_table"] == "custom_allreduce_perf"
    ds = _ops(engine_step("deepseek-ai/DeepSeek-V3", db, "context", 1, 2, 1024, 2, 1, 8, cp=8))
    names = list(ds)
    assert names.index("context_cp_all_gather") == names.index("context_mla_block") + 1
    assert _args(ds["context_cp_all_gather"]) == ["half", 8, "all_gather", 2048 * (1 * 1 * 61 * 576 / 61 / 2)]
    assert math.isfinite(step_latency("deepseek-ai/DeepSeek-V3", db, "generation", 1, 2, 1024, 64, 1, 8, cp=8))


# ---- the engine-step API takes pp and cp where it takes dp ------------------------------------------


@needs_data
def test_step_api_takes_pp_and_cp():
    import pyarrow as pa

    from aicsql.spec import step_latency_batch
    from aicsql.spec.step.api import engine_step_table

    db = "gb200/sglang/0.5.14"
    rows = [(DENSE, "context", 1, None, None, 1, 2, 1), (DENSE, "context", 1, None, None, 1, 1, 2),
            (MOE, "context", 1, 1, 4, 1, 2, 4), (MOE, "generation", 1, 1, 4, 1, 1, 4),
            (MOE, "generation", 2, 1, 4, 2, 2, None)]  # fmt: skip
    cols = list(zip(*rows))
    arrays = [pa.array(cols[0]), pa.array([db] * len(rows)), pa.array(cols[1]), pa.array(cols[2], pa.int64()),
              pa.array([4] * len(rows), pa.int64()), pa.array([512] * len(rows), pa.int64()),
              pa.array([64] * len(rows), pa.int64()), pa.array(cols[3], pa.int64()), pa.array(cols[4], pa.int64()),
              pa.array(cols[5], pa.int64()), pa.array(cols[6], pa.int64()), pa.array(cols[7], pa.int64())]  # fmt: skip
    got = step_latency_batch({"on_miss": "error"}, *arrays).to_pylist()
    want = [step_latency(m, db, ph, tp, 4, 512, 64, mtp, mep, dp=dp, pp=pp, cp=cp or 1)
            for m, ph, tp, mtp, mep, dp, pp, cp in rows]  # fmt: skip
    assert got == want
    # py_engine_step's 12-argument form: ..., moe_tp, moe_ep, dp, pp, cp
    batch = engine_step_table({"on_miss": "error"}, MOE, db, "context", 1, 4, 512, 64, 1, 4, 1, 2, 4)
    table = batch.to_pylist()
    names = [r["op_name"] for r in table]
    assert "context_cp_all_gather" in names and "context_p2p" in names
    total = [r for r in table if r["row_kind"] == "step_total"][0]
    assert total["latency_ms"] == want[2]
    gather = next(r for r in table if r["op_name"] == "context_cp_all_gather")
    assert (gather["lookup_table"], gather["comm_gpus"]) == ("nccl_perf", 4)
    with pytest.raises(ValueError, match="7, 9, 10, 11 or 12 arguments"):
        engine_step_table({}, MOE, db, "context", 1, 4, 512, 64, 1, 4, 1, 2, 4, 5)
