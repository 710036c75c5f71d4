//! The disaggregated estimate: prefill workers and decode workers priced
//! apart by static passes (with the spec's latency corrections), their rates
//! matched, the whole reported at three decimals (`run_disagg` of the spec).
//!
//! The spec builds each worker's row as a pandas frame and rounds it
//! (`DataFrame.round(3)`, numpy's rounding) before the rate matching reads
//! it, then rounds the result again; both roundings are reproduced here, in
//! the same places, so the numbers are equal, not merely close.

use aicsql_tables::pymath::np_round;
use aicsql_tables::{Phase, Quants, StepShape};

use crate::error::ServingError;
use crate::memory::{Memory, MemoryAt};
use crate::parallel::{Label, Parallel};
use crate::server::Server;

/// The spec's latency correction of prefill (context) and decode
/// (generation) workers in disagg (`cli/api.py`).
const PREFILL_LATENCY_CORRECTION: f64 = 1.1;
const DECODE_LATENCY_CORRECTION: f64 = 1.08;
/// Rate matching: prefill pipeline bubbles and decode under-saturation.
const PREFILL_DEGRADATION: f64 = 0.9;
const DECODE_DEGRADATION: f64 = 0.92;
/// TTFT of an autoscaled prefill pool.
const TTFT_CORRECTION: f64 = 1.8;

fn r3(x: f64) -> f64 {
    np_round(x, 3)
}

/// One disaggregated deployment to price.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DisaggQuery {
    pub prefill: Parallel,
    pub prefill_batch: u32,
    pub prefill_workers: u32,
    pub decode: Parallel,
    pub decode_batch: u32,
    pub decode_workers: u32,
    pub isl: u32,
    pub osl: u32,
    pub prefix: u32,
}

/// One side of a disaggregated deployment, as the spec's row reports it.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerEstimate {
    pub parallel: Parallel,
    pub moe_tp: Option<i64>,
    pub moe_ep: Option<i64>,
    pub bs: u32,
    pub global_bs: u64,
    pub workers: u32,
    /// Requests per second of one worker (3 decimals).
    pub seq_per_s_per_worker: f64,
    /// GiB per GPU (3 decimals).
    pub memory_gib: f64,
    /// The unrounded breakdown behind `memory_gib`.
    pub memory: Memory,
    pub quants: Quants,
    /// A prefill worker's image encoder: its phase (ms, corrected) and
    /// memory (GiB), at 3 decimals; 0.0 on a decode worker and without
    /// images (options.md 4.6, 4.7).
    pub encoder_ms: f64,
    pub encoder_memory_gib: f64,
}

impl WorkerEstimate {
    /// The spec's `(p)parallel` / `(d)parallel`: the label with the resolved MoE widths.
    pub fn label(&self) -> Label {
        self.parallel.label(self.moe_tp, self.moe_ep)
    }
}

/// The spec's result dict of `cli_estimate(mode="disagg")`: every value at
/// the spec's 3 decimals.
#[derive(Debug, Clone, PartialEq)]
pub struct DisaggEstimate {
    pub isl: u32,
    pub osl: u32,
    pub prefix: u32,
    pub concurrency: u64,
    pub request_rate: f64,
    pub ttft_ms: f64,
    pub tpot_ms: f64,
    pub request_latency_ms: f64,
    pub seq_per_s: f64,
    pub seq_per_s_per_gpu: f64,
    pub tokens_per_s: f64,
    pub tokens_per_s_per_gpu: f64,
    pub tokens_per_s_per_user: f64,
    pub num_total_gpus: u64,
    /// The prefill worker's encoder phase (ms) and memory (GiB); the
    /// spec's `encoder_latency` and `(e)memory`.
    pub encoder_ms: f64,
    pub encoder_memory_gib: f64,
    pub prefill: WorkerEstimate,
    pub decode: WorkerEstimate,
}

