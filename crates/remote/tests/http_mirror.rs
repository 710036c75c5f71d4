//! Mirrors of a tree served over HTTP by a real server (`python3 -m
//! http.server` on 127.0.0.1, a free port, stopped at the end): the first
//! mirror, a refresh that fetches only what changed, a corrupt download,
//! the offline fallback and a partial mirror that is never used.

use std::path::{Path, PathBuf};

use aicsql_remote::{DataRoot, RemoteError, RemoteTree, complete_mirror, mirror, write_manifest};

mod common;

use common::HttpServer as Server;

fn remote(url: &str) -> RemoteTree {
    match DataRoot::parse(url, &[]).unwrap() {
        DataRoot::Remote(tree) => tree,
        DataRoot::Local(p) => panic!("{url} parsed as local {}", p.display()),
    }
}

/// A small tree in the published layout.
fn make_tree(root: &Path) -> PathBuf {
    let tree = root.join("perf/aic");
    std::fs::create_dir_all(tree.join("systems/data/h200_sxm/vllm/0.19.0")).unwrap();
    std::fs::write(tree.join("systems/h200_sxm.yaml"), "gpu:\n  mem_bw: 4.8e12\n").unwrap();
    std::fs::write(tree.join("systems/data/h200_sxm/vllm/0.19.0/gemm_perf.txt"), vec![7u8; 200_000]).unwrap();
    std::fs::write(tree.join("systems/data/h200_sxm/vllm/0.19.0/nccl_perf.txt"), b"nccl").unwrap();
    write_manifest(&tree).unwrap();
    tree
}

fn read(dir: &Path, path: &str) -> Vec<u8> {
    std::fs::read(dir.join(path)).unwrap()
}

async fn run(tree: &RemoteTree, cache: &Path) -> Result<aicsql_remote::MirrorReport, RemoteError> {
    mirror(tree, cache, &mut |line: &str| eprintln!("{line}")).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mirrors_refreshes_verifies_and_goes_offline() {
    let served = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let source = make_tree(served.path());
    let server = Server::start(served.path());
    let tree = remote(&server.url("perf/aic"));

    // First mirror: every file, byte for byte.
    let first = run(&tree, cache.path()).await.unwrap();
    assert_eq!((first.files, first.downloaded, first.removed, first.offline), (3, 3, 0, false));
    assert_eq!(first.bytes, 200_000 + 4 + "gpu:\n  mem_bw: 4.8e12\n".len() as u64);
    let gemm = "systems/data/h200_sxm/vllm/0.19.0/gemm_perf.txt";
    assert_eq!(read(&first.dir, gemm), read(&source, gemm));
    assert_eq!(complete_mirror(cache.path(), &tree), Some(first.dir.clone()));
    assert!(!first.dir.join("aicsql-manifest.json").exists(), "the manifest is not part of the tree");

    // Nothing changed: nothing fetched.
    let again = run(&tree, cache.path()).await.unwrap();
    assert_eq!((again.downloaded, again.bytes_downloaded), (0, 0));

    // One file changed, one removed, one added: only those move.
    std::fs::write(source.join("systems/data/h200_sxm/vllm/0.19.0/nccl_perf.txt"), b"nccl v2").unwrap();
    std::fs::remove_file(source.join("systems/h200_sxm.yaml")).unwrap();
    std::fs::write(source.join("systems/b200_sxm.yaml"), b"gpu: {}\n").unwrap();
    write_manifest(&source).unwrap();
    let refreshed = run(&tree, cache.path()).await.unwrap();
    assert_eq!((refreshed.files, refreshed.downloaded, refreshed.removed), (3, 2, 1));
    assert_eq!(read(&refreshed.dir, "systems/data/h200_sxm/vllm/0.19.0/nccl_perf.txt"), b"nccl v2");
    assert!(!refreshed.dir.join("systems/h200_sxm.yaml").exists());

    // A file that does not match its manifest entry: an error naming it,
    // nothing of it kept, and the mirror no longer complete.
    std::fs::write(source.join(gemm), vec![8u8; 200_000]).unwrap();
    let manifest_path = source.join("aicsql-manifest.json");
    let good_manifest = std::fs::read(&manifest_path).unwrap();
    write_manifest(&source).unwrap();
    std::fs::write(source.join(gemm), vec![9u8; 200_000]).unwrap();
    let err = run(&tree, cache.path()).await.unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, RemoteError::Corrupt { .. }), "{text}");
    assert!(text.contains(tree.url()) && text.contains(gemm) && text.contains("sha256"), "{text}");
    assert_eq!(read(&refreshed.dir, gemm), vec![7u8; 200_000], "the old file stays until a good one replaces it");
    let partial = std::fs::read_dir(refreshed.dir.join("systems/data/h200_sxm/vllm/0.19.0"))
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".partial"))
        .count();
    assert_eq!(partial, 0, "no half-written file is left");
    assert_eq!(complete_mirror(cache.path(), &tree), None, "a mirror cut short is not complete");

    // The server goes away: a partial mirror is never used.
    drop(server);
    let err = run(&tree, cache.path()).await.unwrap_err();
    assert!(err.is_unreachable(), "{err}");

    // With the tree fixed and mirrored completely, the server going away
    // leaves the mirror usable offline.
    std::fs::write(&manifest_path, &good_manifest).unwrap();
    std::fs::write(source.join(gemm), vec![7u8; 200_000]).unwrap();
    let server = Server::start(served.path());
    let tree = remote(&server.url("perf/aic"));
    let cache2 = tempfile::tempdir().unwrap();
    let complete = run(&tree, cache2.path()).await.unwrap();
    assert_eq!(complete.downloaded, 3);
    drop(server);
    let offline = run(&tree, cache2.path()).await.unwrap();
    assert!(offline.offline);
    assert_eq!((offline.dir, offline.files, offline.downloaded), (complete.dir, 3, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tree_without_a_manifest_says_so() {
    let served = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(served.path().join("bare")).unwrap();
    std::fs::write(served.path().join("bare/x.yaml"), b"x").unwrap();
    let server = Server::start(served.path());
    let cache = tempfile::tempdir().unwrap();
    let tree = remote(&server.url("bare/"));
    let err = run(&tree, cache.path()).await.unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, RemoteError::NotFound { .. }), "{text}");
    assert!(text.contains(&server.url("bare/")), "{text}");
    assert_eq!(complete_mirror(cache.path(), &tree), None);
}
