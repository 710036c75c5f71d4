"""The Python path's engine step against the spec's family goldens, bit for
bit: wave 1 -- GPT-OSS, fp8-static checkpoints, Qwen3-VL / Qwen3-VL-MoE
(text path), HYBRIDMOE (Llama-4, MiMo-V2-Flash), DeepSeek and Kimi (MLA)
(docs/spec/families_mla_gptoss_fp8static.md, families_hybrid_vl_databases.md)
-- and the wave-2 families QWEN35 (Qwen3.5, with the GDN table) and GEMMA4MIX
(Gemma 4) (docs/spec/families_qwen35_gemma4.md), NEMOTRONH (Nemotron-3, with
the Mamba-2 table) and NEMOTRONNAS (Llama-3.3-Nemotron-Super)
(docs/spec/families_nemotron.md).

Goldens: ``$AICSQL_GOLDENS``, else ``<repo>/tests/goldens``
(``family_step_goldens.parquet``; the other ``wave == 2`` families are left
for later and must stay refused). Data: the cache rule. Missing data or
goldens FAIL these tests.
"""

from __future__ import annotations

import collections
import json
import math
import os
import sys
import types
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from _support import have_data, require

try:
    import aicsql.spec  # noqa: F401
except ImportError:
    # `aicsql/__init__.py` loads the compiled Rust extension; the Python path is
    # pure Python and is tested without it: mount `aicsql` as a bare package.
    _package = types.ModuleType("aicsql")
    _package.__path__ = [str(Path(__file__).resolve().parents[1] / "aicsql")]
    sys.modules["aicsql"] = _package
    import aicsql.spec  # noqa: F401

from aicsql.spec import data_dirs, engine_step, open_tree, step_latency, step_latency_batch
from aicsql.spec.data import Database
from aicsql.spec.kernels import kernels_for
from aicsql.spec.kernels.gdn import CHUNK_RULE, CONV1D_FN, CONV1D_UPDATE, DECODE_RULE, GDNShape
from aicsql.spec.kernels import MOE_QUANTS, mamba2
from aicsql.spec.kernels.mamba2 import Mamba2Shape
from aicsql.spec.serving.api import estimate_agg, estimate_memory
from aicsql.spec.step import step_context
from aicsql.spec.step.api import engine_step_table
from aicsql.spec.step.families import build_ops, nemotron_nas
from aicsql.spec.step.model import parse_model

REPO = Path(__file__).resolve().parents[2]
GOLDENS = Path(os.environ.get("AICSQL_GOLDENS") or REPO / "tests" / "goldens")
FAMILY_GOLDENS = GOLDENS / "family_step_goldens.parquet"

VALUE_COLUMNS = ("latency_ms", "total_ms", "weighted_total_ms")
LABEL_COLUMNS = ("op_name", "op_kind", "count", "quant", "lookup_table", "lookup_args", "interp_path")
COMPOSITE_KINDS = ("FallbackOp", "OverlapOp")

# The family each wave-1 model stands for.
FAMILY_OF = {
    "openai/gpt-oss-120b": "GPT-OSS",
    "openai/gpt-oss-20b": "GPT-OSS",
    "Qwen/Qwen3-32B-FP8-Static-PerTensor": "fp8-static",
    "nvidia/Llama-3.1-70B-Instruct-FP8": "fp8-static",
    "Qwen/Qwen3-VL-8B-Instruct": "Qwen3-VL",
    "Qwen/Qwen3-VL-30B-A3B-Instruct": "Qwen3-VL",
    "meta-llama/Llama-4-Scout-17B-16E-Instruct": "HYBRIDMOE",
    "meta-llama/Llama-4-Maverick-17B-128E-Instruct": "HYBRIDMOE",
    "XiaomiMiMo/MiMo-V2-Flash": "HYBRIDMOE",
    "deepseek-ai/DeepSeek-V3": "MLA",
    "nvidia/DeepSeek-V3.1-NVFP4": "MLA",
    "moonshotai/Kimi-K2.5": "MLA",
}
# The wave-2 models this path prices, and their family.
WAVE_2_FAMILY_OF = {
    "Qwen/Qwen3.5-27B": "QWEN35",
    "Qwen/Qwen3.5-35B-A3B": "QWEN35",
    "google/gemma-4-26B-A4B": "GEMMA4MIX",
    "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16": "NEMOTRONH",
    "nvidia/Llama-3_3-Nemotron-Super-49B-v1": "NEMOTRONNAS",
    "deepseek-ai/DeepSeek-V3.2": "DEEPSEEKV32",
    "nvidia/GLM-5.2-NVFP4": "DEEPSEEKV32",
    "deepseek-ai/DeepSeek-V4-Flash": "DEEPSEEKV4",
}
QWEN35_GEMMA4 = {m: f for m, f in WAVE_2_FAMILY_OF.items() if f in ("QWEN35", "GEMMA4MIX")}
NEMOTRON = {m: f for m, f in WAVE_2_FAMILY_OF.items() if f.startswith("NEMOTRON")}
DSA = {m: f for m, f in WAVE_2_FAMILY_OF.items() if f == "DEEPSEEKV32"}
DSV4 = {m: f for m, f in WAVE_2_FAMILY_OF.items() if f == "DEEPSEEKV4"}
# Ops whose lookup answers with a SOL instead of missing: the goldens' source column is compared.
SOURCED_KINDS = ("GDNKernel", "Mamba2Kernel")

needs_data = require(have_data(open_tree), f"no perf data under {data_dirs()} (run the fetch step)")
needs_goldens = require(FAMILY_GOLDENS.is_file(), f"no family goldens at {FAMILY_GOLDENS}")


def _int_or_none(v):
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else int(v)


def _config_args(r: dict) -> tuple:
    """(model, db, tp, batch, isl, osl, moe_tp, moe_ep) of a golden row."""
    return (r["model"], f"{r['system']}/{r['backend']}/{r['version']}", r["tp"], r["batch"], r["isl"], r["osl"],
            _int_or_none(r["moe_tp"]), _int_or_none(r["moe_ep"]))  # fmt: skip


def ulps(a: float, b: float) -> int:
    """How many representable doubles lie between a and b."""
    import struct

    def key(x):
        i = struct.unpack("<q", struct.pack("<d", x))[0]
        return i if i >= 0 else -(i & 0x7FFFFFFFFFFFFFFF)

    return abs(key(a) - key(b))


def first_query(query_args: dict):
    """The first table lookup the golden recorded for an op: its own db
    queries, then its sub-ops' depth first (mem_op is not a table)."""
    for q in query_args.get("db_queries", []):
        if q["method"] != "query_mem_op":
            return q
    for sub in query_args.get("sub_ops", []):
        found = first_query(sub)
        if found is not None:
            return found
    return None


@pytest.fixture(scope="module")
def golden_groups():
    rows = pq.read_table(FAMILY_GOLDENS).to_pylist()
    groups = collections.OrderedDict()
    for r in rows:
        groups.setdefault((r["wave"], r["config_id"], r["phase"]), []).append(r)
    return groups


def _check_golden_rows(golden_groups, families: dict, wave: int):
    """Every op row of the `wave` configs of the models in `families` (total_ms,
    latency_ms = total/count, weighted total, labels), every __gen_step_total__
    and both __step_total__ values, bit for bit; GDN and Mamba-2 rows also their source.
    Returns the bit-identical row counts per family."""
    wrong: list = []
    labels_wrong: list = []
    per_family = collections.defaultdict(collections.Counter)
    for (w, config_id, phase), rows in golden_groups.items():
        if w != wave or rows[0]["model"] not in families:
            continue
        model, db, tp, batch, isl, osl, moe_tp, moe_ep = _config_args(rows[0])
        family = families[model]
        result = engine_step(model, db, phase, tp, batch, isl, osl, moe_tp, moe_ep)
        per_family[family]["config-phases"] += 1
        mine = {(m["row_kind"], m["gen_step_index"], m["op_index"]): m for m in result["rows"]}
        assert len(mine) == len(result["rows"]) == len(rows), (config_id, phase, len(mine), len(rows))
        for g in rows:
            key = (g["row_kind"], _int_or_none(g["gen_step_index"]), g["op_index"])
            m = mine.get(key)
            assert m is not None, (config_id, phase, key)
            where = (config_id, phase, g["op_name"], _int_or_none(g["gen_s"]))
            for col in VALUE_COLUMNS:
                if m[col] != g[col]:
                    wrong.append((where, col, m[col], g[col], ulps(m[col], g[col])))
            per_family[family][g["row_kind"] + " rows"] += 1
            if g["row_kind"] == "op":
                for col in LABEL_COLUMNS:
                    got, want = m[col], g[col]
                    if col == "count":
                        got = float(got)
                    if g["op_kind"] in COMPOSITE_KINDS and col in ("lookup_table", "lookup_args"):
                        # The goldens leave a composite's lookup empty; ours is its first lookup.
                        first = first_query(json.loads(g["query_args"]))
                        want = json.dumps({"args": first["args"], "kwargs": first["kwargs"]}) \
                            if col == "lookup_args" else None  # fmt: skip
                        if col == "lookup_table":
                            continue  # the golden query records name the method, checked through the args
                    if got != want:
                        labels_wrong.append((where, col, got, want))
                if g["op_kind"] in SOURCED_KINDS and m["source"] != g["source"]:
                    labels_wrong.append((where, "source", m["source"], g["source"]))
            if g["row_kind"] == "step_total":
                col = "ttft_ms" if phase == "context" else "tpot_ms"
                if result["total_ms"] != g[col] or m[col] != g[col]:
                    wrong.append((where, col, result["total_ms"], g[col], ulps(result["total_ms"], g[col])))
                latency_col = "context_latency_ms" if phase == "context" else "generation_latency_ms"
                if result["phase_latency_ms"] != g[latency_col]:
                    wrong.append((where, latency_col, result["phase_latency_ms"], g[latency_col]))
                want_quants = {c: g[c + "_quant"] for c in ("gemm", "moe", "fmha", "comm")}
                want_quants["kvcache"] = g["kvcache_quant"]
                assert {k: result["quants"][k] for k in want_quants} == want_quants, where
    print(f"\nfamily goldens (wave {wave}), bit-identical rows per family:")
    for family, counts in sorted(per_family.items()):
        print(f"  {family}: " + ", ".join(f"{v} {k}" for k, v in sorted(counts.items())))
    assert not wrong, f"{len(wrong)} values differ, first: {wrong[:5]}"
    assert not labels_wrong, f"{len(labels_wrong)} labels differ, first: {labels_wrong[:5]}"
    return per_family


