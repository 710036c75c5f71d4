//! The MLA tables of DeepSeek / Kimi (docs/spec/families_mla_gptoss_fp8static.md
//! 7.1 - 7.3):
//!
//! | table | slice -> grid axes | duplicates |
//! |---|---|---|
//! | `context_mla_perf` | `[mla_dtype][kv]` -> (heads, isl, batch) | first wins |
//! | `generation_mla_perf` | `[kv]` -> (heads, batch, isl + step) | first wins |
//! | `mla_bmm_perf` | `[bmm_dtype][op_name][heads]` -> (tokens) | first wins |
//! | `mla_context_module_perf` | `[mla_dtype][kv][gemm_type]` -> (heads, isl, batch) | **last wins** |
//! | `mla_generation_module_perf` | `[kv][gemm_type]` -> (heads, batch, isl + step) | **last wins** |
//!
//! The module tables are filled by plain assignment in the spec, so with
//! the source union the lowest-priority source holding a key gives its
//! value (older versions and other backends' rows beat the database's
//! own), while the key keeps its first position. The module tables and the
//! BMM table take rows from other backends through the manifest's
//! cross-backend channel ([`crate::sources`]). A granular table without a
//! `num_heads` column prices `128 // tp_size` heads. No table is SOL-clamped.
//!
//! Lookups: context tables a sqrt-on-seq grid at `(heads, s + prefix, b)`
//! times `(full^2 - prefix^2) / full^2`; generation tables one raw lookup at
//! `(heads, b, s)` (no five-point mean); the BMM a raw 1-axis grid over
//! tokens in the requested quant's slice, or bfloat16's when the table has
//! no such quant (the SOL keeps the requested one).

use foldhash::HashMap;
use std::hash::Hash;

use crate::cache::{DbKey, Slots, TableCache};
use crate::columns::{Col, Rows, scan};
use crate::discovery::DataTree;
use crate::error::Result;
use crate::grid::{Grid, GridConfig, GridPath};
use crate::kernels::{DatabaseTable, KernelMiss, Origin, system_constants};
use crate::modes::{FmhaQuant, KvQuant};
use crate::op_sol::OpSol;
use crate::quant::GemmQuant;
use crate::sources::{
    CONTEXT_MLA_FILE, GENERATION_MLA_FILE, MLA_BMM_FILE, MLA_CONTEXT_MODULE_FILE, MLA_GENERATION_MODULE_FILE,
    TableFile, plan,
};

/// Sqrt blend on the seq axis of (heads, seq, batch), `k_tail = 1`.
const CONTEXT_CONFIG: GridConfig = GridConfig { sqrt_axis: Some(1), k_tail: 1 };

const MLA_DTYPE: Col = Col::text("mla_dtype");
const KV_CACHE_DTYPE: Col = Col::text("kv_cache_dtype");
const GEMM_TYPE: Col = Col::text("gemm_type");
const BMM_DTYPE: Col = Col::text("bmm_dtype");
const OP_NAME: Col = Col::text("op_name");
const NUM_HEADS: Col = Col::int("num_heads");
const TP_SIZE: Col = Col::int("tp_size").optional();
const ISL: Col = Col::int("isl");
const STEP: Col = Col::int("step");
const BATCH_SIZE: Col = Col::int("batch_size");
const NUM_TOKENS: Col = Col::int("num_tokens");

/// The MLA head count of a granular table's row: `num_heads`, or
/// `128 // tp_size` where the file has no such column or cell.
fn granular_heads(rows: &Rows, i: usize) -> Result<i64> {
    let heads = rows.int(NUM_HEADS.optional())?;
    if let Some(n) = heads.get(i)? {
        return Ok(n);
    }
    match rows.int(TP_SIZE)?.get(i)? {
        Some(tp) if tp > 0 => Ok(128_i64.div_euclid(tp)),
        _ => Err(rows.error(i, NUM_HEADS.name, "a row without num_heads needs a positive tp_size (heads = 128 // tp)")),
    }
}

