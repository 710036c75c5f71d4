//! The `aicsql` binary: statement order, formats, exit status, standard
//! DataFusion SQL, and the fetch step's failure modes.

mod common;
#[path = "../crates/remote/tests/common/mod.rs"]
mod servers;

use std::path::Path;
use std::process::{Command, Output};

fn aicsql() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_aicsql"));
    cmd.arg("--data").arg(common::data_dir()).env_remove("AICSQL_PYTHON");
    cmd
}

fn run(cmd: &mut Command) -> (bool, String, String) {
    let Output { status, stdout, stderr } = cmd.output().expect("aicsql runs");
    (status.success(), String::from_utf8_lossy(&stdout).into_owned(), String::from_utf8_lossy(&stderr).into_owned())
}

#[test]
fn commands_run_in_order_in_one_session() {
    let (ok, out, err) = run(aicsql().args([
        "-q",
        "--format",
        "csv",
        "-c",
        "CREATE TABLE t AS VALUES (1), (2)",
        "-c",
        "SELECT sum(column1) AS s FROM t",
        "-c",
        "SELECT count(*) AS n FROM aic.perf.gemm WHERE system='h200_sxm' AND backend='vllm' AND version='0.19.0'",
    ]));
    assert!(ok, "{err}");
    let lines: Vec<&str> = out.lines().filter(|l| !l.is_empty()).collect();
    assert_eq!(lines, ["s", "3", "n", "101004"], "{out}");
}

#[test]
fn files_and_commands_interleave_in_command_line_order() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let file = tmp.path().join("make.sql");
    std::fs::write(&file, "-- a comment\nCREATE TABLE t AS VALUES (40);\nINSERT INTO t VALUES (2);\n").expect("write");
    let (ok, out, err) =
        run(aicsql().args(["-q", "--format", "tsv", "-f"]).arg(&file).args(["-c", "SELECT sum(column1) FROM t"]));
    assert!(ok, "{err}");
    assert!(out.lines().any(|l| l == "42"), "{out}");
}

#[test]
fn a_failing_statement_fails_the_run() {
    let (ok, out, err) = run(aicsql().args(["-q", "-c", "SELECT * FROM aic.perf.nope", "-c", "SELECT 'not reached'"]));
    assert!(!ok);
    assert!(err.contains("aic.perf.nope"), "{err}");
    assert!(!out.contains("not reached"), "{out}");

    let tmp = tempfile::tempdir().expect("tempdir");
    let file = tmp.path().join("job.sql");
    std::fs::write(&file, "SELECT 1;\nSELECT no_such_column FROM aic.meta.systems;\nSELECT 'not reached';\n")
        .expect("write");
    let (ok, out, err) = run(aicsql().arg("-q").arg("-f").arg(&file));
    assert!(!ok, "{out}");
    assert!(err.contains("job.sql") && err.contains("no_such_column"), "{err}");
    assert!(!out.contains("not reached"), "{out}");

    let (ok, _, err) = run(aicsql().args(["-q", "-f", "/no/such/file.sql"]));
    assert!(!ok);
    assert!(err.contains("/no/such/file.sql"), "{err}");
}

#[test]
fn unknown_data_path_fails_naming_it() {
    let (ok, _, err) =
        run(Command::new(env!("CARGO_BIN_EXE_aicsql")).args(["--data", "/no/such/dir", "-c", "SELECT 1"]));
    assert!(!ok);
    assert!(err.contains("/no/such/dir"), "{err}");
}

#[test]
fn formats_and_introspection() {
    let (ok, out, err) = run(aicsql().args([
        "-q",
        "--format",
        "json",
        "-c",
        "SELECT mem_bw FROM aic.meta.systems WHERE system='gb200'",
    ]));
    assert!(ok, "{err}");
    assert_eq!(out.trim(), r#"[{"mem_bw":8.0e12}]"#);
    for sql in ["SHOW TABLES", "SHOW FUNCTIONS", "DESCRIBE aic.perf.moe", "SHOW aic.shared_layer"] {
        let (ok, _, err) = run(aicsql().args(["-q", "--format", "json", "-c", sql]));
        assert!(ok, "{sql}: {err}");
    }
}

#[test]
fn external_tables_and_copy_keep_working() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let out_file = tmp.path().join("h200_gemm.parquet");
    let copy = format!(
        "COPY (SELECT m, n, k, latency FROM aic.perf.gemm WHERE system='h200_sxm' AND backend='vllm' \
         AND version='0.19.0' AND gemm_dtype='fp8_block') TO '{}' STORED AS PARQUET",
        out_file.display()
    );
    let create = format!("CREATE EXTERNAL TABLE mine STORED AS PARQUET LOCATION '{}'", out_file.display());
    let (ok, out, err) =
        run(aicsql().args(["-q", "--format", "csv", "-c", &copy, "-c", &create, "-c", "SELECT count(*) FROM mine"]));
    assert!(ok, "{err}");
    assert!(out.lines().any(|l| l == "29520"), "{out}");
}