@needs_data
@needs_goldens
def test_every_wave_1_golden_row(golden_groups):
    per_family = _check_golden_rows(golden_groups, FAMILY_OF, 1)
    assert sum(c["config-phases"] for c in per_family.values()) == 52


@needs_data
@needs_goldens
def test_every_qwen35_and_gemma4_golden_row(golden_groups):
    """families_qwen35_gemma4 6.1: Qwen3.5-27B, Qwen3.5-35B-A3B and
    gemma-4-26B-A4B on b200_sxm/sglang/0.5.14, tp 2, B 1 x isl 1024 and B 8 x
    isl 4096: 830 op rows (the 40 GDN rows exact hits of query_gdn, source
    silicon), 24 decode-step totals, 12 phase totals -- all bit for bit."""
    per_family = _check_golden_rows(golden_groups, QWEN35_GEMMA4, 2)
    assert per_family["QWEN35"]["config-phases"] == 8 and per_family["GEMMA4MIX"]["config-phases"] == 4
    assert sum(c["op rows"] for c in per_family.values()) == 830
    assert sum(c["gen_step_total rows"] for c in per_family.values()) == 24
    assert sum(c["step_total rows"] for c in per_family.values()) == 12


@needs_data
@needs_goldens
def test_every_nemotron_golden_row(golden_groups):
    """families_nemotron 5.1: NVIDIA-Nemotron-3-Nano-30B-A3B-BF16 (tp 2, etp 1,
    ep 2) and Llama-3_3-Nemotron-Super-49B-v1 (tp 2) on h200_sxm/vllm/0.24.0, B 1
    x isl 1024 and B 8 x isl 4096: 1,810 op rows (Nano 23 ops per phase, every
    Mamba-2 row a SOL fallback with source sol; Super-49B 158 ops per phase in
    25 block groups), 16 decode-step totals, 8 phase totals -- all bit for
    bit. The Super-49B totals need the per-name summation (2.6)."""
    per_family = _check_golden_rows(golden_groups, NEMOTRON, 2)
    assert per_family["NEMOTRONH"]["config-phases"] == 4 and per_family["NEMOTRONNAS"]["config-phases"] == 4
    assert per_family["NEMOTRONH"]["op rows"] == 2 * (23 + 4 * 23)
    assert per_family["NEMOTRONNAS"]["op rows"] == 2 * (158 + 4 * 158)
    assert sum(c["op rows"] for c in per_family.values()) == 1810
    assert sum(c["gen_step_total rows"] for c in per_family.values()) == 16
    assert sum(c["step_total rows"] for c in per_family.values()) == 8


@needs_data
@needs_goldens
def test_every_dsa_golden_row(golden_groups):
    """families_dsa 9.1: DeepSeek-V3.2 (h200_sxm/sglang/0.5.14) and
    GLM-5.2-NVFP4 (b200_sxm/trtllm/1.3.0rc20), tp 8 / etp 1 / ep 8, B 1 x isl
    1024 and B 8 x isl 4096: 164 op rows (13 context and 7 generation ops;
    the DSA modules exact hits and seq interpolations), 16 decode-step totals,
    8 phase totals, the quant columns (fmha bfloat16 in both phases) -- all
    bit for bit."""
    per_family = _check_golden_rows(golden_groups, DSA, 2)
    assert per_family["DEEPSEEKV32"]["config-phases"] == 8
    assert per_family["DEEPSEEKV32"]["op rows"] == 4 * (13 + 4 * 7) == 164
    assert per_family["DEEPSEEKV32"]["gen_step_total rows"] == 16
    assert per_family["DEEPSEEKV32"]["step_total rows"] == 8


@needs_data
@needs_goldens
def test_every_dsv4_golden_row(golden_groups):
    """families_dsv4 8: DeepSeek-V4-Flash on b200_sxm/sglang/0.5.14, tp 8 / etp 1
    / ep 8, B 1 x isl 1024 and B 8 x isl 4096: 112 op rows (16 context and 10
    generation ops: mHC and attention modules from the last-wins tables, CSA
    values less the top-k calibration delta, the decode MoE overlap), 8
    decode-step totals, 4 phase totals, the quant columns (moe
    w4a8_mxfp4_mxfp8_trtllm, kv fp8, fmha bfloat16) -- all bit for bit. More
    DeepSeek-V4 checks: test_spec_family_dsv4.py."""
    per_family = _check_golden_rows(golden_groups, DSV4, 2)
    assert per_family["DEEPSEEKV4"]["config-phases"] == 4
    assert per_family["DEEPSEEKV4"]["op rows"] == 2 * (16 + 4 * 10) == 112
    assert per_family["DEEPSEEKV4"]["gen_step_total rows"] == 8
    assert per_family["DEEPSEEKV4"]["step_total rows"] == 4


@needs_data
@needs_goldens
def test_gen_step_totals_are_the_golden_writer_s_op_order_sums(golden_groups):
    """A ``__gen_step_total__`` row is the plain op-order sum of its step's op
    rows (what the golden writer printed, and what the rows give bit for bit,
    test above). The spec never forms that number: its decode total sums each
    step per op *name* first (families_hybrid 1.7, 6.2 item 14). Where two ops
    share a name the two sums can differ in the last ulp: 7 of the 104 wave-1
    rows (Scout x2, Maverick, MiMo x3, gpt-oss-20b), each by 1 ulp."""
    differ = _gen_step_total_differences(golden_groups, 1, FAMILY_OF)
    assert len(differ) == 104
    differ = [d for d in differ if d[2]]
    assert len(differ) == 7 and all(u == 1 for *_, u in differ), differ


@needs_data
@needs_goldens
def test_gemma4_gen_step_totals_differ_from_the_per_name_sums(golden_groups):
    """families_qwen35_gemma4 3.6: Gemma's two attention ops share a name; 2 of
    its 8 decode-step totals differ from the per-name sum in the last ulp.
    Qwen3.5's op names are all distinct: its 16 agree."""
    differ = _gen_step_total_differences(golden_groups, 2, QWEN35_GEMMA4)
    assert len(differ) == 24
    differ = [d for d in differ if d[2]]
    assert len(differ) == 2 and all(d[0] == "google/gemma-4-26B-A4B" and d[2] == 1 for d in differ), differ


def _gen_step_total_differences(golden_groups, wave: int, families: dict) -> list:
    """(model, step index, ulps between the golden total and the per-name sum) per decode step."""
    differ = []
    for (w, config_id, phase), rows in golden_groups.items():
        if w != wave or phase != "generation" or rows[0]["model"] not in families:
            continue
        result = engine_step(*_config_args(rows[0])[:2], phase, *_config_args(rows[0])[2:])
        for total in (r for r in result["rows"] if r["row_kind"] == "gen_step_total"):
            by_name = {}
            for r in result["rows"]:
                if r["row_kind"] == "op" and r["gen_step_index"] == total["gen_step_index"]:
                    by_name[r["op_name"]] = by_name.get(r["op_name"], 0.0) + r["total_ms"]
            per_name = 0
            for v in by_name.values():
                per_name += v
            differ.append((config_id.split("|")[0], total["gen_step_index"], ulps(per_name, total["total_ms"])))
    return differ


