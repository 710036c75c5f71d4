//! Context parallelism inside the sparse-attention modules (sglang, `cp > 1`,
//! `tp = dp = 1`): DEEPSEEKV32's DSA layer (families_dsa.md 7) and
//! DeepSeek-V4's compressed attention (families_dsv4.md 5). Each prices the
//! busiest rank's module at `ceil(isl / cp)` tokens, swaps the super-linear
//! sub-kernels it contains (indexer logits, top-k) for the rank's share of
//! the full sequence's, and adds the all-gathers that rebuild the KV.

use super::{At, OpValue, Path, Tables, kernel_miss, load_failure};
use crate::kernels::{ByBatch, DatabaseTable, DsaArch, DsaQuant, DsaSparseTable, KernelMiss, dsa_sparse_prefix};
use crate::sources::{DSA_CONTEXT_MODULE_FILE, DSV4_CSA_TOPK_CALIB_FILE, DSV4_PAGED_MQA_FILE};
use crate::step::ops::Op;
use crate::step::types::{Dsv4Attn, Lookup, StepError};

/// The busiest of `cp` ranks' share of `isl` tokens, at least one.
fn per_card(isl: i64, cp: i64) -> i64 {
    ((isl + cp - 1) / cp).max(1)
}

fn miss(at: &At, lookup: Lookup, db: &str, table: &'static str, reason: String) -> StepError {
    StepError::Miss {
        op: (at.name)(),
        lookup: Some(Box::new(lookup)),
        message: KernelMiss::new(db, table, reason).to_string(),
    }
}

