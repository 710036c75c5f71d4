//! The same SQL on a Ballista cluster: a scheduler and two executors started
//! as `aicsql cluster` processes on 127.0.0.1 (free ports, bounded waits,
//! stopped when the test ends, failure included), every result compared
//! with the local session's bit for bit.

mod common;

use std::fs::File;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use datafusion::arrow::array::RecordBatch;
use datafusion::prelude::SessionContext;

use aicsql::SessionBuilder;

/// Every process of one test cluster; dropping it kills them.
struct Cluster {
    scheduler_port: u16,
    scheduler: Child,
    executors: Vec<Child>,
    logs: tempfile::TempDir,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for child in self.executors.iter_mut().chain(std::iter::once(&mut self.scheduler)) {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("a free port")
}

fn wait_for_port(port: u16, what: &str, child: &mut Child, log: &Path) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        if let Ok(Some(status)) = child.try_wait() {
            panic!("{what} exited ({status}) before listening: {}", read(log));
        }
        assert!(Instant::now() < deadline, "{what} is not listening on {port} after 60 s: {}", read(log));
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

impl Cluster {
    /// A scheduler that calls an executor dead after 4 silent seconds, and
    /// two executors of one task slot each, heartbeating every second.
    fn start() -> Cluster {
        let logs = tempfile::tempdir().expect("tempdir");
        let scheduler_port = free_port();
        let spawn = |args: Vec<String>, log: &Path| -> Child {
            let out = File::create(log).expect("log file");
            let err = out.try_clone().expect("log file");
            Command::new(env!("CARGO_BIN_EXE_aicsql"))
                .arg("--data")
                .arg(common::data_dir())
                .args(args)
                .env("RUST_LOG", "info")
                .stdin(Stdio::null())
                .stdout(out)
                .stderr(err)
                .spawn()
                .expect("aicsql cluster starts")
        };
        let scheduler_log = logs.path().join("scheduler.log");
        let mut scheduler = spawn(
            [
                "cluster",
                "scheduler",
                "--bind-port",
                &scheduler_port.to_string(),
                "--external-host",
                "127.0.0.1",
                "--executor-timeout-seconds",
                "4",
                "--expire-dead-executor-interval-seconds",
                "1",
            ]
            .map(String::from)
            .to_vec(),
            &scheduler_log,
        );
        wait_for_port(scheduler_port, "the scheduler", &mut scheduler, &scheduler_log);
        let mut cluster = Cluster { scheduler_port, scheduler, executors: Vec::new(), logs };
        for i in 0..2 {
            let (flight, grpc) = (free_port(), free_port());
            let work = cluster.logs.path().join(format!("work{i}"));
            std::fs::create_dir_all(&work).expect("work dir");
            let log = cluster.executor_log(i);
            let mut child = spawn(
                vec![
                    "cluster".into(),
                    "executor".into(),
                    "--bind-port".into(),
                    flight.to_string(),
                    "--bind-grpc-port".into(),
                    grpc.to_string(),
                    "--external-host".into(),
                    "127.0.0.1".into(),
                    "--scheduler-host".into(),
                    "127.0.0.1".into(),
                    "--scheduler-port".into(),
                    scheduler_port.to_string(),
                    "--concurrent-tasks".into(),
                    "1".into(),
                    "--heartbeat-interval-seconds".into(),
                    "1".into(),
                    "--work-dir".into(),
                    work.display().to_string(),
                ],
                &log,
            );
            wait_for_port(flight, "an executor", &mut child, &log);
            cluster.executors.push(child);
        }
        cluster
    }

    fn executor_log(&self, i: usize) -> PathBuf {
        self.logs.path().join(format!("executor{i}.log"))
    }

    /// Tasks executor `i` has received so far.
    fn tasks_run_by(&self, i: usize) -> usize {
        read(&self.executor_log(i)).matches("Execute task").count()
    }

    async fn client(&self) -> SessionContext {
        let builder = SessionBuilder::with_tree(common::tree());
        let mount = aicsql_cluster::Mount::new(Arc::clone(builder.tree()));
        let url = format!("df://127.0.0.1:{}", self.scheduler_port);
        aicsql_cluster::connect(&url, &mount, SessionBuilder::default_config()).await.expect("connects")
    }

