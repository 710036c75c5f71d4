//! A scheduler and an executor in this process (Ballista's standalone
//! mode), over the published data: the codecs carry the catalog's scans and
//! the table function calls, and the rows equal a plain session's.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use datafusion::physical_plan::{ExecutionPlan, displayable};
use datafusion::prelude::{SessionConfig, SessionContext};
use datafusion_proto::physical_plan::{AsExecutionPlan, DefaultPhysicalProtoConverter, PhysicalExtensionCodec};
use datafusion_proto::protobuf::PhysicalPlanNode;

use aicsql_cluster::{AicPhysicalCodec, Mount};
use aicsql_tables::DataTree;

fn tree() -> Arc<DataTree> {
    static TREE: OnceLock<Arc<DataTree>> = OnceLock::new();
    Arc::clone(TREE.get_or_init(|| {
        let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from);
        let dir = var("AICSQL_DATA")
            .or_else(|| var("XDG_CACHE_HOME").map(|d| d.join("aicsql")))
            .unwrap_or_else(|| var("HOME").unwrap_or_else(|| PathBuf::from(".")).join(".cache").join("aicsql"));
        Arc::new(DataTree::open(&[&dir]).unwrap_or_else(|e| {
            panic!("perf data not found in {} ({e}); run `cargo run -- data fetch` first", dir.display())
        }))
    }))
}

fn local() -> SessionContext {
    let ctx = SessionContext::new_with_config(aicsql_udfs::session_config(SessionConfig::new()));
    aicsql_cluster::register(&ctx, &tree());
    ctx
}

#[path = "../../../tests/support/rows.rs"]
mod support_rows;
use support_rows::rows;

