"""GEMMA4MIX (Gemma 4) memory and serving estimates on the Python path
(docs/spec/families_qwen35_gemma4.md 9): the KV cache per layer type with the
sliding-window cap, the max-token search, and the agg / disagg / memory
estimates built on them.

Every expected value is the spec's own (aiconfigurator v0.11.0 run in-process,
pure Python engine step, merged data tree; the verification script and its
dump are kept outside the repository, /work/diag/gemma4_mem: spec_dump.py,
check.py), compared to the bit (floats by ``==``). Besides the shipped
gemma-4-26B-A4B, two variants are written into a temporary data root: a dense
one (no routed experts) and an all-sliding-window one (its KV cache saturates
at the window).
"""

from __future__ import annotations

import json
import os

import pytest

from _support import have_data, require

from aicsql.spec import data_dirs, open_tree
from aicsql.spec.data import Database
from aicsql.spec.serving import estimate_agg, estimate_disagg, estimate_memory
from aicsql.spec.serving.kvcache import kv_bytes_per_sequence, kv_max_tokens, search_max_tokens
from aicsql.spec.step import step_context
from aicsql.spec.step.model import model_config_path

needs_data = require(have_data(open_tree), f"no perf data under {data_dirs()} (run the fetch step)")

GEMMA = "google/gemma-4-26B-A4B"
DENSE = "google/gemma-4-dense-synth"
ALLSWA = "google/gemma-4-allswa-synth"
# The 26B-A4B with a 131072-token vocabulary: its tp-1 logits GEMM is on the GEMM grid, so
# context-parallel steps price (the shipped 262144 is off every grid at tp 1, 9.7).
V128K = "google/gemma-4-v128k-synth"
DB = "b200_sxm/sglang/0.5.14"
MEMORY_KEYS = ("weights", "activations", "kvcache", "nccl", "others", "total")


def _same(a, b) -> bool:
    return type(a) is type(b) and a == b


def _model(name: str = GEMMA, data=None):
    return step_context(open_tree(data), name, Database(*DB.split("/")), True).model


@pytest.fixture(scope="module")
def variants(tmp_path_factory):
    """A data root with the two synthetic variants of the 26B-A4B config,
    mounted before the default data (returns the ``data`` argument)."""
    root = tmp_path_factory.mktemp("gemma4_root")
    os.makedirs(root / "systems" / "data")
    os.makedirs(root / "model_configs")
    path, _ = model_config_path(open_tree(), GEMMA)
    with open(path, encoding="utf-8") as f:
        shipped = json.load(f)
    dense = json.loads(json.dumps(shipped))
    t = dense["text_config"]
    t.update(num_experts=None, top_k_experts=None, enable_moe_block=False, moe_intermediate_size=None,
             intermediate_size=8448)  # fmt: skip
    allswa = json.loads(json.dumps(shipped))
    allswa["text_config"]["layer_types"] = ["sliding_attention"] * allswa["text_config"]["num_hidden_layers"]
    v128k = json.loads(json.dumps(shipped))
    v128k["text_config"]["vocab_size"] = 131072
    for name, cfg in ((DENSE, dense), (ALLSWA, allswa), (V128K, v128k)):
        with open(root / "model_configs" / (name.replace("/", "--") + "_config.json"), "w", encoding="utf-8") as f:
            json.dump(cfg, f)
    return [str(root)] + data_dirs(None)


# ---- the KV cache of one sequence and its inverse (9.1 - 9.3) ---------------------------------------

