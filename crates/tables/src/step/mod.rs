//! The engine step (docs/spec sections 1, 9): the latency of one static prefill
//! step (TTFT) or one decode step (TPOT) of a model on a database, summed
//! from its op list in the SDK's order so the totals are bit-identical.
//!
//! [`engine_step`] returns every op's row; [`step_latency`] only the total
//! (same numbers, no rows). A lookup that misses anywhere is an error naming
//! the op and the lookup, never a smaller total.

mod deepseek;
mod dsv32;
mod dsv4;
mod eval;
mod gemma4;
mod gemms;
mod hybrid;
mod model;
mod mtp;
mod nemotron_h;
mod nemotron_nas;
mod ops;
mod quants;
mod qwen35;
mod types;
mod vision;
mod weights;

use std::sync::Arc;

use crate::discovery::DataTree;
use crate::kernels::MoeShape;
use crate::limits::{self, MAX_BATCH, MAX_ISL, MAX_OSL, MAX_PARALLEL, MAX_TOKENS};
use crate::modes::{CommQuant, FmhaQuant, KvQuant};
use crate::step::eval::{At, Tables, TreeRef};
use crate::step::model::Family;
use crate::step::model::{ModelDesc, model_config};
use crate::step::ops::{Op, OpList, op_list};

pub use dsv4::Dsv4KvCache;
pub use gemms::{ModelGemm, model_gemms};
pub use quants::QuantOverrides;
pub use types::{Lookup, OpKind, OpRow, Phase, Quants, RowKind, StepError, StepQuery, StepReport};
pub use vision::{ImageTokens, Vision};

/// Decode steps one generation sample stands for (the SDK's default stride).
pub const GEN_STRIDE: u32 = 32;

/// Distinct op names a list can hold (LLAMA has 14, MOE 13; NEMOTRONNAS
/// repeats 13 names over 158 ops): the per-name sums live on the stack.
const MAX_NAMES: usize = 32;

/// The shape of one step: parallelism, batch and sequence lengths.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StepShape {
    pub tp: u32,
    /// Pipeline stages: every op still counts all layers (the step is one
    /// token's way through the whole pipeline); the hand-offs between
    /// stages are the `p2p` op, `pp - 1` of them.
    pub pp: u32,
    /// Attention data parallelism: `dp` ranks of `tp` GPUs each run
    /// attention on `batch` requests of their own and share the experts.
    pub dp: u32,
    /// Context parallelism (SGLang's all-gather variant, prefill only): the
    /// prefill's tokens are split over `cp` ranks; decode is not split.
    pub cp: u32,
    pub batch: u32,
    pub isl: u32,
    pub osl: u32,
    pub moe_tp: Option<u32>,
    pub moe_ep: Option<u32>,
}

impl StepShape {
    /// Errors for a zero batch or isl and for anything beyond [`limits`].
    fn check(&self) -> Result<(), StepError> {
        for (value, name) in [(self.batch, "batch"), (self.isl, "isl")] {
            if value == 0 {
                return Err(StepError::input(format!("{name} must be at least 1")));
            }
        }
        let parallel = [
            ("tp", Some(self.tp)),
            ("pp", Some(self.pp)),
            ("dp", Some(self.dp)),
            ("cp", Some(self.cp)),
            ("moe_tp", self.moe_tp),
            ("moe_ep", self.moe_ep),
        ];
        let degrees = parallel.iter().filter_map(|&(name, v)| Some((name, u64::from(v?), u64::from(MAX_PARALLEL))));
        [
            ("batch", u64::from(self.batch), u64::from(MAX_BATCH)),
            ("isl", u64::from(self.isl), u64::from(MAX_ISL)),
            ("osl", u64::from(self.osl), u64::from(MAX_OSL)),
            ("batch * isl", u64::from(self.batch) * u64::from(self.isl), MAX_TOKENS),
        ]
        .into_iter()
        .chain(degrees)
        .try_for_each(|(name, value, limit)| limits::check(name, value, limit))
        .map_err(StepError::Input)
    }
}

impl StepQuery {
    pub fn shape(&self) -> StepShape {
        StepShape {
            tp: self.tp,
            pp: 1,
            dp: 1,
            cp: 1,
            batch: self.batch,
            isl: self.isl,
            osl: self.osl,
            moe_tp: self.moe_tp,
            moe_ep: self.moe_ep,
        }
    }
}

/// (phase, [tp, pp, dp, cp], moe_tp, moe_ep): what an op list depends on.
type PrepKey = (Phase, [u32; 4], Option<u32>, Option<u32>);

