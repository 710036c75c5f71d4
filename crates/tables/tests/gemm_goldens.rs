//! GEMM parity with the spec: every row of `gemm_goldens.parquet`, with the
//! shared layer off (`latency_ms`, own file only) and on (`latency_ms_shared`).
//! Bit-identical is the bar; anything else fails and is listed.

mod common;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use aicsql_tables::{GemmQuant, GemmTable, TraceStage};

use common::{GemmGolden, gemm_goldens, tree};

#[derive(Debug, Default, Clone, Copy)]
struct Counts {
    bit_identical: usize,
    within_1e12: usize,
    mismatched: usize,
    misses_matched: usize,
    messages_matched: usize,
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

fn table(cache: &mut HashMap<(String, bool), Arc<GemmTable>>, g: &GemmGolden, shared: bool) -> Arc<GemmTable> {
    let key = (format!("{}/{}/{}/{}", g.system, g.backend, g.version, g.quant), shared);
    Arc::clone(cache.entry(key).or_insert_with(|| {
        let quant: GemmQuant = g.quant.parse().unwrap_or_else(|e| panic!("{}: {e}", g.row_id));
        let table = GemmTable::load(tree(), &g.system, &g.backend, &g.version, quant, shared)
            .unwrap_or_else(|e| panic!("{}: cannot load: {e}", g.row_id));
        Arc::new(table)
    }))
}

/// Compares one column; returns counts per class and the failures.
fn compare(goldens: &[GemmGolden], shared: bool) -> (BTreeMap<String, Counts>, Vec<String>) {
    let mut cache = HashMap::new();
    let mut per_class: BTreeMap<String, Counts> = BTreeMap::new();
    let mut failures = Vec::new();
    for g in goldens {
        let t = table(&mut cache, g, shared);
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

fn report(column: &str, per_class: &BTreeMap<String, Counts>) -> Counts {
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

fn check_column(shared: bool, column: &str) {
    let goldens = gemm_goldens();
    assert!(goldens.len() > 15_000, "expected the full golden set, found {} rows", goldens.len());
    let (per_class, failures) = compare(&goldens, shared);
    let total = report(column, &per_class);
    for f in failures.iter().take(40) {
        println!("FAIL {f}");
    }
    assert_eq!(total.bit_identical + total.misses_matched, goldens.len(), "{} failures", failures.len());
    assert!(failures.is_empty(), "{} failures (first listed above)", failures.len());
}

#[test]
fn latency_ms_own_file_only() {
    check_column(false, "latency_ms");
}

#[test]
fn latency_ms_shared_layer() {
    check_column(true, "latency_ms_shared");
}

/// `shared_sources` lists the versions that contributed keys to the quant's
/// slice: the union is per table with first-wins per key, and a source that
/// adds nothing to a slice leaves it untouched.
#[test]
fn shared_sources_are_the_contributing_versions() {
    let mut seen = HashMap::new();
    for g in gemm_goldens() {
        let key = format!("{}/{}/{}/{}", g.system, g.backend, g.version, g.quant);
        if seen.contains_key(&key) {
            continue;
        }
        let quant: GemmQuant = g.quant.parse().unwrap_or_else(|e| panic!("{e}"));
        let t = GemmTable::load(tree(), &g.system, &g.backend, &g.version, quant, true)
            .unwrap_or_else(|e| panic!("{key}: {e}"));
        let contributing: Vec<&str> =
            t.sources().iter().filter(|s| s.new_keys > 0).map(|s| s.version.as_str()).collect();
        assert_eq!(contributing.join(";"), g.shared_sources.clone().unwrap_or_default(), "{key}");
        seen.insert(key, ());
    }
}

/// Drift guarded: a port that ranked sites without the spec's site order
/// picked (1024, 6144) instead of (1536, 4096) as the 4th neighbour of
/// h200_sxm/vllm/0.19.0 fp8_block n=1280 k=5120. Both lie at exactly
/// 0.41572201881803594; the stable sort keeps the site met first walking the
/// table m-major, which is (1536, 4096).
#[test]
fn site_order_breaks_the_distance_tie_at_n1280_k5120() {
    let expected: [(i64, f64); 4] =
        [(1, 0.021895413193058825), (4, 0.020520365862156952), (32, 0.020907013733453883), (416, 0.02634752182721208)];
    let neighbours = [(1536, 5120), (1024, 5120), (1536, 6144), (1536, 4096)];
    const TIE: f64 = 0.41572201881803594;
    for shared in [false, true] {
        let t = GemmTable::load(tree(), "h200_sxm", "vllm", "0.19.0", GemmQuant::Fp8Block, shared)
            .unwrap_or_else(|e| panic!("{e}"));
        for (m, want) in expected {
            let got = t.latency(m, 1280, 5120);
            assert_eq!(got.map(f64::to_bits), Ok(want.to_bits()), "m={m} shared={shared}: {got:?} vs {want:?}");

            let steps = t.trace(m, 1280, 5120);
            let transfer: Vec<_> = steps.iter().filter(|s| s.stage == TraceStage::Transfer).collect();
            let blended: Vec<(i64, i64)> = transfer
                .iter()
                .filter(|s| s.selected)
                .map(|s| (s.site_n.unwrap_or(0), s.site_k.unwrap_or(0)))
                .collect();
            assert_eq!(blended, neighbours, "m={m} shared={shared}");
            assert_eq!(transfer[3].rank, Some(4));
            assert_eq!(transfer[3].distance, Some(TIE));
            // The loser of the tie is listed right after, not blended.
            assert_eq!((transfer[4].site_n, transfer[4].site_k), (Some(1024), Some(6144)));
            assert_eq!((transfer[4].rank, transfer[4].distance, transfer[4].selected), (Some(5), Some(TIE), false));
            let last = steps.last().map(|s| (s.stage, s.result_ms));
            assert_eq!(last, Some((TraceStage::Result, Some(want))));
        }
    }
}