fn no_release_left(dir: &Path) {
    let left: Vec<String> = std::fs::read_dir(dir)
        .map(|d| d.filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned())).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "a failed fetch left {left:?} in {}", dir.display());
}

#[test]
fn fetch_without_pip_fails_clearly_and_leaves_nothing() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let cache = tmp.path().join("cache");
    let (ok, _, err) = run(Command::new(env!("CARGO_BIN_EXE_aicsql"))
        .args(["data", "fetch", "--data"])
        .arg(&cache)
        .env("AICSQL_PYTHON", "/no/such/python3"));
    assert!(!ok);
    assert!(err.contains("pip") && err.contains("/no/such/python3"), "{err}");
    no_release_left(&cache);
}

#[test]
fn fetch_without_network_fails_clearly_and_leaves_nothing() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let cache = tmp.path().join("cache");
    // An index on a closed local port stands in for an unreachable network.
    let (ok, _, err) = run(Command::new(env!("CARGO_BIN_EXE_aicsql"))
        .args(["data", "fetch", "--data"])
        .arg(&cache)
        .env("PIP_INDEX_URL", "http://127.0.0.1:9/simple")
        .env("PIP_NO_CACHE_DIR", "1")
        .env("PIP_RETRIES", "0")
        .env("PIP_TIMEOUT", "2"));
    assert!(!ok);
    assert!(err.contains("pip download") && err.contains("aiconfigurator==0.10.0"), "{err}");
    no_release_left(&cache);
}

#[test]
fn second_fetch_does_no_network_io() {
    // With the cache complete, fetch must not even start pip.
    let (ok, out, err) = run(Command::new(env!("CARGO_BIN_EXE_aicsql"))
        .args(["data", "fetch", "--data"])
        .arg(common::data_dir())
        .env("AICSQL_PYTHON", "/no/such/python3"));
    assert!(ok, "{err}");
    assert!(out.contains("aiconfigurator==0.10.0: already in"), "{out}");
    assert!(out.contains("aiconfigurator-core==0.12.0: already in"), "{out}");
}

#[test]
fn shipped_sql_files_run() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in ["examples", "queries/catalog", "queries/gemm", "queries/step"] {
        for entry in std::fs::read_dir(root.join(dir)).expect("list") {
            let path = entry.expect("entry").path();
            if path.extension().is_some_and(|x| x == "sql") {
                files.push(path);
            }
        }
    }
    assert!(files.len() >= 4, "{files:?}");
    for file in files {
        let (ok, out, err) = run(aicsql().args(["-q", "--format", "csv", "-f"]).arg(&file));
        assert!(ok, "{}: {err}", file.display());
        assert!(out.lines().count() > 1, "{} printed no rows", file.display());
    }
}

/// The worked example (docs/spec/engine_step.md 12) prints the spec's TTFT and TPOT.
#[test]
fn engine_step_example_shows_the_worked_example() {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/engine_step.sql");
    let (ok, out, err) = run(aicsql().args(["-q", "--format", "csv", "-f"]).arg(&file));
    assert!(ok, "{err}");
    assert!(out.contains("24.74004986586315,7.121815664339327"), "{out}");
}

/// Machine-readable formats print every row (the 40-row default is for tables).
#[test]
fn csv_output_is_not_truncated() {
    let (ok, out, err) = run(aicsql().args(["-q", "--format", "csv", "-c", "SELECT * FROM generate_series(1, 20000)"]));
    assert!(ok, "{err}");
    assert_eq!(out.lines().count(), 20001, "header + 20000 rows");
    let (ok, out, err) = run(aicsql().args([
        "-q",
        "--maxrows",
        "5",
        "--format",
        "csv",
        "-c",
        "SELECT * FROM generate_series(1, 20000)",
    ]));
    assert!(ok, "{err}");
    // datafusion-cli cuts non-table output at batch granularity.
    assert!(out.lines().count() < 20001, "--maxrows still applies when given");
}