# tp -> (elements per token, {seq_len: bytes at bfloat16}) of gemma-4-26B-A4B (25 SWA + 5 global layers)
GEMMA_KV = {
    1: (112640, {0: 0.0, 1: 225280.0, 1024: 230686720.0, 1025: 230707200.0, 8192: 377487360.0,
                 262144: 5578424320.0}),
    2: (56320, {1: 112640.0, 1024: 115343360.0, 1025: 115353600.0, 8192: 188743680.0, 262144: 2789212160.0}),
    4: (30720, {1: 61440.0, 1024: 62914560.0, 1025: 62924800.0, 8192: 136314880.0, 262144: 2736783360.0}),
    8: (17920, {1: 35840.0, 1024: 36700160.0, 1025: 36710400.0, 8192: 110100480.0, 262144: 2710568960.0}),
}  # fmt: skip
# (tp, kv bytes) -> {budget: max tokens}
GEMMA_MAX_TOKENS = {
    (1, 2): {-1.0: 0, 0.0: 0, 1.0: 0, 225279.0: 0, 225280.0: 1, 1e6: 4, 2.3e8: 1020, 2.34e8: 1185, 1e9: 38588,
             12345678901.5: 592576, 7.5e10: 3651869, 1e15: 48828114760},
    (4, 2): {204799.0: 3, 1e6: 16, 2.3e8: 17340, 1e9: 92536, 4e10: 3901130, 1e12: 97651130},
    (8, 2): {204799.0: 5, 225279.0: 6, 1e6: 27, 2.34e8: 20291, 1e15: 97656247440},
    (2, 1): {225279.0: 3, 225280.0: 4, 1e6: 17, 2.3e8: 34681, 12345678901.5: 2401025, 1e15: 195312489760},
}  # fmt: skip


@needs_data
def test_gemma4_kv_elements_and_bytes_per_sequence():
    model = _model()
    for tp, (elements, by_len) in GEMMA_KV.items():
        assert model.kv_elements_per_token(tp) == elements
        for s, want in by_len.items():
            got = kv_bytes_per_sequence(model, tp, 2, s)
            assert _same(got, want), (tp, s, got, want)
    # fp8 KV (1 byte), tp 2: the window caps the 25 SWA layers at 1024 tokens
    assert kv_bytes_per_sequence(model, 2, 1, 1025) == 57676800.0
    assert kv_bytes_per_sequence(model, 2, 1, 262144) == 1394606080.0
    assert kv_bytes_per_sequence(model, 2, 2, -5) == 0.0


@needs_data
def test_gemma4_max_tokens_binary_search():
    model = _model()
    for (tp, kv_bytes), table in GEMMA_MAX_TOKENS.items():
        for budget, want in table.items():
            got = kv_max_tokens(model, tp, kv_bytes, budget)
            assert type(got) is int and got == want, (tp, kv_bytes, budget, got, want)


@needs_data
def test_gemma4_all_swa_cache_saturates_at_the_context_length(variants):
    model = _model(ALLSWA, variants)
    assert model.kv_elements_per_token(1) == 122880 and model.gemma4.context_length == 262144
    assert kv_bytes_per_sequence(model, 1, 2, 1024) == kv_bytes_per_sequence(model, 1, 2, 1 << 20) == 251658240.0
    for budget, want in {1e6: 4, 2.3e8: 935, 2.34e8: 952, 1e9: 262144, 1e15: 262144}.items():
        assert kv_max_tokens(model, 1, 2, budget) == want, budget
    assert kv_max_tokens(model, 2, 2, 2.3e8) == 262144  # bytes(1024) fits at tp 2: saturated
    assert kv_max_tokens(model, 8, 2, 225279.0) == 7
    # an unknown context length: the doubled length at which the size stopped growing
    assert search_max_tokens(lambda s: float(min(s, 4)), 100.0, 0) == 8


# ---- the serving estimates (9.4 - 9.6) -------------------------------------------------------------

