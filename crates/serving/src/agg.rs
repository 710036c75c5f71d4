//! The aggregated (in-flight batching) estimate of one deployment: `b`
//! concurrent requests of `isl` input and `osl` output tokens on one worker,
//! prefill admitted `ctx_tokens` at a time into steps that also decode
//! (`run_agg` of the spec).
//!
//! Prefill takes `ceil(isl * b / ctx_tokens)` mixed steps; the rest of the
//! `osl` steps decode only. A mixed step is priced from three static passes:
//! every op but context attention at one request of `ctx + decode` tokens,
//! context attention at `ceil(ctx / isl)` full requests (averaged over the
//! steps one request's prefill spans), and generation attention of the
//! decoding requests at the mean context `isl + osl // 2`.

use aicsql_tables::pymath::py_repr;
use aicsql_tables::{Num, Phase, Quants};

use crate::backend::Backend;

use crate::error::ServingError;
use crate::memory::{Memory, MemoryAt};
use crate::parallel::{Label, Parallel};
use crate::server::Server;

/// One aggregated deployment to price.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AggQuery {
    pub parallel: Parallel,
    /// Concurrent requests per worker.
    pub batch: u32,
    pub isl: u32,
    pub osl: u32,
    /// Cached prefix tokens of each request (part of `isl`).
    pub prefix: u32,
    /// Prefill tokens admitted per step; `None`: `isl`.
    pub ctx_tokens: Option<u32>,
    /// TRT-LLM's KV-cache sizing (the spec's `--max-seq-len`,
    /// `--free-gpu-memory-fraction`); the other runtimes ignore it.
    pub kv_sizing: KvSizing,
}

/// TRT-LLM's KV-cache knobs of an aggregated deployment
/// (docs/spec/options.md 3.2): the sequence length the KV cache is sized
/// for (`None`: isl + osl) and the share of free GPU memory it may take
/// (`None`: the runtime's 0.9, and the warning says "backend default").
/// vLLM and SGLang, and every disaggregated worker, ignore both, as the
/// spec does.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct KvSizing {
    pub max_seq_len: Option<u32>,
    pub free_gpu_memory_fraction: Option<f64>,
}

/// The spec's result dict of `cli_estimate(mode="agg")`, every value with
/// its unit in the name (ms, GiB, per second).
#[derive(Debug, Clone, PartialEq)]
pub struct AggEstimate {
    pub isl: u32,
    pub osl: u32,
    pub prefix: u32,
    pub concurrency: u64,
    pub request_rate: f64,
    pub bs: u32,
    pub global_bs: u64,
    pub ttft_ms: f64,
    pub tpot_ms: f64,
    pub seq_per_s: f64,
    pub seq_per_s_per_gpu: f64,
    pub tokens_per_s: f64,
    pub tokens_per_s_per_gpu: f64,
    pub tokens_per_s_per_user: f64,
    pub request_latency_ms: f64,
    pub num_total_gpus: u64,
    pub parallel: Parallel,
    /// The MoE widths as the spec resolved them (`None` for dense models).
    pub moe_tp: Option<i64>,
    pub moe_ep: Option<i64>,
    pub quants: Quants,
    pub memory: Memory,
    pub balance_score: f64,
    pub num_ctx_reqs: f64,
    pub num_gen_reqs: f64,
    pub num_tokens: f64,
    pub ctx_tokens: u32,
    /// Mixed and decode-only steps of one round, and their latencies.
    pub num_mix_steps: f64,
    pub num_genonly_steps: f64,
    pub mix_step_ms: f64,
    pub genonly_step_ms: f64,
    /// The image encoder's phase (ms) and memory (GiB, weights and
    /// activations) of the batch; 0.0 without images (options.md 4).
    pub encoder_ms: f64,
    pub encoder_memory_gib: f64,
    /// The spec's KV-cache warning (TRT-LLM: the batch exceeds the KV budget).
    pub warning: Option<String>,
}

impl AggEstimate {
    /// The spec's `parallel` value: the label with the resolved MoE widths.
    pub fn label(&self) -> Label {
        self.parallel.label(self.moe_tp, self.moe_ep)
    }
}

