//! GEMM latency estimation: the spec's `query_gemm` (sections 4, 5.2, 7.2,
//! 8.1) over one database and quant mode.
//!
//! A [`GemmTable`] is built once per (database, quant, shared layer) — source
//! union, first-wins, SOL raise, site index — and is immutable afterwards, so
//! one `Arc` serves every thread. Queries allocate nothing except on the
//! trace path.

mod index;
mod load;
mod rank;
mod resolve;
mod sources;
mod trace;

use std::sync::Arc;

use crate::cache::db_key;
use crate::discovery::DataTree;
use crate::error::{Result, TablesError};
use crate::quant::GemmQuant;
use crate::sol::{GemmSol, MAX_GEMM_DIM};
use crate::system::system_spec;

use index::SiteIndex;
use rank::Candidate;
use resolve::{MAX_SITE_DISTANCE, NN_SITES, site_step};
use trace::{NoTrace, Tracer};

pub use resolve::GemmMiss;
pub use sources::{GemmSource, SourceRole};
pub use trace::{TraceStage, TraceStep};

/// A GEMM shape's `(n, k)` prepared on one table ([`GemmTable::plan`]).
#[derive(Debug, Clone)]
pub struct GemmPlan {
    n: i64,
    k: i64,
    /// `None` when the table has no rows or `(n, k)` is out of range:
    /// [`GemmTable::latency_planned`] then answers as `latency` does.
    kind: Option<resolve::PlanKind>,
}

impl GemmPlan {
    pub fn n(&self) -> i64 {
        self.n
    }

    pub fn k(&self) -> i64 {
        self.k
    }
}

/// The GEMM estimator of one database and quant mode.
#[derive(Debug)]
pub struct GemmTable {
    system: String,
    backend: String,
    version: String,
    quant: GemmQuant,
    shared_layer: bool,
    sources: Vec<GemmSource>,
    supported: Vec<String>,
    /// `None` when the sources hold no row of the quant's slice: every query
    /// then misses, as the spec's lookup does.
    index: Option<SiteIndex>,
}

// Tables are shared across threads behind `Arc`; keep them that way.
const _: fn() = || {
    fn shareable<T: Send + Sync>() {}
    shareable::<GemmTable>();
};

impl GemmTable {
    /// Loads `system/backend/version` for `quant`. `shared_layer` unions the
    /// database's own file with reuse donors and older versions (docs/spec 4.2);
    /// without it only the own file counts. An unknown database is an error
    /// listing the ones that exist; a quant the data lacks is not (its
    /// queries miss, like the spec's).
    pub fn load(
        tree: &DataTree,
        system: &str,
        backend: &str,
        version: &str,
        quant: GemmQuant,
        shared_layer: bool,
    ) -> Result<GemmTable> {
        let mut sources = sources::plan(tree, system, backend, version, shared_layer)?;
        let slice_name = quant.slice_name();
        let slice = load::read_slice(tree, &mut sources, slice_name)?;
        let index = if slice.rows.is_empty() {
            None
        } else {
            let (spec, yaml) = system_spec(tree, system)?;
            let sol_of = |q: GemmQuant| GemmSol::new(&spec, q).map_err(|e| TablesError::document(&yaml, e));
            // Rows are raised to the SOL of their own dtype, queries use the queried mode.
            let row_quant: GemmQuant = slice_name.parse()?;
            let index = SiteIndex::build(slice.rows, &sol_of(row_quant)?, sol_of(quant)?).map_err(|e| {
                let files: Vec<String> = sources.iter().map(|s| s.path.display().to_string()).collect();
                TablesError::corrupt(
                    &sources[0].path,
                    None,
                    None,
                    format!("GEMM table {system}/{backend}/{version} {quant} (from {}): {e}", files.join(", ")),
                )
            })?;
            Some(index)
        };
        Ok(GemmTable {
            system: system.to_string(),
            backend: backend.to_string(),
            version: version.to_string(),
            quant,
            shared_layer,
            sources,
            supported: slice.dtypes.into_iter().collect(),
            index,
        })
    }

