//! The GEMM goldens (`gemm_goldens.parquet`) checked against a mounted
//! tree, both columns: `latency_ms` (shared layer off) and
//! `latency_ms_shared`. Bit-identical is the bar; anything else is listed.

#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use aicsql_tables::{DataTree, GemmQuant, GemmTable};

use super::{GemmGolden, gemm_goldens};

#[derive(Debug, Default, Clone, Copy)]
pub struct Counts {
    pub bit_identical: usize,
    pub within_1e12: usize,
    pub mismatched: usize,
    pub misses_matched: usize,
    pub messages_matched: usize,
}

impl Counts {
    fn add(&mut self, other: Counts) {
        self.bit_identical += other.bit_identical;
        self.within_1e12 += other.within_1e12;
        self.mismatched += other.mismatched;
        self.misses_matched += other.misses_matched;
        self.messages_matched += other.messages_matched;
    }
}

fn table(
    tree: &DataTree,
    cache: &mut HashMap<(String, bool), Arc<GemmTable>>,
    g: &GemmGolden,
    shared: bool,
) -> Arc<GemmTable> {
    let key = (format!("{}/{}/{}/{}", g.system, g.backend, g.version, g.quant), shared);
    Arc::clone(cache.entry(key).or_insert_with(|| {
        let quant: GemmQuant = g.quant.parse().unwrap_or_else(|e| panic!("{}: {e}", g.row_id));
        let table = GemmTable::load(tree, &g.system, &g.backend, &g.version, quant, shared)
            .unwrap_or_else(|e| panic!("{}: cannot load: {e}", g.row_id));
        Arc::new(table)
    }))
}

/// Compares one column; returns counts per class and the failures.
pub fn compare(tree: &DataTree, goldens: &[GemmGolden], shared: bool) -> (BTreeMap<String, Counts>, Vec<String>) {
    let mut cache = HashMap::new();
    let mut per_class: BTreeMap<String, Counts> = BTreeMap::new();
    let mut failures = Vec::new();
    for g in goldens {
        let t = table(tree, &mut cache, g, shared);
        let (expected, reason) = if shared {
            (g.latency_ms_shared, g.miss_reason_shared.as_deref())
        } else {
            (g.latency_ms, g.miss_reason.as_deref())
        };
        let got = t.latency(g.m, g.n, g.k);
        let mut c = Counts::default();
        let shape = format!("{} {}/{} m={} n={} k={} ({})", g.row_id, t.db(), g.quant, g.m, g.n, g.k, g.class);
        // The planned path (what a step uses) answers exactly as the query does.
        let planned = t.latency_planned(&t.plan(g.n, g.k), g.m);
        if planned.map(f64::to_bits) != got.map(f64::to_bits) {
            failures.push(format!("{shape}: planned {planned:?} vs unplanned {got:?}"));
        }
        match (expected, got) {
            (Some(want), Ok(have)) if want.to_bits() == have.to_bits() => c.bit_identical += 1,
            (Some(want), Ok(have)) if ((have - want) / want).abs() <= 1e-12 => {
                c.within_1e12 += 1;
                failures.push(format!("{shape}: {have:?} vs spec {want:?} (within 1e-12)"));
            }
            (Some(want), got) => {
                c.mismatched += 1;
                failures.push(format!("{shape}: {got:?} vs spec {want:?}"));
            }
            (None, Err(miss)) => {
                c.misses_matched += 1;
                let message = t.miss_message(miss, g.m, g.n, g.k);
                if Some(message.as_str()) == reason {
                    c.messages_matched += 1;
                } else {
                    failures.push(format!("{shape}: message {message:?} vs spec {reason:?}"));
                }
                if !shared {
                    let detail = t.miss_detail(miss, g.m, g.n, g.k);
                    if detail != g.miss_detail {
                        failures.push(format!("{shape}: detail {detail:?} vs spec {:?}", g.miss_detail));
                    }
                }
            }
            (None, Ok(have)) => {
                c.mismatched += 1;
                failures.push(format!("{shape}: {have:?} where the spec misses ({reason:?})"));
            }
        }
        per_class.entry(g.class.clone()).or_default().add(c);
    }
    (per_class, failures)
}

pub fn report(column: &str, per_class: &BTreeMap<String, Counts>) -> Counts {
    let mut total = Counts::default();
    println!("{column}: class          bit-identical  within-1e-12  mismatched  misses-matched (message)");
    for (class, c) in per_class {
        println!(
            "{column}: {class:<14} {:>13}  {:>12}  {:>10}  {:>14} ({})",
            c.bit_identical, c.within_1e12, c.mismatched, c.misses_matched, c.messages_matched
        );
        total.add(*c);
    }
    println!(
        "{column}: {:<14} {:>13}  {:>12}  {:>10}  {:>14} ({})",
        "TOTAL", total.bit_identical, total.within_1e12, total.mismatched, total.misses_matched, total.messages_matched
    );
    total
}

/// Every golden row of one column on `tree`; panics listing the first failures.
pub fn check_column(tree: &DataTree, shared: bool, column: &str) {
    let goldens = gemm_goldens();
    assert!(goldens.len() > 15_000, "expected the full golden set, found {} rows", goldens.len());
    let (per_class, failures) = compare(tree, &goldens, shared);
    let total = report(column, &per_class);
    for f in failures.iter().take(40) {
        println!("FAIL {f}");
    }
    assert_eq!(total.bit_identical + total.misses_matched, goldens.len(), "{} failures", failures.len());
    assert!(failures.is_empty(), "{} failures (first listed above)", failures.len());
}
