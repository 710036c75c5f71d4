//! Evaluating one op of a step against a database (docs/spec section 8): the
//! tables it reads are loaded on first use (a step that never reaches an op
//! never needs its table), then shared process-wide.

use std::sync::Arc;

use crate::discovery::DataTree;
use crate::error::{ErrorClass, TablesError};
use crate::gemm::{GemmPlan, GemmTable};
use crate::grid::GridPath;
use crate::kernels::{
    AllReduceTable, ComputeScaleTable, ContextAttentionTable, ContextDsaTable, ContextDsv4Table, ContextMlaModuleTable,
    ContextMlaTable, CtxAttnQuery, CtxMlaQuery, DatabaseTable, DsaQuant, Dsv4CpTable, Dsv4TopkCalib, Dsv32SparseTable,
    EncoderAttentionTable, GdnTable, GenAttnQuery, GenerationAttentionTable, GenerationDsaTable, GenerationDsv4Table,
    GenerationMlaModuleTable, GenerationMlaTable, Glm5SparseTable, KernelMiss, Mamba2Table, MhcTable, MlaBmmTable,
    MoeQuery, MoeShape, MoeTable, NcclTable, RooflineAnswer, ScaleMatrixTable,
};
use crate::modes::{FmhaQuant, MoeQuant};
use crate::op_sol::OpSol;
use crate::quant::GemmQuant;
use crate::sol::GemmSol;
use crate::step::ops::{Op, OpSpec};
use crate::step::types::{Dsv4Attn, Lookup, StepError};
use crate::system::{Num, system_spec};

#[path = "eval_cp.rs"]
mod cp;

/// How an op's table lookup resolved (for the report's `interp_path`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Path {
    Named(&'static str),
    Grid(GridPath),
    /// The five lookups of a decode attention query.
    Grids([GridPath; 5]),
}

impl Path {
    /// Distinct path names, sorted and joined by `,`.
    pub fn describe(&self) -> String {
        match self {
            Path::Named(name) => (*name).to_string(),
            Path::Grid(path) => path.name().to_string(),
            Path::Grids(paths) => {
                let mut names: Vec<&str> = paths.iter().map(|p| p.name()).collect();
                names.sort_unstable();
                names.dedup();
                names.join(",")
            }
        }
    }
}

/// One op's result at one step.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct OpValue {
    /// Latency of one application (ms).
    pub per_app: f64,
    pub lookup: Option<Lookup>,
    pub path: Option<Path>,
    pub source: &'static str,
    /// The op's total when the spec does not compute it as `per_app *
    /// count`: a context-parallel DSA layer mixes its full and skip layers
    /// after scaling each (families_dsa.md 7).
    pub counted: Option<f64>,
}

impl OpValue {
    /// The op's total over its `count` applications.
    pub fn total(&self, count: f64) -> f64 {
        self.counted.unwrap_or(self.per_app * count)
    }

    fn formula(per_app: f64) -> OpValue {
        OpValue { per_app, lookup: None, path: None, source: "empirical", counted: None }
    }
}

/// The database a step runs on, with its tables loaded on demand.
pub(crate) struct Tables<'a> {
    tree: TreeRef<'a>,
    system: String,
    backend: String,
    version: String,
    shared: bool,
    pub sol: OpSol,
    gemm: Vec<(GemmQuant, Arc<GemmTable>)>,
    /// The GEMM ops' `(n, k)` planned on their table, found by linear scan
    /// (a model has a handful of GEMM shapes).
    gemm_plans: Vec<(GemmQuant, GemmPlan)>,
    /// Whether op values carry their interpolation path (a report's rows
    /// show it; totals do not need it).
    pub paths: bool,
    /// The step's sequence length and prefix are floats in the spec: its
    /// aggregated mixed step computes the cached prefix of pass 1 as
    /// `prefix * np.floor(ctx_tokens / isl)` (a numpy float).
    pub float_sequence: bool,
    context: Option<Arc<ContextAttentionTable>>,
    generation: Option<Arc<GenerationAttentionTable>>,
    encoder: Option<Arc<EncoderAttentionTable>>,
    allreduce: Option<Arc<AllReduceTable>>,
    nccl: Option<Arc<NcclTable>>,
    moe: Option<Arc<MoeTable>>,
    compute_scale: Option<Arc<ComputeScaleTable>>,
    scale_matrix: Option<Arc<ScaleMatrixTable>>,
    context_mla: Option<Arc<ContextMlaTable>>,
    generation_mla: Option<Arc<GenerationMlaTable>>,
    mla_bmm: Option<Arc<MlaBmmTable>>,
    mla_context_module: Option<Arc<ContextMlaModuleTable>>,
    mla_generation_module: Option<Arc<GenerationMlaModuleTable>>,
    gdn: Option<Arc<GdnTable>>,
    mamba2: Option<Arc<Mamba2Table>>,
    dsa_context: Option<Arc<ContextDsaTable>>,
    dsa_generation: Option<Arc<GenerationDsaTable>>,
    dsv4_mhc: Option<Arc<MhcTable>>,
    dsv4_context: Option<Arc<ContextDsv4Table>>,
    dsv4_generation: Option<Arc<GenerationDsv4Table>>,
    dsv4_calib: Option<Arc<Dsv4TopkCalib>>,
    glm5_sparse: Option<Arc<Glm5SparseTable>>,
    dsv32_sparse: Option<Arc<Dsv32SparseTable>>,
    dsv4_cp: Option<Arc<Dsv4CpTable>>,
    /// The fp8_static GEMM roofline (its floor), built on first use.
    fp8_static_sol: Option<Arc<GemmSol>>,
}