# (model, db, parallel, batch, isl, osl, prefix, ctx_tokens), the memory dict (GiB), result fields, KV warning
AGG = [
    (("gemma-4-26B-A4B", "b200_sxm/sglang/0.5.14", "tp2pp1dp1etp1ep2", 8, 512, 256, 0, None),
     (24.884613037109375, 0.10245609283447264, 0.64453125, 0.333984375, 4.2, 30.165584754943847),
     {"ttft": 25.385016945515027, "tpot": 4.3626127731378785, "tokens/s/gpu": 896.634150749093,
      "seq/s": 7.032424711757592}, False),
    (("gemma-4-26B-A4B", "b200_sxm/sglang/0.5.14", "tp2pp1dp1etp1ep2", 32, 4096, 512, 0, None),
     (24.884613037109375, 0.8147134780883788, 4.53125, 0.333984375, 4.2, 34.76456089019776),
     {"ttft": 152.66748036395592, "tpot": 8.70356104801584, "tokens/s/gpu": 1791.8559036840943,
      "seq/s": 7.013134652383931}, False),
    (("gemma-4-26B-A4B", "b200_sxm/sglang/0.5.14", "tp8pp1dp1etp1ep8", 16, 32768, 1024, 0, None),
     (7.277580261230469, 4.134704351425171, 5.546875, 0.3828125, 4.2, 21.54197211265564),
     {"ttft": 740.4649858058577, "tpot": 7.584794643974296, "tokens/s/gpu": 238.39658846187683,
      "seq/s": 1.8642939469159479}, False),
    (("gemma-4-26B-A4B", "b200_sxm/sglang/0.5.14", "tp2pp1dp1etp2ep1", 8, 2048, 256, 0, None),
     (24.884613037109375, 0.5048446655273438, 0.95703125, 0.333984375, 4.2, 30.880473327636718),
     {"ttft": 38.78470339528718, "tpot": 4.515784947192843, "tokens/s/gpu": 854.1236166468748,
      "seq/s": 6.699008758014704}, False),
    (("gemma-4-26B-A4B", "b200_sxm/sglang/0.5.14", "tp2pp1dp1etp1ep2", 16, 4096, 512, 1024, None),
     (24.884613037109375, 0.8115549087524413, 2.265625, 0.333984375, 4.2, 32.49577732086182),
     {"ttft": 91.1303950530685, "tpot": 5.779542105675374, "tokens/s/gpu": 1342.5492743193554,
      "seq/s": 5.254595985594346}, False),
    (("gemma-4-26B-A4B", "b200_sxm/sglang/0.5.14", "tp2pp1dp1etp1ep2", 64, 4096, 512, 0, 8192),
     (24.884613037109375, 1.6294269561767576, 9.0625, 0.333984375, 4.2, 40.110524368286136),
     {"ttft": 289.1676685686677, "tpot": 12.183263957859989, "tokens/s/gpu": 2534.1206273856133,
      "seq/s": 9.918280342018056}, False),
    (("gemma-4-26B-A4B", "b200_sxm/sglang/0.5.14", "tp2pp1dp2etp1ep4", 16, 4096, 512, 0, None),
     (14.249847412109375, 0.8115549087524413, 2.265625, 0.333984375, 4.2, 21.861011695861816),
     {"ttft": 195.68736009308867, "tpot": 7.7022080859016535, "tokens/s/gpu": 986.9731194403968,
      "seq/s": 7.725816981920914}, False),
    (("gemma-4-26B-A4B", "b200_sxm/sglang/0.5.14", "tp2pp2dp1etp1ep2", 16, 4096, 512, 0, None),
     (12.442306518554688, 0.8115549087524413, 2.265625, 0.333984375, 4.2, 20.053470802307128),
     {"ttft": 116.50235040299995, "tpot": 6.034695645117943, "tokens/s/gpu": 1276.084528498671,
      "seq/s": 9.988919988247915}, False),
    (("gemma-4-26B-A4B", "b200_sxm/trtllm/1.3.0rc20", "tp2pp1dp1etp2ep1", 64, 4096, 512, 0, None),
     (24.884613037109375, 1.5, 9.0625, 0.333984375, 3.5, 39.281097412109375),
     {"ttft": 117.70880124827295, "tpot": 9.91733413025282, "tokens/s/gpu": 3183.673751400792,
      "seq/s": 12.460562627791749}, False),
    (("gemma-4-26B-A4B", "b200_sxm/trtllm/1.3.0rc20", "tp2pp1dp1etp1ep2", 512, 16384, 1024, 0, None),
     (24.884613037109375, 1.15625, 135.0, 0.333984375, 3.5, 164.87484741210938),
     {"ttft": 425.72080173938446, "tpot": 66.88865720726788, "tokens/s/gpu": 3816.9077300641975,
      "seq/s": 7.462185200516515}, True),
    (("gemma-4-26B-A4B", "b200_sxm/trtllm/1.3.0rc20", "tp8pp1dp1etp1ep8", 256, 2048, 2048, 0, None),
     (7.277580261230469, 0.7109375, 16.25, 0.3828125, 3.5, 28.12133026123047),
     {"ttft": 52.84700677882693, "tpot": 7.460801413060877, "tokens/s/gpu": 4282.154063932608,
      "seq/s": 16.73533586295108}, False),
    (("gemma-4-26B-A4B", "gb200/trtllm/1.3.0rc20", "tp4pp1dp1etp1ep4", 64, 8192, 512, 0, None),
     (13.146591186523438, 0.796875, 8.4375, 0.3828125, 3.5, 26.263778686523438),
     {"ttft": 129.84780440042894, "tpot": 8.390880150246373, "tokens/s/gpu": 1871.6475353513583,
      "seq/s": 14.65086133347443}, False),
    (("gemma-4-26B-A4B", "b200_sxm/vllm/0.24.0", "tp8pp1dp1etp1ep8", 64, 32768, 2048, 0, None),
     (7.277580261230469, 2.849217414855957, 22.8125, 0.3828125, 3.5, 36.822110176086426),
     {"ttft": 235.97475669821125, "tpot": 11.372622222947504, "tokens/s/gpu": 696.384857960875,
      "seq/s": 2.721582248992184}, False),
    (("gemma-4-allswa-synth", "b200_sxm/sglang/0.5.14", "tp2pp1dp1etp1ep2", 32, 8192, 1024, 0, None),
     (24.817474365234375, 1.6233072280883787, 3.75, 0.333984375, 4.2, 34.72476596832276),
     {"ttft": 279.0920894097584, "tpot": 8.518306319061878, "tokens/s/gpu": 1830.8971562682723,
      "seq/s": 3.5794665811696427}, False),
]  # fmt: skip
AGG_FIELDS = {"ttft": "ttft_ms", "tpot": "tpot_ms", "tokens/s/gpu": "tokens_per_s_per_gpu", "seq/s": "seq_per_s"}


