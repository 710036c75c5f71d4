//! DeepSeek-V4's CSA top-k calibration (docs/spec/families_dsv4.md 3.4, 4.5):
//! `dsv4_csa_topk_calib_perf` holds, per `(step, isl, batch)`, the top-k
//! kernel's latency under a degenerate (`flat`) and a representative
//! (`top_last`) score distribution for the context (`v1`) and decode (`v2`)
//! selectors; the CSA module lookups subtract `max(0, flat - top_last)`.
//!
//! Rows of every source, last wins per key; `num_heads` and `model` are no
//! keys (the last model's rows win). Off-grid shapes interpolate prefix
//! first, then isl, then batch, flat beyond the ends.

use foldhash::HashMap;

use crate::cache::{DbKey, Slots, TableCache};
use crate::columns::{Col, Kind, Measured, scan};
use crate::discovery::DataTree;
use crate::error::{ErrorClass, Result};
use crate::kernels::{DatabaseTable, Origin};
use crate::sources::{DSV4_CSA_TOPK_CALIB_FILE, plan};

const STEP: Col = Col::int("step").optional();
const ISL: Col = Col::int("isl").optional();
const BATCH_SIZE: Col = Col::int("batch_size").optional();
const SCORE_MODE: Col = Col::text("score_mode").optional();
/// Zero and negative latencies are data here (a kernel that did not run).
const LATENCY: Col = Col { name: "latency", kind: Kind::Float, optional: true, measured: Measured::No };

/// `(step, delta)` points of one `(isl, batch)`, steps ascending.
type Steps = Vec<(i64, f64)>;
/// Per batch (ascending): per isl (ascending): its steps.
type Nested = Vec<(i64, Vec<(i64, Steps)>)>;

/// One selector's deltas: exact by `(step, isl, batch)`, and the same
/// points nested batch -> isl -> step, each level sorted, for the
/// interpolation (no allocation per query).
#[derive(Debug, Default)]
pub struct TopkVariant {
    exact: HashMap<(i64, i64, i64), f64>,
    nested: Nested,
}

/// Linear interpolation over sorted distinct coordinates `key(0..len)`
/// (4.5 `interp`): an exact coordinate gives its value, one point its
/// value, beyond either end the end's value, else the neighbours' blend.
/// `value` is evaluated only at the points used.
fn interp(len: usize, key: impl Fn(usize) -> i64, value: impl Fn(usize) -> f64, x: i64) -> Option<f64> {
    if len == 0 {
        return None;
    }
    let i = partition(len, &key, x);
    if i < len && key(i) == x {
        return Some(value(i));
    }
    if len == 1 || x <= key(0) {
        return Some(value(0));
    }
    if x >= key(len - 1) {
        return Some(value(len - 1));
    }
    let (lo, hi) = (i - 1, i);
    let t = (x as f64 - key(lo) as f64) / (key(hi) as f64 - key(lo) as f64);
    Some(value(lo) * (1.0 - t) + value(hi) * t)
}

/// The first index whose key is `>= x` (keys ascending).
fn partition(len: usize, key: &impl Fn(usize) -> i64, x: i64) -> usize {
    let (mut lo, mut hi) = (0usize, len);
    while lo < hi {
        let mid = (lo + hi) / 2;
        if key(mid) < x { lo = mid + 1 } else { hi = mid }
    }
    lo
}

impl TopkVariant {
    fn new(points: Vec<((i64, i64, i64), f64)>) -> TopkVariant {
        let mut nested: Nested = Vec::new();
        for &((step, isl, batch), delta) in &points {
            let b = match nested.iter().position(|(k, _)| *k == batch) {
                Some(b) => b,
                None => {
                    nested.push((batch, Vec::new()));
                    nested.len() - 1
                }
            };
            let isls = &mut nested[b].1;
            match isls.iter_mut().find(|(k, _)| *k == isl) {
                Some((_, steps)) => steps.push((step, delta)),
                None => isls.push((isl, vec![(step, delta)])),
            }
        }
        nested.sort_by_key(|(b, _)| *b);
        for (_, isls) in &mut nested {
            isls.sort_by_key(|(i, _)| *i);
            for (_, steps) in isls.iter_mut() {
                steps.sort_by_key(|(s, _)| *s);
            }
        }
        TopkVariant { exact: points.into_iter().collect(), nested }
    }

