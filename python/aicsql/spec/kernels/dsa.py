"""The DSA module tables of DEEPSEEKV32 (DeepSeek-V3.2, GLM-5.x) and their
lookups (docs/spec/families_dsa.md 5 - 7).

``dsa_context_module_perf``, outer -> inner:
    ``[mla_dtype (fmha)][kv][gemm_type][architecture][bucket][num_heads][prefix = step][isl][batch]``
``dsa_generation_module_perf``:
    ``[kv][gemm_type][architecture][bucket][num_heads][batch][isl + step]``

Each file holds the full-layer rows and (sglang 0.5.14) the GLM-5.2
skip-indexer rows, split by ``op_name`` (contains ``skip_indexer``): two
tables per file. Loading (5.2): within one source the last row of a
coordinate wins, across sources the first source holding it wins; keys keep
their first appearance. A row is filed under the backend bucket(s) of 5.2
item 4 (``trtllm`` / ``flashmla_kv``). The sources include the cross-backend
channel (trtllm <-> vllm, kernel source ``default``). No SOL clamp.

A lookup (6.3, 6.4) reads the slice ``[fmha][kv][gemm][arch]`` (context) or
``[kv][gemm][arch]`` (generation), takes the bucket ``trtllm``, else
``flashmla_kv``, else the first, then resolves a raw `Grid` over
``(num_heads, prefix, seq_len, batch)`` / ``(num_heads, batch, seq_len)``
with the DSA SOLs of 6.2. Every failure is a `PerfMiss` carrying the spec's
message (6.6). The CP sub-kernel tables (``glm5_*`` / ``dsv32_*``, section 7)
are read by `SparseKernels`.
"""

from __future__ import annotations

import threading
from typing import Dict, List, NamedTuple, Optional, Tuple

import pyarrow.parquet as pq

from ..data import Database, DataTree
from ..layout import join
from ..sol import QuantMode
from ..sources import _data_dir, read_columns, resolve, table_sources
from .grid import Grid, GridMiss, insert_first_wins
from .miss import PerfMiss, lookup_call
from .system import StepSystem

__all__ = [
    "CONTEXT_FILE",
    "GENERATION_FILE",
    "DSA_DIMS",
    "DEFAULT_ARCHITECTURE",
    "CONTEXT_METHOD",
    "GENERATION_METHOD",
    "DSADims",
    "DSATables",
    "SparseKernels",
    "context_sol",
    "generation_sol",
    "indexer_entry_bytes",
    "kv_bytes_per_token",
]

CONTEXT_FILE = "dsa_context_module_perf.parquet"
GENERATION_FILE = "dsa_generation_module_perf.parquet"
CONTEXT_METHOD = "query_context_dsa_module"
GENERATION_METHOD = "query_generation_dsa_module"
DEFAULT_ARCHITECTURE = "DeepseekV32ForCausalLM"


class DSADims(NamedTuple):
    """``DSA_MODEL_DIMS`` of one architecture (6.1)."""

    hidden_size: int
    q_lora_rank: int
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int
    index_topk: int
    index_head_dim: int
    index_n_heads: int


# The lookups' structural dims come from this table (by architecture), never from the config.
DSA_DIMS: Dict[str, DSADims] = {
    "DeepseekV32ForCausalLM": DSADims(7168, 1536, 512, 128, 64, 128, 2048, 128, 64),
    "GlmMoeDsaForCausalLM": DSADims(6144, 2048, 512, 192, 64, 256, 2048, 128, 32),
}

# 5.2 item 4: fp8-KV rows by executed kernel; bf16-KV rows back both buckets.
_BUCKETS = {
    "sglang_dsa_indexer_trtllm": ("trtllm",),
    "sglang_dsa_skip_indexer_trtllm": ("trtllm",),
    "sglang_dsa_indexer_flashmla_sparse": ("flashmla_kv",),
    "sglang_dsa_skip_indexer_flashmla_sparse": ("flashmla_kv",),
    "sglang_dsa_dense_mha_trtllm_ragged": ("trtllm", "flashmla_kv"),
}
_FP8 = QuantMode("fp8", 1, 2)
_BF16 = QuantMode("bfloat16", 2, 1)


