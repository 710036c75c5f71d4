"""The DeepSeek-V4 tables and their lookups (docs/spec/families_dsv4.md
sections 3 - 5: the spec's ``operations/dsv4.py``).

Tables (3.1 - 3.5), each loaded once per database on first use, sources
from `aicsql.spec.sources` (the usual union; the manifest lends none of
them), and **last wins** on every key -- the spec fills them by plain
assignment, so the lowest-priority source holding a key supplies its value
(the key keeps the position of its first appearance):

| table | files | nesting (outer -> inner) |
|---|---|---|
| mHC | ``mhc_module_perf`` | ``[op][hc_mult][hidden][num_tokens]`` |
| context modules | ``dsv4_{csa,hca}_context_module_perf`` (CSA then HCA, merged) | ``[fmha][kv][gemm][num_heads][ratio][prefix][isl][batch]`` |
| generation modules | ``dsv4_{csa,hca}_generation_module_perf`` | ``[kv][gemm][num_heads][ratio][batch][isl + step]`` |
| top-k calibration | ``dsv4_csa_topk_calib_perf`` | per variant v1 / v2: ``{(step, isl, batch): flat - top_last}`` |
| paged MQA logits (CP) | ``dsv4_paged_mqa_logits_module_perf`` | ``[num_heads][tp_size][step][isl][batch]`` |
| top-last (CP) | ``dsv4_csa_topk_calib_perf``, primary file only | ``{batch: {(isl, step): latency}}`` of the ``v1_top_last`` rows at the native heads |

The head key is the stored ``num_heads`` (read as the rank-local count; no
model, hidden-size or tp key), dtype labels pass one alias (``fp8_e4m3`` ->
``fp8``). Lookups (4.1 - 4.5): raw Grids (`grid.Grid`, ``k_tail = 1``)
with the SOLs of `mhc_sol` / `attention_sol`; the head-key fall-back of 4.2
step 3; for CSA (ratio 4) the calibration delta of `topk_delta` subtracted
and clamped at 0 (context: v1 at ``(prefix, s, B)``, decode: v2 at ``(s - 1,
1, B)``). A lookup that cannot be answered is a `PerfMiss` naming the table,
the spec's method call and the reason (4.6).
"""

from __future__ import annotations

import math
import threading
from typing import Callable, Dict, List, NamedTuple, Optional, Tuple

from ..data import Database, DataTree
from ..sol import GEMM_QUANTS, QuantMode
from ..sources import primary_path, read_columns, table_sources
from .grid import Grid, GridMiss
from .miss import PerfMiss, lookup_call
from .quant import FMHA_QUANTS, KV_QUANTS
from .system import StepSystem

__all__ = [
    "MHC_FILE",
    "CONTEXT_FILES",
    "GENERATION_FILES",
    "CALIB_FILE",
    "MQA_FILE",
    "MHC_METHOD",
    "CONTEXT_METHOD",
    "GENERATION_METHOD",
    "MQA_CHUNK_TOKENS",
    "DSv4Geometry",
    "DSv4Tables",
    "attention_sol",
    "mhc_sol",
    "topk_delta",
]

MHC_FILE = "mhc_module_perf.parquet"
CONTEXT_FILES = ("dsv4_csa_context_module_perf.parquet", "dsv4_hca_context_module_perf.parquet")
GENERATION_FILES = ("dsv4_csa_generation_module_perf.parquet", "dsv4_hca_generation_module_perf.parquet")
CALIB_FILE = "dsv4_csa_topk_calib_perf.parquet"
MQA_FILE = "dsv4_paged_mqa_logits_module_perf.parquet"

# The spec's PerfDatabase methods: what the goldens record as a row's lookup_table.
MHC_METHOD = "query_mhc_module"
CONTEXT_METHOD = "query_context_deepseek_v4_attention_module"
GENERATION_METHOD = "query_generation_deepseek_v4_attention_module"

MQA_CHUNK_TOKENS = 8192  # section 5: the paged-MQA-logits kernel runs in chunks of this many tokens

_DTYPE_ALIASES = {"fp8_e4m3": "fp8"}
# The spec's enums (an unknown label makes its loader raise: so does ours).
_GEMM_LABELS = frozenset({"bfloat16", "int8_wo", "int4_wo", "fp8", "fp8_static", "sq", "fp8_block", "fp8_ootb",
                          "nvfp4"})  # fmt: skip
