"""The spec's own search results re-priced by the Python path's serving estimates.

``tests/goldens/search/<case>/{agg,disagg}.candidates.parquet`` are the
candidate frames aiconfigurator v0.11.0's ``cli default`` returned for four
cases (``meta.json``: model, system, backend, version), rounded by numpy to 3
decimals. Every candidate -- attention dp > 1 and context parallelism cp
> 1 included (the Qwen3-30B-A3B gb200 / sglang case: 608 agg candidates and
72 disagg prefill workers at cp 2, 4, 8; the Llama-3.1-8B rtx_pro_6000_server /
sglang case: 233 agg candidates and 6 disagg prefill workers at cp 2, 4) -- is
priced again:

* agg: ``estimate_agg`` at the row's ``parallel`` label, ``bs``, ``isl``,
  ``osl``, ``prefix`` and ``ctx_tokens``;
* disagg: ``estimate_disagg`` at ``(p)parallel``, ``(p)bs``, ``(p)workers``,
  ``(d)parallel``, ``(d)bs``, ``(d)workers`` (the estimate is already
  rounded like the spec's frame);

and every value of the row (latencies, throughputs, memory, the scheduling
counts, the layout and quant labels) must equal the estimate after numpy's
3-decimal rounding. (The search frames hold no pp > 1 candidate; pp has its
own tests in test_spec_pipeline_context.py.)

One label differs by design: a vllm decode worker of an fp8-FMHA checkpoint
(Qwen3-32B-FP8) is labelled ``(d)fmha = fp8`` by the search, while
``estimate_disagg`` reports the FMHA mode the step runs with, vllm's legacy
guard's ``bfloat16`` (the spec's ``cli_estimate`` reports that one too, see
the serving goldens); a generation step reads no FMHA table, so no number
depends on it.
"""

from __future__ import annotations

import json
import math
import os
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from aicsql.spec import open_tree
from aicsql.spec.search.api import GPTOSS_BLACKWELL
from aicsql.spec.serving import estimate_agg, estimate_disagg, numpy_round3

from _support import have_data, require

REPO = Path(__file__).resolve().parents[2]
SEARCH = Path(os.environ.get("AICSQL_GOLDENS") or REPO / "tests" / "goldens") / "search"
# The `--backend auto` cases (their experiments' frames and the merged picks) are test_spec_search_auto.py's,
# the `cli recommend` ones (a load target) test_spec_recommend.py's.
def _plain_case(path: Path) -> bool:
    a = json.loads((path / "meta.json").read_text())["args"]
    return a["backend"] != "auto" and a.get("target_request_rate") is None and a.get("target_concurrency") is None


CASES = sorted(p.name for p in SEARCH.iterdir() if (p / "meta.json").is_file() and _plain_case(p)) \
    if SEARCH.is_dir() else []  # fmt: skip
HAVE = bool(CASES) and have_data(open_tree)
needs_data = require(HAVE, f"search goldens ({SEARCH}) or the perf data are missing")

# frame column -> estimate_agg field
AGG_FIELDS = {
    "ttft": "ttft_ms", "tpot": "tpot_ms", "request_latency": "request_latency_ms", "seq/s": "seq_per_s",
    "seq/s/gpu": "seq_per_s_per_gpu", "request_rate": "request_rate", "tokens/s": "tokens_per_s",
    "tokens/s/gpu": "tokens_per_s_per_gpu", "tokens/s/user": "tokens_per_s_per_user", "memory": "memory_gib",
    "balance_score": "balance_score", "num_ctx_reqs": "num_ctx_reqs", "num_gen_reqs": "num_gen_reqs",
    "num_tokens": "num_tokens", "gen_tokens": "gen_tokens", "concurrency": "concurrency", "global_bs": "global_bs",
    "num_total_gpus": "num_total_gpus", "bs": "bs", "isl": "isl", "osl": "osl", "prefix": "prefix",
    "ctx_tokens": "ctx_tokens", "parallel": "parallel", "tp": "tp", "pp": "pp", "dp": "dp", "moe_tp": "moe_tp",
    "moe_ep": "moe_ep", "cp": "cp", "gemm": "gemm", "kvcache": "kvcache", "fmha": "fmha", "moe": "moe",
    "comm": "comm", "system": "system", "backend": "backend", "version": "version",
}  # fmt: skip
DISAGG_FIELDS = {
    "ttft": "ttft_ms", "tpot": "tpot_ms", "request_latency": "request_latency_ms", "seq/s": "seq_per_s",
    "seq/s/gpu": "seq_per_s_per_gpu", "request_rate": "request_rate", "tokens/s": "tokens_per_s",
    "tokens/s/gpu": "tokens_per_s_per_gpu", "tokens/s/user": "tokens_per_s_per_user", "concurrency": "concurrency",
    "num_total_gpus": "num_total_gpus", "isl": "isl", "osl": "osl", "prefix": "prefix",
}  # fmt: skip
for _p, _side in (("(p)", "prefill_"), ("(d)", "decode_")):
    for _col, _field in (("seq/s/worker", "seq_per_s_per_worker"), ("memory", "memory_gib"), ("bs", "bs"),
                         ("global_bs", "global_bs"), ("workers", "workers"), ("parallel", "parallel"), ("tp", "tp"),
                         ("pp", "pp"), ("dp", "dp"), ("moe_tp", "moe_tp"), ("moe_ep", "moe_ep"), ("gemm", "gemm"),
                         ("kvcache", "kvcache"), ("fmha", "fmha"), ("moe", "moe")):  # fmt: skip
        DISAGG_FIELDS[_p + _col] = _side + _field
    DISAGG_FIELDS[_p + "comm"] = "comm"
    DISAGG_FIELDS[_p + "system"] = "system"
    DISAGG_FIELDS[_p + "backend"] = "backend"
    DISAGG_FIELDS[_p + "version"] = "version"