/// A static worker's row after the spec's rounding (`run_static`'s
/// one-row frame, `DataFrame.round(3)`): what rate matching reads.
#[derive(Debug, Clone)]
pub(crate) struct StaticRow {
    pub ttft: f64,
    pub tpot: f64,
    pub seq_per_s: f64,
    /// `seq/s / tp / pp / dp` from the unrounded rate, then rounded: cp is
    /// not divided out (the spec's static row).
    pub seq_per_s_per_gpu: f64,
    pub tokens_per_s_per_user: f64,
    pub worker: WorkerEstimate,
    pub fits: bool,
}

impl StaticRow {
    /// GPUs the worker occupies, `tp * pp * dp * cp` (what the search's
    /// worker matching counts).
    pub fn gpus(&self) -> u64 {
        self.worker.parallel.gpus()
    }
}

impl Server<'_> {
    /// Prices `q` on this server for both sides (one database).
    pub fn estimate_disagg(&mut self, q: &DisaggQuery) -> Result<DisaggEstimate, ServingError> {
        self.estimate_disagg_with(None, q)
    }

    /// Prices `q` with the prefill workers on this server and the decode
    /// workers on `decode` (the spec's `decode_system_name`: each role reads
    /// its own system's data and memory, docs/spec/experiments.md 1.4);
    /// `None`: both here.
    pub fn estimate_disagg_with(
        &mut self,
        decode: Option<&mut Server<'_>>,
        q: &DisaggQuery,
    ) -> Result<DisaggEstimate, ServingError> {
        for (value, name) in [
            (q.prefill_batch, "prefill_batch"),
            (q.prefill_workers, "prefill_workers"),
            (q.decode_batch, "decode_batch"),
            (q.decode_workers, "decode_workers"),
            (q.isl, "isl"),
            (q.osl, "osl"),
        ] {
            if value == 0 {
                return Err(ServingError::input(format!("{name} must be at least 1")));
            }
        }
        let prefill = self.prefill_row(&q.prefill, q.prefill_batch, q.prefill_workers, q.isl, q.osl, q.prefix)?;
        let (decode, decode_system) = match decode {
            Some(server) => {
                self.check_decode_role(server)?;
                let row = server.decode_row(&q.decode, q.decode_batch, q.decode_workers, q.isl, q.osl, q.prefix)?;
                (row, Some(server.system.system.clone()))
            }
            None => (self.decode_row(&q.decode, q.decode_batch, q.decode_workers, q.isl, q.osl, q.prefix)?, None),
        };
        if !prefill.fits || !decode.fits {
            let on = match decode_system.filter(|d| *d != self.system.system) {
                Some(d) => format!("prefill system '{}' or decode system '{d}'", self.system.system),
                None => format!("system '{}'", self.system.system),
            };
            return Err(ServingError::OutOfMemory(format!(
                "OOM: the model '{}' does not fit in GPU memory on {on} with the given parallelism. Try increasing tp_size/pp_size, using a quantized model, or using a system with more VRAM per GPU.",
                self.model
            )));
        }
        Ok(combine(&prefill, q.prefill_workers, &decode, q.decode_workers, (q.isl, q.osl, q.prefix)).0)
    }

    /// A decode role on another server prices the same model on the same
    /// backend (the spec's disagg task has one model path and one backend
    /// name for both roles).
    pub(crate) fn check_decode_role(&self, decode: &Server<'_>) -> Result<(), ServingError> {
        if decode.model != self.model || decode.backend != self.backend {
            return Err(ServingError::input(format!(
                "disagg: the decode role prices {} on {}, the prefill role {} on {}: a disaggregated deployment runs one model on one backend",
                decode.model,
                decode.backend.name(),
                self.model,
                self.backend.name()
            )));
        }
        Ok(())
    }

    /// The prefill worker: one static context pass of `batch` requests,
    /// corrected by 1.1; its memory at osl 1.
    pub(crate) fn prefill_row(
        &mut self,
        parallel: &Parallel,
        batch: u32,
        workers: u32,
        isl: u32,
        osl: u32,
        prefix: u32,
    ) -> Result<StaticRow, ServingError> {
        let isl = self.effective_isl(isl)?;
        let shape = Server::shape(parallel, batch, isl, osl);
        // The encoder, then the context pass; each op corrected (options.md 4.6).
        let encoder_ms = self.encoder_ms(parallel.tp, batch, PREFILL_LATENCY_CORRECTION)?;
        let sums = self.pass(Phase::Context, &shape, prefix, false)?;
        let ttft = encoder_ms + sums.scaled_total(PREFILL_LATENCY_CORRECTION);
        let encoder = self.encoder_memory(parallel.tp, batch)?;
        let at = MemoryAt {
            batch: f64::from(batch),
            isl: f64::from(isl),
            osl: 1.0,
            num_tokens: 0.0,
            prefix: f64::from(prefix),
            max_seq_len: None,
            encoder,
        };
        let (mut worker, seq_per_s_per_gpu, fits) =
            self.worker(Phase::Context, &shape, *parallel, workers, ttft, at)?;
        worker.encoder_ms = r3(encoder_ms);
        worker.encoder_memory_gib = r3(Server::encoder_gib(encoder));
        Ok(StaticRow {
            ttft: r3(ttft),
            tpot: 0.0,
            seq_per_s: worker.seq_per_s_per_worker,
            seq_per_s_per_gpu,
            tokens_per_s_per_user: 0.0,
            worker,
            fits,
        })
    }

    /// The decode worker: one static generation pass of `batch` requests
    /// over `osl - 1` tokens, corrected by 1.08.
    pub(crate) fn decode_row(
        &mut self,
        parallel: &Parallel,
        batch: u32,
        workers: u32,
        isl: u32,
        osl: u32,
        prefix: u32,
    ) -> Result<StaticRow, ServingError> {
        // A decode worker runs no encoder (its model still has one to check),
        // but its requests carry the images' tokens.
        self.step.check_encoder(parallel.tp, self.images.encoder_dp)?;
        let isl = self.effective_isl(isl)?;
        let shape = Server::shape(parallel, batch, isl, osl);
        let sums = self.pass(Phase::Generation, &shape, 0, false)?;
        let generation_ms = sums.scaled_total(DECODE_LATENCY_CORRECTION);
        let generated = f64::from(osl.saturating_sub(1));
        let tpot = if osl <= 1 { 0.0 } else { generation_ms / generated };
        let mut request_latency = 0.0 + tpot * generated;
        if request_latency == 0.0 {
            request_latency = generation_ms;
        }
        let at = MemoryAt {
            batch: f64::from(batch),
            isl: f64::from(isl),
            osl: f64::from(osl),
            num_tokens: f64::from(batch),
            prefix: f64::from(prefix),
            max_seq_len: None,
            encoder: None,
        };
        let (worker, seq_per_s_per_gpu, fits) =
            self.worker(Phase::Generation, &shape, *parallel, workers, request_latency, at)?;
        let mut row = StaticRow {
            ttft: 0.0,
            tpot: r3(tpot),
            seq_per_s: worker.seq_per_s_per_worker,
            seq_per_s_per_gpu,
            tokens_per_s_per_user: r3(if tpot == 0.0 { 0.0 } else { 1000.0 / tpot }),
            worker,
            fits,
        };
        // MTP's acceptance, before the rates are matched (options.md 2.4).
        crate::mtp::project_decode(&mut row, self.accepted);
        Ok(row)
    }

    /// What a static worker's row reports besides its latencies: requests/s
    /// (`global_bs / request_latency * 1000 * pp`), the memory at `at` and
    /// whether it fits, the resolved MoE widths and quant modes.
    fn worker(
        &mut self,
        phase: Phase,
        shape: &StepShape,
        p: Parallel,
        workers: u32,
        request_latency: f64,
        at: MemoryAt,
    ) -> Result<(WorkerEstimate, f64, bool), ServingError> {
        let global_bs = u64::from(shape.batch) * u64::from(p.dp);
        let seq_s =
            if request_latency == 0.0 { 0.0 } else { global_bs as f64 / request_latency * 1000.0 * f64::from(p.pp) };
        let moe = self.step.moe_parallel(shape)?;
        let memory = self.memory(shape, &p, moe.map_or(1, |(_, ep)| ep), at)?;
        let fits = memory.fits(self.mem_capacity()?);
        let quants = self.step.quants(phase, shape)?;
        let worker = WorkerEstimate {
            parallel: p,
            moe_tp: moe.map(|(tp, _)| tp),
            moe_ep: moe.map(|(_, ep)| ep),
            bs: shape.batch,
            global_bs,
            workers,
            seq_per_s_per_worker: r3(seq_s),
            memory_gib: r3(memory.total),
            memory,
            quants,
            encoder_ms: 0.0,
            encoder_memory_gib: 0.0,
        };
        let per_gpu = r3(seq_s / f64::from(p.tp) / f64::from(p.pp) / f64::from(p.dp));
        Ok((worker, per_gpu, fits))
    }
}

