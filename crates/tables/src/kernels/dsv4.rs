//! DeepSeek-V4's module tables (docs/spec/families_dsv4.md 3-4):
//!
//! | table | files | slice -> head -> ratio -> grid axes |
//! |---|---|---|
//! | mHC | `mhc_module_perf` | `[op][hc_mult][hidden]` -> (tokens) |
//! | context attention | `dsv4_{csa,hca}_context_module_perf` | `[fmha][kv][gemm]` -> heads -> ratio -> (prefix, isl, batch) |
//! | generation attention | `dsv4_{csa,hca}_generation_module_perf` | `[kv][gemm]` -> heads -> ratio -> (batch, isl + step) |
//!
//! Every table is **last wins** (plain assignment) over its sources in
//! priority order, so the oldest source holding a key gives its value while
//! the key keeps its first position (3.2, 3.3); the CSA file is read before
//! the HCA file of the same phase (their deep merge). The head key is the
//! rows' stored `num_heads`, resolved per lookup (exact, the only key, the
//! largest below, else the smallest; 4.2 step 3). Lookups are raw grids
//! (`k_tail = 1`) whose SOL shapes interpolation and util-hold only.

use foldhash::HashMap;

use crate::cache::{DbKey, Slots, TableCache};
use crate::columns::{Col, Rows, scan};
use crate::discovery::DataTree;
use crate::error::{ErrorClass, Result};
use crate::grid::{Grid, GridConfig, GridPath};
use crate::kernels::{DatabaseTable, KernelMiss, Origin, system_constants};
use crate::modes::{FmhaQuant, KvQuant};
use crate::op_sol::{Dsv4AttnDims, OpSol};
use crate::quant::GemmQuant;
use crate::sources::{
    DSV4_CSA_CONTEXT_FILE, DSV4_CSA_GENERATION_FILE, DSV4_HCA_CONTEXT_FILE, DSV4_HCA_GENERATION_FILE, MHC_MODULE_FILE,
    TableFile, TableSource, plan,
};

pub use super::dsv4_calib::{Dsv4TopkCalib, TopkVariant};

const RAW: GridConfig = GridConfig::RAW;

const OP_NAME: Col = Col::text("op_name");
const HC_MULT: Col = Col::int("hc_mult");
const HIDDEN_SIZE: Col = Col::int("hidden_size");
const NUM_TOKENS: Col = Col::int("num_tokens");
const MLA_DTYPE: Col = Col::text("mla_dtype");
const KV_CACHE_DTYPE: Col = Col::text("kv_cache_dtype");
const GEMM_TYPE: Col = Col::text("gemm_type");
const NUM_HEADS: Col = Col::int("num_heads");
const BATCH_SIZE: Col = Col::int("batch_size").optional();
const ISL: Col = Col::int("isl").optional();
const STEP: Col = Col::int("step").optional();
const COMPRESS_RATIO: Col = Col::int("compress_ratio").optional();
const LATENCY: Col = Col::LATENCY_FLOORED;

/// The rows of one file kind from every source, in priority order: `None`
/// when the database has no source of it (the spec's "not loaded").
fn sources_of(
    tree: &DataTree,
    file: &'static TableFile,
    (system, backend, version): (&str, &str, &str),
    shared: bool,
) -> Result<Option<Vec<TableSource>>> {
    match plan(tree, file, system, backend, version, shared) {
        Ok(sources) => Ok(Some(sources)),
        Err(e) if e.class() == ErrorClass::Miss => Ok(None),
        Err(e) => Err(e),
    }
}

/// A dtype label of the DSv4 files: sglang writes `fp8_e4m3` for `fp8` (3.2 step 2).
fn dtype<T: std::str::FromStr>(rows: &Rows, i: usize, col: Col) -> Result<T>
where
    T::Err: std::fmt::Display,
{
    let label = rows.text(col)?.req(i)?;
    let label = if label == "fp8_e4m3" { "fp8" } else { label };
    label.parse().map_err(|e| rows.error(i, col.name, e))
}

/// `system`, `backend`, `version` of a `system/backend/version` name.
fn db_parts(db: &str) -> (&str, &str, &str) {
    let mut parts = db.splitn(3, '/');
    (parts.next().unwrap_or_default(), parts.next().unwrap_or_default(), parts.next().unwrap_or_default())
}

