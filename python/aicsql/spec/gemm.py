"""The spec's GEMM table and its ScatteredSites resolver (docs/spec 4, 5.2, 7.2, 8.1, 11).

Loading (docs/spec 4.2, 4.4, 11.1)
    A database's GEMM table is the row-concatenation of its sources in
    priority order (`aicsql.spec.sources`: its own file; with the shared layer
    on, then the donors of its ``reuse.yaml``, the same backend's strictly
    older versions, PEP 440 nearest first, and manifest-shared rows of other
    backends) -- inserted into nested dicts
    ``[gemm_dtype][m][n][k] -> latency`` where the first row wins. Every
    stored latency is then raised to its SOL, computed with the row's own
    quant mode.

Sites (docs/spec 7.2, 11.4)
    A quant slice ``[m][n][k]`` is re-indexed into sites ``(n, k)``, each
    owning a curve of ``(m, latency)`` sorted by m. Site order is the order
    of first appearance while walking the nested dicts m-major (m in
    insertion order, then n, then k) -- *not* row order and *not* sorted.

Resolving (m, n, k)
    exact hit -> the stored value; own site exists -> its curve alone
    (linear in m inside its range, util-hold outside); otherwise site
    transfer: rank the sites covering m (all sites if none does) by their
    distance in (log2 n, log2 k), stable sort (ties keep site order), keep
    ``dist <= 2.0``, blend the first 4 by util with weights
    ``1 / (dist**2 + 1e-12)``; nothing in reach -> miss.

Every float operation is written the way the spec's Python writes it, in
its order; a port must match these bits.
"""

from __future__ import annotations

import bisect
import math
import statistics
import threading
from typing import Dict, List, NamedTuple, Optional, Tuple

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .data import GEMM_FILE, Database, DataTree
from .sources import TableFile, primary_path, read_columns, table_sources
from .sol import GEMM_QUANTS, QuantMode, SystemSpec, gemm_sol

__all__ = [
    "NN_SITES",
    "MAX_SITE_DISTANCE",
    "K_TAIL",
    "GemmMiss",
    "GemmSlice",
    "GemmTable",
    "gemm_sources",
    "load_table",
]

# ScatteredSites configuration for GEMM (docs/spec 7.2).
NN_SITES = 4
MAX_SITE_DISTANCE = 2.0
K_TAIL = 3
# require_curve_coverage = True is built into `GemmSlice.transfer`.

# Memo sizes (entries) per slice: per-(n, k) in-reach site lists (small),
# full rankings (trace only, one entry per site), per-m coverage flags.
_REACH_MEMO = 8192
_RANKED_MEMO = 64
_COVER_MEMO = 65536

# Short miss reasons (the `reason` of a trace's `miss` row).
MISS_TABLE = "no source of the database holds a GEMM table"
MISS_QUANT = "the database has no GEMM data for this quant mode"
MISS_DISTANCE = "no site within max_site_distance"
MISS_NEIGHBOURS = "no neighbouring site gave a usable latency"
MISS_INVALID = "the data gives a non-finite or non-positive latency"


class GemmMiss(Exception):
    """The spec raised: no answer for this query. `reason` is one of the MISS_* texts."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def _usable(latency: float) -> bool:
    return math.isfinite(latency) and latency > 0.0


def _log2(v: int) -> float:
    """log2 of one coordinate, as the spec takes it: on max(v, 1e-12)."""
    return math.log2(max(v, 1e-12))


def rust_float(x: float) -> str:
    """`x` as Rust's `{}` prints an f64 (shortest round-trip digits, never an
    exponent), so trace reason texts equal the Rust path's."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    if x == int(x) and abs(x) < 1e16:
        text = str(int(x))
        return "-0" if text == "0" and math.copysign(1.0, x) < 0 else text
    from decimal import Decimal

    return format(Decimal(repr(x)), "f")


