//! The DSA module tables of DeepSeek-V3.2 and GLM-5 (docs/spec/families_dsa.md
//! 5-6): `dsa_context_module_perf` and `dsa_generation_module_perf`, each
//! holding the full layers' rows and (sglang) GLM-5.2's skip-indexer rows.
//!
//! | table | slice -> grid axes |
//! |---|---|
//! | context | `[fmha][kv][gemm][architecture][bucket]` -> (heads, prefix, seq, batch) |
//! | generation | `[kv][gemm][architecture][bucket]` -> (heads, batch, isl + step) |
//!
//! Within one file the last row of a coordinate wins, across files the
//! first file holding it (the MLA module tables are last-wins throughout).
//! Each row is filed under one or two kernel buckets (`trtllm`,
//! `flashmla_kv`) by its kv dtype and kernel source; a lookup reads the
//! `trtllm` bucket, else `flashmla_kv`. Lookups are raw grids whose SOL only
//! shapes the interpolation; nothing is floored at it.

use foldhash::HashMap;

use crate::cache::{DbKey, Slots, TableCache};
use crate::columns::{Col, Rows, scan};
use crate::discovery::DataTree;
use crate::error::Result;
use crate::grid::{Grid, GridConfig, GridPath};
use crate::kernels::{DatabaseTable, KernelMiss, Origin, system_constants};
use crate::modes::{FmhaQuant, KvQuant};
use crate::op_sol::{DsaDims, OpSol};
use crate::quant::GemmQuant;
use crate::sources::{DSA_CONTEXT_MODULE_FILE, DSA_GENERATION_MODULE_FILE, TableFile, plan};

const RAW: GridConfig = GridConfig { sqrt_axis: None, k_tail: 1 };

const OP_NAME: Col = Col::text("op_name").optional();
const KERNEL_SOURCE: Col = Col::text("kernel_source").optional();
const ARCHITECTURE: Col = Col::text("architecture").optional();
const MLA_DTYPE: Col = Col::text("mla_dtype");
const KV_CACHE_DTYPE: Col = Col::text("kv_cache_dtype");
const GEMM_TYPE: Col = Col::text("gemm_type");
const NUM_HEADS: Col = Col::int("num_heads");
const BATCH_SIZE: Col = Col::int("batch_size");
const ISL: Col = Col::int("isl");
const STEP: Col = Col::int("step").optional();
const DECODE_STEP: Col = Col::int("step");

/// The architectures the DSA tables are keyed by (rows of any other are
/// never asked for).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DsaArch {
    DeepseekV32,
    GlmMoeDsa,
}

impl DsaArch {
    pub fn name(self) -> &'static str {
        match self {
            DsaArch::DeepseekV32 => "DeepseekV32ForCausalLM",
            DsaArch::GlmMoeDsa => "GlmMoeDsaForCausalLM",
        }
    }

    fn parse(name: &str) -> Option<DsaArch> {
        [DsaArch::DeepseekV32, DsaArch::GlmMoeDsa].into_iter().find(|a| a.name() == name)
    }

    /// The constant structural dimensions the lookups and SOLs use (6.1),
    /// never the checkpoint's.
    pub fn dims(self) -> DsaDims {
        match self {
            DsaArch::DeepseekV32 => DsaDims {
                hidden: 7168,
                q_lora: 1536,
                kv_lora: 512,
                qk_nope: 128,
                qk_rope: 64,
                v_head: 128,
                index_topk: 2048,
                index_head_dim: 128,
                index_heads: 64,
            },
            DsaArch::GlmMoeDsa => DsaDims {
                hidden: 6144,
                q_lora: 2048,
                kv_lora: 512,
                qk_nope: 192,
                qk_rope: 64,
                v_head: 256,
                index_topk: 2048,
                index_head_dim: 128,
                index_heads: 32,
            },
        }
    }
}

/// The kernel bucket a row serves (5.2 step 4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Bucket {
    Trtllm,
    FlashmlaKv,
}

/// The buckets of a row: bfloat16 caches serve both; fp8 ones by kernel source.
fn buckets(kv: KvQuant, kernel_source: &str) -> &'static [Bucket] {
    const BOTH: &[Bucket] = &[Bucket::Trtllm, Bucket::FlashmlaKv];
    if kv == KvQuant::Bfloat16 {
        return BOTH;
    }
    match kernel_source {
        "sglang_dsa_indexer_trtllm" | "sglang_dsa_skip_indexer_trtllm" => &[Bucket::Trtllm],
        "sglang_dsa_indexer_flashmla_sparse" | "sglang_dsa_skip_indexer_flashmla_sparse" => &[Bucket::FlashmlaKv],
        "sglang_dsa_dense_mha_trtllm_ragged" => BOTH,
        other if other.contains("trtllm") => &[Bucket::Trtllm],
        _ => &[Bucket::FlashmlaKv],
    }
}

