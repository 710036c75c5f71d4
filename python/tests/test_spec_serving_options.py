"""The spec's quantisation overrides, memory knobs, MTP speculative decoding
and images on the Python path (docs/spec/options.md 1 - 4) against
``serving_options_goldens.parquet`` (99 points of aiconfigurator v0.11.0's
``cli_estimate`` with its user-facing options turned), pure Python.

* Every point's arguments -- quant options (``gemm_quant_mode``,
  ``moe_quant_mode``, ``kvcache_quant_mode``, ``fmha_quant_mode``,
  ``comm_quant_mode``), the memory knobs (``free_gpu_memory_fraction``,
  ``max_seq_len``), MTP (``nextn``, ``nextn_accepted``), images
  (``image_height``, ``image_width``, ``num_images``, ``enable_encoder_dp``)
  or none -- are priced with ``options`` and compared as
  test_spec_serving.py compares: agg every field of the spec's dict to the
  float bit (but power; the encoder's latency and memory included), disagg
  every field at the spec's 3 decimals, and the KV-cache warning (its text
  names the fraction given).
* Their error points fail alike: the spec's ``KeyError`` (an unknown mode
  name) is our ValueError ``unknown ... quant mode``, and its nextn
  ``ValueError`` s (malformed arguments) are raised with the spec's text,
  both whatever ``on_miss`` says; a ``PerfDataNotAvailableError`` is a
  reason naming the same lookup; a ``ValueError`` / ``RuntimeError`` (a
  refused deployment, OOM) a reason that is the spec's message.
* `NOT_YET` (options this path does not price, a point counted by the first
  it turns) is empty since images are priced.

The split: 99 points = 72 values + 27 errors (7 of them the enums' rarer
names, gemm ``fp8_ootb`` and fmha ``fp8_block``: valid, and every lookup
keyed on them misses). 26 points turn ``nextn`` /
``nextn_accepted`` (21 values: 17 agg, 4 disagg; 5 errors, the spec's nextn
texts); 9 turn images (7 agg, 2 disagg, no error): Qwen3-VL-8B with 448 x
448 to 1024 x 768 images, 1 to 4 per request, encoder data parallel or
sharded, an image under one merged patch (no image path), a model without a
vision encoder (ignored) and point 77, which turns images and MTP together.

Plus the malformed ``options`` argument, the families refused, the step
API's ``options``, the resolution rules of options.md 1.2, the MTP rules
of options.md 2 and the image rules of options.md 4 that no golden reaches
(the texts of every refusal, 'auto', NEMOTRONNAS, the step functions' draft
depth, the token counts, the ViT sharding refusal, the settings, the
searches).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from aicsql.spec import open_tree
from aicsql.spec.serving import (
    estimate_agg,
    estimate_agg_batch,
    estimate_disagg,
    estimate_disagg_batch,
    estimate_memory,
    numpy_round3,
)
from aicsql.spec.step import engine_step, step_latency, step_latency_batch

from _support import have_data, require
from test_spec_serving import (
    AGG_KEYS,
    AGG_SKIP,
    DISAGG_KEYS,
    DISAGG_SKIP,
    _agg_call,
    _compare,
    _disagg_call,
    _report,
)

REPO = Path(__file__).resolve().parents[2]
GOLDENS = Path(os.environ.get("AICSQL_GOLDENS") or REPO / "tests" / "goldens") / "serving_options_goldens.parquet"
HAVE = GOLDENS.is_file() and have_data(open_tree)
needs_data = require(HAVE, f"options goldens ({GOLDENS}) or the perf data are missing")

# cli_estimate keyword -> the Python path's option key
QUANT_ARGS = {
    "gemm_quant_mode": "gemm_quant",
    "moe_quant_mode": "moe_quant",
    "kvcache_quant_mode": "kvcache_quant",
    "fmha_quant_mode": "fmha_quant",
    "comm_quant_mode": "comm_quant",
}
# the memory knobs: the same names
MEMORY_ARGS = {"free_gpu_memory_fraction": "free_gpu_memory_fraction", "max_seq_len": "max_seq_len"}
# MTP speculative decoding: the same names
MTP_ARGS = {"nextn": "nextn", "nextn_accepted": "nextn_accepted"}
# images (Qwen3-VL): the same names
IMAGE_ARGS = {"image_height": "image_height", "image_width": "image_width", "num_images": "num_images",
              "enable_encoder_dp": "enable_encoder_dp"}  # fmt: skip
OPTION_ARGS = {**QUANT_ARGS, **MEMORY_ARGS, **MTP_ARGS, **IMAGE_ARGS}
# Options this path does not price yet, in the order a point is counted under: none left.
NOT_YET = ()
EXPECTED_NOT_YET = {}


def _points():
    return pq.read_table(GOLDENS).to_pylist() if HAVE else []


def _options(point):
    """(the ``options`` dict, None) for a point this path prices, (None, the
    first option not priced yet) otherwise."""
    a = json.loads(point["args"])
    for name in NOT_YET:
        if name in a:
            return None, name
    return {OPTION_ARGS[k]: v for k, v in a.items() if k in OPTION_ARGS}, None


def _call(point, options, **kw):
    if point["mode"] == "agg":
        return estimate_agg(**_agg_call(point), options=options, **kw)
    assert point["mode"] == "disagg", point["mode"]
    return estimate_disagg(**_disagg_call(point), options=options, **kw)


def _split():
    """(priced points with their options, {option: count} of the others)."""
    priced, not_yet = [], {}
    for point in _points():
        options, option = _options(point)
        if option is not None:
            not_yet[option] = not_yet.get(option, 0) + 1
        else:
            priced.append((point, options))
    return priced, not_yet


@needs_data
def test_options_goldens_are_split_as_expected():
    priced, not_yet = _split()
    assert len(_points()) == 99
    assert not_yet == EXPECTED_NOT_YET, not_yet
    assert len(priced) == 99  # every point (module doc)
    assert sum(p["error"] is None for p, _ in priced) == 72
    assert sum(p["error"] is not None for p, _ in priced) == 27
    mtp = [(p, o) for p, o in priced if set(o) & set(MTP_ARGS.values())]
    assert len(mtp) == 26 and sum(p["error"] is not None for p, _ in mtp) == 5
    assert sorted(p["mode"] for p, _ in mtp if p["error"] is None) == ["agg"] * 17 + ["disagg"] * 4
    images = [(p, o) for p, o in priced if set(o) & set(IMAGE_ARGS.values())]
    assert sorted(p["point_id"] for p, _ in images) == [60, 61, 62, 63, 64, 65, 67, 68, 77]
    assert all(p["error"] is None for p, _ in images)
    assert sorted(p["mode"] for p, _ in images) == ["agg"] * 7 + ["disagg"] * 2
    # every option is turned by some priced point, the quant ones on both modes
    turned = {k for _, options in priced for k in options}
    assert turned == set(OPTION_ARGS.values())
    assert {p["mode"] for p, options in priced if options} == {"agg", "disagg"}
    memory = [(p, o) for p, o in priced if set(o) & set(MEMORY_ARGS.values())]
    # 15 points without MTP and point 73 (nextn 1 on trtllm at free_gpu_memory_fraction 0.7)
    assert len(memory) == 16 and sum(p["error"] is not None for p, _ in memory) == 2
    assert {p["mode"] for p, _ in memory} == {"agg", "disagg"}


@needs_data
def test_options_goldens_bit_for_bit():
    priced, _ = _split()
    counts = {"agg": {}, "disagg": {}}
    failures, warnings = [], 0
    n = {"agg": 0, "disagg": 0}
    for point, options in priced:
        if point["error"] is not None:
            continue
        got = _call(point, options)
        assert got["reason"] is None, (point["point_id"], options, got["reason"])
        mode = point["mode"]
        n[mode] += 1
        if mode == "agg":
            _compare(point, got, AGG_KEYS, AGG_SKIP, counts[mode], failures)
            assert got["warning"] == point["kv_cache_warning"], point["point_id"]
            warnings += got["warning"] is not None
        else:
            _compare(point, got, DISAGG_KEYS, DISAGG_SKIP, counts[mode], failures)
    for mode in ("agg", "disagg"):
        _report(f"options goldens, {mode} ({n[mode]} points)", counts[mode])
    assert not failures, "\n".join(failures[:20])
    assert (n["agg"], n["disagg"]) == (57, 15)
    print(f"options goldens: {n['agg']} agg + {n['disagg']} disagg points equal, {warnings} KV warnings matched")
    assert warnings >= 1  # point 90: free_gpu_memory_fraction=0.02
    # every field of the dict on every point, the quant labels included
    assert counts["agg"]["ttft_ms"] == [n["agg"], 0] and counts["agg"]["memory_gib"] == [n["agg"], 0]
    assert counts["agg"]["encoder_latency_ms"] == [n["agg"], 0] and counts["agg"]["encoder_memory_gib"] == [n["agg"], 0]
    for field in ("gemm", "kvcache", "fmha", "moe", "comm"):
        assert counts["agg"][field] == [n["agg"], 0], field
    assert counts["disagg"]["ttft_ms"] == [n["disagg"], 0] and counts["disagg"]["decode_memory_gib"] == [n["disagg"], 0]
    for field in ("prefill_gemm", "prefill_kvcache", "prefill_fmha", "decode_fmha", "decode_kvcache", "comm"):
        assert counts["disagg"][field][1] == 0 and counts["disagg"][field][0] > 0, field


_QUANT_REPR = re.compile(r"<\w+QuantMode\.(\w+): QuantMapping\([^)]*\)>")


def _lookup_values(spec_message: str):
    """(what, [argument values]) of the spec's "Failed to query <what> data
    for k=v, ..." tail, quant reprs reduced to their names."""
    m = re.search(r"Failed to query (.+?) data for (.*)\. Consider using HYBRID mode\.", spec_message)
    assert m, spec_message
    args = _QUANT_REPR.sub(lambda q: q.group(1), m.group(2))
    values = [kv.split("=", 1)[1].strip("'") for kv in re.split(r", (?=\w+=)", args)]
    return m.group(1), values