/// The op list of one (phase, parallelism), built once per [`StepModel`].
struct Prepared {
    quants: Quants,
    ops: Vec<Op>,
    /// The inner ops of the composite ops.
    subs: Vec<Op>,
    /// Each op's entry in the step's per-name sums: ops that share a name
    /// (GPT-OSS's and HYBRIDMOE's attention ops) share one, at the position
    /// of the first (docs/spec 9.1-9.3; families_hybrid_vl_databases.md 1.7).
    slots: Vec<usize>,
    /// The per-name entries' op names (without the phase), in order: one
    /// share per step's `PhaseSums`, not a copy.
    names: Arc<[&'static str]>,
    /// Per op: its value depends on the sequence length (see
    /// [`ops::Op::reads_sequence`]); the others are priced once per
    /// generation pass.
    reads_sequence: Vec<bool>,
    /// The ops' weights (bytes), summed on first use: the memory model
    /// reads them at every point of a sweep, and they depend on the list only.
    weights_bytes: Option<f64>,
    /// Under context parallelism the token-major ops price the busiest
    /// rank's `ceil(x / cp)` tokens; DEEPSEEKV32 splits only inside its own
    /// ops (families_dsa.md 7), so its steps evaluate at cp 1.
    splits_tokens: bool,
    /// Tokens one request runs through a step of this list: MTP's `nextn +
    /// 1` verified tokens in a generation step, else 1.
    tokens_per_request: i64,
}

impl Prepared {
    fn new(quants: Quants, list: OpList) -> Prepared {
        let OpList { ops, subs } = list;
        let mut first: Vec<&'static str> = Vec::new();
        let slots = ops
            .iter()
            .map(|op| match first.iter().position(|b| *b == op.base) {
                Some(i) => i,
                None => {
                    first.push(op.base);
                    first.len() - 1
                }
            })
            .collect();
        let reads_sequence = ops.iter().map(|op| op.reads_sequence(&subs)).collect();
        Prepared {
            quants,
            ops,
            subs,
            slots,
            names: first.into(),
            reads_sequence,
            weights_bytes: None,
            splits_tokens: true,
            tokens_per_request: 1,
        }
    }
}

/// A model on a database, ready to estimate many steps: the model config,
/// the system constants and the tables are resolved once (tables load on
/// first use and are shared process-wide), op lists are built once per
/// phase and parallelism. Not `Sync`: keep one per thread or batch.
pub struct StepModel<'a> {
    /// `Org/Name`, as built.
    model: String,
    tables: Tables<'a>,
    desc: ModelDesc,
    inferred: quants::Inferred,
    /// The modes the caller set instead of the checkpoint's (already in
    /// `inferred`; kept to know which ones no guard may change).
    overrides: QuantOverrides,
    /// The FMHA mode of the checkpoint's own quant fields, before any
    /// family rule (DeepSeek-V4 prices bfloat16 attention math).
    checkpoint_fmha: Option<FmhaQuant>,
    /// MTP draft depth (docs/spec/options.md 2.3): generation ops count
    /// `(nextn + L) / L` times and a decode step verifies `nextn + 1` tokens
    /// per request. 0: no speculative decoding.
    nextn: u32,
    /// The checkpoint's `num_nextn_predict_layers` (what `nextn = 'auto'` means).
    checkpoint_nextn: u32,
    prepared: Vec<Prepared>,
    /// Where each key's list is in `prepared` (a search keeps hundreds).
    prepared_at: foldhash::HashMap<PrepKey, usize>,
    /// Per op of the list being priced: its value when it does not read
    /// the sequence length (reused across calls, so no allocation per step).
    shared: Vec<Option<eval::OpValue>>,
    /// The image encoder's op lists built so far, by (tp, encoder DP).
    encoder_lists: Vec<((u32, bool), Vec<Op>)>,
}

/// One encoder phase to price (docs/spec/options.md 4.6): `batch` requests
/// of `images` images each on a worker of `tp` GPUs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EncoderRun {
    pub tp: u32,
    /// Encoder data parallelism: every rank encodes its share of the images
    /// with the whole ViT (the spec's default); else the ViT is sharded.
    pub encoder_dp: bool,
    pub batch: u32,
    pub images: u32,
    pub tokens: ImageTokens,
    /// The worker's latency correction, applied to each op before the sum
    /// (1.0 in agg, the disagg prefill's 1.1).
    pub correction: f64,
}

impl EncoderRun {
    /// Images the busiest rank encodes: `ceil(batch * images / ranks)`
    /// over the tp ranks under encoder DP, all of them otherwise.
    pub fn images_per_rank(&self) -> i64 {
        let ranks = if self.encoder_dp { i64::from(self.tp) } else { 1 };
        (i64::from(self.batch) * i64::from(self.images) + ranks - 1) / ranks
    }
}

impl StepModel<'static> {
    /// As [`StepModel::new`], holding a share of the tree instead of a
    /// borrow, so the model can be kept (warm op lists and table handles)
    /// for as long as the caller likes.
    pub fn shared(
        tree: Arc<DataTree>,
        model: &str,
        system: &str,
        backend: &str,
        version: &str,
        shared_layer: bool,
    ) -> Result<StepModel<'static>, StepError> {
        StepModel::build(TreeRef::Shared(tree), model, system, backend, version, shared_layer)
    }
}