    fn logs(&self) -> String {
        let mut text = format!("scheduler:\n{}", tail(&read(&self.logs.path().join("scheduler.log"))));
        for i in 0..self.executors.len() {
            text.push_str(&format!("\nexecutor {i}:\n{}", tail(&read(&self.executor_log(i)))));
        }
        text
    }
}

fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(30)..].join("\n")
}

#[path = "support/rows.rs"]
mod support_rows;
use support_rows::rows;

fn local() -> SessionContext {
    SessionBuilder::with_tree(common::tree()).build()
}

async fn run(ctx: &SessionContext, sql: &str) -> datafusion::common::Result<Vec<RecordBatch>> {
    match tokio::time::timeout(Duration::from_secs(300), async { ctx.sql(sql).await?.collect().await }).await {
        Ok(result) => result,
        Err(_) => panic!("no answer within 300 s: {sql}"),
    }
}

/// Runs `sql` on the local session and on the cluster: the same rows, in
/// the same order.
async fn same_rows(cluster: &Cluster, here: &SessionContext, remote: &SessionContext, sql: &str) -> Vec<Vec<String>> {
    let want = rows(&run(here, sql).await.unwrap_or_else(|e| panic!("local: {e}\n{sql}")));
    let got = rows(&run(remote, sql).await.unwrap_or_else(|e| panic!("cluster: {e}\n{sql}\n{}", cluster.logs())));
    assert_eq!(got.len(), want.len(), "{sql}");
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(g, w, "row {i} of {sql}");
    }
    want
}

async fn register(ctx: &SessionContext, name: &str, location: &Path) {
    let sql = format!("CREATE EXTERNAL TABLE {name} STORED AS PARQUET LOCATION '{}'", location.display());
    run(ctx, &sql).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
}

