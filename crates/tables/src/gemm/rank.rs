//! Ranking sites for site transfer (docs/spec 7.2 step 2): candidates by
//! distance in (log2 n, log2 k) space, ties in site order, nearest first.
//!
//! The order-defining distance is Python's `sqrt((log2 n_s - log2 n) ** 2 +
//! (log2 k_s - log2 k) ** 2)`: log2 per coordinate, `** 2` being C `pow`,
//! which is not always `x * x`; exact float ties do occur and are broken by
//! site order.

use std::ops::ControlFlow;

use crate::gemm::index::{NO_SITE, SiteIndex};
use crate::gemm::resolve::{MAX_SITE_DISTANCE, NN_SITES, Query};
use crate::pymath::py_square;

/// Slack for pruning by the cheap `x * x` distance estimate (within 2^-51
/// relative of the exact one); the exact distance decides everything else.
const SLACK: f64 = 1e-9;

/// A ranked transfer candidate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Candidate {
    pub dist: f64,
    pub site: u32,
}

impl Candidate {
    /// Stable sort by distance over site order == lexicographic (dist, site id).
    fn before(&self, other: &Candidate) -> bool {
        self.dist < other.dist || (self.dist == other.dist && self.site < other.site)
    }
}

/// Where exactly ranked candidates go: the top 4 of a query, or every
/// candidate (traces).
pub(crate) trait RankSink {
    /// Candidates farther than this cannot enter (an equal distance still
    /// can: it may come earlier in site order).
    fn bound(&self) -> f64;
    fn offer(&mut self, candidate: Candidate);
}

/// The `NN_SITES` best candidates, in rank order, on the stack.
#[derive(Debug, Clone)]
pub(crate) struct TopSites {
    items: [Candidate; NN_SITES],
    len: usize,
}

impl Default for TopSites {
    fn default() -> Self {
        TopSites { items: [Candidate { dist: f64::INFINITY, site: u32::MAX }; NN_SITES], len: 0 }
    }
}

impl TopSites {
    pub(crate) fn iter(&self) -> impl Iterator<Item = Candidate> + '_ {
        self.items[..self.len].iter().copied()
    }
}

impl RankSink for TopSites {
    fn bound(&self) -> f64 {
        if self.len == NN_SITES { self.items[NN_SITES - 1].dist } else { f64::INFINITY }
    }

    fn offer(&mut self, candidate: Candidate) {
        let mut pos = if self.len < NN_SITES {
            self.len += 1;
            self.len - 1
        } else if candidate.before(&self.items[NN_SITES - 1]) {
            NN_SITES - 1
        } else {
            return;
        };
        self.items[pos] = candidate;
        while pos > 0 && self.items[pos].before(&self.items[pos - 1]) {
            self.items.swap(pos, pos - 1);
            pos -= 1;
        }
    }
}

impl RankSink for Vec<Candidate> {
    fn bound(&self) -> f64 {
        f64::INFINITY
    }

    fn offer(&mut self, candidate: Candidate) {
        self.push(candidate);
    }
}

impl SiteIndex {
    /// The up to `NN_SITES` nearest candidates within `max_site_distance`, in
    /// rank order.
    pub(crate) fn nearest_sites(&self, q: &Query) -> TopSites {
        let mut top = TopSites::default();
        self.rank(q, MAX_SITE_DISTANCE, &mut top);
        top
    }

    /// Offers every candidate within `max_dist` (`INFINITY`: all sites) to
    /// `sink`. Grid columns (n), and cells within a column (k), are visited
    /// nearest first in log2 space, so the sink's bound (the 4th distance so
    /// far) tightens early and the walk stops once nothing nearer can remain;
    /// the cheap estimate only prunes, the exact distance is what gets offered.
    pub(crate) fn rank(&self, q: &Query, max_dist: f64, sink: &mut impl RankSink) {
        let reach2 = |bound: f64| {
            let reach = max_dist.min(bound) * (1.0 + SLACK);
            reach * reach
        };
        let (log2_n, log2_k) = (&self.grid_log2_n, &self.grid_log2_k);
        let width = log2_k.len();
        let n_split = log2_n.partition_point(|&v| v < q.log2_n);
        let k_split = log2_k.partition_point(|&v| v < q.log2_k);
        nearest_first(
            log2_n.len(),
            n_split,
            |i| (log2_n[i] - q.log2_n).abs(),
            |ni, dn_abs| {
                let dn2 = dn_abs * dn_abs;
                if dn2 > reach2(sink.bound()) {
                    return ControlFlow::Break(());
                }
                let dn = log2_n[ni] - q.log2_n;
                let mut dn_squared = None;
                let column = &self.grid[ni * width..(ni + 1) * width];
                nearest_first(
                    width,
                    k_split,
                    |i| (log2_k[i] - q.log2_k).abs(),
                    |ki, dk_abs| {
                        if dn2 + dk_abs * dk_abs > reach2(sink.bound()) {
                            return ControlFlow::Break(());
                        }
                        let site = column[ki];
                        if site != NO_SITE && (!q.require_cover || self.covers(site as usize, q.m)) {
                            let dn_squared = *dn_squared.get_or_insert_with(|| py_square(dn));
                            let dist = (dn_squared + py_square(log2_k[ki] - q.log2_k)).sqrt();
                            if dist <= max_dist {
                                sink.offer(Candidate { dist, site });
                            }
                        }
                        ControlFlow::Continue(())
                    },
                );
                ControlFlow::Continue(())
            },
        );
    }
}