fn parse<T: std::str::FromStr>(rows: &Rows, i: usize, col: Col) -> Result<T>
where
    T::Err: std::fmt::Display,
{
    rows.text(col)?.req(i)?.parse().map_err(|e| rows.error(i, col.name, e))
}

/// The slices of one MLA table: key -> grid, filled in source order.
#[derive(Debug)]
struct Slices<K, const N: usize> {
    origin: Origin,
    file: &'static TableFile,
    slices: HashMap<K, Grid<N>>,
    sol: OpSol,
}

impl<K: Eq + Hash + Copy, const N: usize> Slices<K, N> {
    /// Reads every source; `row` gives a row's slice key, coordinates and
    /// latency (`None` skips it). `last_wins` overwrites repeated keys.
    #[allow(clippy::too_many_arguments)]
    fn load(
        tree: &DataTree,
        file: &'static TableFile,
        system: &str,
        backend: &str,
        version: &str,
        shared_layer: bool,
        cols: &[Col],
        last_wins: bool,
        mut row: impl FnMut(&Rows, usize) -> Result<Option<(K, [i64; N], f64)>>,
    ) -> Result<Self> {
        let mut sources = plan(tree, file, system, backend, version, shared_layer)?;
        let (_, sol, _) = system_constants(tree, system)?;
        let mut slices: HashMap<K, Grid<N>> = HashMap::default();
        for source in &mut sources {
            let mut added = 0usize;
            scan(tree, source, cols, |rows| {
                for i in 0..rows.len() {
                    let Some((key, coords, latency)) = row(rows, i)? else { continue };
                    let grid = slices.entry(key).or_default();
                    let new = if last_wins { grid.upsert(coords, latency) } else { grid.insert(coords, latency) };
                    if new {
                        added += 1;
                    }
                }
                Ok(())
            })?;
            source.new_keys = added;
        }
        Ok(Slices { origin: Origin { db: format!("{system}/{backend}/{version}"), sources }, file, slices, sol })
    }

    fn miss(&self, reason: impl Into<String>) -> KernelMiss {
        KernelMiss::new(&self.origin.db, self.file.file, reason)
    }

    /// The spec's `require_data_slice` message: the keys walked until the
    /// first one missing, as a Python tuple.
    fn slice_miss(&self, walked: &[String]) -> KernelMiss {
        let tuple = if walked.len() == 1 { format!("({},)", walked[0]) } else { format!("({})", walked.join(", ")) };
        self.miss(format!("Missing silicon data for the requested lookup; requested slice {tuple} is not available."))
    }

    /// The slice `key`, or the miss naming the keys walked: `levels` are
    /// the key's parts as Python reprs, `has_prefix(d)` whether any slice
    /// shares the key's first `d` parts.
    fn slice(
        &self,
        key: &K,
        levels: &[String],
        has_prefix: impl Fn(&K, usize) -> bool,
    ) -> Result<&Grid<N>, KernelMiss> {
        if let Some(grid) = self.slices.get(key) {
            return Ok(grid);
        }
        let depth = (1..=levels.len()).find(|&d| !self.slices.keys().any(|k| has_prefix(k, d))).unwrap_or(levels.len());
        Err(self.slice_miss(&levels[..depth]))
    }

    fn grid_miss(&self, miss: crate::grid::GridMiss, coords: String) -> KernelMiss {
        KernelMiss::grid(&self.origin.db, self.file.file, miss, &coords)
    }
}

fn quoted(name: &str) -> String {
    format!("'{name}'")
}

/// `(full^2 - prefix^2) / full^2` on ints: exactly 1.0 at prefix 0.
fn prefix_correction(full: i64, prefix: i64) -> f64 {
    let (f, p) = (i128::from(full), i128::from(prefix));
    crate::pymath::int_true_div(f * f - p * p, f * f).unwrap_or(f64::NAN)
}

macro_rules! database_table {
    ($name:ident, $slot:ident, $load:expr) => {
        impl DatabaseTable for $name {
            fn slots(cache: &TableCache) -> &Slots<(DbKey, bool), Self> {
                &cache.$slot
            }

            fn origin(&self) -> &Origin {
                &self.0.origin
            }

            fn load(tree: &DataTree, system: &str, backend: &str, version: &str, shared_layer: bool) -> Result<Self> {
                $load(tree, system, backend, version, shared_layer).map($name)
            }
        }
    };
}

