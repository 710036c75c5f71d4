//! `sweep_agg` (docs/spec/search.md 2): per layout, a walk over batch sizes
//! and context-token budgets priced by the agg estimate; per TPOT value of
//! the sweep, the points within both limits, top 10 by seq/s; the union
//! without repeats, by tokens/s/gpu.

use aicsql_tables::pymath::{np_round, py_floordiv};

use crate::agg::{AggEstimate, AggQuery};
use crate::error::ServingError;
use crate::parallel::Parallel;
use crate::search::sort::pandas_order;
use crate::search::{AggCandidate, SearchQuery, Skipped, Sweep, skippable};
use crate::server::Server;

/// Rows kept per (layout, TPOT) call.
const TOP_K: usize = 10;
/// The agg sweep's largest batch.
const MAX_BATCH: u32 = 512;
/// The context-token stride of the budget list.
const CTX_STRIDE: u32 = 512;

/// `1..15, 16..28 by 4, 32..56 by 8, 64..240 by 16, 256..480 by 32, 512,
/// 768, 1024`, up to `MAX_BATCH`.
fn batch_sizes() -> Vec<u32> {
    (1..16)
        .chain((16..32).step_by(4))
        .chain((32..64).step_by(8))
        .chain((64..256).step_by(16))
        .chain((256..512).step_by(32))
        .chain([512, 768, 1024])
        .filter(|&b| b <= MAX_BATCH)
        .collect()
}

/// The context-token budgets of one isl (`_agg_ctx_tokens_list`,
/// docs/spec/search.md 2.1, options.md 3.3): strides of 512 up to 8192,
/// then of max(1024, 512, max_ctx / 8), up to max_ctx = max(8192, 2 isl);
/// with chunked prefill off both strides are rounded up to multiples of
/// isl. isl and 2 isl are added when absent, and the list is sorted.
fn ctx_budgets(isl: u32, chunked_prefill: bool) -> Vec<u32> {
    let isl = u64::from(isl);
    let max_ctx = 8192u64.max(2 * isl);
    let stride = u64::from(CTX_STRIDE).max(8192 / 16);
    let large = 1024u64.max(stride).max(max_ctx / 8);
    let (stride, large) = if chunked_prefill {
        (stride, large)
    } else {
        // max(isl, stride) and int(ceil(large / isl) * isl)
        (isl.max(stride), large.div_ceil(isl) * isl)
    };
    let mut out: Vec<u64> = Vec::new();
    let mut c = 0u64;
    loop {
        c += if c < 8192 { stride } else { large };
        if c > max_ctx {
            break;
        }
        out.push(c);
    }
    for extra in [isl, 2 * isl] {
        if !out.contains(&extra) {
            out.push(extra);
        }
    }
    out.sort_unstable();
    out.into_iter().filter_map(|c| u32::try_from(c).ok()).collect()
}

/// The walk's balance-equivalent skip (sweep:306-312, docs/spec/search.md 2.2
/// step 3). The spec's `capped_b` is made once per (layout, TPOT) call, before
/// the batch loop (sweep:294, sweep:298), so it spans every batch size of the
/// walk (which does not depend on the TPOT value): one `BalanceSkip` per
/// layout, not per batch size.
#[derive(Debug, Default)]
struct BalanceSkip {
    capped: Vec<f64>,
}

impl BalanceSkip {
    /// Whether the point (b, c) is skipped: its `balance_score` is above 1 and
    /// its `b // balance_score` (above 1) was already recorded; otherwise the
    /// value is recorded (also when it is 1 or less) and the point is priced.
    fn skip(&mut self, isl: f64, osl: f64, b: f64, c: f64) -> bool {
        let balance = isl * b / c / osl;
        if balance > 1.0 {
            let g = py_floordiv(b, balance);
            if g > 1.0 && self.capped.contains(&g) {
                return true;
            }
            self.capped.push(g);
        }
        false
    }
}

/// A priced point of a layout's walk.
struct Point {
    /// Unrounded, for the limits.
    ttft: f64,
    tpot: f64,
    /// The row as the frame holds it.
    row: AggEstimate,
}

/// One layout's walk: its points, whether any point fitted the model in
/// GPU memory, and whether any also fitted the KV cache (the spec's
/// `saw_model_fit`, `saw_memory_fit`, which pick the reason when no layout
/// gives a candidate).
struct Walk {
    points: Vec<Point>,
    model_fit: bool,
    memory_fit: bool,
}