fn parse<T: std::str::FromStr>(rows: &Rows, i: usize, col: Col) -> Result<T>
where
    T::Err: std::fmt::Display,
{
    rows.text(col)?.req(i)?.parse().map_err(|e| rows.error(i, col.name, e))
}

/// One DSA table: the full layers' slices and, when any file has skip
/// rows, the skip-indexer layers'.
#[derive(Debug)]
struct DsaSlices<K, const N: usize> {
    origin: Origin,
    file: &'static TableFile,
    full: HashMap<(K, Bucket), Grid<N>>,
    skip: Option<HashMap<(K, Bucket), Grid<N>>>,
    sol: OpSol,
}

/// A coordinate of one file: (skip row, slice key and bucket, coordinates).
type Slot<K, const N: usize> = (bool, (K, Bucket), [i64; N]);
/// A coordinate of one file with its (last) latency.
type Entry<K, const N: usize> = (bool, (K, Bucket), [i64; N], f64);

/// A row's place: (skip row, slice key, coordinates, latency).
type Parsed<K, const N: usize> = (bool, K, [i64; N], f64);

impl<K: Eq + std::hash::Hash + Copy, const N: usize> DsaSlices<K, N> {
    fn load(
        tree: &DataTree,
        file: &'static TableFile,
        (system, backend, version): (&str, &str, &str),
        shared_layer: bool,
        cols: &[Col],
        mut row: impl FnMut(&Rows, usize) -> Result<Option<(Parsed<K, N>, KvQuant)>>,
    ) -> Result<Self> {
        let mut sources = plan(tree, file, system, backend, version, shared_layer)?;
        let (_, sol, _) = system_constants(tree, system)?;
        let mut full: HashMap<(K, Bucket), Grid<N>> = HashMap::default();
        let mut skip: HashMap<(K, Bucket), Grid<N>> = HashMap::default();
        let mut any_skip = false;
        for source in &mut sources {
            // Last wins within the file, at the coordinate's first position.
            let mut entries: Vec<Entry<K, N>> = Vec::new();
            let mut at: HashMap<Slot<K, N>, usize> = HashMap::default();
            scan(tree, source, cols, |rows| {
                let kernel_sources = rows.text(KERNEL_SOURCE)?;
                for i in 0..rows.len() {
                    let Some(((is_skip, key, coords, latency), kv)) = row(rows, i)? else { continue };
                    let kernel_source = kernel_sources.get(i)?.unwrap_or_default();
                    for &bucket in buckets(kv, kernel_source) {
                        let slot = (is_skip, (key, bucket), coords);
                        match at.get(&slot) {
                            Some(&e) => entries[e].3 = latency,
                            None => {
                                at.insert(slot, entries.len());
                                entries.push((is_skip, (key, bucket), coords, latency));
                            }
                        }
                    }
                }
                Ok(())
            })?;
            // First file wins across files.
            let mut added = 0usize;
            for (is_skip, key, coords, latency) in entries {
                any_skip |= is_skip;
                let table = if is_skip { &mut skip } else { &mut full };
                if table.entry(key).or_default().insert(coords, latency) {
                    added += 1;
                }
            }
            source.new_keys = added;
        }
        let origin = Origin { db: format!("{system}/{backend}/{version}"), sources };
        Ok(DsaSlices { origin, file, full, skip: any_skip.then_some(skip), sol })
    }

    /// The slice of `key`: the `trtllm` bucket, else `flashmla_kv` (the
    /// reverse with `flashmla_first`). A skip-indexer lookup on a database
    /// whose files have no skip rows, and a slice no file has
    /// (`unavailable`), are the spec's two misses (6.6).
    fn slice(
        &self,
        key: K,
        skip: bool,
        flashmla_first: bool,
        phase: &str,
        unavailable: impl Fn() -> KernelMiss,
    ) -> std::result::Result<&Grid<N>, KernelMiss> {
        let table = if skip {
            self.skip.as_ref().ok_or_else(|| {
                let (system, backend, version) = db_parts(&self.origin.db);
                KernelMiss::new(
                    &self.origin.db,
                    self.file.file,
                    format!(
                        "{phase} DSA module skip_indexer perf data not loaded for system='{system}', \
                         backend='{backend}', version='{version}'."
                    ),
                )
            })?
        } else {
            &self.full
        };
        let (first, second) =
            if flashmla_first { (Bucket::FlashmlaKv, Bucket::Trtllm) } else { (Bucket::Trtllm, Bucket::FlashmlaKv) };
        table.get(&(key, first)).or_else(|| table.get(&(key, second))).ok_or_else(unavailable)
    }
}