# A decode system of its own (experiments.md 1): the decode role's database.
DISAGG_FIELDS["(d)system"], DISAGG_FIELDS["(d)version"] = "decode_system", "decode_version"


#: The options of a case's meta.json args that the estimates (and run_search's ``options``) take.
ESTIMATE_OPTION_KEYS = ("nextn", "nextn_accepted", "max_seq_len", "free_gpu_memory_fraction",
                        "image_height", "image_width", "num_images", "enable_encoder_dp", "decode_system")

def _meta(case: str) -> dict:
    return json.loads((SEARCH / case / "meta.json").read_text())["args"]


def _options(case: str):
    """The case's estimate options (meta.json args: MTP's ``nextn`` / ``nextn_accepted``,
    TRT-LLM's ``max_seq_len`` / ``free_gpu_memory_fraction``, the image options), None
    without any."""
    args = _meta(case)
    options = {k: args[k] for k in ESTIMATE_OPTION_KEYS if args.get(k) is not None}
    return options or None


def _rows(case: str, mode: str) -> list:
    return pq.read_table(SEARCH / case / f"{mode}.candidates.parquet").to_pylist()


def _same(frame, got) -> bool:
    """Equal after numpy's 3-decimal rounding of the estimate (ints as floats; NULL = None)."""
    if frame is None or got is None:
        return frame is None and got is None
    if isinstance(frame, str) or isinstance(got, str):
        return frame == got
    if isinstance(frame, float) and math.isnan(frame):
        return isinstance(got, float) and math.isnan(got)
    v = numpy_round3(float(got)) if isinstance(got, float) else got
    return float(frame) == float(v)


def _layout(row: dict, mode: str) -> tuple:
    """(dp, cp) of a candidate -- disagg: the larger dp of its workers, the prefill cp
    (a decode worker never has cp > 1 in the frames)."""
    if mode == "agg":
        return row["dp"], row.get("cp") or 1
    return max(row["(p)dp"], row["(d)dp"]), max(row.get("(p)cp") or 1, row.get("(d)cp") or 1)


def _known_label_difference(col: str, frame, got, backend: str) -> bool:
    """The decode FMHA label of the module doc (vllm, 'fp8' in the frame, 'bfloat16' here)."""
    return col == "(d)fmha" and backend == "vllm" and frame == "fp8" and got == "bfloat16"


def _reprice(case: str, mode: str):
    """(rows re-priced, equal) per (dp, cp), and the first differences."""
    meta = _meta(case)
    options = _options(case)
    db = f"{meta['system']}/{meta['backend']}/{meta['version']}"
    fields = AGG_FIELDS if mode == "agg" else DISAGG_FIELDS
    # The search task's GPT-OSS-on-Blackwell experts (experiments.md 1.5) are an explicit MoE mode
    # to the estimates, which lack the rule: given as the row's own when every role has it.
    promoted = "w4a8_mxfp4_mxfp8"
    if meta["model"] in GPTOSS_BLACKWELL and meta["backend"] == "trtllm":
        moes = {r.get("moe") or r.get("(p)moe") for r in _rows(case, mode)} | {r.get("(d)moe", promoted)
                                                                              for r in _rows(case, mode)}
        if moes == {promoted}:
            options = dict(options or {}, moe_quant=promoted)
    priced, equal, failures = Counter(), Counter(), []
    for row in _rows(case, mode):
        if mode == "agg":
            # The agg experiment runs on the case's system alone (experiments.md 1.1).
            agg_options = {k: v for k, v in (options or {}).items() if k != "decode_system"} or None
            got = estimate_agg(meta["model"], db, row["parallel"], row["bs"], row["isl"], row["osl"], row["prefix"],
                               row["ctx_tokens"], on_miss="error", options=agg_options)  # fmt: skip
        else:
            got = estimate_disagg(meta["model"], db, row["(p)parallel"], row["(p)bs"], row["(p)workers"],
                                  row["(d)parallel"], row["(d)bs"], row["(d)workers"], row["isl"], row["osl"],
                                  row["prefix"], on_miss="error", options=options)  # fmt: skip
        key = _layout(row, mode)
        priced[key] += 1
        bad = [f"{col}: spec {row[col]!r} python {got[f]!r}" for col, f in fields.items()
               if not _same(row[col], got[f]) and not _known_label_difference(col, row[col], got[f], meta["backend"])]
        if bad:
            failures.append(f"{case} {mode} {row.get('parallel') or (row['(p)parallel'], row['(d)parallel'])} "
                            f"bs {row.get('bs') or (row['(p)bs'], row['(d)bs'])}: " + "; ".join(bad))  # fmt: skip
        else:
            equal[key] += 1
    return priced, equal, failures


