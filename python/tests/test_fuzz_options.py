"""Fuzzing the options of the Python path's estimating functions
(``aicsql.spec.serving.estimate_agg`` / ``estimate_disagg`` /
``estimate_memory`` and ``aicsql.spec.step.step_latency``), the twin of the
Rust suite's ``tests/robustness/options.rs``: random option dicts of valid
and invalid keys, valid, out-of-range, wrongly typed and None values, and
the combinations the spec refuses, on every function that takes them.

No call may raise anything but ``ValueError``; a malformed option is a
ValueError naming the option; a well-formed one answers (a miss or a
refusal is a dict whose ``reason`` says why), and no latency, rate or
memory is NaN, infinite or negative. ``AICSQL_FUZZ_SEED`` varies the seed,
``AICSQL_FUZZ_CALLS`` the number of calls (default 300).
"""

from __future__ import annotations

import math
import os
import random
from typing import Callable, Dict, List, NamedTuple, Tuple

import pytest

from _support import have_data, require
from aicsql.spec.data import open_tree
from aicsql.spec.serving import estimate_agg, estimate_disagg, estimate_memory
from aicsql.spec.step import step_latency

needs_data = require(have_data(open_tree), "no perf data: run `aicsql data fetch` first")

SEED = int(os.environ.get("AICSQL_FUZZ_SEED", "0") or 0, 0) ^ 0x0971_0003
CALLS = int(os.environ.get("AICSQL_FUZZ_CALLS", "300"))

QUANTS = ["bfloat16", "fp8", "fp8_block", "nvfp4", "int8", "int4_wo", "w4afp8", "half", "fp8_static", "sq", "int8_wo"]
# '' and None leave a quant unset (the plain functions' options, like the settings' '').
BAD_QUANTS = ["FP8", "fp4", "", " fp8", "x'y", 5, None]
# The spec's enums (common.py): GEMMQuantMode also has fp8_ootb, FMHAQuantMode fp8_block.
ACCEPTS = {
    "gemm_quant": {"bfloat16", "fp8", "fp8_static", "fp8_block", "fp8_ootb", "nvfp4", "int8_wo", "int4_wo", "sq"},
    "moe_quant": {"bfloat16", "fp8", "int4_wo", "fp8_block", "w4afp8", "nvfp4"},
    "kvcache_quant": {"bfloat16", "fp8", "int8"},
    "fmha_quant": {"bfloat16", "fp8", "fp8_block"},
    "comm_quant": {"half", "int8", "fp8"},
}
IMAGE_KEYS = ("image_height", "image_width", "num_images", "enable_encoder_dp")
BAD_KEYS = ("kv_quant", "next_n", "GEMM_QUANT", "images")


def value(rng: random.Random, key: str) -> Tuple[object, bool]:
    """A value for ``key`` and whether it is well-formed (None: unset, valid)."""
    if key in ACCEPTS:
        if rng.random() < 0.7:
            name = rng.choice(QUANTS)
            return name, name in ACCEPTS[key]
        v = rng.choice(BAD_QUANTS)
        return v, v is None or v == ""
    choices: Dict[str, List[Tuple[object, bool]]] = {
        "free_gpu_memory_fraction": [(0.5, True), (1.0, True), (0.02, True), (0.0, False), (-0.5, False),
                                     (1.5, False), (math.nan, False), (None, True), ("half", False)],
        "max_seq_len": [(16384, True), (1, True), (131072, True), (0, False), (-7, False), (2.5, False),
                        (None, True), ("8192", False)],
        "nextn": [(0, True), (1, True), (2, True), ("auto", True), (-1, False), (1.5, False), ("two", False)],
        "nextn_accepted": [(0.0, True), (0.5, True), (1.0, True), (-0.1, False), (math.inf, False)],
        "image_height": [(448, True), (1024, True), (10, True), (0, True), (-1, False), (2.5, False), (None, True),
                         ("448", False)],
        "image_width": [(448, True), (768, True), (0, True), (-3, False), (True, False), (None, True)],
        "num_images": [(1, True), (4, True), (0, True), (-2, False), (1.0, False), (None, True)],
        "enable_encoder_dp": [(True, True), (False, True), (None, True), (1, False), ("true", False)],
    }  # fmt: skip
    return rng.choice(choices[key])


class Call(NamedTuple):
    name: str
    estimates: bool
    run: Callable[[dict], object]
    fields: Tuple[str, ...]
    mtp_layers: int  # the checkpoint's num_nextn_predict_layers ('auto')