    /// `_dsv4_topk_delta_ms(variant, prefix, isl, batch)` (4.5), `>= 0`.
    pub fn delta(&self, prefix: i64, isl: i64, batch: i64) -> f64 {
        if let Some(&d) = self.exact.get(&(prefix, isl, batch)) {
            return if 0.0 > d { 0.0 } else { d };
        }
        let by_isl = |isls: &Vec<(i64, Steps)>| {
            let at_prefix = |j: usize| {
                let steps = &isls[j].1;
                interp(steps.len(), |k| steps[k].0, |k| steps[k].1, prefix).unwrap_or(f64::NAN)
            };
            interp(isls.len(), |j| isls[j].0, at_prefix, isl).unwrap_or(f64::NAN)
        };
        let n = &self.nested;
        match interp(n.len(), |b| n[b].0, |b| by_isl(&n[b].1), batch) {
            Some(v) if v > 0.0 => v,
            _ => 0.0,
        }
    }
}

/// The calibration of one database: `v1` (context) and `v2` (decode), each
/// absent when no shape has both its rows; `None` as a whole when the
/// database has no calibration file (every delta 0).
#[derive(Debug)]
pub struct Dsv4TopkCalib {
    origin: Origin,
    pub v1: Option<TopkVariant>,
    pub v2: Option<TopkVariant>,
}

impl DatabaseTable for Dsv4TopkCalib {
    fn slots(cache: &TableCache) -> &Slots<(DbKey, bool), Self> {
        &cache.dsv4_topk_calib
    }

    fn origin(&self) -> &Origin {
        &self.origin
    }

    fn load(tree: &DataTree, system: &str, backend: &str, version: &str, shared_layer: bool) -> Result<Self> {
        let origin = |sources| Origin { db: format!("{system}/{backend}/{version}"), sources };
        let mut sources = match plan(tree, &DSV4_CSA_TOPK_CALIB_FILE, system, backend, version, shared_layer) {
            Ok(sources) => sources,
            Err(e) if e.class() == ErrorClass::Miss => {
                return Ok(Dsv4TopkCalib { origin: origin(Vec::new()), v1: None, v2: None });
            }
            Err(e) => return Err(e),
        };
        // (step, isl, batch) in first-appearance order, with the last
        // latency of each score mode.
        let mut keys: Vec<(i64, i64, i64)> = Vec::new();
        let mut seen: foldhash::HashSet<(i64, i64, i64)> = foldhash::HashSet::default();
        let mut modes: HashMap<((i64, i64, i64), String), f64> = HashMap::default();
        let cols = [STEP, ISL, BATCH_SIZE, SCORE_MODE, LATENCY];
        for source in &mut sources {
            let mut added = 0usize;
            scan(tree, source, &cols, |rows| {
                let (steps, isls, batches) = (rows.int(STEP)?, rows.int(ISL)?, rows.int(BATCH_SIZE)?);
                let (score_modes, latencies) = (rows.text(SCORE_MODE)?, rows.float(LATENCY)?);
                for i in 0..rows.len() {
                    let (Some(step), Some(isl), Some(batch), Some(mode), Some(latency)) =
                        (steps.get(i)?, isls.get(i)?, batches.get(i)?, score_modes.get(i)?, latencies.get(i)?)
                    else {
                        continue;
                    };
                    if mode.is_empty() || !latency.is_finite() {
                        continue;
                    }
                    let key = (step, isl, batch);
                    if modes.insert((key, mode.to_string()), latency).is_none() {
                        added += 1;
                        if seen.insert(key) {
                            keys.push(key);
                        }
                    }
                }
                Ok(())
            })?;
            source.new_keys = added;
        }
        let variant = |v: &str| {
            let (flat, top_last) = (format!("{v}_flat"), format!("{v}_top_last"));
            let points: Vec<((i64, i64, i64), f64)> = keys
                .iter()
                .filter_map(|&k| {
                    let f = modes.get(&(k, flat.clone()))?;
                    let t = modes.get(&(k, top_last.clone()))?;
                    let d = f - t;
                    Some((k, if 0.0 > d { 0.0 } else { d }))
                })
                .collect();
            (!points.is_empty()).then(|| TopkVariant::new(points))
        };
        let (v1, v2) = (variant("v1"), variant("v2"));
        Ok(Dsv4TopkCalib { origin: origin(sources), v1, v2 })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 4.5: exact, flat ends, and a blend between two prefixes.
    #[test]
    fn interpolation_is_flat_beyond_the_ends() {
        let v = TopkVariant::new(vec![((0, 1, 8), 0.0), ((4096, 1, 8), 0.0), ((6144, 1, 8), 0.004), ((0, 1, 1), 0.01)]);
        assert_eq!(v.delta(6144, 1, 8), 0.004);
        assert_eq!(v.delta(5120, 1, 8), 0.0 * 0.5 + 0.004 * 0.5);
        assert_eq!(v.delta(9000, 1, 8), 0.004);
        assert_eq!(v.delta(10, 1, 1), 0.01);
        assert_eq!(v.delta(10, 1, 100), v.delta(10, 1, 8));
    }
}