@needs_data
@needs_goldens
def test_composite_lookups_name_their_table(golden_groups):
    """A FallbackOp / OverlapOp row's lookup_table is the file of its first lookup."""
    methods = {"query_context_mla_module": "mla_context_module_perf",
               "query_generation_mla_module": "mla_generation_module_perf", "query_gemm": "gemm_perf"}  # fmt: skip
    checked = 0
    for (wave, config_id, phase), rows in golden_groups.items():
        composites = [g for g in rows if wave == 1 and g["op_kind"] in COMPOSITE_KINDS and g["gen_step_index"] in
                      (None, 0.0)]  # fmt: skip
        if not composites:
            continue
        result = engine_step(*_config_args(rows[0])[:2], phase, *_config_args(rows[0])[2:])
        mine = {(m["op_name"], m["gen_step_index"]): m for m in result["rows"] if m["row_kind"] == "op"}
        for g in composites:
            m = mine[(g["op_name"], _int_or_none(g["gen_step_index"]))]
            assert m["lookup_table"] == methods[first_query(json.loads(g["query_args"]))["method"]], (config_id,)
            assert m["interp_path"] is None and m["quant"] == ""
            checked += 1
    assert checked == 24  # 8 MLA configs x (context block, first decode step's block and overlap)


# ---- wave 2 and unknown architectures stay refused -------------------------------------------------


@needs_data
@needs_goldens
def test_wave_2_families_stay_refused(golden_groups):
    families = {}  # every wave-2 family of the goldens is priced now
    seen = set()
    for (wave, _config_id, phase), rows in golden_groups.items():
        if wave != 2 or rows[0]["model"] in WAVE_2_FAMILY_OF:
            continue
        model, db, tp, batch, isl, osl, moe_tp, moe_ep = _config_args(rows[0])
        with pytest.raises(ValueError) as e:
            engine_step(model, db, phase, tp, batch, isl, osl, moe_tp, moe_ep)
        family = families[model]
        assert f"family {family}); the {family} family is left for later" in str(e.value), str(e.value)
        seen.add(model)
    assert seen == set(families)
    with pytest.raises(ValueError, match=r"MiniMaxM3ForCausalLM, family MINIMAXM3"):
        step_latency("MiniMaxAI/MiniMax-M3", "h200_sxm/sglang/0.5.14", "context", 8, 1, 1024, 128, 1, 8)
    with pytest.raises(ValueError, match=r"unsupported architecture 'KimiK3ForConditionalGeneration'"):
        step_latency("moonshotai/Kimi-K3", "h200_sxm/sglang/0.5.14", "context", 8, 1, 1024, 128, 1, 8)


# ---- walkthroughs of the docs, one value each -----------------------------------------------------


def _op(rows, name, step=None, index=0):
    found = [r for r in rows if r["row_kind"] == "op" and r["op_name"] == name and r["gen_step_index"] == step]
    return found[index]


@needs_data
def test_deepseek_module_values_are_the_last_source_s():
    """families_mla 8.2 / 7.2: the module tables are last-wins, so the vllm
    0.19.0 cross-backend row (0.2281) prices DeepSeek-V3 on trtllm, not the
    requested version's own 0.173."""
    ctx = engine_step("deepseek-ai/DeepSeek-V3", "h200_sxm/trtllm/1.3.0rc20", "context", 8, 1, 1024, 128, 1, 8)
    block = _op(ctx["rows"], "context_mla_block")
    assert block["total_ms"] == 0.2281 * 61.0 and block["lookup_table"] == "mla_context_module_perf"
    assert ctx["total_ms"] == 66.95556623232294
    assert ctx["quants"]["fmha"] == "bfloat16"  # the context_mla guard (families_mla 2.4)
    gen = engine_step("deepseek-ai/DeepSeek-V3", "h200_sxm/trtllm/1.3.0rc20", "generation", 8, 1, 1024, 128, 1, 8)
    assert gen["quants"]["fmha"] == "fp8"
    assert _op(gen["rows"], "generation_moe_overlap", 0)["total_ms"] == 3.261889624247948


@needs_data
def test_deepseek_granular_fallback_on_sglang():
    """families_mla 8.2: sglang has no module table; the block is the sum of
    the granular ops, and its lookup is the first of them."""
    ctx = engine_step("deepseek-ai/DeepSeek-V3", "h200_sxm/sglang/0.5.14", "context", 8, 1, 1024, 128, 1, 8)
    block = _op(ctx["rows"], "context_mla_block")
    assert block["total_ms"] == 10.907892898747095
    assert json.loads(block["lookup_args"]) == {"args": [1024, 2112, 7168, "fp8_block"], "kwargs": {}}
    assert ctx["total_ms"] == 68.87797845324936


@needs_data
def test_gpt_oss_attention_ops_share_one_entry():
    """families_mla 8.4: the windowed attention comes first and both attention
    ops sum into one entry, first in the TTFT sum."""
    ctx = engine_step("openai/gpt-oss-120b", "h200_sxm/vllm/0.24.0", "context", 4, 1, 1024, 128, 1, 4)
    windowed, full = _op(ctx["rows"], "context_attention"), _op(ctx["rows"], "context_attention", index=1)
    assert (windowed["op_index"], full["op_index"]) == (0, 4)
    assert json.loads(windowed["lookup_args"])["kwargs"] == {"window_size": 128, "head_size": 64}
    assert windowed["total_ms"] == 0.5150663891495705 and full["total_ms"] == 0.7700423860610962
    assert ctx["total_ms"] == 23.92758433474661
    assert ctx["quants"]["moe"] == "w4a16_mxfp4"


@needs_data
def test_fp8_static_gemm_subtracts_both_tables():
    """families_mla 8.5: proj = (G - compute_scale) - scale_matrix."""
    ctx = engine_step("Qwen/Qwen3-32B-FP8-Static-PerTensor", "h200_sxm/trtllm/1.3.0rc20", "context", 2, 1, 1024, 128)
    proj = _op(ctx["rows"], "context_proj_gemm")
    assert proj["total_ms"] == ((0.05035733183224996 - 0.010022400071223578) - 0.0039381332695484165) * 64
    assert proj["quant"] == "fp8_static" and proj["interp_path"] == "exact_hit"
    assert ctx["total_ms"] == 39.51187354344215
    # vllm 0.19.0 has no compute-scale table: the step misses there, naming it.
    with pytest.raises(ValueError, match=r"context_qkv_gemm: perf data not available in computescale_perf"):
        engine_step("Qwen/Qwen3-32B-FP8-Static-PerTensor", "h200_sxm/vllm/0.19.0", "context", 2, 1, 1024, 128)


@needs_data
def test_hybrid_scout_walkthrough():
    """families_hybrid 5.2: Scout on gb200 vllm 0.24.0, tp4 etp4 ep1, B1."""
    ctx = engine_step("meta-llama/Llama-4-Scout-17B-16E-Instruct", "gb200/vllm/0.24.0", "context", 4, 1, 1024, 128,
                      4, 1)  # fmt: skip
    rows = ctx["rows"]
    assert _op(rows, "context_global_qkv_gemm")["total_ms"] == 0.33919979097161057
    assert _op(rows, "context_global_proj_gemm")["total_ms"] == 0.25999878007877303  # the tie, 1.8 (2)
    assert _op(rows, "context_attention", index=1)["total_ms"] == 0.9243175445510559  # window 8192
    assert _op(rows, "context_global_moe_pre_dispatch")["quant"] == "None"
    assert not any("router" in r["op_name"] for r in rows)  # E = 16 < 128
    assert ctx["total_ms"] == 19.960800166727523


@needs_data
def test_qwen3_vl_has_no_qk_norm():
    """families_hybrid 5.4: the VL text path prices attention without q/k-norm."""
    ctx = engine_step("Qwen/Qwen3-VL-8B-Instruct", "a100_sxm/vllm/0.14.0", "context", 1, 1, 1024, 128)
    assert _op(ctx["rows"], "context_attention")["total_ms"] == 3.9577166257644585


# ---- QWEN35 / GEMMA4MIX (families_qwen35_gemma4.md) ------------------------------------------------

S27 = GDNShape(5120, 16, 128, 48, 128, 4)  # Qwen3.5-27B's GDN shape (unsharded)
QWEN_DB = "b200_sxm/sglang/0.5.14"


def _gdn(db: str):
    return kernels_for(open_tree(), Database(*db.split("/"))).gdn