/// The mounted tree, borrowed or shared: a step model built from an
/// `Arc<DataTree>` owns its handle, so it can outlive the caller's borrow
/// (the SQL functions keep warm models across batches).
#[derive(Clone)]
pub(crate) enum TreeRef<'a> {
    Borrowed(&'a DataTree),
    Shared(Arc<DataTree>),
}

impl std::ops::Deref for TreeRef<'_> {
    type Target = DataTree;

    fn deref(&self) -> &DataTree {
        match self {
            TreeRef::Borrowed(tree) => tree,
            TreeRef::Shared(tree) => tree,
        }
    }
}

/// A MoE dispatch op at attention dp > 1.
#[derive(Clone, Copy)]
struct DpDispatch {
    hidden: i64,
    moe_tp: i64,
    moe_ep: i64,
    dp: i64,
    pre: bool,
    quant: Option<MoeQuant>,
}

/// Where one op evaluation happens: the op's full name (for errors) and
/// the step's token count, batch, sequence length and (context) cached
/// prefix: `s` is the new tokens per request, `s + prefix` the full length.
#[derive(Clone, Copy)]
pub(crate) struct At<'n> {
    pub name: &'n dyn Fn() -> String,
    pub x: i64,
    pub batch: i64,
    pub s: i64,
    pub prefix: i64,
    /// Context-parallel ranks of a context step (1 in generation): the
    /// token-major ops (embedding, elementwise, GEMMs, all-reduce, p2p)
    /// price the busiest rank's `ceil(x / cp)` tokens.
    pub cp: i64,
}

impl At<'_> {
    /// `ceil(v / cp)`: one rank's share of `v` tokens.
    fn per_rank(&self, v: i64) -> i64 {
        if self.cp > 1 { (v + self.cp - 1) / self.cp } else { v }
    }
}

/// A table the database does not have makes the op's lookup miss (the
/// database itself was checked when the step was set up, so a table not
/// found for it is a gap in its data); a corrupt file or a bug is an error.
fn load_failure(e: TablesError, op: &dyn Fn() -> String, lookup: Lookup) -> StepError {
    match e.class() {
        ErrorClass::Miss | ErrorClass::NotFound => {
            StepError::Miss { op: op(), lookup: Some(Box::new(lookup)), message: e.to_string() }
        }
        ErrorClass::Invalid => StepError::Input(e.to_string()),
        ErrorClass::Corrupt | ErrorClass::Internal => StepError::Data(e),
    }
}

fn kernel_miss(miss: KernelMiss, op: &dyn Fn() -> String, lookup: Lookup) -> StepError {
    StepError::Miss { op: op(), lookup: Some(Box::new(lookup)), message: miss.to_string() }
}

/// A table lookup's value.
fn silicon((per_app, path): (f64, GridPath), lookup: Lookup) -> OpValue {
    OpValue { per_app, lookup: Some(lookup), path: Some(Path::Grid(path)), source: "silicon", counted: None }
}

/// A linear-attention kernel's value: the table's, or where it had nothing
/// to anchor the query, the roofline the spec answers with instead of a
/// miss (reported without an interpolation path, source `sol`).
fn roofline_value(answer: RooflineAnswer, lookup: Lookup) -> OpValue {
    match answer {
        RooflineAnswer::Table(latency, path) => silicon((latency, path), lookup),
        RooflineAnswer::Roofline(latency) => {
            OpValue { per_app: latency, lookup: Some(lookup), path: None, source: "sol", counted: None }
        }
    }
}

/// The table in `slot`, loaded by `load` the first time this step needs it
/// (the process-wide cache behind `load` makes later steps cheap too).
fn loaded_once<T>(
    slot: &mut Option<Arc<T>>,
    load: impl FnOnce() -> Result<Arc<T>, TablesError>,
) -> Result<Arc<T>, TablesError> {
    if let Some(t) = slot {
        return Ok(Arc::clone(t));
    }
    let t = load()?;
    *slot = Some(Arc::clone(&t));
    Ok(t)
}

