//! A model on a database, ready to price many deployments.

use foldhash::HashMap;
use std::sync::Arc;

use aicsql_tables::modes::CommQuant;
use aicsql_tables::step::QuantOverrides;
use aicsql_tables::{
    DataTree, ImageTokens, MemoryInputs, Num, Phase, PhaseSums, StepModel, StepShape, SystemSpec, system_spec,
};

use crate::backend::Backend;
use crate::error::ServingError;
use crate::images::Images;
use crate::memory::{Memory, MemoryAt};
use crate::mtp::NextN;
use crate::parallel::Parallel;

/// The step model plus what serving adds: the system's memory constants and
/// the runtime's policies. Build one per (model, database) and keep it; the
/// tables and op lists it resolves are reused by every estimate.
pub struct Server<'a> {
    pub(crate) step: StepModel<'a>,
    pub(crate) backend: Backend,
    pub(crate) system: SystemSpec,
    pub(crate) model: String,
    pub(crate) version: String,
    /// MTP's average accepted draft tokens per step (0.0: MTP off, or none
    /// accepted): the acceptance projection of every estimate.
    pub(crate) accepted: f64,
    /// Images per request (docs/spec/options.md 4) and, when the model has
    /// an encoder and a request has images, one image's tokens.
    pub(crate) images: Images,
    pub(crate) image_tokens: Option<ImageTokens>,
    /// Static passes already priced: a sweep's estimates share many (the
    /// context attention pass of every batch size, a decode step at batch
    /// `b - 1` that is the next batch's mixed-step decode pass).
    passes: HashMap<PassKey, Arc<PhaseSums>>,
}

/// One static pass: the phase, the step shape and the cached prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct PassKey {
    phase: Phase,
    tp: u32,
    pp: u32,
    dp: u32,
    cp: u32,
    batch: u32,
    isl: u32,
    osl: u32,
    moe_tp: Option<u32>,
    moe_ep: Option<u32>,
    prefix: u32,
    /// Pass 1 of an aggregated mixed step (see `StepModel::mixed_context_sums`).
    mixed: bool,
}

/// Passes kept before the memo starts over: at most ~2 MiB per server (a
/// pass is its ~15 per-name sums), bounded however long a scan runs; a
/// 1,024-point sweep needs about 2,100.
const MAX_PASSES: usize = 4096;

impl Server<'static> {
    /// As [`Server::new`], holding a share of the tree: a server that can be
    /// kept warm (op lists, table handles, priced passes) across calls.
    pub fn shared(
        tree: Arc<DataTree>,
        model: &str,
        system: &str,
        backend: &str,
        version: &str,
        shared_layer: bool,
    ) -> Result<Server<'static>, ServingError> {
        let serving = Backend::from_name(backend)?;
        let step = StepModel::shared(Arc::clone(&tree), model, system, backend, version, shared_layer)?;
        Server::with_step(step, &tree, model, system, serving, version)
    }
}