impl<'a> StepModel<'a> {
    /// `model` (`Org/Name`) on `system/backend/version`. Errors for an
    /// unknown model or database, an unsupported architecture or quantization.
    pub fn new(
        tree: &'a DataTree,
        model: &str,
        system: &str,
        backend: &str,
        version: &str,
        shared_layer: bool,
    ) -> Result<StepModel<'a>, StepError> {
        StepModel::build(TreeRef::Borrowed(tree), model, system, backend, version, shared_layer)
    }

    fn build(
        tree: TreeRef<'a>,
        model: &str,
        system: &str,
        backend: &str,
        version: &str,
        shared_layer: bool,
    ) -> Result<StepModel<'a>, StepError> {
        let cfg = model_config(&tree, model)?;
        let desc = ModelDesc::from_config(&cfg)?;
        let mut inferred = quants::infer(&cfg)?;
        let checkpoint_fmha = inferred.fmha;
        let checkpoint_nextn = mtp::checkpoint_depth(&cfg)?;
        if let Some(v4) = &desc.dsv4 {
            inferred = v4.infer(inferred);
        }
        let tables = Tables::new(tree, system, backend, version, shared_layer)?;
        Ok(StepModel {
            model: model.to_string(),
            tables,
            desc,
            inferred,
            overrides: QuantOverrides::default(),
            checkpoint_fmha,
            nextn: 0,
            checkpoint_nextn,
            prepared: Vec::new(),
            prepared_at: Default::default(),
            shared: Vec::new(),
            encoder_lists: Vec::new(),
        })
    }

    /// The same model priced with the caller's quant modes in place of the
    /// checkpoint's (docs/spec/options.md 1). The DeepSeek-V3.2 / GLM-5
    /// (DSA) and DeepSeek-V4 families resolve their modes by rules of their
    /// own (families_dsa.md 2.1, families_dsv4.md 1.2) that aicsql does not
    /// combine with overrides yet: an override there is refused as input.
    pub fn with_quant_overrides(mut self, overrides: QuantOverrides) -> Result<Self, StepError> {
        if overrides.is_empty() {
            return Ok(self);
        }
        if matches!(self.desc.family, Family::Dsa | Family::Dsv4) {
            return Err(StepError::input(format!(
                "quant overrides are not priced for {} ({:?} family) yet; give none of gemm_quant, moe_quant, \
                 kvcache_quant, fmha_quant, comm_quant",
                self.model, self.desc.family
            )));
        }
        self.inferred = overrides.apply(self.inferred);
        self.overrides = overrides;
        self.prepared.clear();
        self.prepared_at.clear();
        Ok(self)
    }

    /// The same model with MTP speculative decoding of `nextn` draft tokens
    /// per step (docs/spec/options.md 2.3; 0 turns it off). NemotronNas
    /// refuses it, as the spec's constructor does: every step it prices is
    /// then refused (a deployment, not an argument, the spec refuses).
    pub fn with_nextn(mut self, nextn: u32) -> Result<Self, StepError> {
        if nextn == self.nextn {
            return Ok(self);
        }
        limits::check("nextn", u64::from(nextn), u64::from(limits::MAX_NEXTN)).map_err(StepError::Input)?;
        self.nextn = nextn;
        self.prepared.clear();
        self.prepared_at.clear();
        Ok(self)
    }

    /// The MTP draft depth the model is priced with (0: none).
    pub fn nextn(&self) -> u32 {
        self.nextn
    }

    /// The checkpoint's MTP depth, `num_nextn_predict_layers` (0 when it
    /// ships no MTP layers): what the spec's `nextn = 'auto'` resolves to.
    pub fn checkpoint_nextn(&self) -> u32 {
        self.checkpoint_nextn
    }

    /// The quant modes the caller set (empty: the checkpoint's).
    pub fn quant_overrides(&self) -> QuantOverrides {
        self.overrides
    }

    /// Another model of the same checkpoint on the same database, for
    /// another thread (op lists are rebuilt on first use; tables are shared
    /// process-wide).
    pub fn fork(&self) -> Result<StepModel<'a>, StepError> {
        Ok(StepModel {
            model: self.model.clone(),
            tables: self.tables.fork()?,
            desc: self.desc.clone(),
            inferred: self.inferred,
            overrides: self.overrides,
            checkpoint_fmha: self.checkpoint_fmha,
            nextn: self.nextn,
            checkpoint_nextn: self.checkpoint_nextn,
            prepared: Vec::new(),
            prepared_at: Default::default(),
            shared: Vec::new(),
            encoder_lists: Vec::new(),
        })
    }

    /// The checkpoint's image encoder (Qwen3-VL with a `vision_config`).
    pub fn vision(&self) -> Option<Vision> {
        self.desc.vision
    }

    /// The encoder's op list of a worker (built once per (tp, encoder DP));
    /// the spec builds it with the model, so a ViT the worker's tp cannot
    /// shard refuses every estimate of that worker, images or not.
    fn encoder_list(&mut self, tp: u32, encoder_dp: bool) -> Result<Option<usize>, StepError> {
        let Some(vision) = self.desc.vision else { return Ok(None) };
        if let Some(i) = self.encoder_lists.iter().position(|(key, _)| *key == (tp, encoder_dp)) {
            return Ok(Some(i));
        }
        let ops = vision.ops(i64::from(tp), encoder_dp)?;
        self.encoder_lists.push(((tp, encoder_dp), ops));
        Ok(Some(self.encoder_lists.len() - 1))
    }

    /// Checks that the model's encoder (if any) can be built on `tp` GPUs.
    pub fn check_encoder(&mut self, tp: u32, encoder_dp: bool) -> Result<(), StepError> {
        self.encoder_list(tp, encoder_dp).map(|_| ())
    }

    /// The encoder phase's latency in ms (options.md 4.6): each op at the
    /// busiest rank's images (the projector and the all-gather at the
    /// merged tokens, the rest at the patches), times the correction, summed
    /// in list order. 0.0 for a model without an encoder.
    pub fn encoder_latency(&mut self, run: &EncoderRun) -> Result<f64, StepError> {
        let Some(index) = self.encoder_list(run.tp, run.encoder_dp)? else { return Ok(0.0) };
        self.tables.paths = false;
        let batch = run.images_per_rank();
        let (post, pre) = (run.tokens.post_merge, run.tokens.pre_merge);
        let mut total = 0.0;
        for op in &self.encoder_lists[index].1 {
            let s = if op.base.contains("encoder_projector") || op.base.contains("all_gather") { post } else { pre };
            let name = || op.base.to_string();
            let at = At { name: &name, x: batch * s, batch, s, prefix: 0, cp: 1 };
            let v = self.tables.eval(op, &[], at)?;
            total += v.total(op.count) * run.correction;
        }
        Ok(total)
    }

    /// The encoder's weights on one GPU of a worker (bytes, options.md
    /// 4.7): the whole ViT under encoder DP, a shard without it.
    pub fn encoder_weights(&mut self, tp: u32, encoder_dp: bool) -> Result<f64, StepError> {
        let Some(index) = self.encoder_list(tp, encoder_dp)? else { return Ok(0.0) };
        Ok(self.encoder_lists[index].1.iter().fold(0.0, |sum, op| sum + weights::op_weights(op, &[])))
    }

    /// The step's total only: TTFT (context) or TPOT (generation), in ms.
    pub fn latency(&mut self, phase: Phase, shape: &StepShape) -> Result<f64, StepError> {
        let index = self.prepare(phase, shape)?;
        let (prep, tables, shared) = (&self.prepared[index], &mut self.tables, &mut self.shared);
        run(phase, shape, 0, prep, tables, shared, &mut NoRows).map(|(total, _)| total)
    }

    /// The step with every op's row.
    pub fn report(&mut self, phase: Phase, shape: &StepShape) -> Result<StepReport, StepError> {
        let index = self.prepare(phase, shape)?;
        let (prep, tables, shared) = (&self.prepared[index], &mut self.tables, &mut self.shared);
        let mut rows = Vec::new();
        let (total_ms, phase_latency_ms) = run(phase, shape, 0, prep, tables, shared, &mut rows)?;
        Ok(StepReport { phase, rows, total_ms, phase_latency_ms, quants: prep.quants })
    }

    /// The spec's context latency dict at a cached prefix: every op name's
    /// sum at `batch` requests of `isl` tokens of which `prefix` are cached
    /// (the ops see `isl - prefix` new tokens per request).
    pub fn context_sums(&mut self, shape: &StepShape, prefix: u32) -> Result<PhaseSums, StepError> {
        self.context_sums_at(shape, prefix, false)
    }

    /// [`context_sums`](Self::context_sums) as pass 1 of the aggregated
    /// mixed step evaluates it: the spec computes that pass's cached prefix
    /// as a numpy float, so its sequence length is one too, which only
    /// DeepSeek-V4's context-parallel CSA module cannot take (it raises).
    pub fn mixed_context_sums(&mut self, shape: &StepShape, prefix: u32) -> Result<PhaseSums, StepError> {
        self.context_sums_at(shape, prefix, true)
    }

    fn context_sums_at(
        &mut self,
        shape: &StepShape,
        prefix: u32,
        float_sequence: bool,
    ) -> Result<PhaseSums, StepError> {
        if prefix >= shape.isl {
            return Err(StepError::input(format!(
                "isl must be greater than 0 after removing prefix, but got {} (isl {}, prefix {prefix})",
                i64::from(shape.isl) - i64::from(prefix),
                shape.isl
            )));
        }
        let index = self.prepare(Phase::Context, shape)?;
        let (prep, tables, shared) = (&self.prepared[index], &mut self.tables, &mut self.shared);
        tables.float_sequence = float_sequence;
        let acc = phase_sums(Phase::Context, shape, i64::from(prefix), prep, tables, shared, &mut NoRows);
        tables.float_sequence = false;
        Ok(PhaseSums::new(Phase::Context, prep, &acc?))
    }

    /// The spec's generation latency dict: every op name's sum over the
    /// sampled decode steps of `osl - 1` generated tokens, each sample
    /// weighted by the steps it stands for (TPOT is its total over `osl - 1`).
    pub fn generation_sums(&mut self, shape: &StepShape) -> Result<PhaseSums, StepError> {
        let index = self.prepare(Phase::Generation, shape)?;
        let (prep, tables, shared) = (&self.prepared[index], &mut self.tables, &mut self.shared);
        let acc = phase_sums(Phase::Generation, shape, 0, prep, tables, shared, &mut NoRows)?;
        Ok(PhaseSums::new(Phase::Generation, prep, &acc))
    }

    /// The quant modes a phase runs with (the context phase's FMHA after
    /// the data-driven guard).
    pub fn quants(&mut self, phase: Phase, shape: &StepShape) -> Result<Quants, StepError> {
        let index = self.prepare(phase, shape)?;
        Ok(self.prepared[index].quants)
    }

    /// What the serving layer's memory model reads: the context op list's
    /// weights and the model's attention and KV dimensions at `shape`.
    pub fn memory_inputs(&mut self, shape: &StepShape) -> Result<MemoryInputs, StepError> {
        let index = self.prepare(Phase::Context, shape)?;
        let prep = &mut self.prepared[index];
        // weights = 0.0 + each context op's weights, in list order.
        let weights_bytes = *prep
            .weights_bytes
            .get_or_insert_with(|| prep.ops.iter().fold(0.0, |sum, op| sum + weights::op_weights(op, &prep.subs)));
        let d = &self.desc;
        let (kv_elements_per_token, windowed_kv) = weights::kv_elements_per_token(d, i64::from(shape.tp));
        Ok(MemoryInputs {
            family: d.spec_family,
            weights_bytes,
            attention_width: d.heads * d.head_dim,
            hidden: d.hidden,
            layers: d.layers,
            kv_elements_per_token,
            windowed_kv,
            kv_bytes_per_token: d.dsa.map(|dsa| dsa.kv_bytes_per_token(d.layers, prep.quants.kv)),
            dsv4_kv: d.dsv4.map(|v4| v4.kv_cache(d.head_dim, prep.quants.kv)),
            kv_bytes_per_element: prep.quants.kv.memory(),
            experts: d.experts,
            topk: d.topk,
        })
    }

    /// The FMHA mode the checkpoint implies, before any guard or family
    /// rule (what the spec's search labels a decode worker with: its task
    /// infers the modes from the raw config without the architecture, so
    /// DeepSeek-V4's fp8 checkpoint labels its decode workers fp8 although
    /// the step prices bfloat16 attention math).
    pub fn checkpoint_fmha(&self) -> FmhaQuant {
        self.checkpoint_fmha.unwrap_or(FmhaQuant::Bfloat16)
    }

    /// The spec's family name of the model (`LLAMA`, `MOE`, `DEEPSEEK`, ...).
    pub fn spec_family(&self) -> &'static str {
        self.desc.spec_family
    }

    /// Whether the model has experts (its moe_tp / moe_ep mean something).
    pub fn is_moe(&self) -> bool {
        self.desc.is_moe()
    }

    /// The transformer layers (vLLM's dispatch overhead is per layer).
    pub fn layers(&self) -> i64 {
        self.desc.layers
    }

    /// The backend of the database (`trtllm`, `vllm`, `sglang`).
    pub fn backend(&self) -> &str {
        self.tables.backend()
    }

    /// `(moe_tp, moe_ep)` as the spec resolves them at `shape` (one of the
    /// two may be inferred from tp); `None` for a dense model.
    pub fn moe_parallel(&self, shape: &StepShape) -> Result<Option<(i64, i64)>, StepError> {
        if !self.desc.is_moe() {
            return Ok(None);
        }
        let par = self.desc.parallel(shape, self.tables.backend())?;
        Ok(Some((par.moe_tp, par.moe_ep)))
    }

    /// Index of the op list for (phase, parallelism), building it on first use.
    fn prepare(&mut self, phase: Phase, shape: &StepShape) -> Result<usize, StepError> {
        shape.check()?;
        let key = (phase, [shape.tp, shape.pp, shape.dp, shape.cp], shape.moe_tp, shape.moe_ep);
        if let Some(&i) = self.prepared_at.get(&key) {
            return Ok(i);
        }
        if shape.cp > 1 && self.overrides.comm.is_some_and(|c| c != CommQuant::Half) {
            // The spec prices the context-parallel all-gathers in the comm
            // mode; aicsql's keep half (options.md 1.3): no silent answer.
            return Err(StepError::input(
                "comm_quant other than 'half' is not priced with context parallelism (cp > 1) yet",
            ));
        }
        if self.nextn > 0 && self.desc.family == Family::NemotronNas {
            return Err(StepError::Refused(
                "NemotronNas does not support MTP speculative decoding (nextn must be 0)".into(),
            ));
        }
        let par = self.desc.parallel(shape, self.tables.backend())?;
        let modes = match phase {
            Phase::Context => self.context_fmha_modes(),
            Phase::Generation => Vec::new(),
        };
        if phase == Phase::Context
            && self.overrides.fmha == Some(FmhaQuant::Fp8)
            && !modes.is_empty()
            && !modes.contains(&FmhaQuant::Fp8)
        {
            // options.md 1.2 step 4: an explicit fp8 FMHA the context table
            // has no slice for is refused before the model is built.
            return Err(StepError::Refused(format!(
                "fmha_quant_mode=fp8 has no '{}' perf data for this system/backend/version. Use \
                 --fmha-quant-mode bfloat16, or omit --fmha-quant-mode to auto-select it.",
                self.context_op_key()
            )));
        }
        let explicit_fmha = self.overrides.fmha.is_some();
        let mut quants = quants::resolve(self.inferred, phase, self.tables.backend(), &modes, explicit_fmha);
        if self.desc.family == Family::Dsa {
            // Every guard ends at bfloat16 for the DSA models (families_dsa.md 2.1).
            quants.fmha = FmhaQuant::Bfloat16;
        }
        if let Some(v4) = &self.desc.dsv4 {
            // The experts' kernel depends on the GPU generation (families_dsv4.md 1.2).
            quants = v4.quants(quants, self.tables.backend(), self.tables.sol.sm_version());
        }
        self.desc.check_moe_blocks(&par, quants.moe)?;
        let mut list = op_list(&self.desc, &par, &quants, phase);
        if phase == Phase::Generation {
            mtp::scale_generation_counts(&self.desc, self.nextn, &mut list.ops, &mut list.subs);
        }
        let mut prep = Prepared::new(quants, list);
        prep.splits_tokens = self.desc.family != Family::Dsa;
        if phase == Phase::Generation {
            prep.tokens_per_request = i64::from(self.nextn) + 1;
        }
        if prep.names.len() > MAX_NAMES {
            // A builder bug, not a user's: every family has fewer names.
            return Err(StepError::input(format!(
                "{}: the op list has {} distinct op names, more than the step's {MAX_NAMES}",
                self.desc.architecture,
                prep.names.len()
            )));
        }
        self.prepared.push(prep);
        self.prepared_at.insert(key, self.prepared.len() - 1);
        Ok(self.prepared.len() - 1)
    }
}