@needs_data
def test_gdn_table_sources_and_lookups():
    """families_qwen35_gemma4 2.1 - 2.4 on the goldens' database: the source
    union with the cross-backend channel, the SOLs, an exact hit, a grid
    interpolation, util-holds on both axes, the same-d_model fallback and the
    SOL fallbacks (the spec's query_gdn answers)."""
    gdn = _gdn(QWEN_DB)
    assert [(f.channel, f.backend, f.version) for f in gdn.sources] == [
        ("primary", "sglang", "0.5.14"), ("older", "sglang", "0.5.9"), ("cross", "trtllm", "1.3.0rc20"),
        ("cross", "trtllm", "1.3.0rc10"), ("cross", "vllm", "0.24.0"), ("cross", "vllm", "0.19.0")]  # fmt: skip
    assert gdn.sources[2].kernel_sources == {CONV1D_FN, CONV1D_UPDATE, "fused_recurrent_gated_delta_rule"}
    assert gdn.sources[4].kernel_sources == {CONV1D_UPDATE}
    assert gdn.sol("context", CONV1D_FN, 1, 1024, S27) == 0.013073155324675324
    assert gdn.sol("context", CHUNK_RULE, 1, 1024, S27) == 0.010758117402597403
    assert gdn.sol("context", CHUNK_RULE, 8, 4096, S27) == 0.3344548903896104
    assert gdn.sol("generation", DECODE_RULE, 1, None, S27) == 0.0004122597402597402
    assert gdn.sol("generation", DECODE_RULE, 1024, None, S27) == 0.422153974025974
    assert gdn.query("context", CONV1D_FN, 1, 1024, S27) == (0.016307200193405154, "exact_hit", "silicon")
    assert gdn.query("context", CHUNK_RULE, 3, 1500, S27) == (0.3898073989152908, "grid_interpolation", "silicon")
    assert gdn.query("context", CHUNK_RULE, 8, 50000, S27) == (32.7953085610669, "grid_util_hold", "silicon")
    assert gdn.query("generation", DECODE_RULE, 2048, None, S27) == (2.019859161376953, "grid_util_hold", "silicon")
    # sglang's decode recurrence is the renamed packed-decode rows
    assert gdn.query("generation", DECODE_RULE, 1, None, S27) == (0.0049513599276542666, "exact_hit", "silicon")
    # same d_model, nearest num_v_heads (40 -> the 48-head key)
    assert gdn.query("context", CHUNK_RULE, 3, 1500, S27._replace(num_v_heads=40))[0] == 0.3898073989152908
    # never a miss: unknown d_model, unknown kernel, batch 0 -> the SOL, tagged so
    for args in ((CHUNK_RULE, 3, 1500, S27._replace(d_model=6000)), ("nonexistent_kernel", 3, 100, S27),
                 (CHUNK_RULE, 0, 1024, S27)):  # fmt: skip
        assert gdn.query("context", *args) == (gdn.sol("context", *args), None, "sol"), args
    assert gdn.query("context", CHUNK_RULE, 3, 1500, S27._replace(d_model=6000))[0] == 0.04617096311688312


@needs_data
def test_gdn_vllm_alias_is_keyed_on_0_24_0():
    """families_qwen35_gemma4 2.3 step 3: vllm 0.24.0 prices the scan with its
    ``chunk_gated_delta_rule_flashinfer`` rows; the other vllm versions (0.27.0
    included) have no scan rows at all and fall back to the SOL."""
    v24 = _gdn("b200_sxm/vllm/0.24.0")
    assert S27 not in v24.root.get(CHUNK_RULE, {}).get("context", {})
    assert v24.query("context", CHUNK_RULE, 1, 1024, S27) == (0.05762432098388672, "exact_hit", "silicon")
    for db in ("b200_sxm/vllm/0.22.0", "gb300/vllm/0.27.0"):
        gdn = _gdn(db)
        assert gdn.query("context", CHUNK_RULE, 1, 1024, S27) == (gdn.sol("context", CHUNK_RULE, 1, 1024, S27),
                                                                   None, "sol"), db  # fmt: skip


@needs_data
def test_qwen35_gdn_sol_rows_carry_source_sol():
    """On vllm 0.22.0 both context GDN kernels of Qwen3.5-27B are priced at
    their SOL (appendix A, ``SSES``): the rows keep the query_gdn lookup,
    have no interp path and carry source "sol"; the step is not a miss."""
    ctx = engine_step("Qwen/Qwen3.5-27B", "b200_sxm/vllm/0.22.0", "context", 2, 1, 1024, 128)
    gdn = _gdn("b200_sxm/vllm/0.22.0")
    for name, kernel in (("context_gdn_conv1d", CONV1D_FN), ("context_gdn_scan", CHUNK_RULE)):
        row = _op(ctx["rows"], name)
        assert (row["op_kind"], row["lookup_table"], row["interp_path"], row["source"], row["quant"]) == \
            ("GDNKernel", "query_gdn", None, "sol", ""), row  # fmt: skip
        assert row["total_ms"] == 48 * gdn.sol("context", kernel, 1, 1024, S27)
    assert all(r["source"] is None for r in ctx["rows"] if r["row_kind"] == "op" and r["op_kind"] != "GDNKernel")


@needs_data
def test_qwen35_walkthroughs():
    """families_qwen35_gemma4 6.2: the 27B context and decode values, the
    35B-A3B context (its router and shared-up GEMMs share a shape)."""
    ctx = engine_step("Qwen/Qwen3.5-27B", QWEN_DB, "context", 2, 1, 1024, 128)
    rows = ctx["rows"]
    assert [r["op_name"] for r in rows if r["row_kind"] == "op"][:8] == [
        "context_embedding", "context_embedding_ar", "context_gdn_norm", "context_gdn_in_proj_gemm",
        "context_gdn_conv1d", "context_gdn_scan", "context_gdn_out_proj_gemm", "context_gdn_ar"]  # fmt: skip
    assert _op(rows, "context_gdn_in_proj_gemm")["total_ms"] == 3.3981507200242165
    assert _op(rows, "context_gdn_scan")["total_ms"] == 5.64252685546875
    assert _op(rows, "context_attention")["total_ms"] == 1.3610196462064035
    assert _op(rows, "context_logits_gemm")["total_ms"] == 0.19665465653900166
    assert ctx["total_ms"] == 30.887925287630633
    gen = engine_step("Qwen/Qwen3.5-27B", QWEN_DB, "generation", 2, 1, 1024, 128)
    recurrence = [r for r in gen["rows"] if r["op_name"] == "generation_gdn_recurrence"]
    assert [r["total_ms"] for r in recurrence] == [0.2376652765274048] * 4  # independent of the decode step
    assert json.loads(recurrence[0]["lookup_args"])["kwargs"]["seq_len"] is None
    assert gen["phase_latency_ms"] == 840.5605906631871 and gen["total_ms"] == 6.6185873280565914
    moe = engine_step("Qwen/Qwen3.5-35B-A3B", QWEN_DB, "context", 2, 1, 1024, 128, 1, 2)
    rows = moe["rows"]
    assert len([r for r in rows if r["row_kind"] == "op"]) == 31
    assert _op(rows, "context_gdn_router_gemm")["total_ms"] == _op(rows, "context_gdn_shared_up_gemm")["total_ms"] \
        == 0.19920000185569126  # fmt: skip
    assert _op(rows, "context_gdn_moe")["total_ms"] == 4.354598522186279
    assert _op(rows, "context_gdn_moe_pre_dispatch")["quant"] == "bfloat16"
    assert not any(r["op_name"].endswith("_ffn_ar") for r in rows)
    assert moe["total_ms"] == 13.623286832216833


@needs_data
def test_gemma4_walkthrough():
    """families_qwen35_gemma4 6.3: SWA group first, both attention ops summed
    into one entry, no all-reduce outside the MoE dispatches."""
    ctx = engine_step("google/gemma-4-26B-A4B", QWEN_DB, "context", 2, 1, 1024, 128, 1, 2)
    rows = [r for r in ctx["rows"] if r["row_kind"] == "op"]
    assert len(rows) == 27
    swa, glob = _op(rows, "context_attention"), _op(rows, "context_attention", index=1)
    assert (swa["op_index"], glob["op_index"]) == (3, 15)
    assert json.loads(swa["lookup_args"])["kwargs"] == {"window_size": 1024, "head_size": 256}
    assert json.loads(glob["lookup_args"])["kwargs"] == {"window_size": 0, "head_size": 512}
    assert swa["total_ms"] == 0.8881131359048571 and glob["total_ms"] == 0.22094628449548992
    assert json.loads(_op(rows, "context_global_qkv_gemm")["lookup_args"])["args"][1] == 4608  # k_eq_v
    assert _op(rows, "context_swa_moe_pre_dispatch")["total_ms"] == 0.37812601402401924
    assert not any(r["op_kind"] == "CustomAllReduce" for r in rows)
    assert ctx["total_ms"] == 15.047192039006676
    gen = engine_step("google/gemma-4-26B-A4B", QWEN_DB, "generation", 2, 1, 1024, 128, 1, 2)
    assert _op(gen["rows"], "generation_attention", 0)["total_ms"] == 0.2636060219010688
    assert gen["phase_latency_ms"] == 356.8382917768242


@needs_data
def test_gemma4_misses_at_the_first_missing_attention_slice():
    """families_qwen35_gemma4 4.3: on b200_sxm/sglang/0.5.10 the SWA context
    slice exists and the global one (head 512) misses; in decode the SWA
    slice (head 256, window 1024) misses first."""
    db = "b200_sxm/sglang/0.5.10"
    with pytest.raises(ValueError, match=r"^context_attention: .*query_context_attention\(1, 1024, 0, 8, 1, .*"
                                         r"window_size=0, head_size=512\)"):  # fmt: skip
        engine_step("google/gemma-4-26B-A4B", db, "context", 2, 1, 1024, 128, 1, 2)
    with pytest.raises(ValueError, match=r"^generation_attention: .*query_generation_attention\(1, 1025, 8, 4, .*"
                                         r"window_size=1024, head_size=256\)"):  # fmt: skip
        engine_step("google/gemma-4-26B-A4B", db, "generation", 2, 1, 1024, 128, 1, 2)
    with pytest.raises(ValueError, match=r"^context_attention: .*head_size=256"):
        engine_step("Qwen/Qwen3.5-27B", "h200_sxm/sglang/0.5.10", "context", 2, 1, 1024, 128)


