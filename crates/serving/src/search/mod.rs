//! The deployment search of aiconfigurator's `cli default`
//! (docs/spec/search.md): for a model on a database and a GPU budget, every
//! parallel layout and batch size, aggregated and disaggregated, the
//! candidates that meet the TTFT limit over the spec's TPOT sweep, the
//! Pareto frontier of tokens/s/gpu_cluster against tokens/s/user, and the
//! best configurations under the user's TPOT limit. The frames come out as
//! the spec's do: same rows, same values at its 3 decimals, same order.

mod agg;
mod disagg;
mod experiments;
mod pick;
mod recommend;
mod sort;
mod space;

use crate::agg::{AggEstimate, KvSizing};
use crate::disagg::DisaggEstimate;
use crate::error::ServingError;
use crate::parallel::Parallel;
use crate::server::Server;

pub use experiments::{
    BackendServers, Experiment, Experiments, MergedPicks, Outcome, recommend_experiments, search_experiments,
};
pub use pick::Mode;
pub use recommend::Recommendation;

/// The spec's `cli default` arguments the search reads.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SearchQuery {
    pub total_gpus: u32,
    pub isl: u32,
    pub osl: u32,
    pub prefix: u32,
    /// TTFT limit (ms): filters agg points and prefill workers.
    pub ttft_ms: f64,
    /// The user's TPOT limit (ms): picks the best configs only; the sweeps
    /// run the spec's fixed TPOT list.
    pub tpot_ms: f64,
    /// Best configs kept per mode (the spec's `top_n`, 5).
    pub top_n: usize,
    /// Drop candidates above the TPOT limit before the frontier (the spec's
    /// `strict_sla`, off by default).
    pub strict_sla: bool,
    /// Threads pricing layouts side by side (each with its own server);
    /// the result does not depend on it. 0 or 1: this thread only.
    pub threads: usize,
    /// TRT-LLM's KV-cache knobs, forwarded to every agg point as the spec's
    /// agg sweep forwards them (a point over the KV budget ends its budget
    /// loop like an OOM); vLLM, SGLang and the disagg sweep ignore them
    /// (docs/spec/options.md 3.2).
    pub kv_sizing: KvSizing,
    /// `cli default --enable-chunked-prefill`: the agg sweep's
    /// context-token budgets are not aligned to isl (options.md 3.3).
    pub chunked_prefill: bool,
    /// An end-to-end request-latency target (ms; `--request-latency`): the
    /// sweeps run (TTFT, TPOT) pairs instead of the TPOT list, and the picks
    /// rank by request latency (docs/spec/experiments.md 3). `None`, or a
    /// value of 0 or less as the spec reads it: no target.
    pub request_latency_ms: Option<f64>,
    /// `cli recommend`'s load target (docs/spec/experiments.md 4): the
    /// search space of a GPU budget escalation step and the load-match
    /// picks; `None`: `cli default`'s.
    pub load: Option<LoadMatch>,
}

/// A load to serve with the fewest GPUs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LoadTarget {
    /// Requests per second.
    RequestRate(f64),
    /// Concurrent requests.
    Concurrency(f64),
}

/// What `cli recommend` changes in a search (experiments.md 4.4, 4.5).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LoadMatch {
    pub target: LoadTarget,
    /// GPUs per node of the system: the first budget, and the largest
    /// disaggregated replica at every budget.
    pub node_gpus: u32,
}

impl SearchQuery {
    fn check(&self) -> Result<(), ServingError> {
        for (value, name) in [(self.total_gpus, "total_gpus"), (self.isl, "isl"), (self.osl, "osl")] {
            if value == 0 {
                return Err(ServingError::input(format!("search: {name} must be at least 1")));
            }
        }
        if self.prefix >= self.isl {
            return Err(ServingError::input(format!(
                "search: prefix {} must be smaller than isl {}",
                self.prefix, self.isl
            )));
        }
        for (value, name) in [(self.ttft_ms, "ttft"), (self.tpot_ms, "tpot")] {
            if !(value.is_finite() && value > 0.0) {
                return Err(ServingError::input(format!(
                    "search: {name} must be a positive number of ms, got {value}"
                )));
            }
        }
        if let Some(r) = self.request_latency_ms {
            if !r.is_finite() {
                return Err(ServingError::input(format!(
                    "search: request_latency must be a finite number of ms, got {r}"
                )));
            }
            if r > 0.0 && self.osl <= 1 {
                // The spec asserts it (experiments.md 3.6).
                return Err(ServingError::input(format!(
                    "search: a request-latency target needs osl > 1, got osl = {}",
                    self.osl
                )));
            }
        }
        Ok(())
    }