impl StepModel<'_> {
    /// The FMHA modes the data-driven guard sees under the checkpoint's kv
    /// dtype (families_mla_gptoss_fp8static.md 2.4): the context-attention
    /// table's, or for DEEPSEEK / KIMIK25 off vllm the granular context MLA
    /// and module tables' together. A table the database lacks adds none
    /// (the op that needs it reports the miss itself).
    fn context_fmha_modes(&mut self) -> Vec<FmhaQuant> {
        if self.desc.family == Family::Dsv4 {
            // Every DeepSeek-V4 guard ends at bfloat16 (families_dsv4.md 1.2 rule 3).
            return Vec::new();
        }
        if self.inferred.kv_unset {
            // No kv mode from the checkpoint or the caller: every kv slice's
            // modes together (options.md 1.2 step 4; matters only for an
            // explicit fp8 FMHA).
            let mut modes = Vec::new();
            for kv in KvQuant::ALL {
                modes.extend(self.context_fmha_modes_for(kv));
            }
            modes.sort_unstable();
            modes.dedup();
            return modes;
        }
        self.context_fmha_modes_for(self.inferred.kv)
    }

    /// The op key the data-driven FMHA check reads (options.md 1.2 step 4).
    fn context_op_key(&self) -> &'static str {
        if self.desc.family == Family::Mla && self.tables.backend() != "vllm" {
            "context_mla"
        } else {
            "context_attention"
        }
    }

    fn context_fmha_modes_for(&mut self, kv: KvQuant) -> Vec<FmhaQuant> {
        if self.desc.family == Family::Mla && self.tables.backend() != "vllm" {
            let mut modes = self.tables.context_mla().map(|t| t.fmha_modes_for_kv(kv)).unwrap_or_default();
            modes.extend(self.tables.context_mla_module().map(|t| t.fmha_modes_for_kv(kv)).unwrap_or_default());
            modes.sort_unstable();
            modes.dedup();
            return modes;
        }
        self.tables.context_attention().map(|t| t.fmha_modes_for_kv(kv).to_vec()).unwrap_or_default()
    }
}