@needs_data
def test_qwen35_and_gemma4_layouts():
    """families_qwen35_gemma4 1.2, 3.2, 3.7: QWEN35 refuses context
    parallelism on every backend and a dense QWEN35 attention dp; Gemma's CP
    context list ends with the SWA then the global KV all-gather; Gemma's
    serving estimate sizes its KV cache per layer type, the SWA layers capped
    at the window (families_qwen35_gemma4 9; test_spec_serving_gemma4.py)."""
    with pytest.raises(ValueError, match=r"Context parallelism \(cp_size=2\) is not supported for "
                                         r"model_family='QWEN35' on backend='sglang'"):  # fmt: skip
        step_latency("Qwen/Qwen3.5-35B-A3B", QWEN_DB, "context", 1, 1, 1024, 128, 1, 2, cp=2)
    with pytest.raises(ValueError, match=r"attention dp = 2 for 'Qwen/Qwen3.5-27B', a dense model"):
        step_latency("Qwen/Qwen3.5-27B", QWEN_DB, "context", 1, 1, 1024, 128, dp=2)
    ctx = step_context(open_tree(), "google/gemma-4-26B-A4B", Database(*QWEN_DB.split("/")), True)
    _, _, ops = ctx.layout("context", 1, 1, 2, cp=2)
    gathers = [(op.name, op.count, op.elements_per_token, op.gpus) for op in ops[-2:]]
    assert gathers == [("context_cp_all_gather_swa", 25, 8 * 256 * 2 * 2 / 2, 2),
                       ("context_cp_all_gather_global", 5, 2 * 512 * 2 * 2 / 2, 2)]  # fmt: skip
    assert [op.name for op in ops[-4:-2]] == ["context_logits_gemm", "context_p2p"]
    _, _, ops = ctx.layout("generation", 1, 1, 2, cp=2)
    assert {(op.attn_cp, op.is_context) for op in ops if op.kind == "MoEDispatch"} == {(2, False)}
    row = estimate_agg("google/gemma-4-26B-A4B", QWEN_DB, 2, 8, 1024, 128, None, None, 1, 2, on_miss="error")
    # 8 sequences of 1152 tokens at tp 2: 25 SWA layers x 4 kv heads x 256 capped at 1024 tokens,
    # 5 global layers x 1 kv head x 512 at all 1152, K and V, 2 bytes
    kv = 8 * float(25 * 4 * 256 * 2 * 2 * 1024 + 5 * 1 * 512 * 2 * 2 * 1152) / 1 / (1 << 30)
    assert row["reason"] is None and kv == 0.869140625
    assert estimate_memory("google/gemma-4-26B-A4B", QWEN_DB, 2, 8, 1024, 128, None, None, 1, 2)["kvcache_gib"] == kv


@needs_data
def test_engine_step_table_gdn_rows():
    """py_engine_step's GDN rows: lookup_table is the method, the grid axes
    fill the attention batch / sequence columns (sequence NULL in decode)."""
    rows = engine_step_table({"on_miss": "error"}, "Qwen/Qwen3.5-27B", QWEN_DB, "generation", 2, 1, 1024,
                             128).to_pylist()  # fmt: skip
    conv = next(r for r in rows if r["op_name"] == "generation_gdn_conv1d")
    assert (conv["lookup_table"], conv["attn_batch"], conv["attn_seq"], conv["heads"]) == ("query_gdn", 1, None, None)
    assert conv["lookup_args"].startswith('query_gdn {"args": [], "kwargs": {"phase": "generation", '
                                          '"kernel_source": "causal_conv1d_update", "batch_size": 1, "seq_len": null')
    rows = engine_step_table({"on_miss": "error"}, "Qwen/Qwen3.5-27B", QWEN_DB, "context", 2, 1, 1024, 128).to_pylist()
    scan = next(r for r in rows if r["op_name"] == "context_gdn_scan")
    assert (scan["attn_batch"], scan["attn_seq"], scan["interp_path"]) == (1, 1024, "exact_hit")


# ---- NEMOTRONH / NEMOTRONNAS (families_nemotron.md) --------------------------------------------------

NANO = "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16"
SUPER_49B = "nvidia/Llama-3_3-Nemotron-Super-49B-v1"
NEMOTRON_DB = "h200_sxm/vllm/0.24.0"
NANO_MAMBA = Mamba2Shape(2688, 128, 4, 64, 64, 8, 128)  # the Nano's model-level Mamba-2 key (unsharded)


def _mamba2(db: str):
    return kernels_for(open_tree(), Database(*db.split("/"))).mamba2


@needs_data
def test_mamba2_table_sources_and_lookups():
    """families_nemotron 3.1 - 3.2 on h200_sxm/trtllm/1.3.0rc20 (the spec's
    query_mamba2 answers): the two sources, the context key order, an exact
    hit, a grid interpolation, a seq util-hold, the first-same-d_model
    fallback, and the SOL for the scan kernels, every decode kernel (the
    loader keeps no decode row), an unknown d_model and a non-positive seq."""
    t = _mamba2("h200_sxm/trtllm/1.3.0rc20")
    assert [(f.channel, f.backend, f.version, f.path.split("/h200_sxm/")[1]) for f in t.sources] == [
        ("primary", "trtllm", "1.3.0rc20", "linear_attention/trtllm/1.3.0rc20/mamba2_perf.parquet"),
        ("older", "trtllm", "1.3.0rc10", "trtllm/1.3.0rc10/mamba2_perf.parquet")]  # fmt: skip
    assert list(t.root[mamba2.CONV1D_FN]["context"]) == [
        (8192, 128, 4, 64, 64, 8, 256), (1024, 64, 4, 16, 64, 4, 128), (2688, 128, 4, 64, 64, 8, 128),
        (4096, 128, 4, 128, 64, 8, 128), (8192, 256, 4, 256, 64, 8, 128), (8192, 128, 4, 256, 64, 8, 128)]  # fmt: skip
    # decode rows: a batch entry per row, never a latency (the spec loader's default-dict quirk)
    decode = t.root[mamba2.CONV1D_UPDATE]["generation"]
    assert decode and all(v == {} for curve in decode.values() for v in curve.values())
    assert mamba2.CHUNK_SCAN not in t.root and mamba2.STATE_UPDATE not in t.root
    conv = mamba2.CONV1D_FN
    assert t.query("context", conv, 1, 1024, NANO_MAMBA) == (0.014207999408245086, "exact_hit", "silicon")
    assert t.query("context", conv, 8, 4096, NANO_MAMBA) == (0.2630944013595581, "exact_hit", "silicon")
    assert t.query("context", conv, 3, 1500, NANO_MAMBA) == (0.04616535005334299, "grid_interpolation", "silicon")
    assert t.query("context", conv, 1, 50000, NANO_MAMBA) == (0.43905274651478976, "grid_util_hold", "silicon")
    # an unknown key of a known d_model: the first 8192 key (chunk 256), whatever its heads / state / groups
    other = Mamba2Shape(8192, 128, 4, 128, 64, 8, 128)
    assert t.query("context", conv, 1, 1024, other) == (0.01440960019826889, "exact_hit", "silicon")
    assert t.query("context", conv, 1, 1024, other) == t.query("context", conv, 1, 1024,
                                                                Mamba2Shape(8192, 128, 4, 64, 64, 8, 256))  # fmt: skip
    # never a miss: the SOL of the query, at the raw mem_bw
    for args, sol in ((("context", mamba2.CHUNK_SCAN, 1, 1024), 0.0043963733333333335),
                      (("generation", mamba2.CONV1D_UPDATE, 1, None), 1.536e-05),
                      (("generation", mamba2.CONV1D_UPDATE, 8, None), 0.00012288),
                      (("generation", mamba2.STATE_UPDATE, 1, None), 4.2933333333333334e-06),
                      (("context", conv, 1, 1024), 0.01572864)):  # fmt: skip
        shape = NANO_MAMBA._replace(d_model=3000) if args == ("context", conv, 1, 1024) else NANO_MAMBA
        assert t.sol(*args, shape) == sol, args
        assert t.query(*args, shape) == (sol, None, "sol"), args
    assert t.query("context", conv, 1, 0, NANO_MAMBA) == (t.sol("context", conv, 1, 0, NANO_MAMBA), None, "sol")


@needs_data
def test_mamba2_on_vllm_is_the_sol():
    """families_nemotron 3.1, 6.1 item 2: no vllm / sglang database has the
    file -- the table is not loaded and every kernel is its SOL, not a miss;
    the SOL does not shrink with tp (model-level dims) and has no 3 us floor."""
    t = _mamba2(NEMOTRON_DB)
    assert not t.loaded and t.sources == []
    assert t.query("context", mamba2.CONV1D_FN, 1, 1024, NANO_MAMBA) == (0.01572864, None, "sol")
    assert t.query("context", mamba2.CONV1D_FN, 8, 4096, NANO_MAMBA) == (0.50331648, None, "sol")
    for tp in (2, 8):
        ctx = engine_step(NANO, NEMOTRON_DB, "context", tp, 1, 1024, 128, 1, tp)
        conv = _op(ctx["rows"], "context_mamba_conv1d")
        assert conv["total_ms"] == 0.36175872 and (conv["source"], conv["interp_path"]) == ("sol", None)