@needs_data
@pytest.mark.parametrize("point", AGG, ids=lambda p: "-".join(str(x) for x in p[0][1:6]))
def test_gemma4_agg_and_memory_equal_the_spec(point, variants):
    (name, db, parallel, batch, isl, osl, prefix, ctx_tokens), memory, fields, warned = point
    args = ("google/" + name, db, parallel, batch, isl, osl, prefix, ctx_tokens)
    mem = estimate_memory(*args, on_miss="error", data=variants)
    assert mem["fits"] is True
    for key, want in zip(MEMORY_KEYS, memory):
        assert _same(mem[key + "_gib"], want), (key, mem[key + "_gib"], want)
    row = estimate_agg(*args, on_miss="error", data=variants)
    assert _same(row["memory_gib"], memory[-1])
    for key, field in AGG_FIELDS.items():
        assert _same(row[field], fields[key]), (key, row[field], fields[key])
    assert (row["warning"] is not None) == warned
    if warned:
        assert row["warning"].startswith(f"Requested batch_size ({batch}) exceeds estimated KV cache capacity")


@needs_data
def test_gemma4_rust_path_equals_the_spec(variants):
    """The same spec points through the Rust functions (`estimate_memory`,
    `estimate_agg` in SQL), bit for bit: the Rust memory model sizes the
    windowed layers' KV cache on its own code."""
    import aicsql

    ctx = aicsql.context(data=variants)
    for (name, db, parallel, batch, isl, osl, prefix, ctx_tokens), memory, fields, warned in AGG:
        args = (f"'google/{name}', '{db}', '{parallel}', {batch}, {isl}, {osl}, {prefix}, "
                f"{'NULL' if ctx_tokens is None else ctx_tokens}")  # fmt: skip
        mem = ctx.sql(f"SELECT estimate_memory({args}) AS m").to_pylist()[0]["m"]
        assert mem["fits"] is True, (name, parallel, mem)
        for key, want in zip(MEMORY_KEYS, memory):
            assert _same(mem[key + "_gib"], want), (name, parallel, key, mem[key + "_gib"], want)
        row = ctx.sql(f"SELECT estimate_agg({args}) AS r").to_pylist()[0]["r"]
        assert _same(row["memory_gib"], memory[-1])
        for key, field in AGG_FIELDS.items():
            assert _same(row[field], fields[key]), (name, parallel, key, row[field], fields[key])
        assert bool(row["warning"]) == warned, (name, parallel, row["warning"])