    /// The request-latency target, if one is set (above 0).
    pub(crate) fn latency_target(&self) -> Option<f64> {
        self.request_latency_ms.filter(|&r| r > 0.0)
    }

    /// The (TTFT, TPOT) limits both sweeps run (experiments.md 3.2): the
    /// user's TTFT with every TPOT of the sweep, or, with a request-latency
    /// target R, the fixed TTFT values, the fractions of R below 300 or above
    /// 8000 and the user's TTFT, those below R ascending, each with the TPOT
    /// that spends the rest of R on `osl - 1` tokens.
    pub(crate) fn limits(&self) -> Vec<(f64, f64)> {
        let Some(r) = self.latency_target() else {
            return tpot_sweep().map(|t| (self.ttft_ms, t)).collect();
        };
        const TTFTS: [f64; 13] =
            [300.0, 400.0, 500.0, 600.0, 800.0, 1000.0, 1200.0, 1400.0, 1600.0, 2000.0, 3000.0, 5000.0, 8000.0];
        let (lo, hi) = (TTFTS[0], TTFTS[TTFTS.len() - 1]);
        let mut values: Vec<f64> = TTFTS.to_vec();
        values.extend([0.1, 0.2, 0.3, 0.5, 0.7].map(|p| r * p).into_iter().filter(|&v| v < lo || v > hi));
        values.push(self.ttft_ms);
        let mut kept: Vec<f64> = values.into_iter().filter(|&v| v < r).collect();
        kept.sort_by(f64::total_cmp);
        kept.dedup();
        let steps = f64::from(self.osl - 1);
        kept.into_iter().map(|t| (t, (r - t) / steps)).collect()
    }
}

/// The TPOT values both sweeps run (ms): 1..19, then 20..295 by 5.
pub(crate) fn tpot_sweep() -> impl Iterator<Item = f64> {
    (1..20).chain((20..300).step_by(5)).map(f64::from)
}

/// A row of a search frame: what the frontier and the picks read.
pub trait Candidate {
    fn tokens_per_s_per_gpu(&self) -> f64;
    fn tokens_per_s_per_user(&self) -> f64;
    /// Requests per second of one replica (the deployment's).
    fn seq_per_s(&self) -> f64;
    /// Concurrent requests of one replica.
    fn concurrency(&self) -> f64;
    fn ttft_ms(&self) -> f64;
    fn tpot_ms(&self) -> f64;
    fn request_latency_ms(&self) -> f64;
    fn num_total_gpus(&self) -> u64;
    /// The layout the best configs are chosen per: agg `parallel`, disagg
    /// `(d)parallel`.
    fn group(&self) -> String;
}

/// One aggregated candidate: the spec's row, values at 3 decimals.
#[derive(Debug, Clone, PartialEq)]
pub struct AggCandidate {
    pub estimate: AggEstimate,
}

/// One disaggregated candidate (the estimate is already at 3 decimals).
#[derive(Debug, Clone, PartialEq)]
pub struct DisaggCandidate {
    pub estimate: DisaggEstimate,
}