impl<'a> Tables<'a> {
    /// The database `system/backend/version`. Errors when the system has
    /// no usable YAML or the database is unknown (every model has a
    /// bfloat16 GEMM, which this loads up front).
    pub fn new(
        tree: TreeRef<'a>,
        system: &str,
        backend: &str,
        version: &str,
        shared: bool,
    ) -> Result<Tables<'a>, StepError> {
        let sol = tree.cache().op_sol.get(system.to_string(), || {
            let (spec, yaml) = system_spec(&tree, system)?;
            OpSol::new(&spec).map_err(|e| TablesError::document(&yaml, e))
        })?;
        // A database without a GEMM table of its own (its GEMMs only in the
        // shared layer, which is off) is not refused here: each GEMM op
        // misses, as the spec's lookups do, so `on_miss` decides.
        let gemm = match GemmTable::cached(&tree, system, backend, version, GemmQuant::Bfloat16, shared) {
            Ok(bf16) => vec![(GemmQuant::Bfloat16, bf16)],
            Err(e) if e.class() == ErrorClass::Miss => Vec::new(),
            Err(e) => return Err(e.into()),
        };
        Ok(Tables {
            tree,
            system: system.to_string(),
            backend: backend.to_string(),
            version: version.to_string(),
            shared,
            sol: *sol,
            gemm,
            gemm_plans: Vec::new(),
            paths: false,
            float_sequence: false,
            context: None,
            generation: None,
            encoder: None,
            allreduce: None,
            nccl: None,
            moe: None,
            compute_scale: None,
            scale_matrix: None,
            context_mla: None,
            generation_mla: None,
            mla_bmm: None,
            mla_context_module: None,
            mla_generation_module: None,
            gdn: None,
            mamba2: None,
            dsa_context: None,
            dsa_generation: None,
            dsv4_mhc: None,
            dsv4_context: None,
            dsv4_generation: None,
            dsv4_calib: None,
            glm5_sparse: None,
            dsv32_sparse: None,
            dsv4_cp: None,
            fp8_static_sol: None,
        })
    }

    pub fn backend(&self) -> &str {
        &self.backend
    }

    /// The same database on the same tree, with nothing loaded yet (the
    /// process-wide table cache makes loading cheap).
    pub fn fork(&self) -> Result<Tables<'a>, StepError> {
        Tables::new(self.tree.clone(), &self.system, &self.backend, &self.version, self.shared)
    }

    fn gemm_table(&mut self, quant: GemmQuant) -> Result<Arc<GemmTable>, TablesError> {
        if let Some((_, t)) = self.gemm.iter().find(|(q, _)| *q == quant) {
            return Ok(Arc::clone(t));
        }
        let t = GemmTable::cached(&self.tree, &self.system, &self.backend, &self.version, quant, self.shared)?;
        self.gemm.push((quant, Arc::clone(&t)));
        Ok(t)
    }

    pub fn context_attention(&mut self) -> Result<Arc<ContextAttentionTable>, TablesError> {
        let (tree, shared) = (&*self.tree, self.shared);
        let (system, backend, version) = (&self.system, &self.backend, &self.version);
        loaded_once(&mut self.context, || ContextAttentionTable::cached(tree, system, backend, version, shared))
    }

    fn generation_attention(&mut self) -> Result<Arc<GenerationAttentionTable>, TablesError> {
        let (tree, shared) = (&*self.tree, self.shared);
        let (system, backend, version) = (&self.system, &self.backend, &self.version);
        loaded_once(&mut self.generation, || GenerationAttentionTable::cached(tree, system, backend, version, shared))
    }

    fn encoder_attention(&mut self) -> Result<Arc<EncoderAttentionTable>, TablesError> {
        self.kernel_table(|t| &mut t.encoder)
    }

    fn allreduce_table(&mut self) -> Result<Arc<AllReduceTable>, TablesError> {
        let (tree, shared) = (&*self.tree, self.shared);
        let (system, backend, version) = (&self.system, &self.backend, &self.version);
        loaded_once(&mut self.allreduce, || AllReduceTable::cached(tree, system, backend, version, shared))
    }

    fn nccl_table(&mut self) -> Result<Arc<NcclTable>, TablesError> {
        let tree = &*self.tree;
        let system = &self.system;
        loaded_once(&mut self.nccl, || NcclTable::cached(tree, system))
    }

    fn moe_table(&mut self) -> Result<Arc<MoeTable>, TablesError> {
        let (tree, shared) = (&*self.tree, self.shared);
        let (system, backend, version) = (&self.system, &self.backend, &self.version);
        loaded_once(&mut self.moe, || MoeTable::cached(tree, system, backend, version, shared))
    }

    fn compute_scale_table(&mut self) -> Result<Arc<ComputeScaleTable>, TablesError> {
        let (tree, shared) = (&*self.tree, self.shared);
        let (system, backend, version) = (&self.system, &self.backend, &self.version);
        loaded_once(&mut self.compute_scale, || ComputeScaleTable::cached(tree, system, backend, version, shared))
    }

    fn scale_matrix_table(&mut self) -> Result<Arc<ScaleMatrixTable>, TablesError> {
        let (tree, shared) = (&*self.tree, self.shared);
        let (system, backend, version) = (&self.system, &self.backend, &self.version);
        loaded_once(&mut self.scale_matrix, || ScaleMatrixTable::cached(tree, system, backend, version, shared))
    }

    pub fn context_mla(&mut self) -> Result<Arc<ContextMlaTable>, TablesError> {
        self.kernel_table(|t| &mut t.context_mla)
    }

    pub fn context_mla_module(&mut self) -> Result<Arc<ContextMlaModuleTable>, TablesError> {
        self.kernel_table(|t| &mut t.mla_context_module)
    }

    fn generation_mla(&mut self) -> Result<Arc<GenerationMlaTable>, TablesError> {
        self.kernel_table(|t| &mut t.generation_mla)
    }

    fn generation_mla_module(&mut self) -> Result<Arc<GenerationMlaModuleTable>, TablesError> {
        self.kernel_table(|t| &mut t.mla_generation_module)
    }

    fn mla_bmm(&mut self) -> Result<Arc<MlaBmmTable>, TablesError> {
        self.kernel_table(|t| &mut t.mla_bmm)
    }

    fn gdn(&mut self) -> Result<Arc<GdnTable>, TablesError> {
        self.kernel_table(|t| &mut t.gdn)
    }

    fn mamba2(&mut self) -> Result<Arc<Mamba2Table>, TablesError> {
        self.kernel_table(|t| &mut t.mamba2)
    }

    pub fn dsa_context(&mut self) -> Result<Arc<ContextDsaTable>, TablesError> {
        self.kernel_table(|t| &mut t.dsa_context)
    }

    fn dsa_generation(&mut self) -> Result<Arc<GenerationDsaTable>, TablesError> {
        self.kernel_table(|t| &mut t.dsa_generation)
    }

    /// The CSA top-k calibration's selector for a phase (`v1` context, `v2`
    /// decode; families_dsv4.md 4.5), `None` where the database has none.
    fn dsv4_calib(&mut self) -> Result<Arc<Dsv4TopkCalib>, TablesError> {
        self.kernel_table(|t| &mut t.dsv4_calib)
    }

    /// The database's table of kind `T` in the slot `slot` picks, loaded on first use.
    fn kernel_table<T: DatabaseTable>(
        &mut self,
        slot: fn(&mut Self) -> &mut Option<Arc<T>>,
    ) -> Result<Arc<T>, TablesError> {
        if let Some(t) = slot(self) {
            return Ok(Arc::clone(t));
        }
        let t = T::cached(&self.tree, &self.system, &self.backend, &self.version, self.shared)?;
        *slot(self) = Some(Arc::clone(&t));
        Ok(t)
    }

    fn fp8_static_sol(&mut self) -> Result<Arc<GemmSol>, TablesError> {
        let (tree, system) = (&*self.tree, &self.system);
        loaded_once(&mut self.fp8_static_sol, || {
            let (spec, yaml) = crate::system::system_spec(tree, system)?;
            GemmSol::new(&spec, GemmQuant::Fp8Static).map(Arc::new).map_err(|e| TablesError::document(&yaml, e))
        })
    }

    /// One application of `op` at `at`; `subs` are the inner ops of the
    /// list's composite ops.
    pub fn eval(&mut self, op: &Op, subs: &[Op], at: At) -> Result<OpValue, StepError> {
        match op.spec {
            OpSpec::Fallback { primary, fallback } => self.fallback(&subs[primary], &subs[fallback.0..fallback.1], at),
            OpSpec::Overlap { a, b } => self.overlap(&subs[a.0..a.1], &subs[b.0..b.1], at),
            _ => self.leaf(op, at),
        }
    }

    /// An inner op of a composite; a miss names the composite (as the
    /// spec's step does) and the inner op's lookup.
    fn inner(&mut self, op: &Op, at: At) -> Result<(f64, OpValue), StepError> {
        let v = self.leaf(op, at)?;
        Ok((v.total(op.count), v))
    }

    /// `((0.0 + t1) + t2) + ...` over `ops`, with the first lookup.
    fn sum(&mut self, ops: &[Op], at: At) -> Result<(f64, Option<Lookup>), StepError> {
        let (mut total, mut lookup) = (0.0, None);
        for op in ops {
            let (t, v) = self.inner(op, at)?;
            total += t;
            lookup = lookup.or(v.lookup);
        }
        Ok((total, lookup))
    }

    /// The primary's value, or when its lookup misses (any miss: a table
    /// the database lacks, a slice, a shape) the fallback ops' sum. The
    /// decision is taken per evaluation; errors other than misses propagate.
    fn fallback(&mut self, primary: &Op, fallback: &[Op], at: At) -> Result<OpValue, StepError> {
        let (total, lookup) = match self.inner(primary, at) {
            Ok((total, v)) => (total, v.lookup),
            Err(StepError::Miss { .. }) => self.sum(fallback, at)?,
            Err(e) => return Err(e),
        };
        Ok(OpValue { per_app: total, lookup, path: None, source: "silicon", counted: None })
    }

    /// Two streams: `max(a, b)` of their sums (Python's max: `a` on a tie).
    fn overlap(&mut self, a: &[Op], b: &[Op], at: At) -> Result<OpValue, StepError> {
        let (ta, la) = self.sum(a, at)?;
        let (tb, lb) = self.sum(b, at)?;
        Ok(OpValue {
            per_app: if tb > ta { tb } else { ta },
            lookup: la.or(lb),
            path: None,
            source: "mixed",
            counted: None,
        })
    }

    fn leaf(&mut self, op: &Op, at: At) -> Result<OpValue, StepError> {
        let x = at.x;
        let tokens = at.per_rank(x);
        Ok(match op.spec {
            OpSpec::Embedding { hidden, .. } => OpValue::formula(self.sol.mem_op(tokens * hidden * 2)),
            OpSpec::ElementWise { dim_in, dim_out } => {
                OpValue::formula(self.sol.mem_op(tokens * dim_in * 2 + tokens * dim_out * 2))
            }
            OpSpec::FloorSplitElementWise { dim_in, dim_out, split } => {
                let share = x / split;
                OpValue::formula(self.sol.mem_op(share * dim_in * 2 + share * dim_out * 2))
            }
            // One stage hands `tokens * hidden` bf16 values to the next; a
            // single stage (count 0) hands nothing.
            OpSpec::P2P { .. } if op.count == 0.0 => OpValue::formula(0.0),
            OpSpec::P2P { hidden, seq_split } => {
                let moved = if seq_split { tokens } else { x };
                OpValue::formula(self.sol.p2p(moved * hidden * 2))
            }
            OpSpec::CpAllGather { gpus, elements_per_token } => {
                let size = x as f64 * elements_per_token;
                if size.fract() != 0.0 || size >= 9.0e15 {
                    return Err(StepError::input(format!(
                        "{}: the KV all-gather of {size} elements is not a whole number of elements",
                        (at.name)()
                    )));
                }
                self.nccl(gpus, "all_gather", size as i64, at)?
            }
            OpSpec::Gemm { n, k, quant, m_is_batch, low_precision_input } => {
                let m = if m_is_batch { at.per_rank(at.batch) } else { tokens };
                if quant == GemmQuant::Fp8Static {
                    self.fp8_static_gemm(m, n, k, low_precision_input, at)?
                } else {
                    self.gemm(quant, m, n, k, at)?
                }
            }
            OpSpec::ContextAttention { n, n_kv, head_dim, window, kv, fmha, qk_norm } => {
                let query = |s: i64, prefix: i64| CtxAttnQuery {
                    b: at.batch,
                    s,
                    prefix,
                    n,
                    n_kv,
                    kv,
                    fmha,
                    window,
                    head_size: head_dim,
                };
                // Context parallelism (zigzag): rank 0 owns the first and the
                // last of 2 * cp chunks of c tokens; its two attention calls.
                let (first, second) = if at.cp > 1 {
                    let c = ((at.s + 2 * at.cp - 1) / (2 * at.cp)).max(1);
                    (query(c, at.prefix), Some(query(c, at.prefix + at.s - c)))
                } else {
                    (query(at.s, at.prefix), None)
                };
                let lookup = Lookup::ContextAttention {
                    b: first.b,
                    s: first.s,
                    prefix: first.prefix,
                    n,
                    n_kv,
                    kv,
                    fmha,
                    window,
                    head_size: head_dim,
                };
                let table = self.context_attention().map_err(|e| load_failure(e, at.name, lookup))?;
                let (mut a, path) = table.query(&first).map_err(|m| kernel_miss(m, at.name, lookup))?;
                if let Some(second) = second {
                    let (b, _) = table.query(&second).map_err(|m| kernel_miss(m, at.name, lookup))?;
                    a += b;
                }
                // Extras per token (docs/spec 8.2), in the SDK's order of operations.
                let mem = |bytes: i64| self.sol.mem_op(bytes);
                let (q_num, k_num, v_num) = (n * head_dim, n_kv * head_dim, n_kv * head_dim);
                let mut extra = 0.0;
                if qk_norm {
                    let qk_norm_latency = 2.0 * mem(q_num * 2) + 2.0 * mem(k_num * 2);
                    extra += qk_norm_latency * 2.0;
                }
                let rope = 2.0 * mem(q_num * 2 + k_num * 2);
                let kv_write = mem(k_num * fmha.memory()) + mem(v_num * fmha.memory());
                extra += rope + kv_write;
                OpValue {
                    per_app: a + extra * 1.1,
                    lookup: Some(lookup),
                    path: Some(Path::Grid(path)),
                    source: "mixed",
                    counted: None,
                }
            }
            OpSpec::GenerationAttention { n, n_kv, head_dim, window, kv } => {
                let q = GenAttnQuery { b: at.batch, s: at.s, n, n_kv, kv, window, head_size: head_dim };
                let lookup = Lookup::GenerationAttention { b: q.b, s: q.s, n, n_kv, kv, window, head_size: head_dim };
                let table = self.generation_attention().map_err(|e| load_failure(e, at.name, lookup))?;
                let r = table.query(&q).map_err(|m| kernel_miss(m, at.name, lookup))?;
                OpValue {
                    per_app: r.latency,
                    lookup: Some(lookup),
                    path: Some(Path::Grids(r.samples.map(|s| s.2))),
                    source: "silicon",
                    counted: None,
                }
            }
            // The ViT's attention runs in bfloat16 whatever the checkpoint's
            // modes (options.md 4.5), with no RoPE term of its own.
            OpSpec::EncoderAttention { n, head_dim } => {
                let fmha = FmhaQuant::Bfloat16;
                let lookup = Lookup::EncoderAttention { b: at.batch, s: at.s, n, head_size: head_dim, fmha };
                let table = self.encoder_attention().map_err(|e| load_failure(e, at.name, lookup))?;
                let r = table.query(at.batch, at.s, n, head_dim, fmha).map_err(|m| kernel_miss(m, at.name, lookup));
                silicon(r?, lookup)
            }
            OpSpec::AllReduce { tp, hidden } => self.all_reduce(tp, tokens * hidden, at)?,
            OpSpec::MoeDispatch { hidden, moe_tp, moe_ep, dp: 1, cp: 1, .. } => {
                self.all_reduce(moe_tp * moe_ep, x * hidden, at)?
            }
            // SGLang's context parallelism: every rank's tokens gathered for
            // the experts, the results scattered back to their ranks.
            OpSpec::MoeDispatch { hidden, moe_tp, moe_ep, dp: 1, context: true, pre, .. } => {
                self.nccl(moe_tp * moe_ep, if pre { "all_gather" } else { "reduce_scatter" }, x * hidden, at)?
            }
            // A decode step of a context-parallel deployment (HYBRIDMOE,
            // DEEPSEEK): nothing to gather, the experts' output all-reduced.
            OpSpec::MoeDispatch { dp: 1, context: false, pre: true, .. } => OpValue::formula(0.0),
            OpSpec::MoeDispatch { hidden, moe_tp, moe_ep, dp: 1, context: false, pre: false, .. } => {
                self.all_reduce(moe_tp * moe_ep, x * hidden, at)?
            }
            OpSpec::MoeDispatch { hidden, moe_tp, moe_ep, dp, pre, quant, .. } => {
                self.dp_dispatch(DpDispatch { hidden, moe_tp, moe_ep, dp, pre, quant }, x, at)?
            }
            OpSpec::Moe { shape, dp } => self.moe(x * dp, shape, at)?,
            OpSpec::MlaModule { context: true, heads, kv, fmha, gemm } => {
                let q = CtxMlaQuery { b: at.batch, s: at.s, prefix: at.prefix, heads, kv, fmha };
                let lookup = Lookup::ContextMlaModule { b: q.b, s: q.s, prefix: q.prefix, heads, kv, fmha, gemm };
                let table = self.context_mla_module().map_err(|e| load_failure(e, at.name, lookup))?;
                let r = table.query(&q, gemm).map_err(|m| kernel_miss(m, at.name, lookup));
                silicon(r?, lookup)
            }
            OpSpec::MlaModule { context: false, heads, kv, gemm, .. } => {
                let lookup = Lookup::GenerationMlaModule { b: at.batch, s: at.s, heads, kv, gemm };
                let table = self.generation_mla_module().map_err(|e| load_failure(e, at.name, lookup))?;
                let r = table.query(at.batch, at.s, heads, kv, gemm).map_err(|m| kernel_miss(m, at.name, lookup));
                silicon(r?, lookup)
            }
            OpSpec::ContextMla { heads, kv, fmha } => {
                let query = |s: i64, prefix: i64| CtxMlaQuery { b: at.batch, s, prefix, heads, kv, fmha };
                // Context parallelism: the same zigzag as the context
                // attention's, without its per-token extras.
                let (first, second) = if at.cp > 1 {
                    let c = ((at.s + 2 * at.cp - 1) / (2 * at.cp)).max(1);
                    (query(c, at.prefix), Some(query(c, at.prefix + at.s - c)))
                } else {
                    (query(at.s, at.prefix), None)
                };
                let lookup = Lookup::ContextMla { b: first.b, s: first.s, prefix: first.prefix, heads, kv, fmha };
                let table = self.context_mla().map_err(|e| load_failure(e, at.name, lookup))?;
                let (mut latency, path) = table.query(&first).map_err(|m| kernel_miss(m, at.name, lookup))?;
                if let Some(second) = second {
                    latency += table.query(&second).map_err(|m| kernel_miss(m, at.name, lookup))?.0;
                }
                silicon((latency, path), lookup)
            }
            OpSpec::GenerationMla { heads, kv } => {
                let lookup = Lookup::GenerationMla { b: at.batch, s: at.s, heads, kv };
                let table = self.generation_mla().map_err(|e| load_failure(e, at.name, lookup))?;
                silicon(table.query(at.batch, at.s, heads, kv).map_err(|m| kernel_miss(m, at.name, lookup))?, lookup)
            }
            OpSpec::MlaBmm { heads, quant, pre } => {
                let lookup = Lookup::MlaBmm { tokens: at.batch, heads, quant, pre };
                let table = self.mla_bmm().map_err(|e| load_failure(e, at.name, lookup))?;
                silicon(table.query(at.batch, heads, quant, pre).map_err(|m| kernel_miss(m, at.name, lookup))?, lookup)
            }
            OpSpec::Gdn { kernel, shape } => {
                let seq_len = kernel.is_context().then_some(at.s);
                let lookup = Lookup::Gdn { kernel, batch: at.batch, seq_len, shape };
                let table = self.gdn().map_err(|e| load_failure(e, at.name, lookup))?;
                roofline_value(table.query(kernel, at.batch, at.s, &shape), lookup)
            }
            OpSpec::Mamba2 { kernel, shape } => {
                let seq_len = kernel.is_context().then_some(at.s);
                let lookup = Lookup::Mamba2 { kernel, batch: at.batch, seq_len, shape };
                let table = self.mamba2().map_err(|e| load_failure(e, at.name, lookup))?;
                roofline_value(table.query(kernel, at.batch, at.s, &shape), lookup)
            }
            OpSpec::Dsa { context: true, heads, quant, full_layers, cp } if cp > 1 => {
                self.dsa_context_cp(op, heads, quant, full_layers, cp, at)?
            }
            OpSpec::Dsa { context, heads, quant, full_layers, .. } => {
                // The full layers' lookup, and with skip-indexer layers theirs,
                // mixed by the fraction of full layers (families_dsa.md 6.3-6.5).
                let skip = DsaQuant { skip_indexer: true, ..quant };
                let (lookup, skip_lookup) = if context {
                    let l = |quant| Lookup::ContextDsa {
                        b: at.batch,
                        s: at.s,
                        prefix: at.prefix,
                        heads,
                        quant,
                        flashmla_kv: false,
                    };
                    (l(quant), l(skip))
                } else {
                    let l = |quant| Lookup::GenerationDsa { b: at.batch, s: at.s, heads, quant };
                    (l(quant), l(skip))
                };
                let value = |tables: &mut Self, lookup: Lookup, q: DsaQuant| -> Result<(f64, GridPath), StepError> {
                    if context {
                        let table = tables.dsa_context().map_err(|e| load_failure(e, at.name, lookup))?;
                        table
                            .query(at.batch, at.s, at.prefix, heads, q, false)
                            .map_err(|m| kernel_miss(m, at.name, lookup))
                    } else {
                        let table = tables.dsa_generation().map_err(|e| load_failure(e, at.name, lookup))?;
                        table.query(at.batch, at.s, heads, q).map_err(|m| kernel_miss(m, at.name, lookup))
                    }
                };
                let (full, path) = value(self, lookup, quant)?;
                let per_app = if full_layers >= 1.0 {
                    full
                } else {
                    let (skipped, _) = value(self, skip_lookup, skip)?;
                    full_layers * full + (1.0 - full_layers) * skipped
                };
                silicon((per_app, path), lookup)
            }
            OpSpec::Mhc { pre, hidden, hc, iters } => {
                let lookup = Lookup::Mhc { tokens, hidden, hc, iters, pre };
                let table = self.kernel_table(|t| &mut t.dsv4_mhc).map_err(|e| load_failure(e, at.name, lookup))?;
                let r = table.query(tokens, hidden, hc, iters, pre).map_err(|m| kernel_miss(m, at.name, lookup));
                silicon(r?, lookup)
            }
            OpSpec::Dsv4Attention { context, attn } => self.dsv4_attention(context, attn, at)?,
            OpSpec::Fallback { .. } | OpSpec::Overlap { .. } => {
                return Err(StepError::Data(TablesError::Internal(format!(
                    "composite op '{}' nested in another composite",
                    (at.name)()
                ))));
            }
        })
    }

    /// A DeepSeek-V4 attention layer (families_dsv4.md 4.2-4.3): its module
    /// table's value, the CSA layers' top-k calibration delta subtracted.
    fn dsv4_attention(&mut self, context: bool, attn: Dsv4Attn, at: At) -> Result<OpValue, StepError> {
        if context && at.cp > 1 {
            return self.dsv4_context_cp(attn, at);
        }
        let lookup = if context {
            Lookup::ContextDsv4 { b: at.batch, s: at.s, prefix: at.prefix, attn }
        } else {
            Lookup::GenerationDsv4 { b: at.batch, s: at.s, attn }
        };
        let calib = if attn.dims.ratio == 4 {
            Some(self.dsv4_calib().map_err(|e| load_failure(e, at.name, lookup))?)
        } else {
            None
        };
        let r = if context {
            let table = self.kernel_table(|t| &mut t.dsv4_context).map_err(|e| load_failure(e, at.name, lookup))?;
            let v1 = calib.as_ref().and_then(|c| c.v1.as_ref());
            table.query(at.batch, at.s, at.prefix, &attn.dims, v1)
        } else {
            let table = self.kernel_table(|t| &mut t.dsv4_generation).map_err(|e| load_failure(e, at.name, lookup))?;
            let v2 = calib.as_ref().and_then(|c| c.v2.as_ref());
            table.query(at.batch, at.s, &attn.dims, v2)
        };
        Ok(silicon(r.map_err(|m| kernel_miss(m, at.name, lookup))?, lookup))
    }

    fn gemm(&mut self, quant: GemmQuant, m: i64, n: i64, k: i64, at: At) -> Result<OpValue, StepError> {
        let lookup = Lookup::Gemm { m, n, k, quant };
        let table = self.gemm_table(quant).map_err(|e| load_failure(e, at.name, lookup))?;
        let planned = self.gemm_plans.iter().position(|(q, p)| *q == quant && p.n() == n && p.k() == k);
        let plan = match planned {
            Some(i) => &self.gemm_plans[i].1,
            None => {
                self.gemm_plans.push((quant, table.plan(n, k)));
                &self.gemm_plans[self.gemm_plans.len() - 1].1
            }
        };
        let latency = table.latency_planned(plan, m).map_err(|miss| StepError::Miss {
            op: (at.name)(),
            lookup: Some(Box::new(lookup)),
            message: table.miss_message(miss, m, n, k),
        })?;
        Ok(OpValue {
            per_app: latency,
            lookup: Some(lookup),
            path: if self.paths { table.interp_path(m, n, k).map(Path::Named) } else { None },
            source: "silicon",
            counted: None,
        })
    }

    /// A static-FP8 GEMM (families_mla_gptoss_fp8static.md 6): the dynamic
    /// fp8 measurement minus the activation-scale computation, minus the
    /// scale matrix for a low-precision input, never below the GEMM's own
    /// fp8_static roofline: `max(floor, (G - CS) - SM)`.
    fn fp8_static_gemm(
        &mut self,
        m: i64,
        n: i64,
        k: i64,
        low_precision_input: bool,
        at: At,
    ) -> Result<OpValue, StepError> {
        let quant = GemmQuant::Fp8Static;
        let mut v = self.gemm(quant, m, n, k, at)?;
        let lookup = Lookup::ComputeScale { m, k };
        let table = self.compute_scale_table().map_err(|e| load_failure(e, at.name, lookup))?;
        let (cs, _) = table.query(m, k, quant).map_err(|e| kernel_miss(e, at.name, lookup))?;
        let mut latency = v.per_app - cs;
        if low_precision_input {
            let lookup = Lookup::ScaleMatrix { m, k };
            let table = self.scale_matrix_table().map_err(|e| load_failure(e, at.name, lookup))?;
            let (sm, _) = table.query(m, k, quant).map_err(|e| kernel_miss(e, at.name, lookup))?;
            latency -= sm;
        }
        let floor = self.fp8_static_sol().map_err(StepError::Data)?.latency_ms(m, n, k);
        // Python's max(floor, latency): the floor unless latency is larger.
        v.per_app = if latency > floor { latency } else { floor };
        v.source = "estimated";
        Ok(v)
    }

    /// The tensor-parallel all-reduce of `size` elements over `tp` GPUs
    /// (docs/spec 8.4): free for one GPU, NCCL on 72-GPU nodes beyond 4, else the
    /// custom kernel's table.
    fn all_reduce(&mut self, tp: i64, size: i64, at: At) -> Result<OpValue, StepError> {
        if tp <= 1 {
            return Ok(OpValue::formula(0.0));
        }
        if self.sol.gpus_per_node() == 72 && tp > 4 {
            return self.nccl(tp, "all_reduce", size, at);
        }
        let lookup = Lookup::CustomAllReduce { tp, size };
        let table = self.allreduce_table().map_err(|e| load_failure(e, at.name, lookup))?;
        let (latency, path) = table.query(tp, size).map_err(|m| kernel_miss(m, at.name, lookup))?;
        Ok(silicon((latency, path), lookup))
    }

    /// One NCCL collective of `size` elements over `g` GPUs (`query_nccl`
    /// in half precision).
    fn nccl(&mut self, g: i64, op: &'static str, size: i64, at: At) -> Result<OpValue, StepError> {
        let lookup = Lookup::Nccl { g, op, size };
        let table = self.nccl_table().map_err(|e| load_failure(e, at.name, lookup))?;
        let (latency, path) =
            table.query("half", Num::Int(2), g, op, size).map_err(|m| kernel_miss(m, at.name, lookup))?;
        Ok(silicon((latency, path), lookup))
    }

    /// The MoE dispatch with attention data parallelism (`MoEDispatch.query`
    /// of the spec, non-DeepEP paths): the ranks' tokens are gathered before
    /// the experts and scattered back after them, per backend.
    fn dp_dispatch(&mut self, d: DpDispatch, x: i64, at: At) -> Result<OpValue, StepError> {
        let gpus = d.moe_tp * d.moe_ep;
        let attention_tp = gpus / d.dp;
        let volume = x * d.hidden;
        let (gather, scatter) = ("all_gather", "reduce_scatter");
        let spread = volume * d.dp;
        match self.backend.as_str() {
            "trtllm" if self.sol.sm_version() == Some(100) => {
                if d.moe_tp == 1 && self.sol.gpus_per_node() >= 72 {
                    return Err(StepError::input(format!(
                        "{}: trtllm's all-to-all MoE dispatch (SM100 NVL72, attention dp {} > 1, moe_tp 1) is not priced yet",
                        (at.name)(),
                        d.dp
                    )));
                }
                if !d.pre {
                    return self.nccl(gpus, scatter, spread, at);
                }
                // The gathered activations travel quantised: nvfp4 a quarter
                // plus its block scales, fp8 half, else bf16.
                let (x_volume, sf_volume) = match d.quant {
                    Some(MoeQuant::Nvfp4) => (volume as f64 / 4.0, volume as f64 / 4.0 / 8.0),
                    Some(MoeQuant::Fp8 | MoeQuant::Fp8Block) => (volume as f64 / 2.0, 0.0),
                    _ => (volume as f64, 0.0),
                };
                let size = (x_volume + sf_volume) * d.dp as f64;
                if size.fract() != 0.0 {
                    return Err(StepError::input(format!(
                        "{}: the quantised all-gather volume {size} is not a whole number of elements",
                        (at.name)()
                    )));
                }
                self.nccl(gpus, gather, size as i64, at)
            }
            "trtllm" => self.nccl(gpus, if d.pre { gather } else { scatter }, spread, at),
            "vllm" => {
                let mut v = if attention_tp > 1 { self.all_reduce(gpus, volume, at)? } else { OpValue::formula(0.0) };
                let c = self.nccl(gpus, if d.pre { gather } else { scatter }, spread, at)?;
                v.per_app = 0.0 + v.per_app + c.per_app;
                if v.lookup.is_none() {
                    (v.lookup, v.path, v.source) = (c.lookup, c.path, c.source);
                }
                Ok(v)
            }
            "sglang" if attention_tp > 1 => {
                // SGLang's DP attention: shard across the attention tp group,
                // gather across the whole width (and the reverse after).
                let (mut a, b) = if d.pre {
                    (self.nccl(attention_tp, scatter, volume, at)?, self.nccl(gpus, gather, spread, at)?)
                } else {
                    (self.nccl(gpus, scatter, spread, at)?, self.nccl(attention_tp, gather, volume, at)?)
                };
                a.per_app += b.per_app;
                Ok(a)
            }
            "sglang" => self.nccl(gpus, if d.pre { gather } else { scatter }, spread, at),
            other => Err(StepError::input(format!("{}: no MoE dispatch for backend '{other}'", (at.name)()))),
        }
    }

    /// The fused experts for `tokens` tokens (docs/spec 10.3).
    pub fn moe(&mut self, tokens: i64, shape: MoeShape, at: At) -> Result<OpValue, StepError> {
        let lookup = Lookup::Moe { num_tokens: tokens, shape };
        let table = self.moe_table().map_err(|e| load_failure(e, at.name, lookup))?;
        let low_latency = self.backend == "trtllm"
            && shape.quant == MoeQuant::Nvfp4
            && shape.gated
            && tokens <= 128
            && table.has_low_latency(shape.quant);
        let q = MoeQuery { num_tokens: tokens, shape, low_latency };
        let (latency, path) = table.query(&q).map_err(|m| kernel_miss(m, at.name, lookup))?;
        Ok(silicon((latency, path), lookup))
    }
}