@needs_data
def test_gemma4_agg_oom_reports_the_spec_message_and_memory():
    for (name, db, parallel, batch, isl, osl), total, kvcache in [
        (("gemma-4-26B-A4B", "h200_sxm/sglang/0.5.14", "tp2pp1dp1etp1ep2", 1024, 16384, 1024), 302.85492343902587,
         270.0),
        (("gemma-4-26B-A4B", "h100_sxm/vllm/0.24.0", "tp2pp1dp1etp1ep2", 512, 8192, 1024), 124.94697189331055, 95.0),
    ]:  # fmt: skip
        args = ("google/" + name, db, parallel, batch, isl, osl)
        row = estimate_agg(*args)
        system = db.split("/")[0]
        assert row["reason"] == (
            f"OOM: the model 'google/{name}' does not fit in GPU memory on system '{system}' with the given "
            "parallelism (tp=2, pp=1, dp=1). Try increasing tp_size/pp_size, using a quantized model, or using a "
            "system with more VRAM per GPU."
        )
        assert row["ttft_ms"] is None
        mem = estimate_memory(*args)
        assert mem["fits"] is False and _same(mem["total_gib"], total) and _same(mem["kvcache_gib"], kvcache)


# (prefill parallel, batch, workers, decode parallel, batch, workers, isl, osl, prefix), the spec's 3-decimal fields
DISAGG = [
    (("b200_sxm/sglang/0.5.14", "tp2pp1dp1etp1ep2", 1, 2, "tp2pp1dp1etp1ep2", 64, 1, 4096, 512, 0),
     {"(p)memory": 30.364, "(d)memory": 38.582, "ttft": 85.302, "tpot": 8.482, "tokens/s/gpu": 1159.229,
      "seq/s": 13.585}),
    (("b200_sxm/trtllm/1.3.0rc20", "tp2pp1dp1etp1ep2", 2, 1, "tp4pp1dp1etp1ep4", 128, 1, 8192, 1024, 0),
     {"(p)memory": 31.383, "(d)memory": 34.598, "ttft": 157.046, "tpot": 7.39, "tokens/s/gpu": 2658.393,
      "seq/s": 15.577}),
    (("b200_sxm/vllm/0.24.0", "tp2pp1dp1etp2ep1", 1, 1, "tp8pp1dp1etp1ep8", 256, 1, 32768, 1024, 0),
     {"(p)memory": 35.129, "(d)memory": 99.979, "ttft": 467.066, "tpot": 19.863, "tokens/s/gpu": 355.185,
      "seq/s": 3.469}),
    (("b200_sxm/sglang/0.5.14", "tp4pp1dp1etp1ep4", 1, 1, "tp2pp2dp1etp1ep2", 32, 1, 16384, 512, 0),
     {"(p)memory": 20.199, "(d)memory": 25.359, "ttft": 297.994, "tpot": 7.775, "tokens/s/gpu": 347.904,
      "seq/s": 5.436}),
    (("b200_sxm/sglang/0.5.14", "tp2pp1dp1etp1ep2", 1, 1, "tp2pp1dp2etp1ep4", 64, 1, 4096, 512, 512),
     {"(p)memory": 30.263, "(d)memory": 27.947, "ttft": 75.872, "tpot": 8.416, "tokens/s/gpu": 1822.003,
      "seq/s": 21.352}),
    (("h100_sxm/vllm/0.24.0", "tp2pp1dp1etp2ep1", 1, 1, "tp2pp1dp1etp1ep2", 96, 2, 2048, 256, 0),
     {"(p)memory": 29.211, "(d)memory": 40.271, "ttft": 55.321, "tpot": 17.366, "tokens/s/gpu": 1249.459,
      "seq/s": 29.284}),
]  # fmt: skip
DISAGG_FIELDS = {"(p)memory": "prefill_memory_gib", "(d)memory": "decode_memory_gib", "ttft": "ttft_ms",
                 "tpot": "tpot_ms", "tokens/s/gpu": "tokens_per_s_per_gpu", "seq/s": "seq_per_s"}  # fmt: skip


