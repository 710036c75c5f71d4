"""Attention data parallelism (dp > 1) on the Python path: the MoE dispatch's
dp branches per backend (the spec's ``MoEDispatch.query``), the NCCL
correction beyond the largest measured GPU count, and what is refused.
The numbers against the spec are in test_spec_search.py (1,487 search
candidates at dp > 1, Qwen3-30B-A3B on gb200 / sglang) and, for the
HYBRIDMOE and DEEPSEEK / KIMIK25 families, test_spec_family_dp.py."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from aicsql.spec import open_tree
from aicsql.spec.kernels import COMM_QUANTS, kernels_for
from aicsql.spec.serving import estimate_agg, estimate_disagg, estimate_memory
from aicsql.spec.step import engine_step, step_latency
from aicsql.spec.step.ops import check_trtllm_alltoall

from _support import have_data, require

needs_data = require(have_data(open_tree), "the perf data are missing")

MOE_MODEL = "Qwen/Qwen3-30B-A3B"
HALF = COMM_QUANTS["half"]


def _db(name: str):
    tree = open_tree()
    return tree, tree.resolve(name, "", "latest")


def _dispatch_rows(db: str, tp: int, dp: int, model: str = MOE_MODEL, batch: int = 2, isl: int = 128):
    step = engine_step(model, db, "context", tp, batch, isl, 1, 1, tp * dp, dp=dp)
    rows = {r["op_name"]: r for r in step["rows"] if r["row_kind"] == "op"}
    return rows, batch * isl


def _count(rows, name) -> float:
    return rows[name]["count"]


@needs_data
@pytest.mark.parametrize(
    "db, tp, dp",
    [("h200_sxm/sglang/0.5.14", 1, 4), ("h200_sxm/sglang/0.5.14", 2, 2), ("h200_sxm/vllm/0.19.0", 1, 2),
     ("h200_sxm/vllm/0.19.0", 2, 4), ("h200_sxm/trtllm/1.3.0rc23", 1, 8), ("gb200/trtllm/1.3.0rc23", 1, 4),
     ("gb200/sglang/0.5.14", 1, 8), ("gb200/sglang/0.5.14", 2, 4)],
)  # fmt: skip
def test_dispatch_branches(db, tp, dp):
    """Each backend's dp > 1 dispatch, recomputed from the tables: the
    collectives' sum (in the spec's order) times the count."""
    tree, database = _db(db)
    k = kernels_for(tree, database, True)
    rows, x = _dispatch_rows(db, tp, dp)
    h = 2048  # Qwen3-30B-A3B hidden size
    volume, g = x * h, tp * dp
    nccl = k.nccl.query
    backend = database.backend
    if backend == "sglang" and tp > 1:
        pre = nccl(HALF, "reduce_scatter", tp, volume)[0] + nccl(HALF, "all_gather", g, volume * dp)[0]
        post = nccl(HALF, "reduce_scatter", g, volume * dp)[0] + nccl(HALF, "all_gather", tp, volume)[0]
    elif backend == "vllm" and tp > 1:
        ar = k.custom_allreduce.query(g, volume)[0]
        pre = 0 + ar + nccl(HALF, "all_gather", g, volume * dp)[0]
        post = 0 + ar + nccl(HALF, "reduce_scatter", g, volume * dp)[0]
    else:  # trtllm (bf16 experts: no compression on SM 100 either), sglang / vllm at attention tp 1
        pre = nccl(HALF, "all_gather", g, volume * dp)[0]
        post = nccl(HALF, "reduce_scatter", g, volume * dp)[0]
    c = _count(rows, "context_moe_pre_dispatch")
    assert rows["context_moe_pre_dispatch"]["total_ms"] == pre * c
    assert rows["context_moe_post_dispatch"]["total_ms"] == post * c
    assert pre > 0 and post > 0
    first = "custom_allreduce_perf" if backend == "vllm" and tp > 1 else "nccl_perf"  # the op's first lookup
    assert rows["context_moe_pre_dispatch"]["lookup_table"] == first
    if first == "nccl_perf":
        args = json.loads(rows["context_moe_pre_dispatch"]["lookup_args"])["args"]
        assert args == ["half", tp if backend == "sglang" and tp > 1 else g,
                        "reduce_scatter" if backend == "sglang" and tp > 1 else "all_gather",
                        volume if backend == "sglang" and tp > 1 else volume * dp]  # fmt: skip
    # the experts see the tokens of every attention replica
    moe = json.loads(rows["context_moe"]["lookup_args"])["kwargs"]
    assert moe["num_tokens"] == x * dp and moe["moe_ep_size"] == g


@needs_data
def test_trtllm_sm100_compresses_the_gathered_volume():
    """gb200 (SM 100), an fp8-expert checkpoint: the all-gather moves ``volume / 2 * dp``."""
    db = "gb200/trtllm/1.3.0rc23"
    tree, database = _db(db)
    k = kernels_for(tree, database, True)
    assert k.system.sm_version == 100 and k.system.num_gpus_per_node < 72
    rows, x = _dispatch_rows(db, 1, 4, model="Qwen/Qwen3-30B-A3B-FP8")
    assert rows["context_moe_pre_dispatch"]["quant"] in ("fp8", "fp8_block")
    volume = x * 2048
    c = _count(rows, "context_moe_pre_dispatch")
    pre = k.nccl.query(HALF, "all_gather", 4, (volume / 2 + 0) * 4)[0]
    post = k.nccl.query(HALF, "reduce_scatter", 4, volume * 4)[0]
    assert rows["context_moe_pre_dispatch"]["total_ms"] == pre * c
    assert rows["context_moe_post_dispatch"]["total_ms"] == post * c


@needs_data
def test_nccl_beyond_the_largest_measured_count_is_corrected():
    """gb200's NCCL table stops at 4 GPUs: 8 GPUs read the 4-GPU slice and
    scale it by ``(g - 1) / g * M / (M - 1) * (bw(M) / bw(g))``."""
    tree, database = _db("gb200/sglang/0.5.14")
    k = kernels_for(tree, database, True)
    s = k.system
    for op in ("all_gather", "reduce_scatter"):
        measured = max(k.nccl.root["half"][op])
        assert measured == 4
        for size in (4096, 1 << 20, 3 << 24):
            at4, _ = k.nccl.query(HALF, op, 4, size)
            at8, path = k.nccl.query(HALF, op, 8, size)
            assert at8 == at4 * ((8 - 1) / 8 * 4 / (4 - 1) * (s.bw(4) / s.bw(8))) and path
    assert k.nccl.query(HALF, "all_gather", 1, 4096) == (0.0, None)


@needs_data
def test_serving_scales_by_dp():
    """The spec's run_agg / run_static: throughput and concurrency x dp, per-GPU values / dp."""
    db = "gb200/sglang/0.5.14"
    e = estimate_agg(MOE_MODEL, db, "tp2pp1dp4etp1ep8", 16, 1024, 128, on_miss="error")
    assert (e["dp"], e["tp"], e["moe_tp"], e["moe_ep"], e["parallel"]) == (4, 2, 1, 8, "tp2pp1dp4etp1ep8")
    assert e["concurrency"] == 64 and e["global_bs"] == 64 and e["num_total_gpus"] == 8
    assert e["tokens_per_s_per_gpu"] == e["tokens_per_s"] / 1 / 2 / 4 / 1
    assert e["seq_per_s"] == e["request_rate"] == e["tokens_per_s"] / 127
    # moe widths inferred from tp * dp
    assert estimate_agg(MOE_MODEL, db, "tp2pp1dp4etpNoneep8", 16, 1024, 128) == e
    assert estimate_agg(MOE_MODEL, db, "tp2pp1dp4etp1epNone", 16, 1024, 128) == e
    assert estimate_memory(MOE_MODEL, db, "tp2pp1dp4etp1ep8", 16, 1024, 128)["fits"] is True
    d = estimate_disagg(MOE_MODEL, db, "tp1pp1dp2etp1ep2", 1, 1, "tp2pp1dp2etp1ep4", 32, 1, 1024, 128, on_miss="error")
    assert (d["prefill_dp"], d["decode_dp"], d["num_total_gpus"]) == (2, 2, 6)
    assert d["decode_global_bs"] == 64 and d["concurrency"] == 64 and d["prefill_global_bs"] == 2
    # dp = 1 stays what it was
    assert estimate_agg(MOE_MODEL, db, "tp8pp1dp1etp1ep8", 16, 1024, 128) == estimate_agg(MOE_MODEL, db, 8, 16,
                                                                                            1024, 128, None, None,
                                                                                            1, 8)  # fmt: skip
    # the step API takes dp as a keyword
    assert step_latency(MOE_MODEL, db, "context", 2, 4, 512, 1, 1, 8, dp=4) > 0