class CurvePath(NamedTuple):
    """How a site's curve produced its value at m (for traces and transfer)."""

    kind: str  # 'exact' | 'curve' | 'hold_low' | 'hold_high'
    m0: int = 0  # curve: bracketing m's
    m1: int = 0
    points: int = 0  # hold: how many end points the util was held from
    sol: Optional[float] = None  # hold: the SOL it divided

    @property
    def stage(self) -> str:
        return "hold" if self.kind.startswith("hold") else self.kind

    def describe(self) -> str:
        if self.kind == "exact":
            return "stored point"
        if self.kind == "curve":
            return f"linear between m={self.m0} and m={self.m1}"
        side = "lowest" if self.kind == "hold_low" else "highest"
        return f"util held from the {side} {self.points} point(s)"


_EXACT = CurvePath("exact")


def trace_row(stage: str, **fields) -> dict:
    """One trace row; columns that do not apply to the stage are None."""
    row = {
        "stage": stage,
        "site_n": None,
        "site_k": None,
        "distance": None,
        "covers_m": None,
        "rank": None,
        "selected": False,
        "weight": None,
        "site_latency_ms": None,
        "site_sol_ms": None,
        "util": None,
        "result_ms": None,
        "reason": None,
    }
    row.update(fields)
    return row


class GemmSlice:
    """One quant slice of a GEMM table, re-indexed into sites (docs/spec 7.2)."""

    def __init__(self, system: SystemSpec, table: Dict[int, Dict[int, Dict[int, float]]]):
        self.system = system
        self.table = table
        # Sites in order of first appearance walking m (insertion order) -> n -> k.
        self.site_id: Dict[Tuple[int, int], int] = {}
        self.site_n: List[int] = []
        self.site_k: List[int] = []
        points: List[List[Tuple[int, float]]] = []
        for m, by_n in table.items():
            for n, by_k in by_n.items():
                for k, latency in by_k.items():
                    sid = self.site_id.get((n, k))
                    if sid is None:
                        sid = self.site_id[(n, k)] = len(self.site_n)
                        self.site_n.append(n)
                        self.site_k.append(k)
                        points.append([])
                    points[sid].append((m, latency))
        # Each site's curve, sorted by m (m is unique per site: first-wins keys).
        self.curve_m: List[List[int]] = []
        self.curve_lat: List[List[float]] = []
        for pts in points:
            pts.sort(key=lambda p: p[0])
            self.curve_m.append([p[0] for p in pts])
            self.curve_lat.append([p[1] for p in pts])
        self.site_log2_n = [_log2(n) for n in self.site_n]
        self.site_log2_k = [_log2(k) for k in self.site_k]
        # For the hot path: the distinct n (and k) values, and the sites of each
        # n in site order, so a query's distances are computed per distinct
        # coordinate and whole n-columns out of reach are skipped.
        n_values = list(dict.fromkeys(self.site_n))
        k_values = list(dict.fromkeys(self.site_k))
        self._n_log2 = [_log2(v) for v in n_values]
        self._k_log2 = [_log2(v) for v in k_values]
        k_index = {v: i for i, v in enumerate(k_values)}
        n_index = {v: i for i, v in enumerate(n_values)}
        self._sites_by_n: List[List[Tuple[int, int]]] = [[] for _ in n_values]
        for sid, (n, k) in enumerate(zip(self.site_n, self.site_k)):
            self._sites_by_n[n_index[n]].append((sid, k_index[k]))
        self._reach: Dict[Tuple[int, int], List[Tuple[float, int]]] = {}
        # Distinct curve m-ranges, for "does any site cover m" (coverage filter fall-back).
        self._ranges = sorted({(ms[0], ms[-1]) for ms in self.curve_m})
        self._any_covers: Dict[int, bool] = {}
        self._ranked: Dict[Tuple[int, int], List[Tuple[float, int]]] = {}
        self._anchors: Dict[Tuple[int, str, str], float] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self.site_n)

    # ---- one site's curve -------------------------------------------------------

    def covers(self, sid: int, m: int) -> bool:
        """Whether the site's curve m-range contains m."""
        ms = self.curve_m[sid]
        return ms[0] <= m <= ms[-1]

    def any_covers(self, m: int) -> bool:
        hit = self._any_covers.get(m)
        if hit is None:
            hit = any(lo <= m <= hi for lo, hi in self._ranges)
            if len(self._any_covers) >= _COVER_MEMO:
                self._any_covers.clear()
            self._any_covers[m] = hit
        return hit

    def _anchor(self, sid: int, side: str, q: QuantMode) -> float:
        """median_i(SOL(m_i, n, k) / lat_i) over the first / last K_TAIL points."""
        key = (sid, side, q.name)
        anchor = self._anchors.get(key)
        if anchor is None:
            n, k = self.site_n[sid], self.site_k[sid]
            ms, lats = self.curve_m[sid], self.curve_lat[sid]
            if side == "low":
                ms, lats = ms[:K_TAIL], lats[:K_TAIL]
            else:
                ms, lats = ms[-K_TAIL:], lats[-K_TAIL:]
            utils = [gemm_sol(self.system, q, mi, n, k) / lat for mi, lat in zip(ms, lats)]
            anchor = self._anchors[key] = statistics.median(utils)  # median of 2 = their mean
        return anchor

    def curve_at(self, sid: int, m: int, q: QuantMode) -> Tuple[float, CurvePath]:
        """The site's curve at m: stored point, linear between the bracketing
        m's, or util-hold outside the curve (also for a single-point curve)."""
        ms = self.curve_m[sid]
        i = bisect.bisect_left(ms, m)
        if i < len(ms) and ms[i] == m:
            return self.curve_lat[sid][i], _EXACT
        if i == 0 or i == len(ms):
            side = "low" if i == 0 else "high"
            sol = gemm_sol(self.system, q, m, self.site_n[sid], self.site_k[sid])
            latency = sol / self._anchor(sid, side, q)
            return latency, CurvePath("hold_" + side, points=min(K_TAIL, len(ms)), sol=sol)
        m0, m1 = ms[i - 1], ms[i]
        a, b = self.curve_lat[sid][i - 1], self.curve_lat[sid][i]
        w = (m - m0) / (m1 - m0)
        return a + (b - a) * w, CurvePath("curve", m0, m1)

    # ---- site transfer ----------------------------------------------------------

    def ranked_sites(self, n: int, k: int) -> List[Tuple[float, int]]:
        """(distance, site) for every site, stable-sorted by distance (ties keep
        site order). Independent of m, so memoised per (n, k); the coverage
        filter is applied afterwards as a stable filter, which gives the same
        order as filtering first and sorting after."""
        ranked = self._ranked.get((n, k))
        if ranked is None:
            log2_n, log2_k = _log2(n), _log2(k)
            dists = [
                (math.sqrt((ln - log2_n) ** 2 + (lk - log2_k) ** 2), sid)
                for sid, (ln, lk) in enumerate(zip(self.site_log2_n, self.site_log2_k))
            ]
            dists.sort(key=lambda pair: pair[0])  # stable: equal distances keep site order
            with self._lock:
                if len(self._ranked) >= _RANKED_MEMO:
                    self._ranked.clear()
                ranked = self._ranked[(n, k)] = dists
        return ranked

    def candidates(self, m: int, n: int, k: int) -> List[Tuple[float, int]]:
        """Step 1+2 of site transfer, before the distance gate: the sites whose
        curve covers m (all sites when none does), in rank order."""
        ranked = self.ranked_sites(n, k)
        if not self.any_covers(m):
            return ranked
        covers = self.covers
        return [(d, sid) for d, sid in ranked if covers(sid, m)]

    def within_reach(self, n: int, k: int) -> List[Tuple[float, int]]:
        """`ranked_sites(n, k)` cut at MAX_SITE_DISTANCE, computed faster.

        Same numbers (the distance of a site is the same expression on the
        same operands, the squares merely shared between sites with equal n
        or k) and the same order (a stable sort of a site-ordered subset);
        `ranked_sites` is the plain statement, this the hot path. Columns of
        sites whose n alone is out of reach are skipped (their squared
        distance already exceeds the gate; the margin keeps the cut exact,
        the final gate is applied to the rounded distance itself)."""
        reach = self._reach.get((n, k))
        if reach is None:
            log2_n, log2_k = _log2(n), _log2(k)
            bound = MAX_SITE_DISTANCE ** 2 * (1 + 1e-9)
            dk2 = [(lk - log2_k) ** 2 for lk in self._k_log2]
            reach = []
            for ln, sites in zip(self._n_log2, self._sites_by_n):
                dn2 = (ln - log2_n) ** 2
                if dn2 > bound:
                    continue
                for sid, ki in sites:
                    s2 = dn2 + dk2[ki]
                    if s2 <= bound:
                        d = math.sqrt(s2)
                        if d <= MAX_SITE_DISTANCE:
                            reach.append((d, sid))
            # By distance, equal distances in site order: what a stable sort of
            # the site-ordered list gives.
            reach.sort()
            with self._lock:
                if len(self._reach) >= _REACH_MEMO:
                    self._reach.clear()
                self._reach[(n, k)] = reach
        return reach

    def _nearest(self, m: int, n: int, k: int) -> List[Tuple[float, int]]:
        """The first NN_SITES candidates within MAX_SITE_DISTANCE, in rank order
        (steps 1-3 of site transfer; stops as soon as it has them)."""
        top: List[Tuple[float, int]] = []
        require_cover = self.any_covers(m)
        curve_m = self.curve_m
        for d, sid in self.within_reach(n, k):
            if require_cover:
                ms = curve_m[sid]
                if not ms[0] <= m <= ms[-1]:
                    continue
            top.append((d, sid))
            if len(top) == NN_SITES:
                break
        return top

    def neighbours(self, m: int, n: int, k: int) -> List[int]:
        """The sites a transfer of (m, n, k) blends from, in rank order."""
        return [sid for _, sid in self._nearest(m, n, k)]

    def transfer(self, m: int, n: int, k: int, q: QuantMode, trace: Optional[list] = None) -> float:
        top = self._nearest(m, n, k)
        if not top:
            raise GemmMiss(MISS_DISTANCE)
        weighted = 0.0  # sum(w_i * util_i), in rank order
        weights = 0.0  # sum(w_i)
        used = 0
        for rank, (d, sid) in enumerate(top, start=1):
            latency, path = self.curve_at(sid, m, q)
            ok = _usable(latency)
            if not ok and trace is None:
                continue  # a failing neighbour is skipped, not replaced
            site_sol = path.sol if path.sol is not None else gemm_sol(self.system, q, m, self.site_n[sid], self.site_k[sid])
            weight = 1 / (d ** 2 + 1e-12)
            util = site_sol / latency if latency != 0 else math.inf
            if ok:
                weighted += weight * util
                weights += weight
                used += 1
            if trace is not None:
                trace.append(
                    trace_row(
                        "transfer",
                        site_n=self.site_n[sid],
                        site_k=self.site_k[sid],
                        distance=d,
                        covers_m=self.covers(sid, m),
                        rank=rank,
                        selected=ok,
                        weight=weight,
                        site_latency_ms=latency,
                        site_sol_ms=site_sol,
                        util=util,
                        reason=(
                            f"site curve: {path.describe()}"
                            if ok
                            else f"skipped: site curve gives {rust_float(latency)} ({path.describe()})"
                        ),
                    )
                )
        if used == 0:
            raise GemmMiss(MISS_NEIGHBOURS)
        result = gemm_sol(self.system, q, m, n, k) / (weighted / weights)
        if not _usable(result):
            raise GemmMiss(MISS_INVALID)
        return result

    # ---- a query ----------------------------------------------------------------

    def latency(self, m: int, n: int, k: int, q: QuantMode, trace: Optional[list] = None) -> float:
        """The spec's latency (ms) of (m, n, k) in this slice, or GemmMiss."""
        sid = self.site_id.get((n, k))
        if sid is None:
            return self.transfer(m, n, k, q, trace)
        # Exact hit or own-site curve: the site's curve alone.
        latency, path = self.curve_at(sid, m, q)
        if trace is not None:
            row = trace_row(
                path.stage,
                site_n=n,
                site_k=k,
                covers_m=self.covers(sid, m),
                selected=True,
                site_latency_ms=latency,
                reason=path.describe(),
            )
            if path.kind != "exact":
                sol = path.sol if path.sol is not None else gemm_sol(self.system, q, m, n, k)
                row["site_sol_ms"] = sol
                row["util"] = sol / latency if latency != 0 else math.inf
            trace.append(row)
        if not _usable(latency):
            raise GemmMiss(MISS_INVALID)
        return latency

    def unblended(self, m: int, n: int, k: int) -> List[dict]:
        """Trace rows for transfer candidates the blend did not use: ranks past
        NN_SITES within reach (ties and near misses), or, with none in reach,
        the nearest site beyond it."""
        ranked = self.candidates(m, n, k)
        within = 0
        while within < len(ranked) and ranked[within][0] <= MAX_SITE_DISTANCE:
            within += 1

        def row(d: float, sid: int, rank: Optional[int], reason: str) -> dict:
            return trace_row(
                "transfer",
                site_n=self.site_n[sid],
                site_k=self.site_k[sid],
                distance=d,
                covers_m=self.covers(sid, m),
                rank=rank,
                reason=reason,
            )

        if within == 0:
            if not ranked:
                return []
            d, sid = ranked[0]
            return [row(d, sid, None, f"nearest site, beyond max_site_distance = {MAX_SITE_DISTANCE}")]
        return [
            row(d, sid, i + 1, f"not blended: beyond nn_sites = {NN_SITES}")
            for i, (d, sid) in enumerate(ranked[:within])
            if i >= NN_SITES
        ]


