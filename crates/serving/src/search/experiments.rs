//! `cli default --backend auto` (docs/spec/experiments.md 2): one agg and
//! (from 2 GPUs) one disagg experiment per backend of the system, each
//! searched and picked alone, and when more than two experiments were built,
//! the picks merged per serving mode: the best configs of every experiment
//! of the mode by tokens/s/gpu_cluster (pandas' unstable sort on the
//! concatenation), the frontier of their frontiers, and the chosen mode the
//! one whose merged rank 1 is higher (agg on a tie).

use crate::backend::Backend;
use crate::error::ServingError;
use crate::search::pick::{Mode, pareto_front};
use crate::search::sort::pandas_order;
use crate::search::{AggCandidate, Candidate, DisaggCandidate, LoadMatch, LoadTarget, Search, SearchQuery};
use crate::server::Server;

/// One backend's servers: the agg and prefill role's, and the decode
/// role's when it runs on another system; or why the backend cannot price
/// the model (its experiments then fail, as the spec's fail at run time).
pub enum BackendServers<'s, 'a> {
    Ready { server: &'s mut Server<'a>, decode: Option<&'s mut Server<'a>> },
    Refused(String),
}

/// One experiment's search, or why it failed.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Agg(Search<AggCandidate>),
    Disagg(Search<DisaggCandidate>),
    Failed(String),
}

/// One experiment as the spec names it (`agg_trtllm`, `disagg_vllm`, ...).
#[derive(Debug, Clone, PartialEq)]
pub struct Experiment {
    pub name: String,
    pub mode: Mode,
    pub backend: Backend,
    pub outcome: Outcome,
    /// Failed because nothing fitted in GPU memory (what makes `cli
    /// recommend` try a larger budget).
    pub out_of_memory: bool,
}

impl Experiment {
    /// Whether the spec keeps it: it ran and found a candidate.
    pub fn succeeded(&self) -> bool {
        match &self.outcome {
            Outcome::Agg(s) => !s.candidates.is_empty(),
            Outcome::Disagg(s) => !s.candidates.is_empty(),
            Outcome::Failed(_) => false,
        }
    }

    /// The experiment's own best tokens/s/gpu_cluster (a kept experiment).
    pub fn best_throughput(&self) -> Option<f64> {
        match &self.outcome {
            Outcome::Agg(s) if !s.candidates.is_empty() => Some(s.best_throughput),
            Outcome::Disagg(s) if !s.candidates.is_empty() => Some(s.best_throughput),
            _ => None,
        }
    }
}

/// The merged picks of one serving mode: rows as (experiment, candidate)
/// positions.
#[derive(Debug, Clone, PartialEq)]
pub struct MergedPicks {
    /// The merged best configs, rank 1 first (at most `top_n`).
    pub best: Vec<(usize, usize)>,
    /// The frontier of the experiments' frontiers, by its x ascending.
    pub pareto: Vec<(usize, usize)>,
    /// tokens/s/gpu_cluster of the merged rank 1 (0.0 without one).
    pub best_throughput: f64,
}

/// Every experiment, the merged picks (when more than two experiments were
/// built) and the chosen experiment.
#[derive(Debug, Clone, PartialEq)]
pub struct Experiments {
    pub experiments: Vec<Experiment>,
    /// Agg and disagg picks merged across backends; `None` with two
    /// experiments or fewer (the spec merges only above two).
    pub merged: Option<[MergedPicks; 2]>,
    /// The experiment whose configuration the spec chooses (merged: the one
    /// the chosen mode's rank 1 came from), `None` when none succeeded.
    pub chosen: Option<usize>,
}