    /// The tree's shared table for these arguments, loaded on first use.
    pub fn cached(
        tree: &DataTree,
        system: &str,
        backend: &str,
        version: &str,
        quant: GemmQuant,
        shared_layer: bool,
    ) -> Result<Arc<GemmTable>> {
        tree.cache().gemm.get((db_key(system, backend, version), quant, shared_layer), || {
            GemmTable::load(tree, system, backend, version, quant, shared_layer)
        })
    }

    /// Latency in milliseconds of one `m x k` by `k x n` GEMM, or why there is none.
    #[inline]
    pub fn latency(&self, m: i64, n: i64, k: i64) -> Result<f64, GemmMiss> {
        self.resolve(m, n, k, &mut NoTrace)
    }

    /// The part of a query that does not depend on `m`, for an op that asks
    /// for the same `(n, k)` at many `m` (a step's GEMM across batches):
    /// whether `(n, k)` is a site, else the transfer candidates in rank order.
    pub fn plan(&self, n: i64, k: i64) -> GemmPlan {
        let kind = match &self.index {
            Some(index) if valid_shape(0, n, k) => Some(index.plan(n, k)),
            _ => None,
        };
        GemmPlan { n, k, kind }
    }

    /// [`latency`](Self::latency) at `m` and the planned `(n, k)`; the same
    /// number, without finding the site or ranking candidates again.
    #[inline]
    pub fn latency_planned(&self, plan: &GemmPlan, m: i64) -> Result<f64, GemmMiss> {
        match (&self.index, &plan.kind) {
            (Some(index), Some(kind)) if valid_shape(m, plan.n, plan.k) => {
                index.resolve_planned(kind, m, plan.n, plan.k)
            }
            _ => self.latency(m, plan.n, plan.k),
        }
    }

    /// How [`latency`](Self::latency) arrives at its answer: the own-site
    /// step, or every transfer candidate within `max_site_distance` in rank
    /// order (the first `nn_sites` are blended; later ones are listed so ties
    /// and near misses are visible; with none in reach, the nearest beyond
    /// it), then one `result` or `miss` step.
    pub fn trace(&self, m: i64, n: i64, k: i64) -> Vec<TraceStep> {
        let mut steps = Vec::new();
        let outcome = self.resolve(m, n, k, &mut steps);
        if let Some(index) = &self.index
            && valid_shape(m, n, k)
            && index.find_site(n, k).is_none()
        {
            steps.extend(unblended_candidates(index, m, n, k));
        }
        steps.push(match outcome {
            Ok(latency) => {
                let mut step = TraceStep::new(TraceStage::Result);
                step.selected = true;
                step.result_ms = Some(latency);
                step
            }
            Err(miss) => {
                let mut step = TraceStep::new(TraceStage::Miss);
                step.reason = Some(miss.to_string());
                step
            }
        });
        steps
    }

