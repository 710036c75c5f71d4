//! Which files make up a database's GEMM table (spec section 4.2).
//!
//! Shared layer off: the database's own file. Shared layer on, in priority
//! order: the own file; donors named by the version dir's `reuse.yaml`; the
//! same backend's strictly older versions (PEP 440, nearest first, names that
//! do not parse skipped). Donors and older versions whose `collection_meta.yaml`
//! marks `gemm_perf` partial are skipped. The union is per table: every
//! source's rows are read and first-wins is applied per `(gemm_dtype, m, n, k)`
//! key, so a source only matters to a quant slice if it adds keys there.

use std::fs;
use std::path::{Path, PathBuf};

use serde_yaml_ng::Value;

use crate::discovery::{DataTree, PerfFile};
use crate::error::{Result, TablesError};
use crate::pep440::Version;

const TABLE: &str = "gemm";
const TABLE_FILE: &str = "gemm_perf";
const MANIFEST_STEM: &str = "op_kernel_source_manifest";

/// Why a file takes part in a table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceRole {
    /// The database's own file.
    Own,
    /// Declared in the version dir's `reuse.yaml`.
    Reuse,
    /// A strictly older version of the same backend.
    Older,
}

/// One file of a GEMM table, with what it contributed to the loaded slice.
#[derive(Debug, Clone)]
pub struct GemmSource {
    pub version: String,
    pub path: PathBuf,
    pub role: SourceRole,
    /// Keys of the loaded quant slice this file added (first-wins already applied).
    pub new_keys: usize,
}

/// The files of the table in priority order.
pub(crate) fn plan(
    tree: &DataTree,
    system: &str,
    backend: &str,
    version: &str,
    shared: bool,
) -> Result<Vec<GemmSource>> {
    let files: Vec<&PerfFile> =
        tree.perf_files().iter().filter(|f| f.table == TABLE && f.system == system && f.backend == backend).collect();
    let own = files.iter().find(|f| f.version == version);
    let reuse_file = match own {
        Some(f) => Some(f.version_dir().join("reuse.yaml")).filter(|p| p.is_file()),
        None => reuse_only_file(tree, system, backend, version),
    };
    let donors = match &reuse_file {
        Some(path) => read_reuse(path)?,
        None => Vec::new(),
    };
    if own.is_none() && (!shared || donors.is_empty()) {
        return Err(unknown_database(tree, system, backend, version, &donors));
    }

    let mut out: Vec<GemmSource> = own.map(|f| source(f, SourceRole::Own)).into_iter().collect();
    if !shared {
        return Ok(out);
    }
    refuse_cross_backend_rows(tree, backend)?;
    let admit = |f: &PerfFile, role: SourceRole, out: &mut Vec<GemmSource>| -> Result<()> {
        if out.iter().all(|s| s.version != f.version) && !is_partial(f.version_dir())? {
            out.push(source(f, role));
        }
        Ok(())
    };
    for donor in &donors {
        if let Some(f) = files.iter().find(|f| &f.version == donor) {
            admit(f, SourceRole::Reuse, &mut out)?;
        }
    }
    if let Some(current) = Version::parse(version) {
        let mut older: Vec<(Version, &PerfFile)> =
            files.iter().filter_map(|f| Version::parse(&f.version).filter(|v| *v < current).map(|v| (v, *f))).collect();
        older.sort_by(|a, b| b.0.cmp(&a.0));
        for (_, f) in older {
            admit(f, SourceRole::Older, &mut out)?;
        }
    }
    Ok(out)
}

fn source(f: &PerfFile, role: SourceRole) -> GemmSource {
    GemmSource { version: f.version.clone(), path: f.path.clone(), role, new_keys: 0 }
}

/// A version dir that declares its GEMM table by reuse only (no parquet of
/// its own, e.g. `gb200/gemm/trtllm/1.3.0rc23`). Roots are searched best first,
/// like file precedence: a user's own tree, then newer releases, then mount order.
fn reuse_only_file(tree: &DataTree, system: &str, backend: &str, version: &str) -> Option<PathBuf> {
    let mut roots: Vec<_> = tree.roots().iter().collect();
    roots.sort_by_key(|r| {
        let release = r.release.label.split_once("==").and_then(|(_, v)| Version::parse(v));
        (std::cmp::Reverse(r.release.is_local()), std::cmp::Reverse(release), r.mount_index)
    });
    roots.iter().find_map(|root| {
        let data = root.dir.join("systems").join("data").join(system);
        [data.join(TABLE).join(backend).join(version), data.join(backend).join(version)]
            .into_iter()
            .map(|dir| dir.join("reuse.yaml"))
            .find(|p| p.is_file())
    })
}

/// `reuse: [{table: gemm_perf, from_version: X}, ...]` -> the donor versions, in file order.
fn read_reuse(path: &Path) -> Result<Vec<String>> {
    let doc = read_yaml(path)?;
    let Some(entries) = doc.get("reuse") else { return Ok(Vec::new()) };
    let entries = entries.as_sequence().ok_or_else(|| TablesError::document(path, "`reuse` must be a list"))?;
    let mut donors = Vec::new();
    for entry in entries {
        if entry.get("table").and_then(Value::as_str) != Some(TABLE_FILE) {
            continue;
        }
        match entry.get("from_version") {
            Some(Value::String(v)) => donors.push(v.clone()),
            Some(Value::Number(v)) => donors.push(v.to_string()),
            _ => return Err(TablesError::document(path, "a `gemm_perf` reuse entry has no `from_version`")),
        }
    }
    Ok(donors)
}

