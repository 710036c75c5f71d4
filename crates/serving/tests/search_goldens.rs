//! `cli default` on the Rust path against the spec's own runs
//! (`tests/goldens/search/<case>/`): for each case and mode, the candidates
//! frame, the Pareto front and the best configs equal the spec's row for
//! row, in order, on every column (values at the spec's 3 decimals, exact
//! equality), and `chosen_exp` / `best_throughputs` of `meta.json`.

mod common;

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};

use aicsql_serving::{AggCandidate, DisaggCandidate, Search, SearchQuery, Server, WorkerEstimate};
use aicsql_tables::DataTree;
use common::{Cell, data_dir, frame, goldens_dir};

type Row = BTreeMap<String, Cell>;

fn n(v: impl Into<f64>) -> Cell {
    Cell::Num(v.into())
}

fn t(v: impl Into<String>) -> Cell {
    Cell::Text(v.into())
}

fn opt(v: Option<i64>) -> Cell {
    v.map_or(Cell::Null, |v| Cell::Num(v as f64))
}

/// Our agg row under the spec's column names.
fn agg_row(c: &AggCandidate, model: &str, server: &Server, cluster: f64) -> Row {
    let e = &c.estimate;
    let p = e.parallel;
    let cells: Vec<(&str, Cell)> = vec![
        ("model", t(model)),
        ("isl", n(e.isl)),
        ("osl", n(e.osl)),
        ("prefix", n(e.prefix)),
        ("concurrency", n(e.concurrency as f64)),
        ("request_rate", n(e.request_rate)),
        ("bs", n(e.bs)),
        ("global_bs", n(e.global_bs as f64)),
        ("ttft", n(e.ttft_ms)),
        ("tpot", n(e.tpot_ms)),
        ("request_latency", n(e.request_latency_ms)),
        ("encoder_latency", n(e.encoder_ms)),
        ("encoder_memory", n(e.encoder_memory_gib)),
        ("seq/s", n(e.seq_per_s)),
        ("seq/s/gpu", n(e.seq_per_s_per_gpu)),
        ("tokens/s", n(e.tokens_per_s)),
        ("tokens/s/gpu", n(e.tokens_per_s_per_gpu)),
        ("tokens/s/user", n(e.tokens_per_s_per_user)),
        ("num_total_gpus", n(e.num_total_gpus as f64)),
        ("tp", n(p.tp)),
        ("pp", n(p.pp)),
        ("dp", n(p.dp)),
        ("moe_tp", opt(e.moe_tp)),
        ("moe_ep", opt(e.moe_ep)),
        ("cp", n(p.cp)),
        ("parallel", t(e.label().to_string())),
        ("gemm", t(e.quants.gemm.name())),
        ("kvcache", t(e.quants.kv.name())),
        ("fmha", t(e.quants.fmha.name())),
        ("moe", t(e.quants.moe.name())),
        ("comm", t("half")),
        ("memory", n(e.memory.total)),
        ("balance_score", n(e.balance_score)),
        ("num_ctx_reqs", n(e.num_ctx_reqs)),
        ("num_gen_reqs", n(e.num_gen_reqs)),
        ("num_tokens", n(e.num_tokens)),
        ("ctx_tokens", n(e.ctx_tokens)),
        ("gen_tokens", n(e.num_gen_reqs)),
        ("backend", t(server.backend().name())),
        ("version", t(server.version())),
        ("system", t(server.system())),
        ("power_w", n(0.0)),
        ("tokens/s/gpu_cluster", n(cluster)),
        // The merged frames of `--backend auto` name each row's backend.
        ("backend", t(server.backend().name())),
    ];
    cells.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

fn side(row: &mut Row, s: &str, w: &WorkerEstimate, server: &Server) {
    let p = w.parallel;
    for (k, v) in [
        ("bs", n(w.bs)),
        ("global_bs", n(w.global_bs as f64)),
        ("workers", n(w.workers)),
        ("seq/s/worker", n(w.seq_per_s_per_worker)),
        ("tp", n(p.tp)),
        ("pp", n(p.pp)),
        ("dp", n(p.dp)),
        ("moe_tp", opt(w.moe_tp.or(p.moe_tp.map(i64::from)))),
        ("moe_ep", opt(w.moe_ep.or(p.moe_ep.map(i64::from)))),
        (
            "parallel",
            t(p.label(w.moe_tp.or(p.moe_tp.map(i64::from)), w.moe_ep.or(p.moe_ep.map(i64::from))).to_string()),
        ),
        ("gemm", t(w.quants.gemm.name())),
        ("kvcache", t(w.quants.kv.name())),
        ("fmha", t(w.quants.fmha.name())),
        ("moe", t(w.quants.moe.name())),
        ("comm", t("half")),
        ("memory", n(w.memory_gib)),
        ("backend", t(server.backend().name())),
        ("version", t(server.version())),
        ("system", t(server.system())),
    ] {
        row.insert(format!("({s}){k}"), v);
    }
}

fn disagg_row(c: &DisaggCandidate, model: &str, server: &Server, decode_server: &Server, cluster: f64) -> Row {
    let e = &c.estimate;
    let mut row: Row = [
        ("model", t(model)),
        ("isl", n(e.isl)),
        ("osl", n(e.osl)),
        ("prefix", n(e.prefix)),
        ("concurrency", n(e.concurrency as f64)),
        ("request_rate", n(e.request_rate)),
        ("ttft", n(e.ttft_ms)),
        ("tpot", n(e.tpot_ms)),
        ("request_latency", n(e.request_latency_ms)),
        ("encoder_latency", n(e.encoder_ms)),
        ("seq/s", n(e.seq_per_s)),
        ("seq/s/gpu", n(e.seq_per_s_per_gpu)),
        ("tokens/s", n(e.tokens_per_s)),
        ("tokens/s/gpu", n(e.tokens_per_s_per_gpu)),
        ("tokens/s/user", n(e.tokens_per_s_per_user)),
        ("num_total_gpus", n(e.num_total_gpus as f64)),
        ("(p)cp", n(e.prefill.parallel.cp)),
        ("(e)workers", n(0.0)),
        ("(e)tp", n(0.0)),
        ("(e)pp", n(0.0)),
        ("(e)parallel", t("")),
        ("(e)memory", n(e.encoder_memory_gib)),
        ("power_w", n(0.0)),
        ("tokens/s/gpu_cluster", n(cluster)),
        // The merged frames of `--backend auto` name each row's backend.
        ("backend", t(server.backend().name())),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    side(&mut row, "p", &e.prefill, server);
    side(&mut row, "d", &e.decode, decode_server);
    row
}

/// Compares our rows with a golden frame, row by row in order, on every
/// golden column; returns the failures.
fn compare(what: &str, ours: &[Row], golden: &[Row]) -> Vec<String> {
    let mut failures = Vec::new();
    if ours.len() != golden.len() {
        failures.push(format!("{what}: {} rows, the spec has {}", ours.len(), golden.len()));
    }
    for (i, (o, g)) in ours.iter().zip(golden).enumerate() {
        for (column, want) in g {
            let got = o.get(column).unwrap_or(&Cell::Null);
            let equal = match (got, want) {
                (Cell::Num(a), Cell::Num(b)) => a.to_bits() == b.to_bits() || (*a == 0.0 && *b == 0.0),
                // An object column of the spec's frame (the Llama disagg front's
                // cluster rate) is stored as the float's repr, which round-trips.
                (Cell::Num(a), Cell::Text(b)) => b.parse::<f64>().is_ok_and(|b| b.to_bits() == a.to_bits()),
                (a, b) => a == b,
            };
            if !equal {
                failures.push(format!("{what} row {i} {column}: spec {want:?}, ours {got:?}"));
            }
        }
    }
    failures
}

fn check<C>(
    what: &str,
    search: &Search<C>,
    dir: &Path,
    mode: &str,
    row: impl Fn(&C, f64) -> Row,
    failures: &mut Vec<String>,
) {
    let rows: Vec<Row> = search.candidates.iter().zip(&search.cluster).map(|(c, &k)| row(c, k)).collect();
    let pick = |idx: &[usize]| idx.iter().map(|&i| rows[i].clone()).collect::<Vec<Row>>();
    for (name, ours) in
        [("candidates", rows.clone()), ("pareto_fronts", pick(&search.pareto)), ("best_configs", pick(&search.best))]
    {
        let golden = frame(&dir.join(format!("{mode}.{name}.parquet")));
        let found = compare(&format!("{what} {mode} {name}"), &ours, &golden);
        println!("{what} {mode} {name}: {} rows, {} differences", golden.len(), found.len());
        failures.extend(found);
    }
}

#[test]
fn every_search_golden_case() {
    let dir = data_dir();
    let tree = DataTree::open(&[&dir]).unwrap_or_else(|e| panic!("perf data not found in {} ({e})", dir.display()));
    let root = goldens_dir().join("search");
    let mut cases: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap_or_else(|e| panic!("{}: {e}", root.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("meta.json").exists())
        .filter(|p| !is_auto(p) && !is_recommend(p))
        .collect();
    cases.sort();
    assert!(cases.len() >= 4, "expected the search goldens, found {cases:?}");
    let mut failures = Vec::new();
    for case in &cases {
        let name = case.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let meta: serde_json::Value =
            serde_json::from_reader(File::open(case.join("meta.json")).expect("meta.json")).expect("meta.json is JSON");
        let a = &meta["args"];
        let s = |k: &str| a[k].as_str().unwrap_or_else(|| panic!("meta args.{k}")).to_string();
        let model = s("model");
        let mut server = common::case_server(&tree, a);
        let mut decode_server = common::case_decode_server(&tree, a);
        let q = case_query(a);
        let started = std::time::Instant::now();
        let result = server.search_default_with(decode_server.as_mut(), &q).unwrap_or_else(|e| panic!("{name}: {e}"));
        println!(
            "{name}: searched in {:.1} ms (spec: {} s)",
            started.elapsed().as_secs_f64() * 1e3,
            meta["spec_seconds"]
        );
        // Layouts priced on two threads (each its own server): the same result.
        let parallel = server
            .search_default_with(decode_server.as_mut(), &SearchQuery { threads: 2, ..q })
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(parallel == result, "{name}: two threads give another result");
        let (Some(agg), Some(disagg)) = (&result.agg, &result.disagg) else { panic!("{name}: a mode is missing") };
        check(&name, agg, case, "agg", |c, k| agg_row(c, &model, &server, k), &mut failures);
        let decode_role = decode_server.as_ref().unwrap_or(&server);
        check(&name, disagg, case, "disagg", |c, k| disagg_row(c, &model, &server, decode_role, k), &mut failures);
        let chosen = result.chosen.map(|m| m.name().to_string());
        if chosen.as_deref() != meta["chosen_exp"].as_str() {
            failures.push(format!("{name}: chosen {chosen:?}, spec {}", meta["chosen_exp"]));
        }
        for (mode, ours) in [("agg", agg.best_throughput), ("disagg", disagg.best_throughput)] {
            let spec = meta["best_throughputs"][mode].as_f64().unwrap_or(f64::NAN);
            if ours.to_bits() != spec.to_bits() {
                failures.push(format!("{name}: best throughput {mode} {ours:?}, spec {spec:?}"));
            }
        }
    }
    for f in failures.iter().take(60) {
        println!("FAIL {f}");
    }
    assert!(failures.is_empty(), "{} failures", failures.len());
}

/// A case's search arguments and options from its meta.json `args`.
fn case_query(a: &serde_json::Value) -> SearchQuery {
    let u = |k: &str| a[k].as_u64().unwrap_or_else(|| panic!("meta args.{k}")) as u32;
    let f = |k: &str| a[k].as_f64().unwrap_or_else(|| panic!("meta args.{k}"));
    let (kv_sizing, chunked_prefill) = common::case_kv_options(a);
    SearchQuery {
        total_gpus: u("gpus"),
        isl: u("isl"),
        osl: u("osl"),
        prefix: u("prefix"),
        ttft_ms: f("ttft"),
        tpot_ms: f("tpot"),
        top_n: u("top_n") as usize,
        strict_sla: false,
        threads: 1,
        kv_sizing,
        chunked_prefill,
        request_latency_ms: a["request_latency"].as_f64(),
        load: None,
    }
}

fn meta_of(case: &Path) -> serde_json::Value {
    serde_json::from_reader(File::open(case.join("meta.json")).expect("meta.json")).expect("meta.json is JSON")
}

/// A `--backend auto` case (docs/spec/experiments.md 2).
fn is_auto(case: &Path) -> bool {
    meta_of(case)["args"]["backend"].as_str() == Some("auto")
}

/// `--backend auto`: every experiment's frames (`<name>.*.parquet`), the
/// merged picks (`agg.*`, `disagg.*`), `chosen_exp` and the merged best
/// throughputs equal the spec's.
#[test]
fn every_backend_auto_case() {
    use aicsql_serving::{Backend, BackendServers, Mode, Outcome, search_experiments};
    let dir = data_dir();
    let tree = DataTree::open(&[&dir]).unwrap_or_else(|e| panic!("perf data not found in {} ({e})", dir.display()));
    let root = goldens_dir().join("search");
    let mut cases: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap_or_else(|e| panic!("{}: {e}", root.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("meta.json").exists() && is_auto(p) && !is_recommend(p))
        .collect();
    cases.sort();
    assert!(!cases.is_empty(), "expected the --backend auto goldens");
    let mut failures = Vec::new();
    for case in &cases {
        let name = case.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let meta = meta_of(case);
        let a = &meta["args"];
        let model = a["model"].as_str().expect("model").to_string();
        let system = a["system"].as_str().expect("system");
        let backends = [Backend::Trtllm, Backend::Sglang, Backend::Vllm];
        let mut servers: Vec<Server> =
            backends.iter().map(|b| common::role_server(&tree, a, system, Some(b.name()))).collect();
        let q = case_query(a);
        let mut roles: Vec<_> = backends
            .iter()
            .zip(servers.iter_mut())
            .map(|(b, server)| (*b, BackendServers::Ready { server, decode: None }))
            .collect();
        let result = search_experiments(&mut roles, &q, None).unwrap_or_else(|e| panic!("{name}: {e}"));
        let names: Vec<&str> = result.experiments.iter().map(|e| e.name.as_str()).collect();
        let spec_names: Vec<&str> =
            meta["experiments"].as_array().expect("experiments").iter().filter_map(|v| v.as_str()).collect();
        if names != spec_names {
            failures.push(format!("{name}: experiments {names:?}, spec {spec_names:?}"));
        }
        let server_of = |b: Backend| {
            let k = backends.iter().position(|x| *x == b).expect("a backend of the list");
            &servers[k]
        };
        for e in &result.experiments {
            let server = server_of(e.backend);
            let what = format!("{name} {}", e.name);
            match &e.outcome {
                Outcome::Agg(s) => check(&what, s, case, &e.name, |c, k| agg_row(c, &model, server, k), &mut failures),
                Outcome::Disagg(s) => {
                    check(&what, s, case, &e.name, |c, k| disagg_row(c, &model, server, server, k), &mut failures)
                }
                Outcome::Failed(reason) => {
                    if meta["outcomes"][&e.name].is_null() {
                        failures.push(format!("{what}: failed ({reason}), the spec's ran"));
                    }
                }
            }
        }
        let Some(merged) = &result.merged else { panic!("{name}: more than two experiments are merged") };
        for (mode, picks) in [(Mode::Agg, &merged[0]), (Mode::Disagg, &merged[1])] {
            let row = |(e, i): (usize, usize)| -> Row {
                let experiment = &result.experiments[e];
                let server = server_of(experiment.backend);
                match &experiment.outcome {
                    Outcome::Agg(s) => agg_row(&s.candidates[i], &model, server, s.cluster[i]),
                    Outcome::Disagg(s) => disagg_row(&s.candidates[i], &model, server, server, s.cluster[i]),
                    Outcome::Failed(_) => unreachable!("a failed experiment has no pick"),
                }
            };
            for (which, rows) in [("best_configs", &picks.best), ("pareto_fronts", &picks.pareto)] {
                let path = case.join(format!("{}.{which}.parquet", mode.name()));
                let ours: Vec<Row> = rows.iter().map(|&r| row(r)).collect();
                // No file: the spec's frame was None (no experiment of the mode).
                let golden = if path.exists() { frame(&path) } else { Vec::new() };
                let found = compare(&format!("{name} merged {} {which}", mode.name()), &ours, &golden);
                println!("{name} merged {} {which}: {} rows, {} differences", mode.name(), golden.len(), found.len());
                failures.extend(found);
            }
            let spec = meta["best_throughputs"][mode.name()].as_f64().unwrap_or(f64::NAN);
            if picks.best_throughput.to_bits() != spec.to_bits() {
                failures.push(format!(
                    "{name}: merged best {} {:?}, spec {spec:?}",
                    mode.name(),
                    picks.best_throughput
                ));
            }
        }
        // The spec's chosen_exp names the merged mode; ours the experiment its rank 1 came from.
        let chosen = result.chosen.map(|e| result.experiments[e].mode.name());
        if chosen != meta["chosen_exp"].as_str() {
            failures.push(format!("{name}: chosen {chosen:?}, spec {}", meta["chosen_exp"]));
        }
    }
    for f in failures.iter().take(60) {
        println!("FAIL {f}");
    }
    assert!(failures.is_empty(), "{} failures", failures.len());
}

/// A `cli recommend` case (docs/spec/experiments.md 4).
fn is_recommend(case: &Path) -> bool {
    let a = &meta_of(case)["args"];
    !a["target_request_rate"].is_null() || !a["target_concurrency"].is_null()
}

/// `cli recommend`: the last budget's candidates, fronts and load-match
/// best configs (with `replicas_needed`, `total_gpus_needed`), the budget,
/// `best_throughputs` (`1 / GPUs`) and `chosen_exp` equal the spec's.
#[test]
fn every_recommend_case() {
    use aicsql_serving::LoadTarget;
    let dir = data_dir();
    let tree = DataTree::open(&[&dir]).unwrap_or_else(|e| panic!("perf data not found in {} ({e})", dir.display()));
    let root = goldens_dir().join("search");
    let mut cases: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap_or_else(|e| panic!("{}: {e}", root.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("meta.json").exists() && is_recommend(p))
        .collect();
    cases.sort();
    assert!(!cases.is_empty(), "expected the recommend goldens");
    let mut failures = Vec::new();
    for case in &cases {
        let name = case.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let meta = meta_of(case);
        let a = &meta["args"];
        let model = a["model"].as_str().expect("model").to_string();
        let target = match a["target_request_rate"].as_f64() {
            Some(rate) => LoadTarget::RequestRate(rate),
            None => LoadTarget::Concurrency(a["target_concurrency"].as_f64().expect("a load target")),
        };
        let q = SearchQuery { total_gpus: 0, ..case_query(a) };
        if is_auto(case) {
            recommend_every_backend(&tree, case, &meta, &q, target, &mut failures);
            continue;
        }
        let mut server = common::case_server(&tree, a);
        let r = server.search_recommend(None, &q, target).unwrap_or_else(|e| panic!("{name}: {e}"));
        let used = r.budgets.last().copied().map(u64::from);
        let tried: Vec<u32> = meta["budgets_tried"]
            .as_array()
            .expect("budgets_tried")
            .iter()
            .filter_map(|b| b.as_u64().and_then(|b| u32::try_from(b).ok()))
            .collect();
        if r.budgets != tried {
            failures.push(format!("{name}: budgets {:?}, spec {tried:?}", r.budgets));
        }
        if meta["error"].as_str().is_some_and(|e| e.starts_with("NoFeasibleConfigError")) {
            // No config at the last budget: the spec raises where aicsql
            // reports each experiment's reason.
            let nothing = r.agg.best.is_empty() && r.disagg.as_ref().is_none_or(|d| d.best.is_empty());
            if !(nothing && r.chosen.is_none()) {
                failures.push(format!("{name}: the spec found nothing; ours chose {:?}", r.chosen));
            }
            println!("{name}: budgets {:?}, nothing found (spec: {})", r.budgets, meta["error"]);
            continue;
        }
        if used != meta["total_gpus_used"].as_u64() {
            failures.push(format!("{name}: budget {used:?}, spec {}", meta["total_gpus_used"]));
        }
        let with_needed = |mut rows: Vec<Row>, needed: &[(i64, i64)]| {
            for (row, &(replicas, gpus)) in rows.iter_mut().zip(needed) {
                row.insert("replicas_needed".into(), n(replicas as f64));
                row.insert("total_gpus_needed".into(), n(gpus as f64));
            }
            rows
        };
        let mut frames: Vec<(&str, &str, Vec<Row>)> = Vec::new();
        let agg_rows: Vec<Row> =
            r.agg.candidates.iter().zip(&r.agg.cluster).map(|(c, &k)| agg_row(c, &model, &server, k)).collect();
        let pick = |rows: &[Row], idx: &[usize]| idx.iter().map(|&i| rows[i].clone()).collect::<Vec<Row>>();
        frames.push(("agg", "pareto_fronts", pick(&agg_rows, &r.agg.pareto)));
        frames.push(("agg", "best_configs", with_needed(pick(&agg_rows, &r.agg.best), &r.agg.needed)));
        frames.push(("agg", "candidates", agg_rows));
        if let Some(d) = &r.disagg {
            let rows: Vec<Row> =
                d.candidates.iter().zip(&d.cluster).map(|(c, &k)| disagg_row(c, &model, &server, &server, k)).collect();
            frames.push(("disagg", "pareto_fronts", pick(&rows, &d.pareto)));
            frames.push(("disagg", "best_configs", with_needed(pick(&rows, &d.best), &d.needed)));
            frames.push(("disagg", "candidates", rows));
        }
        for (mode, which, ours) in frames {
            let path = case.join(format!("{mode}.{which}.parquet"));
            let golden = if path.exists() { frame(&path) } else { Vec::new() };
            let found = compare(&format!("{name} {mode} {which}"), &ours, &golden);
            println!("{name} {mode} {which}: {} rows, {} differences", golden.len(), found.len());
            failures.extend(found);
        }
        for (mode, ours) in
            [("agg", Some(&r.agg.best_throughput)), ("disagg", r.disagg.as_ref().map(|d| &d.best_throughput))]
        {
            let spec = meta["best_throughputs"][mode].as_f64();
            if ours.copied().map(f64::to_bits) != spec.map(f64::to_bits) {
                failures.push(format!("{name}: best throughput {mode} {ours:?}, spec {spec:?}"));
            }
        }
        let chosen = r.chosen.map(|m| m.name().to_string());
        if chosen.as_deref() != meta["chosen_exp"].as_str() {
            failures.push(format!("{name}: chosen {chosen:?}, spec {}", meta["chosen_exp"]));
        }
    }
    for f in failures.iter().take(60) {
        println!("FAIL {f}");
    }
    assert!(failures.is_empty(), "{} failures", failures.len());
}

/// A `cli recommend --backend auto` case: the budgets, every experiment's
/// load-match frames, the picks merged by tokens/s/gpu and `chosen_exp`.
fn recommend_every_backend(
    tree: &DataTree,
    case: &Path,
    meta: &serde_json::Value,
    q: &SearchQuery,
    target: aicsql_serving::LoadTarget,
    failures: &mut Vec<String>,
) {
    use aicsql_serving::{Backend, BackendServers, Mode, Outcome, recommend_experiments};
    let name = case.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let a = &meta["args"];
    let model = a["model"].as_str().expect("model").to_string();
    let system = a["system"].as_str().expect("system");
    let backends = [Backend::Trtllm, Backend::Sglang, Backend::Vllm];
    let mut servers: Vec<Server> =
        backends.iter().map(|b| common::role_server(tree, a, system, Some(b.name()))).collect();
    let mut roles: Vec<_> = backends
        .iter()
        .zip(servers.iter_mut())
        .map(|(b, server)| (*b, BackendServers::Ready { server, decode: None }))
        .collect();
    let (budgets, result) = recommend_experiments(&mut roles, q, target).unwrap_or_else(|e| panic!("{name}: {e}"));
    drop(roles);
    let tried: Vec<u32> = meta["budgets_tried"]
        .as_array()
        .expect("budgets_tried")
        .iter()
        .filter_map(|b| b.as_u64().and_then(|b| u32::try_from(b).ok()))
        .collect();
    if budgets != tried {
        failures.push(format!("{name}: budgets {budgets:?}, spec {tried:?}"));
    }
    let server_of = |b: Backend| &servers[backends.iter().position(|x| *x == b).expect("listed")];
    let with_needed = |mut row: Row, needed: Option<&(i64, i64)>| {
        if let Some(&(replicas, gpus)) = needed {
            row.insert("replicas_needed".into(), n(replicas as f64));
            row.insert("total_gpus_needed".into(), n(gpus as f64));
        }
        row
    };
    // One experiment's row `i`, with its load-match columns when it is one of its best configs.
    let row_of = |e: usize, i: usize| -> Row {
        let x = &result.experiments[e];
        let server = server_of(x.backend);
        match &x.outcome {
            Outcome::Agg(s) => with_needed(
                agg_row(&s.candidates[i], &model, server, s.cluster[i]),
                s.best.iter().position(|&b| b == i).map(|k| &s.needed[k]),
            ),
            Outcome::Disagg(s) => with_needed(
                disagg_row(&s.candidates[i], &model, server, server, s.cluster[i]),
                s.best.iter().position(|&b| b == i).map(|k| &s.needed[k]),
            ),
            Outcome::Failed(_) => unreachable!("a failed experiment has no rows"),
        }
    };
    for (e, x) in result.experiments.iter().enumerate() {
        let (n_rows, pareto, best): (usize, &[usize], &[usize]) = match &x.outcome {
            Outcome::Agg(s) => (s.candidates.len(), &s.pareto, &s.best),
            Outcome::Disagg(s) => (s.candidates.len(), &s.pareto, &s.best),
            Outcome::Failed(reason) => {
                failures.push(format!("{name} {}: failed ({reason})", x.name));
                continue;
            }
        };
        let mut frames: Vec<(&str, Vec<Row>)> = Vec::new();
        frames.push((
            "candidates",
            (0..n_rows)
                .map(|i| {
                    let mut r = row_of(e, i);
                    r.remove("replicas_needed");
                    r.remove("total_gpus_needed");
                    r
                })
                .collect(),
        ));
        frames.push((
            "pareto_fronts",
            pareto
                .iter()
                .map(|&i| {
                    let mut r = row_of(e, i);
                    r.remove("replicas_needed");
                    r.remove("total_gpus_needed");
                    r
                })
                .collect(),
        ));
        frames.push(("best_configs", best.iter().map(|&i| row_of(e, i)).collect()));
        for (which, ours) in frames {
            let golden = frame(&case.join(format!("{}.{which}.parquet", x.name)));
            let found = compare(&format!("{name} {} {which}", x.name), &ours, &golden);
            println!("{name} {} {which}: {} rows, {} differences", x.name, golden.len(), found.len());
            failures.extend(found);
        }
    }
    let Some(merged) = &result.merged else {
        failures.push(format!("{name}: six experiments are merged"));
        return;
    };
    for (mode, picks) in [(Mode::Agg, &merged[0]), (Mode::Disagg, &merged[1])] {
        for (which, rows, keep_needed) in [("best_configs", &picks.best, true), ("pareto_fronts", &picks.pareto, false)]
        {
            let ours: Vec<Row> = rows
                .iter()
                .map(|&(e, i)| {
                    let mut r = row_of(e, i);
                    if !keep_needed {
                        r.remove("replicas_needed");
                        r.remove("total_gpus_needed");
                    }
                    r
                })
                .collect();
            let golden = frame(&case.join(format!("{}.{which}.parquet", mode.name())));
            let found = compare(&format!("{name} merged {} {which}", mode.name()), &ours, &golden);
            println!("{name} merged {} {which}: {} rows, {} differences", mode.name(), golden.len(), found.len());
            failures.extend(found);
        }
        let spec = meta["best_throughputs"][mode.name()].as_f64().unwrap_or(f64::NAN);
        if picks.best_throughput.to_bits() != spec.to_bits() {
            failures.push(format!("{name}: merged best {} {:?}, spec {spec:?}", mode.name(), picks.best_throughput));
        }
    }
    let chosen = result.chosen.map(|e| result.experiments[e].mode.name());
    if chosen != meta["chosen_exp"].as_str() {
        failures.push(format!("{name}: chosen {chosen:?}, spec {}", meta["chosen_exp"]));
    }
}