@needs_data
def test_gemma4_disagg_equals_the_spec():
    for args, fields in DISAGG:
        row = estimate_disagg(GEMMA, *args, on_miss="error")
        for key, field in DISAGG_FIELDS.items():
            assert _same(row[field], fields[key]), (args, key, row[field], fields[key])
    # the decode worker does not fit (h200, 512 sequences of 17408 tokens at tp 2)
    row = estimate_disagg(GEMMA, "h200_sxm/sglang/0.5.14", "tp2pp1dp1etp1ep2", 1, 1, "tp2pp1dp1etp1ep2", 512, 1,
                          16384, 1024, 0)  # fmt: skip
    assert row["reason"].startswith("OOM: the model 'google/gemma-4-26B-A4B' does not fit in GPU memory on system "
                                    "'h200_sxm' with the given parallelism.")  # fmt: skip


@needs_data
def test_gemma4_dense_variant(variants):
    """No routed experts: no MoE workspace, activations at the family's coefficient only."""
    for (db, parallel, batch, isl, osl), memory, ttft, tpot in [
        (("b200_sxm/sglang/0.5.14", "tp2pp1dp1etp2ep1", 8, 4096, 512),
         (5.0904541015625, 0.6119815826416015, 1.1328125, 0.333984375, 4.2, 11.369232559204102),
         31.738933927816092, 1.936141679711467),
        (("b200_sxm/trtllm/1.3.0rc20", "tp4pp1dp1etp4ep1", 64, 2048, 512),
         (3.23944091796875, 0.625, 4.6875, 0.3828125, 3.5, 12.43475341796875), 23.085378708688935,
         2.4278457057751903),
    ]:  # fmt: skip
        mem = estimate_memory(DENSE, db, parallel, batch, isl, osl, on_miss="error", data=variants)
        for key, want in zip(MEMORY_KEYS, memory):
            assert _same(mem[key + "_gib"], want), (db, key, mem[key + "_gib"], want)
        row = estimate_agg(DENSE, db, parallel, batch, isl, osl, on_miss="error", data=variants)
        assert _same(row["ttft_ms"], ttft) and _same(row["tpot_ms"], tpot)
    row = estimate_disagg(DENSE, DB, "tp2pp1dp1etp2ep1", 1, 1, "tp4pp1dp1etp4ep1", 64, 1, 8192, 1024, 0,
                          on_miss="error", data=variants)  # fmt: skip
    want = {"(p)memory": 11.022, "(d)memory": 16.673, "ttft": 54.288, "tpot": 2.713, "tokens/s/gpu": 3620.884}
    for key, value in want.items():
        assert _same(row[DISAGG_FIELDS[key]], value), (key, row[DISAGG_FIELDS[key]], value)


@needs_data
def test_gemma4_context_parallelism_equals_the_spec(variants):
    """families_qwen35_gemma4 3.7 on the 131072-vocabulary variant, the spec's own
    TTFT / TPOT (in process, same config; /work/diag/gemma4_cp/spec_cp.py), on
    the Python path and through the Rust `step_latency`."""
    import aicsql

    ctx = aicsql.context(data=variants)
    for db, etp, eep, b, isl, osl, cp, ttft, tpot in [
        ("h200_sxm/sglang/0.5.14", 1, 2, 2, 4096, 20, 2, 180.75291296657429, 4.240314420721083),
        ("b200_sxm/sglang/0.5.14", 2, 2, 1, 8192, 40, 4, 51.77830103242176, 2.9047448755817427),
        ("gb200/sglang/0.5.14", 1, 8, 4, 2048, 20, 8, 60.928724281470394, 3.381539892739925),
    ]:  # fmt: skip
        step = step_context(open_tree(variants), V128K, Database(*db.split("/")), True)
        assert step.run("context", 1, b, isl, osl, etp, eep, cp=cp).total_ms == ttft, (db, cp)
        for phase, want in (("context", ttft), ("generation", tpot)):
            got = ctx.sql(f"SELECT step_latency('{V128K}', '{db}', '{phase}', 1, {b}, {isl}, {osl}, {etp}, {eep}, "
                          f"1, 1, {cp}) AS v").to_pylist()[0]["v"]  # fmt: skip
            assert got == want, (db, cp, phase, got, want)