/// Both candidate kinds read the same fields of their estimate; only the
/// layout they group by differs.
macro_rules! candidate {
    ($kind:ty, |$e:ident| $group:expr) => {
        impl Candidate for $kind {
            fn tokens_per_s_per_gpu(&self) -> f64 {
                self.estimate.tokens_per_s_per_gpu
            }
            fn tokens_per_s_per_user(&self) -> f64 {
                self.estimate.tokens_per_s_per_user
            }
            fn seq_per_s(&self) -> f64 {
                self.estimate.seq_per_s
            }
            fn concurrency(&self) -> f64 {
                self.estimate.concurrency as f64
            }
            fn ttft_ms(&self) -> f64 {
                self.estimate.ttft_ms
            }
            fn tpot_ms(&self) -> f64 {
                self.estimate.tpot_ms
            }
            fn request_latency_ms(&self) -> f64 {
                self.estimate.request_latency_ms
            }
            fn num_total_gpus(&self) -> u64 {
                self.estimate.num_total_gpus
            }
            fn group(&self) -> String {
                let $e = &self.estimate;
                $group.to_string()
            }
        }
    };
}

candidate!(AggCandidate, |e| e.label());
candidate!(DisaggCandidate, |e| e.decode.label());

/// A layout the spec's sweep drops silently (its model or a point raised),
/// and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Skipped {
    pub parallel: Parallel,
    pub reason: String,
}

/// One mode's search: the candidates frame in the spec's order, the
/// frontier and the best configs (positions in `candidates`, each in its
/// own frame's order), and `tokens/s/gpu_cluster` of every candidate.
#[derive(Debug, Clone, PartialEq)]
pub struct Search<C> {
    pub candidates: Vec<C>,
    /// `tokens/s/gpu * (total_gpus // n) * n / total_gpus` per candidate.
    pub cluster: Vec<f64>,
    /// The frontier, sorted by tokens/s/user ascending.
    pub pareto: Vec<usize>,
    /// The best configs, rank 1 first.
    pub best: Vec<usize>,
    /// tokens/s/gpu_cluster of rank 1 (0.0 when there is none).
    pub best_throughput: f64,
    pub skipped: Vec<Skipped>,
    /// Why there is no candidate (the spec drops the mode), if there is none.
    pub reason: Option<String>,
    /// No candidate because nothing fitted in GPU memory (the spec's
    /// `InsufficientMemoryError` / `KVCacheCapacityError`): what makes
    /// `cli recommend` try a larger budget.
    pub out_of_memory: bool,
    /// Under a load target, per best config: the replicas and the GPUs it
    /// needs (`replicas_needed`, `total_gpus_needed`); empty otherwise.
    pub needed: Vec<(i64, i64)>,
}

/// Both modes and the one the spec chooses.
#[derive(Debug, Clone, PartialEq)]
pub struct DefaultSearch {
    pub agg: Option<Search<AggCandidate>>,
    /// `None` for a budget of one GPU (the spec builds no disagg task).
    pub disagg: Option<Search<DisaggCandidate>>,
    /// The mode with the higher best throughput, agg on a tie; `None` when
    /// neither found a config.
    pub chosen: Option<Mode>,
}

/// The checkpoints the spec's search task runs at `w4a8_mxfp4_mxfp8` experts
/// on a Blackwell-class TRT-LLM system (task_v2.py `_GPTOSS_BLACKWELL_MODELS`).
const GPTOSS_BLACKWELL: [&str; 2] = ["openai/gpt-oss-120b", "openai/gpt-oss-20b"];