# ---- loading ------------------------------------------------------------------------

_FILE_COLUMNS = ["gemm_dtype", "m", "n", "k", "latency"]
_FILES: Dict[Tuple[str, Optional[frozenset]], pa.Table] = {}
_FILES_LOCK = threading.Lock()


def _read_file(f: TableFile) -> pa.Table:
    """A GEMM source's columns (a cross-backend source: only its kernel
    sources' rows), read once per process."""
    key = (f.path, f.kernel_sources)
    with _FILES_LOCK:
        table = _FILES.get(key)
    if table is None:
        if f.kernel_sources is None:
            table = pq.read_table(f.path, columns=_FILE_COLUMNS)
        else:
            table = pa.table(read_columns(f, _FILE_COLUMNS))
        with _FILES_LOCK:
            _FILES.setdefault(key, table)
    return table


def gemm_sources(tree: DataTree, db: Database, shared_layer: bool = True) -> List[TableFile]:
    """The files of a database's GEMM table, in priority order: the spec's
    source union (`aicsql.spec.sources`, docs/spec 4.2). A database without
    any has an empty table, whose lookups miss (the spec's "file does not
    exist"): e.g. a version whose GEMMs come only from the shared layer,
    asked with the shared layer off."""
    return table_sources(tree, db, GEMM_FILE, shared_layer)


