//! What the spec picks from a candidates frame (docs/spec/search.md 4, 5):
//! tokens/s/gpu_cluster, the Pareto frontier of tokens/s/gpu_cluster
//! against tokens/s/user, and the best configs under the TPOT limit; with a
//! request-latency target (docs/spec/experiments.md 3.5), the frontier
//! against request latency (minimised) and the best configs under the
//! target.

use std::collections::BTreeMap;
use std::fmt;

use crate::search::sort::{desc, pandas_order, stable_order};
use crate::search::{Candidate, LoadTarget, Search, SearchQuery, Sweep};

/// The serving mode of a search.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Agg,
    Disagg,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Agg => "agg",
            Mode::Disagg => "disagg",
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// `tokens/s/gpu * (T // n) * n / T`, left to right: the per-GPU rate of a
/// cluster of `T` GPUs running `T // n` copies of an `n`-GPU deployment.
pub(crate) fn cluster_rate(tokens_per_s_per_gpu: f64, n: u64, total_gpus: u32) -> f64 {
    let total = u64::from(total_gpus);
    let copies = total.checked_div(n).unwrap_or(0);
    tokens_per_s_per_gpu * copies as f64 * n as f64 / total as f64
}

pub(crate) fn finish<C: Candidate>(sweep: Sweep<C>, q: &SearchQuery) -> Search<C> {
    if let Some(load) = q.load {
        return finish_load_match(sweep, q, load.target);
    }
    let Sweep { candidates, skipped, reason, out_of_memory } = sweep;
    let cluster: Vec<f64> =
        candidates.iter().map(|c| cluster_rate(c.tokens_per_s_per_gpu(), c.num_total_gpus(), q.total_gpus)).collect();
    let rule = Rule::of(q);
    // strict_sla: the frame the frontier and the picks see.
    let frame: Vec<usize> =
        (0..candidates.len()).filter(|&i| !q.strict_sla || (rule.constraint)(&candidates[i]) <= rule.target).collect();
    let pareto = pareto_front(&candidates, &cluster, &frame, rule.x, rule.maximize_x);
    let best = best_configs(&candidates, &cluster, &frame, &rule, q.top_n);
    let best_throughput = best.first().map_or(0.0, |&i| cluster[i]);
    Search { candidates, cluster, pareto, best, best_throughput, skipped, reason, out_of_memory, needed: Vec::new() }
}

impl<C: Candidate> Rule<C> {
    fn of(q: &SearchQuery) -> Rule<C> {
        match q.latency_target() {
            None => Rule { constraint: C::tpot_ms, target: q.tpot_ms, x: C::tokens_per_s_per_user, maximize_x: true },
            Some(r) => {
                Rule { constraint: C::request_latency_ms, target: r, x: C::request_latency_ms, maximize_x: false }
            }
        }
    }
}