// ---- context: granular and module ----------------------------------------------------------

type ContextKey = (FmhaQuant, KvQuant, Option<GemmQuant>);

/// `context_mla_perf`: the granular prefill MLA attention (trtllm / sglang fallback).
#[derive(Debug)]
pub struct ContextMlaTable(Slices<ContextKey, 3>);

/// `mla_context_module_perf`: the whole prefill MLA block (projections, attention, output).
#[derive(Debug)]
pub struct ContextMlaModuleTable(Slices<ContextKey, 3>);

fn load_context(
    file: &'static TableFile,
    module: bool,
) -> impl Fn(&DataTree, &str, &str, &str, bool) -> Result<Slices<ContextKey, 3>> {
    move |tree, system, backend, version, shared| {
        let module_cols = [MLA_DTYPE, KV_CACHE_DTYPE, GEMM_TYPE, NUM_HEADS, ISL, BATCH_SIZE, Col::LATENCY];
        let granular_cols = [MLA_DTYPE, KV_CACHE_DTYPE, NUM_HEADS.optional(), TP_SIZE, ISL, BATCH_SIZE, Col::LATENCY];
        let cols: &[Col] = if module { &module_cols } else { &granular_cols };
        Slices::load(tree, file, system, backend, version, shared, cols, module, |rows, i| {
            let fmha: FmhaQuant = parse(rows, i, MLA_DTYPE)?;
            let kv: KvQuant = parse(rows, i, KV_CACHE_DTYPE)?;
            let (gemm, n) = if module {
                (Some(parse::<GemmQuant>(rows, i, GEMM_TYPE)?), rows.int(NUM_HEADS)?.req(i)?)
            } else {
                (None, granular_heads(rows, i)?)
            };
            let (isl, b) = (rows.int(ISL)?.req(i)?, rows.int(BATCH_SIZE)?.req(i)?);
            Ok(Some(((fmha, kv, gemm), [n, isl, b], rows.float(Col::LATENCY)?.req(i)?)))
        })
    }
}

database_table!(ContextMlaTable, context_mla, load_context(&CONTEXT_MLA_FILE, false));
database_table!(ContextMlaModuleTable, mla_context_module, load_context(&MLA_CONTEXT_MODULE_FILE, true));

/// One context MLA lookup (`query_context_mla[_module]`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CtxMlaQuery {
    pub b: i64,
    pub s: i64,
    pub prefix: i64,
    pub heads: i64,
    pub kv: KvQuant,
    pub fmha: FmhaQuant,
}

fn context_query(
    t: &Slices<ContextKey, 3>,
    q: &CtxMlaQuery,
    gemm: Option<GemmQuant>,
) -> std::result::Result<(f64, GridPath), KernelMiss> {
    let key = (q.fmha, q.kv, gemm);
    let mut levels = vec![quoted(q.fmha.name()), quoted(q.kv.name())];
    if let Some(g) = gemm {
        levels.push(quoted(g.name()));
    }
    let grid = t.slice(&key, &levels, |k, d| match d {
        1 => k.0 == key.0,
        2 => (k.0, k.1) == (key.0, key.1),
        _ => *k == key,
    })?;
    let (sol, kv_mem, compute) = (&t.sol, q.kv.memory(), q.fmha.compute());
    let sol_at = |c: &[i64; 3]| sol.context_mla(c[2], c[1], 0, c[0], kv_mem, compute);
    let full = q.s + q.prefix;
    let (value, path) = grid
        .resolve([q.heads, full, q.b], CONTEXT_CONFIG, &sol_at)
        .map_err(|m| t.grid_miss(m, format!("{{'num_heads': {}, 'seq_len': {full}, 'batch': {}}}", q.heads, q.b)))?;
    Ok((value * prefix_correction(full, q.prefix), path))
}