/// Searches every backend's experiments in the spec's order (each backend's
/// agg, then its disagg from 2 GPUs) and picks as `cli default` does.
/// A backend's search that the spec would drop (a refusal, no candidate) is
/// a failed experiment; corrupt data stops the whole search.
///
/// `only`: search that mode's experiments alone (`search_agg`,
/// `search_disagg`); the merge still counts every experiment the spec
/// builds, as it decides by the number of tasks.
pub fn search_experiments(
    backends: &mut [(Backend, BackendServers<'_, '_>)],
    q: &SearchQuery,
    only: Option<Mode>,
) -> Result<Experiments, ServingError> {
    let per_backend: &[Mode] = if q.total_gpus >= 2 { &[Mode::Agg, Mode::Disagg] } else { &[Mode::Agg] };
    let tasks = backends.len() * per_backend.len();
    let mut experiments = Vec::new();
    for (backend, servers) in backends.iter_mut() {
        let backend = *backend;
        let modes: Vec<Mode> = per_backend.iter().copied().filter(|m| only.is_none_or(|o| o == *m)).collect();
        let modes = modes.as_slice();
        let name = |mode: Mode| format!("{}_{}", mode.name(), backend.name());
        match servers {
            BackendServers::Refused(reason) => {
                for &mode in modes {
                    experiments.push(Experiment {
                        name: name(mode),
                        mode,
                        backend,
                        outcome: Outcome::Failed(reason.clone()),
                        out_of_memory: false,
                    });
                }
            }
            BackendServers::Ready { server, decode } => {
                for &mode in modes {
                    let searched = match mode {
                        Mode::Agg => server.search_agg(q).map(Outcome::Agg),
                        Mode::Disagg => server.search_disagg_with(decode.as_deref_mut(), q).map(Outcome::Disagg),
                    };
                    let out_of_memory = match &searched {
                        Ok(Outcome::Agg(s)) => s.out_of_memory,
                        Ok(Outcome::Disagg(s)) => s.out_of_memory,
                        _ => false,
                    };
                    let outcome = match searched {
                        Ok(outcome) => outcome,
                        Err(e) if crate::search::skippable(&e) => Outcome::Failed(e.to_string()),
                        Err(e) => return Err(e),
                    };
                    let outcome = match outcome {
                        Outcome::Agg(s) if s.candidates.is_empty() => Outcome::Failed(reason_of(&s.reason)),
                        Outcome::Disagg(s) if s.candidates.is_empty() => Outcome::Failed(reason_of(&s.reason)),
                        kept => kept,
                    };
                    experiments.push(Experiment { name: name(mode), mode, backend, outcome, out_of_memory });
                }
            }
        }
    }
    Ok(pick_experiments(experiments, q, tasks))
}

/// `cli recommend --backend auto` (docs/spec/experiments.md 4.3, 4.6):
/// every backend's experiments at budgets of one node's GPUs (`node_gpus`),
/// doubled up to 64 while an experiment is out of memory, each picked by
/// load match; above two experiments merged per mode as `cli default`
/// merges them, which ranks by tokens/s/gpu (the load-match frames' cluster
/// rate), not by GPUs. The budgets tried, and the last one's experiments.
pub fn recommend_experiments(
    backends: &mut [(Backend, BackendServers<'_, '_>)],
    q: &SearchQuery,
    target: LoadTarget,
) -> Result<(Vec<u32>, Experiments), ServingError> {
    // One system: its node size from any backend's server.
    let node_gpus = backends
        .iter()
        .find_map(|(_, s)| match s {
            BackendServers::Ready { server, .. } => u32::try_from(server.system.num_gpus_per_node).ok(),
            BackendServers::Refused(_) => None,
        })
        .unwrap_or(1);
    let mut budgets = vec![node_gpus.max(1)];
    while let Some(&b) = budgets.last().filter(|&&b| b.saturating_mul(2) <= 64) {
        budgets.push(b * 2);
    }
    let load = Some(LoadMatch { target, node_gpus: node_gpus.max(1) });
    let mut tried = Vec::new();
    for (k, &budget) in budgets.iter().enumerate() {
        tried.push(budget);
        // The tasks are built at one node's budget: its disagg experiments exist from 2 GPUs.
        let per_node = SearchQuery { total_gpus: node_gpus.max(1), ..*q };
        let only = (per_node.total_gpus < 2).then_some(Mode::Agg);
        let qb = SearchQuery { total_gpus: budget, load, ..*q };
        let result = search_experiments(backends, &qb, only)?;
        let retriable = result.experiments.iter().any(|e| e.out_of_memory);
        if !retriable || k + 1 == budgets.len() {
            return Ok((tried, result));
        }
    }
    unreachable!("the last budget returns")
}

fn reason_of(reason: &Option<String>) -> String {
    reason.clone().unwrap_or_else(|| "no candidate".into())
}