@needs_data
def test_what_is_refused():
    db = "gb200/sglang/0.5.14"
    with pytest.raises(ValueError, match="LLAMA family"):
        estimate_agg("meta-llama/Meta-Llama-3.1-8B", db, "tp1pp1dp2etpNoneepNone", 4, 1024, 128)
    # priced: every MoE family (test_spec_family_dp.py); a dense VL model is not
    with pytest.raises(ValueError, match="QWEN3VL family .*DEEPSEEK, DEEPSEEKV32, DEEPSEEKV4, GEMMA4MIX, HYBRIDMOE, "
                                         "KIMIK25, MOE, NEMOTRONH, QWEN35, QWEN3VL_MOE families only"):  # fmt: skip
        estimate_agg("Qwen/Qwen3-VL-8B-Instruct", db, "tp1pp1dp2etpNoneepNone", 4, 1024, 128)
    # QWEN3VL_MOE is priced as MOE is (its text path)
    assert estimate_agg("Qwen/Qwen3-VL-30B-A3B-Instruct", db, "tp1pp1dp2etp1ep2", 4, 1024, 128)["ttft_ms"] > 0
    with pytest.raises(ValueError, match="trtllm does not support TP>1 and DP>1"):
        estimate_agg(MOE_MODEL, "h200_sxm/trtllm/1.3.0rc23", "tp2pp1dp2etp1ep4", 4, 1024, 128)
    with pytest.raises(ValueError, match=r"moe_tp \* moe_ep = 1 \* 4 != tp \* dp = 4 \* 2 = 8"):
        estimate_agg(MOE_MODEL, db, "tp4pp1dp2etp1ep4", 4, 1024, 128)
    # cp joins the MoE width: tp * dp * cp = moe_tp * moe_ep
    with pytest.raises(ValueError, match=r"moe_tp \* moe_ep = 1 \* 4 != tp \* dp \* cp = 1 \* 4 \* 2 = 8"):
        estimate_agg(MOE_MODEL, db, "tp1pp1dp4etp1ep4cp2", 4, 1024, 128)
    with pytest.raises(ValueError, match="sglang CP requires tp_size=1 and attention_dp_size=1"):
        estimate_agg(MOE_MODEL, db, "tp1pp1dp4etp1ep8cp2", 4, 1024, 128)
    with pytest.raises(ValueError, match="dp = 0"):
        step_latency(MOE_MODEL, db, "context", 1, 4, 512, 1, 1, 1, dp=0)
    with pytest.raises(ValueError, match="dp = 4 .*LLAMA family"):
        step_latency("meta-llama/Meta-Llama-3.1-8B", db, "context", 1, 4, 512, 1, dp=4)


