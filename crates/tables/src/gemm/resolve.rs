//! Answering one `(m, n, k)` query on a [`SiteIndex`] (docs/spec 7.2): own site
//! curve (exact, linear, util-hold), else site transfer from the nearest
//! sites. Operation order follows the spec's Python exactly; the comments
//! say where a different order would change bits.

use std::fmt;

use crate::gemm::index::{K_TAIL, Site, SiteIndex, log2_coord};
use crate::gemm::rank::Candidate;
use crate::gemm::trace::{TraceStage, TraceStep, Tracer};
use crate::pymath::py_square;

/// Neighbours site transfer blends.
pub(crate) const NN_SITES: usize = 4;
/// Sites farther than this (in log2 space) are never used.
pub(crate) const MAX_SITE_DISTANCE: f64 = 2.0;

/// Why a query has no latency. The spec raises in these cases; here they
/// are values, so a caller can turn them into NULL, an error or a trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GemmMiss {
    /// The database has no rows for the quant's slice.
    QuantUnavailable,
    /// No candidate site within `max_site_distance`.
    NoSiteWithinDistance,
    /// Candidates existed, but none gave a finite positive latency.
    NoUsableNeighbour,
    /// The data yields a non-finite or non-positive latency for this query.
    InvalidLatency,
    /// `m` outside `0..=2^40`, or `n`, `k` outside `1..=2^40`.
    InvalidShape,
}

impl fmt::Display for GemmMiss {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            GemmMiss::QuantUnavailable => "the database has no GEMM data for this quant mode",
            GemmMiss::NoSiteWithinDistance => "no site within max_site_distance",
            GemmMiss::NoUsableNeighbour => "no neighbouring site gave a usable latency",
            GemmMiss::InvalidLatency => "the data gives a non-finite or non-positive latency",
            GemmMiss::InvalidShape => "m must lie in 0..=2^40 and n, k in 1..=2^40",
        })
    }
}

impl std::error::Error for GemmMiss {}

/// How a site's curve produced its value at m. Holds carry the SOL they
/// divided, which site transfer needs again.
#[derive(Debug, Clone, Copy)]
pub(crate) enum CurvePath {
    Exact,
    Between(i64, i64),
    HoldLow { points: usize, sol: f64 },
    HoldHigh { points: usize, sol: f64 },
}

impl CurvePath {
    fn stage(self) -> TraceStage {
        match self {
            CurvePath::Exact => TraceStage::Exact,
            CurvePath::Between(..) => TraceStage::Curve,
            CurvePath::HoldLow { .. } | CurvePath::HoldHigh { .. } => TraceStage::Hold,
        }
    }

    fn sol(self) -> Option<f64> {
        match self {
            CurvePath::HoldLow { sol, .. } | CurvePath::HoldHigh { sol, .. } => Some(sol),
            _ => None,
        }
    }

    fn describe(self) -> String {
        match self {
            CurvePath::Exact => "stored point".into(),
            CurvePath::Between(lo, hi) => format!("linear between m={lo} and m={hi}"),
            CurvePath::HoldLow { points, .. } => format!("util held from the lowest {points} point(s)"),
            CurvePath::HoldHigh { points, .. } => format!("util held from the highest {points} point(s)"),
        }
    }
}

/// How a planned `(n, k)` resolves: its own site, or site transfer from
/// these candidates (every site within `MAX_SITE_DISTANCE`, in rank order).
#[derive(Debug, Clone)]
pub(crate) enum PlanKind {
    Own(usize),
    Transfer(std::sync::Arc<[Candidate]>),
}

/// Query-side quantities shared by ranking and blending.
pub(crate) struct Query {
    pub m: i64,
    pub log2_n: f64,
    pub log2_k: f64,
    /// Whether candidates must span m (false when no site does).
    pub require_cover: bool,
}