_FMHA_LABELS = frozenset(FMHA_QUANTS)
_KV_LABELS = frozenset(KV_QUANTS)
_BF16 = GEMM_QUANTS["bfloat16"]
_FP8 = GEMM_QUANTS["fp8"]


class DSv4Geometry(NamedTuple):
    """One attention module's shape (families_dsv4 1.4, 4.2): rank-local heads
    ``n``, the model's ``H``, tp, and the DeepSeek-V4 fields; ``ratio`` is the
    module's compress ratio (4 CSA, 128 HCA), ``o_groups`` the local groups."""

    n: int
    native_heads: int
    tp: int
    hidden: int
    q_lora_rank: int
    o_lora_rank: int
    head_dim: int
    rope_head_dim: int
    index_n_heads: int
    index_head_dim: int
    index_topk: int
    window: int
    ratio: int
    o_groups: int

    def lookup_kwargs(self, kv: str, fmha: str, gemm: str) -> dict:
        """The spec's keyword arguments after ``b, s[, prefix]`` (the goldens' order)."""
        return {
            "num_heads": self.n,
            "native_heads": self.native_heads,
            "tp_size": self.tp,
            "hidden_size": self.hidden,
            "q_lora_rank": self.q_lora_rank,
            "o_lora_rank": self.o_lora_rank,
            "head_dim": self.head_dim,
            "rope_head_dim": self.rope_head_dim,
            "index_n_heads": self.index_n_heads,
            "index_head_dim": self.index_head_dim,
            "index_topk": self.index_topk,
            "window_size": self.window,
            "compress_ratio": self.ratio,
            "o_groups": self.o_groups,
            "kvcache_quant_mode": kv,
            "fmha_quant_mode": fmha,
            "gemm_quant_mode": gemm,
        }


# ---- SOLs (4.1, 4.4) ----------------------------------------------------------------------------


def mhc_sol(system: StepSystem, nt, op: str, h: int, hc: int, iters: int) -> float:
    """The mHC module's SOL at ``nt`` tokens (two sites per layer, bfloat16)."""
    sites = 2
    hc_dim = hc * h
    mix = (2 + hc) * hc
    pre = sites * (2 * nt * hc_dim * mix + nt * hc_dim * 3 + nt * (hc * hc + 2 * hc) * iters + 2 * nt * hc * h)
    post = sites * (2 * nt * hc * hc * h + 2 * nt * hc * h)
    if op == "pre":
        ops = pre
    elif op == "post":
        ops = post
    else:
        ops = pre + post
    mem = _BF16.memory
    params = sites * (mix * hc_dim + mix + 3) * mem
    act = sites * nt * hc_dim * mem * (3 if op == "both" else 2)
    if op in ("pre", "both"):
        act += sites * nt * (2 * hc + hc * hc) * 4
    sol_math = ops / system.gemm.flops(_BF16) * 1000
    sol_mem = (params + act) / system.mem_bw * 1000
    return max(sol_math, sol_mem)


def _causal_limited_pairs(b: int, q: int, prefix: int, limit: int) -> int:
    if limit <= 0 or q <= 0:
        return 0
    full = prefix + q
    if prefix >= limit:
        return b * q * limit
    if full <= limit:
        return b * (full * (full + 1) - prefix * (prefix + 1)) // 2
    ramp = b * (limit * (limit + 1) - prefix * (prefix + 1)) // 2
    saturated = b * (full - limit) * limit
    return ramp + saturated


def _sum_floor_upto(n: int, d: int) -> int:
    if n < 0:
        return 0
    q, r = divmod(n, d)
    return d * q * (q - 1) // 2 + q * (r + 1)


def _compressed_context_pairs(b: int, q: int, prefix: int, ratio: int, limit: int) -> int:
    if ratio <= 0 or q <= 0 or limit <= 0:
        return 0
    start, end = prefix + 1, prefix + q
    sat = limit * ratio
    if end < sat:
        total = _sum_floor_upto(end, ratio) - _sum_floor_upto(start - 1, ratio)
    elif start >= sat:
        total = q * limit
    else:
        ramp = _sum_floor_upto(sat - 1, ratio) - _sum_floor_upto(start - 1, ratio)
        total = ramp + (end - sat + 1) * limit
    return b * total


