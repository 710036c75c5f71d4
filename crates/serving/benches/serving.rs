//! Engine-level throughput of the serving estimates (no DataFusion):
//! `Server::estimate_agg` / `estimate_disagg` over 1,024 deployments
//! (tp 1/2/4/8 x batch 1..64 x four workloads) of one model on one
//! database, one thread, tables loaded and the server built once. The memo
//! of static passes is cleared per iteration by building the server anew,
//! so a point costs what it costs in a fresh query.
//! Run: `cargo bench -p aicsql-serving --bench serving`.

use std::path::PathBuf;

use aicsql_serving::{AggQuery, DisaggQuery, Parallel, Server};
use aicsql_tables::DataTree;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

const WORKLOADS: [(u32, u32, u32); 4] = [(1024, 128, 0), (4000, 1000, 0), (256, 256, 128), (8192, 512, 0)];

fn data_dir() -> PathBuf {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    var("AICSQL_DATA")
        .or_else(|| var("XDG_CACHE_HOME").map(|d| d.join("aicsql")))
        .unwrap_or_else(|| var("HOME").unwrap_or_else(|| PathBuf::from(".")).join(".cache").join("aicsql"))
}

fn grid() -> Vec<(u32, u32, (u32, u32, u32))> {
    let mut points = Vec::new();
    for tp in [1, 2, 4, 8] {
        for batch in 1..=64 {
            for w in WORKLOADS {
                points.push((tp, batch, w));
            }
        }
    }
    points
}

fn bench(c: &mut Criterion) {
    let tree = DataTree::open(&[data_dir()]).expect("run `aicsql data fetch` first");
    let cases = [
        ("LLAMA vllm", "meta-llama/Meta-Llama-3.1-8B", ("h200_sxm", "vllm", "0.19.0"), None),
        ("MOE trtllm", "Qwen/Qwen3-30B-A3B", ("h200_sxm", "trtllm", "1.3.0rc10"), Some(1)),
    ];
    let points = grid();
    let mut group = c.benchmark_group("serving");
    group.sample_size(10).throughput(Throughput::Elements(points.len() as u64));
    for (label, model, (system, backend, version), moe_tp) in cases {
        let server = || Server::new(&tree, model, system, backend, version, true).expect("server");
        let agg = |s: &mut Server| {
            let mut priced = 0usize;
            for &(tp, batch, (isl, osl, prefix)) in &points {
                let q = AggQuery {
                    parallel: Parallel::tensor(tp, moe_tp, None),
                    batch,
                    isl,
                    osl,
                    prefix,
                    ctx_tokens: None,
                    kv_sizing: Default::default(),
                };
                priced += usize::from(s.estimate_agg(&q).is_ok());
            }
            priced
        };
        let disagg = |s: &mut Server| {
            let mut priced = 0usize;
            for &(tp, batch, (isl, osl, prefix)) in &points {
                let p = Parallel::tensor(tp, moe_tp, None);
                let q = DisaggQuery {
                    prefill: p,
                    prefill_batch: 1,
                    prefill_workers: 1,
                    decode: p,
                    decode_batch: batch,
                    decode_workers: 1,
                    isl,
                    osl,
                    prefix,
                };
                priced += usize::from(s.estimate_disagg(&q).is_ok());
            }
            priced
        };
        let priced = agg(&mut server());
        assert!(priced > 0, "{model} on {system}/{backend}/{version} prices nothing");
        group.bench_function(format!("agg {label}: {model} ({priced} of {} priced)", points.len()), |b| {
            b.iter(|| agg(&mut server()))
        });
        let priced = disagg(&mut server());
        group.bench_function(format!("disagg {label}: {model} ({priced} of {} priced)", points.len()), |b| {
            b.iter(|| disagg(&mut server()))
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