impl SiteIndex {
    /// Where m falls in an m list: `Ok(i)` at a point, `Err(i)` before point i.
    pub(crate) fn locate(&self, m_list: usize, m: i64) -> Result<usize, usize> {
        self.m_lists[m_list].binary_search(&m)
    }

    /// The site's curve at m.
    pub(crate) fn curve_at(&self, site: &Site, m: i64) -> (f64, CurvePath) {
        self.curve_at_located(site, m, self.locate(site.m_list, m))
    }

    /// The site's curve at m, given `locate(site.m_list, m)`.
    fn curve_at_located(&self, site: &Site, m: i64, located: Result<usize, usize>) -> (f64, CurvePath) {
        let (ms, lats) = self.curve(site);
        let points = K_TAIL.min(ms.len());
        match located {
            Ok(i) => (lats[i], CurvePath::Exact),
            Err(0) => {
                let sol = self.sol.latency_ms(m, site.n, site.k);
                (sol / site.anchor_low, CurvePath::HoldLow { points, sol })
            }
            Err(i) if i == ms.len() => {
                let sol = self.sol.latency_ms(m, site.n, site.k);
                (sol / site.anchor_high, CurvePath::HoldHigh { points, sol })
            }
            Err(i) => {
                let (m0, m1, a, b) = (ms[i - 1], ms[i], lats[i - 1], lats[i]);
                // Python: w = (m - m0) / (m1 - m0) on ints (exact below 2^53), then a + (b - a) * w.
                // a * (1 - w) + b * w or numpy.interp's slope form differ in the last bit.
                let w = (m - m0) as f64 / (m1 - m0) as f64;
                (a + (b - a) * w, CurvePath::Between(m0, m1))
            }
        }
    }

    pub(crate) fn query(&self, m: i64, n: i64, k: i64) -> Query {
        Query { m, log2_n: log2_coord(n), log2_k: log2_coord(k), require_cover: self.any_site_covers(m) }
    }

    /// The estimate for a shape already checked to lie in the accepted
    /// domain, reporting each considered site to `tracer`.
    pub(crate) fn resolve<T: Tracer>(&self, m: i64, n: i64, k: i64, tracer: &mut T) -> Result<f64, GemmMiss> {
        if let Some(id) = self.find_site(n, k) {
            let site = &self.sites[id];
            let (latency, path) = self.curve_at(site, m);
            if T::ON {
                let mut step = site_step(self, id, path.stage(), m);
                step.selected = true;
                step.site_latency_ms = Some(latency);
                if !matches!(path, CurvePath::Exact) {
                    let sol = path.sol().unwrap_or_else(|| self.sol.latency_ms(m, n, k));
                    step.site_sol_ms = Some(sol);
                    step.util = Some(sol / latency);
                }
                step.reason = Some(path.describe());
                tracer.push(step);
            }
            return usable(latency).ok_or(GemmMiss::InvalidLatency);
        }
        let top = self.nearest_sites(&self.query(m, n, k));
        self.transfer((m, n, k), top.iter(), tracer)
    }

    /// As [`resolve`](Self::resolve) for a shape whose `(n, k)` was planned
    /// (the shape already checked): the own site's curve, or the transfer
    /// from the planned candidates that qualify at `m`.
    pub(crate) fn resolve_planned(&self, plan: &PlanKind, m: i64, n: i64, k: i64) -> Result<f64, GemmMiss> {
        match plan {
            PlanKind::Own(id) => {
                let (latency, _) = self.curve_at(&self.sites[*id], m);
                usable(latency).ok_or(GemmMiss::InvalidLatency)
            }
            PlanKind::Transfer(ranked) => {
                // The top NN_SITES of the ranked list among the sites that may
                // enter at m (those spanning m, when any site does): what
                // ranking the query afresh keeps.
                let require_cover = self.any_site_covers(m);
                let eligible =
                    ranked.iter().copied().filter(|c| !require_cover || self.covers(c.site as usize, m)).take(NN_SITES);
                self.transfer((m, n, k), eligible, &mut crate::gemm::trace::NoTrace)
            }
        }
    }

