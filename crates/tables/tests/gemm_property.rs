//! Over a million random shapes on every golden database and every quant
//! mode: an estimate is always a finite positive number, a miss is always an
//! `Err` value, and the trace agrees with the estimate.

mod common;

use std::collections::{BTreeMap, BTreeSet};

use aicsql_tables::{GemmMiss, GemmQuant, GemmTable, TraceStage};

use common::{gemm_goldens, tree};

/// splitmix64: deterministic, dependency-free.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `lo..=hi`.
    fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.next() % (hi - lo + 1) as u64) as i64
    }

    /// Log-uniform in `lo..=hi` (most shapes of interest are small).
    fn log_range(&mut self, lo: i64, hi: i64) -> i64 {
        let bits = 64 - (hi as u64).leading_zeros() as i64;
        let top = 1i64 << self.range(0, bits - 1);
        self.range(lo.max(top / 2), hi.min(top.max(lo)))
    }
}

const M_MAX: i64 = 1 << 22;
const NK_MAX: i64 = 1 << 18;
/// Dimensions of real models; many are measured sites.
const MODEL_DIMS: [i64; 12] = [128, 1024, 1280, 2048, 4096, 5120, 6144, 8192, 14336, 25600, 128256, 151936];

fn shape(rng: &mut Rng) -> (i64, i64, i64) {
    let m = match rng.range(0, 9) {
        0 => rng.range(0, M_MAX),
        1 => [0, 1, M_MAX][rng.range(0, 2) as usize],
        _ => rng.log_range(0, M_MAX),
    };
    let dim = |rng: &mut Rng| match rng.range(0, 4) {
        0 => MODEL_DIMS[rng.range(0, MODEL_DIMS.len() as i64 - 1) as usize],
        1 => rng.range(1, NK_MAX),
        _ => rng.log_range(1, NK_MAX),
    };
    let n = dim(rng);
    (m, n, dim(rng))
}

#[test]
fn random_queries_never_give_bad_numbers() {
    let databases: BTreeSet<(String, String, String)> =
        gemm_goldens().into_iter().map(|g| (g.system, g.backend, g.version)).collect();
    let mut tables = Vec::new();
    for (system, backend, version) in &databases {
        for quant in GemmQuant::ALL {
            for shared in [false, true] {
                let table = GemmTable::load(tree(), system, backend, version, quant, shared)
                    .unwrap_or_else(|e| panic!("{system}/{backend}/{version} {quant}: {e}"));
                tables.push((table, shared));
            }
        }
    }
    // Quants a database lacks only ever miss; a few queries each suffice.
    const ABSENT_QUERIES: usize = 500;
    let with_data = tables.iter().filter(|(t, _)| t.site_count() > 0).count();
    let per_table = (1_000_000usize - ABSENT_QUERIES * (tables.len() - with_data)).div_ceil(with_data);
    let mut rng = Rng(0x5eed_0f9e_4401);
    let mut outcomes: BTreeMap<String, usize> = BTreeMap::new();
    let mut total = 0usize;
    for (table, shared) in &tables {
        let queries = if table.site_count() > 0 { per_table } else { ABSENT_QUERIES };
        for i in 0..queries {
            let (m, n, k) = shape(&mut rng);
            let got = table.latency(m, n, k);
            let label = format!("{}/{} m={m} n={n} k={k} shared={shared}", table.db(), table.quant());
            match got {
                Ok(v) => assert!(v.is_finite() && v > 0.0, "{label}: {v}"),
                Err(miss) => assert_ne!(miss, GemmMiss::InvalidShape, "{label}"),
            }
            *outcomes.entry(got.map_or_else(|m| format!("{m:?}"), |_| "Ok".into())).or_default() += 1;
            if i % 97 == 0 {
                let steps = table.trace(m, n, k);
                let last = steps.last().map(|s| (s.stage, s.result_ms.map(f64::to_bits)));
                let want = match got {
                    Ok(v) => (TraceStage::Result, Some(v.to_bits())),
                    Err(_) => (TraceStage::Miss, None),
                };
                assert_eq!(last, Some(want), "{label}");
            }
            total += 1;
        }
    }
    println!("{total} queries over {} tables ({with_data} with data): {outcomes:?}", tables.len());
    assert!(total >= 1_000_000);
}

#[test]
fn out_of_domain_shapes_are_misses_not_panics() {
    let table =
        GemmTable::load(tree(), "h200_sxm", "vllm", "0.19.0", GemmQuant::Fp8, true).unwrap_or_else(|e| panic!("{e}"));
    for (m, n, k) in [(-1, 4096, 4096), (1, 0, 4096), (1, 4096, -5), (i64::MAX, i64::MAX, i64::MAX), (i64::MIN, 1, 1)] {
        assert_eq!(table.latency(m, n, k), Err(GemmMiss::InvalidShape), "m={m} n={n} k={k}");
        let steps = table.trace(m, n, k);
        assert_eq!(steps.len(), 1);
        assert_eq!(steps[0].stage, TraceStage::Miss);
    }
}
