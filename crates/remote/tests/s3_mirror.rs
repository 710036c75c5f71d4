//! Mirrors of a tree in a real S3-compatible server: moto's server mode
//! (`moto_server` from PyPI, which `scripts/test` installs into the
//! project's virtualenv; `AICSQL_MOTO` names another), on 127.0.0.1 and a
//! free port, stopped at the end.

use std::process::Command;
use std::time::{Duration, Instant};

use aicsql_remote::{DataRoot, RemoteError, RemoteTree, complete_mirror, mirror};
use object_store::path::Path as StorePath;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};

mod common;

use common::{Moto, free_port};

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

/// Run by the virtualenv's Python (moto's server mode ships boto3): a
/// bucket with one object, and an IAM user whose only policy allows
/// another bucket. Prints the user's access key and secret.
const IAM_SETUP: &str = r#"
import json, sys, boto3
kw = dict(endpoint_url=sys.argv[1], region_name="us-east-1",
          aws_access_key_id="testing", aws_secret_access_key="testing")
s3 = boto3.client("s3", **kw)
s3.create_bucket(Bucket="team-perf")
s3.put_object(Bucket="team-perf", Key="aic/systems/h200_sxm.yaml", Body=b"gpu: {}\n")
iam = boto3.client("iam", **kw)
iam.create_user(UserName="reader")
key = iam.create_access_key(UserName="reader")["AccessKey"]
iam.put_user_policy(UserName="reader", PolicyName="other-bucket-only", PolicyDocument=json.dumps({
    "Version": "2012-10-17",
    "Statement": [{"Effect": "Allow", "Action": "s3:*",
                   "Resource": ["arn:aws:s3:::other-bucket", "arn:aws:s3:::other-bucket/*"]}]}))
print(key["AccessKeyId"], key["SecretAccessKey"])
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_that_does_not_cover_the_tree_is_access_denied() {
    // The five set-up actions run unauthenticated; every later request is
    // checked against moto's IAM.
    let moto = Moto::start_with(&[("INITIAL_NO_AUTH_ACTION_COUNT", "5")]);
    let python = Moto::python();
    let out = Command::new(&python).args(["-c", IAM_SETUP, &moto.endpoint()]).output().unwrap();
    assert!(out.status.success(), "IAM set-up failed: {}", String::from_utf8_lossy(&out.stderr));
    let keys = String::from_utf8(out.stdout).unwrap();
    let (key, secret) = keys.trim().split_once(' ').expect("access key and secret");

    let mut options = moto.options();
    options.retain(|(k, _)| k != "aws.access_key_id" && k != "aws.secret_access_key");
    options.push(("aws.access_key_id".into(), key.into()));
    options.push(("aws.secret_access_key".into(), secret.into()));
    let tree = remote("s3://team-perf/aic", &options);
    let cache = tempfile::tempdir().unwrap();
    let mut log = |line: &str| eprintln!("{line}");
    let err = mirror(&tree, cache.path(), &mut log).await.unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, RemoteError::AccessDenied { .. }), "{text}");
    assert!(text.contains("s3://team-perf/aic/") && text.contains("s3:ListBucket"), "{text}");
    assert_eq!(complete_mirror(cache.path(), &tree), None);
}