/// `pick_load_match` (docs/spec/experiments.md 4.5): tokens/s/gpu_cluster
/// is tokens/s/gpu (no cluster scaling), the frontier as usual over every
/// row (no strict_sla), and the best configs the ones that serve `target`
/// with the fewest GPUs; the best throughput is `1 / GPUs` of rank 1, so
/// that the larger is the cheaper.
fn finish_load_match<C: Candidate>(sweep: Sweep<C>, q: &SearchQuery, target: LoadTarget) -> Search<C> {
    let Sweep { candidates, skipped, reason, out_of_memory } = sweep;
    let cluster: Vec<f64> = candidates.iter().map(C::tokens_per_s_per_gpu).collect();
    let rule = Rule::of(q);
    let all: Vec<usize> = (0..candidates.len()).collect();
    let pareto = pareto_front(&candidates, &cluster, &all, rule.x, rule.maximize_x);
    let constraint = |i: usize| (rule.constraint)(&candidates[i]);
    let under: Vec<usize> = all.iter().copied().filter(|&i| constraint(i) <= rule.target).collect();
    let exceeded = under.is_empty();
    let rows = if exceeded { all } else { under };
    // np.ceil(L / load).astype(int).clip(lower=1): a non-finite quotient
    // casts to i64::MIN on the spec's platform, then clips to 1.
    let replicas = |i: usize| {
        let c = &candidates[i];
        let r = match target {
            LoadTarget::RequestRate(l) => (l / c.seq_per_s()).ceil(),
            LoadTarget::Concurrency(l) => (l / c.concurrency()).ceil(),
        };
        let r = if r.is_finite() && r.abs() < 9.2e18 { r as i64 } else { i64::MIN };
        r.max(1)
    };
    let needed = |i: usize| {
        let r = replicas(i);
        (r, r.saturating_mul(i64::try_from(candidates[i].num_total_gpus()).unwrap_or(i64::MAX)))
    };
    // groupby(key)[col].idxmin(): keys in string order, the first minimum
    // in frame order (NaN never a minimum).
    let mut groups: BTreeMap<String, usize> = BTreeMap::new();
    let worse = |a: usize, b: usize| if exceeded { constraint(a) < constraint(b) } else { needed(a).1 < needed(b).1 };
    for &i in &rows {
        if exceeded && constraint(i).is_nan() {
            continue;
        }
        groups
            .entry(candidates[i].group())
            .and_modify(|best| {
                if worse(i, *best) {
                    *best = i;
                }
            })
            .or_insert(i);
    }
    let picked: Vec<usize> = groups.into_values().collect();
    let order = if exceeded {
        let values: Vec<f64> = picked.iter().map(|&i| constraint(i)).collect();
        pandas_order(&values, true)
    } else {
        stable_order(picked.len(), |a, b| {
            let (ia, ib) = (picked[a], picked[b]);
            needed(ia).1.cmp(&needed(ib).1).then(desc(cluster[ia], cluster[ib]))
        })
    };
    let best: Vec<usize> = order.into_iter().take(q.top_n).map(|k| picked[k]).collect();
    let needed: Vec<(i64, i64)> = best.iter().map(|&i| needed(i)).collect();
    let best_throughput = needed.first().map_or(0.0, |&(_, gpus)| if gpus > 0 { 1.0 / gpus as f64 } else { 0.0 });
    Search { candidates, cluster, pareto, best, best_throughput, skipped, reason, out_of_memory, needed }
}

/// What the picks read: the SLA's column and target, and the frontier's x
/// axis, which is also the best configs' second key after
/// tokens/s/gpu_cluster (descending when larger is better). TPOT limit:
/// tpot, tokens/s/user maximised; request-latency target: request latency
/// for both, minimised.
struct Rule<C> {
    constraint: fn(&C) -> f64,
    target: f64,
    x: fn(&C) -> f64,
    maximize_x: bool,
}

