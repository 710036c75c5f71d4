//! Context (prefill) attention: `[attn_dtype][kv_cache_dtype][kv_key]
//! [head_dim][window_size]` slices, each a grid over (num_heads, seq, batch)
//! blended in sqrt space along seq (docs/spec 4.4, 7.1, 8.2). No SOL clamp.

use foldhash::HashMap;

use crate::cache::{DbKey, Slots, TableCache};
use crate::columns::{Col, scan};
use crate::discovery::DataTree;
use crate::error::Result;
use crate::grid::{Grid, GridConfig, GridPath};
use crate::kernels::{DatabaseTable, KernelMiss, Origin, system_constants};
use crate::modes::{FmhaQuant, KvQuant};
use crate::op_sol::OpSol;
use crate::sources::{CONTEXT_ATTENTION_FILE, plan};

/// Sqrt blend on the seq axis (axis 1 of num_heads, seq, batch), `k_tail = 1`.
const CONFIG: GridConfig = GridConfig { sqrt_axis: Some(1), k_tail: 1 };

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Slice {
    fmha: FmhaQuant,
    kv: KvQuant,
    /// 0 when the rows' kv heads equal their heads, else the kv heads.
    kv_key: i64,
    head_dim: i64,
    window: i64,
}

/// The context-attention table of one database.
#[derive(Debug)]
pub struct ContextAttentionTable {
    origin: Origin,
    slices: HashMap<Slice, Grid<3>>,
    /// For each kv dtype, the attn dtypes that have rows under it (FMHA guard, docs/spec 3.2).
    fmha_by_kv: Vec<(KvQuant, Vec<FmhaQuant>)>,
    sol: OpSol,
}

/// One `query_context_attention(b, s, prefix, n, n_kv, kv, fmha, window, head)` call.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CtxAttnQuery {
    pub b: i64,
    pub s: i64,
    pub prefix: i64,
    pub n: i64,
    pub n_kv: i64,
    pub kv: KvQuant,
    pub fmha: FmhaQuant,
    pub window: i64,
    pub head_size: i64,
}

const ATTN_DTYPE: Col = Col::text("attn_dtype");
const KV_CACHE_DTYPE: Col = Col::text("kv_cache_dtype");
const BATCH_SIZE: Col = Col::int("batch_size");
const ISL: Col = Col::int("isl");
const NUM_HEADS: Col = Col::int("num_heads");
const NUM_KV_HEADS: Col = Col::int("num_key_value_heads");
const HEAD_DIM: Col = Col::int("head_dim");
const WINDOW_SIZE: Col = Col::int("window_size").optional();
const COLUMNS: [Col; 9] =
    [ATTN_DTYPE, KV_CACHE_DTYPE, BATCH_SIZE, ISL, NUM_HEADS, NUM_KV_HEADS, HEAD_DIM, WINDOW_SIZE, Col::LATENCY];

impl DatabaseTable for ContextAttentionTable {
    fn slots(cache: &TableCache) -> &Slots<(DbKey, bool), Self> {
        &cache.context_attention
    }

    fn origin(&self) -> &Origin {
        &self.origin
    }