def _same_miss(spec_message: str, reason: str) -> bool:
    """Our reason reports the spec's miss: its text word for word, or the same
    lookup (the table and every argument value of the spec's query)."""
    if spec_message in reason:
        return True
    what, values = _lookup_values(spec_message)
    table = {"context attention": "context_attention_perf", "context mla": "context_mla_perf", "moe": "moe_perf",
             "gemm": "gemm_perf"}[what]
    return f"perf data not available in {table}" in reason and all(
        re.search(rf"(?<![\w.]){re.escape(v)}(?![\w.])", reason) for v in values
    )


@needs_data
def test_options_error_goldens_fail_alike():
    priced, _ = _split()
    outcomes = []
    for point, options in priced:
        if point["error"] is None:
            continue
        kind, message = point["error"].split(": ", 1)
        pid = point["point_id"]
        if kind == "KeyError":  # an unknown mode name: malformed input, always raised
            name = message.strip("'")
            with pytest.raises(ValueError, match=rf"^unknown \w+ quant mode '{re.escape(name)}'; valid modes: "):
                _call(point, options)
            with pytest.raises(ValueError, match="unknown"):
                _call(point, options, on_miss="error")  # raised before any pricing, whatever on_miss says
            outcomes.append((pid, kind, "raised"))
            continue
        if kind == "ValueError" and message.startswith("nextn"):  # a malformed MTP argument: the spec's text
            for on_miss in ("null", "error"):
                with pytest.raises(ValueError) as raised:
                    _call(point, options, on_miss=on_miss)
                assert str(raised.value) == message, (pid, message, str(raised.value))
            outcomes.append((pid, kind, "raised"))
            continue
        got = _call(point, options)
        assert got["reason"] is not None, (pid, options, got)
        assert all(v is None for k, v in got.items() if k != "reason"), pid
        if kind == "PerfDataNotAvailableError":
            assert _same_miss(message, got["reason"]), (pid, message, got["reason"])
        else:  # a refused deployment (ValueError) or OOM (RuntimeError): the spec's words
            assert kind in ("ValueError", "RuntimeError"), point["error"]
            assert got["reason"] == message, (pid, message, got["reason"])
        with pytest.raises(ValueError) as raised:
            _call(point, options, on_miss="error")
        assert str(raised.value) == got["reason"], pid
        outcomes.append((pid, kind, "reason"))
    print("\noptions error goldens:", *outcomes, sep="\n  ")
    kinds = sorted(k for _, k, _ in outcomes)
    # RuntimeError: one quant point's OOM and two points' OOM from max_seq_len (59, 91);
    # ValueError: 4 refused deployments and the 5 malformed nextn arguments (82 - 86);
    # PerfDataNotAvailableError: 5 overrides without a table and the 7 rarer enum names (92 - 98)
    expected = ["KeyError"] * 3 + ["PerfDataNotAvailableError"] * 12 + ["RuntimeError"] * 3 + ["ValueError"] * 9
    assert kinds == expected, kinds
    # raised (malformed input): the three unknown mode names and the five nextn arguments
    assert sorted(pid for pid, _, how in outcomes if how == "raised") == [79, 80, 81, 82, 83, 84, 85, 86]


def test_same_miss_reads_the_spec_lookup():
    spec = ("Missing silicon data for the requested lookup; requested slice (<MoEQuantMode.nvfp4: QuantMapping("
            "memory=0.5625, compute=4, name='nvfp4')>,) is not available. Failed to query moe data for "
            "num_tokens=1055.0, hidden_size=2048, inter_size=768, topk=8, num_experts=128, moe_tp_size=1, "
            "moe_ep_size=4, quant_mode=<MoEQuantMode.nvfp4: QuantMapping(memory=0.5625, compute=4, name='nvfp4')>, "
            "workload_distribution='power_law_1.2'. Consider using HYBRID mode.")  # fmt: skip
    assert _lookup_values(spec) == ("moe", ["1055.0", "2048", "768", "8", "128", "1", "4", "nvfp4", "power_law_1.2"])
    ours = ('x: context_moe: perf data not available in moe_perf: query_moe(num_tokens=1055.0, hidden_size=2048, '
            'inter_size=768, topk=8, num_experts=128, moe_tp_size=1, moe_ep_size=4, quant_mode="nvfp4", '
            'workload_distribution="power_law_1.2")')  # fmt: skip
    assert _same_miss(spec, ours)
    assert not _same_miss(spec, ours.replace("1055.0", "1056.0"))
    assert not _same_miss(spec, ours.replace("moe_perf", "gemm_perf"))


# ---- the options argument -------------------------------------------------------------------

DENSE, DENSE_DB = "meta-llama/Meta-Llama-3.1-8B", "gb200/sglang/0.5.14"
FP8_MODEL, VLLM_H200 = "Qwen/Qwen3-32B-FP8", "h200_sxm/vllm/0.19.0"
TRTLLM_H200 = "h200_sxm/trtllm/1.3.0rc10"


@needs_data
def test_malformed_options_raise():
    call = dict(model=DENSE, db=DENSE_DB, parallel=8, batch=4, isl=1024, osl=128)
    with pytest.raises(ValueError, match=r"unknown option 'gemm_quant_mode'; valid options: gemm_quant, moe_quant, "
                                         r"kvcache_quant, fmha_quant, comm_quant"):  # fmt: skip
        estimate_agg(**call, options={"gemm_quant_mode": "fp8"})
    with pytest.raises(ValueError, match=r"unknown fmha quant mode 'bf16'; valid modes: bfloat16, fp8, fp8_block"):
        estimate_agg(**call, options={"fmha_quant": "bf16"})
    with pytest.raises(ValueError, match=r"unknown comm quant mode 'bfloat16'; valid modes: half, int8, fp8"):
        estimate_memory(**call, options={"comm_quant": "bfloat16"})
    with pytest.raises(ValueError, match=r"unknown kvcache quant mode 8"):
        estimate_agg(**call, options={"kvcache_quant": 8})
    with pytest.raises(ValueError, match="must be a dict"):
        estimate_agg(**call, options=[("gemm_quant", "fp8")])
    with pytest.raises(ValueError, match="unknown moe quant mode 'FP8'"):
        estimate_disagg(DENSE, DENSE_DB, 2, 1, 1, 8, 16, 1, 1024, 128, options={"moe_quant": "FP8"})
    with pytest.raises(ValueError, match="unknown gemm quant mode"):
        step_latency(DENSE, DENSE_DB, "context", 8, 1, 1024, 128, options={"gemm_quant": "int8"})
    # None and "" (the spec's falsy values) keep the checkpoint's modes; {} is no override
    plain = estimate_agg(**call)
    assert estimate_agg(**call, options={"gemm_quant": None, "kvcache_quant": ""}) == plain
    assert estimate_agg(**call, options={}) == plain


@needs_data
def test_overrides_are_refused_for_the_dsa_and_dsv4_families():
    for model, db, par in (("deepseek-ai/DeepSeek-V3.2", "h200_sxm/sglang/0.5.14", "tp8pp1dp1etp1ep8"),
                           ("nvidia/DeepSeek-V4-Flash-NVFP4", "b200_sxm/sglang/0.5.14", "tp4pp1dp1etp1ep4")):  # fmt: skip
        with pytest.raises(ValueError, match=r"quant overrides are not priced for .* yet"):
            estimate_agg(model, db, par, 4, 1024, 128, options={"kvcache_quant": "fp8"})
        with pytest.raises(ValueError, match=r"quant overrides are not priced for .* yet"):
            estimate_agg(model, db, par, 4, 1024, 128, options={"comm_quant": "half"}, on_miss="null")
        # no override: priced (or a miss) as before, not refused
        got = estimate_agg(model, db, par, 4, 1024, 128, options={"gemm_quant": None})
        assert got == estimate_agg(model, db, par, 4, 1024, 128) and "overrides" not in (got["reason"] or "")


@needs_data
def test_comm_is_a_label_and_refused_with_context_parallelism():
    call = dict(model=DENSE, db=DENSE_DB, parallel=8, batch=4, isl=1024, osl=128)
    plain = estimate_agg(**call)
    fp8 = estimate_agg(**call, options={"comm_quant": "fp8"})
    assert plain["comm"] == "half" and fp8["comm"] == "fp8"
    assert {k: v for k, v in fp8.items() if k != "comm"} == {k: v for k, v in plain.items() if k != "comm"}
    moe, db, label = "Qwen/Qwen3-30B-A3B", "gb200/sglang/0.5.14", "tp1pp1dp1etp1ep2cp2"
    base = estimate_agg(moe, db, label, 4, 1024, 128)
    assert base["reason"] is None and base["cp"] == 2
    assert estimate_agg(moe, db, label, 4, 1024, 128, options={"comm_quant": "half"}) == base
    with pytest.raises(ValueError, match=r"comm_quant other than 'half' is not priced with context parallelism"):
        estimate_agg(moe, db, label, 4, 1024, 128, options={"comm_quant": "int8"})


@needs_data
def test_step_api_takes_options():
    # the checkpoint's rule (fp8 => kv fp8, fmha fp8) is the inference's, not an override's
    q = engine_step(DENSE, DENSE_DB, "context", 8, 2, 1024, 128, options={"gemm_quant": "fp8"})["quants"]
    assert q == {"gemm": "fp8", "moe": "bfloat16", "kvcache": "bfloat16", "fmha": "bfloat16", "comm": "half"}
    plain = step_latency(DENSE, DENSE_DB, "context", 8, 2, 1024, 128)
    fp8 = step_latency(DENSE, DENSE_DB, "context", 8, 2, 1024, 128, options={"gemm_quant": "fp8"})
    assert fp8 != plain and step_latency(DENSE, DENSE_DB, "context", 8, 2, 1024, 128) == plain
    rows = engine_step(DENSE, DENSE_DB, "context", 8, 2, 1024, 128, options={"gemm_quant": "fp8"})["rows"]
    assert {r["quant"] for r in rows if r["op_kind"] == "GEMM" and "logits" not in r["op_name"]} == {"fp8"}
    # the spec's fmha refusal, for the context phase only (generation roles are not checked)
    with pytest.raises(ValueError, match=r"^fmha_quant_mode=fp8 has no 'context_attention' perf data"):
        step_latency(FP8_MODEL, VLLM_H200, "context", 8, 2, 1024, 128, options={"fmha_quant": "fp8"})
    q = engine_step(FP8_MODEL, VLLM_H200, "generation", 8, 2, 1024, 128, options={"fmha_quant": "fp8"})["quants"]
    assert q["fmha"] == "fp8" and q["kvcache"] == "fp8"