/// One database of the published data served over HTTP with a manifest
/// written by `aicsql data manifest`: the shell mirrors it and answers as
/// from the local tree; bad roots and options fail naming them.
#[test]
fn the_shell_mounts_a_tree_served_over_http() {
    let served = tempfile::tempdir().expect("tempdir");
    let tree = served.path().join("aic");
    common::copy_published_db(&tree, "vllm/0.19.0");
    let (ok, out, err) = run(Command::new(env!("CARGO_BIN_EXE_aicsql")).args(["data", "manifest"]).arg(&tree));
    assert!(ok && out.contains("aicsql-manifest.json"), "{out}{err}");

    let server = servers::HttpServer::start(served.path());
    let cache = tempfile::tempdir().expect("tempdir");
    let url = server.url("aic");
    let query =
        "SELECT count(*) AS n FROM aic.perf.gemm WHERE system='h200_sxm' AND backend='vllm' AND version='0.19.0'";
    let shell = || {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_aicsql"));
        cmd.env("AICSQL_DATA", cache.path());
        cmd
    };
    let (ok, out, err) = run(shell().args(["--format", "csv", "--data", &url, "-c", query]));
    assert!(ok, "{err}");
    // Not quiet: the mirror says what it fetched (stderr); the rows come first.
    assert_eq!(out.lines().take(2).collect::<Vec<_>>(), ["n", "101004"], "{out}");
    assert!(err.contains(&format!("{url}/: ")) && err.contains("fetched"), "{err}");

    // The server gone, the complete mirror answers and says it is offline.
    drop(server);
    let (ok, out, err) = run(shell().args(["-q", "--format", "csv", "--data", &url, "-c", query]));
    assert!(ok, "{err}");
    assert!(out.contains("101004") && err.contains("offline"), "{out}{err}");

    for (root, option, expected) in [
        ("ftp://host/aic", None, "unknown scheme 'ftp'"),
        ("s3://bucket/aic", Some("region=x"), "aws.region"),
        ("s3://bucket/aic", Some("novalue"), "is not key=value"),
    ] {
        let mut cmd = shell();
        cmd.args(["--data", root]);
        if let Some(option) = option {
            cmd.args(["--data-option", option]);
        }
        let (ok, _, err) = run(cmd.args(["-c", "SELECT 1"]));
        assert!(!ok && err.contains(expected), "{root} {option:?}: {err}");
    }
}

/// One database of the published data in a real S3 server (moto): the shell
/// mounts the bucket with `--data s3://...` and `--data-option`, answers as
/// from the local tree, refreshes the mirror with `data mirror`, and
/// DataFusion's own `CREATE EXTERNAL TABLE ... LOCATION 's3://...'` reads
/// the same bucket with the same option names.
#[test]
fn the_shell_mounts_a_bucket_and_keeps_external_tables_on_s3() {
    use object_store::path::Path as StorePath;
    use object_store::{ObjectStoreExt, PutPayload};

    let local = tempfile::tempdir().expect("tempdir");
    common::copy_published_db(local.path(), "vllm/0.19.0");
    let moto = servers::Moto::start();
    moto.create_bucket("team-perf");
    let store = moto.store("team-perf");
    let db = "data/h200_sxm/vllm/0.19.0";
    let mut uploads = vec![("h200_sxm.yaml".to_string(), local.path().join("systems/h200_sxm.yaml"))];
    for entry in std::fs::read_dir(local.path().join("systems").join(db)).expect("copied db") {
        let path = entry.expect("entry").path();
        let name = path.file_name().expect("name").to_string_lossy().into_owned();
        uploads.push((format!("{db}/{name}"), path));
    }
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("tokio");
    for (key, path) in &uploads {
        let bytes = std::fs::read(path).expect("read");
        rt.block_on(store.put(&StorePath::from(format!("aic/systems/{key}")), PutPayload::from(bytes))).expect("put");
    }

    let cache = tempfile::tempdir().expect("tempdir");
    let shell = || {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_aicsql"));
        cmd.env("AICSQL_DATA", cache.path()).args(["--format", "csv", "--data", "s3://team-perf/aic"]);
        for (key, value) in moto.options() {
            cmd.args(["--data-option", &format!("{key}={value}")]);
        }
        cmd
    };
    let query =
        "SELECT count(*) AS n FROM aic.perf.gemm WHERE system='h200_sxm' AND backend='vllm' AND version='0.19.0'";
    let (ok, out, err) = run(shell().args(["-c", query]));
    assert!(ok, "{err}");
    assert_eq!(out.lines().take(2).collect::<Vec<_>>(), ["n", "101004"], "{out}");
    assert!(err.contains("s3://team-perf/aic/: ") && err.contains(" fetched"), "{err}");

    // `data mirror` refreshes explicitly: nothing changed, nothing fetched.
    let mut mirror = Command::new(env!("CARGO_BIN_EXE_aicsql"));
    mirror.env("AICSQL_DATA", cache.path()).args(["data", "mirror", "s3://team-perf/aic"]);
    for (key, value) in moto.options() {
        mirror.args(["--data-option", &format!("{key}={value}")]);
    }
    let (ok, out, err) = run(&mut mirror);
    assert!(ok && err.contains(", 0 fetched") && out.trim_end().ends_with("/tree"), "{out}{err}");

    // DataFusion's external tables on the same bucket, options named alike.
    let options = moto.options().into_iter().map(|(k, v)| format!("'{k}' '{v}'")).collect::<Vec<_>>().join(", ");
    let location = format!("s3://team-perf/aic/systems/{db}/gemm_perf.parquet");
    let (ok, out, err) = run(shell().args([
        "-q",
        "-c",
        &format!("CREATE EXTERNAL TABLE g STORED AS PARQUET LOCATION '{location}' OPTIONS ({options})"),
        "-c",
        "SELECT count(*) AS n FROM g",
        "-c",
        &format!(
            "COPY (SELECT * FROM g LIMIT 10) TO 's3://team-perf/out/ten.parquet' STORED AS PARQUET OPTIONS ({options})"
        ),
        "-c",
        &format!(
            "CREATE EXTERNAL TABLE ten STORED AS PARQUET LOCATION 's3://team-perf/out/ten.parquet' OPTIONS ({options})"
        ),
        "-c",
        "SELECT count(*) AS n FROM ten",
    ]));
    assert!(ok, "{err}");
    let counts: Vec<&str> = out.lines().filter(|l| l.chars().all(|c| c.is_ascii_digit())).collect();
    assert_eq!(counts, ["101004", "10", "10"], "{out}");
}