/// Where rows go: nowhere (totals only) or a report.
trait Sink {
    const ROWS: bool;
    fn push(&mut self, row: OpRow);
}

struct NoRows;

impl Sink for NoRows {
    const ROWS: bool = false;
    fn push(&mut self, _row: OpRow) {}
}

impl Sink for Vec<OpRow> {
    const ROWS: bool = true;
    fn push(&mut self, row: OpRow) {
        Vec::push(self, row);
    }
}

/// The report's quant label of an op.
fn quant_label(op: &Op) -> String {
    use ops::OpSpec;
    match op.spec {
        OpSpec::Embedding { .. } | OpSpec::ElementWise { .. } | OpSpec::FloorSplitElementWise { .. } => {
            "bfloat16(act)".into()
        }
        OpSpec::Gemm { quant, .. } => quant.name().into(),
        OpSpec::ContextAttention { fmha, kv, .. } => format!("fmha={fmha},kv={kv}"),
        OpSpec::GenerationAttention { kv, .. } => format!("kv={kv}"),
        OpSpec::EncoderAttention { .. } => "fmha=bfloat16".into(),
        OpSpec::AllReduce { .. } => Quants::COMM.into(),
        OpSpec::P2P { .. } => String::new(),
        OpSpec::CpAllGather { .. } => Quants::COMM.into(),
        OpSpec::Moe { shape: MoeShape { quant, .. }, .. } | OpSpec::MoeDispatch { quant: Some(quant), .. } => {
            quant.name().into()
        }
        OpSpec::MoeDispatch { quant: None, .. } => "None".into(),
        OpSpec::MlaModule { fmha, kv, gemm, .. } => format!("fmha={fmha},kv={kv},gemm={gemm}"),
        OpSpec::ContextMla { fmha, kv, .. } => format!("fmha={fmha},kv={kv}"),
        OpSpec::GenerationMla { kv, .. } => format!("kv={kv}"),
        OpSpec::MlaBmm { quant, .. } => quant.name().into(),
        // GDN kernels ignore every quant mode.
        OpSpec::Gdn { .. } | OpSpec::Mamba2 { .. } => String::new(),
        // As the spec reports the DSA and DeepSeek-V4 modules: no quant label.
        OpSpec::Dsa { .. } | OpSpec::Mhc { .. } | OpSpec::Dsv4Attention { .. } => String::new(),
        // As the spec reports them: a composite has no quant of its own.
        OpSpec::Fallback { .. } | OpSpec::Overlap { .. } => String::new(),
    }
}

