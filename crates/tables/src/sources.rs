//! Which files make up a database's table (docs/spec section 4.2), for every
//! table kind: GEMM, attention, communication, MoE.
//!
//! Shared layer off: the database's own file. Shared layer on, in priority
//! order: the own file; donors named by the version dir's `reuse.yaml`; the
//! same backend's strictly older versions (PEP 440, nearest first, names that
//! do not parse skipped). A version the data declares (some file of it
//! exists) but that lacks this table's file gets the union without it.
//! Donors and older versions whose `collection_meta.yaml` marks the table
//! partial are skipped. The union is per table: every
//! source's rows are read and first-wins is applied per key by the loader.
//! Communication tables never take part in the union; their loaders ask for
//! the own file only.

use std::fs;
use std::path::{Path, PathBuf};

use serde_yaml_ng::Value;

use crate::discovery::{DataTree, PerfFile, ReuseFile, cmp_version_names};
use crate::error::{Result, TablesError};
use crate::pep440::Version;

const MANIFEST_STEM: &str = "op_kernel_source_manifest";

/// Names of one table kind as they appear on disk and in messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TableFile {
    /// Discovery's table name: the file stem without `_perf` (`gemm`).
    pub table: &'static str,
    /// The name `reuse.yaml`, `collection_meta.yaml` and the manifest use (`gemm_perf`).
    pub file: &'static str,
    /// Family directory of the family layout (`gemm`, `attention`, `comm`, `moe`).
    pub family: &'static str,
    /// How messages name the table (`GEMM`).
    pub label: &'static str,
}

pub const GEMM_FILE: TableFile = TableFile { table: "gemm", file: "gemm_perf", family: "gemm", label: "GEMM" };
pub const CONTEXT_ATTENTION_FILE: TableFile = TableFile {
    table: "context_attention",
    file: "context_attention_perf",
    family: "attention",
    label: "context attention",
};
pub const GENERATION_ATTENTION_FILE: TableFile = TableFile {
    table: "generation_attention",
    file: "generation_attention_perf",
    family: "attention",
    label: "generation attention",
};
pub const CUSTOM_ALLREDUCE_FILE: TableFile =
    TableFile { table: "custom_allreduce", file: "custom_allreduce_perf", family: "comm", label: "custom all-reduce" };
pub const MOE_FILE: TableFile = TableFile { table: "moe", file: "moe_perf", family: "moe", label: "MoE" };
/// NCCL lives under `comm/nccl/<nccl_version>/` (legacy `nccl/<nccl_version>/`):
/// discovery sees backend `nccl`, version = the NCCL version.
pub const NCCL_FILE: TableFile = TableFile { table: "nccl", file: "nccl_perf", family: "comm", label: "NCCL" };

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

/// One file of a table, with what it contributed to the loaded data.
#[derive(Debug, Clone)]
pub struct TableSource {
    pub version: String,
    pub path: PathBuf,
    pub role: SourceRole,
    /// Keys this file added (first-wins already applied).
    pub new_keys: usize,
}