@needs_data
def test_fmha_resolution_rules():
    """options.md 1.2 step 4 and 6 on points no golden has."""
    # An fp8 checkpoint on vllm: the inferred fp8 FMHA is priced as bfloat16
    # (the legacy guard); an explicit fmha is kept as given.
    plain = engine_step(FP8_MODEL, VLLM_H200, "context", 8, 2, 1024, 128)["quants"]
    assert (plain["fmha"], plain["kvcache"], plain["gemm"]) == ("bfloat16", "fp8", "fp8_block")
    q = engine_step(FP8_MODEL, VLLM_H200, "context", 8, 2, 1024, 128, options={"fmha_quant": "bfloat16"})["quants"]
    assert q == plain
    # trtllm keeps the inferred fp8 FMHA (its table has the fp8 slice under kv fp8) ...
    q = engine_step(FP8_MODEL, TRTLLM_H200, "context", 8, 2, 1024, 128)["quants"]
    assert (q["fmha"], q["kvcache"]) == ("fp8", "fp8")
    # ... a kv override replaces the checkpoint's kv and the joint check then
    # finds no fp8 FMHA under kv bfloat16: bfloat16 (golden point 3)
    q = engine_step(FP8_MODEL, TRTLLM_H200, "context", 8, 2, 1024, 128, options={"kvcache_quant": "bfloat16"})
    assert q["quants"] == {"gemm": "fp8_block", "moe": "fp8_block", "kvcache": "bfloat16", "fmha": "bfloat16",
                           "comm": "half"}  # fmt: skip
    # decode (generation) keeps the checkpoint's fmha: no data check there
    q = engine_step(FP8_MODEL, TRTLLM_H200, "generation", 8, 2, 1024, 128, options={"kvcache_quant": "bfloat16"})
    assert (q["quants"]["fmha"], q["quants"]["kvcache"]) == ("fp8", "bfloat16")
    # on a bf16 checkpoint without a kv mode the check reads every kv slice: an
    # explicit fp8 FMHA passes when any slice has fp8, and may miss later (golden point 24)
    got = estimate_agg(DENSE, DENSE_DB, 8, 4, 1024, 128, options={"fmha_quant": "fp8"})
    assert got["reason"] is not None and "context_attention" in got["reason"]
    assert "fmha_quant_mode=fp8 has no" not in got["reason"]
    # ... and with kv fp8 given, the fp8 slice exists (golden point 70)
    got = estimate_agg(DENSE, DENSE_DB, 8, 4, 1024, 128, options={"fmha_quant": "fp8", "kvcache_quant": "fp8"})
    assert got["reason"] is None and (got["fmha"], got["kvcache"]) == ("fp8", "fp8")


@needs_data
def test_memory_follows_the_overrides():
    call = dict(model=DENSE, db=DENSE_DB, parallel=8, batch=64, isl=1024, osl=128)
    plain = estimate_memory(**call)
    kv8 = estimate_memory(**call, options={"kvcache_quant": "fp8"})
    w8 = estimate_memory(**call, options={"gemm_quant": "fp8"})
    assert kv8["kvcache_gib"] == plain["kvcache_gib"] / 2 and kv8["weights_gib"] == plain["weights_gib"]
    assert w8["weights_gib"] < plain["weights_gib"] and w8["kvcache_gib"] == plain["kvcache_gib"]
    assert kv8["total_gib"] == estimate_agg(**call, options={"kvcache_quant": "fp8"})["memory_gib"]
    # a refused deployment is a reason in the memory breakdown too
    refused = estimate_memory("Qwen/Qwen3-30B-A3B", "gb200/vllm/0.19.0", 4, 8, 1024, 128, moe_tp=4, moe_ep=1,
                              options={"moe_quant": "fp8_block"})  # fmt: skip
    assert refused["reason"].startswith("Invalid quantized MoE configuration") and refused["fits"] is None


@needs_data
def test_fp8_ootb_is_a_mode_without_tables():
    """The spec accepts GEMMQuantMode.fp8_ootb; no database has its slice, so
    the first GEMM lookup misses with the spec's message."""
    got = estimate_agg(DENSE, DENSE_DB, 8, 4, 1024, 128, options={"gemm_quant": "fp8_ootb"})
    assert "GEMM perf data not available for requested quant mode" in got["reason"]
    assert "quant_mode=<GEMMQuantMode.fp8_ootb: QuantMapping(memory=1, compute=2, name='fp8_ootb')>" in got["reason"]


@needs_data
def test_batch_forms_read_the_overrides_from_the_settings():
    """The bridge's batch forms take the overrides as settings (``aic.gemm_quant``
    ... ``aic.comm_quant``; '' = the checkpoint's), as the plain functions take ``options``."""
    import pyarrow as pa

    options = {"gemm_quant": "fp8", "kvcache_quant": "fp8", "comm_quant": "int8"}
    settings = {"aic.gemm_quant": "fp8", "kvcache_quant": "fp8", "comm_quant": "int8", "moe_quant": "",
                "fmha_quant": ""}  # fmt: skip
    args = [pa.array([DENSE]), pa.array([DENSE_DB]), pa.array([8]), pa.array([4]), pa.array([1024]), pa.array([128])]
    plain = estimate_agg(DENSE, DENSE_DB, 8, 4, 1024, 128)
    got = estimate_agg_batch(settings, *args).to_pylist()[0]
    assert got == estimate_agg(DENSE, DENSE_DB, 8, 4, 1024, 128, options=options) != plain
    assert got["comm"] == "int8" and got["kvcache"] == "fp8"
    assert estimate_agg_batch({"gemm_quant": ""}, *args).to_pylist()[0] == plain
    dargs = [pa.array([v]) for v in (DENSE, DENSE_DB, 2, 1, 1, 8, 16, 1, 1024, 128)]
    assert estimate_disagg_batch(settings, *dargs).to_pylist()[0] == estimate_disagg(
        DENSE, DENSE_DB, 2, 1, 1, 8, 16, 1, 1024, 128, options=options)
    step = step_latency_batch(settings, *[pa.array([v]) for v in (DENSE, DENSE_DB, "context", 8, 2, 1024, 128)])
    assert step.to_pylist() == [step_latency(DENSE, DENSE_DB, "context", 8, 2, 1024, 128, options=options)]
    with pytest.raises(ValueError, match="unknown gemm quant mode 'FP8'"):
        estimate_agg_batch({"gemm_quant": "FP8"}, *args)


# ---- the memory knobs (options.md 3) ----------------------------------------------------------

FP8_TRTLLM_CALL = dict(model=FP8_MODEL, db=TRTLLM_H200, parallel=8, batch=128, isl=8192, osl=512, ctx_tokens=2048)


@needs_data
def test_memory_options_are_checked():
    call = dict(model=DENSE, db=DENSE_DB, parallel=8, batch=4, isl=1024, osl=128)
    for bad in (0, 0.0, -0.5, 1.5, 1.0000001, float("nan"), float("inf")):
        with pytest.raises(ValueError, match=rf"^option free_gpu_memory_fraction = {re.escape(repr(bad))} must be "
                                             r"in \(0, 1\]$"):  # fmt: skip
            estimate_agg(**call, options={"free_gpu_memory_fraction": bad})
    for bad in (True, "0.5", [0.5]):
        with pytest.raises(ValueError, match=r"^option free_gpu_memory_fraction = .* is not a number$"):
            estimate_agg(**call, options={"free_gpu_memory_fraction": bad})
    for bad in (0, -1):
        with pytest.raises(ValueError, match=rf"^option max_seq_len = {bad} must be a positive integer$"):
            estimate_memory(**call, options={"max_seq_len": bad})
    for bad in (True, 2048.0, "2048"):
        with pytest.raises(ValueError, match=r"^option max_seq_len = .* is not an integer$"):
            estimate_agg(**call, options={"max_seq_len": bad})
    # refused wherever given, whatever on_miss says: the disaggregated estimate and the step API too
    with pytest.raises(ValueError, match="free_gpu_memory_fraction"):
        estimate_disagg(DENSE, DENSE_DB, 2, 1, 1, 8, 16, 1, 1024, 128, options={"free_gpu_memory_fraction": 2})
    with pytest.raises(ValueError, match="max_seq_len"):
        step_latency(DENSE, DENSE_DB, "context", 8, 1, 1024, 128, options={"max_seq_len": 0})
    with pytest.raises(ValueError, match=r"valid options: .*, comm_quant, free_gpu_memory_fraction, max_seq_len, "
                                         r"nextn, nextn_accepted, image_height, image_width, num_images, "
                                         r"enable_encoder_dp, decode_system$"):  # fmt: skip
        estimate_agg(**call, options={"max_num_tokens": 8192})
    # the bounds themselves are accepted; None and "" are unset
    plain = estimate_agg(**call)
    for ok in (1, 1.0, 5e-324):
        assert estimate_agg(**call, options={"free_gpu_memory_fraction": ok})["reason"] is None
    assert estimate_agg(**call, options={"free_gpu_memory_fraction": None, "max_seq_len": ""}) == plain


@needs_data
def test_memory_options_are_ignored_on_vllm_sglang_and_disagg():
    vllm = dict(model=FP8_MODEL, db=VLLM_H200, parallel=8, batch=64, isl=1024, osl=256)
    plain = estimate_agg(**vllm)
    assert plain["reason"] is None
    assert estimate_agg(**vllm, options={"free_gpu_memory_fraction": 0.05}) == plain
    assert estimate_agg(**vllm, options={"free_gpu_memory_fraction": 0.05, "max_seq_len": 131072}) == plain
    assert estimate_memory(**vllm, options={"max_seq_len": 131072}) == estimate_memory(**vllm)
    sglang = dict(model=DENSE, db=DENSE_DB, parallel=8, batch=4, isl=1024, osl=128)
    assert estimate_agg(**sglang, options={"max_seq_len": 16384, "free_gpu_memory_fraction": 0.1}) == estimate_agg(
        **sglang)
    d = (FP8_MODEL, TRTLLM_H200, 2, 1, 2, 8, 16, 1, 1024, 128)
    assert estimate_disagg(*d, options={"free_gpu_memory_fraction": 0.01, "max_seq_len": 1 << 20}) == estimate_disagg(
        *d)