impl<'a> Server<'a> {
    /// `model` (`Org/Name`) on `system/backend/version`.
    pub fn new(
        tree: &'a DataTree,
        model: &str,
        system: &str,
        backend: &str,
        version: &str,
        shared_layer: bool,
    ) -> Result<Server<'a>, ServingError> {
        let serving = Backend::from_name(backend)?;
        let step = StepModel::new(tree, model, system, backend, version, shared_layer)?;
        Server::with_step(step, tree, model, system, serving, version)
    }

    fn with_step(
        step: StepModel<'a>,
        tree: &DataTree,
        model: &str,
        system: &str,
        backend: Backend,
        version: &str,
    ) -> Result<Server<'a>, ServingError> {
        let (spec, _) = system_spec(tree, system).map_err(|e| ServingError::Step(e.into()))?;
        Ok(Server {
            step,
            backend,
            system: spec,
            model: model.to_string(),
            version: version.to_string(),
            accepted: 0.0,
            images: Images::default(),
            image_tokens: None,
            passes: HashMap::default(),
        })
    }

    /// Forgets the priced passes (after a change of what a pass prices).
    pub(crate) fn clear_memo(&mut self) {
        self.passes.clear();
    }

    /// The same server priced with the caller's quant modes in place of the
    /// checkpoint's (docs/spec/options.md 1; see
    /// [`StepModel::with_quant_overrides`]). The memo starts empty.
    pub fn with_quant_overrides(mut self, overrides: QuantOverrides) -> Result<Self, ServingError> {
        self.step = self.step.with_quant_overrides(overrides)?;
        self.passes.clear();
        Ok(self)
    }

    /// The same server with MTP speculative decoding (docs/spec/options.md
    /// 2): `nextn` draft tokens per step (`NextN::Auto`: the checkpoint's
    /// MTP layers) of which `accepted` are accepted on average; `accepted`
    /// is required and within `[0, nextn]` when the depth is not 0, and
    /// ignored when it is. The memo starts empty.
    pub fn with_mtp(mut self, nextn: NextN, accepted: Option<f64>) -> Result<Self, ServingError> {
        let depth = nextn.resolve(self.step.checkpoint_nextn());
        let accepted = crate::mtp::accepted_tokens(depth, accepted)?;
        self.step = self.step.with_nextn(depth)?;
        self.accepted = accepted;
        self.passes.clear();
        Ok(self)
    }

    /// The MTP draft depth (0: none) and the accepted tokens per step.
    pub fn mtp(&self) -> (u32, f64) {
        (self.step.nextn(), self.accepted)
    }

    /// The communication mode the results are labelled with.
    pub fn comm_quant(&self) -> CommQuant {
        self.step.quant_overrides().comm.unwrap_or(CommQuant::Half)
    }

    /// Another server of the same model and database, for another thread:
    /// the same answers, its own memo.
    pub fn fork(&self) -> Result<Server<'a>, ServingError> {
        Ok(Server {
            step: self.step.fork()?,
            backend: self.backend,
            system: self.system.clone(),
            model: self.model.clone(),
            version: self.version.clone(),
            accepted: self.accepted,
            images: self.images,
            image_tokens: self.image_tokens,
            passes: HashMap::default(),
        })
    }

    /// Runs `f` on every item, on up to `threads` servers (this one and
    /// forks), each taking the next item when it is free; results in item
    /// order.
    pub(crate) fn map_parallel<I: Sync, T: Send>(
        &mut self,
        items: &[I],
        threads: usize,
        f: impl Fn(&mut Server<'a>, &I) -> T + Sync,
    ) -> Result<Vec<T>, ServingError> {
        let threads = threads.min(items.len()).max(1);
        if threads == 1 {
            return Ok(items.iter().map(|item| f(self, item)).collect());
        }
        let mut forks = (1..threads).map(|_| self.fork()).collect::<Result<Vec<_>, _>>()?;
        let next = std::sync::atomic::AtomicUsize::new(0);
        let work = |server: &mut Server<'a>| {
            let mut done = Vec::new();
            loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(item) = items.get(i) else { return done };
                done.push((i, f(server, item)));
            }
        };
        let mut results: Vec<(usize, T)> = std::thread::scope(|scope| {
            let handles: Vec<_> = forks.iter_mut().map(|server| scope.spawn(|| work(server))).collect();
            let mut all = work(self);
            for h in handles {
                match h.join() {
                    Ok(part) => all.extend(part),
                    Err(panic) => std::panic::resume_unwind(panic),
                }
            }
            all
        });
        results.sort_by_key(|(i, _)| *i);
        Ok(results.into_iter().map(|(_, t)| t).collect())
    }

    /// The step model underneath (for per-op breakdowns).
    pub fn step_model(&mut self) -> &mut StepModel<'a> {
        &mut self.step
    }

    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// The database's system (`h200_sxm`).
    pub fn system(&self) -> &str {
        &self.system.system
    }

    /// The database's backend version (`0.19.0`).
    pub fn version(&self) -> &str {
        &self.version
    }

    /// The model (`Org/Name`).
    pub fn model(&self) -> &str {
        &self.model
    }

    /// The step shape of one static pass of a worker at `parallel`.
    pub(crate) fn shape(parallel: &Parallel, batch: u32, isl: u32, osl: u32) -> StepShape {
        StepShape {
            tp: parallel.tp,
            pp: parallel.pp,
            dp: parallel.dp,
            cp: parallel.cp,
            batch,
            isl,
            osl,
            moe_tp: parallel.moe_tp,
            moe_ep: parallel.moe_ep,
        }
    }

    /// The per-name sums of a static pass (context at a cached `prefix`, or
    /// generation), priced once per distinct pass. Misses are not kept.
    pub(crate) fn pass(
        &mut self,
        phase: Phase,
        shape: &StepShape,
        prefix: u32,
        mixed: bool,
    ) -> Result<Arc<PhaseSums>, ServingError> {
        let key = PassKey {
            phase,
            tp: shape.tp,
            pp: shape.pp,
            dp: shape.dp,
            cp: shape.cp,
            batch: shape.batch,
            isl: shape.isl,
            osl: shape.osl,
            moe_tp: shape.moe_tp,
            moe_ep: shape.moe_ep,
            prefix,
            mixed,
        };
        if let Some(sums) = self.passes.get(&key) {
            return Ok(Arc::clone(sums));
        }
        let sums = Arc::new(match phase {
            Phase::Context if mixed => self.step.mixed_context_sums(shape, prefix)?,
            Phase::Context => self.step.context_sums(shape, prefix)?,
            Phase::Generation => self.step.generation_sums(shape)?,
        });
        if self.passes.len() >= MAX_PASSES {
            self.passes.clear();
        }
        self.passes.insert(key, Arc::clone(&sums));
        Ok(sums)
    }

    /// The memory model of one GPU of a worker at `parallel` (`shape` picks
    /// the op list whose weights count).
    pub(crate) fn memory(
        &mut self,
        shape: &StepShape,
        parallel: &Parallel,
        moe_ep: i64,
        at: MemoryAt,
    ) -> Result<Memory, ServingError> {
        let inputs: MemoryInputs = self.step.memory_inputs(shape)?;
        let nccl = self.system.nccl_mem_for(i64::from(parallel.tp.min(8))).ok_or_else(|| {
            ServingError::input(format!(
                "system '{}' has no misc.nccl_mem entry for tp {} (the spec's memory model needs it)",
                self.system.system,
                parallel.tp.min(8)
            ))
        })?;
        let others = self.system.other_mem.ok_or_else(|| {
            ServingError::input(format!(
                "system '{}' has no misc.other_mem (the spec's memory model needs it)",
                self.system.system
            ))
        })?;
        let verified = self.step.nextn() + 1;
        Memory::compute(self.backend, &inputs, parallel, moe_ep, (nccl.as_f64(), others.as_f64()), at, verified)
    }

    /// `gpu.mem_capacity` in bytes.
    pub(crate) fn mem_capacity(&self) -> Result<f64, ServingError> {
        self.system
            .mem_capacity
            .map(Num::as_f64)
            .ok_or_else(|| ServingError::input(format!("system '{}' has no gpu.mem_capacity", self.system.system)))
    }
}