def attention_sol(system: StepSystem, context: bool, b, s, prefix, g: DSv4Geometry, kv: QuantMode, fmha: QuantMode,
                  gemm: QuantMode) -> float:  # fmt: skip
    """``_deepseek_v4_attention_sol`` (families_dsv4 4.4), term for term in the spec's order."""
    n, h, qr, orr, hd = g.n, g.hidden, g.q_lora_rank, g.o_lora_rank, g.head_dim
    inh, ihd, ratio = g.index_n_heads, g.index_head_dim, g.ratio
    flops = system.gemm.flops
    tokens = b * s if context else b
    kv_len = prefix + s if context else max(0, s - 1)
    groups = max(1, g.o_groups)
    projection = 2 * tokens * h * qr + 2 * tokens * qr * n * hd + 2 * tokens * h * hd + 2 * tokens * groups * orr * h
    absorption = 2 * tokens * n * hd * orr
    mult = 2 if ratio == 4 else 1
    compressor = 0.0
    if ratio:
        compressor = 4 * tokens * h * mult * hd
        compressor += 2 * tokens * mult * hd
        if ratio == 4:
            compressor += 4 * tokens * h * 2 * ihd
            compressor += 2 * tokens * 2 * ihd
    if context:
        window_pairs = _causal_limited_pairs(b, s, prefix, g.window)
        if ratio:
            limit = g.index_topk if ratio == 4 else max(0, kv_len // ratio)
            compressed_pairs = _compressed_context_pairs(b, s, prefix, ratio, limit)
        else:
            compressed_pairs = 0
    else:
        window_pairs = b * min(kv_len, g.window)
        if ratio:
            limit = g.index_topk if ratio == 4 else max(0, kv_len // ratio)
            compressed_pairs = b * min(kv_len // ratio, limit)
        else:
            compressed_pairs = 0
    pairs = window_pairs + compressed_pairs
    attention_ops = 4 * n * hd * pairs
    indexer_ops = 0.0
    indexer_bf16_ops = 0.0
    indexer_cache = 0.0
    if ratio == 4:
        compressed_len = kv_len // ratio
        queries = b * s if context else b
        indexer_pairs = queries * compressed_len
        indexer_ops = 2 * queries * qr * inh * ihd + 2 * indexer_pairs * inh * ihd
        indexer_bf16_ops = 2 * queries * h * inh
        indexer_cache = b * compressed_len * (ihd * 0.5)
    gemm_weights = (h * qr + qr * n * hd + h * hd + groups * orr * h) * gemm.memory
    bf16_weights = n * hd * orr * _BF16.memory
    if ratio:
        gemm_weights += 2 * h * mult * hd * gemm.memory
    if ratio == 4:
        gemm_weights += qr * inh * ihd * gemm.memory
        bf16_weights += h * inh * _BF16.memory
    activations = tokens * (h + qr + n * hd + hd + groups * orr) * gemm.memory
    kv_bytes = pairs * hd * kv.memory
    rope_bytes = tokens * n * g.rope_head_dim * fmha.memory
    sol_math = (
        (projection + compressor) / flops(gemm)
        + (absorption + indexer_bf16_ops) / flops(_BF16)
        + indexer_ops / flops(_FP8)
        + attention_ops / flops(fmha)
    ) * 1000
    sol_mem = (gemm_weights + bf16_weights + activations + kv_bytes + indexer_cache + rope_bytes) / system.mem_bw * 1000
    return max(sol_math, sol_mem)


def attention_weights(g: DSv4Geometry, gemm: QuantMode) -> float:
    """``_estimate_weights`` of one module application (families_dsv4 4.2), bytes."""
    h, ratio = g.hidden, g.ratio
    gemm_elems = h * g.q_lora_rank + g.q_lora_rank * g.n * g.head_dim + h * g.head_dim + g.o_groups * g.o_lora_rank * h
    bf16_elems = g.n * g.head_dim * g.o_lora_rank
    fp32_elems = g.n
    if ratio:
        mult = 2 if ratio == 4 else 1
        gemm_elems += 2 * h * mult * g.head_dim
        fp32_elems += ratio * mult * g.head_dim
    if ratio == 4:
        gemm_elems += g.q_lora_rank * g.index_n_heads * g.index_head_dim
        gemm_elems += 2 * h * 2 * g.index_head_dim
        bf16_elems += h * g.index_n_heads
        fp32_elems += ratio * 2 * g.index_head_dim
    return gemm_elems * gemm.memory + bf16_elems * _BF16.memory + fp32_elems * 4


# ---- the calibration delta (4.5) -----------------------------------------------------------------


def _interp_1d(points: List[Tuple[int, float]], x) -> Optional[float]:
    if not points:
        return None
    merged: Dict[int, List[float]] = {}
    for coord, value in points:
        merged.setdefault(int(coord), []).append(float(value))
    xs = sorted(merged)
    values = {k: sum(v) / len(v) for k, v in merged.items()}
    if x in values:
        return values[x]
    if len(xs) == 1:
        return values[xs[0]]
    if x <= xs[0]:
        return values[xs[0]]
    if x >= xs[-1]:
        return values[xs[-1]]
    left = max(v for v in xs if v < x)
    right = min(v for v in xs if v > x)
    if left == right:
        return values[left]
    t = (float(x) - float(left)) / (float(right) - float(left))
    return values[left] * (1.0 - t) + values[right] * t


class _TopkIndex:
    """One calibration table's points grouped as `topk_delta` walks them:
    batch ascending, then isl ascending, then the (prefix, delta) points of
    that (isl, batch) in the table's order -- the order the spec averages
    repeated prefixes in. Built once per table (a search asks thousands of
    times, and each walk over the whole table per (isl, batch) pair was most
    of a DeepSeek-V4 search), with the answers kept per query."""

    __slots__ = ("exact", "by_batch", "answers")

    def __init__(self, exact: Dict[Tuple[int, int, int], float]):
        groups: Dict[int, Dict[int, List[Tuple[int, float]]]] = {}
        for (p, i, b), d in exact.items():
            groups.setdefault(b, {}).setdefault(i, []).append((p, d))
        self.exact = exact  # held, so its id is not reused while indexed
        self.by_batch = [(b, [(i, groups[b][i]) for i in sorted(groups[b])]) for b in sorted(groups)]
        self.answers: Dict[Tuple[int, int, int], float] = {}


_TOPK_INDEXES: Dict[int, _TopkIndex] = {}


def _topk_index(exact: Dict[Tuple[int, int, int], float]) -> _TopkIndex:
    index = _TOPK_INDEXES.get(id(exact))
    if index is None or index.exact is not exact:
        index = _TOPK_INDEXES[id(exact)] = _TopkIndex(exact)
    return index


def topk_delta(exact: Optional[Dict[Tuple[int, int, int], float]], prefix: int, isl: int, batch: int) -> float:
    """``_dsv4_topk_delta_ms``: the exact delta, else prefix-, then isl-, then
    batch-wise 1-D interpolation with flat ends; 0.0 without a table. The
    table must not change once asked (the calibration tables never do)."""
    if not exact:
        return 0.0
    direct = exact.get((prefix, isl, batch))
    if direct is not None:
        return max(0.0, float(direct))
    index = _topk_index(exact)
    key = (prefix, isl, batch)
    answer = index.answers.get(key)
    if answer is not None:
        return answer
    batch_points = []
    for b, by_isl in index.by_batch:
        isl_points = []
        for i, points in by_isl:
            value = _interp_1d(points, prefix)
            if value is not None:
                isl_points.append((i, value))
        value = _interp_1d(isl_points, isl)
        if value is not None:
            batch_points.append((b, value))
    value = _interp_1d(batch_points, batch)
    answer = 0.0 if value is None else max(0.0, float(value))
    index.answers[key] = answer
    return answer


# ---- loading helpers --------------------------------------------------------------------------------


def _put_last(root: dict, keys, value) -> None:
    node = root
    for k in keys[:-1]:
        child = node.get(k)
        if child is None:
            child = node[k] = {}
        node = child
    node[keys[-1]] = value


def _to_int(v) -> int:
    """The spec's ``int(cell)``: a missing cell does not convert (ValueError)."""
    if v is None or v == "":
        raise ValueError(v)
    return int(v)


def _to_float(v) -> float:
    if v is None or v == "":
        raise ValueError(v)
    return float(v)


def _skipped_header(batch) -> bool:
    """Rows of appended runs repeat the header: batch_size None, "" or "batch_size"."""
    return batch is None or batch == "" or batch == "batch_size"


def _label(value, allowed: frozenset, column: str, path: str) -> str:
    name = _DTYPE_ALIASES.get(value, value)
    if name not in allowed:
        raise ValueError(f"{path}: {column} {value!r} is not a quant mode of the spec")
    return name


def _merge(dest: dict, src: dict) -> None:
    """``_deep_merge_dsv4_dicts``: recurse where both sides hold a dict, else overwrite."""
    for k, v in src.items():
        if k in dest and isinstance(dest[k], dict) and isinstance(v, dict):
            _merge(dest[k], v)
        else:
            dest[k] = v


def _coerce_key(v):
    try:
        return int(float(v))
    except (TypeError, ValueError, OverflowError):
        return v


def _bad_key(k) -> bool:
    if k is None:
        return True
    if isinstance(k, float):
        return k != k or k in (float("inf"), float("-inf"))
    if isinstance(k, str):
        return k.strip() == "" or k.strip().lower() in ("nan", "inf", "-inf", "+inf", "infinity", "-infinity")
    return False


# ---- the tables -------------------------------------------------------------------------------------


class DSv4Tables:
    """One database's DeepSeek-V4 tables, each loaded on first use (thread-safe)."""

    def __init__(self, tree: DataTree, db: Database, shared_layer: bool, system: StepSystem):
        self.tree = tree
        self.db = db
        self.shared_layer = shared_layer
        self.system = system
        self._cache: Dict[str, object] = {}
        self._grids: Dict[Tuple, Grid] = {}
        self._lock = threading.RLock()

    def _get(self, name: str, build: Callable[[], object]):
        with self._lock:
            if name not in self._cache:
                self._cache[name] = build()
            return self._cache[name]

    def _sources(self, name: str):
        return table_sources(self.tree, self.db, name, self.shared_layer)

    # -- loaders --

    def mhc_table(self) -> Optional[dict]:
        """``[op][hc_mult][hidden][num_tokens] -> latency`` (3.3); None without a source file."""

        def build():
            sources = self._sources(MHC_FILE)
            if not sources:
                return None
            root: dict = {}
            for f in sources:
                cols = read_columns(f, ["op_name", "hc_mult", "hidden_size", "num_tokens", "latency"])
                for op, hc, h, nt, lat in zip(cols["op_name"], cols["hc_mult"], cols["hidden_size"],
                                              cols["num_tokens"], cols["latency"]):  # fmt: skip
                    try:
                        key = (op, _to_int(hc), _to_int(h), _to_int(nt))
                        value = _to_float(lat)
                    except (TypeError, ValueError):
                        raise ValueError(f"{f.path}: a row of {MHC_FILE} does not convert") from None
                    _put_last(root, key, value)
            return root

        return self._get("mhc", build)

    def _module_table(self, name: str, context: bool) -> Optional[dict]:
        """One module file (3.2): its sources' rows, last wins; None without a source file."""
        sources = self._sources(name)
        if not sources:
            return None
        root: dict = {}
        columns = ["batch_size", "isl", "step", "compress_ratio", "latency", "num_heads", "gemm_type", "kv_cache_dtype"]
        if context:
            columns.append("mla_dtype")
        for f in sources:
            cols = read_columns(f, columns, {"step": None})  # absent: context 0, generation skips the row
            n_rows = len(cols["batch_size"])
            for i in range(n_rows):
                batch = cols["batch_size"][i]
                if _skipped_header(batch):
                    continue
                try:
                    b = _to_int(batch)
                    isl = _to_int(cols["isl"][i])
                    step = cols["step"][i]
                    if context:
                        step = _to_int(float(step or 0))
                    else:
                        step = _to_int(step)
                    ratio = _to_int(cols["compress_ratio"][i])
                    latency = _to_float(cols["latency"][i])
                except (TypeError, ValueError):
                    continue
                heads = _to_int(cols["num_heads"][i])
                gemm = _label(cols["gemm_type"][i], _GEMM_LABELS, "gemm_type", f.path)
                kv = _label(cols["kv_cache_dtype"][i], _KV_LABELS, "kv_cache_dtype", f.path)
                if context:
                    fmha = _label(cols["mla_dtype"][i], _FMHA_LABELS, "mla_dtype", f.path)
                    _put_last(root, (fmha, kv, gemm, heads, ratio, step, isl, b), latency)
                else:
                    _put_last(root, (kv, gemm, heads, ratio, b, isl + step), latency)
        return root

    def _merged(self, key: str, files: Tuple[str, str], context: bool) -> Optional[dict]:
        def build():
            merged: dict = {}
            for name in files:
                table = self._module_table(name, context)
                if table:
                    _merge(merged, table)
            return merged or None

        return self._get(key, build)

    def context_table(self) -> Optional[dict]:
        return self._merged("context", CONTEXT_FILES, True)

    def generation_table(self) -> Optional[dict]:
        return self._merged("generation", GENERATION_FILES, False)

    def _sparse_rows(self, name: str, key_columns: Tuple[str, ...]) -> Optional[dict]:
        """``load_dsv4_sparse_op_data`` (3.4, 3.5): nested by `key_columns`, last wins; None without rows."""
        sources = self._sources(name)
        if not sources:
            return None
        root: dict = {}
        for f in sources:
            cols = read_columns(f, list(key_columns) + ["latency"])
            for i in range(len(cols["latency"])):
                if _skipped_header(cols["batch_size"][i]):
                    continue
                keys = [_coerce_key(cols[c][i]) for c in key_columns]
                try:
                    latency = float(cols["latency"][i])
                except (TypeError, ValueError):
                    continue
                if any(_bad_key(k) for k in keys):
                    continue
                _put_last(root, keys, latency)
        return root or None

    def calibration(self) -> Optional[Dict[str, Optional[dict]]]:
        """``{"v1": exact or None, "v2": exact or None}`` or None (3.4)."""

        def build():
            by_mode = self._sparse_rows(CALIB_FILE, ("step", "isl", "batch_size", "score_mode"))
            if not by_mode:
                return None
            out: Dict[str, Optional[dict]] = {}
            for variant in ("v1", "v2"):
                exact: Dict[Tuple[int, int, int], float] = {}
                for step, by_isl in by_mode.items():
                    for isl, by_batch in by_isl.items():
                        for batch, by_score in by_batch.items():
                            flat = by_score.get(f"{variant}_flat")
                            top_last = by_score.get(f"{variant}_top_last")
                            if flat is None or top_last is None:
                                continue
                            exact[(step, isl, batch)] = max(0.0, float(flat) - float(top_last))
                out[variant] = exact or None
            return out if any(out.values()) else None

        return self._get("calibration", build)

    def mqa_table(self) -> Optional[dict]:
        return self._get("mqa", lambda: self._sparse_rows(MQA_FILE, ("num_heads", "tp_size", "step", "isl",
                                                                     "batch_size")))  # fmt: skip

    def top_last(self, native_heads: int) -> Dict[int, Dict[Tuple[int, int], float]]:
        """The ``v1_top_last`` latencies of the requested version's own calibration
        file (section 5: no union) at the native head count: ``{batch: {(isl, step): ms}}``."""

        def build():
            import os

            path = primary_path(self.tree, self.db, CALIB_FILE)
            by_batch: Dict[int, Dict[Tuple[int, int], float]] = {}
            if not os.path.isfile(path):
                return by_batch
            import pyarrow.parquet as pq

            names = pq.ParquetFile(path).schema_arrow.names
            columns = ["score_mode", "batch_size", "isl", "step", "latency"]
            if "num_heads" in names:
                columns.append("num_heads")
            cols = read_columns(path, columns)
            for i in range(len(cols["latency"])):
                if "num_heads" in cols and cols["num_heads"][i] != native_heads:
                    continue
                if str(cols["score_mode"][i]) != "v1_top_last":
                    continue
                by_batch.setdefault(int(cols["batch_size"][i]), {})[(int(cols["isl"][i]), int(cols["step"][i]))] = \
                    float(cols["latency"][i])  # fmt: skip
            return by_batch

        return self._get(f"top_last/{native_heads}", build)

    # -- lookups --

    def _miss(self, table: str, method: str, kwargs: dict, reason: str) -> PerfMiss:
        return PerfMiss(table, lookup_call(method, (), kwargs), reason)

    def _grid(self, key: Tuple, node: dict, axes: Tuple[str, ...], sol: Callable[[Tuple], float]) -> Grid:
        with self._lock:
            grid = self._grids.get(key)
            if grid is None:
                grid = self._grids[key] = Grid(node, axes, sol)
            return grid

    def mhc(self, num_tokens, hidden: int, hc: int, iters: int, op: str, kwargs: dict) -> Tuple[float, str]:
        """(latency ms, interp path) of one mHC module (4.1)."""
        table = self.mhc_table()
        db = self.db
        if not table:
            raise self._miss("mhc_module_perf", MHC_METHOD, kwargs, (
                f"DeepSeek-V4 mHC module data not loaded for system='{db.system}', backend='{db.backend}', "
                f"version='{db.version}'."))  # fmt: skip
        node = table.get(op, {}).get(hc, {}).get(hidden)
        if not node:
            raise self._miss("mhc_module_perf", MHC_METHOD, kwargs,
                             f"No mHC silicon data for op='{op}', hc_mult={hc}, hidden_size={hidden}.")  # fmt: skip
        system = self.system
        grid = self._grid(("mhc", op, hc, hidden, iters), node, ("num_tokens",),
                          lambda c: mhc_sol(system, c[0], op, hidden, hc, iters))  # fmt: skip
        try:
            return grid.lookup((num_tokens,))
        except GridMiss:
            raise self._miss("mhc_module_perf", MHC_METHOD, kwargs, (
                f"perf_interp: no data to anchor query {{'num_tokens': {num_tokens}}}")) from None

    @staticmethod
    def _head_key(node: dict, n: int) -> Optional[int]:
        """``_dsv4_resolve_head_key`` (4.2 step 3)."""
        if not node:
            return None
        if n in node:
            return n
        keys = [k for k in node if isinstance(k, int)]
        if len(keys) == 1:
            return keys[0]
        if keys:
            below = [k for k in keys if k <= n]
            return max(below) if below else min(keys)
        return None

    def _module_slice(self, phase: str, table: Optional[dict], quant_keys: Tuple[str, ...], g: DSv4Geometry,
                      file: str, method: str, kwargs: dict) -> Tuple[int, dict]:  # fmt: skip
        db = self.db
        if not table:
            raise self._miss(file, method, kwargs, (
                f"DeepSeek-V4 {phase} attention module data not loaded for system='{db.system}', "
                f"backend='{db.backend}', version='{db.version}'."))  # fmt: skip
        node = table
        walked: List[str] = []
        for k in quant_keys:
            walked.append(k)
            node = node.get(k) if isinstance(node, dict) else None
            if not node:
                raise self._miss(file, method, kwargs, (
                    "Missing silicon data for the requested lookup; requested slice "
                    f"{tuple(walked)!r} is not available."))  # fmt: skip
        head = self._head_key(node, g.n)
        if head is None:
            raise self._miss(file, method, kwargs, f"No DeepSeek-V4 {phase} attention silicon data for "
                             f"num_heads={g.n}, loaded head keys={list(node)}.")  # fmt: skip
        by_ratio = node[head].get(g.ratio)
        if by_ratio is None:
            raise self._miss(file, method, kwargs, (
                f"No DeepSeek-V4 {phase} attention silicon data for num_heads={g.n}, compress_ratio={g.ratio}, "
                f"loaded cr keys={list(node[head])}."))  # fmt: skip
        return head, by_ratio

    def context_attention(self, b, s, prefix, g: DSv4Geometry, kv: QuantMode, fmha: QuantMode, gemm: QuantMode,
                          kwargs: dict) -> Tuple[float, str]:  # fmt: skip
        """(latency ms, interp path) of one context module application (4.2), calibrated for CSA."""
        file = "dsv4_csa_context_module_perf" if g.ratio == 4 else "dsv4_hca_context_module_perf"
        head, node = self._module_slice("context", self.context_table(), (fmha.name, kv.name, gemm.name), g, file,
                                        CONTEXT_METHOD, kwargs)  # fmt: skip
        system = self.system
        grid = self._grid(("context", fmha.name, kv.name, gemm.name, head, g), node, ("prefix", "seq_len", "batch"),
                          lambda c: attention_sol(system, True, c[2], c[1], c[0], g, kv, fmha, gemm))  # fmt: skip
        try:
            latency, path = grid.lookup((prefix, s, b))
        except GridMiss:
            raise self._miss(file, CONTEXT_METHOD, kwargs, (
                f"DeepSeek-V4 prefix-resolved context attention module data not available for b={b}, s={s}, "
                f"prefix={prefix}, num_heads={g.n}, compress_ratio={g.ratio}.")) from None  # fmt: skip
        if g.ratio == 4:
            calib = self.calibration()
            delta = topk_delta((calib or {}).get("v1"), int(prefix), int(s), int(b))
            latency = max(0.0, latency - delta)
        return latency, path

    def generation_attention(self, b, s, g: DSv4Geometry, kv: QuantMode, gemm: QuantMode,
                             kwargs: dict) -> Tuple[float, str]:  # fmt: skip
        """(latency ms, interp path) of one decode module application (4.3), calibrated for CSA."""
        file = "dsv4_csa_generation_module_perf" if g.ratio == 4 else "dsv4_hca_generation_module_perf"
        head, node = self._module_slice("generation", self.generation_table(), (kv.name, gemm.name), g, file,
                                        GENERATION_METHOD, kwargs)  # fmt: skip
        fmha = FMHA_QUANTS["fp8"] if kv.name == "fp8" else FMHA_QUANTS["bfloat16"]  # follows the KV cache
        system = self.system
        grid = self._grid(("generation", kv.name, gemm.name, head, g), node, ("batch", "seq_len"),
                          lambda c: attention_sol(system, False, c[0], c[1], 0, g, kv, fmha, gemm))  # fmt: skip
        try:
            latency, path = grid.lookup((b, s))
        except GridMiss:
            raise self._miss(file, GENERATION_METHOD, kwargs, (
                f"perf_interp: no data to anchor query {{'batch': {b}, 'seq_len': {s}}}; Missing silicon data for "
                "the requested lookup.")) from None  # fmt: skip
        if g.ratio == 4:
            calib = self.calibration()
            delta = topk_delta((calib or {}).get("v2"), max(int(s) - 1, 0), 1, int(b))
            latency = max(0.0, latency - delta)
        return latency, path

    # -- context parallelism (section 5) --

    def mqa(self, b, isl: int, past: int, tp: int, native_heads: int) -> Optional[float]:
        """The paged-MQA-logits kernel over ``isl`` tokens after ``past``, in chunks
        of `MQA_CHUNK_TOKENS`; None when any chunk has no answer."""
        # The spec builds the chunk range before any lookup: a float length
        # (the aggregated mixed step's pass 1) raises TypeError here, table or not.
        offsets = range(0, isl, MQA_CHUNK_TOKENS)
        table = self.mqa_table()
        if not table:
            return None
        per_tp = table.get(native_heads)
        if per_tp is None:
            return None
        node = per_tp.get(tp) if tp in per_tp else per_tp.get(1)
        if not node:
            return None
        grid = self._grid(("mqa", native_heads, tp if tp in per_tp else 1), node, ("past_kv", "seq_len", "batch"),
                          lambda c: float(c[2]) * (float(c[0]) * c[1] + c[1] * c[1] / 2.0))  # fmt: skip
        total = 0.0
        for offset in offsets:
            chunk = min(MQA_CHUNK_TOKENS, isl - offset)
            try:
                latency, _ = grid.lookup((past + offset, chunk, b))
            except GridMiss:
                return None
            if not math.isfinite(latency):
                return None
            total += float(latency)
        return total

    def top_last_at(self, isl: int, step: int, native_heads: int, b) -> Optional[float]:
        """The ``v1_top_last`` latency at (isl, step) for batch ``b`` (section 5)."""
        by_batch = self.top_last(native_heads)
        if not by_batch:
            return None
        table = by_batch[b] if b in by_batch else by_batch[min(by_batch, key=lambda x: abs(x - b))]
        if not table:
            return None
        isls = sorted({i for (i, _s) in table})
        if isl > isls[-1]:
            raise PerfMiss("dsv4_csa_topk_calib_perf", lookup_call("_csa_topk_top_last", (), {
                "isl": isl, "step": step, "native_heads": native_heads, "b": b}), (
                f"DSA CP: isl={isl} exceeds the collected sparse-kernel grid (max isl={isls[-1]}); mqa/topk scale "
                "super-linearly with isl, so clamping the isl axis would silently under-estimate. Re-collect with "
                f"AIC_CHUNKED_PREFILL_SIZE >= {isl} (docs/CONTEXT_PARALLEL_DSA_MODELING.md \u00a79.1)."))  # fmt: skip
        use = isl if isl in isls else min(isls, key=lambda x: abs(x - isl))
        steps = sorted(st for (i, st) in table if i == use)
        if not steps:
            return None
        if (use, step) in table:
            return table[(use, step)]
        lo = max([st for st in steps if st <= step], default=steps[0])
        hi = min([st for st in steps if st >= step], default=steps[-1])
        if lo == hi:
            return table[(use, lo)]
        a, c = table[(use, lo)], table[(use, hi)]
        return a + (c - a) * (step - lo) / (hi - lo)