def test_the_search_goldens_are_present():
    if not SEARCH.is_dir():
        pytest.skip(f"no search goldens at {SEARCH}")
    assert CASES == ["gpt_oss_20b_b200_trtllm_2gpu", "gpt_oss_20b_h200_b200_trtllm_4gpu_decode_system", "llama31_8b_h200_gb300_vllm_4gpu_decode_system", "llama31_8b_h200_trtllm_2gpu_chunked",
                     "llama31_8b_h200_trtllm_2gpu_kv",
                     "llama31_8b_h200_vllm_2gpu_request_latency", "llama31_8b_h200_vllm_4gpu",
                     "llama31_8b_rtxpro6000_sglang_2gpu_mtp", "llama31_8b_rtxpro6000_sglang_4gpu",
                     "qwen3_30b_a3b_gb200_sglang_8gpu", "qwen3_30b_a3b_h200_sglang_4gpu_request_latency",
                     "qwen3_32b_fp8_h200_vllm_8gpu", "qwen3_32b_h100_h200_trtllm_4gpu_decode_system",
                     "qwen3vl_8b_h200_trtllm_2gpu_images_tp_encoder",
                     "qwen3vl_8b_h200_vllm_2gpu_images"]


@needs_data
@pytest.mark.parametrize("mode", ["agg", "disagg"])
@pytest.mark.parametrize("case", CASES)
def test_search_candidates_reprice_equal(case, mode):
    if (case, mode) in PER_ROLE_QUANTS:
        pytest.skip(PER_ROLE_QUANTS[(case, mode)])
    priced, equal, failures = _reprice(case, mode)
    print(f"\n{case} {mode}: re-priced per (dp, cp) {dict(sorted(priced.items()))}, "
          f"equal {dict(sorted(equal.items()))}")  # fmt: skip
    assert not failures, f"{len(failures)} rows differ:\n" + "\n".join(failures[:20])
    assert sum(priced.values()) > 0
    assert priced == equal
    assert sum(priced.values()) == len(_rows(case, mode))  # every candidate, cp > 1 included
    assert priced == Counter(EXPECTED[(case, mode)])


# Frames whose roles run different quant modes (the spec's search task promotes GPT-OSS's experts on a
# Blackwell decode system only, experiments.md 1.5): estimate_disagg takes one set of overrides for both
# roles, so these rows are checked by the frames test (test_spec_search_default) and by the Rust
# re-pricing test, which prices each role on its own server.
PER_ROLE_QUANTS = {
    ("gpt_oss_20b_h200_b200_trtllm_4gpu_decode_system", "disagg"):
        "prefill w4a16_mxfp4 on h200_sxm, decode w4a8_mxfp4_mxfp8 on b200_sxm: no single estimate_disagg call",
}