    /// What [`resolve_planned`](Self::resolve_planned) needs for `(n, k)`.
    pub(crate) fn plan(&self, n: i64, k: i64) -> PlanKind {
        if let Some(id) = self.find_site(n, k) {
            return PlanKind::Own(id);
        }
        // Every candidate within reach, whatever m: rank order is (distance,
        // site), which does not depend on m; which of them qualify does.
        let q = Query { m: 0, log2_n: log2_coord(n), log2_k: log2_coord(k), require_cover: false };
        let mut all: Vec<Candidate> = Vec::new();
        self.rank(&q, MAX_SITE_DISTANCE, &mut all);
        all.sort_by(|a, b| a.dist.total_cmp(&b.dist).then(a.site.cmp(&b.site)));
        PlanKind::Transfer(all.into())
    }

    /// Site transfer at `(m, n, k)` from `top`, the chosen candidates in rank order.
    fn transfer<T: Tracer>(
        &self,
        (m, n, k): (i64, i64, i64),
        top: impl Iterator<Item = Candidate>,
        tracer: &mut T,
    ) -> Result<f64, GemmMiss> {
        let mut top = top.peekable();
        if top.peek().is_none() {
            return Err(GemmMiss::NoSiteWithinDistance);
        }
        // Sums run in rank order; each term is w * (sol / lat), the util taken
        // first (w * sol / lat rounds differently).
        let (mut weighted, mut weights, mut used) = (0.0, 0.0, 0usize);
        // Neighbours nearly always share one m list: locate m in it once.
        let mut located: Option<(usize, Result<usize, usize>)> = None;
        for (rank, candidate) in top.enumerate() {
            let site = &self.sites[candidate.site as usize];
            let position = match located {
                Some((list, position)) if list == site.m_list => position,
                _ => {
                    let position = self.locate(site.m_list, m);
                    located = Some((site.m_list, position));
                    position
                }
            };
            let (latency, path) = self.curve_at_located(site, m, position);
            let ok = usable(latency).is_some();
            if !ok && !T::ON {
                continue;
            }
            let site_sol = path.sol().unwrap_or_else(|| self.sol.latency_ms(m, site.n, site.k));
            let weight = 1.0 / (py_square(candidate.dist) + 1e-12);
            let util = site_sol / latency;
            if ok {
                weighted += weight * util;
                weights += weight;
                used += 1;
            }
            if T::ON {
                let mut step = site_step(self, candidate.site as usize, TraceStage::Transfer, m);
                step.distance = Some(candidate.dist);
                step.rank = Some(rank as u32 + 1);
                step.selected = ok;
                step.weight = Some(weight);
                step.site_latency_ms = Some(latency);
                step.site_sol_ms = Some(site_sol);
                step.util = Some(util);
                step.reason = Some(if ok {
                    format!("site curve: {}", path.describe())
                } else {
                    format!("skipped: site curve gives {latency} ({})", path.describe())
                });
                tracer.push(step);
            }
        }
        if used == 0 {
            return Err(GemmMiss::NoUsableNeighbour);
        }
        let result = self.sol.latency_ms(m, n, k) / (weighted / weights);
        usable(result).ok_or(GemmMiss::InvalidLatency)
    }
}

fn usable(latency: f64) -> Option<f64> {
    (latency.is_finite() && latency > 0.0).then_some(latency)
}

/// A trace step about site `id`.
pub(crate) fn site_step(index: &SiteIndex, id: usize, stage: TraceStage, m: i64) -> TraceStep {
    let mut step = TraceStep::new(stage);
    step.site_n = Some(index.sites[id].n);
    step.site_k = Some(index.sites[id].k);
    step.covers_m = Some(index.covers(id, m));
    step
}