fn step_prefix(rows: &Rows, i: usize, arch: DsaArch) -> Result<i64> {
    match rows.int(STEP)?.get(i)? {
        Some(step) => Ok(step),
        None if arch == DsaArch::GlmMoeDsa => Err(rows.error(
            i,
            "step",
            "GLM-5 context DSA module data requires a non-empty step column for prefix/past_kv length",
        )),
        None => Ok(0),
    }
}

/// The row's architecture (DeepSeek-V3.2's when the file has no such
/// column), or `None` for one no model asks for.
fn row_arch(rows: &Rows, i: usize) -> Result<Option<DsaArch>> {
    Ok(match rows.text(ARCHITECTURE)?.get(i)? {
        None => Some(DsaArch::DeepseekV32),
        Some(name) => DsaArch::parse(name),
    })
}

fn is_skip_row(rows: &Rows, i: usize) -> Result<bool> {
    Ok(rows.text(OP_NAME)?.get(i)?.is_some_and(|name| name.contains("skip_indexer")))
}

macro_rules! dsa_table {
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

/// What a DSA lookup asks, besides its coordinates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DsaQuant {
    pub kv: KvQuant,
    pub fmha: FmhaQuant,
    pub gemm: GemmQuant,
    pub arch: DsaArch,
    pub skip_indexer: bool,
}

type ContextKey = (FmhaQuant, KvQuant, GemmQuant, DsaArch);
type GenerationKey = (KvQuant, GemmQuant, DsaArch);

/// `dsa_context_module_perf`: one prefill DSA layer (projections, indexer,
/// sparse attention, output).
#[derive(Debug)]
pub struct ContextDsaTable(DsaSlices<ContextKey, 4>);

/// `dsa_generation_module_perf`: one decode DSA layer.
#[derive(Debug)]
pub struct GenerationDsaTable(DsaSlices<GenerationKey, 3>);

fn load_context(tree: &DataTree, db: (&str, &str, &str), shared: bool) -> Result<DsaSlices<ContextKey, 4>> {
    let cols = [
        OP_NAME,
        KERNEL_SOURCE,
        ARCHITECTURE,
        MLA_DTYPE,
        KV_CACHE_DTYPE,
        GEMM_TYPE,
        NUM_HEADS,
        BATCH_SIZE,
        ISL,
        STEP,
        Col::LATENCY,
    ];
    DsaSlices::load(tree, &DSA_CONTEXT_MODULE_FILE, db, shared, &cols, |rows, i| {
        let Some(arch) = row_arch(rows, i)? else { return Ok(None) };
        let (fmha, kv, gemm): (FmhaQuant, KvQuant, GemmQuant) =
            (parse(rows, i, MLA_DTYPE)?, parse(rows, i, KV_CACHE_DTYPE)?, parse(rows, i, GEMM_TYPE)?);
        let coords = [
            rows.int(NUM_HEADS)?.req(i)?,
            step_prefix(rows, i, arch)?,
            rows.int(ISL)?.req(i)?,
            rows.int(BATCH_SIZE)?.req(i)?,
        ];
        let latency = rows.float(Col::LATENCY)?.req(i)?;
        Ok(Some(((is_skip_row(rows, i)?, (fmha, kv, gemm, arch), coords, latency), kv)))
    })
}

fn load_generation(tree: &DataTree, db: (&str, &str, &str), shared: bool) -> Result<DsaSlices<GenerationKey, 3>> {
    let cols = [
        OP_NAME,
        KERNEL_SOURCE,
        ARCHITECTURE,
        KV_CACHE_DTYPE,
        GEMM_TYPE,
        NUM_HEADS,
        BATCH_SIZE,
        ISL,
        DECODE_STEP,
        Col::LATENCY,
    ];
    DsaSlices::load(tree, &DSA_GENERATION_MODULE_FILE, db, shared, &cols, |rows, i| {
        let Some(arch) = row_arch(rows, i)? else { return Ok(None) };
        let (kv, gemm): (KvQuant, GemmQuant) = (parse(rows, i, KV_CACHE_DTYPE)?, parse(rows, i, GEMM_TYPE)?);
        let s = rows.int(ISL)?.req(i)? + rows.int(DECODE_STEP)?.req(i)?;
        let coords = [rows.int(NUM_HEADS)?.req(i)?, rows.int(BATCH_SIZE)?.req(i)?, s];
        let latency = rows.float(Col::LATENCY)?.req(i)?;
        Ok(Some(((is_skip_row(rows, i)?, (kv, gemm, arch), coords, latency), kv)))
    })
}