impl Server<'_> {
    /// Prices `q`: the spec's `cli_estimate(mode="agg")` on the Python step.
    pub fn estimate_agg(&mut self, q: &AggQuery) -> Result<AggEstimate, ServingError> {
        let (mut estimate, memory_ok) = self.agg_unchecked(q)?;
        // The spec projects MTP's acceptance before its OOM check; the check
        // reads a flag the projection keeps.
        crate::mtp::project_agg(&mut estimate, self.backend, self.accepted);
        if !memory_ok {
            return Err(self.oom(&q.parallel));
        }
        Ok(estimate)
    }

    /// The agg memory breakdown and the GPU's capacity (GiB); `Ok` even
    /// when it does not fit (the breakdown says by how much). Every step of
    /// the estimate is priced first, as the spec does, so a miss stays a miss.
    pub fn agg_memory(&mut self, q: &AggQuery) -> Result<(Memory, f64), ServingError> {
        let (estimate, _) = self.agg_unchecked(q)?;
        Ok((estimate.memory, self.mem_capacity()? / crate::memory::GIB))
    }

    pub(crate) fn oom(&self, p: &Parallel) -> ServingError {
        ServingError::OutOfMemory(format!(
            "OOM: the model '{}' does not fit in GPU memory on system '{}' with the given parallelism (tp={}, pp={}, dp={}). Try increasing tp_size/pp_size, using a quantized model, or using a system with more VRAM per GPU.",
            self.model, self.system.system, p.tp, p.pp, p.dp
        ))
    }

    fn agg_unchecked(&mut self, q: &AggQuery) -> Result<(AggEstimate, bool), ServingError> {
        let p = q.parallel;
        let (b, osl, prefix) = (q.batch, q.osl, q.prefix);
        // The budget defaults to the text; every step reads the text and the
        // images' tokens (options.md 4.4), the report the text.
        let ctx = q.ctx_tokens.unwrap_or(q.isl);
        for (value, name) in [(b, "batch"), (q.isl, "isl"), (osl, "osl"), (ctx, "ctx_tokens")] {
            if value == 0 {
                return Err(ServingError::input(format!("{name} must be at least 1")));
            }
        }
        let isl = self.effective_isl(q.isl)?;
        // The encoder runs once per prefill of the whole batch, before the steps.
        let encoder_ms = self.encoder_ms(p.tp, b, 1.0)?;
        let (bf, islf, oslf, ctxf) = (f64::from(b), f64::from(isl), f64::from(osl), f64::from(ctx));
        let balance_score = islf * bf / ctxf / oslf;
        let steps_to_finish_ctx = (islf * bf / ctxf).ceil();

        // (mix steps, decode tokens in a mix step, decode-only steps, their
        // tokens, mix steps counted by TPOT)
        let (mix_steps, mix_gen_tokens, genonly_steps, genonly_tokens, tpot_mix_steps) = if b > 1 {
            let decode = self.backend.mix_step_gen_tokens(b, ctx, isl, osl);
            if steps_to_finish_ctx >= oslf {
                (steps_to_finish_ctx, decode, 0.0, 0, steps_to_finish_ctx)
            } else {
                let tpot_mix = self.backend.tpot_mix_steps(steps_to_finish_ctx);
                (steps_to_finish_ctx, decode, oslf - steps_to_finish_ctx, b, tpot_mix)
            }
        } else {
            (1.0, 0, oslf - 1.0, 1, 0.0)
        };

        let mix_step_ms = self.mix_step(&p, ctx, mix_gen_tokens, isl, osl, prefix)?;
        let genonly_step_ms = self.genonly_step(&p, genonly_tokens, isl, osl)?;

        // TTFT undoes the mixed step's batching efficiency, 1.0 on every
        // backend of the spec, so the prefill time is the mixed step's.
        let per_request = mix_step_ms * (islf / ctxf).ceil() + self.backend.prefill_dispatch_ms(self.step.layers());
        let ttft = encoder_ms + per_request * self.backend.ttft_queueing_factor(b, steps_to_finish_ctx);
        let tpot_steps = tpot_mix_steps + genonly_steps;
        let tpot = if tpot_steps > 0.0 {
            (mix_step_ms * tpot_mix_steps + genonly_step_ms * genonly_steps) / tpot_steps
        } else {
            0.0
        };
        let total_ms = encoder_ms + mix_steps * mix_step_ms + genonly_steps * genonly_step_ms;
        let step_throughput = if osl > 1 && total_ms > 0.0 { 1000.0 / total_ms * bf * f64::from(osl - 1) } else { 0.0 };
        let output = self.backend.throughput_cap(step_throughput, ttft, tpot, b, osl);

        let (num_ctx_reqs, num_gen_reqs) = if b == 1 {
            (1.0, 1.0)
        } else {
            let ctx_reqs = (ctxf / islf).ceil();
            (ctx_reqs, bf - ctx_reqs)
        };
        let scale = u64::from(p.pp) * u64::from(p.dp);
        let output = output * scale as f64;
        let concurrency = u64::from(b) * scale;
        let request_rate = if osl > 1 { output / f64::from(osl - 1) } else { 0.0 };
        let num_tokens = if b > 1 { num_gen_reqs + ctxf } else { ctxf };

        let shape = Server::shape(&p, b, isl, osl);
        let moe = self.step.moe_parallel(&shape)?;
        let encoder_memory = self.encoder_memory(p.tp, b)?;
        let memory = self.memory(
            &shape,
            &p,
            moe.map_or(1, |(_, ep)| ep),
            MemoryAt {
                batch: bf,
                isl: islf,
                osl: oslf,
                num_tokens: self.backend.agg_activation_tokens(num_tokens),
                prefix: f64::from(prefix),
                max_seq_len: Some(match (self.backend, q.kv_sizing.max_seq_len) {
                    (Backend::Trtllm, Some(max_seq_len)) => f64::from(max_seq_len),
                    _ => islf + oslf,
                }),
                encoder: encoder_memory,
            },
        )?;
        let capacity = self.mem_capacity()?;
        let fits = memory.fits(capacity);
        let given_fraction = q.kv_sizing.free_gpu_memory_fraction;
        let budget = self
            .backend
            .kv_budget()
            .map(|(fraction, reserved, tolerance)| (given_fraction.unwrap_or(fraction), reserved, tolerance));
        let warning = match budget {
            Some(budget) if fits && memory.exceeds_kv_budget(capacity, budget) => {
                let fraction = given_fraction.map_or_else(|| "backend default".to_string(), |f| py_repr(Num::Float(f)));
                Some(format!(
                    "Requested batch_size ({b}) exceeds estimated KV cache capacity (free_gpu_memory_fraction={fraction}). The serving runtime will queue excess requests, causing significantly higher TTFT and inaccurate TPOT."
                ))
            }
            _ => None,
        };

        // `/ pp / tp / dp / cp` in the spec's order.
        let per_gpu = |v: f64| v / f64::from(p.pp) / f64::from(p.tp) / f64::from(p.dp) / f64::from(p.cp);
        let quants = self.step.quants(Phase::Context, &shape)?;
        let estimate = AggEstimate {
            isl: q.isl,
            osl,
            prefix,
            concurrency,
            request_rate,
            bs: b,
            global_bs: u64::from(b) * u64::from(p.dp),
            ttft_ms: ttft,
            tpot_ms: tpot,
            seq_per_s: request_rate,
            seq_per_s_per_gpu: per_gpu(request_rate),
            tokens_per_s: output,
            tokens_per_s_per_gpu: per_gpu(output),
            tokens_per_s_per_user: if osl > 1 && tpot > 0.0 { 1000.0 / tpot } else { 0.0 },
            request_latency_ms: ttft + tpot * f64::from(osl.saturating_sub(1)),
            num_total_gpus: p.gpus(),
            parallel: p,
            moe_tp: moe.map(|(tp, _)| tp),
            moe_ep: moe.map(|(_, ep)| ep),
            quants,
            memory,
            balance_score,
            num_ctx_reqs,
            num_gen_reqs,
            num_tokens,
            ctx_tokens: ctx,
            num_mix_steps: mix_steps,
            num_genonly_steps: genonly_steps,
            mix_step_ms,
            genonly_step_ms,
            encoder_ms,
            encoder_memory_gib: Server::encoder_gib(encoder_memory),
            warning,
        };
        Ok((estimate, fits))
    }

    /// One mixed step of `ctx` prefill and `decode` decode tokens.
    fn mix_step(
        &mut self,
        p: &Parallel,
        ctx: u32,
        decode: i64,
        isl: u32,
        osl: u32,
        prefix: u32,
    ) -> Result<f64, ServingError> {
        let decode = u32::try_from(decode)
            .map_err(|_| ServingError::input(format!("{decode} decode tokens per mixed step is out of range")))?;
        // Pass 1: everything but context attention, one request of all the
        // step's tokens, the prefix of the requests it completes cached.
        let combined = ctx.checked_add(decode).ok_or_else(|| ServingError::input("ctx_tokens + batch overflow"))?;
        let cached = u64::from(prefix) * u64::from(ctx / isl);
        let cached = u32::try_from(cached).map_err(|_| ServingError::input("prefix * ctx_tokens / isl overflow"))?;
        let sums = self.pass(Phase::Context, &Server::shape(p, 1, combined, 1), cached, true)?;
        let non_attention = sums.iter().filter(|(name, _)| *name != "attention").fold(0.0, |sum, (_, v)| sum + v);
        // Pass 2: context attention of the full requests the step admits,
        // averaged over the steps one request's prefill spans.
        let requests = ctx.div_ceil(isl);
        let sums = self.pass(Phase::Context, &Server::shape(p, requests, isl, 1), prefix, false)?;
        // The spec reads the dict by name, and it is a defaultdict: a family
        // whose attention sits inside another op (DEEPSEEK / KIMIK25's MLA
        // block, already in pass 1) reads 0.0 here.
        let context_attention = sums.get("attention").unwrap_or(0.0) / (f64::from(isl) / f64::from(ctx)).ceil();
        // Pass 3: generation attention of the decoding requests.
        let generation_attention = if decode > 0 {
            let sums = self.pass(Phase::Generation, &Server::shape(p, decode, isl + osl / 2, 2), 0, false)?;
            sums.get("attention").unwrap_or(0.0)
        } else {
            0.0
        };
        Ok(non_attention + context_attention + generation_attention)
    }

    /// One decode-only step of `tokens` requests at the mean context.
    fn genonly_step(&mut self, p: &Parallel, tokens: u32, isl: u32, osl: u32) -> Result<f64, ServingError> {
        if tokens == 0 {
            return Ok(0.0);
        }
        Ok(self.pass(Phase::Generation, &Server::shape(p, tokens, isl + osl / 2, 2), 0, false)?.total())
    }
}
