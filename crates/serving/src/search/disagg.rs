//! `sweep_disagg` (docs/spec/search.md 3): static prefill and decode worker
//! rows per layout and batch size; per TPOT value of the sweep, the
//! prefill workers within the TTFT limit, the decode workers under the TPOT
//! value, their worker counts matched, the best deployment per decode
//! layout, top 5; the union without repeats, by tokens/s/gpu.

use std::collections::{BTreeMap, BTreeSet};

use foldhash::{HashMap, HashSet};

use crate::backend::Backend;
use crate::disagg::{StaticRow, combine};
use crate::error::ServingError;
use crate::parallel::Parallel;
use crate::search::sort::{desc, pandas_order, stable_order};
use crate::search::space::Space;
use crate::search::{DisaggCandidate, SearchQuery, Skipped, Sweep, skippable};
use crate::server::Server;

/// Worker counts tried per side.
const MAX_WORKERS: u32 = 32;
/// Prefill rows kept per TPOT value, decode rows per decode layout.
const MAX_PREFILL_ROWS: usize = 32;
const MAX_DECODE_ROWS_PER_LAYOUT: usize = 16;
/// Deployments kept per TPOT value.
const TOP_K: usize = 5;
/// The decode batch budget (`decode_max_batch_size`).
const DECODE_MAX_BATCH: u32 = 512;
/// The TTFT of an autoscaled prefill pool, and the rate-matching degradations.
const TTFT_CORRECTION: f64 = 1.8;
const PREFILL_DEGRADATION: f64 = 0.9;
const DECODE_DEGRADATION: f64 = 0.92;

/// `1..15, 16..30 by 2, 32..124 by 4, 128..504 by 8, 512`, up to the budget.
fn decode_batches() -> Vec<u32> {
    (1..16)
        .chain((16..32).step_by(2))
        .chain((32..128).step_by(4))
        .chain((128..512).step_by(8))
        .chain([512])
        .filter(|&b| b <= DECODE_MAX_BATCH)
        .collect()
}

/// `(prefill workers, decode workers, GPUs)` in the spec's visiting order.
type WorkerCounts = Vec<(u32, u32, u64)>;

/// A static worker row and its layout label (the decode groups key on it).
struct Worker {
    row: StaticRow,
    label: String,
}