impl<'a> Server<'a> {
    /// This server as one role of the spec's search task, whose quant
    /// resolution has a rule of its own that `cli_estimate` lacks
    /// (docs/spec/experiments.md 1.5): GPT-OSS on TRT-LLM on a system of
    /// SM 100 or newer runs its experts at `w4a8_mxfp4_mxfp8` unless the MoE
    /// mode was given, decided per role by the role's system. `Some`: a fork
    /// with that mode; `None`: the server as it is.
    pub fn search_role(&self) -> Result<Option<Server<'a>>, ServingError> {
        let overrides = self.step.quant_overrides();
        let promoted = overrides.moe.is_none()
            && self.backend == crate::backend::Backend::Trtllm
            && GPTOSS_BLACKWELL.contains(&self.model.as_str())
            && self.system.sm_version.is_some_and(|sm| sm >= 100);
        if !promoted {
            return Ok(None);
        }
        let overrides = aicsql_tables::step::QuantOverrides {
            moe: Some(aicsql_tables::modes::MoeQuant::W4a8Mxfp4Mxfp8),
            ..overrides
        };
        Ok(Some(self.fork()?.with_quant_overrides(overrides)?))
    }

    /// The spec's agg experiment of `cli default`.
    pub fn search_agg(&mut self, q: &SearchQuery) -> Result<Search<AggCandidate>, ServingError> {
        q.check()?;
        let mut role = self.search_role()?;
        let server = match role.as_mut() {
            Some(role) => role,
            None => self,
        };
        let space = server.space(q, None)?;
        let sweep = server.sweep_agg(q, &space.agg)?;
        Ok(pick::finish(sweep, q))
    }

    /// The spec's disagg experiment of `cli default`.
    pub fn search_disagg(&mut self, q: &SearchQuery) -> Result<Search<DisaggCandidate>, ServingError> {
        self.search_disagg_with(None, q)
    }

    /// The disagg experiment with its decode workers on `decode` (the
    /// spec's `--decode-system`, docs/spec/experiments.md 1): prefill
    /// workers are priced here, decode workers there, each role with its own
    /// system's data, memory, quant rules and search lists; `None`: here too.
    pub fn search_disagg_with(
        &mut self,
        decode: Option<&mut Server<'_>>,
        q: &SearchQuery,
    ) -> Result<Search<DisaggCandidate>, ServingError> {
        q.check()?;
        if let Some(d) = decode.as_deref() {
            self.check_decode_role(d)?;
        }
        let mut prefill_role = self.search_role()?;
        let prefill = match prefill_role.as_mut() {
            Some(role) => role,
            None => self,
        };
        let mut decode_role = decode.as_deref().map(Server::search_role).transpose()?.flatten();
        let decode = match (decode_role.as_mut(), decode) {
            (Some(role), _) => Some(role),
            (None, d) => d,
        };
        let space = prefill.space(q, decode.as_deref())?;
        let sweep = prefill.sweep_disagg(q, &space, decode)?;
        Ok(pick::finish(sweep, q))
    }

    /// `cli default`: agg, disagg (budgets of 2 GPUs and more), the chosen mode.
    pub fn search_default(&mut self, q: &SearchQuery) -> Result<DefaultSearch, ServingError> {
        self.search_default_with(None, q)
    }

    /// [`Self::search_default`] with the disagg experiment's decode workers
    /// on `decode` (the agg experiment always runs here, as the spec's).
    pub fn search_default_with(
        &mut self,
        decode: Option<&mut Server<'_>>,
        q: &SearchQuery,
    ) -> Result<DefaultSearch, ServingError> {
        let agg = self.search_agg(q)?;
        let disagg = if q.total_gpus >= 2 { Some(self.search_disagg_with(decode, q)?) } else { None };
        // A mode without candidates is an experiment the spec drops.
        let agg_best = (!agg.candidates.is_empty()).then_some(agg.best_throughput);
        let disagg_best = disagg.as_ref().filter(|s| !s.candidates.is_empty()).map(|s| s.best_throughput);
        let chosen = match (agg_best, disagg_best) {
            (Some(a), Some(d)) => Some(if d > a { Mode::Disagg } else { Mode::Agg }),
            (Some(_), None) => Some(Mode::Agg),
            (None, Some(_)) => Some(Mode::Disagg),
            (None, None) => None,
        };
        Ok(DefaultSearch { agg: Some(agg), disagg, chosen })
    }

    /// The search space; the decode lists are `decode`'s system's (this
    /// one's when `None`).
    fn space(&mut self, q: &SearchQuery, decode: Option<&Server<'_>>) -> Result<space::Space, ServingError> {
        let backend = self.backend;
        let decode_spec = decode.map_or(&self.system, |d| &d.system);
        // Every family this crate prices declares context parallelism on
        // sglang, so the spec sweeps cp there.
        let cp = backend == crate::backend::Backend::Sglang;
        let space = space::SpaceOf {
            is_moe: self.step.is_moe(),
            backend,
            system: &self.system.system,
            decode_system: &decode_spec.system,
            cp,
            total_gpus: q.total_gpus,
            recommend_node_gpus: q.load.map(|l| l.node_gpus),
        }
        .build();
        // A layout the spec prices but the step does not must not vanish
        // from the search the way the spec's own refusals do: the answer
        // would be another one. TRT-LLM's SM100 NVL72 all-to-all is the one
        // such dispatch left (no shipped system has 72 GPUs a node); refuse
        // the search by name should a system reach it.
        let nvl72_sm100 = |s: &aicsql_tables::SystemSpec| s.sm_version == Some(100) && s.num_gpus_per_node >= 72;
        let alltoall = |p: &&Parallel| p.dp > 1 && p.moe_tp == Some(1);
        let needs_alltoall = backend == crate::backend::Backend::Trtllm
            && ((nvl72_sm100(&self.system) && space.agg.iter().chain(&space.prefill).any(|p| alltoall(&p)))
                || (nvl72_sm100(decode_spec) && space.decode.iter().any(|p| alltoall(&p))));
        if needs_alltoall {
            return Err(ServingError::input(format!(
                "search: the spec's search space for {} on {} reaches TRT-LLM's SM100 NVL72 all-to-all MoE dispatch (attention dp > 1 at moe_tp 1), which the step does not price yet",
                self.step.spec_family(),
                backend.name()
            )));
        }
        Ok(space)
    }
}