@needs_data
def test_nemotron_gen_step_totals_differ_from_the_per_name_sums(golden_groups):
    """families_nemotron 2.6: Super-49B's op names repeat across its 25 block
    groups; at B 1 all four decode-step totals (the golden writer's op-order
    sums) differ from the per-name sums, at B 8 none. The Nano's names are
    distinct: its 8 agree."""
    differ = _gen_step_total_differences(golden_groups, 2, NEMOTRON)
    assert len(differ) == 16
    differ = [d for d in differ if d[2]]
    assert [(d[0], d[1]) for d in differ] == [(SUPER_49B, i) for i in (0, 32, 64, 96)], differ


@needs_data
def test_nemotron_h_walkthrough():
    """families_nemotron 5.2: the Nano at tp 2 etp 1 ep 2 on h200_sxm/vllm/0.24.0."""
    ctx = engine_step(NANO, NEMOTRON_DB, "context", 2, 1, 1024, 128, 1, 2)
    rows = [r for r in ctx["rows"] if r["row_kind"] == "op"]
    assert [r["op_name"] for r in rows] == [
        "context_embedding", "context_mamba_norm", "context_mamba_in_proj_gemm", "context_mamba_conv1d",
        "context_mamba_ssm", "context_mamba_out_proj_gemm", "context_mamba_ar", "context_attn_norm",
        "context_qkv_gemm", "context_attention", "context_proj_gemm", "context_attn_ar", "context_moe_norm",
        "context_shared_up_gemm", "context_shared_relu2", "context_shared_down_gemm", "context_router_gemm",
        "context_moe_pre_dispatch", "context_moe", "context_moe_post_dispatch", "context_moe_ar", "context_p2p",
        "context_logits_gemm"]  # fmt: skip
    assert _op(rows, "context_mamba_in_proj_gemm")["total_ms"] == 0.861303356709723
    ssm = _op(rows, "context_mamba_ssm")
    assert ssm["total_ms"] == 0.10111658666666667 and ssm["lookup_table"] == "query_mamba2"
    assert json.loads(ssm["lookup_args"])["kwargs"] == {
        "phase": "context", "kernel_source": "mamba_chunk_scan_combined", "batch_size": 1, "seq_len": 1024,
        "d_model": 2688, "d_state": 128, "d_conv": 4, "nheads": 64, "head_dim": 64, "n_groups": 8,
        "chunk_size": 128}  # fmt: skip
    assert _op(rows, "context_attention")["total_ms"] == 0.23598383416542051
    assert _op(rows, "context_shared_relu2")["total_ms"] == 0.11453386666666666
    moe = _op(rows, "context_moe")
    assert moe["total_ms"] == 10.817875146865845 and json.loads(moe["lookup_args"])["kwargs"]["is_gated"] is False
    assert _op(rows, "context_moe_pre_dispatch")["quant"] == "bfloat16"
    assert _op(rows, "context_logits_gemm")["total_ms"] == 0.08806286535132453
    assert ctx["total_ms"] == 17.242743611674857
    gen = engine_step(NANO, NEMOTRON_DB, "generation", 2, 1, 1024, 128, 1, 2)
    conv = [r for r in gen["rows"] if r["op_name"] == "generation_mamba_conv1d"]
    assert [r["total_ms"] for r in conv] == [0.00035328] * 4 and {r["count"] for r in conv} == {23.0}
    assert json.loads(conv[0]["lookup_args"])["kwargs"]["seq_len"] is None
    assert _op(gen["rows"], "generation_mamba_ssm", 0)["total_ms"] == 9.874666666666667e-05
    assert _op(gen["rows"], "generation_attention", 0)["total_ms"] == 0.07559255167434456
    assert [r["total_ms"] for r in gen["rows"] if r["row_kind"] == "gen_step_total"] == [
        2.830202344990245, 2.830343394985973, 2.83048489497203, 2.8306274949344488]  # fmt: skip
    assert gen["phase_latency_ms"] == 359.4624326613118 and gen["total_ms"] == 2.8304128556008803
    # B 8 x isl 4096: 32768 tokens beyond the MoE curve, util-held on the 2-GEMM (non-gated) SOL
    big = engine_step(NANO, NEMOTRON_DB, "context", 2, 8, 4096, 128, 1, 2)
    moe = _op(big["rows"], "context_moe")
    assert (moe["total_ms"], moe["interp_path"]) == (136.02427978515627, "grid_util_hold")
    assert _op(big["rows"], "context_mamba_conv1d")["total_ms"] == 11.57627904
    assert big["total_ms"] == 291.85355671447076


@needs_data
def test_non_gated_moe_sol():
    """families_nemotron 1.6: a non-gated MoE's util-hold divides the 2-GEMM
    SOL (5.2: beyond 16384 tokens the SOL is compute-bound, so the ratio --
    and the held value -- is the same with 3 GEMMs); the same slice queried
    gated gets its own grid (its SOL differs where memory-bound)."""
    moe = kernels_for(open_tree(), Database(*NEMOTRON_DB.split("/"))).moe
    q = MOE_QUANTS["bfloat16"]
    args = (2688, 1856, 6, 128, 1, 2, q, "power_law_1.01")
    system = moe.system
    assert system.moe_sol(16384, *args[:-1], gated=False) == 0.9917726554337715
    assert system.moe_sol(32768, *args[:-1], gated=False) == 1.983545310867543
    assert system.moe_sol(1, *args[:-1], gated=False) != system.moe_sol(1, *args[:-1], gated=True)
    assert moe.query(32768, *args, gated=False) == (5.91409912109375, "grid_util_hold")
    assert moe.query(1024, *args, gated=False) == moe.query(1024, *args, gated=True)  # one table, no gated key
    assert {key[-1] for key in moe._grids if key[1:-1] == ("bfloat16", "power_law_1.01", 6, 128, 2688, 1856, 1, 2)} \
        == {False, True}  # fmt: skip


@needs_data
def test_nemotron_h_variants_against_the_spec():
    """families_nemotron 1.3 - 1.5 beyond the goldens, against the spec run in
    process: Nemotron-H-56B (dense: Mamba, attention, MLP groups, 19 ops),
    Ultra-BF16 (pattern from layers_block_type, latent MoE: 25 ops, the
    experts on the latent width), the Nano on trtllm (context conv1d from the
    Mamba-2 table, source silicon), Super-120B-NVFP4 on trtllm (non-gated:
    no low-latency nvfp4 table), Ultra-FP8 (fp8_static GEMMs), the Nano with
    attention dp 2 and with pp 2."""
    dense = engine_step("nvidia/Nemotron-H-56B-Base-8K", NEMOTRON_DB, "context", 4, 2, 1500, 70)
    names = [r["op_name"] for r in dense["rows"] if r["row_kind"] == "op"]
    assert len(names) == 19 and names[12:17] == ["context_mlp_norm", "context_mlp_up_gemm", "context_mlp_relu2",
                                                 "context_mlp_down_gemm", "context_mlp_ar"]  # fmt: skip
    assert dense["total_ms"] == 149.05644533965054
    assert step_latency("nvidia/Nemotron-H-56B-Base-8K", NEMOTRON_DB, "generation", 4, 2, 1500, 70) == \
        8.626167079635776  # fmt: skip
    ultra, db = "nvidia/NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16", "b200_sxm/vllm/0.24.0"
    ctx = engine_step(ultra, db, "context", 8, 4, 2000, 40, 1, 8)
    rows = [r for r in ctx["rows"] if r["row_kind"] == "op"]
    names = [r["op_name"] for r in rows]
    assert len(rows) == 25 and names[16:23] == [
        "context_router_gemm", "context_fc1_latent_proj_gemm", "context_moe_pre_dispatch", "context_moe",
        "context_moe_post_dispatch", "context_fc2_latent_proj_gemm", "context_moe_ar"]  # fmt: skip
    assert json.loads(_op(rows, "context_fc1_latent_proj_gemm")["lookup_args"])["args"] == [8000, 256, 8192,
                                                                                          "bfloat16"]  # fmt: skip
    assert json.loads(_op(rows, "context_moe")["lookup_args"])["kwargs"]["hidden_size"] == 2048
    assert json.loads(_op(rows, "context_moe_pre_dispatch")["lookup_args"])["args"] == ["half", 8, 8000 * 2048]
    assert json.loads(_op(rows, "context_moe_ar")["lookup_args"])["args"] == ["half", 8, 8000 * 8192]
    assert _op(rows, "context_mamba_in_proj_gemm")["lookup_args"].startswith('{"args": [8000, 4384, 8192')
    assert [r["count"] for r in rows if r["op_name"].endswith("_norm")] == [48.0, 12.0, 48.0]
    assert ctx["total_ms"] == 198.9855297320276
    assert step_latency(ultra, db, "generation", 8, 4, 2000, 40, 1, 8) == 10.469494609065208
    trt = "h200_sxm/trtllm/1.3.0rc20"
    ctx = engine_step(NANO, trt, "context", 2, 1, 1024, 128, 1, 2)
    conv = _op(ctx["rows"], "context_mamba_conv1d")
    assert (conv["total_ms"], conv["interp_path"], conv["source"]) == (23 * 0.014207999408245086, "exact_hit",
                                                                        "silicon")  # fmt: skip
    assert _op(ctx["rows"], "context_mamba_ssm")["source"] == "sol"
    assert ctx["total_ms"] == 15.819801700582515
    assert step_latency(NANO, trt, "generation", 2, 1, 1024, 128, 1, 2) == 2.5177151739114074
    assert step_latency(NANO, trt, "context", 2, 2, 3000, 40, 1, 2) == 55.542718275128315
    super_fp4 = "nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4"
    assert step_latency(super_fp4, "b200_sxm/trtllm/1.3.0rc20", "context", 4, 4, 1000, 40, 1, 4) == \
        50.23302539854203  # fmt: skip
    assert step_latency(super_fp4, "b200_sxm/trtllm/1.3.0rc20", "generation", 4, 4, 1000, 40, 1, 4) == \
        7.453144612942332  # fmt: skip
    fp8 = engine_step("nvidia/NVIDIA-Nemotron-3-Ultra-550B-A55B-FP8", trt, "context", 8, 2, 1500, 40, 1, 8)
    assert fp8["quants"]["gemm"] == "fp8_static" and fp8["total_ms"] == 112.10785922200525
    assert step_latency(NANO, NEMOTRON_DB, "context", 1, 2, 1000, 40, 1, 2, dp=2) == 33.889751561175785
    assert step_latency(NANO, NEMOTRON_DB, "generation", 1, 2, 1000, 40, 1, 2, dp=2) == 4.400787938449186
    assert step_latency(NANO, "h200_sxm/sglang/0.5.14", "context", 2, 2, 1000, 40, 1, 4, dp=2) == \
        61.54485404792124  # fmt: skip
    ctx = engine_step(NANO, NEMOTRON_DB, "context", 2, 1, 1024, 128, 1, 2, pp=2)
    assert [r["op_name"] for r in ctx["rows"] if r["row_kind"] == "op"][-2:] == ["context_p2p", "context_logits_gemm"]
    assert ctx["total_ms"] == 17.36284409167486
    assert step_latency(NANO, NEMOTRON_DB, "generation", 2, 1, 1024, 128, 1, 2, pp=2) == 2.8405203756008803