/// The files of `table` for the database, in priority order.
pub(crate) fn plan(
    tree: &DataTree,
    table: &TableFile,
    system: &str,
    backend: &str,
    version: &str,
    shared: bool,
) -> Result<Vec<TableSource>> {
    let files: Vec<&PerfFile> = tree
        .perf_files()
        .iter()
        .filter(|f| f.table == table.table && f.system == system && f.backend == backend)
        .collect();
    let own = files.iter().find(|f| f.version == version);
    let reuse_file = match own {
        Some(f) => Some(f.version_dir().join("reuse.yaml")).filter(|p| p.is_file()),
        None => reuse_only_file(tree, table, system, backend, version)?.map(Path::to_path_buf),
    };
    let donors = match &reuse_file {
        Some(path) => read_reuse(path, table)?,
        None => Vec::new(),
    };
    // Without a file of its own the table is what the donors and older
    // versions offer (docs/spec 4.2 lists the channels, not a precondition), but
    // only for a version the data declares: any table file or reuse.yaml of
    // (system, backend, version). Otherwise every made-up version newer than
    // the last would borrow its predecessors' rows.
    if own.is_none() && (!shared || !(version_declared(tree, system, backend, version) || !donors.is_empty())) {
        return Err(unknown_database(tree, table, system, backend, version, &donors));
    }

    let mut out: Vec<TableSource> = own.map(|f| source(f, SourceRole::Own)).into_iter().collect();
    if !shared {
        return Ok(out);
    }
    refuse_cross_backend_rows(tree, table, backend)?;
    let admit = |f: &PerfFile, role: SourceRole, out: &mut Vec<TableSource>| -> Result<()> {
        if out.iter().all(|s| s.version != f.version) && !is_partial(f.version_dir(), table)? {
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
    if out.is_empty() {
        return Err(unknown_database(tree, table, system, backend, version, &donors));
    }
    Ok(out)
}

/// Whether the data holds anything of (system, backend, version): a table
/// file of any kind or a `reuse.yaml`.
fn version_declared(tree: &DataTree, system: &str, backend: &str, version: &str) -> bool {
    tree.perf_files().iter().any(|f| f.system == system && f.backend == backend && f.version == version)
        || tree.reuse_files().iter().any(|r| r.system == system && r.backend == backend && r.version == version)
}

fn source(f: &PerfFile, role: SourceRole) -> TableSource {
    TableSource { version: f.version.clone(), path: f.path.clone(), role, new_keys: 0 }
}

/// Versions of (system, backend) that hold no `table` file of their own but
/// declare the table in a `reuse.yaml` (e.g. GEMM of `gb200/trtllm/1.3.0rc23`,
/// which reuses 1.3.0rc20): databases the shared layer serves from donors.
/// PEP 440 order.
pub fn reuse_only_versions(tree: &DataTree, table: &TableFile, system: &str, backend: &str) -> Result<Vec<String>> {
    let own = |version: &str| {
        tree.perf_files()
            .iter()
            .any(|f| f.table == table.table && f.system == system && f.backend == backend && f.version == version)
    };
    let mut versions: Vec<String> = Vec::new();
    for file in reuse_files_for(tree, table, system, backend) {
        if versions.contains(&file.version) || own(&file.version) {
            continue;
        }
        if reuse_only_file(tree, table, system, backend, &file.version)?.is_some() {
            versions.push(file.version.clone());
        }
    }
    versions.sort_by(|a, b| cmp_version_names(a, b));
    Ok(versions)
}

/// The `reuse.yaml` files that can speak for `table` of (system, backend):
/// legacy version dirs, and the table's own family dirs. Best root first.
fn reuse_files_for<'t>(
    tree: &'t DataTree,
    table: &TableFile,
    system: &str,
    backend: &str,
) -> impl Iterator<Item = &'t ReuseFile> {
    let family = table.family;
    let backend = backend.to_string();
    let system = system.to_string();
    tree.reuse_files()
        .iter()
        .filter(move |r| r.system == system && r.backend == backend && r.family.as_deref().is_none_or(|f| f == family))
}

/// A version dir that declares the table by reuse only (no parquet of its
/// own): the first of its `reuse.yaml` files, best root first (a user's own
/// tree, then newer releases, then mount order), that names donors for the
/// table. A malformed file is an error, not a silent skip.
fn reuse_only_file<'t>(
    tree: &'t DataTree,
    table: &TableFile,
    system: &str,
    backend: &str,
    version: &str,
) -> Result<Option<&'t Path>> {
    for file in reuse_files_for(tree, table, system, backend).filter(|r| r.version == version) {
        if !read_reuse(&file.path, table)?.is_empty() {
            return Ok(Some(&file.path));
        }
    }
    Ok(None)
}

/// `reuse: [{table: <file>, from_version: X}, ...]` -> the donor versions, in file order.
fn read_reuse(path: &Path, table: &TableFile) -> Result<Vec<String>> {
    let doc = read_yaml(path)?;
    let Some(entries) = doc.get("reuse") else {
        return Ok(Vec::new());
    };
    let entries = entries.as_sequence().ok_or_else(|| TablesError::document(path, "`reuse` must be a list"))?;
    let mut donors = Vec::new();
    for entry in entries {
        if entry.get("table").and_then(Value::as_str) != Some(table.file) {
            continue;
        }
        match entry.get("from_version") {
            Some(Value::String(v)) => donors.push(v.clone()),
            Some(Value::Number(v)) => donors.push(v.to_string()),
            _ => {
                return Err(TablesError::document(
                    path,
                    format!("a `{}` reuse entry has no `from_version`", table.file),
                ));
            }
        }
    }
    Ok(donors)
}

