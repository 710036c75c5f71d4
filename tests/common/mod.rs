//! Shared set-up of the integration tests: the real published data, fetched
//! by the project's own fetch step (`aicsql data fetch`, run by `scripts/test`).

#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use aicsql::{DataTree, default_data_dir, fetch};

/// The data cache the tests read; panics with the fix when it is missing.
pub fn data_dir() -> PathBuf {
    let dir = default_data_dir();
    assert!(
        fetch::is_complete(&dir),
        "the perf data is not in {}; run `cargo run -- data fetch` (scripts/test does) first",
        dir.display()
    );
    dir
}

/// One mounted tree for the whole test binary.
pub fn tree() -> Arc<DataTree> {
    static TREE: OnceLock<Arc<DataTree>> = OnceLock::new();
    Arc::clone(TREE.get_or_init(|| {
        Arc::new(DataTree::open(&[data_dir()]).unwrap_or_else(|e| panic!("cannot mount test data: {e}")))
    }))
}

/// The folder of a published release inside the cache, e.g. `aiconfigurator-0.10.0/aiconfigurator`.
pub fn release_root(release_dir: &str, package: &str) -> PathBuf {
    data_dir().join(release_dir).join(package)
}

/// The spec's goldens: `$AICSQL_GOLDENS`, else the repository's own copy, `tests/goldens`.
pub fn goldens_dir() -> PathBuf {
    let dir = std::env::var_os("AICSQL_GOLDENS")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/goldens"));
    assert!(
        dir.join("gemm_goldens.parquet").is_file(),
        "the goldens are not in {}; set AICSQL_GOLDENS to a goldens directory",
        dir.display()
    );
    dir
}

/// One database of the published data (`backend/version` of h200_sxm in
/// aiconfigurator 0.10.0, with the system's yaml) copied into `tree` in the
/// published layout (`systems/...`): a small real tree for the remote-tree
/// tests. The GEMM table of `vllm/0.19.0` has 101,004 rows.
pub fn copy_published_db(tree: &std::path::Path, backend_version: &str) {
    let published = data_dir().join("aiconfigurator-0.10.0/aiconfigurator/systems");
    let db = tree.join("systems/data/h200_sxm").join(backend_version);
    std::fs::create_dir_all(&db).expect("mkdir");
    std::fs::copy(published.join("h200_sxm.yaml"), tree.join("systems/h200_sxm.yaml")).expect("copy yaml");
    for entry in std::fs::read_dir(published.join("data/h200_sxm").join(backend_version)).expect("published db") {
        let entry = entry.expect("entry");
        if entry.path().is_file() {
            std::fs::copy(entry.path(), db.join(entry.file_name())).expect("copy table");
        }
    }
}