/// The spec's latency dict of one static phase: each op name's sum, in the
/// order names first appear (docs/spec 9.1-9.3).
#[derive(Debug, Clone, PartialEq)]
pub struct PhaseSums {
    pub phase: Phase,
    names: Arc<[&'static str]>,
    values: Vec<f64>,
}

impl PhaseSums {
    fn new(phase: Phase, prep: &Prepared, acc: &[f64; MAX_NAMES]) -> PhaseSums {
        PhaseSums { phase, names: Arc::clone(&prep.names), values: acc[..prep.names.len()].to_vec() }
    }

    /// `(name without the phase prefix, sum)` in the dict's order.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, f64)> + '_ {
        self.names.iter().copied().zip(self.values.iter().copied())
    }

    /// The sum of the ops named `base` (`attention` for `context_attention`).
    pub fn get(&self, base: &str) -> Option<f64> {
        self.iter().find(|(name, _)| *name == base).map(|(_, v)| v)
    }

    /// `0.0 + each entry`, in order: the phase latency.
    pub fn total(&self) -> f64 {
        self.values.iter().fold(0.0, |sum, v| sum + v)
    }

    /// `0.0 + each entry * scale`, in order: the phase latency after the
    /// spec's per-op latency correction.
    pub fn scaled_total(&self, scale: f64) -> f64 {
        self.values.iter().fold(0.0, |sum, v| sum + v * scale)
    }
}

/// The inputs of the serving layer's memory model (one worker's GPU).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MemoryInputs {
    /// The spec's family name (`LLAMA`, `MOE`, ...), which picks the
    /// backend's activation coefficients.
    pub family: &'static str,
    /// The context op list's weights in bytes, summed in list order.
    pub weights_bytes: f64,
    /// `num_heads * head_size` (all heads, not per GPU).
    pub attention_width: i64,
    /// The residual hidden size.
    pub hidden: i64,
    pub layers: i64,
    /// KV-cache elements one token keeps on one GPU, over all layers.
    pub kv_elements_per_token: i64,
    /// The part of them whose layers keep at most a window of tokens
    /// (Gemma 4's sliding-window layers); `None` for every other family.
    pub windowed_kv: Option<WindowedKv>,
    /// KV-cache bytes one token keeps over all layers where the family
    /// sizes them itself (DEEPSEEKV32: latent, rope and indexer key,
    /// families_dsa.md 8); `None` for the element-based families.
    pub kv_bytes_per_token: Option<i64>,
    /// DEEPSEEKV4's per-layer-kind cache (window, compressed entries,
    /// compressor and indexer state; families_dsv4.md 7.1); `None` elsewhere.
    pub dsv4_kv: Option<Dsv4KvCache>,
    /// Bytes per KV-cache element of the phase's kv quant.
    pub kv_bytes_per_element: i64,
    pub experts: i64,
    pub topk: i64,
}

/// KV-cache elements per token of the layers that keep at most `window`
/// tokens (families_qwen35_gemma4.md 9.1-9.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowedKv {
    pub elements_per_token: i64,
    /// Tokens a windowed layer keeps (0: no cap).
    pub window: i64,
}