@needs_data
def test_nemotron_nas_walkthrough():
    """families_nemotron 2.1 - 2.6, 5.3: Super-49B's 80 blocks in 25 groups,
    158 ops per phase, the FFN widths rounded up to 256, attention at head
    size 128, and the totals summed per op name (not in op order)."""
    model = step_context(open_tree(), SUPER_49B, Database(*NEMOTRON_DB.split("/")), True).model
    groups = model.nas_groups
    assert len(groups) == 25 and sum(g.count for g in groups) == 80
    assert [g.count for g in groups][:6] == [1, 5, 2, 3, 1, 30] and groups[-1].count == 9
    assert sum(g.count for g in groups if not g.attn_no_op) == 49 and not any(g.ffn_no_op for g in groups)
    assert model.kv_heads == 0 and model.kv_elements_per_token(2) == 0 and not model.is_moe
    widths = {g.ffn_mult: nemotron_nas.ffn_intermediate_size(g.ffn_mult, 8192) for g in groups}
    assert widths == {2.625: 14336, 5.25: 28672, 3.28125: 17920, 1.3125: 7168, 1.0: 5632, 0.5: 2816}
    ctx = engine_step(SUPER_49B, NEMOTRON_DB, "context", 2, 1, 1024, 128)
    rows = [r for r in ctx["rows"] if r["row_kind"] == "op"]
    assert len(rows) == 158 and [r["op_name"] for r in rows[-2:]] == ["context_p2p", "context_logits_gemm"]
    assert not any(r["op_name"] == "context_embedding_ar" for r in rows)
    group_2 = rows[11:21]
    assert [r["count"] for r in group_2] == [5.0] * 10
    assert [r["total_ms"] for r in group_2] == [
        0.10238133333333332, 0.5285777648289999, 0.24021599765634538, 0.424195561144087, 0.3828367948532104,
        0.10238133333333332, 3.063810848912633, 0.129688, 1.4471303071934272, 0.3828367948532104]  # fmt: skip
    assert json.loads(group_2[2]["lookup_args"]) == {"args": [1, 1024, 0, 32, 4, "bfloat16", "bfloat16"],
                                                     "kwargs": {"window_size": 0, "head_size": 128}}  # fmt: skip
    by_name: dict = {}
    for r in rows:
        by_name[r["op_name"]] = by_name.get(r["op_name"], 0.0) + r["total_ms"]
    assert list(by_name) == [
        "context_embedding", "context_add_norm_1", "context_qkv_gemm", "context_attention", "context_proj_gemm",
        "context_ar_1", "context_add_norm_2", "context_gate_ffn1_gemm", "context_act_gate", "context_ffn2_gemm",
        "context_ar_2", "context_p2p", "context_logits_gemm"]  # fmt: skip
    assert by_name["context_gate_ffn1_gemm"] == 35.01954972824888
    op_order = 0
    for r in rows:
        op_order += r["total_ms"]
    assert ctx["total_ms"] == 77.76732384736077 and op_order == 77.76732384736081
    gen = engine_step(SUPER_49B, NEMOTRON_DB, "generation", 2, 1, 1024, 128)
    assert {r["count"] for r in gen["rows"] if r["row_kind"] == "op"} == {1.0, 2.0, 3.0, 5.0, 9.0, 30.0, 0.0}
    assert gen["phase_latency_ms"] == 1922.7846617522084 and gen["total_ms"] == 15.140036706710303
    # other tp, against the spec run in process
    for tp, batch, isl, osl, ttft, tpot in ((1, 2, 512, 70, 137.19992039697212, 27.95368504098762),
                                            (4, 3, 2000, 50, 272.6091058704744, 8.749566423215366),
                                            (8, 16, 700, 33, 320.74551551996814, 6.620344649396944)):  # fmt: skip
        assert step_latency(SUPER_49B, NEMOTRON_DB, "context", tp, batch, isl, osl) == ttft, tp
        assert step_latency(SUPER_49B, NEMOTRON_DB, "generation", tp, batch, isl, osl) == tpot, tp


@needs_data
def test_nemotron_nas_counts_are_ints():
    """families_nemotron 2.2: NAS has no MTP factor, its generation counts are ints."""
    ctx = step_context(open_tree(), SUPER_49B, Database(*NEMOTRON_DB.split("/")), True)
    _, _, ops = ctx.layout("generation", 2)
    assert {type(op.count) for op in ops} == {int}
    _, _, ops = step_context(open_tree(), NANO, Database(*NEMOTRON_DB.split("/")), True).layout("generation", 2, 1, 2)
    assert {type(op.count) for op in ops} == {float}


def _super_49b_config() -> dict:
    model = step_context(open_tree(), SUPER_49B, Database(*NEMOTRON_DB.split("/")), True).model
    with open(model.config_path, encoding="utf-8") as f:
        return json.load(f)


@needs_data
def test_nemotron_nas_without_block_configs(caplog):
    """families_nemotron 2.1, 6.2 item 14: no block configs (or the
    NemotronForCausalLM architecture) -> both op lists empty, a warning, a
    step of latency 0 (TTFT the int 0, TPOT 0.0), no error."""
    config = _super_49b_config()
    del config["block_configs"]
    nemotron = dict(_super_49b_config(), architectures=["NemotronForCausalLM"])
    ctx = step_context(open_tree(), SUPER_49B, Database(*NEMOTRON_DB.split("/")), True)
    for cfg in (config, nemotron):
        model = parse_model("x/nas", cfg, None, "config.json")
        assert model.family == "NEMOTRONNAS" and model.nas_groups is None
        for phase in ("context", "generation"):
            par, q, _ = ctx.layout(phase, 2)
            with caplog.at_level("WARNING"):
                assert build_ops(model, phase, par, q, "vllm") == []
            assert "NemotronNAS model 'x/nas' missing block configs" in caplog.text
    context = ctx.run_ops("context", [], 1, 1024, 128)
    assert context.total_ms == 0 and type(context.total_ms) is int
    generation = ctx.run_ops("generation", [], 1, 1024, 128)
    assert generation.total_ms == 0.0 and type(generation.total_ms) is float
    # consecutive equal keys only (1 == 1.0 merges), equal blocks further apart stay apart
    blocks = [{"attention": {"n_heads_in_group": 8}, "ffn": {"ffn_mult": 1}},
              {"attention": {"n_heads_in_group": 8, "no_op": False}, "ffn": {"ffn_mult": 1.0}},
              {"attention": {"no_op": True}, "ffn": {}},
              {"attention": {"n_heads_in_group": 8}, "ffn": {"ffn_mult": 1.0}}]  # fmt: skip
    model = parse_model("x/nas", dict(config, block_configs=blocks), None, "config.json")
    assert [(g.key, g.count) for g in model.nas_groups] == [((8, False, 1, False), 2), ((None, True, 3.5, False), 1),
                                                             ((8, False, 1.0, False), 1)]  # fmt: skip


