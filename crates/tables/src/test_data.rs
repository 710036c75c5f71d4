//! The published data for unit tests: the cache the fetch step fills
//! (`$AICSQL_DATA`, else `$XDG_CACHE_HOME/aicsql`, else `~/.cache/aicsql`).

use std::path::PathBuf;
use std::sync::OnceLock;

use crate::discovery::DataTree;

pub(crate) fn data_dir() -> PathBuf {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    var("AICSQL_DATA")
        .or_else(|| var("XDG_CACHE_HOME").map(|d| d.join("aicsql")))
        .unwrap_or_else(|| var("HOME").unwrap_or_else(|| PathBuf::from(".")).join(".cache").join("aicsql"))
}

/// One mounted tree per test binary; panics with the fix when the data is missing.
pub(crate) fn tree() -> &'static DataTree {
    static TREE: OnceLock<DataTree> = OnceLock::new();
    TREE.get_or_init(|| {
        let dir = data_dir();
        DataTree::open(&[&dir]).unwrap_or_else(|e| {
            panic!("perf data not found in {} ({e}); run `cargo run -- data fetch` first", dir.display())
        })
    })
}