dsa_table!(ContextDsaTable, dsa_context_module, load_context);
dsa_table!(GenerationDsaTable, dsa_generation_module, load_generation);

/// The spec's `backend='..', version='..'` parts of a database name.
fn db_parts(db: &str) -> (&str, &str, &str) {
    let mut parts = db.splitn(3, '/');
    (parts.next().unwrap_or_default(), parts.next().unwrap_or_default(), parts.next().unwrap_or_default())
}

impl ContextDsaTable {
    /// `query_context_dsa_module(b, s, prefix, num_heads, ...)` (6.3);
    /// `flashmla_first`: the context-parallel base asks for the
    /// `flashmla_kv` kernel bucket (families_dsa.md 7).
    pub fn query(
        &self,
        b: i64,
        s: i64,
        prefix: i64,
        heads: i64,
        q: DsaQuant,
        flashmla_first: bool,
    ) -> std::result::Result<(f64, GridPath), KernelMiss> {
        let t = &self.0;
        let (system, backend, version) = db_parts(&t.origin.db);
        let unavailable = || {
            KernelMiss::new(
                &t.origin.db,
                t.file.file,
                format!(
                    "Context DSA module data not available for system='{system}', backend='{backend}', \
                     version='{version}', architecture='{}', fmha_quant_mode=FMHAQuantMode.{}, \
                     kvcache_quant_mode=KVCacheQuantMode.{}, gemm_quant_mode=GEMMQuantMode.{}, num_heads={heads}, \
                     s={s}, prefix={prefix}, b={b}. Missing silicon data for the requested lookup.",
                    q.arch.name(),
                    q.fmha.name(),
                    q.kv.name(),
                    q.gemm.name()
                ),
            )
        };
        let grid = t.slice((q.fmha, q.kv, q.gemm, q.arch), q.skip_indexer, flashmla_first, "Context", unavailable)?;
        let dims = q.arch.dims();
        let (kv_mem, fmha_mem, fmha_compute) = (q.kv.memory(), q.fmha.memory(), q.fmha.compute());
        let (gemm_mem, gemm_compute) = (q.gemm.memory(), q.gemm.compute());
        let sol = |c: &[i64; 4]| {
            t.sol.dsa_context(
                &dims,
                (c[3], c[2], c[1], c[0]),
                (kv_mem, fmha_mem, fmha_compute, gemm_mem, gemm_compute),
                q.skip_indexer,
            )
        };
        grid.resolve([heads, prefix, s, b], RAW, &sol).map_err(|_| unavailable())
    }
}

impl GenerationDsaTable {
    /// `query_generation_dsa_module(b, s, num_heads, ...)` (6.4).
    pub fn query(&self, b: i64, s: i64, heads: i64, q: DsaQuant) -> std::result::Result<(f64, GridPath), KernelMiss> {
        let t = &self.0;
        let (system, backend, version) = db_parts(&t.origin.db);
        let unavailable = || {
            KernelMiss::new(
                &t.origin.db,
                t.file.file,
                format!(
                    "Generation DSA module data not available for system='{system}', backend='{backend}', \
                     version='{version}', architecture='{}', kv_cache_dtype=KVCacheQuantMode.{}, \
                     gemm_quant_mode=GEMMQuantMode.{}, num_heads={heads}, s={s}, b={b}. Missing silicon data for \
                     the requested lookup.",
                    q.arch.name(),
                    q.kv.name(),
                    q.gemm.name()
                ),
            )
        };
        let grid = t.slice((q.kv, q.gemm, q.arch), q.skip_indexer, false, "Generation", unavailable)?;
        let dims = q.arch.dims();
        let (kv_mem, gemm_mem, gemm_compute) = (q.kv.memory(), q.gemm.memory(), q.gemm.compute());
        let sol = |c: &[i64; 3]| t.sol.dsa_generation(&dims, (c[1], c[2], c[0]), kv_mem, gemm_mem, gemm_compute);
        grid.resolve([heads, b, s], RAW, &sol).map_err(|_| unavailable())
    }
}