@needs_data
def test_trtllm_memory_options():
    call = FP8_TRTLLM_CALL
    plain = estimate_memory(**call)
    # max_seq_len sizes the KV cache (default isl + osl); the rest of the memory is unchanged
    assert estimate_memory(**call, options={"max_seq_len": 8192 + 512}) == plain
    big = estimate_memory(**call, options={"max_seq_len": 2 * (8192 + 512)})
    assert big["kvcache_gib"] == 2 * plain["kvcache_gib"] and big["weights_gib"] == plain["weights_gib"]
    assert big["activations_gib"] == plain["activations_gib"] and big["fits"]
    oom = estimate_memory(**call, options={"max_seq_len": 100000})
    assert oom["fits"] is False and oom["reason"] is None
    assert estimate_agg(**call, options={"max_seq_len": 100000})["reason"].startswith("OOM: the model")
    # the KV-budget check: the warning names the fraction given, else the backend default (0.9)
    base = estimate_agg(**call)
    assert base["warning"] is None
    tight = estimate_agg(**call, options={"free_gpu_memory_fraction": 0.02})
    assert tight["warning"] == (
        "Requested batch_size (128) exceeds estimated KV cache capacity (free_gpu_memory_fraction=0.02). "
        "The serving runtime will queue excess requests, causing significantly higher TTFT and inaccurate TPOT.")
    assert {k: v for k, v in tight.items() if k != "warning"} == {k: v for k, v in base.items() if k != "warning"}
    default = estimate_agg(**call, options={"max_seq_len": 62000})
    assert "(free_gpu_memory_fraction=backend default)" in default["warning"]
    assert estimate_agg(**call, options={"max_seq_len": 62000, "free_gpu_memory_fraction": 1})["warning"] is None
    assert "(free_gpu_memory_fraction=0.9)" in estimate_agg(
        **call, options={"max_seq_len": 62000, "free_gpu_memory_fraction": 0.9})["warning"]


@needs_data
def test_batch_forms_read_the_memory_options_from_the_settings():
    import pyarrow as pa

    from aicsql.spec.serving import estimate_memory_batch

    c = FP8_TRTLLM_CALL
    args = [pa.array([v]) for v in (c["model"], c["db"], c["parallel"], c["batch"], c["isl"], c["osl"], 0,
                                    c["ctx_tokens"])]  # fmt: skip
    settings = {"aic.free_gpu_memory_fraction": "0.02", "aic.max_seq_len": "9000"}
    options = {"free_gpu_memory_fraction": 0.02, "max_seq_len": 9000}
    got = estimate_agg_batch(settings, *args).to_pylist()[0]
    assert got == estimate_agg(**c, options=options) and "fraction=0.02)" in got["warning"]
    assert estimate_memory_batch(settings, *args).to_pylist()[0] == estimate_memory(**c, options=options)
    unset = {"free_gpu_memory_fraction": "", "max_seq_len": " "}
    assert estimate_agg_batch(unset, *args).to_pylist()[0] == estimate_agg(**c)
    with pytest.raises(ValueError, match=r"free_gpu_memory_fraction = 1.5 must be in \(0, 1\]"):
        estimate_agg_batch({"free_gpu_memory_fraction": "1.5"}, *args)
    with pytest.raises(ValueError, match=r"setting max_seq_len = '4k' is not an integer"):
        estimate_agg_batch({"aic.max_seq_len": "4k"}, *args)


# ---- MTP speculative decoding (options.md 2) ---------------------------------------------------

MTP_FP8 = dict(model=FP8_MODEL, db=VLLM_H200, parallel=8, batch=64, isl=1024, osl=256)  # golden points 34 - 48
DSV3, DSV3_DB = "deepseek-ai/DeepSeek-V3", "h200_sxm/sglang/0.5.14"
DSV3_CALL = dict(model=DSV3, db=DSV3_DB, parallel=8, batch=16, isl=1024, osl=128, moe_tp=1, moe_ep=8)
DISAGG_DENSE = (DENSE, DENSE_DB, 2, 1, 1, 8, 16, 1, 1024, 128)


@needs_data
def test_nextn_validation_texts():
    """options.md 2.2 / 5: the spec's ValueError texts, raised whatever
    on_miss says and before anything is priced or even resolved (the spec
    checks them first in cli_estimate: an unknown database does not come
    first); depth 0 ignores the acceptance entirely."""
    texts = {
        (1.5, 0.5): "nextn (1.5) must be an integer draft length.",
        ("2", 1.0): "nextn (2) must be an integer draft length.",  # the spec's API: a string is not a depth
        (True, 0.5): "nextn (True) must be an integer draft length.",
        (float("nan"), 0.5): "nextn (nan) must be an integer draft length.",
        (-1, 0.0): "nextn (-1) must be >= 0.",
        (-2.0, None): "nextn (-2.0) must be >= 0.",
        (2, None): "nextn=2 requires 'nextn_accepted' (average accepted draft tokens per step, 0 <= nextn_accepted "
                   "<= nextn); there is no built-in acceptance assumption.",
        (2, 2.5): "nextn_accepted (2.5) must be within [0, nextn=2].",
        (1, -0.1): "nextn_accepted (-0.1) must be within [0, nextn=1].",
        (3, 4): "nextn_accepted (4) must be within [0, nextn=3].",  # printed as given
        (1, float("nan")): "nextn_accepted (nan) must be within [0, nextn=1].",
        (1, float("inf")): "nextn_accepted (inf) must be within [0, nextn=1].",
    }  # fmt: skip
    for (nextn, accepted), text in texts.items():
        options = {"nextn": nextn} if accepted is None else {"nextn": nextn, "nextn_accepted": accepted}
        for on_miss in ("null", "error"):
            with pytest.raises(ValueError) as raised:
                estimate_agg(**{**MTP_FP8, "db": "no_such_system/vllm/0.19.0"}, options=options, on_miss=on_miss)
            assert str(raised.value) == text, (options, str(raised.value))
        with pytest.raises(ValueError) as raised:
            estimate_disagg(*DISAGG_DENSE, options=options)
        assert str(raised.value) == text
    for bad in ("0.5", [1], True):  # not a number: malformed at any depth
        with pytest.raises(ValueError, match=r"^option nextn_accepted = .* is not a number$"):
            estimate_memory(**MTP_FP8, options={"nextn": 0, "nextn_accepted": bad})
    # depth 0 (or unset) ignores the acceptance, in range or not (golden point 48)
    plain = estimate_agg(**MTP_FP8)
    for options in ({"nextn": 0, "nextn_accepted": 5.0}, {"nextn_accepted": float("nan")}, {"nextn": None},
                    {"nextn": "", "nextn_accepted": None}, {"nextn": 0.0, "nextn_accepted": -3}):  # fmt: skip
        assert estimate_agg(**MTP_FP8, options=options) == plain, options
    # an integral float is the integer depth, the bounds of the acceptance are accepted
    two = estimate_agg(**MTP_FP8, options={"nextn": 2, "nextn_accepted": 2})
    assert two["reason"] is None and estimate_agg(**MTP_FP8, options={"nextn": 2.0, "nextn_accepted": 2.0}) == two


@needs_data
def test_nextn_auto():
    """'auto' is the checkpoint's num_nextn_predict_layers (golden points 46,
    47): DeepSeek-V3 has 1, Qwen3-32B none (MTP off, the acceptance ignored);
    the acceptance is then checked against the resolved depth."""
    one = estimate_agg(**DSV3_CALL, options={"nextn": 1, "nextn_accepted": 0.8})
    assert one["reason"] is None and one != estimate_agg(**DSV3_CALL)
    assert estimate_agg(**DSV3_CALL, options={"nextn": "auto", "nextn_accepted": 0.8}) == one
    assert estimate_agg(**MTP_FP8, options={"nextn": "auto", "nextn_accepted": 9.0}) == estimate_agg(**MTP_FP8)
    for db in (DSV3_DB, "no_such_system/sglang/0.5.14"):  # checked before the database, as the spec does
        with pytest.raises(ValueError, match=r"^nextn_accepted \(1.5\) must be within \[0, nextn=1\]\.$"):
            estimate_agg(**{**DSV3_CALL, "db": db}, options={"nextn": "auto", "nextn_accepted": 1.5})
    with pytest.raises(ValueError, match=r"^nextn=1 requires 'nextn_accepted' "):
        estimate_agg(**DSV3_CALL, options={"nextn": "auto"})
    with pytest.raises(ValueError, match=r"^nextn \(Auto\) must be an integer draft length\.$"):
        estimate_agg(**DSV3_CALL, options={"nextn": "Auto"})  # the API's 'auto' is exact (the settings fold case)
    # the multimodal wrappers read the text config (the spec's MULTIMODAL_TEXT_CONFIG_KEY)
    from aicsql.spec.step.model import model_config_path, parse_model

    path, _ = model_config_path(open_tree(), "moonshotai/Kimi-K2.5")
    with open(path, encoding="utf-8") as f:
        config = json.load(f)
    assert config["text_config"]["num_nextn_predict_layers"] == 0
    config["num_nextn_predict_layers"] = 3  # not where the spec looks
    assert parse_model("moonshotai/Kimi-K2.5", config, None, path).nextn_layers == 0
    config["text_config"]["num_nextn_predict_layers"] = 2
    assert parse_model("moonshotai/Kimi-K2.5", config, None, path).nextn_layers == 2


