//! The published data read through the mirrors of remote trees, checked
//! against every GEMM and engine-step golden bit for bit, as the local
//! cache is: its two releases uploaded to a real S3 server (moto) and
//! served over HTTP (python's http.server, each release with the manifest
//! `aicsql data manifest` writes), and mounted as two URLs at once, so the
//! newer-release-wins merge runs over mirrors too.

mod common;
#[path = "../../remote/tests/common/mod.rs"]
mod servers;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use aicsql_remote::{mount_roots, write_manifest};
use aicsql_tables::DataTree;
use futures::StreamExt;
use object_store::path::Path as StorePath;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};

use common::gemm_check::check_column;
use common::step_goldens::{goldens, run_on};
use common::{data_dir, tree};
use servers::{HttpServer, Moto};

/// The releases of the cache, as the fetch step unpacks them.
const RELEASES: [&str; 2] = ["aiconfigurator-0.10.0", "aiconfigurator-core-0.12.0"];

/// A copy of the cache's releases (hard links where the file system allows),
/// each with its manifest; dot entries (mirrors, staging) are left out.
fn published_copy() -> tempfile::TempDir {
    fn copy(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).unwrap();
        for entry in std::fs::read_dir(from).unwrap() {
            let entry = entry.unwrap();
            let name = entry.file_name();
            if name.to_string_lossy().starts_with('.') {
                continue;
            }
            let (src, dst) = (entry.path(), to.join(&name));
            if entry.file_type().unwrap().is_dir() {
                copy(&src, &dst);
            } else if std::fs::hard_link(&src, &dst).is_err() {
                std::fs::copy(&src, &dst).unwrap();
            }
        }
    }
    let dir = tempfile::tempdir().unwrap();
    for release in RELEASES {
        let root = dir.path().join(release);
        copy(&data_dir().join(release), &root);
        write_manifest(&root).unwrap();
    }
    dir
}

/// Every file under `dir`, as (path relative to it with `/`, absolute path).
fn files(dir: &Path, base: &Path, out: &mut Vec<(String, PathBuf)>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files(&path, base, out);
        } else {
            let relative = path.strip_prefix(base).unwrap().to_string_lossy().replace('\\', "/");
            out.push((relative, path));
        }
    }
}

async fn upload(store: Arc<dyn ObjectStore>, from: &Path, prefix: &str) -> (usize, u64) {
    let mut list = Vec::new();
    files(from, from, &mut list);
    let count = list.len();
    let bytes = futures::stream::iter(list)
        .map(|(relative, path)| {
            let store = Arc::clone(&store);
            async move {
                let data = std::fs::read(&path).unwrap();
                let size = data.len() as u64;
                store.put(&StorePath::from(format!("{prefix}/{relative}")), PutPayload::from(data)).await.unwrap();
                size
            }
        })
        .buffer_unordered(8)
        .fold(0u64, |sum, size| async move { sum + size })
        .await;
    (count, bytes)
}

/// Mounts `urls` through fresh mirrors and checks every golden on the result.
fn check_goldens_through(rt: &tokio::runtime::Runtime, what: &str, urls: &[String], options: &[(String, String)]) {
    let cache = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let mut log = |line: &str| println!("{what}: {line}");
    let dirs = rt.block_on(mount_roots(urls, options, cache.path(), &mut log)).unwrap();
    println!("{what}: mirrored in {:.1} s", started.elapsed().as_secs_f64());
    assert_eq!(dirs.len(), RELEASES.len());
    assert!(dirs.iter().all(|d| d.starts_with(cache.path())), "{dirs:?}");
    let tree = DataTree::open(&dirs).unwrap();
    // The merged tree lists what the local cache lists.
    assert_eq!(tree.databases().entries().len(), common::tree().databases().entries().len());

    check_column(&tree, false, "latency_ms");
    check_column(&tree, true, "latency_ms_shared");
    let all = goldens("engine_step_goldens.parquet");
    let (c, groups, error_goldens) = run_on(&tree, &all, true);
    for f in c.failures.iter().take(20) {
        println!("FAIL {f}");
    }
    println!(
        "{what}: engine-step goldens: {} rows, {groups} config-phases, {} bit-identical",
        all.len(),
        c.bit_identical
    );
    assert_eq!((c.mismatched, c.within_1e12), (0, 0), "{what}: engine-step goldens differ");
    assert_eq!(c.errors_matched, error_goldens);
}

#[test]
fn every_gemm_and_engine_step_golden_through_s3_and_http_mirrors() {
    let _ = tree(); // the local cache must be there (and say how to fetch it if not)
    let copy = published_copy();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();

    let moto = Moto::start();
    moto.create_bucket("team-perf");
    let started = Instant::now();
    let mut uploaded = (0, 0);
    for release in RELEASES {
        let (n, b) =
            rt.block_on(upload(moto.store("team-perf"), &copy.path().join(release), &format!("aic/{release}")));
        uploaded = (uploaded.0 + n, uploaded.1 + b);
    }
    println!(
        "s3: uploaded {} files ({:.1} MB) in {:.1} s",
        uploaded.0,
        uploaded.1 as f64 / 1e6,
        started.elapsed().as_secs_f64()
    );
    let s3: Vec<String> = RELEASES.iter().map(|r| format!("s3://team-perf/aic/{r}")).collect();
    check_goldens_through(&rt, "s3", &s3, &moto.options());
    drop(moto);

    let server = HttpServer::start(copy.path());
    let http: Vec<String> = RELEASES.iter().map(|r| server.url(r)).collect();
    check_goldens_through(&rt, "http", &http, &[]);
}