fn fmha_modes(t: &Slices<ContextKey, 3>, kv: KvQuant) -> Vec<FmhaQuant> {
    let mut modes: Vec<FmhaQuant> = t.slices.keys().filter(|k| k.1 == kv).map(|k| k.0).collect();
    modes.sort_unstable();
    modes.dedup();
    modes
}

impl ContextMlaTable {
    pub fn query(&self, q: &CtxMlaQuery) -> std::result::Result<(f64, GridPath), KernelMiss> {
        context_query(&self.0, q, None)
    }

    /// The FMHA modes with rows under `kv` (the `context_mla` FMHA guard).
    pub fn fmha_modes_for_kv(&self, kv: KvQuant) -> Vec<FmhaQuant> {
        fmha_modes(&self.0, kv)
    }
}

impl ContextMlaModuleTable {
    pub fn query(&self, q: &CtxMlaQuery, gemm: GemmQuant) -> std::result::Result<(f64, GridPath), KernelMiss> {
        context_query(&self.0, q, Some(gemm))
    }

    /// The FMHA modes with rows under `kv` (the `context_mla` FMHA guard).
    pub fn fmha_modes_for_kv(&self, kv: KvQuant) -> Vec<FmhaQuant> {
        fmha_modes(&self.0, kv)
    }
}

// ---- generation: granular and module -------------------------------------------------------

type GenerationKey = (KvQuant, Option<GemmQuant>);

/// `generation_mla_perf`: the granular decode MLA kernel (trtllm / sglang fallback).
#[derive(Debug)]
pub struct GenerationMlaTable(Slices<GenerationKey, 3>);

/// `mla_generation_module_perf`: the whole decode MLA block (BMMs and kernel).
#[derive(Debug)]
pub struct GenerationMlaModuleTable(Slices<GenerationKey, 3>);

fn load_generation(
    file: &'static TableFile,
    module: bool,
) -> impl Fn(&DataTree, &str, &str, &str, bool) -> Result<Slices<GenerationKey, 3>> {
    move |tree, system, backend, version, shared| {
        let module_cols = [KV_CACHE_DTYPE, GEMM_TYPE, NUM_HEADS, BATCH_SIZE, ISL, STEP, Col::LATENCY];
        let granular_cols = [KV_CACHE_DTYPE, NUM_HEADS.optional(), TP_SIZE, BATCH_SIZE, ISL, STEP, Col::LATENCY];
        let cols: &[Col] = if module { &module_cols } else { &granular_cols };
        Slices::load(tree, file, system, backend, version, shared, cols, module, |rows, i| {
            let kv: KvQuant = parse(rows, i, KV_CACHE_DTYPE)?;
            let (gemm, n) = if module {
                (Some(parse::<GemmQuant>(rows, i, GEMM_TYPE)?), rows.int(NUM_HEADS)?.req(i)?)
            } else {
                (None, granular_heads(rows, i)?)
            };
            let (b, isl, step) = (rows.int(BATCH_SIZE)?.req(i)?, rows.int(ISL)?.req(i)?, rows.int(STEP)?.req(i)?);
            Ok(Some(((kv, gemm), [n, b, isl + step], rows.float(Col::LATENCY)?.req(i)?)))
        })
    }
}

database_table!(GenerationMlaTable, generation_mla, load_generation(&GENERATION_MLA_FILE, false));
database_table!(GenerationMlaModuleTable, mla_generation_module, load_generation(&MLA_GENERATION_MODULE_FILE, true));

fn generation_query(
    t: &Slices<GenerationKey, 3>,
    b: i64,
    s: i64,
    heads: i64,
    kv: KvQuant,
    gemm: Option<GemmQuant>,
) -> std::result::Result<(f64, GridPath), KernelMiss> {
    let key = (kv, gemm);
    let mut levels = vec![quoted(kv.name())];
    if let Some(g) = gemm {
        levels.push(quoted(g.name()));
    }
    let grid = t.slice(&key, &levels, |k, d| if d == 1 { k.0 == key.0 } else { *k == key })?;
    let (sol, kv_mem, fp8) = (&t.sol, kv.memory(), kv == KvQuant::Fp8);
    let sol_at = |c: &[i64; 3]| match gemm {
        Some(g) => sol.generation_mla_module(c[1], c[2], c[0], kv_mem, fp8, g.memory(), g.compute()),
        None => sol.generation_mla(c[1], c[2], c[0], kv_mem, fp8),
    };
    grid.resolve([heads, b, s], GridConfig::RAW, &sol_at)
        .map_err(|m| t.grid_miss(m, format!("{{'num_heads': {heads}, 'batch': {b}, 'seq_len': {s}}}")))
}

