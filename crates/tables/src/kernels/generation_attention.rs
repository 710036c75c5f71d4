//! Generation (decode) attention: `[kv_cache_dtype][kv_key][head_dim]
//! [window_size]` slices, each a grid over (num_heads, batch, s) with
//! `s = isl + step` (docs/spec 4.4). There is no attn_dtype level: rows that
//! differ only in it collapse first-wins. Every stored latency is raised to
//! its own SOL (5.4) after loading. A query is the mean of five grid lookups
//! spread over `[0.9 s, 1.1 s]` (8.3).

use foldhash::HashMap;

use crate::cache::{DbKey, Slots, TableCache};
use crate::columns::{Col, scan};
use crate::discovery::DataTree;
use crate::error::Result;
use crate::grid::{Grid, GridConfig, GridPath};
use crate::kernels::{DatabaseTable, KernelMiss, Origin, system_constants};
use crate::modes::KvQuant;
use crate::op_sol::OpSol;
use crate::sources::{GENERATION_ATTENTION_FILE, plan};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Slice {
    kv: KvQuant,
    kv_key: i64,
    head_dim: i64,
    window: i64,
}

/// The generation-attention table of one database.
#[derive(Debug)]
pub struct GenerationAttentionTable {
    origin: Origin,
    slices: HashMap<Slice, Grid<3>>,
    sol: OpSol,
}

/// One `query_generation_attention(b, s, n, n_kv, kv, window, head)` call.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GenAttnQuery {
    pub b: i64,
    pub s: i64,
    pub n: i64,
    pub n_kv: i64,
    pub kv: KvQuant,
    pub window: i64,
    pub head_size: i64,
}

/// The mean latency and the five lookups behind it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GenAttnResult {
    pub latency: f64,
    pub samples: [(i64, f64, GridPath); 5],
}

impl GenAttnResult {
    /// Distinct paths of the five lookups, sorted by name and joined by `,`
    /// (the goldens' `interp_path`, e.g. `exact_hit,grid_interpolation`).
    pub fn path_names(&self) -> String {
        let mut names: Vec<&str> = self.samples.iter().map(|s| s.2.name()).collect();
        names.sort_unstable();
        names.dedup();
        names.join(",")
    }
}

const KV_CACHE_DTYPE: Col = Col::text("kv_cache_dtype");
const BATCH_SIZE: Col = Col::int("batch_size");
const ISL: Col = Col::int("isl");
const STEP: Col = Col::int("step");
const NUM_HEADS: Col = Col::int("num_heads");
const NUM_KV_HEADS: Col = Col::int("num_key_value_heads");
const HEAD_DIM: Col = Col::int("head_dim");
const WINDOW_SIZE: Col = Col::int("window_size").optional();
const COLUMNS: [Col; 9] =
    [KV_CACHE_DTYPE, BATCH_SIZE, ISL, STEP, NUM_HEADS, NUM_KV_HEADS, HEAD_DIM, WINDOW_SIZE, Col::LATENCY_FLOORED];

/// The five seq points of a decode query at `s` (docs/spec 8.3): `int(s * 0.9)`
/// and `int(s * 1.1)` are float products truncated toward zero, the spacing
/// integer floor division.
pub(crate) fn sample_points(s: i64) -> [i64; 5] {
    let s_min = ((s as f64 * 0.9) as i64).max(1);
    let s_max = ((s as f64 * 1.1) as i64).max(s_min);
    std::array::from_fn(|j| s_min + ((s_max - s_min) * j as i64).div_euclid(4))
}

impl DatabaseTable for GenerationAttentionTable {
    fn slots(cache: &TableCache) -> &Slots<(DbKey, bool), Self> {
        &cache.generation_attention
    }

    fn origin(&self) -> &Origin {
        &self.origin
    }