impl Server<'_> {
    pub(crate) fn sweep_disagg(
        &mut self,
        q: &SearchQuery,
        space: &Space,
        decode_server: Option<&mut Server<'_>>,
    ) -> Result<Sweep<DisaggCandidate>, ServingError> {
        let mut skipped = Vec::new();
        // The spec prices the prefill role first and gives up there, before
        // any decode worker, when it has no row; its message names the
        // role's last layout that raised.
        let no_workers = |side: &str, role_skips: &[Skipped]| {
            role_skips.last().map_or_else(
                || format!("no {side} worker fits in GPU memory at any parallel config"),
                |s| format!("no {side} worker priced: {}", s.reason),
            )
        };
        // Prefill batches: 1 ..= (1 * isl) // isl.
        let prefill = self.workers(q, &space.prefill, &[1], true, &mut skipped)?;
        if prefill.is_empty() {
            let reason = no_workers("prefill", &skipped);
            let out_of_memory = skipped.is_empty();
            return Ok(Sweep { candidates: Vec::new(), skipped, reason: Some(reason), out_of_memory });
        }
        let prefill_skips = skipped.len();
        // Decode workers on their own system's server (experiments.md 1.4).
        let decode = match decode_server {
            Some(server) => server.workers(q, &space.decode, &decode_batches(), false, &mut skipped)?,
            None => self.workers(q, &space.decode, &decode_batches(), false, &mut skipped)?,
        };
        if decode.is_empty() {
            let reason = no_workers("decode", &skipped[prefill_skips..]);
            let out_of_memory = skipped.len() == prefill_skips;
            return Ok(Sweep { candidates: Vec::new(), skipped, reason: Some(reason), out_of_memory });
        }
        let require_same_tp = self.backend == Backend::Sglang;
        let workload = (q.isl, q.osl, q.prefix);

        // The prefill candidates depend on the TTFT limit only: one list per
        // distinct limit (one under the TPOT sweep).
        let prefill_top_under = |ttft_limit: f64| -> Vec<usize> {
            let within: Vec<usize> =
                (0..prefill.len()).filter(|&i| prefill[i].row.ttft * TTFT_CORRECTION < ttft_limit).collect();
            let order = stable_order(within.len(), |a, b| {
                let (pa, pb) = (&prefill[within[a]].row, &prefill[within[b]].row);
                desc(pa.seq_per_s_per_gpu, pb.seq_per_s_per_gpu).then(pa.worker.global_bs.cmp(&pb.worker.global_bs))
            });
            order.into_iter().take(MAX_PREFILL_ROWS).map(|k| within[k]).collect()
        };
        let limits = q.limits();
        // Under the TPOT sweep the TTFT limit is fixed and the decode set
        // only grows along the list (see below); not under a request-latency
        // target's pairs.
        let growing = q.latency_target().is_none();
        let mut prefill_tops: Vec<(f64, Vec<usize>)> = Vec::new();

        // match_workers per (prefill, decode) row, priced once.
        let mut matched: Vec<Option<Option<(u32, u32)>>> = vec![None; prefill.len() * decode.len()];
        let mut counts_of: HashMap<(u64, u64), WorkerCounts> = HashMap::default();
        let mut seen: HashSet<(usize, usize)> = HashSet::default();
        let mut found: Vec<DisaggCandidate> = Vec::new();
        // The decode layouts in label string order (the spec's groupby),
        // and each worker's place in it: labels are compared once, not
        // per TPOT value.
        let labels: BTreeSet<&str> = decode.iter().map(|d| d.label.as_str()).collect();
        let rank: BTreeMap<&str, usize> = labels.into_iter().enumerate().map(|(r, l)| (l, r)).collect();
        let group_of: Vec<usize> = decode.iter().map(|d| rank[d.label.as_str()]).collect();
        let mut groups: Vec<Vec<usize>> = vec![Vec::new(); rank.len()];
        let mut last_under = 0;
        for &(ttft_limit, t) in &limits {
            let k = match prefill_tops.iter().position(|(l, _)| *l == ttft_limit) {
                Some(k) => k,
                None => {
                    prefill_tops.push((ttft_limit, prefill_top_under(ttft_limit)));
                    prefill_tops.len() - 1
                }
            };
            let prefill_top = &prefill_tops[k].1;
            if prefill_top.is_empty() {
                continue;
            }
            // Decode workers under t (strict, on the rounded tpot), by layout in string order.
            groups.iter_mut().for_each(Vec::clear);
            let mut under = 0;
            for (i, d) in decode.iter().enumerate() {
                if d.row.tpot < t * 1.0 && d.row.tpot > t * 0.0 {
                    groups[group_of[i]].push(i);
                    under += 1;
                }
            }
            // Under the TPOT sweep the set only grows with t (the prefill
            // side does not depend on it): as many workers as at the
            // previous t is the same deployments again, all repeats.
            if growing && under == last_under {
                continue;
            }
            last_under = under;
            let mut best: Vec<((usize, usize), DisaggCandidate)> = Vec::new();
            for members in groups.iter().filter(|m| !m.is_empty()) {
                let rates: Vec<f64> = members.iter().map(|&i| decode[i].row.seq_per_s_per_gpu).collect();
                let mut top: Option<(f64, u64, (usize, usize), DisaggCandidate)> = None;
                for k in pandas_order(&rates, false).into_iter().take(MAX_DECODE_ROWS_PER_LAYOUT) {
                    let di = members[k];
                    let d = &decode[di].row;
                    for &pi in prefill_top {
                        let p = &prefill[pi].row;
                        if require_same_tp && p.worker.parallel.tp != d.worker.parallel.tp {
                            continue;
                        }
                        let pair = *matched[pi * decode.len() + di].get_or_insert_with(|| {
                            let key = (p.gpus(), d.gpus());
                            let counts =
                                counts_of.entry(key).or_insert_with(|| worker_counts(key.0, key.1, &space.deployments));
                            match_workers(p, d, counts)
                        });
                        let Some((np, nd)) = pair else { continue };
                        let (estimate, tps_gpu) = combine(p, np, d, nd, workload);
                        let gpus = estimate.num_total_gpus;
                        // Python's max over (tokens/s/gpu, -gpus): the first maximum.
                        let better = match &top {
                            None => true,
                            Some((b_tps, b_gpus, ..)) => tps_gpu > *b_tps || (tps_gpu == *b_tps && gpus < *b_gpus),
                        };
                        if better {
                            top = Some((tps_gpu, gpus, (pi, di), DisaggCandidate { estimate }));
                        }
                    }
                }
                if let Some((_, _, key, candidate)) = top {
                    best.push((key, candidate));
                }
            }
            let tps: Vec<f64> = best.iter().map(|(_, c)| c.estimate.tokens_per_s_per_gpu).collect();
            for k in pandas_order(&tps, false).into_iter().take(TOP_K) {
                // drop_duplicates: a deployment's row is a function of its worker pair.
                if seen.insert(best[k].0) {
                    found.push(best[k].1.clone());
                }
            }
        }
        let tps: Vec<f64> = found.iter().map(|c| c.estimate.tokens_per_s_per_gpu).collect();
        let mut slots: Vec<Option<DisaggCandidate>> = found.into_iter().map(Some).collect();
        let candidates: Vec<DisaggCandidate> =
            pandas_order(&tps, false).into_iter().filter_map(|k| slots[k].take()).collect();
        let reason = candidates.is_empty().then(|| match q.latency_target() {
            Some(r) => format!(
                "no disaggregated deployment meets the request-latency target of {r} ms at any of its (TTFT, TPOT) \
                 pairs"
            ),
            None => {
                format!("no disaggregated deployment meets the TTFT limit of {} ms at any TPOT of the sweep", q.ttft_ms)
            }
        });
        Ok(Sweep { candidates, skipped, reason, out_of_memory: false })
    }

    /// The static worker rows of one role, layout by layout, batch sizes
    /// ascending until one does not fit. A layout that raises keeps the
    /// rows it priced before.
    fn workers(
        &mut self,
        q: &SearchQuery,
        layouts: &[Parallel],
        batches: &[u32],
        prefill: bool,
        skipped: &mut Vec<Skipped>,
    ) -> Result<Vec<Worker>, ServingError> {
        let per_layout = self.map_parallel(layouts, q.threads, |server, parallel| {
            server.layout_workers(q, parallel, batches, prefill)
        })?;
        let mut out = Vec::new();
        for result in per_layout {
            let (rows, skip) = result?;
            out.extend(rows);
            skipped.extend(skip);
        }
        Ok(out)
    }

    fn layout_workers(
        &mut self,
        q: &SearchQuery,
        parallel: &Parallel,
        batches: &[u32],
        prefill: bool,
    ) -> Result<(Vec<Worker>, Option<Skipped>), ServingError> {
        let mut out = Vec::new();
        for &b in batches {
            let row = if prefill {
                self.prefill_row(parallel, b, 1, q.isl, q.osl, q.prefix)
            } else {
                self.decode_row(parallel, b, 1, q.isl, q.osl, q.prefix)
            };
            match row {
                Ok(mut row) if row.fits => {
                    // The search sets a dense model's MoE widths to 1 and reports them.
                    let w = &mut row.worker;
                    w.moe_tp = w.moe_tp.or(parallel.moe_tp.map(i64::from));
                    w.moe_ep = w.moe_ep.or(parallel.moe_ep.map(i64::from));
                    if !prefill {
                        // The search's decode role keeps the checkpoint's FMHA
                        // label (a decode step reads no FMHA table).
                        w.quants.fmha = self.step.checkpoint_fmha();
                    }
                    let label = row.worker.label().to_string();
                    out.push(Worker { row, label });
                }
                Ok(_) => break,
                Err(e) if skippable(&e) => {
                    return Ok((out, Some(Skipped { parallel: *parallel, reason: e.to_string() })));
                }
                Err(e) => return Err(e),
            }
        }
        Ok((out, None))
    }
}

