//! The immutable, query-ready form of one GEMM quant slice: ScatteredSites
//! (docs/spec 7.2) re-indexed for lookups without allocation or string hashing.
//!
//! Measured sites form a near-complete grid (about 25 distinct n by 25
//! distinct k per slice, 78% or more of the cells filled), so `(n, k)` is
//! indexed as a dense grid: site lookup is two binary searches, and the
//! nearest-site search walks grid rows and columns outward from the query.

use foldhash::HashMap;

use crate::gemm::load::GemmRow;
use crate::pymath::median;
use crate::sol::GemmSol;

/// Points at each end of a curve that util-hold extrapolates from.
pub(crate) const K_TAIL: usize = 3;

/// Grid cells beyond this mean the sites are too scattered for a dense grid
/// (256 MiB of cells; published slices need a few kilobytes).
const MAX_GRID_CELLS: usize = 1 << 26;

/// A grid cell without a site.
pub(crate) const NO_SITE: u32 = u32::MAX;

/// A site's key and its points while the index is built.
type SiteCurve = ((i64, i64), Vec<(i64, f64)>);

/// One `(n, k)` site and its `m -> latency` curve.
#[derive(Debug, Clone)]
pub(crate) struct Site {
    pub n: i64,
    pub k: i64,
    /// The curve's m values: `m_lists[m_list]` (sorted; nearly every site of
    /// a slice shares one list, so lookups stay in cache).
    pub m_list: usize,
    /// The curve's latencies: `points_lat[lat_start..]`, one per m.
    pub lat_start: usize,
    /// `median(SOL / latency)` over the first / last `K_TAIL` points: the util
    /// a hold below / above the curve divides the query's SOL by. It depends
    /// on the site only, so it is computed once here.
    pub anchor_low: f64,
    pub anchor_high: f64,
}

#[derive(Debug)]
pub(crate) struct SiteIndex {
    /// SOL of the queried quant.
    pub sol: GemmSol,
    /// In site order: first appearance walking the table m-major (m in
    /// insertion order, then n, then k). Ties in distance keep this order.
    pub sites: Vec<Site>,
    /// Distinct curve m lists.
    pub m_lists: Vec<Vec<i64>>,
    pub points_lat: Vec<f64>,
    /// Distinct site n ascending, and `log2(max(n, 1e-12))` of each (the
    /// distance formula's coordinate; non-decreasing as well).
    pub grid_n: Vec<i64>,
    pub grid_log2_n: Vec<f64>,
    /// Distinct site k ascending, and their log2.
    pub grid_k: Vec<i64>,
    pub grid_log2_k: Vec<f64>,
    /// Site id of cell `(n index, k index)` at `n_index * grid_k.len() + k_index`.
    pub grid: Vec<u32>,
    /// Each site's `[m_min, m_max]`, compact for the ranking walk.
    pub m_ranges: Vec<(i64, i64)>,
    /// Union of the sites' `[m_min, m_max]`, merged and sorted: whether any
    /// site covers an m decides which candidates site transfer ranks.
    pub coverage: Vec<(i64, i64)>,
}

/// Each site's `[first m, last m]`.
fn m_ranges_of(sites: &[Site], m_lists: &[Vec<i64>]) -> Vec<(i64, i64)> {
    sites
        .iter()
        .map(|s| {
            let ms = &m_lists[s.m_list];
            (ms[0], ms[ms.len() - 1])
        })
        .collect()
}

/// `log2(max(v, 1e-12))` with Python's int-to-float conversion (exact below 2^53).
pub(crate) fn log2_coord(v: i64) -> f64 {
    if v >= 1 { (v as f64).log2() } else { 1e-12f64.log2() }
}

