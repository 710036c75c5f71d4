//! Where the serving tests find the published data and the goldens.

#![allow(dead_code)] // each test binary uses a part

use std::path::PathBuf;

/// The data cache the fetch step fills: `$AICSQL_DATA`, else
/// `$XDG_CACHE_HOME/aicsql`, else `~/.cache/aicsql`.
pub fn data_dir() -> PathBuf {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    var("AICSQL_DATA")
        .or_else(|| var("XDG_CACHE_HOME").map(|d| d.join("aicsql")))
        .unwrap_or_else(|| var("HOME").unwrap_or_else(|| PathBuf::from(".")).join(".cache").join("aicsql"))
}

/// `$AICSQL_GOLDENS`, else the repository's own copy, `tests/goldens`.
pub fn goldens_dir() -> PathBuf {
    std::env::var_os("AICSQL_GOLDENS")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/goldens"))
}