/// The worker counts a deployment of a prefill worker of `pg` GPUs and a
/// decode worker of `dg` GPUs may have (docs/spec/search.md 3.4), in the
/// spec's visiting order: decode workers outer, prefill inner, 1..=32 each;
/// a deployment's GPUs must be one of `deployments` (all sizes when there
/// is no list). They depend on the two GPU counts only, so a sweep lists
/// them once per pair of counts, not once per pair of rows.
fn worker_counts(pg: u64, dg: u64, deployments: &[u64]) -> WorkerCounts {
    let mut out = Vec::new();
    for nd in 1..=MAX_WORKERS {
        let decode_gpus = dg * u64::from(nd);
        if deployments.is_empty() {
            out.extend((1..=MAX_WORKERS).map(|np| (np, nd, pg * u64::from(np) + decode_gpus)));
            continue;
        }
        // The prefill counts whose deployment size is allowed, ascending
        // (sizes ascend with np): the same visiting order as trying every np.
        for &n in deployments {
            let Some(rest) = n.checked_sub(decode_gpus) else { continue };
            if pg == 0 || rest % pg != 0 {
                continue;
            }
            if let Ok(np) = u32::try_from(rest / pg)
                && (1..=MAX_WORKERS).contains(&np)
            {
                out.push((np, nd, n));
            }
        }
    }
    out
}