impl SiteIndex {
    /// `rows` are the slice's first-wins rows in first-appearance order.
    /// Latencies below the SOL of their own quant (`row_sol`) are raised to it
    /// first, as the spec's loader does; holds use the queried quant's SOL.
    pub(crate) fn build(mut rows: Vec<GemmRow>, row_sol: &GemmSol, sol: GemmSol) -> Result<SiteIndex, String> {
        for row in &mut rows {
            let floor = row_sol.latency_ms(row.m, row.n, row.k);
            if row.latency < floor {
                row.latency = floor;
            }
        }

        // Walk order of the nested dict [m][n][k]: m by first appearance, n by
        // first appearance under that m, k by row order (keys are unique).
        let mut m_rank: HashMap<i64, usize> = HashMap::default();
        let mut mn_rank: HashMap<(i64, i64), usize> = HashMap::default();
        for row in &rows {
            let next = m_rank.len();
            m_rank.entry(row.m).or_insert(next);
            let next = mn_rank.len();
            mn_rank.entry((row.m, row.n)).or_insert(next);
        }
        let mut walk: Vec<usize> = (0..rows.len()).collect();
        walk.sort_by_key(|&i| (m_rank[&rows[i].m], mn_rank[&(rows[i].m, rows[i].n)]));

        let mut site_of: HashMap<(i64, i64), usize> = HashMap::default();
        // ((n, k), [(m, latency)]) per site, in site order.
        let mut curves: Vec<SiteCurve> = Vec::new();
        for &i in &walk {
            let row = rows[i];
            let id = *site_of.entry((row.n, row.k)).or_insert_with(|| {
                curves.push(((row.n, row.k), Vec::new()));
                curves.len() - 1
            });
            curves[id].1.push((row.m, row.latency));
        }

        let mut sites = Vec::with_capacity(curves.len());
        let mut m_lists: Vec<Vec<i64>> = Vec::new();
        let mut list_of: HashMap<Vec<i64>, usize> = HashMap::default();
        let mut points_lat = Vec::with_capacity(rows.len());
        for ((n, k), mut curve) in curves {
            curve.sort_by_key(|&(m, _)| m);
            let anchor = |points: &[(i64, f64)]| {
                let mut utils: Vec<f64> = points.iter().map(|&(m, lat)| sol.latency_ms(m, n, k) / lat).collect();
                median(&mut utils).unwrap_or(f64::NAN)
            };
            let tail = K_TAIL.min(curve.len());
            let ms: Vec<i64> = curve.iter().map(|&(m, _)| m).collect();
            let m_list = *list_of.entry(ms).or_insert_with_key(|ms| {
                m_lists.push(ms.clone());
                m_lists.len() - 1
            });
            sites.push(Site {
                n,
                k,
                m_list,
                lat_start: points_lat.len(),
                anchor_low: anchor(&curve[..tail]),
                anchor_high: anchor(&curve[curve.len() - tail..]),
            });
            points_lat.extend(curve.iter().map(|&(_, lat)| lat));
        }

        let distinct = |key: fn(&Site) -> i64| {
            let mut values: Vec<i64> = sites.iter().map(key).collect();
            values.sort_unstable();
            values.dedup();
            values
        };
        let (grid_n, grid_k) = (distinct(|s| s.n), distinct(|s| s.k));
        let cells = grid_n.len().saturating_mul(grid_k.len());
        if cells > MAX_GRID_CELLS || sites.len() >= NO_SITE as usize {
            return Err(format!(
                "{} sites over {} distinct n and {} distinct k are too scattered to index",
                sites.len(),
                grid_n.len(),
                grid_k.len()
            ));
        }
        let mut grid = vec![NO_SITE; cells];
        for (id, site) in sites.iter().enumerate() {
            let (ni, ki) = (grid_n.partition_point(|&n| n < site.n), grid_k.partition_point(|&k| k < site.k));
            grid[ni * grid_k.len() + ki] = id as u32;
        }

        let m_ranges = m_ranges_of(&sites, &m_lists);
        let mut ranges = m_ranges.clone();
        ranges.sort_unstable();
        let mut coverage: Vec<(i64, i64)> = Vec::new();
        for (lo, hi) in ranges {
            match coverage.last_mut() {
                // Integer queries: touching ranges leave no uncovered m between them.
                Some(last) if lo <= last.1.saturating_add(1) => last.1 = last.1.max(hi),
                _ => coverage.push((lo, hi)),
            }
        }

        Ok(SiteIndex {
            sol,
            sites,
            m_lists,
            points_lat,
            grid_log2_n: grid_n.iter().map(|&n| log2_coord(n)).collect(),
            grid_log2_k: grid_k.iter().map(|&k| log2_coord(k)).collect(),
            grid_n,
            grid_k,
            grid,
            m_ranges,
            coverage,
        })
    }

    /// The site `(n, k)`.
    pub(crate) fn find_site(&self, n: i64, k: i64) -> Option<usize> {
        let ni = self.grid_n.binary_search(&n).ok()?;
        let ki = self.grid_k.binary_search(&k).ok()?;
        let id = self.grid[ni * self.grid_k.len() + ki];
        (id != NO_SITE).then_some(id as usize)
    }

    /// Whether the site's curve spans m.
    #[inline]
    pub(crate) fn covers(&self, site: usize, m: i64) -> bool {
        let (lo, hi) = self.m_ranges[site];
        lo <= m && m <= hi
    }

    /// Whether any site's curve spans m.
    pub(crate) fn any_site_covers(&self, m: i64) -> bool {
        let after = self.coverage.partition_point(|&(lo, _)| lo <= m);
        after > 0 && self.coverage[after - 1].1 >= m
    }

    pub(crate) fn curve(&self, site: &Site) -> (&[i64], &[f64]) {
        let ms = &self.m_lists[site.m_list];
        (ms, &self.points_lat[site.lat_start..site.lat_start + ms.len()])
    }
}