/// The step grid: 2 phases x 4 tp x 80 batch sizes x 16 input lengths =
/// 10,240 configs of the worked example's model and database, one parquet
/// file per tp (4 partitions).
async fn write_grid(dir: &Path) {
    let ctx = local();
    for tp in [1, 2, 4, 8] {
        let sql = format!(
            "COPY (SELECT 'Qwen/Qwen3-32B-FP8' AS model, 'h200_sxm/vllm/0.19.0' AS db, phase, \
                          CAST({tp} AS BIGINT) AS tp, b.value AS batch, i.value * 128 AS isl, CAST(128 AS BIGINT) AS osl \
                   FROM (VALUES ('context'), ('generation')) AS p(phase), range(1, 81) AS b, range(1, 17) AS i) \
             TO '{}/part-{tp}.parquet' STORED AS PARQUET",
            dir.display()
        );
        run(&ctx, &sql).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queries_on_a_scheduler_and_two_executors_equal_the_local_results() {
    let cluster = Cluster::start();
    let remote = cluster.client().await;
    let here = local();
    let goldens = common::goldens_dir();
    let scratch = tempfile::tempdir().expect("tempdir");
    let grid = scratch.path().join("grid");
    std::fs::create_dir_all(&grid).expect("grid dir");
    write_grid(&grid).await;
    for ctx in [&here, &remote] {
        register(ctx, "gemm_goldens", &goldens.join("gemm_goldens.parquet")).await;
        register(ctx, "engine_step_goldens", &goldens.join("engine_step_goldens.parquet")).await;
        register(ctx, "grid", &grid).await;
    }

    // The GEMM goldens, 15,105 lookups, made without the shared layer: the
    // setting travels with the cluster's tasks.
    for ctx in [&here, &remote] {
        run(ctx, "SET aic.shared_layer = false").await.expect("SET");
    }
    let gemm = "SELECT class, system, backend, version, quant, m, n, k, latency_ms, \
                       gemm_latency(system || '/' || backend || '/' || version, quant, m, n, k) AS got \
                FROM gemm_goldens ORDER BY class, system, backend, version, quant, m, n, k, latency_ms";
    let gemms = same_rows(&cluster, &here, &remote, gemm).await;
    assert_eq!(gemms.len(), 15_105);
    let mismatched = gemms.iter().filter(|r| r[9] != "NULL" && r[9] != r[8]).count();
    assert_eq!(mismatched, 0, "cluster GEMM values differ from the goldens");
    assert_eq!(gemms.iter().filter(|r| r[9] == "NULL").count(), 942, "the goldens' misses");
    for ctx in [&here, &remote] {
        run(ctx, "SET aic.shared_layer = true").await.expect("SET");
    }

    // The engine-step goldens: 130 step totals.
    let step = "SELECT model, system, backend, version, phase, tp, batch, isl, osl, \
                       CASE phase WHEN 'context' THEN ttft_ms ELSE tpot_ms END AS want, \
                       step_latency(model, system || '/' || backend || '/' || version, phase, tp, batch, isl, osl, \
                                    CAST(moe_tp AS BIGINT), CAST(moe_ep AS BIGINT)) AS got \
                FROM engine_step_goldens WHERE row_kind = 'step_total' \
                ORDER BY model, system, backend, version, phase, tp, batch, isl, osl";
    let steps = same_rows(&cluster, &here, &remote, step).await;
    assert_eq!(steps.len(), 130);
    assert!(steps.iter().all(|r| r[9] == r[10]), "a step total differs from its golden");

    // A parity-style grid: 10,240 step_latency calls over 4 partitions.
    let plan = rows(&run(&remote, "EXPLAIN SELECT * FROM grid").await.expect("explain"));
    let plan_text = plan.iter().flatten().cloned().collect::<Vec<_>>().join("\n");
    assert!(plan_text.contains("4 groups"), "the grid is not 4 partitions:\n{plan_text}");
    let grid_sql = "SELECT phase, tp, batch, isl, step_latency(model, db, phase, tp, batch, isl, osl) AS ms \
                    FROM grid ORDER BY phase, tp, batch, isl";
    let grid_rows = same_rows(&cluster, &here, &remote, grid_sql).await;
    assert_eq!(grid_rows.len(), 10_240);
    assert!(grid_rows.iter().all(|r| r[4] != "NULL"), "the worked example's grid prices everywhere");

    // Searches: two calls, two partitions, one task slot per executor.
    let search = "SELECT 'a' AS call, parallel, bs, tokens_per_s_per_gpu, tpot_ms, pareto, best_rank \
                  FROM search_agg('meta-llama/Meta-Llama-3.1-8B', 'h200_sxm/vllm/0.19.0', 4, 256, 256, 128, 1500, 50) \
                  UNION ALL \
                  SELECT 'b' AS call, parallel, bs, tokens_per_s_per_gpu, tpot_ms, pareto, best_rank \
                  FROM search_agg('meta-llama/Meta-Llama-3.1-8B', 'h200_sxm/vllm/0.19.0', 8, 1024, 256, 0, 2000, 30) \
                  ORDER BY call, tokens_per_s_per_gpu DESC, parallel, bs, tpot_ms";
    let found = same_rows(&cluster, &here, &remote, search).await;
    assert!(found.iter().any(|r| r[0] == "a") && found.iter().any(|r| r[0] == "b"), "both searches find candidates");
    // A client that turns Ballista's adaptive planner on does not get each
    // call's rows twice: the scheduler keeps it off whatever the session says.
    run(&remote, "SET ballista.planner.adaptive.enabled = true").await.expect("SET");
    assert_eq!(same_rows(&cluster, &here, &remote, search).await, found);
    run(&remote, "SET ballista.planner.adaptive.enabled = false").await.expect("SET");
    for i in 0..2 {
        assert!(cluster.tasks_run_by(i) > 0, "executor {i} ran no task:\n{}", cluster.logs());
    }

    // The shell on the cluster: the same text as the shell alone.
    let shell = |cluster_url: Option<String>| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_aicsql"));
        cmd.arg("--data").arg(common::data_dir()).args(["-q", "--format", "csv"]);
        if let Some(url) = cluster_url {
            cmd.arg("--cluster").arg(url);
        }
        let out = cmd
            .args([
                "-c",
                "SELECT op_name, latency_ms FROM engine_step('Qwen/Qwen3-32B-FP8', 'h200_sxm/vllm/0.19.0', \
                          'generation', 8, 4, 1024, 128) ORDER BY gen_step_index, op_index, row_kind, op_name",
            ])
            .output()
            .expect("the shell runs");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let alone = shell(None);
    assert!(alone.lines().count() > 10, "{alone}");
    let url = format!("df://127.0.0.1:{}", cluster.scheduler_port);
    assert_eq!(shell(Some(url.clone())), alone);

    // A plot's query runs on the cluster too: the same picture.
    let plot = |cluster_url: Option<&str>, name: &str| {
        let svg = scratch.path().join(name);
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_aicsql"));
        cmd.arg("--data").arg(common::data_dir());
        if let Some(url) = cluster_url {
            cmd.arg("--cluster").arg(url);
        }
        let query = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("queries/plot/step.sql");
        let out = cmd.args(["plot", "step", "--file"]).arg(query).arg("--out").arg(&svg).output().expect("runs");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        std::fs::read(&svg).expect("the picture")
    };
    assert_eq!(plot(Some(&url), "cluster.svg"), plot(None, "alone.svg"), "plot step differs on the cluster");

    // A COPY job: the grid's latencies written by the cluster, read back here.
    let out = scratch.path().join("latencies.parquet");
    let copy = format!(
        "COPY (SELECT phase, tp, batch, isl, step_latency(model, db, phase, tp, batch, isl, osl) AS ms FROM grid) \
         TO '{}' STORED AS PARQUET",
        out.display()
    );
    run(&remote, &copy).await.unwrap_or_else(|e| panic!("cluster COPY: {e}\n{}", cluster.logs()));
    register(&here, "written", &out).await;
    let written = rows(&run(&here, "SELECT * FROM written ORDER BY phase, tp, batch, isl").await.expect("read back"));
    assert_eq!(written, grid_rows, "the COPY job's file differs from the local grid");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_executor_fails_or_retries_the_query_but_never_hangs_or_drifts() {
    let mut cluster = Cluster::start();
    let remote = cluster.client().await;
    // Eight searches, one partition each, over two single-slot executors.
    let calls: Vec<String> = (1..=8)
        .map(|i| {
            format!(
                "SELECT {i} AS call, parallel, bs, tokens_per_s_per_gpu FROM search_agg('Qwen/Qwen3-235B-A22B-FP8', \
                 'h200_sxm/sglang/0.5.10', 32, {}, 1024, 0, 5000, 100)",
                512 * i
            )
        })
        .collect();
    let sql = format!("{} ORDER BY call, tokens_per_s_per_gpu DESC, parallel, bs", calls.join(" UNION ALL "));
    let want = rows(&run(&local(), &sql).await.expect("local"));
    assert!(!want.is_empty());

    let query = {
        let remote = remote.clone();
        let sql = sql.clone();
        tokio::spawn(async move { run(&remote, &sql).await })
    };
    // Kill executor 1 once it has a task in hand.
    let deadline = Instant::now() + Duration::from_secs(120);
    while cluster.tasks_run_by(1) == 0 {
        assert!(Instant::now() < deadline, "executor 1 got no task in 120 s:\n{}", cluster.logs());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    cluster.executors[1].kill().expect("kill executor 1");
    let started = Instant::now();
    let result = tokio::time::timeout(Duration::from_secs(240), query)
        .await
        .unwrap_or_else(|_| panic!("the query hangs after an executor died:\n{}", cluster.logs()))
        .expect("the query task");
    let ended = started.elapsed().as_secs_f64();
    match result {
        // Retried on the surviving executor: the numbers are the local ones.
        Ok(batches) => {
            assert_eq!(rows(&batches), want, "the retried query's rows differ from the local ones");
            eprintln!("after the kill the query completed in {ended:.1} s, {} rows as local", want.len());
        }
        // Or failed, saying so.
        Err(e) => {
            assert!(!e.to_string().is_empty());
            eprintln!("after the kill the query failed in {ended:.1} s: {e}");
        }
    }
}