def test_the_trtllm_alltoall_is_refused():
    """SM 100, >= 72 GPUs per node, moe_tp 1, dp > 1: the all-to-all table neither path has."""
    nvl72 = SimpleNamespace(sm_version=100, num_gpus_per_node=72)
    with pytest.raises(ValueError, match="all-to-all .*alltoall_dispatch"):
        check_trtllm_alltoall(nvl72, 1, 4)
    check_trtllm_alltoall(nvl72, 2, 4)  # moe_tp > 1: NCCL all-gather / reduce-scatter
    check_trtllm_alltoall(nvl72, 1, 1)
    check_trtllm_alltoall(SimpleNamespace(sm_version=100, num_gpus_per_node=4), 1, 4)
    check_trtllm_alltoall(SimpleNamespace(sm_version=90, num_gpus_per_node=72), 1, 4)


@needs_data
def test_the_trtllm_alltoall_is_refused_by_the_estimates(monkeypatch):
    tree, database = _db("gb200/trtllm/1.3.0rc23")
    system = kernels_for(tree, database, True).system
    monkeypatch.setattr(system, "num_gpus_per_node", 72)
    with pytest.raises(ValueError, match="all-to-all"):
        estimate_agg(MOE_MODEL, "gb200/trtllm/1.3.0rc23", "tp1pp1dp4etp1ep4", 4, 1024, 128)