/// The deployment of `pw` prefill and `dw` decode workers (`_rate_match_dict`
/// / `_build_disagg_summary_dict`): the estimate at the spec's 3 decimals,
/// and its unrounded tokens/s/gpu (the search picks a decode layout's best
/// deployment on it before rounding).
pub(crate) fn combine(
    prefill: &StaticRow,
    prefill_workers: u32,
    decode: &StaticRow,
    decode_workers: u32,
    (isl, osl, prefix): (u32, u32, u32),
) -> (DisaggEstimate, f64) {
    let (pw, dw) = (f64::from(prefill_workers), f64::from(decode_workers));
    let ttft = prefill.ttft * TTFT_CORRECTION;
    let prefill_rate = prefill.seq_per_s * pw * PREFILL_DEGRADATION;
    let decode_rate = decode.seq_per_s * dw * DECODE_DEGRADATION;
    // Python's min(prefill_rate, decode_rate): the second only when smaller.
    let seq_s = if decode_rate < prefill_rate { decode_rate } else { prefill_rate };
    // The spec's disagg summary counts a worker's GPUs as `pp * tp * dp`:
    // a context-parallel prefill worker's cp ranks are not counted here
    // (its `num_total_gpus` in the worker frame, and the search's rate
    // matching, do count them).
    let summary_gpus = |p: &Parallel| u64::from(p.pp) * u64::from(p.tp) * u64::from(p.dp);
    let gpus = summary_gpus(&prefill.worker.parallel) * u64::from(prefill_workers)
        + summary_gpus(&decode.worker.parallel) * u64::from(decode_workers);
    let per_gpu = |v: f64| if gpus > 0 { v / gpus as f64 } else { 0.0 };
    let tokens_s = seq_s * f64::from(osl);
    let request_latency = ttft + decode.tpot * f64::from(osl.saturating_sub(1));
    let side = |row: &StaticRow, workers: u32| {
        let mut w = row.worker.clone();
        w.workers = workers;
        w.seq_per_s_per_worker = r3(w.seq_per_s_per_worker);
        w.memory_gib = r3(w.memory_gib);
        w
    };
    let estimate = DisaggEstimate {
        isl,
        osl,
        prefix,
        concurrency: decode.worker.global_bs * u64::from(decode_workers),
        request_rate: r3(seq_s),
        ttft_ms: r3(ttft),
        tpot_ms: r3(decode.tpot),
        request_latency_ms: r3(request_latency),
        seq_per_s: r3(seq_s),
        seq_per_s_per_gpu: r3(per_gpu(seq_s)),
        tokens_per_s: r3(tokens_s),
        tokens_per_s_per_gpu: r3(per_gpu(tokens_s)),
        tokens_per_s_per_user: r3(decode.tokens_per_s_per_user),
        num_total_gpus: gpus,
        encoder_ms: r3(prefill.worker.encoder_ms),
        encoder_memory_gib: r3(prefill.worker.encoder_memory_gib),
        prefill: side(prefill, prefill_workers),
        decode: side(decode, decode_workers),
    };
    (estimate, per_gpu(tokens_s))
}