impl MemoryInputs {
    /// KV-cache bytes of one sequence of `tokens` (negative counts as 0):
    /// every layer's elements times the tokens it keeps, an exact integer
    /// sum converted once (docs/spec families_qwen35_gemma4.md 9.2); the base
    /// model's `tokens * bytes * elements` otherwise.
    pub fn kv_bytes_per_sequence(&self, tokens: f64) -> f64 {
        if let Some(cache) = self.dsv4_kv {
            return cache.bytes_per_sequence(tokens);
        }
        let tokens = tokens.max(0.0);
        if let Some(per_token) = self.kv_bytes_per_token {
            return tokens * per_token as f64;
        }
        let bytes = self.kv_bytes_per_element as f64;
        match self.windowed_kv {
            None => tokens * bytes * self.kv_elements_per_token as f64,
            Some(WindowedKv { elements_per_token, window }) => {
                let kept = if window > 0 { tokens.min(window as f64) } else { tokens };
                let full = self.kv_elements_per_token - elements_per_token;
                // Integer-valued products below 2^53: exact, as the spec's ints.
                (elements_per_token as f64 * bytes) * kept + (full as f64 * bytes) * tokens
            }
        }
    }
}

/// Runs the step; returns `(total_ms, phase_latency_ms)`.
fn run<S: Sink>(
    phase: Phase,
    q: &StepShape,
    cached: i64,
    prep: &Prepared,
    tables: &mut Tables,
    shared: &mut Vec<Option<eval::OpValue>>,
    sink: &mut S,
) -> Result<(f64, f64), StepError> {
    let acc = phase_sums(phase, q, cached, prep, tables, shared, sink)?;
    let latency = acc[..prep.names.len()].iter().fold(0.0, |sum, v| sum + v);
    match phase {
        Phase::Context => Ok((latency, latency)),
        Phase::Generation => {
            let tpot = if q.osl <= 1 { 0.0 } else { latency / f64::from(q.osl - 1) };
            Ok((tpot, latency))
        }
    }
}

/// The per-name sums of a phase (rows to `sink`); `cached` is the context
/// phase's prefix.
fn phase_sums<S: Sink>(
    phase: Phase,
    q: &StepShape,
    cached: i64,
    prep: &Prepared,
    tables: &mut Tables,
    shared: &mut Vec<Option<eval::OpValue>>,
    sink: &mut S,
) -> Result<[f64; MAX_NAMES], StepError> {
    let prefix = phase.prefix();
    tables.paths = S::ROWS;
    // A generation step of MTP verifies `nextn + 1` tokens per request: the
    // spec runs it as a batch that many times larger (options.md 2.3 item 3).
    let (batch, isl) = (i64::from(q.batch) * prep.tokens_per_request, i64::from(q.isl));
    let row = |index: usize, op: &Op, v: &eval::OpValue, total: f64| OpRow {
        row_kind: RowKind::Op,
        op_index: index as i32,
        op_name: format!("{prefix}_{}", op.base),
        op_kind: Some(op.kind),
        count: Some(op.count),
        quant: quant_label(op),
        lookup: v.lookup,
        interp_path: v.path.map(|p| p.describe()),
        // The SDK reports per-application latency as the op's result over its
        // count (not the value before the multiplication: they differ in the
        // last bit for counts like 80).
        latency_ms: Some(if op.count != 0.0 { total / op.count } else { v.per_app }),
        total_ms: total,
        weighted_total_ms: total,
        source: v.source,
        gen_step_index: None,
        gen_s: None,
        gen_repeat: None,
    };
    match phase {
        Phase::Context => {
            // acc[name] = 0.0 + each op of that name, in list order; TTFT is
            // the sum of the entries in first-appearance order.
            let s = isl - cached;
            let x = batch * s;
            let mut acc = [0.0f64; MAX_NAMES];
            for (index, op) in prep.ops.iter().enumerate() {
                let name = || format!("{prefix}_{}", op.base);
                let v = tables.eval(
                    op,
                    &prep.subs,
                    At {
                        name: &name,
                        x,
                        batch,
                        s,
                        prefix: cached,
                        cp: if prep.splits_tokens { i64::from(q.cp) } else { 1 },
                    },
                )?;
                let total = v.total(op.count);
                acc[prep.slots[index]] += total;
                if S::ROWS {
                    sink.push(row(index, op, &v, total));
                }
            }
            Ok(acc)
        }
        Phase::Generation => {
            // Per sampled step, step[name] = 0.0 + each op of that name; then
            // gen[name] += step[name] * repeat over the samples in order, and
            // the per-name sums in first-appearance order (docs/spec 9.3).
            let mut acc = [0.0f64; MAX_NAMES];
            // The ops that do not read `s` give the same value at every
            // sample (same inputs, same arithmetic): priced at the first.
            shared.clear();
            shared.resize(prep.ops.len(), None);
            let decode_steps = q.osl.saturating_sub(1);
            for i in (0..decode_steps).step_by(GEN_STRIDE as usize) {
                let repeat = GEN_STRIDE.min(decode_steps - i);
                let s = isl + i64::from(i) + 1;
                let mut step = [0.0f64; MAX_NAMES];
                // The report's per-step total: the op rows' plain sum.
                let mut step_total = 0.0;
                for (index, op) in prep.ops.iter().enumerate() {
                    let v = match shared[index] {
                        Some(v) => v,
                        None => {
                            let name = || format!("{prefix}_{}", op.base);
                            let at = At { name: &name, x: batch, batch, s, prefix: 0, cp: 1 };
                            let v = tables.eval(op, &prep.subs, at)?;
                            if !prep.reads_sequence[index] {
                                shared[index] = Some(v);
                            }
                            v
                        }
                    };
                    let total = v.total(op.count);
                    step_total += total;
                    step[prep.slots[index]] += total;
                    if S::ROWS {
                        let mut r = row(index, op, &v, total);
                        r.weighted_total_ms = total * f64::from(repeat);
                        (r.gen_step_index, r.gen_s, r.gen_repeat) = (Some(i), u32::try_from(s).ok(), Some(repeat));
                        sink.push(r);
                    }
                }
                for (slot, value) in step[..prep.names.len()].iter().enumerate() {
                    acc[slot] += value * f64::from(repeat);
                }
                if S::ROWS {
                    sink.push(OpRow {
                        row_kind: RowKind::GenStepTotal,
                        op_index: -1,
                        op_name: "__gen_step_total__".into(),
                        op_kind: None,
                        count: None,
                        quant: String::new(),
                        lookup: None,
                        interp_path: None,
                        latency_ms: None,
                        total_ms: step_total,
                        weighted_total_ms: step_total * f64::from(repeat),
                        source: "",
                        gen_step_index: Some(i),
                        gen_s: u32::try_from(s).ok(),
                        gen_repeat: Some(repeat),
                    });
                }
            }
            Ok(acc)
        }
    }
}