# The candidate counts per (dp, cp): every row of the frames (9,035; 7,813 at
# cp = 1), counted in the spec's frames.
EXPECTED = {
    ("gpt_oss_20b_b200_trtllm_2gpu", "agg"): {(1, 1): 229, (2, 1): 134},
    ("gpt_oss_20b_b200_trtllm_2gpu", "disagg"): {(1, 1): 8},
    ("gpt_oss_20b_h200_b200_trtllm_4gpu_decode_system", "agg"): {(1, 1): 760, (2, 1): 264, (4, 1): 403},
    ("gpt_oss_20b_h200_b200_trtllm_4gpu_decode_system", "disagg"): {(1, 1): 8, (2, 1): 14},
    ("llama31_8b_h200_gb300_vllm_4gpu_decode_system", "agg"): {(1, 1): 334},
    ("llama31_8b_h200_gb300_vllm_4gpu_decode_system", "disagg"): {(1, 1): 14},
    ("llama31_8b_h200_trtllm_2gpu_chunked", "agg"): {(1, 1): 304},
    ("llama31_8b_h200_trtllm_2gpu_chunked", "disagg"): {(1, 1): 18},
    ("llama31_8b_h200_trtllm_2gpu_kv", "agg"): {(1, 1): 65},
    ("llama31_8b_h200_trtllm_2gpu_kv", "disagg"): {(1, 1): 18},
    ("llama31_8b_h200_vllm_2gpu_request_latency", "agg"): {(1, 1): 96},
    ("llama31_8b_h200_vllm_2gpu_request_latency", "disagg"): {(1, 1): 5},
    ("llama31_8b_h200_vllm_4gpu", "agg"): {(1, 1): 341},
    ("llama31_8b_h200_vllm_4gpu", "disagg"): {(1, 1): 24},
    ("llama31_8b_rtxpro6000_sglang_2gpu_mtp", "agg"): {(1, 1): 190, (1, 2): 97},
    ("llama31_8b_rtxpro6000_sglang_2gpu_mtp", "disagg"): {(1, 1): 15},
    ("llama31_8b_rtxpro6000_sglang_4gpu", "agg"): {(1, 1): 466, (1, 2): 124, (1, 4): 109},
    ("llama31_8b_rtxpro6000_sglang_4gpu", "disagg"): {(1, 1): 19, (1, 2): 6},
    ("qwen3_30b_a3b_gb200_sglang_8gpu", "agg"): {(1, 1): 725, (1, 2): 142, (1, 4): 209, (1, 8): 257, (2, 1): 669,
                                                 (4, 1): 526, (8, 1): 292},
    ("qwen3_30b_a3b_gb200_sglang_8gpu", "disagg"): {(1, 1): 35, (2, 2): 4, (2, 4): 18, (4, 4): 50},
    ("qwen3_30b_a3b_h200_sglang_4gpu_request_latency", "agg"): {(1, 1): 237, (1, 2): 76, (1, 4): 111, (2, 1): 208,
                                                                (4, 1): 125},
    ("qwen3_30b_a3b_h200_sglang_4gpu_request_latency", "disagg"): {(1, 1): 26, (2, 2): 19},
    ("qwen3_32b_fp8_h200_vllm_8gpu", "agg"): {(1, 1): 351},
    ("qwen3_32b_fp8_h200_vllm_8gpu", "disagg"): {(1, 1): 21},
    ("qwen3_32b_h100_h200_trtllm_4gpu_decode_system", "agg"): {(1, 1): 329},
    ("qwen3_32b_h100_h200_trtllm_4gpu_decode_system", "disagg"): {(1, 1): 19},
    ("qwen3vl_8b_h200_trtllm_2gpu_images_tp_encoder", "agg"): {(1, 1): 224},
    ("qwen3vl_8b_h200_trtllm_2gpu_images_tp_encoder", "disagg"): {(1, 1): 19},
    ("qwen3vl_8b_h200_vllm_2gpu_images", "agg"): {(1, 1): 262},
    ("qwen3vl_8b_h200_vllm_2gpu_images", "disagg"): {(1, 1): 16},
}  # fmt: skip


@needs_data
def test_search_candidate_counts():
    counts = {}
    for case in CASES:
        for mode in ("agg", "disagg"):
            counts[(case, mode)] = dict(sorted(Counter(_layout(r, mode) for r in _rows(case, mode)).items()))
    assert counts == EXPECTED
    assert sum(sum(c.values()) for c in counts.values()) == 9035
    assert sum(n for c in counts.values() for (dp, cp), n in c.items() if cp == 1) == 7813
    assert sum(n for c in counts.values() for (dp, cp), n in c.items() if dp > 1 and cp == 1) == 2635
    # cp > 1: 1,125 agg candidates (608 + 187 Qwen3-30B-A3B, 233 + 97 Llama rtx_pro_6000_server) and
    # 97 disagg deployments with a cp prefill worker (72 + 19 + 6)
    assert sum(n for (case, mode), c in counts.items() for (dp, cp), n in c.items() if cp > 1 and mode == "agg") == 1125
    assert sum(n for (case, mode), c in counts.items() for (dp, cp), n in c.items()
               if cp > 1 and mode == "disagg") == 97  # fmt: skip
    # every search frame row has pp = 1
    for case in CASES:
        assert {r["pp"] for r in _rows(case, "agg")} == {1}
        assert {(r["(p)pp"], r["(d)pp"]) for r in _rows(case, "disagg")} == {(1, 1)}