@needs_data
def test_nemotron_nas_refuses_mtp():
    """NemotronNas asserts nextn == 0 in its constructor: a refused
    deployment (a reason, ValueError under on_miss 'error'), on every path."""
    from aicsql.spec.serving import estimate_memory_batch

    text = "NemotronNas does not support MTP speculative decoding (nextn must be 0)"
    model, db = "nvidia/Llama-3_3-Nemotron-Super-49B-v1", "h200_sxm/vllm/0.24.0"
    options = {"nextn": 1, "nextn_accepted": 0.5}
    assert estimate_agg(model, db, 2, 1, 1024, 128)["reason"] is None
    for got in (estimate_agg(model, db, 2, 1, 1024, 128, options=options),
                estimate_memory(model, db, 2, 1, 1024, 128, options=options),
                estimate_disagg(model, db, 2, 1, 1, 2, 8, 1, 1024, 128, options=options)):  # fmt: skip
        assert got["reason"] == text and all(v is None for k, v in got.items() if k != "reason"), got
    with pytest.raises(ValueError, match=re.escape(text)):
        estimate_agg(model, db, 2, 1, 1024, 128, options=options, on_miss="error")
    for phase in ("context", "generation"):  # the model is refused, whichever step
        with pytest.raises(ValueError, match=re.escape(text)):
            step_latency(model, db, phase, 2, 1, 1024, 128, options={"nextn": 2})
    import pyarrow as pa

    args = [pa.array([v]) for v in (model, db, "generation", 2, 1, 1024, 128)]
    assert step_latency_batch({"aic.nextn": "1"}, *args).to_pylist() == [None]
    with pytest.raises(ValueError, match=re.escape(text)):
        step_latency_batch({"aic.nextn": "1", "aic.on_miss": "error"}, *args)
    margs = [pa.array([v]) for v in (model, db, 2, 1, 1024, 128)]
    assert estimate_memory_batch({"nextn": "1", "nextn_accepted": "0"}, *margs).to_pylist()[0]["reason"] == text
    # the checkpoint has no MTP layers: 'auto' is depth 0, priced as without
    auto = estimate_agg(model, db, 2, 1, 1024, 128, options={"nextn": "auto"})
    assert auto == estimate_agg(model, db, 2, 1, 1024, 128)


@needs_data
def test_step_functions_take_nextn():
    """options.md 2.3: a generation step at depth n prices one verification
    iteration -- every generation op's count times (n + L) / L, B * (n + 1)
    tokens -- and costs more; a context step is unchanged."""
    call = (DENSE, DENSE_DB)
    for phase in ("context", "generation"):
        plain = step_latency(*call, phase, 8, 4, 1024, 128)
        mtp = step_latency(*call, phase, 8, 4, 1024, 128, options={"nextn": 1})
        assert (mtp > plain) if phase == "generation" else (mtp == plain), phase
        assert step_latency(*call, phase, 8, 4, 1024, 128, options={"nextn": "auto"}) == plain  # Llama: no MTP
    plain = engine_step(*call, "generation", 8, 4, 1024, 128)["rows"]
    mtp = engine_step(*call, "generation", 8, 4, 1024, 128, options={"nextn": 2})["rows"]
    L = 32
    factor = (2 + L) / L
    ops = [(p, m) for p, m in zip(plain, mtp) if p["row_kind"] == "op"]
    assert ops and all(m["count"] == p["count"] * factor for p, m in ops)
    assert {p["count"] for p, _ in ops} == {1.0, 32.0, 0.0}  # embedding / logits, per layer, p2p at pp 1
    attention = [json.loads(m["lookup_args"]) for _, m in ops if m["op_name"] == "generation_attention"]
    assert attention and all(a["args"][0] == 4 * 3 for a in attention)  # batch * (nextn + 1)
    # a context step's rows are the same (same ops, counts and lookups)
    assert engine_step(*call, "context", 8, 4, 1024, 128, options={"nextn": 2}) == engine_step(
        *call, "context", 8, 4, 1024, 128)
    # the acceptance is the serving estimates' business
    with pytest.raises(ValueError, match=r"^option nextn_accepted is not taken by the step functions"):
        step_latency(*call, "generation", 8, 4, 1024, 128, options={"nextn": 1, "nextn_accepted": 0.5})
    with pytest.raises(ValueError, match=r"^nextn \(-1\) must be >= 0\.$"):
        engine_step(*call, "generation", 8, 4, 1024, 128, options={"nextn": -1})


@needs_data
def test_mtp_scales_inner_ops_of_composites_only():
    """DeepSeek's MLA block (FallbackOp) and MoE overlap (OverlapOp) keep the
    wrapper's count 1.0; every inner op carries the factor (the audit's
    section (d)); context ops never do."""
    from aicsql.spec.data import Database
    from aicsql.spec.step.composite import FallbackOp, OverlapOp
    from aicsql.spec.step.engine import step_context

    db = Database(*DSV3_DB.split("/"))
    plain = step_context(open_tree(), DSV3, db, True).layout("generation", 8, 1, 8)[2]
    ctx = step_context(open_tree(), DSV3, db, True, None, 3)
    assert ctx.nextn == 3 and ctx.mtp == (3 + 61) / 61
    ops = ctx.layout("generation", 8, 1, 8)[2]

    def leaves(op):
        if isinstance(op, FallbackOp):
            return [op.primary, *op.fallback]
        if isinstance(op, OverlapOp):
            return [*op.group_a, *op.group_b]
        return [op]

    wrappers = 0
    for p, m in zip(plain, ops):
        if isinstance(m, (FallbackOp, OverlapOp)):
            wrappers += 1
            assert m.count == p.count == 1.0
        for pl, ml in zip(leaves(p), leaves(m), strict=True):
            assert ml.count == pl.count * ctx.mtp and pl.count in (61.0, 1.0, 0.0), ml.name
    assert wrappers == 2
    context = ctx.layout("context", 8, 1, 8)[2]
    assert [op.count for op in context] == [op.count for op in step_context(open_tree(), DSV3, db, True).layout(
        "context", 8, 1, 8)[2]]


def test_mtp_factor_association():
    """The audit's claim the path relies on: GPT-OSS's windowed generation
    attention ``L * mtp / 2`` equals ``(L / 2) * mtp`` (what scaling the
    plain count gives) bit for bit, and the plain ``(L * 1.0) * mtp`` equals
    ``L * mtp``."""
    from aicsql.spec.step.engine import mtp_scale_factor

    for L in range(1, 400):
        for n in range(0, 12):
            mtp = mtp_scale_factor(n, L)
            assert (L * 1.0 / 2) * mtp == L * mtp / 2 and (L * 1.0) * mtp == L * mtp, (L, n)
    assert mtp_scale_factor(0, 61) == 1.0 and mtp_scale_factor(1, 61) == 62 / 61


@needs_data
def test_mtp_memory_scales_the_activations():
    """options.md 2.3 item 4: activations times nextn + 1 (after the floor,
    before sglang's overhead); weights and KV cache unchanged."""
    call = dict(model=DENSE, db=DENSE_DB, parallel=8, batch=64, isl=1024, osl=128)
    plain = estimate_memory(**call)
    for nextn in (1, 3):  # 2 and 4 tokens: powers of two commute with sglang's 1.15 exactly
        mtp = estimate_memory(**call, options={"nextn": nextn, "nextn_accepted": 1.0})
        assert mtp["activations_gib"] == plain["activations_gib"] * (nextn + 1)
        assert (mtp["weights_gib"], mtp["kvcache_gib"]) == (plain["weights_gib"], plain["kvcache_gib"])
        # the acceptance does not change the memory
        assert estimate_memory(**call, options={"nextn": nextn, "nextn_accepted": 0.0}) == mtp


def test_projection():
    """options.md 2.4 on a made-up row: rounded, projected, rounded again;
    vllm's Little's-law cap; nothing accepted returns the row itself."""
    from aicsql.spec.serving import numpy_round3
    from aicsql.spec.serving.speculative import project_agg, project_decode

    row = {"ttft_ms": 100.0004, "tpot_ms": 10.0, "request_latency_ms": 1370.0, "osl": 128, "concurrency": 8,
           "request_rate": 5.0, "seq_per_s": 5.0, "seq_per_s_per_gpu": 0.625, "tokens_per_s": 635.0,
           "tokens_per_s_per_gpu": 79.375, "tokens_per_s_per_user": 100.0, "mix_step_ms": 1.23456, "bs": 8,
           "warning": None}  # fmt: skip
    assert project_agg(row, 0.0, "vllm") is row and project_decode(row, 0.0) is row
    got = project_agg(row, 1.0, "sglang")
    assert got["tpot_ms"] == 5.0 and got["ttft_ms"] == 100.0 and got["request_latency_ms"] == 100.0 + 5.0 * 127
    assert (got["seq_per_s"], got["tokens_per_s"], got["tokens_per_s_per_user"]) == (10.0, 1270.0, 200.0)
    assert got["mix_step_ms"] == 1.23456 and got["bs"] == 8 and got["warning"] is None
    # vllm: 8 requests in flight over 0.735 s allow 10.884 seq/s, more than 2 * 5: the progress caps
    assert project_agg(row, 1.0, "vllm")["seq_per_s"] == 10.0
    # ... and with 4 in flight, Little's law does: 4 * 1000 / 735 / 5 of the rate
    capped = project_agg({**row, "concurrency": 4}, 1.0, "vLLM")
    assert capped["seq_per_s"] == numpy_round3(5.0 * (4 * 1000.0 / 735.0 / 5.0)) < 10.0
    assert capped["tokens_per_s_per_user"] == 200.0
    # a zero divisor (the spec's NaN) falls back to the progress
    assert project_agg({**row, "seq_per_s": 0.0}, 1.0, "vllm")["tokens_per_s"] == 1270.0
    static = {"ttft": 0, "tpot": 9.646, "request_latency": 1225.042, "osl": 128, "seq/s": 13.06, "seq/s/gpu": 13.06,
              "tokens/s": 1658.62, "tokens/s/gpu": 1658.62, "tokens/s/user": 103.67}  # fmt: skip
    d = project_decode(static, 1.4)
    assert d["tpot"] == numpy_round3(9.646 / 2.4) and d["seq/s"] == numpy_round3(13.06 * 2.4)
    # the latency from the unrounded new tpot, rounded once at the end
    assert d["request_latency"] == numpy_round3(0 + 9.646 / 2.4 * 127) != numpy_round3(d["tpot"] * 127)
    assert "request_rate" not in d