// ---- mHC ----------------------------------------------------------------------------------

/// `mhc_module_perf`: the mHC pre / post module of one decoder layer (3.3).
#[derive(Debug)]
pub struct MhcTable {
    origin: Origin,
    /// `(pre, hc_mult, hidden)` -> tokens; rows of other op names are never asked for.
    slices: HashMap<(bool, i64, i64), Grid<1>>,
    sol: OpSol,
}

impl DatabaseTable for MhcTable {
    fn slots(cache: &TableCache) -> &Slots<(DbKey, bool), Self> {
        &cache.dsv4_mhc
    }

    fn origin(&self) -> &Origin {
        &self.origin
    }

    fn load(tree: &DataTree, system: &str, backend: &str, version: &str, shared_layer: bool) -> Result<Self> {
        let mut sources = plan(tree, &MHC_MODULE_FILE, system, backend, version, shared_layer)?;
        let (_, sol, _) = system_constants(tree, system)?;
        let mut slices: HashMap<(bool, i64, i64), Grid<1>> = HashMap::default();
        let cols = [OP_NAME, HC_MULT, HIDDEN_SIZE, NUM_TOKENS, LATENCY];
        for source in &mut sources {
            let mut added = 0usize;
            scan(tree, source, &cols, |rows| {
                let (ops, hcs, hiddens) = (rows.text(OP_NAME)?, rows.int(HC_MULT)?, rows.int(HIDDEN_SIZE)?);
                let (tokens, latencies) = (rows.int(NUM_TOKENS)?, rows.float(LATENCY)?);
                for i in 0..rows.len() {
                    let pre = match ops.req(i)? {
                        "pre" => true,
                        "post" => false,
                        _ => continue,
                    };
                    let key = (pre, hcs.req(i)?, hiddens.req(i)?);
                    if slices.entry(key).or_default().upsert([tokens.req(i)?], latencies.req(i)?) {
                        added += 1;
                    }
                }
                Ok(())
            })?;
            source.new_keys = added;
        }
        Ok(MhcTable { origin: Origin { db: format!("{system}/{backend}/{version}"), sources }, slices, sol })
    }
}

impl MhcTable {
    /// `query_mhc_module(num_tokens, hidden, hc_mult, sinkhorn_iters, op)` (4.1).
    pub fn query(
        &self,
        tokens: i64,
        hidden: i64,
        hc: i64,
        iters: i64,
        pre: bool,
    ) -> std::result::Result<(f64, GridPath), KernelMiss> {
        let op = if pre { "pre" } else { "post" };
        let miss = |reason: String| KernelMiss::new(&self.origin.db, MHC_MODULE_FILE.file, reason);
        let grid =
            self.slices.get(&(pre, hc, hidden)).filter(|g| !g.is_empty()).ok_or_else(|| {
                miss(format!("No mHC silicon data for op='{op}', hc_mult={hc}, hidden_size={hidden}."))
            })?;
        let sol = |c: &[i64; 1]| self.sol.mhc(c[0], hidden, hc, iters, pre);
        grid.resolve([tokens], RAW, &sol)
            .map_err(|m| KernelMiss::grid(&self.origin.db, MHC_MODULE_FILE.file, m, &format!("(num_tokens={tokens})")))
    }
}

// ---- attention modules --------------------------------------------------------------------

/// Per head key (insertion order), per compress ratio (insertion order): a grid.
type HeadSlices<const N: usize> = Vec<(i64, Vec<(i64, Grid<N>)>)>;

/// One phase's merged CSA + HCA table.
#[derive(Debug)]
struct AttnSlices<K, const N: usize> {
    origin: Origin,
    /// No source of either file had a row (the spec's "data not loaded").
    loaded: bool,
    slices: HashMap<K, HeadSlices<N>>,
    sol: OpSol,
}

/// A row's place: slice key, head, ratio, grid coordinates and latency.
type Placed<K, const N: usize> = (K, i64, i64, [i64; N], f64);