/// `collection_meta.yaml` says `tables: {gemm_perf: {status: partial}}`.
fn is_partial(version_dir: &Path) -> Result<bool> {
    let path = version_dir.join("collection_meta.yaml");
    if !path.is_file() {
        return Ok(false);
    }
    let doc = read_yaml(&path)?;
    let status = doc.get("tables").and_then(|t| t.get(TABLE_FILE)).and_then(|t| t.get("status"));
    Ok(status.and_then(Value::as_str) == Some("partial"))
}

/// The spec's fourth source channel takes other backends' rows whose
/// `kernel_source` the manifest lists with several frameworks. No shipped
/// manifest does that for `gemm_perf`, so the channel is not implemented;
/// refuse rather than silently differ if a manifest ever does.
fn refuse_cross_backend_rows(tree: &DataTree, backend: &str) -> Result<()> {
    let Some(doc) = tree.system_yamls().iter().find(|d| d.stem == MANIFEST_STEM) else { return Ok(()) };
    let manifest = read_yaml(&doc.path)?;
    let groups = manifest.get("groups").and_then(Value::as_sequence).map(Vec::as_slice).unwrap_or_default();
    for group in groups {
        if group.get("op_file").and_then(Value::as_str) != Some("gemm_perf.parquet") {
            continue;
        }
        let frameworks: Vec<&str> = group
            .get("frameworks")
            .and_then(Value::as_sequence)
            .map(|f| f.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        if frameworks.len() > 1 && frameworks.contains(&backend) {
            let kernel = group.get("kernel_source").and_then(Value::as_str).unwrap_or("?");
            return Err(TablesError::document(
                &doc.path,
                format!(
                    "gemm_perf rows of kernel_source '{kernel}' are shared between backends {frameworks:?}; \
                     this cross-backend source channel is not supported"
                ),
            ));
        }
    }
    Ok(())
}

fn read_yaml(path: &Path) -> Result<Value> {
    let text = fs::read_to_string(path).map_err(|e| TablesError::io(path, e))?;
    serde_yaml_ng::from_str(&text).map_err(|e| TablesError::document(path, format!("invalid YAML: {e}")))
}

fn unknown_database(tree: &DataTree, system: &str, backend: &str, version: &str, donors: &[String]) -> TablesError {
    let db = format!("{system}/{backend}/{version}");
    if !donors.is_empty() {
        return TablesError::InvalidInput(format!(
            "database '{db}' has no GEMM file of its own; its gemm_perf reuses {} (enable the shared layer)",
            donors.join(", ")
        ));
    }
    let gemm = || tree.perf_files().iter().filter(|f| f.table == TABLE);
    let same_system: Vec<String> =
        gemm().filter(|f| f.system == system).map(|f| format!("{}/{}", f.backend, f.version)).collect();
    if same_system.is_empty() {
        let mut systems: Vec<&str> = gemm().map(|f| f.system.as_str()).collect();
        systems.dedup();
        return TablesError::InvalidInput(format!(
            "unknown database '{db}': no system '{system}' has a GEMM table; systems with one: {}",
            systems.join(", ")
        ));
    }
    TablesError::InvalidInput(format!(
        "unknown database '{db}': no GEMM table; {system} has GEMM tables for {}",
        same_system.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The spec's source order for the golden databases (section 4.2 table),
    /// on the published data when it is present.
    #[test]
    fn older_versions_nearest_first_by_pep440() {
        let tree = crate::test_data::tree();
        let versions = |system: &str, backend: &str, version: &str| -> Vec<String> {
            plan(tree, system, backend, version, true)
                .map(|s| s.into_iter().map(|s| s.version).collect())
                .unwrap_or_default()
        };
        assert_eq!(versions("h200_sxm", "vllm", "0.19.0"), ["0.19.0", "0.18.0", "0.14.0"]);
        // 0.5.10 sorts after 0.5.9 (PEP 440, not lexical); 0.5.6.post2 after both.
        assert_eq!(versions("h200_sxm", "sglang", "0.5.14"), ["0.5.14", "0.5.10", "0.5.9", "0.5.6.post2"]);
        assert_eq!(versions("h100_sxm", "trtllm", "1.3.0rc10"), ["1.3.0rc10", "1.2.0rc5"]);
        assert_eq!(versions("gb200", "vllm", "0.19.0"), ["0.19.0", "0.14.0"]);
        // Reuse-only version dir: the donor first, then older versions.
        assert_eq!(versions("gb200", "trtllm", "1.3.0rc23"), ["1.3.0rc20", "1.3.0rc10"]);
        let own_only = plan(tree, "h200_sxm", "vllm", "0.19.0", false).map(|s| s.len()).unwrap_or(0);
        assert_eq!(own_only, 1);
    }

    #[test]
    fn unknown_database_lists_what_exists() {
        let tree = crate::test_data::tree();
        let err = plan(tree, "h200_sxm", "vllm", "9.9.9", true).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err.contains("h200_sxm/vllm/9.9.9") && err.contains("vllm/0.19.0"), "{err}");
        let err = plan(tree, "gb200", "trtllm", "1.3.0rc23", false).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err.contains("reuses 1.3.0rc20"), "{err}");
    }
}