/// The worker counts of a prefill and a decode worker among `counts`
/// (their [`worker_counts`]): the first strictly best
/// `min(prefill rate, decode rate) / gpus`.
fn match_workers(p: &StaticRow, d: &StaticRow, counts: &[(u32, u32, u64)]) -> Option<(u32, u32)> {
    let (mut best, mut answer) = (0.0f64, None);
    for &(np, nd, n) in counts {
        let prefill_rate = p.seq_per_s * f64::from(np) * PREFILL_DEGRADATION;
        let decode_rate = d.seq_per_s * f64::from(nd) * DECODE_DEGRADATION;
        let rate = if decode_rate < prefill_rate { decode_rate } else { prefill_rate };
        let v = rate / n as f64;
        if v > best {
            (best, answer) = (v, Some((np, nd)));
        }
    }
    answer
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_decode_batches() {
        let b = decode_batches();
        assert_eq!(b.len(), 96);
        assert_eq!((b[14], b[15], b[22], b[23], b[95]), (15, 16, 30, 32, 512));
    }

    /// The listed counts are the pairs of the spec's double loop (nd outer,
    /// np inner, 1..=32 each) whose GPU total is an allowed size, in that
    /// order, for every worker size the search space has.
    #[test]
    fn worker_counts_visit_the_spec_loop_in_order() {
        for total in [1u32, 4, 8, 32, 128, 512] {
            let deployments: Vec<u64> = [1u64, 2, 4, 8]
                .into_iter()
                .chain((16..=128).step_by(8))
                .filter(|&g| g <= u64::from(total.min(128)))
                .collect();
            for pg in [1u64, 2, 3, 4, 8, 16, 32, 64] {
                for dg in [1u64, 2, 4, 6, 8, 16, 64] {
                    let mut expected = Vec::new();
                    for nd in 1..=MAX_WORKERS {
                        for np in 1..=MAX_WORKERS {
                            let n = pg * u64::from(np) + dg * u64::from(nd);
                            if deployments.contains(&n) {
                                expected.push((np, nd, n));
                            }
                        }
                    }
                    assert_eq!(worker_counts(pg, dg, &deployments), expected, "pg {pg} dg {dg} total {total}");
                }
            }
        }
        let all = worker_counts(2, 4, &[]);
        assert_eq!((all.len(), all[0], all[32]), (1024, (1, 1, 6), (1, 2, 10)));
    }
}