@needs_data
def test_nemotron_h_config_parsing():
    """families_nemotron 1.1: the pattern from hybrid_override_pattern (a
    string) or the mapped layers_block_type; unknown entries refused,
    unknown pattern characters ignored; the Mamba-2 dims required; MoE-ness
    from the pattern."""
    ultra = step_context(open_tree(), "nvidia/NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16",
                         Database("b200_sxm", "vllm", "0.24.0"), True).model  # fmt: skip
    assert ultra.num_layers == 108 and ultra.nemotron_h.layer_counts() == (48, 12, 48, 0)
    assert (ultra.nemotron_h.latent, ultra.nemotron_h.shared_inter) == (2048, 10240)
    model = step_context(open_tree(), NANO, Database(*NEMOTRON_DB.split("/")), True).model
    with open(model.config_path, encoding="utf-8") as f:
        config = json.load(f)
    assert model.nemotron_h.layer_counts() == (23, 6, 23, 0) and model.is_moe
    assert model.distribution == "power_law_1.01"
    odd = parse_model("x/h", dict(config, hybrid_override_pattern="M?*-"), None, "c.json")
    assert odd.nemotron_h.layer_counts() == (1, 1, 0, 1) and not odd.is_moe
    listed = dict(config, layers_block_type=["mamba", "moe", "attention", "mlp", "dense", "ffn", "E"])
    del listed["hybrid_override_pattern"]
    assert parse_model("x/h", listed, None, "c.json").nemotron_h.pattern == "ME*---E"
    with pytest.raises(ValueError, match=r"Unsupported NemotronH layer block type 'conv'. Supported values: \*, -, "
                                         r"E, M, attention, dense, ffn, mamba, mlp, moe"):  # fmt: skip
        parse_model("x/h", dict(listed, layers_block_type=["mamba", "conv"]), None, "c.json")
    with pytest.raises(ValueError, match="must define 'hybrid_override_pattern' or 'layers_block_type'"):
        parse_model("x/h", {k: v for k, v in listed.items() if k != "layers_block_type"}, None, "c.json")
    with pytest.raises(ValueError, match="ssm_state_size is missing"):
        parse_model("x/h", {k: v for k, v in config.items() if k != "ssm_state_size"}, None, "c.json")


@needs_data
def test_nemotron_layouts():
    """families_nemotron 1.2, 2.2: both families refuse context parallelism
    everywhere; attention dp is priced for the MoE checkpoints only."""
    for model, moe in ((NANO, (1, 2)), (SUPER_49B, (None, None))):
        with pytest.raises(ValueError, match=r"Context parallelism \(cp_size=2\) is not supported for "
                                             r"model_family='NEMOTRON(H|NAS)' on backend='sglang'"):  # fmt: skip
            step_latency(model, "h200_sxm/sglang/0.5.14", "context", 1, 1, 1024, 128, *moe, cp=2)
    with pytest.raises(ValueError, match=r"attention dp = 2 for .* of the NEMOTRONNAS family"):
        step_latency(SUPER_49B, NEMOTRON_DB, "context", 1, 1, 1024, 128, dp=2)
    with pytest.raises(ValueError, match=r"attention dp = 2 for 'nvidia/Nemotron-H-56B-Base-8K', a dense model"):
        step_latency("nvidia/Nemotron-H-56B-Base-8K", NEMOTRON_DB, "context", 1, 1, 1024, 128, dp=2)
    with pytest.raises(ValueError, match=r"vllm does not support moe_tp > 1 and moe_ep > 1"):
        step_latency(NANO, NEMOTRON_DB, "context", 4, 1, 1024, 128, 2, 2)


@needs_data
def test_nemotron_serving_estimates_against_the_spec():
    """The aggregated estimates of both families equal the spec's (cli_estimate
    agg run in process): the base memory model applies (NAS's KV cache is 0)."""
    nano = estimate_agg(NANO, NEMOTRON_DB, "tp2pp1dp1etp1ep2", 8, 2000, 200, on_miss="error")
    assert (nano["ttft_ms"], nano["tpot_ms"], nano["memory_gib"]) == (92.12495964511756, 5.914310591670766,
                                                                      34.106117248535156)  # fmt: skip
    nas = estimate_agg(SUPER_49B, NEMOTRON_DB, 4, 16, 1000, 300, on_miss="error")
    assert (nas["ttft_ms"], nas["tpot_ms"], nas["memory_gib"]) == (168.46503494735947, 11.19611772185367,
                                                                   28.648727416992188)  # fmt: skip


@needs_data
def test_nemotron_rust_serving_estimates_equal_the_spec():
    """The same two spec points through the Rust `estimate_agg` (SQL)."""
    import aicsql

    ctx = aicsql.context()
    for model, parallel, b, isl, osl, want in [
        (NANO, "tp2pp1dp1etp1ep2", 8, 2000, 200, (92.12495964511756, 5.914310591670766, 34.106117248535156)),
        (SUPER_49B, 4, 16, 1000, 300, (168.46503494735947, 11.19611772185367, 28.648727416992188)),
    ]:
        p = f"'{parallel}'" if isinstance(parallel, str) else parallel
        row = ctx.sql(f"SELECT estimate_agg('{model}', '{NEMOTRON_DB}', {p}, {b}, {isl}, {osl}) AS r").to_pylist()[0]["r"]
        assert (row["ttft_ms"], row["tpot_ms"], row["memory_gib"]) == want, (model, row)


@needs_data
def test_engine_step_table_mamba2_rows():
    """py_engine_step's Mamba-2 rows: lookup_table is the method, the grid axes
    fill the attention batch / sequence columns (sequence NULL in decode)."""
    rows = engine_step_table({"on_miss": "error"}, NANO, NEMOTRON_DB, "generation", 2, 1, 1024, 128, 1,
                             2).to_pylist()  # fmt: skip
    ssm = next(r for r in rows if r["op_name"] == "generation_mamba_ssm")
    assert (ssm["lookup_table"], ssm["attn_batch"], ssm["attn_seq"], ssm["interp_path"]) == ("query_mamba2", 1, None,
                                                                                              None)  # fmt: skip
    assert ssm["lookup_args"].startswith('query_mamba2 {"args": [], "kwargs": {"phase": "generation", '
                                         '"kernel_source": "selective_state_update", "batch_size": 1, "seq_len": null')
    rows = engine_step_table({"on_miss": "error"}, NANO, "h200_sxm/trtllm/1.3.0rc20", "context", 2, 1, 1024, 128, 1,
                             2).to_pylist()  # fmt: skip
    conv = next(r for r in rows if r["op_name"] == "context_mamba_conv1d")
    assert (conv["attn_batch"], conv["attn_seq"], conv["interp_path"]) == (1, 1024, "exact_hit")


# ---- the batch entry point and the SQL-table rows ----------------------------------------------------


@needs_data
def test_batch_prices_the_new_families():
    cases = [
        ("openai/gpt-oss-20b", "h100_sxm/sglang/0.5.14", "generation", 1, 8, 4096, 128, 1, 1),
        ("moonshotai/Kimi-K2.5", "b200_sxm/vllm/0.24.0", "context", 8, 1, 1024, 128, 1, 8),
        ("XiaomiMiMo/MiMo-V2-Flash", "h200_sxm/sglang/0.5.14", "context", 4, 1, 1024, 128, 1, 4),
        ("Qwen/Qwen3-32B-FP8-Static-PerTensor", "h200_sxm/vllm/0.19.0", "context", 2, 1, 1024, 128, None, None),
    ]
    columns = list(zip(*cases))
    arrays = [pa.array(c) for c in columns[:7]] + [pa.array(c, pa.int64()) for c in columns[7:]]
    got = step_latency_batch({"on_miss": "null"}, *arrays).to_pylist()
    assert got[:3] == [step_latency(*c) for c in cases[:3]]
    assert got[1] == 92.10433549719448 and got[3] is None
    assert got[0] == 9.018804640482259


@needs_data
def test_engine_step_table_rows_use_the_existing_columns():
    """py_engine_step's rows for the new lookups: the MLA / scale lookups fill
    the attention / GEMM argument columns, lookup_args is the method and its call."""
    rows = engine_step_table(
        {"on_miss": "error"}, "deepseek-ai/DeepSeek-V3", "h200_sxm/sglang/0.5.14", "generation", 8, 1, 1024, 128, 1, 8
    ).to_pylist()
    block = next(r for r in rows if r["op_name"] == "generation_mla_block")
    assert block["lookup_table"] == "gemm_perf" and (block["m"], block["n"], block["k"]) == (1, 2112, 7168)
    rows = engine_step_table(
        {"on_miss": "error"}, "deepseek-ai/DeepSeek-V3", "h200_sxm/trtllm/1.3.0rc20", "context", 8, 1, 1024, 128, 1, 8
    ).to_pylist()
    block = next(r for r in rows if r["op_name"] == "context_mla_block")
    assert block["lookup_table"] == "mla_context_module_perf"
    assert (block["attn_batch"], block["attn_seq"], block["attn_prefix"], block["heads"]) == (1, 1024, 0, 16)
    assert block["lookup_args"] == 'query_context_mla_module {"args": [], "kwargs": {"b": 1, "s": 1024, ' \
        '"prefix": 0, "num_heads": 16, "kvcache_quant_mode": "fp8", "fmha_quant_mode": "bfloat16", ' \
        '"gemm_quant_mode": "fp8_block"}}'  # fmt: skip
