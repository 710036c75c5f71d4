//! The deployment search (`Server::search_default`, both modes) on the three
//! golden cases of `tests/goldens/search`, beside the spec's own run time
//! recorded in each case's `meta.json`. Tables are loaded first; each
//! iteration builds its server anew, so nothing priced by an earlier
//! search is reused (a new search of a warm process). On one thread, then
//! with layouts priced on two.
//! Run: `cargo bench -p aicsql-serving --bench search`.

use std::fs::File;
use std::path::PathBuf;

use aicsql_serving::{SearchQuery, Server};
use aicsql_tables::DataTree;
use criterion::{Criterion, criterion_group, criterion_main};

fn data_dir() -> PathBuf {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    var("AICSQL_DATA")
        .or_else(|| var("XDG_CACHE_HOME").map(|d| d.join("aicsql")))
        .unwrap_or_else(|| var("HOME").unwrap_or_else(|| PathBuf::from(".")).join(".cache").join("aicsql"))
}

fn bench(c: &mut Criterion) {
    let tree = DataTree::open(&[data_dir()]).expect("run `aicsql data fetch` first");
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/goldens/search");
    let mut cases: Vec<PathBuf> = std::fs::read_dir(&root)
        .expect("the search goldens")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("meta.json").exists())
        .collect();
    cases.sort();
    let mut group = c.benchmark_group("search_default");
    group.sample_size(10);
    for case in cases {
        let meta: serde_json::Value =
            serde_json::from_reader(File::open(case.join("meta.json")).expect("meta.json")).expect("JSON");
        let a = &meta["args"];
        let s = |k: &str| a[k].as_str().expect("text arg").to_string();
        let u = |k: &str| a[k].as_u64().expect("int arg") as u32;
        let f = |k: &str| a[k].as_f64().expect("float arg");
        let q = SearchQuery {
            total_gpus: u("gpus"),
            isl: u("isl"),
            osl: u("osl"),
            prefix: u("prefix"),
            ttft_ms: f("ttft"),
            tpot_ms: f("tpot"),
            top_n: 5,
            strict_sla: false,
            threads: 1,
            kv_sizing: Default::default(),
            chunked_prefill: false,
            request_latency_ms: None,
            load: None,
        };
        let (model, system, backend, version) = (s("model"), s("system"), s("backend"), s("version"));
        let build = || Server::new(&tree, &model, &system, &backend, &version, true).expect("server");
        // Loads every table the search reads.
        build().search_default(&q).expect("search");
        let name = case.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let spec = meta["spec_seconds"].as_f64().unwrap_or(f64::NAN);
        for threads in [1, 2] {
            let q = SearchQuery { threads, ..q };
            group.bench_function(format!("{name} (spec {spec:.1} s), {threads} thread(s)"), |b| {
                b.iter(|| std::hint::black_box(build().search_default(&q).expect("search")))
            });
        }
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