    fn load(tree: &DataTree, system: &str, backend: &str, version: &str, shared_layer: bool) -> Result<Self> {
        let mut sources = plan(tree, &CONTEXT_ATTENTION_FILE, system, backend, version, shared_layer)?;
        let (_, sol, _) = system_constants(tree, system)?;
        let mut slices: HashMap<Slice, Grid<3>> = HashMap::default();
        let mut fmha_by_kv: Vec<(KvQuant, Vec<FmhaQuant>)> = Vec::new();
        for source in &mut sources {
            let mut added = 0usize;
            scan(tree, source, &COLUMNS, |rows| {
                let (attn_dtypes, kv_dtypes) = (rows.text(ATTN_DTYPE)?, rows.text(KV_CACHE_DTYPE)?);
                let (batches, isls) = (rows.int(BATCH_SIZE)?, rows.int(ISL)?);
                let (heads, kv_heads, head_dims) = (rows.int(NUM_HEADS)?, rows.int(NUM_KV_HEADS)?, rows.int(HEAD_DIM)?);
                let (windows, latencies) = (rows.int(WINDOW_SIZE)?, rows.float(Col::LATENCY)?);
                for i in 0..rows.len() {
                    let fmha: FmhaQuant = attn_dtypes.req(i)?.parse().map_err(|e| rows.error(i, ATTN_DTYPE.name, e))?;
                    let kv: KvQuant = kv_dtypes.req(i)?.parse().map_err(|e| rows.error(i, KV_CACHE_DTYPE.name, e))?;
                    let (b, isl, n, n_kv) = (batches.req(i)?, isls.req(i)?, heads.req(i)?, kv_heads.req(i)?);
                    let head_dim = head_dims.req(i)?;
                    let window = windows.get(i)?.unwrap_or(0);
                    let latency = latencies.req(i)?;
                    let kv_key = if n_kv == n { 0 } else { n_kv };
                    let slice = Slice { fmha, kv, kv_key, head_dim, window };
                    if slices.entry(slice).or_default().insert([n, isl, b], latency) {
                        added += 1;
                    }
                    match fmha_by_kv.iter_mut().find(|(k, _)| *k == kv) {
                        Some((_, modes)) if !modes.contains(&fmha) => modes.push(fmha),
                        Some(_) => {}
                        None => fmha_by_kv.push((kv, vec![fmha])),
                    }
                }
                Ok(())
            })?;
            source.new_keys = added;
        }
        Ok(ContextAttentionTable {
            origin: Origin { db: format!("{system}/{backend}/{version}"), sources },
            slices,
            fmha_by_kv,
            sol,
        })
    }
}

impl ContextAttentionTable {
    /// The attn dtypes that have rows under `kv` (empty if none).
    pub fn fmha_modes_for_kv(&self, kv: KvQuant) -> &[FmhaQuant] {
        self.fmha_by_kv.iter().find(|(k, _)| *k == kv).map(|(_, m)| m.as_slice()).unwrap_or(&[])
    }

    /// The table value `A` of docs/spec 8.2 step 1 (without the op's extras).
    pub fn query(&self, q: &CtxAttnQuery) -> Result<(f64, GridPath), KernelMiss> {
        let miss = |reason: String| KernelMiss::new(&self.origin.db, CONTEXT_ATTENTION_FILE.file, reason);
        if q.n_kv > q.n {
            return Err(miss(format!("n_kv must be less than or equal to n (n={}, n_kv={})", q.n, q.n_kv)));
        }
        let full = q.s + q.prefix;
        let kv_key = if q.n == q.n_kv { 0 } else { q.n_kv };
        let slice = Slice { fmha: q.fmha, kv: q.kv, kv_key, head_dim: q.head_size, window: q.window };
        let Some(grid) = self.slices.get(&slice) else {
            return Err(miss(format!(
                "no data for fmha={}, kv={}, n_kv key={kv_key}, head_size={}, window_size={}",
                q.fmha, q.kv, q.head_size, q.window
            )));
        };
        let (sol, kv_mem, compute) = (&self.sol, q.kv.memory(), q.fmha.compute());
        let (head, window) = (q.head_size, q.window);
        let sol_at = |c: &[i64; 3]| {
            let n_kv = if kv_key == 0 { c[0] } else { kv_key };
            sol.context_attention(c[2], c[1], 0, c[0], n_kv, head, window, kv_mem, compute)
        };
        let (latency, path) = grid.resolve([q.n, full, q.b], CONFIG, &sol_at).map_err(|m| {
            KernelMiss::grid(
                &self.origin.db,
                CONTEXT_ATTENTION_FILE.file,
                m,
                &format!("{{'num_heads': {}, 'seq_len': {full}, 'batch': {}}}", q.n, q.b),
            )
        })?;
        // (full^2 - prefix^2) / full^2 on ints: exactly 1.0 at prefix 0.
        let (f, p) = (i128::from(full), i128::from(q.prefix));
        let correction = crate::pymath::int_true_div(f * f - p * p, f * f).unwrap_or(f64::NAN);
        Ok((latency * correction, path))
    }
}
