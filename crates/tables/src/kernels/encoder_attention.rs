//! Vision-encoder (ViT) attention: non-causal, MHA, no KV cache
//! (docs/spec/families_hybrid_vl_databases.md 3.6, options.md 4.5).
//! `[attn_dtype][head_dim]` slices, each a grid over (num_heads, seq,
//! batch) blended in sqrt space along seq, as context attention's is; first
//! row wins; no SOL clamp. The spec collects bfloat16 only.

use foldhash::HashMap;

use crate::cache::{DbKey, Slots, TableCache};
use crate::columns::{Col, scan};
use crate::discovery::DataTree;
use crate::error::Result;
use crate::grid::{Grid, GridConfig, GridPath};
use crate::kernels::{DatabaseTable, KernelMiss, Origin, system_constants};
use crate::modes::FmhaQuant;
use crate::op_sol::OpSol;
use crate::sources::{ENCODER_ATTENTION_FILE, plan};

/// Sqrt blend on the seq axis (axis 1 of num_heads, seq, batch), `k_tail = 1`:
/// the spec queries with its context-attention interpolation config.
const CONFIG: GridConfig = GridConfig { sqrt_axis: Some(1), k_tail: 1 };

/// The encoder-attention table of one database.
#[derive(Debug)]
pub struct EncoderAttentionTable {
    origin: Origin,
    slices: HashMap<(FmhaQuant, i64), Grid<3>>,
    sol: OpSol,
}

const ATTN_DTYPE: Col = Col::text("attn_dtype");
const BATCH_SIZE: Col = Col::int("batch_size");
const ISL: Col = Col::int("isl");
const NUM_HEADS: Col = Col::int("num_heads");
const HEAD_DIM: Col = Col::int("head_dim");
const COLUMNS: [Col; 6] = [ATTN_DTYPE, BATCH_SIZE, ISL, NUM_HEADS, HEAD_DIM, Col::LATENCY];

impl DatabaseTable for EncoderAttentionTable {
    fn slots(cache: &TableCache) -> &Slots<(DbKey, bool), Self> {
        &cache.encoder_attention
    }

    fn origin(&self) -> &Origin {
        &self.origin
    }

    fn load(tree: &DataTree, system: &str, backend: &str, version: &str, shared_layer: bool) -> Result<Self> {
        let mut sources = plan(tree, &ENCODER_ATTENTION_FILE, system, backend, version, shared_layer)?;
        let (_, sol, _) = system_constants(tree, system)?;
        let mut slices: HashMap<(FmhaQuant, i64), Grid<3>> = HashMap::default();
        for source in &mut sources {
            let mut added = 0usize;
            scan(tree, source, &COLUMNS, |rows| {
                let (attn_dtypes, batches, isls) = (rows.text(ATTN_DTYPE)?, rows.int(BATCH_SIZE)?, rows.int(ISL)?);
                let (heads, head_dims, latencies) =
                    (rows.int(NUM_HEADS)?, rows.int(HEAD_DIM)?, rows.float(Col::LATENCY)?);
                for i in 0..rows.len() {
                    let fmha: FmhaQuant = attn_dtypes.req(i)?.parse().map_err(|e| rows.error(i, ATTN_DTYPE.name, e))?;
                    let (b, isl, n, head_dim) = (batches.req(i)?, isls.req(i)?, heads.req(i)?, head_dims.req(i)?);
                    if slices.entry((fmha, head_dim)).or_default().insert([n, isl, b], latencies.req(i)?) {
                        added += 1;
                    }
                }
                Ok(())
            })?;
            source.new_keys = added;
        }
        Ok(EncoderAttentionTable {
            origin: Origin { db: format!("{system}/{backend}/{version}"), sources },
            slices,
            sol,
        })
    }
}

impl EncoderAttentionTable {
    /// `query_encoder_attention(b, s, n, head_size, fmha)`: the table's
    /// latency (ms) of one layer's attention over `b` images of `s` patches.
    pub fn query(
        &self,
        b: i64,
        s: i64,
        n: i64,
        head_size: i64,
        fmha: FmhaQuant,
    ) -> Result<(f64, GridPath), KernelMiss> {
        let Some(grid) = self.slices.get(&(fmha, head_size)) else {
            return Err(KernelMiss::new(
                &self.origin.db,
                ENCODER_ATTENTION_FILE.file,
                format!("no data for fmha={fmha}, head_size={head_size}"),
            ));
        };
        let sol = &self.sol;
        let sol_at = |c: &[i64; 3]| sol.encoder_attention(c[2], c[1], c[0], head_size, fmha.compute());
        grid.resolve([n, s, b], CONFIG, &sol_at).map_err(|m| {
            KernelMiss::grid(
                &self.origin.db,
                ENCODER_ATTENTION_FILE.file,
                m,
                &format!("{{'num_heads': {n}, 'seq_len': {s}, 'batch': {b}}}"),
            )
        })
    }
}