    fn load(tree: &DataTree, system: &str, backend: &str, version: &str, shared_layer: bool) -> Result<Self> {
        let mut sources = plan(tree, &GENERATION_ATTENTION_FILE, system, backend, version, shared_layer)?;
        let (_, sol, _) = system_constants(tree, system)?;
        let mut slices: HashMap<Slice, Grid<3>> = HashMap::default();
        for source in &mut sources {
            let mut added = 0usize;
            scan(tree, source, &COLUMNS, |rows| {
                let kv_dtypes = rows.text(KV_CACHE_DTYPE)?;
                let (batches, isls, steps) = (rows.int(BATCH_SIZE)?, rows.int(ISL)?, rows.int(STEP)?);
                let (heads, kv_heads, head_dims) = (rows.int(NUM_HEADS)?, rows.int(NUM_KV_HEADS)?, rows.int(HEAD_DIM)?);
                let (windows, latencies) = (rows.int(WINDOW_SIZE)?, rows.float(Col::LATENCY_FLOORED)?);
                for i in 0..rows.len() {
                    let kv: KvQuant = kv_dtypes.req(i)?.parse().map_err(|e| rows.error(i, KV_CACHE_DTYPE.name, e))?;
                    let (b, isl, step) = (batches.req(i)?, isls.req(i)?, steps.req(i)?);
                    let (n, n_kv, head_dim) = (heads.req(i)?, kv_heads.req(i)?, head_dims.req(i)?);
                    let window = windows.get(i)?.unwrap_or(0);
                    let latency = latencies.req(i)?;
                    let kv_key = if n_kv == n { 0 } else { n_kv };
                    let slice = Slice { kv, kv_key, head_dim, window };
                    if slices.entry(slice).or_default().insert([n, b, isl + step], latency) {
                        added += 1;
                    }
                }
                Ok(())
            })?;
            source.new_keys = added;
        }
        // Raise every point to its own SOL (the loader's correction).
        for (slice, grid) in &mut slices {
            let slice = *slice;
            grid.for_each_mut(|&[n, b, s], latency| {
                let n_kv = if slice.kv_key == 0 { n } else { slice.kv_key };
                let floor = sol.generation_attention(
                    b,
                    s,
                    n,
                    n_kv,
                    slice.head_dim,
                    slice.window,
                    slice.kv.memory(),
                    slice.kv == KvQuant::Fp8,
                );
                if floor > *latency {
                    *latency = floor;
                }
            });
        }
        Ok(GenerationAttentionTable {
            origin: Origin { db: format!("{system}/{backend}/{version}"), sources },
            slices,
            sol,
        })
    }
}

impl GenerationAttentionTable {
    /// Mean of the five grid lookups around `q.s` (`sum / 5`, left to right).
    pub fn query(&self, q: &GenAttnQuery) -> Result<GenAttnResult, KernelMiss> {
        let kv_key = if q.n_kv != q.n { q.n_kv } else { 0 };
        let slice = Slice { kv: q.kv, kv_key, head_dim: q.head_size, window: q.window };
        let Some(grid) = self.slices.get(&slice) else {
            return Err(KernelMiss::new(
                &self.origin.db,
                GENERATION_ATTENTION_FILE.file,
                format!(
                    "no data for kv={}, n_kv key={kv_key}, head_size={}, window_size={}",
                    q.kv, q.head_size, q.window
                ),
            ));
        };
        let (sol, head, window, kv_mem, fp8) = (&self.sol, q.head_size, q.window, q.kv.memory(), q.kv == KvQuant::Fp8);
        let sol_at = |c: &[i64; 3]| {
            let n_kv = if kv_key == 0 { c[0] } else { kv_key };
            sol.generation_attention(c[1], c[2], c[0], n_kv, head, window, kv_mem, fp8)
        };
        let points = sample_points(q.s);
        let mut samples = [(0i64, 0f64, GridPath::ExactHit); 5];
        let mut sum = 0.0;
        for (slot, &s_j) in samples.iter_mut().zip(&points) {
            let (latency, path) = grid.resolve([q.n, q.b, s_j], GridConfig::RAW, &sol_at).map_err(|m| {
                KernelMiss::grid(
                    &self.origin.db,
                    GENERATION_ATTENTION_FILE.file,
                    m,
                    &format!("{{'num_heads': {}, 'batch': {}, 'seq_len': {s_j}}}", q.n, q.b),
                )
            })?;
            sum += latency;
            *slot = (s_j, latency, path);
        }
        Ok(GenAttnResult { latency: sum / 5.0, samples })
    }
}

#[cfg(test)]
mod tests {
    use super::sample_points;

    /// Spec 8.3: s = 1025 -> 922, 973, 1024, 1075, 1127.
    #[test]
    fn five_points_around_s() {
        assert_eq!(sample_points(1025), [922, 973, 1024, 1075, 1127]);
        assert_eq!(sample_points(1), [1, 1, 1, 1, 1]);
        // 2 * 0.9 = 1.8 -> 1; 2 * 1.1 = 2.2 -> 2: spacing (1 * j) // 4.
        assert_eq!(sample_points(2), [1, 1, 1, 1, 2]);
    }
}