/// The frame's rounding (`DataFrame.round(3)` on float columns).
fn rounded(mut e: AggEstimate, parallel: &Parallel) -> AggEstimate {
    let r = |x: &mut f64| *x = np_round(*x, 3);
    for x in [
        &mut e.request_rate,
        &mut e.ttft_ms,
        &mut e.tpot_ms,
        &mut e.request_latency_ms,
        &mut e.encoder_ms,
        &mut e.encoder_memory_gib,
        &mut e.seq_per_s,
        &mut e.seq_per_s_per_gpu,
        &mut e.tokens_per_s,
        &mut e.tokens_per_s_per_gpu,
        &mut e.tokens_per_s_per_user,
        &mut e.memory.total,
        &mut e.balance_score,
        &mut e.num_ctx_reqs,
        &mut e.num_gen_reqs,
        &mut e.num_tokens,
    ] {
        r(x);
    }
    // The search sets a dense model's MoE widths to 1 and reports them.
    e.moe_tp = e.moe_tp.or(parallel.moe_tp.map(i64::from));
    e.moe_ep = e.moe_ep.or(parallel.moe_ep.map(i64::from));
    e
}

impl Server<'_> {
    pub(crate) fn sweep_agg(
        &mut self,
        q: &SearchQuery,
        layouts: &[Parallel],
    ) -> Result<Sweep<AggCandidate>, ServingError> {
        let batches = batch_sizes();
        let budgets = ctx_budgets(q.isl, q.chunked_prefill);
        let mut skipped = Vec::new();
        let mut walks: Vec<Vec<Point>> = Vec::with_capacity(layouts.len());
        let (mut model_fit, mut memory_fit) = (false, false);
        let walked =
            self.map_parallel(layouts, q.threads, |server, parallel| server.walk(q, parallel, &batches, &budgets))?;
        for (parallel, walk) in layouts.iter().zip(walked) {
            match walk {
                Ok(walk) => {
                    model_fit |= walk.model_fit;
                    memory_fit |= walk.memory_fit;
                    walks.push(walk.points);
                }
                Err(e) if skippable(&e) => {
                    skipped.push(Skipped { parallel: *parallel, reason: e.to_string() });
                    walks.push(Vec::new());
                }
                Err(e) => return Err(e),
            }
        }
        // Per (layout, limits): the points within both limits, top 10 by seq/s.
        let limits = q.limits();
        // Under the TPOT sweep the TTFT limit is fixed, so the kept set only
        // grows along the list; under a request-latency target's pairs the
        // TTFT limit rises as the TPOT limit falls, and it does not.
        let growing = q.latency_target().is_none();
        let mut picked: Vec<(usize, usize)> = Vec::new();
        let mut seen = foldhash::HashSet::default();
        for (layout, points) in walks.iter().enumerate() {
            if points.is_empty() {
                continue;
            }
            let mut last_kept = 0;
            for &(ttft_limit, tpot_limit) in &limits {
                let kept: Vec<usize> = (0..points.len())
                    .filter(|&i| points[i].tpot <= tpot_limit && points[i].ttft <= ttft_limit)
                    .collect();
                // A growing set as large as at the previous limit is the
                // same set, the same frame, all repeats.
                if kept.is_empty() || (growing && kept.len() == last_kept) {
                    continue;
                }
                last_kept = kept.len();
                let seq_s: Vec<f64> = kept.iter().map(|&i| points[i].row.seq_per_s).collect();
                for k in pandas_order(&seq_s, false).into_iter().take(TOP_K) {
                    // drop_duplicates(keep="first"): a point's row is a
                    // function of (layout, batch, budget).
                    if seen.insert((layout, kept[k])) {
                        picked.push((layout, kept[k]));
                    }
                }
            }
        }
        let tps_gpu: Vec<f64> = picked.iter().map(|&(l, i)| walks[l][i].row.tokens_per_s_per_gpu).collect();
        let candidates: Vec<AggCandidate> = pandas_order(&tps_gpu, false)
            .into_iter()
            .map(|k| {
                let (l, i) = picked[k];
                AggCandidate { estimate: walks[l][i].row.clone() }
            })
            .collect();
        let reason = candidates.is_empty().then(|| {
            // The spec's order of reasons: any layout that raised first,
            // naming the last one visited (its "Last exception").
            if let Some(last) = skipped.last() {
                format!("no layout priced a point: {}", last.reason)
            } else if !model_fit {
                "the model does not fit in GPU memory at any parallel config".to_string()
            } else if !memory_fit {
                "the batch sizes exceed the KV-cache capacity (TRT-LLM's free_gpu_memory_fraction budget) at every \
                 parallel config"
                    .to_string()
            } else if let Some(r) = q.latency_target() {
                format!("no config meets the request-latency target of {r} ms at any of its (TTFT, TPOT) pairs")
            } else {
                format!("no config meets the TTFT limit of {} ms at any TPOT of the sweep", q.ttft_ms)
            }
        });
        let out_of_memory = candidates.is_empty() && skipped.is_empty() && !(model_fit && memory_fit);
        Ok(Sweep { candidates, skipped, reason, out_of_memory })
    }

    /// The priced points of one layout in walk order. An error of any point
    /// drops the layout.
    fn walk(
        &mut self,
        q: &SearchQuery,
        parallel: &Parallel,
        batches: &[u32],
        budgets: &[u32],
    ) -> Result<Walk, ServingError> {
        let (isl, osl) = (f64::from(q.isl), f64::from(q.osl));
        let mut walk = Walk { points: Vec::new(), model_fit: false, memory_fit: false };
        // Balance-equivalent points already priced at this layout, across
        // batch sizes (not reset per batch).
        let mut balance = BalanceSkip::default();
        for &b in batches {
            let bf = f64::from(b);
            for &c in budgets {
                let cf = f64::from(c);
                let requests = (cf / isl).ceil();
                if bf - requests < 0.0 || (b > 1 && bf - requests < 1.0) {
                    break;
                }
                if balance.skip(isl, osl, bf, cf) {
                    continue;
                }
                let query = AggQuery {
                    parallel: *parallel,
                    batch: b,
                    isl: q.isl,
                    osl: q.osl,
                    prefix: q.prefix,
                    ctx_tokens: Some(c),
                    kv_sizing: q.kv_sizing,
                };
                match self.estimate_agg(&query) {
                    // Larger budgets need more memory: the next batch.
                    Err(ServingError::OutOfMemory(_)) => break,
                    // TRT-LLM's KV budget exceeded: the sweep's KV-OOM.
                    Ok(e) if e.warning.is_some() => {
                        walk.model_fit = true;
                        break;
                    }
                    Ok(e) => {
                        (walk.model_fit, walk.memory_fit) = (true, true);
                        walk.points.push(Point { ttft: e.ttft_ms, tpot: e.tpot_ms, row: rounded(e, parallel) });
                    }
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(walk)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_spec_lists() {
        assert_eq!(batch_sizes().len(), 44);
        assert_eq!(&batch_sizes()[..20], &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 20, 24, 28, 32]);
        let small = ctx_budgets(256, false);
        assert_eq!(small.len(), 17);
        assert_eq!((small[0], small[1], small[16]), (256, 512, 8192));
        assert_eq!(ctx_budgets(256, true), small);
        assert_eq!(ctx_budgets(4000, false), [4000, 8000]);
        // Chunked prefill: 512 .. 8192 by 512, then isl and 2 isl.
        let chunked = ctx_budgets(4000, true);
        assert_eq!(chunked.len(), 18);
        assert_eq!((chunked[0], chunked[7], chunked[8], chunked[17]), (512, 4000, 4096, 8192));
    }

    /// The lists the spec's own `_agg_ctx_tokens_list` returns, both ways,
    /// for isl values around every boundary (scripts/spec_ctx_budgets.py).
    #[test]
    fn the_specs_budget_lists() {
        let golden: serde_json::Value =
            serde_json::from_str(include_str!("../../../../tests/goldens/search/ctx_budgets.json"))
                .expect("ctx_budgets.json is JSON");
        let cases = golden["cases"].as_array().expect("cases");
        assert!(cases.len() >= 40, "{} cases", cases.len());
        for case in cases {
            let isl = case["isl"].as_u64().expect("isl") as u32;
            let chunked = case["enable_chunked_prefill"].as_bool().expect("flag");
            let spec: Vec<u32> =
                case["ctx_tokens"].as_array().expect("list").iter().map(|v| v.as_u64().expect("int") as u32).collect();
            assert_eq!(ctx_budgets(isl, chunked), spec, "isl {isl}, chunked prefill {chunked}");
        }
    }

    /// docs/spec/search.md 2.2: for isl = osl = 256 (no OOM) a layout's walk
    /// prices 525 points; at c = 256, of the batches above 256 only 288
    /// (g = 256.0 for every b in 288..512, recorded by b = 288). A list reset
    /// per batch size prices 532 (320..512 at c = 256 as well).
    #[test]
    fn balance_skip_spans_the_walk() {
        let (isl, osl) = (256.0, 256.0);
        let mut skip = BalanceSkip::default();
        let mut priced = Vec::new();
        for b in batch_sizes() {
            let bf = f64::from(b);
            for c in ctx_budgets(256, false) {
                let cf = f64::from(c);
                let requests = (cf / isl).ceil();
                if bf - requests < 0.0 || (b > 1 && bf - requests < 1.0) {
                    break;
                }
                if !skip.skip(isl, osl, bf, cf) {
                    priced.push((b, c));
                }
            }
        }
        assert_eq!(priced.len(), 525);
        let above: Vec<u32> = priced.iter().filter(|&&(b, c)| c == 256 && b > 256).map(|&(b, _)| b).collect();
        assert_eq!(above, [288]);
    }
}