/// The engine step with every op's row (docs/spec 13's row layout).
pub fn engine_step(tree: &DataTree, q: &StepQuery) -> Result<StepReport, StepError> {
    StepModel::new(tree, &q.model, &q.system, &q.backend, &q.version, q.shared_layer)?.report(q.phase, &q.shape())
}

/// The step's total only: TTFT (context) or TPOT (generation), in ms. Same
/// numbers as [`engine_step`], without building rows.
pub fn step_latency(tree: &DataTree, q: &StepQuery) -> Result<f64, StepError> {
    StepModel::new(tree, &q.model, &q.system, &q.backend, &q.version, q.shared_layer)?.latency(q.phase, &q.shape())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn worked_example(phase: Phase) -> StepQuery {
        StepQuery {
            model: "Qwen/Qwen3-32B-FP8".into(),
            system: "h200_sxm".into(),
            backend: "vllm".into(),
            version: "0.19.0".into(),
            phase,
            tp: 8,
            batch: 1,
            isl: 1024,
            osl: 128,
            moe_tp: None,
            moe_ep: None,
            shared_layer: true,
        }
    }

    /// Spec section 12: TTFT 24.74004986586315 ms, TPOT 7.121815664339327 ms.
    #[test]
    fn worked_example_of_the_spec() {
        let tree = crate::test_data::tree();
        let ctx = engine_step(tree, &worked_example(Phase::Context)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(ctx.total_ms, 24.74004986586315);
        assert_eq!(ctx.phase_latency_ms, ctx.total_ms);
        assert_eq!(
            (ctx.quants.gemm, ctx.quants.kv, ctx.quants.fmha),
            (crate::quant::GemmQuant::Fp8Block, crate::modes::KvQuant::Fp8, crate::modes::FmhaQuant::Bfloat16)
        );
        let gen_q = worked_example(Phase::Generation);
        let generation = engine_step(tree, &gen_q).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(generation.phase_latency_ms, 904.4705893710945);
        assert_eq!(generation.total_ms, 7.121815664339327);
        let fast = step_latency(tree, &gen_q).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(fast.to_bits(), generation.total_ms.to_bits());
    }

    #[test]
    fn bad_input_is_an_error_naming_it() {
        let tree = crate::test_data::tree();
        let mut q = worked_example(Phase::Context);
        q.tp = 3;
        let err = step_latency(tree, &q).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err.contains("not divisible by tp 3"), "{err}");
        q.tp = 4;
        q.model = "Qwen/Qwen3-30B-A3B".into();
        let err = step_latency(tree, &q).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err.contains("moe_tp"), "{err}");
        q.moe_ep = Some(3);
        let err = step_latency(tree, &q).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err.contains("not divisible by moe_ep 3"), "{err}");
        q.model = "MiniMaxAI/MiniMax-M3".into();
        let err = step_latency(tree, &q).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err.contains("unsupported architecture MiniMaxM3ForCausalLM"), "{err}");
    }

    /// trtllm nvfp4 MoE at <= 128 tokens reads the low-latency kernel's rows,
    /// and the main table's where the low-latency kernel has no such slice
    /// (here moe_ep 1; families_mla_gptoss_fp8static.md 5.1). The value is
    /// the Python path's (found by the parity fuzz when the fallback was missing).
    #[test]
    fn low_latency_moe_falls_back_to_the_main_table() {
        let tree = crate::test_data::tree();
        let mut q = worked_example(Phase::Generation);
        (q.model, q.system, q.backend, q.version) =
            ("nvidia/Kimi-K2.5-NVFP4".into(), "b200_sxm".into(), "trtllm".into(), "1.3.0rc10".into());
        (q.tp, q.batch, q.isl, q.osl, q.moe_ep) = (1, 1, 60, 103, Some(1));
        let v = step_latency(tree, &q).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(v, 15.475124920870003);
    }

    /// Llama-4-Scout on h200 vLLM 0.19.0 fails at its first MoE lookup (docs/spec 10.4).
    #[test]
    fn llama4_fails_at_the_moe_lookup() {
        let tree = crate::test_data::tree();
        let mut q = worked_example(Phase::Context);
        q.model = "meta-llama/Llama-4-Scout-17B-16E-Instruct".into();
        q.tp = 4;
        q.moe_tp = Some(1);
        q.moe_ep = Some(4);
        match step_latency(tree, &q) {
            Err(StepError::Miss { op, lookup: Some(lookup), .. }) => {
                assert_eq!(op, "context_global_moe");
                assert_eq!(lookup.method(), "query_moe");
                let args = lookup.args_json();
                assert!(
                    args.contains(
                        r#""num_tokens": 1024, "hidden_size": 5120, "inter_size": 8192, "topk": 1, "num_experts": 16"#
                    ),
                    "{args}"
                );
                assert!(args.contains(r#""workload_distribution": "power_law_1.01""#), "{args}");
            }
            other => panic!("{other:?}"),
        }
    }
}