@needs_data
def test_batch_forms_read_mtp_from_the_settings():
    """``aic.nextn`` (an integer or 'auto', any case) and
    ``aic.nextn_accepted`` (a number); '' = unset; the spec's texts for a
    bad depth or acceptance, a clear one for text that is no number."""
    import pyarrow as pa

    from aicsql.spec.serving import estimate_memory_batch

    c = MTP_FP8
    args = [pa.array([v]) for v in (c["model"], c["db"], c["parallel"], c["batch"], c["isl"], c["osl"])]
    options = {"nextn": 2, "nextn_accepted": 1.4}
    want = estimate_agg(**c, options=options)
    assert estimate_agg_batch({"aic.nextn": "2", "aic.nextn_accepted": "1.4"}, *args).to_pylist()[0] == want
    assert estimate_agg_batch({"nextn": " 2 ", "nextn_accepted": "1.40"}, *args).to_pylist()[0] == want
    assert estimate_memory_batch({"nextn": "2", "nextn_accepted": "1.4"}, *args).to_pylist()[0] == estimate_memory(
        **c, options=options)
    dargs = [pa.array([v]) for v in DISAGG_DENSE]
    assert estimate_disagg_batch({"nextn": "1", "nextn_accepted": "0.5"}, *dargs).to_pylist()[0] == estimate_disagg(
        *DISAGG_DENSE, options={"nextn": 1, "nextn_accepted": 0.5})
    dsv3 = [pa.array([v]) for v in (DSV3, DSV3_DB, 8, 16, 1024, 128, 0, 1024, 1, 8)]
    assert estimate_agg_batch({"nextn": "AUTO", "nextn_accepted": "0.8"}, *dsv3).to_pylist()[0] == estimate_agg(
        **DSV3_CALL, options={"nextn": 1, "nextn_accepted": 0.8})
    plain = estimate_agg(**c)
    assert estimate_agg_batch({"nextn": "", "nextn_accepted": " "}, *args).to_pylist()[0] == plain
    assert estimate_agg_batch({"nextn": "0", "nextn_accepted": "7"}, *args).to_pylist()[0] == plain
    for settings, text in (({"nextn": "1.5", "nextn_accepted": "1"}, r"^nextn \(1\.5\) must be an integer draft"),
                           ({"nextn": "-1"}, r"^nextn \(-1\) must be >= 0\.$"),
                           ({"nextn": "2"}, r"^nextn=2 requires 'nextn_accepted'"),
                           ({"nextn": "2", "nextn_accepted": "3"}, r"^nextn_accepted \(3\.0\) must be within"),
                           ({"nextn": "two"}, r"^setting nextn = 'two' is not an integer or 'auto'$"),
                           ({"nextn": "1", "nextn_accepted": "half"},
                            r"^setting nextn_accepted = 'half' is not a number$")):  # fmt: skip
        with pytest.raises(ValueError, match=text):
            estimate_agg_batch(settings, *args)
    # the step batch form takes the depth and ignores the (serving) acceptance
    step = [pa.array([v]) for v in (DENSE, DENSE_DB, "generation", 8, 4, 1024, 128)]
    assert step_latency_batch({"nextn": "1", "nextn_accepted": "0.5"}, *step).to_pylist() == [
        step_latency(DENSE, DENSE_DB, "generation", 8, 4, 1024, 128, options={"nextn": 1})]


@needs_data
def test_searches_check_the_mtp_options_first():
    """The searches take MTP (options.md 2.5): the table forms read aic.nextn /
    aic.nextn_accepted and check them before the arguments (even a NULL one
    gives no rows only once they are valid), the plain forms take them in
    ``options``, with the estimates' texts; 'auto' resolves from the
    checkpoint before the database; nothing else is taken."""
    from aicsql.spec.search import run_search, search_agg_table, search_default_table, search_disagg_table

    args = [None, "h200_sxm/vllm/0.19.0", 8, 1024, 128, 0, 2000.0, 30.0]
    for table in (search_agg_table, search_disagg_table, search_default_table):
        for settings in ({"aic.nextn": "1", "aic.nextn_accepted": "0.5"}, {"aic.nextn": "AUTO"},
                         {"aic.nextn": "auto", "aic.nextn_accepted": "0.5"}, {"aic.nextn": ""}, {"aic.nextn": "0"},
                         {"aic.nextn_accepted": "0.5"}, {"aic.nextn": "0", "aic.nextn_accepted": "7"}, {}):  # fmt: skip
            assert table(settings, *args).num_rows == 0, settings  # NULL argument: no rows
        for settings, text in (({"aic.nextn": "-1"}, r"^nextn \(-1\) must be >= 0\.$"),
                               ({"aic.nextn": "1.5", "aic.nextn_accepted": "1"}, r"^nextn \(1\.5\) must be an integer"),
                               ({"aic.nextn": "2"}, r"^nextn=2 requires 'nextn_accepted'"),
                               ({"aic.nextn": "2", "aic.nextn_accepted": "3"},
                                r"^nextn_accepted \(3\.0\) must be within \[0, nextn=2\]\.$"),
                               ({"aic.nextn": "two"}, r"^setting nextn = 'two' is not an integer or 'auto'$")):  # fmt: skip
            with pytest.raises(ValueError, match=text):
                table(settings, *args)
    plain = (DENSE, "no_such_system/sglang/0.5.14", 4, 1024, 128, 0, 2000.0, 30.0)
    for options, text in (({"nextn": 2}, r"^nextn=2 requires 'nextn_accepted'"),
                          ({"nextn": "2", "nextn_accepted": 1}, r"^nextn \(2\) must be an integer draft length\.$"),
                          ({"nextn": 1, "nextn_accepted": 1.5}, r"^nextn_accepted \(1\.5\) must be within"),
                          ({"nextn": 1, "nextn_accepted": 0.5, "kvcache_quant": "fp8"},
                           r"^the searches take the options nextn, nextn_accepted, max_seq_len, "
                           r"free_gpu_memory_fraction, image_height, image_width, num_images, enable_encoder_dp, decode_system only, "
                           r"not kvcache_quant$"),
                          ({"max_seq_len": 0}, r"^option max_seq_len = 0 must be a positive integer$"),
                          ({"free_gpu_memory_fraction": 1.5}, r"^option free_gpu_memory_fraction = 1.5 must be"),
                          ({"nextn": 1, "nextn_top": 1}, r"^unknown option 'nextn_top'")):  # fmt: skip
        with pytest.raises(ValueError, match=text):
            run_search(*plain[:3], -5, *plain[4:], options=options)  # checked before the (bad) isl
    # 'auto': the checkpoint's depth (DeepSeek-V3: 1), checked before the (unknown) database
    with pytest.raises(ValueError, match=r"^nextn=1 requires 'nextn_accepted' "):
        run_search(DSV3, "no_such_system/sglang/0.5.14", 8, 1024, 128, options={"nextn": "auto"})