/// Visits `0..len` in order of increasing `gap(i)`, for a `gap` that grows
/// away from `split` on both sides (distances to a point in a sorted list).
#[inline(always)]
fn nearest_first(
    len: usize,
    split: usize,
    gap: impl Fn(usize) -> f64,
    mut visit: impl FnMut(usize, f64) -> ControlFlow<()>,
) {
    let (mut lo, mut hi) = (split, split);
    loop {
        let left = (lo > 0).then(|| gap(lo - 1));
        let right = (hi < len).then(|| gap(hi));
        let (i, d) = match (left, right) {
            (Some(l), Some(r)) if l <= r => {
                lo -= 1;
                (lo, l)
            }
            (_, Some(r)) => {
                hi += 1;
                (hi - 1, r)
            }
            (Some(l), None) => {
                lo -= 1;
                (lo, l)
            }
            (None, None) => return,
        };
        if visit(i, d).is_break() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(dist: f64, site: u32) -> Candidate {
        Candidate { dist, site }
    }

    #[test]
    fn top_sites_is_a_stable_sort_prefix() {
        let offers = [c(0.5, 7), c(0.3, 9), c(0.5, 2), c(0.9, 1), c(0.1, 4), c(0.5, 3), c(0.3, 1)];
        let mut top = TopSites::default();
        for o in offers {
            top.offer(o);
        }
        let mut all = offers.to_vec();
        all.sort_by(|a, b| a.dist.total_cmp(&b.dist).then(a.site.cmp(&b.site)));
        assert_eq!(top.iter().collect::<Vec<_>>(), all[..NN_SITES].to_vec());
        assert_eq!(top.bound(), 0.5);
    }

    /// The pruned nearest-first walk must rank exactly like the spec's plain
    /// loop: every candidate, Python's distance, stable sort in site order.
    #[test]
    fn walk_ranks_like_a_stable_sort_over_all_sites() {
        use crate::gemm::GemmTable;
        use crate::gemm::index::log2_coord;
        use crate::quant::GemmQuant;

        let mut rng = crate::test_rng::XorShift::new(0x9e37_79b9_7f4a_7c15);
        let mut next = |bound: u64| rng.next_u64() % bound;
        let tables = [
            ("h200_sxm", "vllm", "0.19.0", GemmQuant::Fp8Block, false),
            ("gb200", "vllm", "0.19.0", GemmQuant::Nvfp4, true),
            ("a100_sxm", "trtllm", "1.0.0", GemmQuant::Int4Wo, false),
        ];
        for (system, backend, version, quant, shared) in tables {
            let table = GemmTable::load(crate::test_data::tree(), system, backend, version, quant, shared)
                .unwrap_or_else(|e| panic!("{e}"));
            let Some(index) = table.index.as_ref() else { panic!("{system} {quant}: no data") };
            let mut queries: Vec<(i64, i64, i64)> = [1, 4, 32, 416].iter().map(|&m| (m, 1280, 5120)).collect();
            for _ in 0..3_000 {
                let m = (1i64 << next(18)) + next(3) as i64;
                let mut dim = || if next(2) == 0 { 1i64 << (next(15) + 1) } else { next(1 << 17) as i64 + 1 };
                let (n, k) = (dim(), dim());
                queries.push((m, n, k));
            }
            for (m, n, k) in queries {
                let q = index.query(m, n, k);
                let mut brute: Vec<Candidate> = (0..index.sites.len())
                    .filter(|&id| !q.require_cover || index.covers(id, m))
                    .map(|id| {
                        let site = &index.sites[id];
                        let dn = py_square(log2_coord(site.n) - q.log2_n);
                        let dk = py_square(log2_coord(site.k) - q.log2_k);
                        Candidate { dist: (dn + dk).sqrt(), site: id as u32 }
                    })
                    .collect();
                brute.sort_by(|a, b| a.dist.total_cmp(&b.dist));
                let mut all = Vec::new();
                index.rank(&q, f64::INFINITY, &mut all);
                all.sort_by(|a, b| a.dist.total_cmp(&b.dist).then(a.site.cmp(&b.site)));
                assert_eq!(all, brute, "{system} {quant} m={m} n={n} k={k}");
                let within: Vec<Candidate> =
                    brute.iter().copied().filter(|c| c.dist <= MAX_SITE_DISTANCE).take(NN_SITES).collect();
                let top: Vec<Candidate> = index.nearest_sites(&q).iter().collect();
                assert_eq!(top, within, "{system} {quant} m={m} n={n} k={k}");
            }
        }
    }
}