class GemmTable:
    """A database's GEMM table (all quant slices), loaded lazily per slice."""

    def __init__(self, tree: DataTree, db: Database, shared_layer: bool):
        self.tree = tree
        self.db = db
        self.shared_layer = shared_layer
        self.sources = gemm_sources(tree, db, shared_layer)
        self.system = SystemSpec.from_yaml(db.system, tree.system_yaml(db.system))
        dtypes = set()
        for f in self.sources:
            dtypes.update(v for v in _read_file(f).column("gemm_dtype").unique().to_pylist() if v is not None)
        # The slices a lookup can reach (known quant names), sorted as the spec lists them.
        self.supported: List[str] = sorted(d for d in dtypes if d in GEMM_QUANTS)
        self._slices: Dict[str, Optional[GemmSlice]] = {}
        self._lock = threading.Lock()

    def slice(self, q: QuantMode) -> Optional[GemmSlice]:
        """The slice a query in quant q reads (fp8_static -> fp8), or None if absent."""
        dtype = q.table_slice
        with self._lock:
            if dtype not in self._slices:
                self._slices[dtype] = self._load_slice(dtype) if dtype in self.supported else None
            return self._slices[dtype]

    def _load_slice(self, dtype: str) -> GemmSlice:
        own_quant = GEMM_QUANTS[dtype]  # SOL raise uses the row's own quant mode
        table: Dict[int, Dict[int, Dict[int, float]]] = {}
        for f in self.sources:  # sources in priority order, rows in file order
            rows = _read_file(f)
            rows = rows.filter(pc.equal(rows.column("gemm_dtype"), dtype))
            ms, ns, ks, lats = (rows.column(c).to_pylist() for c in ("m", "n", "k", "latency"))
            for m, n, k, latency in zip(ms, ns, ks, lats):
                by_n = table.get(m)
                if by_n is None:
                    by_n = table[m] = {}
                by_k = by_n.get(n)
                if by_k is None:
                    by_k = by_n[n] = {}
                if k not in by_k:  # first row wins
                    by_k[k] = latency
        # After loading, every entry is raised to its SOL.
        system = self.system
        for m, by_n in table.items():
            for n, by_k in by_n.items():
                for k, latency in by_k.items():
                    sol = gemm_sol(system, own_quant, m, n, k)
                    if latency < sol:
                        by_k[k] = sol
        return GemmSlice(system, table)

    # ---- messages (the spec's error texts) ---------------------------------------

    def miss_message(self, q: QuantMode, m: int, n: int, k: int, reason: str) -> str:
        """The spec's error text for a miss (what its Python raises)."""
        db = self.db
        tail = (
            f"Failed to query gemm data for m={m}, n={n}, k={k}, quant_mode={q.python_repr()}. "
            "Consider using HYBRID mode."
        )
        where = f"system='{db.system}', backend='{db.backend}', version='{db.version}', quant_mode='{q.name}'"
        if reason == MISS_TABLE:
            return (
                f"Error loading silicon data for op PerfDataFilename.gemm: File does not exist at "
                f"{primary_path(self.tree, db, GEMM_FILE)}. This combination of model, system, backend, and "
                f"backend version is not supported by AIC in SILICON mode. {tail}"
            )
        if reason == MISS_QUANT:
            supported = ", ".join(f"'{s}'" for s in self.supported)
            return (
                f"GEMM perf data not available for requested quant mode. {where}. "
                f"Supported gemm modes: [{supported}] {tail}"
            )
        return f"GEMM perf data not available for requested shape. {where}, m={m}, n={n}, k={k}. {tail}"

    @staticmethod
    def miss_detail(m: int, n: int, k: int, reason: str) -> Optional[str]:
        """The interpolation engine's own account of a shape miss."""
        if reason in (MISS_DISTANCE, MISS_NEIGHBOURS):
            return f"perf_interp: no data to anchor query {{'m': {m}, 'n': {n}, 'k': {k}}} ({reason})"
        return None

    # ---- queries ------------------------------------------------------------------

    def latency(self, q: QuantMode, m: int, n: int, k: int) -> float:
        """Latency in ms, or GemmMiss."""
        s = self.slice(q)
        if s is None:
            raise GemmMiss(MISS_QUANT if self.sources else MISS_TABLE)
        return s.latency(m, n, k, q)

    def trace(self, q: QuantMode, m: int, n: int, k: int) -> List[dict]:
        """How `latency` arrives at its answer: the own-site step, or every
        transfer candidate in rank order (blended ones, then unblended ones in
        reach, or the nearest beyond reach), then a `result` or `miss` row."""
        rows: List[dict] = []
        s = self.slice(q)
        try:
            if s is None:
                raise GemmMiss(MISS_QUANT if self.sources else MISS_TABLE)
            try:
                value = s.latency(m, n, k, q, rows)
            finally:
                if (n, k) not in s.site_id:
                    rows.extend(s.unblended(m, n, k))
        except GemmMiss as miss:
            rows.append(trace_row("miss", reason=miss.reason))
        else:
            rows.append(trace_row("result", selected=True, result_ms=value))
        return rows


_TABLES: Dict[Tuple[int, Database, bool], GemmTable] = {}
_TABLES_LOCK = threading.Lock()


def load_table(tree: DataTree, db: Database, shared_layer: bool = True) -> GemmTable:
    """The GEMM table of a database, loaded once per (tree, database, shared layer)."""
    key = (id(tree), db, bool(shared_layer))
    with _TABLES_LOCK:
        table = _TABLES.get(key)
    if table is None:
        table = GemmTable(tree, db, shared_layer)
        with _TABLES_LOCK:
            table = _TABLES.setdefault(key, table)
    return table
