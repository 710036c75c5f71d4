//! Mirrors of a tree in a real S3-compatible server: moto's server mode
//! (`moto_server` from PyPI, which `scripts/test` installs into the
//! project's virtualenv; `AICSQL_MOTO` names another), on 127.0.0.1 and a
//! free port, stopped at the end.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use aicsql_remote::{DataRoot, RemoteError, RemoteTree, complete_mirror, mirror};
use object_store::aws::AmazonS3Builder;
use object_store::path::Path as StorePath;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};

mod common;

use common::{ServerProcess, free_port};

struct Moto(ServerProcess);

fn moto_server() -> PathBuf {
    if let Ok(path) = std::env::var("AICSQL_MOTO") {
        return PathBuf::from(path);
    }
    let venv = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.venv/bin/moto_server");
    assert!(
        venv.is_file(),
        "moto_server not found at {} (run scripts/test, which installs it, or set AICSQL_MOTO)",
        venv.display()
    );
    venv
}

impl Moto {
    fn start() -> Moto {
        Moto::start_with(&[])
    }

    /// `env`: e.g. moto's `INITIAL_NO_AUTH_ACTION_COUNT=0`, which makes it
    /// check every request's credentials.
    fn start_with(env: &[(&str, &str)]) -> Moto {
        let port = free_port();
        let mut command = Command::new(moto_server());
        command.args(["-H", "127.0.0.1", "-p", &port.to_string()]).envs(env.iter().copied());
        Moto(ServerProcess::start(command, port, Duration::from_secs(30)))
    }

    fn port(&self) -> u16 {
        self.0.port
    }

    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port())
    }

    /// Creates a bucket (moto takes an unsigned PUT).
    fn create_bucket(&self, bucket: &str) {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port())).unwrap();
        let request = format!(
            "PUT /{bucket} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            self.port()
        );
        stream.write_all(request.as_bytes()).unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).unwrap();
        assert!(response.starts_with("HTTP/1.1 200") || response.starts_with("HTTP/1.0 200"), "{response}");
    }

    fn options(&self) -> Vec<(String, String)> {
        [
            ("aws.endpoint", self.endpoint()),
            ("aws.allow_http", "true".into()),
            ("aws.region", "us-east-1".into()),
            ("aws.access_key_id", "testing".into()),
            ("aws.secret_access_key", "testing".into()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
    }

    fn store(&self, bucket: &str) -> Arc<dyn ObjectStore> {
        let store = AmazonS3Builder::new()
            .with_bucket_name(bucket)
            .with_endpoint(self.endpoint())
            .with_allow_http(true)
            .with_region("us-east-1")
            .with_access_key_id("testing")
            .with_secret_access_key("testing")
            .build()
            .unwrap();
        Arc::new(store)
    }
}

fn remote(url: &str, options: &[(String, String)]) -> RemoteTree {
    match DataRoot::parse(url, options).unwrap() {
        DataRoot::Remote(tree) => tree,
        DataRoot::Local(p) => panic!("{url} parsed as local {}", p.display()),
    }
}

async fn put(store: &dyn ObjectStore, path: &str, bytes: Vec<u8>) {
    store.put(&StorePath::from(path), PutPayload::from(bytes)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mirrors_a_bucket_prefix_and_fetches_only_what_changed() {
    let moto = Moto::start();
    moto.create_bucket("team-perf");
    let store = moto.store("team-perf");
    let gemm = "systems/data/h200_sxm/vllm/0.19.0/gemm_perf.txt";
    put(store.as_ref(), &format!("aic/{gemm}"), vec![7u8; 300_000]).await;
    put(store.as_ref(), "aic/systems/h200_sxm.yaml", b"gpu: {}\n".to_vec()).await;
    // Outside the prefix: not part of the tree.
    put(store.as_ref(), "other/systems/x.yaml", b"x".to_vec()).await;

    let cache = tempfile::tempdir().unwrap();
    let tree = remote("s3://team-perf/aic", &moto.options());
    let mut log = |line: &str| eprintln!("{line}");
    let first = mirror(&tree, cache.path(), &mut log).await.unwrap();
    assert_eq!((first.files, first.downloaded, first.bytes), (2, 2, 300_000 + 8));
    assert_eq!(std::fs::read(first.dir.join(gemm)).unwrap(), vec![7u8; 300_000]);
    assert!(!first.dir.join("x.yaml").exists() && !first.dir.join("other").exists());
    assert_eq!(complete_mirror(cache.path(), &tree), Some(first.dir.clone()));

    let again = mirror(&tree, cache.path(), &mut log).await.unwrap();
    assert_eq!(again.downloaded, 0);

    // A new version of one object (a new ETag): only it moves.
    put(store.as_ref(), "aic/systems/h200_sxm.yaml", b"gpu: {mem: 1}\n".to_vec()).await;
    let refreshed = mirror(&tree, cache.path(), &mut log).await.unwrap();
    assert_eq!((refreshed.downloaded, refreshed.bytes_downloaded), (1, 14));
    assert_eq!(std::fs::read(refreshed.dir.join("systems/h200_sxm.yaml")).unwrap(), b"gpu: {mem: 1}\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn store_errors_name_the_url_and_what_to_do() {
    let moto = Moto::start();
    moto.create_bucket("empty-bucket");
    let cache = tempfile::tempdir().unwrap();
    let mut log = |line: &str| eprintln!("{line}");

    let missing = remote("s3://no-such-bucket/aic", &moto.options());
    let err = mirror(&missing, cache.path(), &mut log).await.unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, RemoteError::NotFound { .. }), "{text}");
    assert!(text.contains("s3://no-such-bucket/aic/") && text.contains("check the bucket"), "{text}");

    let empty = remote("s3://empty-bucket/aic", &moto.options());
    let err = mirror(&empty, cache.path(), &mut log).await.unwrap_err();
    assert!(matches!(err, RemoteError::NotFound { .. }) && err.to_string().contains("holds no files"), "{err}");

    let unknown = remote("s3://empty-bucket/aic", &[("aws.no_such_option".into(), "1".into())]);
    let err = mirror(&unknown, cache.path(), &mut log).await.unwrap_err();
    assert!(matches!(err, RemoteError::BadOption { .. }) && err.to_string().contains("aws.no_such_option"), "{err}");

    // Nothing listens: bounded, and said so.
    let port = free_port();
    let mut options = moto.options();
    options[0].1 = format!("http://127.0.0.1:{port}");
    let nowhere = remote("s3://team-perf/aic", &options);
    let started = Instant::now();
    let err = mirror(&nowhere, cache.path(), &mut log).await.unwrap_err();
    assert!(err.is_unreachable(), "{err}");
    assert!(started.elapsed() < Duration::from_secs(60), "took {:?}", started.elapsed());
    assert!(std::fs::read_dir(cache.path().join(".remote")).map(|d| d.count()).unwrap_or(0) <= 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_credentials_say_how_to_give_them() {
    let moto = Moto::start_with(&[("INITIAL_NO_AUTH_ACTION_COUNT", "0")]);
    let cache = tempfile::tempdir().unwrap();
    let mut log = |line: &str| eprintln!("{line}");
    // moto with auth checks knows no access key: the store refuses these.
    let tree = remote("s3://team-perf/aic", &moto.options());
    let err = mirror(&tree, cache.path(), &mut log).await.unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, RemoteError::Unauthenticated { .. }), "{text}");
    assert!(text.contains("s3://team-perf/aic/") && text.contains("AWS_ACCESS_KEY_ID"), "{text}");
    assert_eq!(complete_mirror(cache.path(), &tree), None);
}
