//! The GEMM estimator's API contract: caching, errors, misses and traces.

mod common;

use std::sync::Arc;
use std::thread;

use aicsql_tables::{GemmMiss, GemmQuant, GemmTable, SourceRole, TraceStage};

use common::tree;

fn load(system: &str, backend: &str, version: &str, quant: GemmQuant, shared: bool) -> GemmTable {
    GemmTable::load(tree(), system, backend, version, quant, shared).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn cache_loads_each_table_once() {
    let get = |quant, shared| {
        GemmTable::cached(tree(), "gb200", "vllm", "0.19.0", quant, shared).unwrap_or_else(|e| panic!("{e}"))
    };
    let a = get(GemmQuant::Nvfp4, true);
    assert!(Arc::ptr_eq(&a, &get(GemmQuant::Nvfp4, true)));
    assert!(!Arc::ptr_eq(&a, &get(GemmQuant::Nvfp4, false)));
    assert!(!Arc::ptr_eq(&a, &get(GemmQuant::Fp8, true)));
}

/// The cache belongs to its tree: a second tree over the same directories
/// starts empty (a refetch is seen by new sessions), and a tree says when
/// its directories changed after it was opened.
#[test]
fn each_tree_owns_its_cache() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    for entry in std::fs::read_dir(common::data_dir()).unwrap_or_else(|e| panic!("{e}")).flatten() {
        if entry.path().is_dir() {
            std::os::unix::fs::symlink(entry.path(), dir.path().join(entry.file_name()))
                .unwrap_or_else(|e| panic!("{e}"));
        }
    }
    let open = || aicsql_tables::DataTree::open(&[dir.path()]).unwrap_or_else(|e| panic!("{e}"));
    let (first, second) = (open(), open());
    let table = GemmTable::cached(&first, "h200_sxm", "vllm", "0.19.0", GemmQuant::Fp8Block, true);
    assert!(table.is_ok());
    assert_eq!((first.cache().stats().gemm, first.cache().stats().systems), (1, 1));
    assert_eq!(second.cache().stats(), aicsql_tables::CacheStats::default());
    assert!(first.is_current());
    std::fs::create_dir(dir.path().join("arrived-later")).unwrap_or_else(|e| panic!("{e}"));
    assert!(!first.is_current());
}

#[test]
fn one_table_serves_many_threads() {
    let table = GemmTable::cached(tree(), "h200_sxm", "vllm", "0.19.0", GemmQuant::Fp8Block, true)
        .unwrap_or_else(|e| panic!("{e}"));
    let expected = table.latency(416, 1280, 5120);
    let handles: Vec<_> = (0..4)
        .map(|_| {
            let table = Arc::clone(&table);
            thread::spawn(move || table.latency(416, 1280, 5120))
        })
        .collect();
    for h in handles {
        assert_eq!(h.join().ok(), Some(expected));
    }
}

#[test]
fn unknown_database_is_an_error_naming_what_exists() {
    let err = GemmTable::load(tree(), "h200_sxm", "vllm", "0.99.0", GemmQuant::Fp8, true)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(err.contains("'h200_sxm/vllm/0.99.0'") && err.contains("has versions") && err.contains("0.19.0"), "{err}");
    let err = GemmTable::load(tree(), "no_such_gpu", "vllm", "0.19.0", GemmQuant::Fp8, true)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(err.contains("no_such_gpu") && err.contains("h200_sxm"), "{err}");
}

#[test]
fn absent_quant_misses_and_lists_the_supported_ones() {
    let table = load("h200_sxm", "vllm", "0.19.0", GemmQuant::Nvfp4, false);
    assert_eq!(table.site_count(), 0);
    assert_eq!(table.supported_dtypes(), ["bfloat16", "fp8", "fp8_block"]);
    assert_eq!(table.latency(37, 6144, 4096), Err(GemmMiss::QuantUnavailable));
    let message = table.miss_message(GemmMiss::QuantUnavailable, 37, 6144, 4096);
    assert!(message.contains("Supported gemm modes: ['bfloat16', 'fp8', 'fp8_block']"), "{message}");
}

#[test]
fn fp8_static_reads_the_fp8_slice() {
    let fp8 = load("gb200", "trtllm", "1.3.0rc10", GemmQuant::Fp8, false);
    let fp8_static = load("gb200", "trtllm", "1.3.0rc10", GemmQuant::Fp8Static, false);
    assert_eq!(fp8.point_count(), fp8_static.point_count());
    // The file also has an `fp8_static` dtype; the spec still reads `fp8`.
    assert!(fp8_static.supported_dtypes().iter().any(|d| d == "fp8_static"));
    for (m, n, k) in [(1, 4096, 4096), (37, 6144, 4096), (3000, 1280, 5120)] {
        assert_eq!(fp8.latency(m, n, k), fp8_static.latency(m, n, k));
    }
}

#[test]
fn shared_layer_sources_are_reported() {
    let table = load("h200_sxm", "vllm", "0.19.0", GemmQuant::Fp8Block, true);
    let sources: Vec<(&str, SourceRole, usize)> =
        table.sources().iter().map(|s| (s.version.as_str(), s.role, s.new_keys)).collect();
    assert_eq!(
        sources,
        [("0.19.0", SourceRole::Own, 29520), ("0.18.0", SourceRole::Older, 6), ("0.14.0", SourceRole::Older, 0)]
    );
    assert_eq!(table.point_count(), 29526);
}

#[test]
fn trace_explains_own_site_paths() {
    let table = load("h200_sxm", "vllm", "0.19.0", GemmQuant::Fp8, false);
    let stages = |m| table.trace(m, 4096, 4096).iter().map(|s| s.stage).collect::<Vec<_>>();
    assert_eq!(stages(1), [TraceStage::Exact, TraceStage::Result]);
    assert_eq!(stages(37), [TraceStage::Curve, TraceStage::Result]);
    assert_eq!(stages(0), [TraceStage::Hold, TraceStage::Result]);
    assert_eq!(stages(1 << 22), [TraceStage::Hold, TraceStage::Result]);
    let steps = table.trace(37, 4096, 4096);
    assert_eq!((steps[0].site_n, steps[0].site_k, steps[0].covers_m), (Some(4096), Some(4096), Some(true)));
    assert_eq!(steps[1].result_ms, table.latency(37, 4096, 4096).ok());
}

#[test]
fn trace_of_a_miss_shows_the_nearest_site() {
    let table = load("h200_sxm", "vllm", "0.19.0", GemmQuant::Fp8, false);
    assert_eq!(table.latency(416, 8, 8), Err(GemmMiss::NoSiteWithinDistance));
    let steps = table.trace(416, 8, 8);
    assert_eq!(steps.len(), 2);
    assert_eq!(steps[0].stage, TraceStage::Transfer);
    assert!(!steps[0].selected && steps[0].distance.is_some_and(|d| d > 2.0));
    assert_eq!(steps[1].stage, TraceStage::Miss);
    assert_eq!(steps[1].reason.as_deref(), Some("no site within max_site_distance"));
}