const QUERIES: [&str; 6] = [
    // A whole perf table: every database's file, read once (Ballista slices
    // only the leaves it knows; the cluster plans perf scans as one
    // partition).
    "SELECT count(*), count(DISTINCT system || backend || version) FROM aic.perf.gemm",
    // A union of two calls: each runs once, in a stage of its own.
    "SELECT 'a' AS call, parallel, bs FROM search_agg('meta-llama/Meta-Llama-3.1-8B', 'h200_sxm/vllm/0.19.0', \
     4, 256, 256, 128, 1500, 50) UNION ALL SELECT 'b', parallel, bs FROM search_agg('meta-llama/Meta-Llama-3.1-8B', \
     'h200_sxm/vllm/0.19.0', 4, 256, 256, 128, 1500, 50) ORDER BY call, parallel, bs",
    // A perf scan pruned to one database, and a scalar function over it.
    "SELECT m, n, k, latency, gemm_latency(system || '/' || backend || '/' || version, gemm_dtype, m, n, k) AS got \
     FROM aic.perf.gemm WHERE system = 'h200_sxm' AND backend = 'vllm' AND version = '0.19.0' AND gemm_dtype = 'fp8' \
     AND n = 65536 AND k = 12288 \
     ORDER BY gemm_dtype, m, n, k",
    // A metadata table.
    "SELECT system, backend, version FROM aic.meta.databases WHERE system = 'h200_sxm' ORDER BY 1, 2, 3",
    // Table function calls, computed where they run.
    "SELECT op_index, op_name, latency_ms FROM engine_step('Qwen/Qwen3-32B-FP8', 'h200_sxm/vllm/0.19.0', \
     'context', 8, 1, 1024, 128) ORDER BY op_index",
    "SELECT parallel, bs, tokens_per_s_per_gpu, best_rank FROM search_agg('meta-llama/Meta-Llama-3.1-8B', \
     'h200_sxm/vllm/0.19.0', 4, 256, 256, 128, 1500, 50) ORDER BY tokens_per_s_per_gpu DESC, parallel, bs",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn standalone_results_equal_a_plain_session() {
    let mount = Mount::new(tree());
    let remote = aicsql_cluster::standalone(&mount, SessionConfig::new()).await.expect("standalone cluster");
    let here = local();
    // The remote session's plans are Ballista's, not a local run.
    let plan =
        rows(&remote.sql(&format!("EXPLAIN {}", QUERIES[5])).await.expect("explains").collect().await.expect("runs"));
    let plan = plan.concat().join("\n");
    assert!(plan.contains("distributed_plan") && plan.contains("ShuffleWriterExec"), "{plan}");
    for sql in QUERIES {
        let want = rows(&here.sql(sql).await.expect("plans").collect().await.expect("runs"));
        let got = rows(&remote.sql(sql).await.expect("plans").collect().await.unwrap_or_else(|e| panic!("{e}\n{sql}")));
        assert!(!want.is_empty(), "{sql}");
        assert_eq!(got, want, "{sql}");
    }
}

/// Encodes a plan with the codec and decodes it again.
fn round_trip(ctx: &SessionContext, codec: &AicPhysicalCodec, plan: Arc<dyn ExecutionPlan>) -> Arc<dyn ExecutionPlan> {
    let proto = PhysicalPlanNode::try_from_physical_plan(plan, codec).expect("encodes");
    proto.try_into_physical_plan(&ctx.task_ctx(), codec).expect("decodes")
}

#[tokio::test]
async fn scans_and_calls_survive_the_physical_codec() {
    let ctx = local();
    let codec = AicPhysicalCodec::new(Mount::new(tree()));
    for sql in QUERIES {
        let plan = ctx.sql(sql).await.expect("plans").create_physical_plan().await.expect("physical plan");
        let text = displayable(plan.as_ref()).indent(true).to_string();
        let decoded = round_trip(&ctx, &codec, Arc::clone(&plan));
        assert_eq!(displayable(decoded.as_ref()).indent(true).to_string(), text, "{sql}");
        let want = rows(&datafusion::physical_plan::collect(plan, ctx.task_ctx()).await.expect("runs"));
        let got = rows(&datafusion::physical_plan::collect(decoded, ctx.task_ctx()).await.expect("runs decoded"));
        assert_eq!(got, want, "{sql}");
    }
}

#[test]
fn a_plan_over_other_data_is_refused_naming_both_fingerprints() {
    let mount = Mount::new(tree());
    let codec = AicPhysicalCodec::new(Arc::clone(&mount));
    // What a process with other data would send: its own fingerprint.
    let mut buf = b"AIC1".to_vec();
    use prost::Message;
    #[derive(Clone, PartialEq, prost::Message)]
    struct Foreign {
        #[prost(uint64, tag = "1")]
        data: u64,
        #[prost(string, tag = "2")]
        perf_table: String,
    }
    Foreign { data: mount.fingerprint() ^ 1, perf_table: "gemm".into() }.encode(&mut buf).expect("encodes");
    let ctx = local();
    let err = codec
        .try_decode(&buf, &[], &ctx.task_ctx(), &DefaultPhysicalProtoConverter {})
        .expect_err("other data is refused");
    let text = err.to_string();
    assert!(text.contains(&format!("{:016x}", mount.fingerprint())), "{text}");
    assert!(text.contains(&format!("{:016x}", mount.fingerprint() ^ 1)), "{text}");
    assert!(text.contains("--data"), "{text}");
}

/// A small local tree (no release marker) under `dir`: one perf table, one
/// system YAML and one model config, copied from the published data at the
/// same relative places.
fn small_tree(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let full = tree();
    let pick = |path: &std::path::Path, root: usize| {
        let rel = path.strip_prefix(&full.roots()[root].dir).expect("a file under its root").to_path_buf();
        let to = dir.join(&rel);
        std::fs::create_dir_all(to.parent().expect("a parent")).expect("mkdir");
        std::fs::copy(path, &to).expect("copy");
        rel
    };
    let perf = full.perf_files().iter().find(|f| f.table == "custom_allreduce").expect("a custom_allreduce table");
    let yaml = full.system_yamls().iter().find(|d| d.stem == perf.system).expect("its system YAML");
    let config = full.model_configs().first().expect("a model config");
    vec![pick(&perf.path, perf.root), pick(&yaml.path, yaml.root), pick(&config.path, config.root)]
}

#[test]
fn the_fingerprint_follows_the_contents_not_the_directory() {
    let fp = |dir: &std::path::Path| aicsql_cluster::fingerprint(&DataTree::open(&[dir]).expect("mount"));
    let (a, b) = (tempfile::tempdir().expect("tempdir"), tempfile::tempdir().expect("tempdir"));
    let files = small_tree(a.path());
    small_tree(b.path());
    // The same data under two directories: one fingerprint.
    assert_eq!(fp(a.path()), fp(b.path()));
    let (perf, yaml, config) = (&files[0], &files[1], &files[2]);

    // An edited system YAML: another one.
    let path = b.path().join(yaml);
    let text = std::fs::read_to_string(&path).expect("read");
    std::fs::write(&path, format!("{text}\n# edited\n")).expect("write");
    assert_ne!(fp(a.path()), fp(b.path()), "an edited system YAML");
    std::fs::write(&path, text).expect("restore");
    assert_eq!(fp(a.path()), fp(b.path()));

    // An edited model config.
    let path = b.path().join(config);
    let text = std::fs::read_to_string(&path).expect("read");
    std::fs::write(&path, text.replacen('{', "{ ", 1)).expect("write");
    assert_ne!(fp(a.path()), fp(b.path()), "an edited model config");
    std::fs::write(&path, text).expect("restore");

    // A perf table with other rows: its footer differs.
    let path = b.path().join(perf);
    let bytes = std::fs::read(&path).expect("read");
    let ctx = SessionContext::new();
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let rewritten = rt.block_on(async {
        let df = ctx.read_parquet(path.to_str().expect("utf-8"), Default::default()).await.expect("read parquet");
        let batches = df.limit(1, None).expect("skip a row").collect().await.expect("rows");
        let mut out = Vec::new();
        let mut writer =
            datafusion::parquet::arrow::ArrowWriter::try_new(&mut out, batches[0].schema(), None).expect("writer");
        for b in &batches {
            writer.write(b).expect("write");
        }
        writer.close().expect("close");
        out
    });
    std::fs::write(&path, &rewritten).expect("write");
    assert_ne!(fp(a.path()), fp(b.path()), "a perf table with other rows");
    std::fs::write(&path, &bytes).expect("restore");
    assert_eq!(fp(a.path()), fp(b.path()));
}

#[path = "../../../tests/support/rng.rs"]
mod rng;
use rng::Rng;

fn leaves(plan: &Arc<dyn ExecutionPlan>, out: &mut Vec<Arc<dyn ExecutionPlan>>) {
    if plan.children().is_empty() {
        out.push(Arc::clone(plan));
    }
    for child in plan.children() {
        leaves(child, out);
    }
}

/// Received messages are untrusted: a damaged or hostile one is an error,
/// never a panic. Every aicsql leaf of the test queries is encoded, then
/// decoded again after random damage (bytes changed, cut, inserted or
/// dropped; seeded), 4,000 times.
#[tokio::test]
async fn damaged_messages_are_errors_not_panics() {
    let ctx = local();
    let codec = AicPhysicalCodec::new(Mount::new(tree()));
    let mut messages = Vec::new();
    for sql in QUERIES {
        let plan = ctx.sql(sql).await.expect("plans").create_physical_plan().await.expect("physical plan");
        let mut found = Vec::new();
        leaves(&plan, &mut found);
        for leaf in found {
            let mut buf = Vec::new();
            if codec.try_encode(leaf, &mut buf, &DefaultPhysicalProtoConverter {}).is_ok() && buf.starts_with(b"AIC1") {
                messages.push(buf);
            }
        }
    }
    assert!(messages.len() >= 4, "perf scans and table calls to damage: {}", messages.len());
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let (mut refused, mut accepted) = (0, 0);
    for round in 0..4_000 {
        let mut m = messages[round % messages.len()].clone();
        for _ in 0..1 + rng.below(4) {
            let at = 4 + rng.below(m.len().saturating_sub(4).max(1) as u64) as usize;
            match rng.below(4) {
                0 if at < m.len() => m[at] = rng.next() as u8,
                1 => m.truncate(at),
                2 => m.insert(at.min(m.len()), rng.next() as u8),
                _ if at < m.len() => {
                    m.remove(at);
                }
                _ => {}
            }
        }
        match codec.try_decode(&m, &[], &ctx.task_ctx(), &DefaultPhysicalProtoConverter {}) {
            Ok(_) => accepted += 1,
            Err(_) => refused += 1,
        }
    }
    // Most damage is caught (the fingerprint, prost, the checks); what
    // decodes is a well-formed node, which this test does not run.
    assert!(refused > accepted, "refused {refused}, accepted {accepted}");
}