impl<K: Eq + std::hash::Hash + Copy, const N: usize> AttnSlices<K, N> {
    fn load(
        tree: &DataTree,
        files: [&'static TableFile; 2],
        db: (&str, &str, &str),
        shared: bool,
        cols: &[Col],
        mut row: impl FnMut(&Rows, usize) -> Result<Option<Placed<K, N>>>,
    ) -> Result<Self> {
        let (_, sol, _) = system_constants(tree, db.0)?;
        let mut slices: HashMap<K, HeadSlices<N>> = HashMap::default();
        let mut all_sources = Vec::new();
        let mut loaded = false;
        for file in files {
            let Some(mut sources) = sources_of(tree, file, db, shared)? else { continue };
            for source in &mut sources {
                let mut added = 0usize;
                scan(tree, source, cols, |rows| {
                    for i in 0..rows.len() {
                        let Some((key, head, ratio, coords, latency)) = row(rows, i)? else { continue };
                        let heads = slices.entry(key).or_default();
                        let h = match heads.iter().position(|(k, _)| *k == head) {
                            Some(h) => h,
                            None => {
                                heads.push((head, Vec::new()));
                                heads.len() - 1
                            }
                        };
                        let ratios = &mut heads[h].1;
                        let r = match ratios.iter().position(|(k, _)| *k == ratio) {
                            Some(r) => r,
                            None => {
                                ratios.push((ratio, Grid::new()));
                                ratios.len() - 1
                            }
                        };
                        loaded = true;
                        if ratios[r].1.upsert(coords, latency) {
                            added += 1;
                        }
                    }
                    Ok(())
                })?;
                source.new_keys = added;
            }
            all_sources.extend(sources);
        }
        let origin = Origin { db: format!("{}/{}/{}", db.0, db.1, db.2), sources: all_sources };
        Ok(AttnSlices { origin, loaded, slices, sol })
    }

    /// The grid of `(key, heads, ratio)` with the head-key fall-back, or the
    /// spec's reason. `walked` names the quant keys (for the slice miss),
    /// `has_prefix(k, d)` whether a stored key shares the first `d` of them.
    fn grid(
        &self,
        phase: &str,
        key: &K,
        walked: &[&str],
        has_prefix: impl Fn(&K, usize) -> bool,
        heads: i64,
        ratio: i64,
    ) -> std::result::Result<&Grid<N>, String> {
        let (system, backend, version) = db_parts(&self.origin.db);
        if !self.loaded {
            return Err(format!(
                "DeepSeek-V4 {phase} attention module data not loaded for system='{system}', backend='{backend}', \
                 version='{version}'."
            ));
        }
        let Some(by_head) = self.slices.get(key) else {
            let depth = (1..=walked.len()).find(|&d| !self.slices.keys().any(|k| has_prefix(k, d))).unwrap_or(1);
            let tuple =
                if depth == 1 { format!("({},)", walked[0]) } else { format!("({})", walked[..depth].join(", ")) };
            return Err(format!(
                "Missing silicon data for the requested lookup; requested slice {tuple} is not available."
            ));
        };
        let head = resolve_head(by_head.iter().map(|(h, _)| *h), heads)
            .and_then(|h| by_head.iter().find(|(k, _)| *k == h))
            .ok_or_else(|| format!("No DeepSeek-V4 {phase} attention silicon data for num_heads={heads}."))?;
        head.1.iter().find(|(r, _)| *r == ratio).map(|(_, g)| g).ok_or_else(|| {
            let keys: Vec<String> = head.1.iter().map(|(r, _)| r.to_string()).collect();
            format!(
                "No DeepSeek-V4 {phase} attention silicon data for num_heads={heads}, compress_ratio={ratio}, \
                 loaded cr keys=[{}].",
                keys.join(", ")
            )
        })
    }
}

/// The head key a lookup of `n` local heads reads (4.2 step 3): `n` itself,
/// else the only key, else the largest key `<= n`, else the smallest.
fn resolve_head(keys: impl Iterator<Item = i64> + Clone, n: i64) -> Option<i64> {
    if keys.clone().any(|k| k == n) {
        return Some(n);
    }
    let mut all = keys.clone();
    if let (Some(only), None) = (all.next(), all.next()) {
        return Some(only);
    }
    keys.clone().filter(|&k| k <= n).max().or_else(|| keys.min())
}

type ContextKey = (FmhaQuant, KvQuant, GemmQuant);
type GenerationKey = (KvQuant, GemmQuant);

/// `dsv4_{csa,hca}_context_module_perf`: one prefill attention layer
/// (projections, compressor, indexer, top-k and attention).
#[derive(Debug)]
pub struct ContextDsv4Table(AttnSlices<ContextKey, 3>);

/// `dsv4_{csa,hca}_generation_module_perf`: one decode attention layer.
#[derive(Debug)]
pub struct GenerationDsv4Table(AttnSlices<GenerationKey, 2>);

/// The ints of a module row, or `None` for the rows the spec skips
/// (appended header rows, unconvertible cells: 3.2 step 1).
fn module_ints(rows: &Rows, i: usize) -> Result<Option<(i64, i64, i64, i64)>> {
    let (Some(b), Some(isl), Some(ratio)) =
        (rows.int(BATCH_SIZE)?.get(i)?, rows.int(ISL)?.get(i)?, rows.int(COMPRESS_RATIO)?.get(i)?)
    else {
        return Ok(None);
    };
    Ok(Some((b, isl, rows.int(STEP)?.get(i)?.unwrap_or(0), ratio)))
}

fn load_context(tree: &DataTree, db: (&str, &str, &str), shared: bool) -> Result<AttnSlices<ContextKey, 3>> {
    let cols = [MLA_DTYPE, KV_CACHE_DTYPE, GEMM_TYPE, NUM_HEADS, BATCH_SIZE, ISL, STEP, COMPRESS_RATIO, LATENCY];
    AttnSlices::load(tree, [&DSV4_CSA_CONTEXT_FILE, &DSV4_HCA_CONTEXT_FILE], db, shared, &cols, |rows, i| {
        let Some((b, s, prefix, ratio)) = module_ints(rows, i)? else { return Ok(None) };
        let key = (dtype(rows, i, MLA_DTYPE)?, dtype(rows, i, KV_CACHE_DTYPE)?, dtype(rows, i, GEMM_TYPE)?);
        let heads = rows.int(NUM_HEADS)?.req(i)?;
        Ok(Some((key, heads, ratio, [prefix, s, b], rows.float(LATENCY)?.req(i)?)))
    })
}

fn load_generation(tree: &DataTree, db: (&str, &str, &str), shared: bool) -> Result<AttnSlices<GenerationKey, 2>> {
    let cols = [KV_CACHE_DTYPE, GEMM_TYPE, NUM_HEADS, BATCH_SIZE, ISL, STEP, COMPRESS_RATIO, LATENCY];
    AttnSlices::load(tree, [&DSV4_CSA_GENERATION_FILE, &DSV4_HCA_GENERATION_FILE], db, shared, &cols, |rows, i| {
        // A decode row needs its step (a KeyError in the spec's conversion).
        let Some((b, isl, _, ratio)) = module_ints(rows, i)? else { return Ok(None) };
        let Some(step) = rows.int(STEP)?.get(i)? else { return Ok(None) };
        let key = (dtype(rows, i, KV_CACHE_DTYPE)?, dtype(rows, i, GEMM_TYPE)?);
        let heads = rows.int(NUM_HEADS)?.req(i)?;
        Ok(Some((key, heads, ratio, [b, isl + step], rows.float(LATENCY)?.req(i)?)))
    })
}

macro_rules! attention_table {
    ($name:ident, $slot:ident, $load:expr) => {
        impl DatabaseTable for $name {
            fn slots(cache: &TableCache) -> &Slots<(DbKey, bool), Self> {
                &cache.$slot
            }

            fn origin(&self) -> &Origin {
                &self.0.origin
            }

            fn load(tree: &DataTree, system: &str, backend: &str, version: &str, shared_layer: bool) -> Result<Self> {
                $load(tree, (system, backend, version), shared_layer).map($name)
            }
        }
    };
}

attention_table!(ContextDsv4Table, dsv4_context, load_context);
attention_table!(GenerationDsv4Table, dsv4_generation, load_generation);

fn module_miss(origin: &Origin, file: &'static TableFile, reason: String) -> KernelMiss {
    KernelMiss::new(&origin.db, file.file, reason)
}

/// `max(0.0, latency - delta)` of the CSA layers (4.2 step 6, 4.3).
fn corrected(latency: f64, delta: f64) -> f64 {
    let v = latency - delta;
    if 0.0 > v { 0.0 } else { v }
}

impl ContextDsv4Table {
    /// `query_context_deepseek_v4_attention_module(b, s, prefix, ...)` (4.2);
    /// `calib` is the v1 top-k calibration (CSA only).
    pub fn query(
        &self,
        b: i64,
        s: i64,
        prefix: i64,
        d: &Dsv4AttnDims,
        calib: Option<&TopkVariant>,
    ) -> std::result::Result<(f64, GridPath), KernelMiss> {
        let t = &self.0;
        let names = [d.fmha.name(), d.kv.name(), d.gemm.name()];
        let has_prefix = |k: &ContextKey, depth: usize| {
            let parts = [k.0.name(), k.1.name(), k.2.name()];
            parts[..depth] == names[..depth]
        };
        let grid = t
            .grid("context", &(d.fmha, d.kv, d.gemm), &names, has_prefix, d.heads, d.ratio)
            .map_err(|r| module_miss(&t.origin, &DSV4_CSA_CONTEXT_FILE, r))?;
        let sol = |c: &[i64; 3]| t.sol.dsv4_attention(d, true, c[2], c[1], c[0]);
        let (latency, path) = grid.resolve([prefix, s, b], RAW, &sol).map_err(|_| {
            module_miss(
                &t.origin,
                &DSV4_CSA_CONTEXT_FILE,
                format!(
                    "DeepSeek-V4 prefix-resolved context attention module data not available for b={b}, s={s}, \
                     prefix={prefix}, num_heads={}, compress_ratio={}.",
                    d.heads, d.ratio
                ),
            )
        })?;
        match calib.filter(|_| d.ratio == 4) {
            Some(v) => Ok((corrected(latency, v.delta(prefix, s, b)), path)),
            None => Ok((latency, path)),
        }
    }
}

impl GenerationDsv4Table {
    /// `query_generation_deepseek_v4_attention_module(b, s, ...)` (4.3): one
    /// lookup at the decode step's absolute KV length; `calib` is the v2
    /// calibration (CSA only).
    pub fn query(
        &self,
        b: i64,
        s: i64,
        d: &Dsv4AttnDims,
        calib: Option<&TopkVariant>,
    ) -> std::result::Result<(f64, GridPath), KernelMiss> {
        let t = &self.0;
        let names = [d.kv.name(), d.gemm.name()];
        let has_prefix = |k: &GenerationKey, depth: usize| {
            let parts = [k.0.name(), k.1.name()];
            parts[..depth] == names[..depth]
        };
        let grid = t
            .grid("generation", &(d.kv, d.gemm), &names, has_prefix, d.heads, d.ratio)
            .map_err(|r| module_miss(&t.origin, &DSV4_CSA_GENERATION_FILE, r))?;
        let sol = |c: &[i64; 2]| t.sol.dsv4_attention(d, false, c[0], c[1], 0);
        let (latency, path) = grid.resolve([b, s], RAW, &sol).map_err(|m| {
            KernelMiss::grid(&t.origin.db, DSV4_CSA_GENERATION_FILE.file, m, &format!("(batch={b}, seq_len={s})"))
        })?;
        match calib.filter(|_| d.ratio == 4) {
            Some(v) => Ok((corrected(latency, v.delta((s - 1).max(0), 1, b)), path)),
            None => Ok((latency, path)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::resolve_head;

    /// 4.2 step 3 (surprise 4): exact, the only key, the largest below, the smallest.
    #[test]
    fn head_key_fall_back() {
        assert_eq!(resolve_head([8, 16, 64].into_iter(), 16), Some(16));
        assert_eq!(resolve_head([64].into_iter(), 8), Some(64));
        assert_eq!(resolve_head([8, 16, 64].into_iter(), 32), Some(16));
        assert_eq!(resolve_head([8, 16, 64].into_iter(), 4), Some(8));
        assert_eq!(resolve_head(std::iter::empty(), 4), None);
    }
}
