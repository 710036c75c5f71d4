//! Throughput of `GemmTable::latency` per resolution path, on real data.
//! `cargo bench -p aicsql-tables --bench gemm` (data from `$AICSQL_DATA` or
//! `~/.cache/aicsql`). One thread: the numbers are per core.

use std::collections::BTreeMap;
use std::hint::black_box;
use std::path::PathBuf;
use std::time::Instant;

use criterion::{Criterion, Throughput};

use aicsql_tables::{DataTree, GemmQuant, GemmTable, TraceStage};

const PER_PATH: usize = 20_000;
fn data_dir() -> PathBuf {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    var("AICSQL_DATA").unwrap_or_else(|| var("HOME").unwrap_or_else(|| PathBuf::from(".")).join(".cache/aicsql"))
}

/// The path a query takes, from its trace: the own-site stage, or transfer.
fn path_of(table: &GemmTable, m: i64, n: i64, k: i64) -> &'static str {
    let steps = table.trace(m, n, k);
    match steps.first().map(|s| s.stage) {
        Some(TraceStage::Transfer) if steps.last().is_some_and(|s| s.stage == TraceStage::Result) => "transfer",
        Some(TraceStage::Miss) | Some(TraceStage::Transfer) => "miss",
        Some(stage) => stage.name(),
        None => "miss",
    }
}

fn main() {
    let tree = match DataTree::open(&[data_dir()]) {
        Ok(tree) => tree,
        Err(e) => {
            eprintln!("no perf data ({e}); run `cargo run -- data fetch` first");
            return;
        }
    };
    let started = Instant::now();
    let table = match GemmTable::load(&tree, "h200_sxm", "vllm", "0.19.0", GemmQuant::Fp8Block, true) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("{e}");
            return;
        }
    };
    println!(
        "load h200_sxm/vllm/0.19.0 fp8_block (shared): {:.1} ms, {} sites, {} points",
        started.elapsed().as_secs_f64() * 1e3,
        table.site_count(),
        table.point_count()
    );

    // Sort random shapes into buckets by the path they take.
    let dims = [128i64, 256, 512, 1024, 1280, 1536, 2048, 2560, 3072, 4096, 5120, 6144, 7168, 8192, 10240, 14336];
    let mut state = 0x1234_5678_9abc_def0u64;
    let mut next = move |bound: u64| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state % bound
    };
    let mut buckets: BTreeMap<&str, Vec<(i64, i64, i64)>> = BTreeMap::new();
    let mut tries = 0;
    while buckets.values().filter(|b| b.len() >= PER_PATH).count() < 4 && tries < 1_000_000 {
        tries += 1;
        let m = if next(2) == 0 { 1i64 << next(17) } else { next(70_000) as i64 };
        let (n, k) = if next(3) == 0 {
            (next(20_000) as i64 + 1, next(20_000) as i64 + 1)
        } else {
            (dims[next(dims.len() as u64) as usize], dims[next(dims.len() as u64) as usize])
        };
        let bucket = buckets.entry(path_of(&table, m, n, k)).or_default();
        if bucket.len() < PER_PATH {
            bucket.push((m, n, k));
        }
    }

    let mut criterion = Criterion::default().configure_from_args().sample_size(30);
    let mut group = criterion.benchmark_group("engine/h200_sxm_vllm_0.19.0_fp8_block");
    for (path, queries) in &buckets {
        group.throughput(Throughput::Elements(queries.len() as u64));
        group.bench_function(*path, |b| {
            b.iter(|| {
                let mut sink = 0.0;
                for &(m, n, k) in queries {
                    sink += table.latency(black_box(m), black_box(n), black_box(k)).unwrap_or(0.0);
                }
                sink
            })
        });
    }
    group.finish();
    criterion.final_summary();
}