/// The rows of `frame` no other row beats on both `x` (larger is better
/// when `maximize_x`, else smaller) and tokens/s/gpu_cluster, by `x`
/// ascending (of rows with the same two values, the first in that order).
///
/// The spec sorts the rows by `x` and walks them, letting each row still
/// standing remove every row with no coordinate above its own (on `-x`
/// when `x` is minimised); what stands at the end is exactly the rows no
/// row with other coordinates weakly dominates, the first in the walk of
/// each group of equal coordinates. That set is found here in one pass from
/// the best `x` down.
pub(crate) fn pareto_front<C: Candidate>(
    candidates: &[C],
    cluster: &[f64],
    frame: &[usize],
    x: fn(&C) -> f64,
    maximize_x: bool,
) -> Vec<usize> {
    let x = |i: usize| x(&candidates[i]);
    let rows: Vec<usize> = frame.iter().copied().filter(|&i| x(i).is_finite() && cluster[i].is_finite()).collect();
    let xs: Vec<f64> = rows.iter().map(|&i| x(i)).collect();
    // The walk: by x ascending (pandas' sort).
    let walk: Vec<usize> = pandas_order(&xs, true).into_iter().map(|k| rows[k]).collect();
    // Positions of the walk from the worst x to the best.
    let by_worth: Vec<usize> = if maximize_x { (0..walk.len()).collect() } else { (0..walk.len()).rev().collect() };
    let mut keep = vec![false; walk.len()];
    // The highest y among rows of a strictly better x.
    let mut above = f64::NEG_INFINITY;
    let mut end = by_worth.len();
    while end > 0 {
        // The group of equal x: by_worth[start..end].
        let gx = x(walk[by_worth[end - 1]]);
        let mut start = end;
        while start > 0 && x(walk[by_worth[start - 1]]) == gx {
            start -= 1;
        }
        let group = &by_worth[start..end];
        let top = group.iter().map(|&k| cluster[walk[k]]).fold(f64::NEG_INFINITY, f64::max);
        if top > above {
            // The first row of the walk in the group at its top y survives.
            if let Some(&k) = group.iter().filter(|&&k| cluster[walk[k]] == top).min() {
                keep[k] = true;
            }
            above = top;
        }
        end = start;
    }
    let survivors: Vec<usize> = walk.iter().zip(&keep).filter(|(_, k)| **k).map(|(&i, _)| i).collect();
    let xs: Vec<f64> = survivors.iter().map(|&i| x(i)).collect();
    pandas_order(&xs, true).into_iter().map(|k| survivors[k]).collect()
}

/// One row per layout (agg `parallel`, disagg `(d)parallel`): its best
/// tokens/s/gpu_cluster under the rule's limit (every row when none meets
/// it), the top `top_n` by cluster rate then the rule's second key (TPOT
/// limit: tokens/s/user descending; request-latency target: request
/// latency ascending); when none meets the limit, by the constraint.
fn best_configs<C: Candidate>(
    candidates: &[C],
    cluster: &[f64],
    frame: &[usize],
    rule: &Rule<C>,
    top_n: usize,
) -> Vec<usize> {
    let constraint = |i: usize| (rule.constraint)(&candidates[i]);
    let under: Vec<usize> = frame.iter().copied().filter(|&i| constraint(i) <= rule.target).collect();
    let exceeded = under.is_empty();
    let rows: Vec<usize> = if exceeded { frame.to_vec() } else { under }
        .into_iter()
        .filter(|&i| constraint(i).is_finite() && cluster[i].is_finite())
        .collect();
    // groupby(key).idxmax(): keys in string order, the first maximum in frame order.
    let mut groups: BTreeMap<String, usize> = BTreeMap::new();
    for &i in &rows {
        groups
            .entry(candidates[i].group())
            .and_modify(|best| {
                if cluster[i] > cluster[*best] {
                    *best = i;
                }
            })
            .or_insert(i);
    }
    let picked: Vec<usize> = groups.into_values().collect();
    let order = if exceeded {
        let values: Vec<f64> = picked.iter().map(|&i| constraint(i)).collect();
        pandas_order(&values, true)
    } else {
        let second = |i: usize| (rule.x)(&candidates[i]);
        stable_order(picked.len(), |a, b| {
            let (ia, ib) = (picked[a], picked[b]);
            let then = if rule.maximize_x { desc(second(ia), second(ib)) } else { desc(second(ib), second(ia)) };
            desc(cluster[ia], cluster[ib]).then(then)
        })
    };
    order.into_iter().take(top_n).map(|k| picked[k]).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_rate_counts_whole_copies() {
        assert_eq!(cluster_rate(100.0, 4, 8), 100.0);
        assert_eq!(cluster_rate(7170.296, 5, 8), 7170.296 * 5.0 / 8.0);
        assert_eq!(cluster_rate(100.0, 3, 8), 100.0 * 2.0 * 3.0 / 8.0);
        assert_eq!(cluster_rate(100.0, 16, 8), 0.0);
    }
}