CALLS_UNDER_TEST = [
    Call("estimate_agg (Qwen3-VL)", True,
         lambda o: estimate_agg("Qwen/Qwen3-VL-8B-Instruct", "h200_sxm/sglang/0.5.14", 2, 8, 1024, 128, options=o),
         ("ttft_ms", "tpot_ms", "memory_gib", "encoder_latency_ms", "encoder_memory_gib"), 0),
    Call("estimate_disagg (Qwen3-VL)", True,
         lambda o: estimate_disagg("Qwen/Qwen3-VL-8B-Instruct", "h200_sxm/trtllm/1.3.0rc20", 2, 1, 1, 2, 16, 1, 1024,
                                   128, options=o),
         ("ttft_ms", "tpot_ms", "tokens_per_s_per_gpu", "encoder_latency_ms", "encoder_memory_gib"), 0),
    Call("estimate_agg (MoE)", True,
         lambda o: estimate_agg("Qwen/Qwen3-30B-A3B", "h200_sxm/trtllm/1.3.0rc10", 4, 16, 1024, 128, 0, None, 1, 4,
                                options=o),
         ("ttft_ms", "tpot_ms", "memory_gib", "tokens_per_s_per_gpu"), 0),
    Call("estimate_memory", True,
         lambda o: estimate_memory("Qwen/Qwen3-32B-FP8", "h200_sxm/vllm/0.19.0", 8, 64, 1024, 256, options=o),
         ("total_gib", "kvcache_gib"), 0),
    Call("step_latency", False,
         lambda o: step_latency("deepseek-ai/DeepSeek-V3", "h200_sxm/sglang/0.5.14", "context", 8, 4, 1024, 128, 1, 8,
                                options=o),
         (), 1),
]  # fmt: skip


def well_formed(call: Call, options: dict, key_valid: Dict[str, bool]) -> bool:
    """Whether the call must answer: every value well-formed, except that at
    depth 0 the acceptance is ignored whatever it is (as the spec ignores
    it); the step functions take no acceptance and no image; a depth above
    0 needs an acceptance within [0, depth] in the estimates ('auto': the
    checkpoint's layers)."""
    if not call.estimates and any(options.get(k) is not None for k in ("nextn_accepted",) + IMAGE_KEYS):
        return False  # (None leaves an option unset, which a step takes)
    if not key_valid.get("nextn", True):
        return False
    depth = options.get("nextn", 0)
    depth = call.mtp_layers if depth == "auto" else depth
    if not all(ok for k, ok in key_valid.items() if k != "nextn_accepted"):
        return False
    if not call.estimates or not depth:
        return True
    a = options.get("nextn_accepted")
    return key_valid.get("nextn_accepted", False) and a is not None and 0.0 <= a <= depth


def numbers_ok(result: object, fields: Tuple[str, ...]) -> bool:
    if isinstance(result, dict):
        values = [result.get(f) for f in fields]
    else:
        values = [result]
    return all(v is None or (isinstance(v, (int, float)) and math.isfinite(v) and v >= 0) for v in values)


@needs_data
def test_fuzz_the_options_of_every_estimating_function():
    rng = random.Random(SEED)
    keys = list(ACCEPTS) + ["free_gpu_memory_fraction", "max_seq_len", "nextn", "nextn_accepted"] + list(IMAGE_KEYS)
    answered = refused = 0
    failures: List[str] = []
    for _ in range(CALLS):
        call = rng.choice(CALLS_UNDER_TEST)
        options: dict = {}
        key_valid: Dict[str, bool] = {}
        for _ in range(1 + rng.randrange(4)):
            key = rng.choice(BAD_KEYS) if rng.random() < 1 / 12 else rng.choice(keys)
            if key in options:
                continue
            v, ok = (1, False) if key in BAD_KEYS else value(rng, key)
            options[key], key_valid[key] = v, ok
        valid = well_formed(call, options, key_valid)
        try:
            result = call.run(options)
        except ValueError as e:
            if valid and not call.estimates and ("perf data" in str(e) or "Invalid quantized MoE" in str(e)):
                answered += 1  # a step's miss or the spec's refusal raises (step_latency has no on_miss)
                continue
            if valid:
                failures.append(f"{call.name} {options}: a well-formed option failed: {e}")
                continue
            refused += 1
            text = str(e)
            if not any(k in text or k.replace("_", " ") in text for k in options):
                failures.append(f"{call.name} {options}: the refusal names no option: {e}")
            continue
        except Exception as e:  # noqa: BLE001 -- anything but a ValueError is a defect
            failures.append(f"{call.name} {options}: {type(e).__name__}: {e}")
            continue
        if not valid:
            failures.append(f"{call.name} {options}: a malformed option was accepted")
            continue
        answered += 1
        if not numbers_ok(result, call.fields):
            failures.append(f"{call.name} {options}: a NaN, infinite or negative value: {result}")
    print(f"\nfuzz options (Python path): {CALLS} calls, {answered} answered, {refused} refused as malformed")
    assert not failures, "\n".join(failures[:20])
    assert answered > CALLS // 10 and refused > CALLS // 10, (answered, refused)


@needs_data
@pytest.mark.parametrize("bad", [{"image_height": -1}, {"num_images": 2.5}, {"enable_encoder_dp": "yes"}])
def test_a_malformed_image_option_names_itself(bad):
    key = next(iter(bad))
    with pytest.raises(ValueError, match=key):
        estimate_agg("Qwen/Qwen3-VL-8B-Instruct", "h200_sxm/sglang/0.5.14", 2, 8, 1024, 128, options=bad)
