//! What the spec picks from a candidates frame (docs/spec/search.md 4, 5):
//! tokens/s/gpu_cluster, the Pareto frontier of tokens/s/gpu_cluster
//! against tokens/s/user, and the best configs under the TPOT limit.

use std::collections::BTreeMap;
use std::fmt;

use crate::search::sort::{desc, pandas_order, stable_order};
use crate::search::{Candidate, Search, SearchQuery, Sweep};

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
    let Sweep { candidates, skipped, reason } = sweep;
    let cluster: Vec<f64> =
        candidates.iter().map(|c| cluster_rate(c.tokens_per_s_per_gpu(), c.num_total_gpus(), q.total_gpus)).collect();
    // strict_sla: the frame the frontier and the picks see.
    let frame: Vec<usize> =
        (0..candidates.len()).filter(|&i| !q.strict_sla || candidates[i].tpot_ms() <= q.tpot_ms).collect();
    let pareto = pareto_front(&candidates, &cluster, &frame);
    let best = best_configs(&candidates, &cluster, &frame, q);
    let best_throughput = best.first().map_or(0.0, |&i| cluster[i]);
    Search { candidates, cluster, pareto, best, best_throughput, skipped, reason }
}

/// The rows of `frame` no other row beats on both tokens/s/user and
/// tokens/s/gpu_cluster, by tokens/s/user ascending (of rows with the same
/// two values, the first in that order).
///
/// The spec walks the rows by tokens/s/user and lets each row still
/// standing remove every row with no coordinate above its own; what stands
/// at the end is exactly the rows no row with other coordinates weakly
/// dominates, the first of each group of equal coordinates. That set is
/// found here in one pass from the largest tokens/s/user down.
fn pareto_front<C: Candidate>(candidates: &[C], cluster: &[f64], frame: &[usize]) -> Vec<usize> {
    let rows: Vec<usize> = frame
        .iter()
        .copied()
        .filter(|&i| candidates[i].tokens_per_s_per_user().is_finite() && cluster[i].is_finite())
        .collect();
    let x = |i: usize| candidates[i].tokens_per_s_per_user();
    let xs: Vec<f64> = rows.iter().map(|&i| x(i)).collect();
    let sorted: Vec<usize> = pandas_order(&xs, true).into_iter().map(|k| rows[k]).collect();
    let mut keep = vec![false; sorted.len()];
    // The highest y among rows of strictly larger x.
    let mut above = f64::NEG_INFINITY;
    let mut end = sorted.len();
    while end > 0 {
        // The group of equal x: sorted[start..end].
        let gx = x(sorted[end - 1]);
        let mut start = end;
        while start > 0 && x(sorted[start - 1]) == gx {
            start -= 1;
        }
        let top = sorted[start..end].iter().map(|&i| cluster[i]).fold(f64::NEG_INFINITY, f64::max);
        if top > above {
            // The first row of the group at its top y survives.
            if let Some(k) = (start..end).find(|&k| cluster[sorted[k]] == top) {
                keep[k] = true;
            }
            above = top;
        }
        end = start;
    }
    let survivors: Vec<usize> = sorted.iter().zip(&keep).filter(|(_, k)| **k).map(|(&i, _)| i).collect();
    let xs: Vec<f64> = survivors.iter().map(|&i| x(i)).collect();
    pandas_order(&xs, true).into_iter().map(|k| survivors[k]).collect()
}

/// One row per layout (agg `parallel`, disagg `(d)parallel`): its best
/// tokens/s/gpu_cluster under the TPOT limit (every row when none meets
/// it), the top `top_n` by cluster rate then tokens/s/user.
fn best_configs<C: Candidate>(candidates: &[C], cluster: &[f64], frame: &[usize], q: &SearchQuery) -> Vec<usize> {
    let under: Vec<usize> = frame.iter().copied().filter(|&i| candidates[i].tpot_ms() <= q.tpot_ms).collect();
    let exceeded = under.is_empty();
    let rows: Vec<usize> = if exceeded { frame.to_vec() } else { under }
        .into_iter()
        .filter(|&i| !candidates[i].tpot_ms().is_nan() && cluster[i].is_finite())
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
        let tpot: Vec<f64> = picked.iter().map(|&i| candidates[i].tpot_ms()).collect();
        pandas_order(&tpot, true)
    } else {
        stable_order(picked.len(), |a, b| {
            let (ia, ib) = (picked[a], picked[b]);
            desc(cluster[ia], cluster[ib])
                .then(desc(candidates[ia].tokens_per_s_per_user(), candidates[ib].tokens_per_s_per_user()))
        })
    };
    order.into_iter().take(q.top_n).map(|k| picked[k]).collect()
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