/// `collection_meta.yaml` marks the whole version dir (`status: partial`)
/// or the table (`tables: {<file>: {status: partial}}`) partial. The
/// published files only use the second form; the Python path checks both.
fn is_partial(version_dir: &Path, table: &TableFile) -> Result<bool> {
    let path = version_dir.join("collection_meta.yaml");
    if !path.is_file() {
        return Ok(false);
    }
    let doc = read_yaml(&path)?;
    let partial = |node: Option<&Value>| node.and_then(|n| n.get("status")).and_then(Value::as_str) == Some("partial");
    Ok(partial(Some(&doc)) || partial(doc.get("tables").and_then(|t| t.get(table.file))))
}

/// The spec's fourth source channel takes other backends' rows whose
/// `kernel_source` the manifest lists with several frameworks. No shipped
/// manifest does that for the tables read here, so the channel is not
/// implemented; refuse rather than silently differ if a manifest ever does.
fn refuse_cross_backend_rows(tree: &DataTree, table: &TableFile, backend: &str) -> Result<()> {
    let Some(doc) = tree.system_yamls().iter().find(|d| d.stem == MANIFEST_STEM) else {
        return Ok(());
    };
    let manifest = read_yaml(&doc.path)?;
    let op_file = format!("{}.parquet", table.file);
    let groups = manifest.get("groups").and_then(Value::as_sequence).map(Vec::as_slice).unwrap_or_default();
    for group in groups {
        if group.get("op_file").and_then(Value::as_str) != Some(op_file.as_str()) {
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
                    "{} rows of kernel_source '{kernel}' are shared between backends {frameworks:?}; \
                     this cross-backend source channel is not supported",
                    table.file
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

fn unknown_database(
    tree: &DataTree,
    table: &TableFile,
    system: &str,
    backend: &str,
    version: &str,
    donors: &[String],
) -> TablesError {
    let db = format!("{system}/{backend}/{version}");
    let label = table.label;
    if !donors.is_empty() {
        return TablesError::Missing(format!(
            "database '{db}' has no {label} file of its own; its {} reuses {} (enable the shared layer)",
            table.file,
            donors.join(", ")
        ));
    }
    let kind = || tree.perf_files().iter().filter(|f| f.table == table.table);
    let same_system: Vec<String> =
        kind().filter(|f| f.system == system).map(|f| format!("{}/{}", f.backend, f.version)).collect();
    if same_system.is_empty() {
        let mut systems: Vec<&str> = kind().map(|f| f.system.as_str()).collect();
        systems.dedup();
        return TablesError::NotFound(format!(
            "unknown database '{db}': no system '{system}' has a {label} table; systems with one: {}",
            systems.join(", ")
        ));
    }
    // A version the data has (other tables, a reuse.yaml) is not unknown.
    let available = same_system.join(", ");
    if version_declared(tree, system, backend, version) {
        TablesError::Missing(format!(
            "database '{db}' has no {label} table; {system} has {label} tables for {available}"
        ))
    } else {
        TablesError::NotFound(format!(
            "unknown database '{db}': no {label} table; {system} has {label} tables for {available}"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn versions(table: &TableFile, system: &str, backend: &str, version: &str, shared: bool) -> Vec<String> {
        plan(crate::test_data::tree(), table, system, backend, version, shared)
            .map(|s| s.into_iter().map(|s| s.version).collect())
            .unwrap_or_default()
    }

    /// The spec's source table (section 4.2) for the engine-step databases.
    #[test]
    fn engine_step_sources_match_the_spec() {
        for table in [&GEMM_FILE, &CONTEXT_ATTENTION_FILE, &GENERATION_ATTENTION_FILE, &MOE_FILE] {
            assert_eq!(
                versions(table, "h200_sxm", "vllm", "0.19.0", true),
                ["0.19.0", "0.18.0", "0.14.0"],
                "{table:?}"
            );
            assert_eq!(versions(table, "gb200", "vllm", "0.19.0", true), ["0.19.0", "0.14.0"], "{table:?}");
        }
        for table in [&GEMM_FILE, &CONTEXT_ATTENTION_FILE, &GENERATION_ATTENTION_FILE] {
            assert_eq!(versions(table, "h200_sxm", "sglang", "0.5.10", true), ["0.5.10", "0.5.9", "0.5.6.post2"]);
            assert_eq!(versions(table, "h200_sxm", "trtllm", "1.3.0rc10", true), ["1.3.0rc10", "1.2.0rc5"]);
        }
        // Communication tables: primary file only.
        assert_eq!(versions(&CUSTOM_ALLREDUCE_FILE, "h200_sxm", "vllm", "0.19.0", false), ["0.19.0"]);
        assert_eq!(versions(&NCCL_FILE, "h200_sxm", "nccl", "2.26.2", false), ["2.26.2"]);
    }

    /// The newer release serves a path both releases hold: vLLM 0.19.0's
    /// custom all-reduce must be core-0.12's file (docs/spec 4.3).
    #[test]
    fn allreduce_file_comes_from_the_newer_release() {
        let tree = crate::test_data::tree();
        let Ok(sources) = plan(tree, &CUSTOM_ALLREDUCE_FILE, "h200_sxm", "vllm", "0.19.0", false) else { panic!() };
        let path = sources[0].path.to_string_lossy().into_owned();
        assert!(path.contains("comm/vllm/0.19.0"), "{path}");
    }

    /// Partial marks, whole dir or table, keep an older version out of the
    /// union (docs/spec 4.2); the requested version's own file always counts.
    #[test]
    fn partial_versions_are_skipped_in_either_form() -> std::result::Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let base = dir.path().join("systems/data/h200_sxm/gemm/vllm");
        for (version, meta) in [
            ("1.0.0", Some("status: partial\n")),
            ("0.9.0", Some("status: partial\n")),
            ("0.8.0", Some("tables:\n  gemm_perf:\n    status: partial\n")),
            ("0.7.0", Some("tables:\n  moe_perf:\n    status: partial\n")),
            ("0.6.0", None),
        ] {
            std::fs::create_dir_all(base.join(version))?;
            std::fs::write(base.join(version).join("gemm_perf.parquet"), b"")?;
            if let Some(meta) = meta {
                std::fs::write(base.join(version).join("collection_meta.yaml"), meta)?;
            }
        }
        let tree = DataTree::open(&[dir.path()])?;
        let got: Vec<String> =
            plan(&tree, &GEMM_FILE, "h200_sxm", "vllm", "1.0.0", true)?.into_iter().map(|s| s.version).collect();
        assert_eq!(got, ["1.0.0", "0.7.0", "0.6.0"]);
        Ok(())
    }

    #[test]
    fn a_version_that_only_reuses_is_listed_as_such() {
        let tree = crate::test_data::tree();
        let reusing = reuse_only_versions(tree, &GEMM_FILE, "gb200", "trtllm").unwrap_or_default();
        assert_eq!(reusing, ["1.3.0rc23"]);
        // Its MoE table has a file of its own (and a reuse.yaml): not reuse-only.
        assert!(reuse_only_versions(tree, &MOE_FILE, "gb200", "trtllm").unwrap_or_default().is_empty());
        assert!(reuse_only_versions(tree, &GEMM_FILE, "h200_sxm", "vllm").unwrap_or_default().is_empty());
    }

    /// gb200/trtllm/1.3.0rc23 exists (MoE, sparse attention, a GEMM reuse.yaml)
    /// but has no context-attention file: with the shared layer the table is
    /// the older versions' union; a version the data does not declare has none.
    #[test]
    fn a_declared_version_without_the_file_takes_the_older_versions() {
        let got = versions(&CONTEXT_ATTENTION_FILE, "gb200", "trtllm", "1.3.0rc23", true);
        assert_eq!(got.first().map(String::as_str), Some("1.3.0rc20"), "{got:?}");
        let rc23 = Version::parse("1.3.0rc23");
        assert!(got.iter().all(|v| Version::parse(v) < rc23), "{got:?}");
        let tree = crate::test_data::tree();
        let off = plan(tree, &CONTEXT_ATTENTION_FILE, "gb200", "trtllm", "1.3.0rc23", false);
        assert!(off.is_err(), "{off:?}");
        let made_up = plan(tree, &CONTEXT_ATTENTION_FILE, "gb200", "trtllm", "9.9.9", true);
        let err = made_up.err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err.contains("unknown database 'gb200/trtllm/9.9.9'"), "{err}");
    }
}
