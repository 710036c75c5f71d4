//! The spec's own search results priced again: every agg and disagg
//! candidate of `tests/goldens/search/<case>/` (the frames `cli default`
//! returned, at the spec's 3 decimals), attention dp and context
//! parallelism included, is re-priced with
//! `estimate_agg` / `estimate_disagg` at the row's own parallel label, batch,
//! ctx_tokens and workers, and must equal the row on every value after the
//! spec's rounding. A few thousand points beyond the serving goldens, from
//! the sweeps users actually run.

mod common;

use std::fs::File;
use std::path::PathBuf;

use aicsql_serving::{AggQuery, DisaggQuery, Parallel};
use aicsql_tables::DataTree;
use aicsql_tables::pymath::np_round;
use common::{data_dir, frame, goldens_dir, int, num, text};

fn search_dir() -> PathBuf {
    goldens_dir().join("search")
}

fn r3(x: f64) -> f64 {
    np_round(x, 3)
}

/// A server as the spec's search task resolves its role's quant modes.
fn role(s: aicsql_serving::Server<'_>) -> aicsql_serving::Server<'_> {
    match s.search_role() {
        Ok(Some(role)) => role,
        Ok(None) => s,
        Err(e) => panic!("search role: {e}"),
    }
}

#[test]
fn every_single_worker_search_candidate() {
    let dir = data_dir();
    let tree = DataTree::open(&[&dir]).unwrap_or_else(|e| panic!("perf data not found in {} ({e})", dir.display()));
    let mut cases: Vec<PathBuf> = std::fs::read_dir(search_dir())
        .unwrap_or_else(|e| panic!("{}: {e}", search_dir().display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("meta.json").exists())
        // `--backend auto` cases: their experiments' frames are compared
        // row for row by search_goldens.rs (`every_backend_auto_case`).
        .filter(|p| !p.join("agg_vllm.candidates.parquet").exists())
        .collect();
    cases.sort();
    assert!(cases.len() >= 4, "expected the search goldens, found {cases:?}");
    let (mut checked, mut failures) = (0usize, Vec::new());
    for case in &cases {
        let meta: serde_json::Value =
            serde_json::from_reader(File::open(case.join("meta.json")).expect("meta.json")).expect("meta.json is JSON");
        let args = &meta["args"];
        // Each role as the spec's search task resolves its quant modes (the
        // estimate path lacks the task's GPT-OSS-on-Blackwell rule).
        let mut server = role(common::case_server(&tree, args));
        let mut decode_server = common::case_decode_server(&tree, args).map(role);
        let (kv_sizing, _) = common::case_kv_options(args);
        let name = case.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let mut case_checked = 0;
        for row in frame(&case.join("agg.candidates.parquet")) {
            let parallel = Parallel::parse(text(&row, "parallel"))
                .unwrap_or_else(|e| panic!("label {:?} does not parse: {e}", row.get("parallel")));
            let q = AggQuery {
                parallel,
                batch: int(&row, "bs"),
                isl: int(&row, "isl"),
                osl: int(&row, "osl"),
                prefix: int(&row, "prefix"),
                ctx_tokens: Some(int(&row, "ctx_tokens")),
                kv_sizing,
            };
            let id = format!("{name} agg {} bs {} ctx {}", text(&row, "parallel"), q.batch, int(&row, "ctx_tokens"));
            let e = match server.estimate_agg(&q) {
                Ok(e) => e,
                Err(err) => {
                    failures.push(format!("{id}: {err}"));
                    continue;
                }
            };
            for (column, ours) in [
                ("ttft", e.ttft_ms),
                ("tpot", e.tpot_ms),
                ("request_latency", e.request_latency_ms),
                ("seq/s", e.seq_per_s),
                ("seq/s/gpu", e.seq_per_s_per_gpu),
                ("request_rate", e.request_rate),
                ("tokens/s", e.tokens_per_s),
                ("tokens/s/gpu", e.tokens_per_s_per_gpu),
                ("tokens/s/user", e.tokens_per_s_per_user),
                ("memory", e.memory.total),
                ("balance_score", e.balance_score),
                ("num_ctx_reqs", e.num_ctx_reqs),
                ("num_gen_reqs", e.num_gen_reqs),
                ("num_tokens", e.num_tokens),
                ("gen_tokens", e.num_gen_reqs),
                ("concurrency", e.concurrency as f64),
                ("global_bs", e.global_bs as f64),
                ("num_total_gpus", e.num_total_gpus as f64),
                ("cp", f64::from(e.parallel.cp)),
            ] {
                let spec = num(&row, column);
                if r3(ours).to_bits() != spec.to_bits() {
                    failures.push(format!("{id} {column}: spec {spec:?}, ours {ours:?} (rounded {:?})", r3(ours)));
                }
            }
            // The search sets a dense model's MoE widths to 1 and prints them.
            let given = |v: Option<u32>| v.map(i64::from);
            let label =
                e.parallel.label(e.moe_tp.or(given(parallel.moe_tp)), e.moe_ep.or(given(parallel.moe_ep))).to_string();
            if label != text(&row, "parallel") {
                failures.push(format!("{id} parallel: spec {:?}, ours {label:?}", text(&row, "parallel")));
            }
            case_checked += 1;
        }
        for row in frame(&case.join("disagg.candidates.parquet")) {
            let side = |s: &str| {
                let label = text(&row, &format!("({s})parallel"));
                Parallel::parse(label).unwrap_or_else(|e| panic!("label {label:?} does not parse: {e}"))
            };
            let (prefill, decode) = (side("p"), side("d"));
            let q = DisaggQuery {
                prefill,
                prefill_batch: int(&row, "(p)bs"),
                prefill_workers: int(&row, "(p)workers"),
                decode,
                decode_batch: int(&row, "(d)bs"),
                decode_workers: int(&row, "(d)workers"),
                isl: int(&row, "isl"),
                osl: int(&row, "osl"),
                prefix: int(&row, "prefix"),
            };
            let id = format!(
                "{name} disagg {prefill} x{} / {decode} x{} bs {}",
                q.prefill_workers, q.decode_workers, q.decode_batch
            );
            let e = match server.estimate_disagg_with(decode_server.as_mut(), &q) {
                Ok(e) => e,
                Err(err) => {
                    failures.push(format!("{id}: {err}"));
                    continue;
                }
            };
            for (column, ours) in [
                ("ttft", e.ttft_ms),
                ("tpot", e.tpot_ms),
                ("request_latency", e.request_latency_ms),
                ("seq/s", e.seq_per_s),
                ("seq/s/gpu", e.seq_per_s_per_gpu),
                ("request_rate", e.request_rate),
                ("tokens/s", e.tokens_per_s),
                ("tokens/s/gpu", e.tokens_per_s_per_gpu),
                ("tokens/s/user", e.tokens_per_s_per_user),
                ("(p)seq/s/worker", e.prefill.seq_per_s_per_worker),
                ("(d)seq/s/worker", e.decode.seq_per_s_per_worker),
                ("(p)memory", e.prefill.memory_gib),
                ("(d)memory", e.decode.memory_gib),
                ("concurrency", e.concurrency as f64),
                ("num_total_gpus", e.num_total_gpus as f64),
                ("(p)cp", f64::from(e.prefill.parallel.cp)),
            ] {
                let spec = num(&row, column);
                if ours.to_bits() != spec.to_bits() {
                    failures.push(format!("{id} {column}: spec {spec:?}, ours {ours:?}"));
                }
            }
            case_checked += 1;
        }
        println!("{name}: {case_checked} candidates re-priced");
        checked += case_checked;
    }
    println!("{checked} candidates re-priced equal or listed below");
    for f in failures.iter().take(4000) {
        println!("FAIL {f}");
    }
    assert!(checked > 1000, "only {checked} candidates checked");
    assert!(failures.is_empty(), "{} failures", failures.len());
}