    /// The spec's name for the path a query takes (the goldens'
    /// `interp_path`): `exact_hit`, `own_site_curve_interpolation`,
    /// `own_site_curve_util_hold` or `site_transfer`. `None` when the query
    /// cannot reach the resolver (no data for the quant, invalid shape).
    pub fn interp_path(&self, m: i64, n: i64, k: i64) -> Option<&'static str> {
        let index = self.index.as_ref().filter(|_| valid_shape(m, n, k))?;
        let Some(id) = index.find_site(n, k) else { return Some("site_transfer") };
        let m_list = index.sites[id].m_list;
        Some(match index.locate(m_list, m) {
            Ok(_) => "exact_hit",
            Err(i) if i == 0 || i == index.m_lists[m_list].len() => "own_site_curve_util_hold",
            Err(_) => "own_site_curve_interpolation",
        })
    }

    fn resolve<T: Tracer>(&self, m: i64, n: i64, k: i64, tracer: &mut T) -> Result<f64, GemmMiss> {
        if !valid_shape(m, n, k) {
            return Err(GemmMiss::InvalidShape);
        }
        match &self.index {
            Some(index) => index.resolve(m, n, k, tracer),
            None => Err(GemmMiss::QuantUnavailable),
        }
    }

    /// The spec's error text for a miss (what the Python raises), e.g.
    /// `GEMM perf data not available for requested shape. system='h200_sxm', ...`.
    pub fn miss_message(&self, miss: GemmMiss, m: i64, n: i64, k: i64) -> String {
        let (system, backend, version, quant) = (&self.system, &self.backend, &self.version, self.quant);
        let tail = format!(
            "Failed to query gemm data for m={m}, n={n}, k={k}, quant_mode={}. Consider using HYBRID mode.",
            quant.python_repr()
        );
        match miss {
            GemmMiss::QuantUnavailable => {
                let supported: Vec<String> = self.supported.iter().map(|s| format!("'{s}'")).collect();
                format!(
                    "GEMM perf data not available for requested quant mode. system='{system}', backend='{backend}', \
                     version='{version}', quant_mode='{quant}'. Supported gemm modes: [{}] {tail}",
                    supported.join(", ")
                )
            }
            GemmMiss::InvalidShape => format!("invalid GEMM shape m={m}, n={n}, k={k}: {miss}"),
            _ => format!(
                "GEMM perf data not available for requested shape. system='{system}', backend='{backend}', \
                 version='{version}', quant_mode='{quant}', m={m}, n={n}, k={k}. {tail}"
            ),
        }
    }

    /// The interpolation engine's own account of a shape miss, e.g.
    /// `perf_interp: no data to anchor query {'m': 416, 'n': 8, 'k': 8} (no site within max_site_distance)`.
    pub fn miss_detail(&self, miss: GemmMiss, m: i64, n: i64, k: i64) -> Option<String> {
        matches!(miss, GemmMiss::NoSiteWithinDistance | GemmMiss::NoUsableNeighbour)
            .then(|| format!("perf_interp: no data to anchor query {{'m': {m}, 'n': {n}, 'k': {k}}} ({miss})"))
    }

    pub fn system(&self) -> &str {
        &self.system
    }

    pub fn backend(&self) -> &str {
        &self.backend
    }

    pub fn version(&self) -> &str {
        &self.version
    }

    /// `system/backend/version`.
    pub fn db(&self) -> String {
        format!("{}/{}/{}", self.system, self.backend, self.version)
    }

    pub fn quant(&self) -> GemmQuant {
        self.quant
    }

    pub fn shared_layer(&self) -> bool {
        self.shared_layer
    }

    /// The files read, in priority order, with the keys each added to this slice.
    pub fn sources(&self) -> &[GemmSource] {
        &self.sources
    }

    /// Every `gemm_dtype` the sources hold, sorted (the spec's "supported gemm modes").
    pub fn supported_dtypes(&self) -> &[String] {
        &self.supported
    }

    /// Number of distinct `(n, k)` sites.
    pub fn site_count(&self) -> usize {
        self.index.as_ref().map_or(0, |i| i.sites.len())
    }

    /// Number of stored `(m, n, k)` points after first-wins.
    pub fn point_count(&self) -> usize {
        self.index.as_ref().map_or(0, |i| i.points_lat.len())
    }
}

/// Transfer candidates the blend did not use: ranks past `nn_sites` within
/// reach (ties and near misses), or, with none in reach, the nearest site.
fn unblended_candidates(index: &SiteIndex, m: i64, n: i64, k: i64) -> Vec<TraceStep> {
    let mut ranked: Vec<Candidate> = Vec::new();
    index.rank(&index.query(m, n, k), f64::INFINITY, &mut ranked);
    ranked.sort_by(|a, b| a.dist.total_cmp(&b.dist).then(a.site.cmp(&b.site)));
    let within = ranked.iter().take_while(|c| c.dist <= MAX_SITE_DISTANCE).count();
    let step = |c: &Candidate, rank: Option<u32>, reason: &str| {
        let mut step = site_step(index, c.site as usize, TraceStage::Transfer, m);
        step.distance = Some(c.dist);
        step.rank = rank;
        step.reason = Some(reason.to_string());
        step
    };
    if within == 0 {
        return ranked
            .first()
            .map(|c| step(c, None, "nearest site, beyond max_site_distance = 2.0"))
            .into_iter()
            .collect();
    }
    ranked
        .iter()
        .enumerate()
        .take(within)
        .skip(NN_SITES)
        .map(|(i, c)| step(c, Some(i as u32 + 1), "not blended: beyond nn_sites = 4"))
        .collect()
}

fn valid_shape(m: i64, n: i64, k: i64) -> bool {
    (0..=MAX_GEMM_DIM).contains(&m) && (1..=MAX_GEMM_DIM).contains(&n) && (1..=MAX_GEMM_DIM).contains(&k)
}