def _buckets(kernel_source: str, kv: str) -> Tuple[str, ...]:
    if kv == "bfloat16":
        return ("trtllm", "flashmla_kv")
    hit = _BUCKETS.get(kernel_source)
    if hit is not None:
        return hit
    return ("trtllm",) if "trtllm" in kernel_source else ("flashmla_kv",)


def indexer_entry_bytes(index_head_dim: int) -> int:
    """Bytes per token of the FP8 indexer cache: one fp32 scale per 128 values."""
    return index_head_dim + ((index_head_dim + 127) // 128) * 4


def _dims(architecture: str) -> DSADims:
    return DSA_DIMS.get(architecture, DSA_DIMS[DEFAULT_ARCHITECTURE])


def context_sol(system: StepSystem, architecture: str, b, s, prefix, n, kv: QuantMode, fmha: QuantMode,
                gemm: QuantMode, skip: bool) -> float:  # fmt: skip
    """6.2, context: max(compute, memory) in ms, the spec's integer terms and order."""
    d = _dims(architecture)
    hs, ql, kl, qn, qr, vd = d.hidden_size, d.q_lora_rank, d.kv_lora_rank, d.qk_nope_head_dim, d.qk_rope_head_dim, \
        d.v_head_dim  # fmt: skip
    inh, ihd, itk = d.index_n_heads, d.index_head_dim, d.index_topk
    qk, ad = qn + qr, kl + qr
    full_s = s + prefix
    tokens = b * s
    proj_out = ql + kl + qr + ihd
    gemm_ops = (
        2 * tokens * hs * proj_out
        + 2 * tokens * ql * (n * qk)
        + 2 * tokens * ql * (inh * ihd)
        + 2 * tokens * hs * inh
        + 2 * tokens * (n * vd) * hs
        + 2 * n * tokens * qn * kl
        + 2 * n * tokens * kl * vd
    )
    indexer_ops = 0 if (skip or full_s <= itk) else 2 * tokens * inh * ihd * full_s
    effective_kv = min(full_s, itk)
    if full_s <= itk:
        pairs = b * (full_s * (full_s + 1) - prefix * (prefix + 1)) // 2
    elif prefix >= itk:
        pairs = tokens * itk
    else:
        pairs = b * (itk * (itk + 1) - prefix * (prefix + 1)) // 2 + b * (full_s - itk) * itk
    attn_ops = 2 * n * (ad + kl) * pairs
    weight_bytes = (hs * proj_out + ql * n * qk + ql * inh * ihd + hs * inh + n * vd * hs) * gemm.memory
    kv_bytes = b * n * effective_kv * ad * kv.memory
    indexer_bytes = 0 if (skip or full_s <= itk) else b * full_s * indexer_entry_bytes(ihd)
    q_io = tokens * n * qk * fmha.memory * 2
    total = weight_bytes + kv_bytes + indexer_bytes + q_io
    flops = system.gemm.flops
    sol_math = (gemm_ops / flops(gemm) + indexer_ops / flops(_FP8) + attn_ops / flops(fmha)) * 1000
    sol_mem = total / system.mem_bw * 1000
    return max(sol_math, sol_mem)


def generation_sol(system: StepSystem, architecture: str, b, s, n, kv: QuantMode, gemm: QuantMode) -> float:
    """6.2, generation (no skip term; the attention group at bfloat16)."""
    d = _dims(architecture)
    hs, ql, kl, qn, qr, vd = d.hidden_size, d.q_lora_rank, d.kv_lora_rank, d.qk_nope_head_dim, d.qk_rope_head_dim, \
        d.v_head_dim  # fmt: skip
    inh, ihd, itk = d.index_n_heads, d.index_head_dim, d.index_topk
    qk, ad = qn + qr, kl + qr
    tokens = b
    proj_out = ql + kl + qr + ihd
    effective_kv = min(s, itk)
    gemm_ops = (
        2 * tokens * hs * proj_out
        + 2 * tokens * ql * n * qk
        + 2 * tokens * ql * inh * ihd
        + 2 * tokens * hs * inh
        + 2 * tokens * n * vd * hs
        + 2 * n * tokens * qn * kl
        + 2 * n * tokens * kl * vd
    )
    indexer_ops = 2 * tokens * inh * ihd * s
    attn_ops = 2 * tokens * n * (ad + kl) * effective_kv
    weight_bytes = (hs * proj_out + ql * n * qk + ql * inh * ihd + hs * inh + n * vd * hs) * gemm.memory
    indexer_bytes = b * s * indexer_entry_bytes(ihd)
    kv_bytes = b * effective_kv * ad * kv.memory
    total = weight_bytes + indexer_bytes + kv_bytes
    flops = system.gemm.flops
    sol_math = (gemm_ops / flops(gemm) + indexer_ops / flops(_FP8) + attn_ops / flops(_BF16)) * 1000
    sol_mem = total / system.mem_bw * 1000
    return max(sol_math, sol_mem)


def _name(q: QuantMode, enum: str) -> str:
    return f"{enum}.{q.name}"


class DSATables:
    """One DSA module file of a database: its full and skip-indexer tables (5.2)."""

    def __init__(self, tree: DataTree, db: Database, shared_layer: bool, system: StepSystem, phase: str):
        self.db = db
        self.system = system
        self.phase = phase
        self.file = CONTEXT_FILE if phase == "context" else GENERATION_FILE
        self.method = CONTEXT_METHOD if phase == "context" else GENERATION_METHOD
        self.sources = table_sources(tree, db, self.file, shared_layer)
        self.full: Optional[Dict] = None  # None: no source file (not loaded)
        self.skip: Optional[Dict] = None  # None: no skip-indexer row
        self._grids: Dict[Tuple, Optional[Grid]] = {}
        self._lock = threading.Lock()
        if self.sources:
            self._load()

    def _load(self) -> None:
        context = self.phase == "context"
        full: Dict = {}
        skip: Dict = {}
        seen = (set(), set())
        cols_wanted = ["op_name", "kernel_source", "architecture", "kv_cache_dtype", "gemm_type", "num_heads",
                       "batch_size", "isl", "step", "latency"] + (["mla_dtype"] if context else [])  # fmt: skip
        defaults = {"op_name": None, "kernel_source": None, "architecture": DEFAULT_ARCHITECTURE, "step": None}
        for source in self.sources:
            cols = read_columns(source, cols_wanted, defaults)
            per_source: Tuple[Dict, Dict] = ({}, {})
            fmhas = cols["mla_dtype"] if context else [None] * len(cols["latency"])
            for op, ks, arch, kv, gemm, n, b, isl, step, latency, fmha in zip(
                cols["op_name"], cols["kernel_source"], cols["architecture"], cols["kv_cache_dtype"],
                cols["gemm_type"], cols["num_heads"], cols["batch_size"], cols["isl"], cols["step"], cols["latency"],
                fmhas,
            ):  # fmt: skip
                kind = 1 if "skip_indexer" in (op or "") else 0
                arch = "" if arch is None else arch  # a null cell reads as "" (the spec's row dicts)
                if context:
                    missing = step is None or (isinstance(step, str) and step.strip() == "")
                    if arch == "GlmMoeDsaForCausalLM" and missing:
                        raise ValueError(
                            "GLM-5 context DSA module data requires a non-empty step column for prefix/past_kv "
                            f"length ({source.path})"
                        )
                    head = (fmha, kv, gemm, arch)
                    tail = (int(n), 0 if missing else int(step), int(isl), int(b))
                else:
                    head = (kv, gemm, arch)
                    tail = (int(n), int(b), int(isl) + int(step))
                for bucket in _buckets(ks or "", kv):
                    per_source[kind][head + (bucket,) + tail] = float(latency)  # last row of the source wins
            for kind, table in ((0, full), (1, skip)):
                for coordinate, value in per_source[kind].items():
                    if coordinate in seen[kind]:
                        continue  # an earlier source wins
                    seen[kind].add(coordinate)
                    insert_first_wins(table, coordinate, value)
        self.full = full
        self.skip = skip or None

    # ---- what the FMHA guard and reports read -------------------------------------------

    def fmha_modes_for_kv(self, kv: str) -> List[str]:
        """Context: the fmha keys with a node for kv (the data-driven guard's joint check)."""
        return [fmha for fmha, by_kv in (self.full or {}).items() if kv in by_kv]

    # ---- lookups ----------------------------------------------------------------------------

    def lookup_kwargs(self, b, s, n, kv: QuantMode, gemm: QuantMode, architecture: str, skip: bool,
                      prefix=0, fmha: Optional[QuantMode] = None, bucket: Optional[str] = None) -> dict:  # fmt: skip
        if self.phase == "context":
            kwargs = {"b": b, "s": s, "prefix": prefix, "num_heads": n, "kvcache_quant_mode": kv.name,
                      "fmha_quant_mode": fmha.name, "gemm_quant_mode": gemm.name,
                      "architecture": architecture}  # fmt: skip
        else:
            kwargs = {"b": b, "s": s, "num_heads": n, "kv_cache_dtype": kv.name, "gemm_quant_mode": gemm.name,
                      "architecture": architecture}  # fmt: skip
        if bucket is not None:
            kwargs["dsa_backend"] = bucket
        kwargs["skip_indexer"] = skip
        return kwargs

    def _miss(self, kwargs: dict, reason: str) -> PerfMiss:
        return PerfMiss(self.file[: -len(".parquet")], lookup_call(self.method, [], kwargs), reason)

    def _miss_message(self, b, s, n, kv, gemm, architecture, prefix, fmha) -> str:
        d = self.db
        if self.phase == "context":
            return (
                f"Context DSA module data not available for system='{d.system}', backend='{d.backend}', "
                f"version='{d.version}', architecture='{architecture}', "
                f"fmha_quant_mode={_name(fmha, 'FMHAQuantMode')}, kvcache_quant_mode={_name(kv, 'KVCacheQuantMode')}, "
                f"gemm_quant_mode={_name(gemm, 'GEMMQuantMode')}, num_heads={n}, s={s}, prefix={prefix}, b={b}. "
                "Missing silicon data for the requested lookup."
            )
        return (
            f"Generation DSA module data not available for system='{d.system}', backend='{d.backend}', "
            f"version='{d.version}', architecture='{architecture}', kv_cache_dtype={_name(kv, 'KVCacheQuantMode')}, "
            f"gemm_quant_mode={_name(gemm, 'GEMMQuantMode')}, num_heads={n}, s={s}, b={b}. "
            "Missing silicon data for the requested lookup."
        )

    def _grid(self, skip: bool, head: tuple, bucket: str, sol) -> Optional[Grid]:
        key = (skip, head, bucket)
        with self._lock:
            if key in self._grids:
                return self._grids[key]
            node = self.skip if skip else self.full
            for k in head:
                node = node.get(k) if isinstance(node, dict) else None
                if not node:
                    break
            grid = None
            if node:
                # the bucket: the requested one, else flashmla_kv, else trtllm, else the first (Python `or`)
                chosen = node.get(bucket) or node.get("flashmla_kv") or node.get("trtllm") or next(iter(node.values()))
                if chosen:
                    axes = ("num_heads", "prefix", "seq_len", "batch") if self.phase == "context" else \
                        ("num_heads", "batch", "seq_len")  # fmt: skip
                    grid = Grid(chosen, axes, sol)
            self._grids[key] = grid
            return grid

    def query(self, b, s, n, kv: QuantMode, gemm: QuantMode, architecture: str, skip: bool = False, prefix=0,
              fmha: Optional[QuantMode] = None, bucket: str = "trtllm") -> Tuple[float, str]:  # fmt: skip
        """(latency, interp path) of one DSA lookup; PerfMiss when the spec misses (6.6)."""
        kwargs = self.lookup_kwargs(b, s, n, kv, gemm, architecture, skip, prefix, fmha,
                                    None if bucket == "trtllm" else bucket)  # fmt: skip
        d = self.db
        if skip and self.skip is None:
            what = "Context" if self.phase == "context" else "Generation"
            raise self._miss(kwargs, f"{what} DSA module skip_indexer perf data not loaded for system='{d.system}', "
                                     f"backend='{d.backend}', version='{d.version}'.")  # fmt: skip
        message = self._miss_message(b, s, n, kv, gemm, architecture, prefix, fmha)
        if self.full is None:
            raise self._miss(kwargs, message)
        system = self.system
        if self.phase == "context":
            head = (fmha.name, kv.name, gemm.name, architecture)
            grid = self._grid(skip, head, bucket, lambda c: context_sol(system, architecture, c[3], c[2], c[1], c[0],
                                                                         kv, fmha, gemm, skip))  # fmt: skip
            coords = (n, prefix, s, b)
        else:
            head = (kv.name, gemm.name, architecture)
            grid = self._grid(skip, head, bucket, lambda c: generation_sol(system, architecture, c[1], c[2], c[0], kv,
                                                                            gemm))  # fmt: skip
            coords = (n, b, s)
        if grid is None:
            raise self._miss(kwargs, message)
        try:
            return grid.lookup(coords)
        except GridMiss:
            raise self._miss(kwargs, message) from None


# ---- context parallelism: the sub-kernel tables (section 7) ------------------------------------

_SPARSE_PREFIX = {"GlmMoeDsaForCausalLM": "glm5", "DeepseekV32ForCausalLM": "dsv32"}


class SparseKernels:
    """``{prefix}_mqa_logits`` / ``{prefix}_topk`` of one database for one
    (architecture, num_heads): ``{kind: {batch: {(isl, step): latency}}}``,
    kinds ``mqa``, ``topk_last``, ``topk_flat``; one version dir (the
    resolver's dir of the first sub-kernel file that exists), last row wins."""

    def __init__(self, tree: DataTree, db: Database, architecture: str, num_heads: int):
        self.prefix = _SPARSE_PREFIX.get(architecture, "glm5")
        self.tables: Dict[str, Dict[int, Dict[Tuple[int, int], float]]] = {"mqa": {}, "topk_last": {}, "topk_flat": {}}
        o = tree.overlay
        data_dir = _data_dir(tree, db.system)
        candidates = [resolve(tree, data_dir, db.backend, db.version, f"{self.prefix}_{t}_module_perf.parquet")
                      for t in ("mqa_logits", "topk", "dsa_attn")]  # fmt: skip
        anchor = next((c for c in candidates if o.isfile(c)), candidates[0])
        directory = anchor.rsplit("/", 1)[0]
        for table in ("mqa_logits", "topk"):
            rel = join(directory, f"{self.prefix}_{table}_module_perf.parquet")
            if not o.isfile(rel):
                continue
            cols = read_columns(o.real(rel), ["num_heads", "batch_size", "isl", "step", "latency", "score_mode"],
                                {"num_heads": None, "score_mode": ""})  # fmt: skip
            # the spec filters on num_heads when the file has the column (null cells then match nothing)
            has_heads = "num_heads" in pq.ParquetFile(o.real(rel)).schema_arrow.names
            for n, b, isl, step, latency, mode in zip(cols["num_heads"], cols["batch_size"], cols["isl"], cols["step"],
                                                      cols["latency"], cols["score_mode"]):  # fmt: skip
                if has_heads and n != num_heads:
                    continue
                kind = "mqa" if table == "mqa_logits" else ("topk_flat" if str(mode) == "flat" else "topk_last")
                self.tables[kind].setdefault(int(b), {})[(int(isl), int(step))] = float(latency)

    @staticmethod
    def batch_slice(by_batch: dict, b) -> dict:
        if not by_batch:
            return {}
        if b in by_batch:
            return by_batch[b]
        return by_batch[min(by_batch, key=lambda x: abs(x - b))]

    @staticmethod
    def lookup(table: dict, isl, step, miss) -> Optional[float]:
        """``_lookup_2d``: the nearest collected isl (no interpolation; beyond the
        largest a miss), linear in step between neighbours, flat outside."""
        if not table:
            return None
        isls = sorted({i for (i, _s) in table})
        if isl > isls[-1]:
            raise miss(
                f"DSA CP: isl={isl} exceeds the collected sparse-kernel grid (max isl={isls[-1]}); mqa/topk scale "
                "super-linearly with isl, so clamping the isl axis would silently under-estimate. Re-collect with "
                f"AIC_CHUNKED_PREFILL_SIZE >= {isl} (docs/CONTEXT_PARALLEL_DSA_MODELING.md \u00a79.1)."
            )
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
        a = table[(use, lo)]
        b = table[(use, hi)]
        return a + (b - a) * (step - lo) / (hi - lo)


def kv_bytes_per_token(num_layers: int, kv_lora_rank: int, qk_rope_head_dim: int, index_head_dim: int,
                       kv: QuantMode) -> int:  # fmt: skip
    """families_dsa 8: KV-cache bytes per token over all layers (latent at the kv
    width, rope at 2 bytes, the FP8 indexer cache)."""
    return num_layers * (kv_lora_rank * kv.memory + qk_rope_head_dim * 2 + indexer_entry_bytes(index_head_dim))