impl GenerationMlaTable {
    /// `query_generation_mla(b, s, heads, kv)`: one lookup at `s`.
    pub fn query(&self, b: i64, s: i64, heads: i64, kv: KvQuant) -> std::result::Result<(f64, GridPath), KernelMiss> {
        generation_query(&self.0, b, s, heads, kv, None)
    }
}

impl GenerationMlaModuleTable {
    /// `query_generation_mla_module(b, s, heads, kv, gemm)`: one lookup at `s`.
    pub fn query(
        &self,
        b: i64,
        s: i64,
        heads: i64,
        kv: KvQuant,
        gemm: GemmQuant,
    ) -> std::result::Result<(f64, GridPath), KernelMiss> {
        generation_query(&self.0, b, s, heads, kv, Some(gemm))
    }
}

// ---- the decode BMMs -----------------------------------------------------------------------

/// (bmm quant, before the kernel, heads).
type BmmKey = (GemmQuant, bool, i64);

/// `mla_bmm_perf`: the decode BMMs before (`mla_gen_pre`) and after
/// (`mla_gen_post`) the MLA kernel. Rows of other op names are never looked up.
#[derive(Debug)]
pub struct MlaBmmTable(Slices<BmmKey, 1>);

fn load_bmm(tree: &DataTree, system: &str, backend: &str, version: &str, shared: bool) -> Result<Slices<BmmKey, 1>> {
    let cols = [BMM_DTYPE, OP_NAME, NUM_HEADS, NUM_TOKENS, Col::LATENCY];
    Slices::load(tree, &MLA_BMM_FILE, system, backend, version, shared, &cols, false, |rows, i| {
        let pre = match rows.text(OP_NAME)?.req(i)? {
            "mla_gen_pre" => true,
            "mla_gen_post" => false,
            _ => return Ok(None),
        };
        let quant: GemmQuant = parse(rows, i, BMM_DTYPE)?;
        let (n, tokens) = (rows.int(NUM_HEADS)?.req(i)?, rows.int(NUM_TOKENS)?.req(i)?);
        Ok(Some(((quant, pre, n), [tokens], rows.float(Col::LATENCY)?.req(i)?)))
    })
}

database_table!(MlaBmmTable, mla_bmm, load_bmm);

impl MlaBmmTable {
    /// `query_mla_bmm(tokens, heads, quant, pre)`.
    pub fn query(
        &self,
        tokens: i64,
        heads: i64,
        quant: GemmQuant,
        pre: bool,
    ) -> std::result::Result<(f64, GridPath), KernelMiss> {
        let t = &self.0;
        let table_quant = if t.slices.keys().any(|k| k.0 == quant) { quant } else { GemmQuant::Bfloat16 };
        let key = (table_quant, pre, heads);
        let op = if pre { "mla_gen_pre" } else { "mla_gen_post" };
        let levels = [quoted(table_quant.name()), quoted(op), heads.to_string()];
        let grid = t.slice(&key, &levels, |k, d| match d {
            1 => k.0 == key.0,
            2 => (k.0, k.1) == (key.0, key.1),
            _ => *k == key,
        })?;
        let (sol, memory, compute) = (&t.sol, quant.memory(), quant.compute());
        let sol_at = |c: &[i64; 1]| sol.mla_bmm(c[0], heads, memory, compute);
        grid.resolve([tokens], GridConfig::RAW, &sol_at)
            .map_err(|m| t.grid_miss(m, format!("{{'num_tokens': {tokens}}}")))
    }
}