@needs_data
def test_searches_price_mtp():
    """options.md 2.4 / 2.5 on a one-GPU search (agg only): the candidates are
    the estimates at the draft depth with the projection (the keep test on
    projected values); the table form reads the same options from the
    settings; depth 0 and 'auto' on a checkpoint without MTP layers are the
    search without MTP; accepted = 0 prices the depth with no projection."""
    from aicsql.spec.search import run_search, search_agg, search_agg_table

    db = "rtx_pro_6000_server/sglang/0.5.14"
    args = (DENSE, db, 1, 256, 256, 128, 1500.0, 50.0)
    mtp = {"nextn": 2, "nextn_accepted": 1.4}
    base = run_search(*args, top_n=1, modes=("agg",)).modes["agg"]
    res = run_search(*args, top_n=1, modes=("agg",), options=mtp).modes["agg"]
    assert base.ok and res.ok and res.candidates != base.candidates
    assert all(r["tpot"] <= 50.0 and r["ttft"] <= 1500.0 for r in res.candidates)
    for r in res.candidates[:: max(1, len(res.candidates) // 12)]:
        got = estimate_agg(DENSE, db, r["parallel"], r["bs"], r["isl"], r["osl"], r["prefix"], r["ctx_tokens"],
                           on_miss="error", options=mtp)  # fmt: skip
        assert (got["tpot_ms"], got["ttft_ms"], got["tokens_per_s_per_gpu"], got["memory_gib"]) == (
            r["tpot"], r["ttft"], r["tokens/s/gpu"], r["memory"])
    table = search_agg(*args, top_n=1, options=mtp)
    assert search_agg_table({"aic.nextn": "2", "aic.nextn_accepted": "1.4", "aic.top_n": "1"}, *args) == (
        table.combine_chunks().to_batches()[0])
    for options in ({"nextn": 0, "nextn_accepted": 9.0}, {"nextn": "auto", "nextn_accepted": 1.4}):
        assert run_search(*args, top_n=1, modes=("agg",), options=options).modes["agg"].candidates == base.candidates
    zero = run_search(*args, top_n=1, modes=("agg",), options={"nextn": 2, "nextn_accepted": 0}).modes["agg"]
    r = zero.candidates[0]
    got = estimate_agg(DENSE, db, r["parallel"], r["bs"], r["isl"], r["osl"], r["prefix"], r["ctx_tokens"],
                       on_miss="error", options={"nextn": 2, "nextn_accepted": 0})  # fmt: skip
    assert got["tpot_ms"] != estimate_agg(DENSE, db, r["parallel"], r["bs"], r["isl"], r["osl"], r["prefix"],
                                          r["ctx_tokens"], on_miss="error")["tpot_ms"]  # fmt: skip
    assert numpy_round3(got["tpot_ms"]) == r["tpot"] and numpy_round3(got["ttft_ms"]) == r["ttft"]

@needs_data
def test_searches_take_the_kv_knobs_and_chunked_prefill():
    """options.md 3.2 / 3.3: TRT-LLM's KV knobs reach every agg point (a point
    over the KV budget ends its layout's budget loop), chunked prefill the
    budget list; the table forms read them from the settings; a budget no
    batch fits fails the agg experiment as the spec's KVCacheCapacityError.
    (The spec's frames: tests/goldens/search/llama31_8b_h200_trtllm_2gpu_*.)"""
    from aicsql.spec.search import run_search, search_agg, search_agg_table

    db = "h200_sxm/trtllm/1.3.0rc15"
    args = (DENSE, db, 2, 4000, 1000, 0, 2000.0, 30.0)
    kv = {"max_seq_len": 16384, "free_gpu_memory_fraction": 0.3}
    base = run_search(*args, modes=("agg",)).modes["agg"].candidates
    knobs = run_search(*args, modes=("agg",), options=kv).modes["agg"].candidates
    chunked = run_search(*args, modes=("agg",), enable_chunked_prefill=True).modes["agg"].candidates
    assert (len(base), len(knobs), len(chunked)) == (131, 65, 304)
    settings = {"aic.max_seq_len": "16384", "aic.free_gpu_memory_fraction": "0.3", "aic.enable_chunked_prefill": "on"}
    table = search_agg(*args, options=kv, enable_chunked_prefill=True)
    assert search_agg_table(settings, *args) == table.combine_chunks().to_batches()[0]
    failed = run_search(*args, options={"max_seq_len": 16384, "free_gpu_memory_fraction": 0.001})
    assert not failed.modes["agg"].ok and failed.modes["agg"].reason.startswith("KVCacheCapacityError: ")
    assert failed.modes["disagg"].ok
    with pytest.raises(ValueError, match=r"^setting enable_chunked_prefill = 'maybe' is not a boolean$"):
        search_agg_table({"aic.enable_chunked_prefill": "maybe"}, *args)
    with pytest.raises(ValueError, match=r"^the spec's search takes no quant overrides; unset aic\.kvcache_quant"):
        search_agg_table({"aic.kvcache_quant": "fp8"}, *args)


# ---- images (options.md 4) -----------------------------------------------------------------------

VL, VL_SGLANG, VL_VLLM = "Qwen/Qwen3-VL-8B-Instruct", "h200_sxm/sglang/0.5.14", "h200_sxm/vllm/0.24.0"
VL_CALL = dict(model=VL, db=VL_SGLANG, parallel=2, batch=8, isl=1024, osl=128)  # golden points 60 - 63
IMAGE = {"image_height": 448, "image_width": 448}
DISAGG_VL = (VL, "h200_sxm/trtllm/1.3.0rc20", 2, 1, 1, 2, 16, 1, 1024, 128)  # golden points 64, 65


def _vision(model=VL):
    from aicsql.spec.step.model import load_model

    return load_model(open_tree(), model).vision


@needs_data
def test_image_token_counts():
    """options.md 4.3 on Qwen3-VL-8B (16-pixel patches, 2 x 2 merge): 448 x
    448 is 784 ViT patches and 196 LLM tokens; floors per side; no image
    without both sides or under one merged patch."""
    from aicsql.spec.step.vision import NO_IMAGE_TOKENS, image_tokens

    v = _vision()
    assert (v.depth, v.hidden_size, v.num_heads, v.intermediate_size, v.out_hidden_size) == (27, 1152, 16, 4304, 4096)
    assert (v.patch_size, v.spatial_merge_size, v.deepstack_visual_indexes) == (16, 2, (8, 16, 24))
    assert (v.head_dim, v.merged_width, v.projector_instances) == (72, 4608, 4)
    assert image_tokens(v, 448, 448) == (196, 784)
    assert image_tokens(v, 1024, 768) == (32 * 24, 64 * 48)
    assert image_tokens(v, 470, 450) == (14 * 14, 29 * 28)  # floors per side
    for h, w in ((0, 448), (448, 0), (0, 0), (10, 10), (31, 448)):  # 31 px: one patch, no merged token
        assert image_tokens(v, h, w) == NO_IMAGE_TOKENS, (h, w)
    assert image_tokens(None, 448, 448) == NO_IMAGE_TOKENS
    # the Qwen3-VL text models have the encoder, the other families none
    assert _vision("Qwen/Qwen3-VL-30B-A3B-Instruct").out_hidden_size == 2048
    assert _vision(DENSE) is None
    # the estimate: 196 image tokens per image in front of the text; isl reports the text
    plain = estimate_agg(**VL_CALL)
    one = estimate_agg(**VL_CALL, options={**IMAGE, "num_images": 1})
    two = estimate_agg(**VL_CALL, options={**IMAGE, "num_images": 2})
    assert one["isl"] == two["isl"] == plain["isl"] == 1024
    assert one["balance_score"] == (1024 + 196) * 8 / 1024 / 128
    assert two["balance_score"] == (1024 + 392) * 8 / 1024 / 128
    assert plain["encoder_latency_ms"] == 0.0 and plain["encoder_memory_gib"] == 0.0
    assert 0 < one["encoder_latency_ms"] < two["encoder_latency_ms"] and one["ttft_ms"] > plain["ttft_ms"]


@needs_data
def test_encoder_ops():
    """options.md 4.5: the op list in the spec's order, whole under encoder
    data parallelism (plus the embeddings' all-gather at tp > 1), sharded
    without it; bfloat16 whatever the LLM's modes."""
    from aicsql.spec.step.vision import encoder_ops

    v = _vision()
    names = ["encoder_add_norm_1", "encoder_qkv_gemm", "encoder_attention", "encoder_proj_gemm", "encoder_ar_1",
             "encoder_add_norm_2", "encoder_ffn1_gemm", "encoder_act", "encoder_ffn2_gemm", "encoder_ar_2",
             "encoder_rope_apply", "encoder_projector_fc0_gemm", "encoder_projector_fc0_act",
             "encoder_projector_fc1_gemm", "encoder_projector_ar"]  # fmt: skip
    one = encoder_ops(v, 1)
    assert [op.name for op in one] == names and encoder_ops(v, 1, False)[-1].name == "encoder_projector_ar"
    assert [op.count for op in one] == [27] * 11 + [4] * 4
    dp = encoder_ops(v, 4)
    assert [op.name for op in dp] == names + ["encoder_dp_all_gather"]
    gather = dp[-1]
    assert (gather.count, gather.op, gather.gpus, gather.elements_per_token) == (1, "all_gather", 4, 4096 * 4 * 4)
    assert dp[1].n == 3 * 1152 and dp[4].tp == 1  # whole replicas: the all-reduces are free
    tp = {op.name: op for op in encoder_ops(v, 4, encoder_dp=False)}
    assert len(tp) == len(names) and (tp["encoder_qkv_gemm"].n, tp["encoder_attention"].n) == (3 * 1152 // 4, 4)
    assert (tp["encoder_ffn1_gemm"].n, tp["encoder_ffn2_gemm"].k, tp["encoder_ar_2"].tp) == (1076, 1076, 4)
    assert (tp["encoder_projector_fc0_gemm"].n, tp["encoder_projector_fc1_gemm"].k) == (4608 // 4, 4608 // 4)
    assert tp["encoder_rope_apply"].dim_in == 6 * 4 * 72
    assert {op.quant_label for op in one if op.kind == "GEMM"} == {"bfloat16"}
    weights = sum(op.weights() for op in one)
    assert weights == sum(op.n * op.k * 2 * op.count for op in one if op.kind == "GEMM")


@needs_data
def test_vit_sharding_is_refused_where_tp_does_not_divide():
    """options.md 4.5: a sharded encoder (enable_encoder_dp False) needs tp to
    divide the ViT's 16 heads and 4304 FFN width: tp 32 (which the LLM's 32
    heads allow) is a refused deployment with the spec's text -- images or
    not, on the decode side of a disaggregated estimate too; data parallel
    it is priced."""
    text = "ViT num_heads (16) must be divisible by tp_size (32)"
    call = {**VL_CALL, "parallel": 32}
    assert estimate_agg(**call)["reason"] is None
    for options in ({"enable_encoder_dp": False}, {**IMAGE, "enable_encoder_dp": False}):
        got = estimate_agg(**call, options=options)
        assert got["reason"] == text and all(v is None for k, v in got.items() if k != "reason")
        assert estimate_memory(**call, options=options)["reason"] == text
        with pytest.raises(ValueError, match=re.escape(text)):
            estimate_agg(**call, options=options, on_miss="error")
    disagg = estimate_disagg(VL, VL_SGLANG, 2, 1, 1, 32, 16, 1, 1024, 128, options={"enable_encoder_dp": False})
    assert disagg["reason"] == text


@needs_data
def test_image_option_validation():
    """Malformed image options are ValueErrors naming the option and the
    value, whatever on_miss says (the spec checks nothing: aicsql refuses
    what cannot be an image); 0 and None / '' mean no image / the default."""
    for key in ("image_height", "image_width", "num_images"):
        limit = 1024 if key == "num_images" else 65536  # the Rust path's limits
        for bad in (-1, 1.5, 448.0, True, "448", [448], limit + 1):
            with pytest.raises(ValueError, match=rf"^option {key} = {re.escape(repr(bad))} must be an integer from 0 "
                                                 rf"to {limit}$"):  # fmt: skip
                estimate_agg(**VL_CALL, options={key: bad}, on_miss="null")
        assert estimate_agg(**VL_CALL, options={**IMAGE, key: limit}) is not None  # the limit itself is taken
    for bad in ("yes", 1, 0, "true", 1.0):
        with pytest.raises(ValueError, match=r"^option enable_encoder_dp = .* must be a boolean \(True or False\)$"):
            estimate_disagg(*DISAGG_VL, options={"enable_encoder_dp": bad})
    with pytest.raises(ValueError, match=r"^option image_height = -1 must be an integer from 0 to 65536$"):
        estimate_memory(**VL_CALL, options={"image_height": -1})
    # no image: the text-only estimate, whatever else is given
    plain = estimate_agg(**VL_CALL)
    for options in ({"image_height": 0, "image_width": 448}, {**IMAGE, "num_images": 0}, {"num_images": 5},
                    {"image_height": 10, "image_width": 10}, {"image_height": None, "image_width": ""},
                    {"enable_encoder_dp": True}, {**IMAGE, "num_images": 0, "enable_encoder_dp": False}):  # fmt: skip
        assert estimate_agg(**VL_CALL, options=options) == plain, options
    # encoder data parallel or sharded is the same encoder at tp 1
    tp1 = {**VL_CALL, "parallel": 1}
    assert estimate_agg(**tp1, options={**IMAGE, "enable_encoder_dp": False}) == estimate_agg(**tp1, options=IMAGE)
    # images beyond the limits of one call are bad input too
    with pytest.raises(ValueError, match=r"^isl \+ image tokens \(1024 \+ 16777216\) = 16778240 exceeds the limit"):
        estimate_agg(**VL_CALL, options={"image_height": 65536, "image_width": 65536, "num_images": 4})


@needs_data
def test_models_without_a_vision_encoder_ignore_images():
    """options.md 4.2: the image options are silently ignored by every model
    but Qwen3-VL (golden point 67), encoder DP or not, on every estimate."""
    images = {**IMAGE, "num_images": 3, "enable_encoder_dp": False}
    call = dict(model=DENSE, db=DENSE_DB, parallel=8, batch=4, isl=1024, osl=128)
    assert estimate_agg(**call, options=images) == estimate_agg(**call)
    assert estimate_memory(**call, options=images) == estimate_memory(**call)
    assert estimate_disagg(*DISAGG_DENSE, options=images) == estimate_disagg(*DISAGG_DENSE)
    moe = ("Qwen/Qwen3-30B-A3B", "gb200/sglang/0.5.14", 4, 4, 1024, 128)
    assert estimate_agg(*moe, moe_ep=4, options=images) == estimate_agg(*moe, moe_ep=4)


@needs_data
def test_image_memory_and_disagg():
    """options.md 4.6, 4.7: the encoder's memory adds to the aggregated and
    the prefill worker's memory, not to the decode worker's; the decode
    worker decodes after the image tokens; only the prefill TTFT carries the
    encoder."""
    plain = estimate_memory(**VL_CALL)
    mem = estimate_memory(**VL_CALL, options=IMAGE)
    agg = estimate_agg(**VL_CALL, options=IMAGE)
    enc = agg["encoder_memory_gib"]
    assert mem["total_gib"] == agg["memory_gib"] and mem["fits"]
    assert mem["weights_gib"] > plain["weights_gib"] and mem["activations_gib"] > plain["activations_gib"]
    assert mem["kvcache_gib"] > plain["kvcache_gib"]  # 196 more tokens per sequence
    assert (mem["nccl_gib"], mem["others_gib"]) == (plain["nccl_gib"], plain["others_gib"])
    assert abs(mem["total_gib"] - plain["total_gib"] - enc - (mem["kvcache_gib"] - plain["kvcache_gib"])) < 1e-3
    # sharded, the encoder's weights are split over the tp ranks
    sharded = estimate_agg(**VL_CALL, options={**IMAGE, "enable_encoder_dp": False})
    assert sharded["encoder_memory_gib"] < enc and sharded["encoder_latency_ms"] != agg["encoder_latency_ms"]
    text = estimate_disagg(*DISAGG_VL)
    got = estimate_disagg(*DISAGG_VL, options=IMAGE)
    assert got["ttft_ms"] > text["ttft_ms"] and got["tpot_ms"] > text["tpot_ms"]
    assert got["prefill_memory_gib"] > text["prefill_memory_gib"]
    assert got["decode_memory_gib"] > text["decode_memory_gib"]  # the KV cache of the image tokens
    assert got["isl"] == 1024


@needs_data
def test_batch_forms_read_the_images_from_the_settings():
    """``aic.image_height``, ``aic.image_width``, ``aic.num_images`` (integers)
    and ``aic.enable_encoder_dp`` (a boolean), '' = unset; the step batch form
    ignores them (a serving setting, like ``aic.nextn_accepted``)."""
    import pyarrow as pa

    from aicsql.spec.serving import estimate_memory_batch

    settings = {"aic.image_height": "896", "aic.image_width": " 448 ", "aic.num_images": "3",
                "aic.enable_encoder_dp": "false"}  # fmt: skip
    options = {"image_height": 896, "image_width": 448, "num_images": 3, "enable_encoder_dp": False}
    args = [pa.array([v]) for v in (VL, VL_SGLANG, 2, 8, 1024, 128)]
    got = estimate_agg_batch(settings, *args).to_pylist()[0]
    assert got == estimate_agg(**VL_CALL, options=options) and got["encoder_latency_ms"] > 0
    assert estimate_memory_batch(settings, *args).to_pylist()[0] == estimate_memory(**VL_CALL, options=options)
    dargs = [pa.array([v]) for v in DISAGG_VL]
    assert estimate_disagg_batch(settings, *dargs).to_pylist()[0] == estimate_disagg(*DISAGG_VL, options=options)
    unset = {"aic.image_height": "", "aic.image_width": " ", "aic.num_images": "", "aic.enable_encoder_dp": ""}
    assert estimate_agg_batch(unset, *args).to_pylist()[0] == estimate_agg(**VL_CALL)
    assert estimate_agg_batch({"enable_encoder_dp": "TRUE", **{k: str(v) for k, v in IMAGE.items()}},
                              *args).to_pylist()[0] == estimate_agg(**VL_CALL, options=IMAGE)  # fmt: skip
    for settings, text in (({"aic.image_height": "448px"}, r"^setting image_height = '448px' is not an integer$"),
                           ({"aic.num_images": "-1"}, r"^option num_images = -1 must be an integer from 0 to 1024$"),
                           ({"aic.enable_encoder_dp": "maybe"},
                            r"^setting enable_encoder_dp = 'maybe' is not a boolean")):  # fmt: skip
        with pytest.raises(ValueError, match=text):
            estimate_agg_batch(settings, *args)
    step = [pa.array([v]) for v in (VL, VL_SGLANG, "context", 2, 8, 1024, 128)]
    assert step_latency_batch({"aic.image_height": "448", "aic.image_width": "448"}, *step).to_pylist() == [
        step_latency(VL, VL_SGLANG, "context", 2, 8, 1024, 128)]


@needs_data
def test_step_functions_refuse_images_and_searches_check_them():
    """A step prices the tokens it is given (no encoder phase): the step
    functions refuse the image options, as they refuse nextn_accepted. The
    searches take them as ``cli_default`` does (options.md 4.9; their
    numbers: the image search goldens), checked as the estimates check them:
    the plain forms in ``options``, the table forms as settings."""
    from aicsql.spec.search import run_search, search_agg_table, search_default_table, search_disagg_table

    for options in ({"image_height": 448}, {"num_images": 1}, {"enable_encoder_dp": False}):
        with pytest.raises(ValueError, match=r"^option \w+ is not taken by the step functions"):
            step_latency(VL, VL_SGLANG, "context", 2, 8, 1024, 128, options=options)
        with pytest.raises(ValueError, match=r"not taken by the step functions"):
            engine_step(VL, VL_SGLANG, "generation", 2, 8, 1024, 128, options=options)
    with pytest.raises(ValueError, match=r"^options image_height, image_width are not taken by the step functions"):
        step_latency(VL, VL_SGLANG, "context", 2, 8, 1024, 128, options=IMAGE)
    assert step_latency(VL, VL_SGLANG, "context", 2, 8, 1024, 128, options={"image_height": None}) == step_latency(
        VL, VL_SGLANG, "context", 2, 8, 1024, 128)
    search = (VL, "no_such_system/sglang/0.5.14", 4, 1024, 128, 0, 2000.0, 30.0)
    for options in (IMAGE, {"num_images": 2}, {"enable_encoder_dp": False}, {"nextn": 1, "nextn_accepted": 0.5,
                                                                              "image_width": 448}):  # fmt: skip
        # well-formed images pass the option checks: the search goes on to the database
        with pytest.raises(ValueError, match=r"^unknown system 'no_such_system'"):
            run_search(*search, options=options)
    with pytest.raises(ValueError, match=r"^option image_height = -1 must be an integer from 0 to 65536$"):
        run_search(*search, options={"image_height": -1})
    args = [None, VL_SGLANG, 8, 1024, 128, 0, 2000.0, 30.0]
    defaults = {"aic.image_height": "0", "aic.image_width": "0", "aic.num_images": "1", "aic.enable_encoder_dp": "true"}
    for table in (search_agg_table, search_disagg_table, search_default_table):
        # a NULL model: no rows, whatever the (well-formed) images
        for settings in ({"aic.image_height": "", "aic.num_images": ""}, defaults,
                         {"aic.image_height": "448", "aic.image_width": "448"}, {"aic.enable_encoder_dp": "false"},
                         {"aic.num_images": "2"}):  # fmt: skip
            assert table(settings, *args).num_rows == 0
        with pytest.raises(ValueError, match=r"^setting num_images = 'two' is not an integer$"):
            table({"aic.num_images": "two"}, *args)


@needs_data
def test_the_options_parity_scan_has_no_drift():
    """``python -m aicsql.parity --scan serving-options``: every well-formed
    point of the options goldens, its options as the STRUCT both SQL
    functions take per row, priced alike on both paths, field by field: the
    72 the spec prices STRICT_PASS, the 19 deployments it refuses a reason on
    both sides (MISS_BOTH)."""
    import aicsql
    from aicsql import parity

    ctx = aicsql.context()
    report = parity.run(ctx, "serving-options", progress=False)
    counts = parity.status_counts(report)
    assert report.num_rows == 91
    assert (counts["STRICT_PASS"], counts["MISS_BOTH"]) == (72, 19), counts
    assert counts["DRIFT"] == counts["REGRESSION"] == counts["EXTRA"] == 0, counts


@needs_data
def test_the_batch_forms_take_a_per_row_options_struct():
    """The SQL functions of the Python path take the options STRUCT per row,
    over the session's settings, as the Rust ones do: a grid over options is
    one query on both paths."""
    import aicsql

    ctx = aicsql.context()
    sql = """SELECT k, e['tpot_ms'] AS t, p['tpot_ms'] AS pt, e['encoder_latency_ms'] AS enc, p['encoder_latency_ms'] AS penc
             FROM (SELECT k, estimate_agg('Qwen/Qwen3-VL-8B-Instruct', 'h200_sxm/sglang/0.5.14', 2, 8, 1024, 128, o) AS e,
                          py_estimate_agg('Qwen/Qwen3-VL-8B-Instruct', 'h200_sxm/sglang/0.5.14', 2, 8, 1024, 128, o) AS p
                   FROM (SELECT k, named_struct('image_height', h, 'kvcache_quant', kv, 'nextn', n, 'nextn_accepted', a) AS o
                         FROM (VALUES (1, 448, NULL, NULL, NULL), (2, NULL, 'fp8', NULL, NULL), (3, 448, NULL, 1, 0.5))
                              AS t(k, h, kv, n, a)))
             ORDER BY k"""  # fmt: skip
    ctx.sql("SET aic.image_width = 448")
    rows = ctx.sql(sql).to_arrow_table().to_pylist()
    assert [(r["t"] == r["pt"], r["enc"] == r["penc"]) for r in rows] == [(True, True)] * 3
    # the MTP row is projected: the spec's frame at three decimals
    assert rows[0]["enc"] > 0 and rows[1]["enc"] == 0.0 and rows[2]["enc"] == round(rows[0]["enc"], 3)