/// What a sweep hands to the picks.
pub(crate) struct Sweep<C> {
    pub candidates: Vec<C>,
    pub skipped: Vec<Skipped>,
    pub reason: Option<String>,
    /// Nothing fitted in GPU memory (see [`Search::out_of_memory`]).
    pub out_of_memory: bool,
}

/// The spec drops a layout whose model or any point raises; a data error
/// (a corrupt table, a bug) is not such a case and stops the search.
pub(crate) fn skippable(e: &ServingError) -> bool {
    !matches!(e, ServingError::Step(aicsql_tables::StepError::Data(_)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(osl: u32, ttft_ms: f64, request_latency_ms: Option<f64>) -> SearchQuery {
        SearchQuery {
            total_gpus: 2,
            isl: 1024,
            osl,
            prefix: 0,
            ttft_ms,
            tpot_ms: 30.0,
            top_n: 5,
            strict_sla: false,
            threads: 1,
            kv_sizing: KvSizing::default(),
            chunked_prefill: false,
            request_latency_ms,
            load: None,
        }
    }

    /// docs/spec/experiments.md 3.2: the examples worked out there.
    #[test]
    fn request_latency_pairs() {
        let pairs = query(256, 2000.0, Some(2000.0)).limits();
        let ttfts: Vec<f64> = pairs.iter().map(|p| p.0).collect();
        assert_eq!(ttfts, [200.0, 300.0, 400.0, 500.0, 600.0, 800.0, 1000.0, 1200.0, 1400.0, 1600.0]);
        assert!(pairs.iter().all(|&(t, tpot)| tpot == (2000.0 - t) / 255.0));
        // Every fraction of 10 s lies within [300, 8000]: the 13 fixed values.
        assert_eq!(query(1000, 2000.0, Some(10_000.0)).limits().len(), 13);
        // The user's TTFT is one more value, not a bound.
        let with_user: Vec<f64> = query(256, 1700.0, Some(2000.0)).limits().iter().map(|p| p.0).collect();
        assert_eq!(with_user.len(), 11);
        assert!(with_user.contains(&1700.0) && with_user.contains(&1600.0));
        // None, 0 or below: the TPOT sweep at the user's TTFT.
        for off in [None, Some(0.0), Some(-5.0)] {
            let limits = query(256, 1000.0, off).limits();
            assert_eq!(limits.len(), 75);
            assert!(limits.iter().all(|&(t, _)| t == 1000.0));
        }
    }

    #[test]
    fn request_latency_needs_more_than_one_output_token() {
        let err = query(1, 1000.0, Some(2000.0)).check().err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err.contains("osl > 1"), "{err}");
        assert!(query(1, 1000.0, None).check().is_ok());
        assert!(query(256, 1000.0, Some(f64::NAN)).check().is_err());
    }
}