/// The spec's picks over the experiments (`main:1957-1962`,
/// `cutils:99-202`).
pub(crate) fn pick_experiments(experiments: Vec<Experiment>, q: &SearchQuery, tasks: usize) -> Experiments {
    if tasks <= 2 {
        // No merge: the experiment with the highest own rank 1, the first on a tie.
        // Under a load target the spec's tie goes to the experiment its
        // thread pool finished first, the disagg one in practice (see
        // `Server::search_recommend`): the later of equals here.
        let later_on_tie = q.load.is_some();
        let mut chosen: Option<(usize, f64)> = None;
        for (i, e) in experiments.iter().enumerate() {
            if let Some(t) = e.best_throughput()
                && chosen.is_none_or(|(_, best)| t > best || (later_on_tie && t == best))
            {
                chosen = Some((i, t));
            }
        }
        return Experiments { experiments, merged: None, chosen: chosen.map(|(i, _)| i) };
    }
    let agg = merge(&experiments, q, |o| match o {
        Outcome::Agg(s) => Some(Picked::of(s)),
        _ => None,
    });
    let disagg = merge(&experiments, q, |o| match o {
        Outcome::Disagg(s) => Some(Picked::of(s)),
        _ => None,
    });
    // max over {agg, disagg} in that order: agg on a tie; "none" without a success.
    let any = experiments.iter().any(Experiment::succeeded);
    let mode = if disagg.best_throughput > agg.best_throughput { &disagg } else { &agg };
    let chosen = any.then(|| mode.best.first().map(|&(e, _)| e)).flatten();
    Experiments { experiments, merged: Some([agg, disagg]), chosen }
}

/// What the merge reads of one experiment's search.
struct Picked<'e> {
    best: &'e [usize],
    pareto: &'e [usize],
    cluster: &'e [f64],
    /// The frontier's x of each candidate (tokens/s/user, or request latency).
    x: Box<dyn Fn(usize, bool) -> f64 + 'e>,
}

impl<'e> Picked<'e> {
    fn of<C: Candidate>(s: &'e Search<C>) -> Picked<'e> {
        Picked {
            best: &s.best,
            pareto: &s.pareto,
            cluster: &s.cluster,
            x: Box::new(move |i, latency| {
                if latency { s.candidates[i].request_latency_ms() } else { s.candidates[i].tokens_per_s_per_user() }
            }),
        }
    }
}

/// A row of a merged front: its x and tokens/s/gpu_cluster.
#[derive(Debug, Clone, Copy)]
struct Point {
    x: f64,
    y: f64,
}

impl Candidate for Point {
    fn tokens_per_s_per_gpu(&self) -> f64 {
        self.y
    }
    fn tokens_per_s_per_user(&self) -> f64 {
        self.x
    }
    fn seq_per_s(&self) -> f64 {
        f64::NAN
    }
    fn concurrency(&self) -> f64 {
        f64::NAN
    }
    fn ttft_ms(&self) -> f64 {
        f64::NAN
    }
    fn tpot_ms(&self) -> f64 {
        f64::NAN
    }
    fn request_latency_ms(&self) -> f64 {
        self.x
    }
    fn num_total_gpus(&self) -> u64 {
        0
    }
    fn group(&self) -> String {
        String::new()
    }
}

/// `_merge_into_top_n` for one serving mode over the kept experiments of
/// that mode, in experiment order.
fn merge(experiments: &[Experiment], q: &SearchQuery, of: impl Fn(&Outcome) -> Option<Picked<'_>>) -> MergedPicks {
    let latency = q.latency_target().is_some();
    let mut best_rows: Vec<(usize, usize)> = Vec::new();
    let mut best_values: Vec<f64> = Vec::new();
    let mut front_rows: Vec<(usize, usize)> = Vec::new();
    let mut points: Vec<Point> = Vec::new();
    for (e, experiment) in experiments.iter().enumerate() {
        if !experiment.succeeded() {
            continue;
        }
        let Some(p) = of(&experiment.outcome) else { continue };
        for &i in p.best {
            best_rows.push((e, i));
            best_values.push(p.cluster[i]);
        }
        for &i in p.pareto {
            front_rows.push((e, i));
            points.push(Point { x: (p.x)(i, latency), y: p.cluster[i] });
        }
    }
    let order = pandas_order(&best_values, false);
    let best: Vec<(usize, usize)> = order.iter().take(q.top_n).map(|&k| best_rows[k]).collect();
    let best_throughput = order.first().map_or(0.0, |&k| best_values[k]);
    let ys: Vec<f64> = points.iter().map(|p| p.y).collect();
    let all: Vec<usize> = (0..points.len()).collect();
    let x = if latency { Point::request_latency_ms } else { Point::tokens_per_s_per_user };
    let pareto = pareto_front(&points, &ys, &all, x, !latency).into_iter().map(|k| front_rows[k]).collect();
    MergedPicks { best, pareto, best_throughput }
}