/// The coverage query (queries/coverage/support_matrix.sql) as users run
/// it: its total row prices at least 1,800 of the 1,964 `PASS` agg entries
/// (issue bar of the second-wave families), every group adds up, and the
/// families still refused are the ones the spec has no tables for.
#[test]
fn the_coverage_query_prices_the_support_matrix() {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("queries/coverage/support_matrix.sql");
    let (ok, out, err) = run(aicsql().args(["-q", "--format", "csv", "-f"]).arg(&file));
    assert!(ok, "{err}");
    let mut lines = out.lines();
    assert_eq!(
        lines.next(),
        Some("architecture,entries,priced,priced_at_tp1,misses,refused,smallest_tp,first_reason"),
        "{out}"
    );
    let mut total = None;
    let mut refused = Vec::new();
    for line in lines {
        let fields: Vec<&str> = line.splitn(8, ',').collect();
        let n = |i: usize| fields[i].parse::<u64>().unwrap_or_else(|e| panic!("{line}: {e}"));
        let (entries, priced, at_tp1, misses, refusals) = (n(1), n(2), n(3), n(4), n(5));
        assert_eq!(entries, priced + misses + refusals, "{line}");
        assert!(at_tp1 <= priced, "{line}");
        if fields[0] == "all architectures" {
            total = Some((entries, priced));
        } else if refusals > 0 {
            refused.push(fields[0].to_string());
        }
    }
    let (entries, priced) = total.unwrap_or_else(|| panic!("no total row: {out}"));
    assert_eq!(entries, 1964, "{out}");
    assert!(priced >= 1800, "{priced} of {entries} priced:\n{out}");
    for architecture in &refused {
        assert!(
            ["MiniMaxM3ForCausalLM", "MiniMaxM3SparseForConditionalGeneration", "KimiK3ForConditionalGeneration"]
                .contains(&architecture.as_str()),
            "{architecture} is refused:\n{out}"
        );
    }
}

#[test]
fn cluster_flags_that_cannot_work_are_refused() {
    // --cluster is a client's: a scheduler finds no use for it, nor does docs.
    let (ok, _, err) = run(aicsql().args(["--cluster", "df://127.0.0.1:9", "cluster", "scheduler"]));
    assert!(!ok && err.contains("--scheduler-host"), "{err}");
    let (ok, _, err) = run(aicsql().args(["--cluster", "df://127.0.0.1:9", "docs"]));
    assert!(!ok && err.contains("docs") && err.contains("--cluster"), "{err}");
    // Zero seconds would spin a sweep loop or expire every executor at once.
    for flag in ["--executor-timeout-seconds", "--expire-dead-executor-interval-seconds", "--task-max-failures"] {
        let (ok, _, err) = run(aicsql().args(["cluster", "scheduler", flag, "0"]));
        assert!(!ok && err.contains(flag), "{flag}: {err}");
    }
    for flag in ["--concurrent-tasks", "--heartbeat-interval-seconds"] {
        let (ok, _, err) = run(aicsql().args(["cluster", "executor", flag, "0"]));
        assert!(!ok && err.contains(flag), "{flag}: {err}");
    }
}