impl Tables<'_> {
    /// A context DSA layer over `cp` ranks: the full layers' composition
    /// scaled by the op's count, and with skip-indexer layers (`full_layers
    /// < 1`) theirs scaled too, then mixed (the spec scales before it
    /// mixes here, after it mixes without context parallelism).
    pub(super) fn dsa_context_cp(
        &mut self,
        op: &Op,
        heads: i64,
        quant: DsaQuant,
        full_layers: f64,
        cp: i64,
        at: At,
    ) -> Result<OpValue, StepError> {
        let card = per_card(at.s, cp);
        let lookup = Lookup::ContextDsa { b: at.batch, s: card, prefix: at.prefix, heads, quant, flashmla_kv: true };
        let (full, path) = self.dsa_cp_layer(heads, quant, cp, lookup, at)?;
        let (per_app, counted) = if full_layers >= 1.0 {
            (full, full * op.count)
        } else {
            let skip = DsaQuant { skip_indexer: true, ..quant };
            let skip_lookup =
                Lookup::ContextDsa { b: at.batch, s: card, prefix: at.prefix, heads, quant: skip, flashmla_kv: true };
            let (skipped, _) = self.dsa_cp_layer(heads, skip, cp, skip_lookup, at)?;
            let mixed = full_layers * (full * op.count) + (1.0 - full_layers) * (skipped * op.count);
            (full_layers * full + (1.0 - full_layers) * skipped, mixed)
        };
        Ok(OpValue {
            per_app,
            lookup: Some(lookup),
            path: Some(Path::Grid(path)),
            source: "estimated",
            counted: Some(counted),
        })
    }

    /// One DSA layer of the busiest rank (`ContextDSAModule._query_cp`, unscaled).
    fn dsa_cp_layer(
        &mut self,
        heads: i64,
        q: DsaQuant,
        cp: i64,
        lookup: Lookup,
        at: At,
    ) -> Result<(f64, crate::grid::GridPath), StepError> {
        let (b, isl, prefix) = (at.batch, at.s, at.prefix);
        let card = per_card(isl, cp);
        let (glm5, dsv32);
        let sparse: &DsaSparseTable = match q.arch {
            DsaArch::GlmMoeDsa => {
                glm5 = self.kernel_table(|t| &mut t.glm5_sparse).map_err(|e| load_failure(e, at.name, lookup))?;
                &glm5.0
            }
            DsaArch::DeepseekV32 => {
                dsv32 = self.kernel_table(|t| &mut t.dsv32_sparse).map_err(|e| load_failure(e, at.name, lookup))?;
                &dsv32.0
            }
        };
        let db = sparse.db().to_string();
        let fail = |reason: String| miss(&at, lookup, &db, DSA_CONTEXT_MODULE_FILE.file, reason);
        let kinds = sparse.kinds(heads);
        // Layers that run the indexer need all three sub-kernel tables.
        if !q.skip_indexer {
            let missing: Vec<String> =
                [("mqa", &kinds.mqa), ("topk_last", &kinds.topk_last), ("topk_flat", &kinds.topk_flat)]
                    .into_iter()
                    .filter(|(_, t)| t.is_empty())
                    .map(|(name, _)| format!("'{name}'"))
                    .collect();
            if !missing.is_empty() {
                let p = dsa_sparse_prefix(q.arch);
                return Err(fail(format!(
                    "DSA CP modeling needs sparse tables [{}] for {} (num_heads={heads}); collect {p}_mqa_logits/{p}_topk first.",
                    missing.join(", "),
                    q.arch.name()
                )));
            }
        }
        let table = self.dsa_context().map_err(|e| load_failure(e, at.name, lookup))?;
        let (base, path) = table.query(b, card, prefix, heads, q, true).map_err(|m| kernel_miss(m, at.name, lookup))?;
        // Every sub-kernel is read at the real batch and prefix; the four are
        // looked up even for a skip layer, so an isl beyond the grid misses there too.
        let at_2d = |t: &ByBatch, len: i64| match t.slice(b) {
            Some(steps) => steps.lookup(len, prefix).map_err(|e| fail(e.to_string())),
            None => Ok(None),
        };
        let mqa_full = at_2d(&kinds.mqa, isl)?;
        let mqa_card = at_2d(&kinds.mqa, card)?;
        let last_full = at_2d(&kinds.topk_last, isl)?;
        let flat_card = at_2d(&kinds.topk_flat, card)?;
        let mut latency = base;
        if let (false, Some(mqa_full), Some(mqa_card), Some(last_full), Some(flat_card)) =
            (q.skip_indexer, mqa_full, mqa_card, last_full, flat_card)
        {
            let cpf = cp as f64;
            latency += (mqa_full / cpf - mqa_card) + (last_full / cpf - flat_card);
        }
        // The indexer keys (full layers only) and the compressed KV latent of
        // the whole chunk, gathered over the cp ranks.
        let dims = q.arch.dims();
        let keys =
            if q.skip_indexer { 0.0 } else { self.nccl(cp, "all_gather", b * isl * dims.index_head_dim, at)?.per_app };
        let latent = self.nccl(cp, "all_gather", b * isl * (dims.kv_lora + dims.qk_rope), at)?.per_app;
        latency += keys + latent;
        Ok((latency, path))
    }

    /// A DeepSeek-V4 context attention layer over `at.cp` ranks.
    pub(super) fn dsv4_context_cp(&mut self, attn: Dsv4Attn, at: At) -> Result<OpValue, StepError> {
        let (b, isl, prefix, cp) = (at.batch, at.s, at.prefix, at.cp);
        let card = per_card(isl, cp);
        let d = attn.dims;
        // The base: the plain context module (calibration included) at the
        // busiest rank's tokens.
        let base = self.dsv4_attention(true, attn, At { s: card, cp: 1, ..at })?;
        let (mut latency, lookup) = (base.per_app, Lookup::ContextDsv4 { b, s: card, prefix, attn });
        let all_gather = |tables: &mut Self, elements: i64| -> Result<f64, StepError> {
            Ok(tables.nccl(cp, "all_gather", b * elements, at)?.per_app)
        };
        if d.ratio == 4 && self.float_sequence {
            // The spec's chunk loop over the MQA logits is `range(0, isl,
            // 8192)`, which a float length makes raise: every aggregated
            // mixed step of a context-parallel DeepSeek-V4 fails there.
            return Err(StepError::input(format!(
                "{}: TypeError: 'numpy.float64' object cannot be interpreted as an integer (the spec's mixed \
                 step hands the context-parallel CSA module a float sequence length, {isl}.0, and its MQA chunk \
                 loop cannot range over it)",
                (at.name)()
            )));
        }
        if d.ratio == 4 {
            // CSA: the indexer logits and the top-k of the full sequence,
            // shared over the ranks, replace the rank's own.
            let sparse = self.kernel_table(|t| &mut t.dsv4_cp).map_err(|e| load_failure(e, at.name, lookup))?;
            let db = sparse.db().to_string();
            let mqa_full = sparse.mqa(b, isl, prefix, attn.tp, attn.native_heads);
            let mqa_card = sparse.mqa(b, card, prefix, attn.tp, attn.native_heads);
            let top = |len: i64| {
                sparse
                    .top_last(len, prefix, attn.native_heads, b)
                    .map_err(|e| miss(&at, lookup, &db, DSV4_CSA_TOPK_CALIB_FILE.file, e.to_string()))
            };
            let top_full = top(isl)?;
            let top_card = top(card)?;
            let (Some(mqa_full), Some(mqa_card), Some(top_full), Some(top_card)) =
                (mqa_full, mqa_card, top_full, top_card)
            else {
                return Err(miss(
                    &at,
                    lookup,
                    &db,
                    DSV4_PAGED_MQA_FILE.file,
                    format!(
                        "DeepSeek-V4 CSA CP modeling needs sparse tables (paged_mqa_logits + csa_topk_calib top_last) \
                         at num_heads={}, b={b}; collect dsv4_paged_mqa_logits_module / dsv4_csa_topk_calib first.",
                        attn.native_heads
                    ),
                ));
            };
            let cpf = cp as f64;
            latency += (mqa_full / cpf - mqa_card) + (top_full / cpf - top_card);
            latency += all_gather(self, isl * d.index_head_dim)?;
        } else {
            // HCA (and SWA): the windowed dense KV.
            let window = if d.window != 0 { d.window } else { isl };
            latency += all_gather(self, isl.min(window) * d.head_dim)?;
        }
        if d.ratio != 0 {
            // The compressed KV entries.
            latency += all_gather(self, isl / d.ratio * d.head_dim)?;
        }
        Ok(OpValue { per_app: latency, source: "estimated", ..base })
    }
}
