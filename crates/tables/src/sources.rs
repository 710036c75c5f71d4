//! Which files make up a database's table (docs/spec 4.2, restated precisely
//! in docs/spec/families_hybrid_vl_databases.md 4.3), for every table kind.
//!
//! *resolve(version)*: the file the spec's resolver finds for a version: a
//! non-partial family dir's file first, else the legacy path (see
//! [`DataTree::perf_files`], which keeps exactly that file per key).
//!
//! Sources in priority order: the database's own file (refused if its dir
//! is partial, which only a legacy dir can be); with the shared layer on,
//! the donors the version's `reuse.yaml` files name for the table (any of
//! its dirs, partial ones too, first occurrence per donor), then every other
//! version of the backend that is strictly older (PEP 440, nearest first,
//! names that do not parse skipped), each as resolve(version) finds it; a
//! donor's partial legacy dir does not keep it out (the spec checks
//! partiality only for the primary). Communication tables take no part in
//! the union when the own file lives in the `comm` family dir; NCCL and
//! oneCCL tables never do. Every source's rows are read and first-wins is
//! applied per key by the loader.

use std::fs;
use std::path::{Path, PathBuf};

use serde_yaml_ng::Value;

use crate::discovery::{DataTree, Layout, PerfFile};
use crate::error::{Result, TablesError};
use crate::pep440::Version;
use crate::version_dirs::{DATABASE_BACKENDS, ReuseDecl};

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
/// The vision encoder's attention (Qwen3-VL's image path).
pub const ENCODER_ATTENTION_FILE: TableFile = TableFile {
    table: "encoder_attention",
    file: "encoder_attention_perf",
    family: "encoder_attention",
    label: "encoder attention",
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
pub const COMPUTE_SCALE_FILE: TableFile =
    TableFile { table: "computescale", file: "computescale_perf", family: "quantize", label: "Compute scale" };
pub const SCALE_MATRIX_FILE: TableFile =
    TableFile { table: "scale_matrix", file: "scale_matrix_perf", family: "quantize", label: "Scale matrix" };
pub const CONTEXT_MLA_FILE: TableFile =
    TableFile { table: "context_mla", file: "context_mla_perf", family: "mla", label: "context MLA" };
pub const GENERATION_MLA_FILE: TableFile =
    TableFile { table: "generation_mla", file: "generation_mla_perf", family: "mla", label: "generation MLA" };
pub const MLA_BMM_FILE: TableFile =
    TableFile { table: "mla_bmm", file: "mla_bmm_perf", family: "mla_bmm", label: "MLA BMM" };
pub const MLA_CONTEXT_MODULE_FILE: TableFile = TableFile {
    table: "mla_context_module",
    file: "mla_context_module_perf",
    family: "mla",
    label: "context MLA module",
};
pub const MLA_GENERATION_MODULE_FILE: TableFile = TableFile {
    table: "mla_generation_module",
    file: "mla_generation_module_perf",
    family: "mla",
    label: "generation MLA module",
};
/// DeepSeek-V3.2 / GLM-5's DSA layers, under `sparse_attention/`.
pub const DSA_CONTEXT_MODULE_FILE: TableFile = TableFile {
    table: "dsa_context_module",
    file: "dsa_context_module_perf",
    family: "sparse_attention",
    label: "context DSA module",
};
pub const DSA_GENERATION_MODULE_FILE: TableFile = TableFile {
    table: "dsa_generation_module",
    file: "dsa_generation_module_perf",
    family: "sparse_attention",
    label: "generation DSA module",
};
/// DeepSeek-V4's attention modules, one file per attention kind and phase,
/// under `sparse_attention/` (families_dsv4.md 3.1).
pub const DSV4_CSA_CONTEXT_FILE: TableFile = TableFile {
    table: "dsv4_csa_context_module",
    file: "dsv4_csa_context_module_perf",
    family: "sparse_attention",
    label: "DeepSeek-V4 CSA context module",
};
pub const DSV4_HCA_CONTEXT_FILE: TableFile = TableFile {
    table: "dsv4_hca_context_module",
    file: "dsv4_hca_context_module_perf",
    family: "sparse_attention",
    label: "DeepSeek-V4 HCA context module",
};
pub const DSV4_CSA_GENERATION_FILE: TableFile = TableFile {
    table: "dsv4_csa_generation_module",
    file: "dsv4_csa_generation_module_perf",
    family: "sparse_attention",
    label: "DeepSeek-V4 CSA generation module",
};
pub const DSV4_HCA_GENERATION_FILE: TableFile = TableFile {
    table: "dsv4_hca_generation_module",
    file: "dsv4_hca_generation_module_perf",
    family: "sparse_attention",
    label: "DeepSeek-V4 HCA generation module",
};
/// The CSA top-k calibration (families_dsv4.md 3.4).
pub const DSV4_CSA_TOPK_CALIB_FILE: TableFile = TableFile {
    table: "dsv4_csa_topk_calib",
    file: "dsv4_csa_topk_calib_perf",
    family: "sparse_attention",
    label: "DeepSeek-V4 CSA top-k calibration",
};
/// DeepSeek-V4's paged-MQA-logits indexer kernel, read only by the
/// context-parallel CSA module (families_dsv4.md 3.5, 5).
pub const DSV4_PAGED_MQA_FILE: TableFile = TableFile {
    table: "dsv4_paged_mqa_logits_module",
    file: "dsv4_paged_mqa_logits_module_perf",
    family: "sparse_attention",
    label: "DeepSeek-V4 paged MQA logits",
};
/// The DSA sub-kernel tables of context parallelism (families_dsa.md 7),
/// per architecture prefix: `glm5_*` (GLM-5.x) and `dsv32_*` (DeepSeek-V3.2).
/// The indexer logits, the top-k selection, and the sparse attention kernel
/// (never priced: only its presence can anchor the version dir).
pub const GLM5_MQA_LOGITS_FILE: TableFile = TableFile {
    table: "glm5_mqa_logits_module",
    file: "glm5_mqa_logits_module_perf",
    family: "sparse_attention",
    label: "GLM-5 MQA logits",
};
pub const GLM5_TOPK_FILE: TableFile = TableFile {
    table: "glm5_topk_module",
    file: "glm5_topk_module_perf",
    family: "sparse_attention",
    label: "GLM-5 top-k",
};
pub const GLM5_DSA_ATTN_FILE: TableFile = TableFile {
    table: "glm5_dsa_attn_module",
    file: "glm5_dsa_attn_module_perf",
    family: "sparse_attention",
    label: "GLM-5 DSA attention",
};
pub const DSV32_MQA_LOGITS_FILE: TableFile = TableFile {
    table: "dsv32_mqa_logits_module",
    file: "dsv32_mqa_logits_module_perf",
    family: "sparse_attention",
    label: "DeepSeek-V3.2 MQA logits",
};
pub const DSV32_TOPK_FILE: TableFile = TableFile {
    table: "dsv32_topk_module",
    file: "dsv32_topk_module_perf",
    family: "sparse_attention",
    label: "DeepSeek-V3.2 top-k",
};
pub const DSV32_DSA_ATTN_FILE: TableFile = TableFile {
    table: "dsv32_dsa_attn_module",
    file: "dsv32_dsa_attn_module_perf",
    family: "sparse_attention",
    label: "DeepSeek-V3.2 DSA attention",
};
/// DeepSeek-V4's manifold-constrained hyper-connections, under `mhc/`.
pub const MHC_MODULE_FILE: TableFile =
    TableFile { table: "mhc_module", file: "mhc_module_perf", family: "mhc", label: "DeepSeek-V4 mHC module" };
/// Gated-delta-net kernels (Qwen3.5), under `linear_attention/`.
pub const GDN_FILE: TableFile = TableFile { table: "gdn", file: "gdn_perf", family: "linear_attention", label: "GDN" };
/// Mamba-2 kernels (Nemotron-H), under `linear_attention/` (trtllm only).
pub const MAMBA2_FILE: TableFile =
    TableFile { table: "mamba2", file: "mamba2_perf", family: "linear_attention", label: "Mamba-2" };
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
    /// Another backend's version whose rows of a shared kernel source the
    /// manifest lends to this backend (families_mla_gptoss_fp8static.md 7.1).
    Cross,
}

/// One file of a table, with what it contributed to the loaded data.
#[derive(Debug, Clone)]
pub struct TableSource {
    /// The backend whose version dir holds the file (another one for [`SourceRole::Cross`]).
    pub backend: String,
    pub version: String,
    pub path: PathBuf,
    pub role: SourceRole,
    /// Keys this file added (first-wins already applied).
    pub new_keys: usize,
    /// Cross-backend sources: the `kernel_source` values whose rows are
    /// read (all others are skipped); `None` reads every row.
    pub kernel_sources: Option<Vec<String>>,
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
    let comm_library = !DATABASE_BACKENDS.contains(&backend);
    if !comm_library {
        tree.databases().check_system(system)?;
        if tree.databases().get(system, backend, version)?.is_none() {
            return Err(unknown_database(tree, table, system, backend, version));
        }
    }
    let resolve = |v: &str| resolved(tree, table, system, backend, v);
    let primary = resolve(version);
    let mut out: Vec<TableSource> = Vec::new();
    if let Some(f) = primary.filter(|f| !f.partial_dir) {
        out.push(source(f, SourceRole::Own));
    }
    let comm_family = primary.is_some_and(|f| f.layout == Layout::Family && f.family.as_deref() == Some("comm"));
    let donors = if comm_library { Vec::new() } else { declared_donors(tree, table, system, backend, version)? };
    if shared && !comm_library && !comm_family {
        let mut admit = |f: &PerfFile, role: SourceRole| {
            if out.iter().all(|s| s.path != f.path) {
                out.push(source(f, role));
            }
        };
        for donor in &donors {
            if let Some(f) = resolve(donor) {
                admit(f, SourceRole::Reuse);
            }
        }
        if let Some(current) = Version::parse(version) {
            let mut older: Vec<(Version, &str)> = Vec::new();
            for d in tree.version_dirs().iter().filter(|d| d.system == system && d.backend == backend) {
                let name = d.version.as_str();
                if name == version || donors.iter().any(|v| v == name) || older.iter().any(|(_, v)| *v == name) {
                    continue;
                }
                if let Some(v) = Version::parse(name).filter(|v| *v < current) {
                    older.push((v, name));
                }
            }
            older.sort_by(|a, b| b.0.cmp(&a.0));
            for (_, name) in older {
                if let Some(f) = resolve(name) {
                    admit(f, SourceRole::Older);
                }
            }
        }
        for (framework, kernel_sources) in cross_filters(tree, table, backend)? {
            let names: Vec<&str> = tree
                .version_dirs()
                .iter()
                .filter(|d| d.system == system && d.backend == framework)
                .map(|d| d.version.as_str())
                .collect();
            for name in newest_first(names) {
                let Some(f) = resolved(tree, table, system, &framework, name) else {
                    continue;
                };
                if out.iter().all(|s| s.path != f.path) {
                    let mut s = source(f, SourceRole::Cross);
                    s.kernel_sources = Some(kernel_sources.clone());
                    out.push(s);
                }
            }
        }
    }
    if out.is_empty() {
        return Err(no_table(tree, table, system, backend, version, primary, &donors, shared));
    }
    Ok(out)
}

/// The file the spec's resolver finds for the database's own version of
/// `table` (no union, no reuse; a partial legacy dir's file too), as the
/// one source of a loader that reads "the primary file only".
pub(crate) fn own_file(
    tree: &DataTree,
    table: &TableFile,
    system: &str,
    backend: &str,
    version: &str,
) -> Option<TableSource> {
    resolved(tree, table, system, backend, version).map(|f| source(f, SourceRole::Own))
}

/// The file of `table` that lies in `dir` for the database, if any: a
/// sibling of a file [`own_file`] found.
pub(crate) fn sibling_file(
    tree: &DataTree,
    table: &TableFile,
    (system, backend, version): (&str, &str, &str),
    dir: &Path,
) -> Option<TableSource> {
    resolved(tree, table, system, backend, version)
        .filter(|f| f.path.parent() == Some(dir))
        .map(|f| source(f, SourceRole::Own))
}

/// The file discovery keeps for `table` of one version: the one the spec's
/// resolver finds (see [`DataTree::perf_files`]).
fn resolved<'t>(
    tree: &'t DataTree,
    table: &TableFile,
    system: &str,
    backend: &str,
    version: &str,
) -> Option<&'t PerfFile> {
    tree.perf_files()
        .iter()
        .find(|f| f.table == table.table && f.system == system && f.backend == backend && f.version == version)
}

fn source(f: &PerfFile, role: SourceRole) -> TableSource {
    TableSource {
        backend: f.backend.clone(),
        version: f.version.clone(),
        path: f.path.clone(),
        role,
        new_keys: 0,
        kernel_sources: None,
    }
}

/// The donor versions the requested version's `reuse.yaml` files name for
/// `table`, in dir listing order then file order, first occurrence each.
fn declared_donors(
    tree: &DataTree,
    table: &TableFile,
    system: &str,
    backend: &str,
    version: &str,
) -> Result<Vec<String>> {
    let mut donors: Vec<String> = Vec::new();
    for d in tree.version_dirs().iter().filter(|d| d.system == system && d.backend == backend && d.version == version) {
        if let ReuseDecl::Entries(entries) = &d.state()?.reuse {
            for e in entries.iter().filter(|e| e.table == table.file) {
                if !donors.contains(&e.from_version) {
                    donors.push(e.from_version.clone());
                }
            }
        }
    }
    Ok(donors)
}

/// Versions of (system, backend) that are databases but hold no `table`
/// file of their own and name donors for it in a `reuse.yaml` (e.g. GEMM
/// of `gb200/trtllm/1.3.0rc23`, which reuses 1.3.0rc20). PEP 440 order.
pub fn reuse_only_versions(tree: &DataTree, table: &TableFile, system: &str, backend: &str) -> Result<Vec<String>> {
    let mut versions = Vec::new();
    for e in tree.databases().entries().iter().filter(|e| e.system == system && e.backend == backend) {
        let own = resolved(tree, table, system, backend, &e.version).is_some();
        if !own && !declared_donors(tree, table, system, backend, &e.version)?.is_empty() {
            versions.push(e.version.clone());
        }
    }
    Ok(versions)
}

/// The spec's fourth source channel (families_mla_gptoss_fp8static.md 7.1):
/// for every group of `op_kernel_source_manifest.yaml` on this table whose
/// frameworks include `backend` and whose tier is `shared` or
/// `shared_fallback`, each other listed framework lends its rows of the
/// group's `kernel_source`. Frameworks in name order, each with its kernel
/// sources; the groups' `systems` lists are not consulted (nor are they by
/// the spec).
fn cross_filters(tree: &DataTree, table: &TableFile, backend: &str) -> Result<Vec<(String, Vec<String>)>> {
    let Some(doc) = tree.system_yamls().iter().find(|d| d.stem == MANIFEST_STEM) else {
        return Ok(Vec::new());
    };
    let manifest = tree.cache().manifests.get(doc.path.clone(), || read_yaml(&doc.path))?;
    let op_file = format!("{}.parquet", table.file);
    let groups = manifest.get("groups").and_then(Value::as_sequence).map(Vec::as_slice).unwrap_or_default();
    let mut filters: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for group in groups {
        let Some(file) = group.get("op_file").and_then(Value::as_str) else { continue };
        let file = match file.strip_suffix(".txt") {
            Some(stem) => format!("{stem}.parquet"),
            None => file.to_string(),
        };
        if file != op_file {
            continue;
        }
        let tier = group.get("tier").and_then(Value::as_str);
        let kernel = group.get("kernel_source").and_then(Value::as_str).filter(|k| !k.is_empty());
        let frameworks: Vec<String> = group
            .get("frameworks")
            .and_then(Value::as_sequence)
            .map(|f| f.iter().filter_map(Value::as_str).map(str::to_lowercase).collect())
            .unwrap_or_default();
        let (Some(kernel), Some("shared" | "shared_fallback")) = (kernel, tier) else { continue };
        if !frameworks.iter().any(|f| f == backend) {
            continue;
        }
        for framework in frameworks.into_iter().filter(|f| f != backend) {
            let kernels = filters.entry(framework).or_default();
            if !kernels.iter().any(|k| k == kernel) {
                kernels.push(kernel.to_string());
            }
        }
    }
    Ok(filters.into_iter().collect())
}

/// Version names newest first (PEP 440), then the names that do not parse
/// in reverse name order; each name once.
fn newest_first(mut names: Vec<&str>) -> Vec<&str> {
    names.sort_unstable();
    names.dedup();
    let mut parsed: Vec<(Version, &str)> = names.iter().filter_map(|n| Some((Version::parse(n)?, *n))).collect();
    parsed.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| b.1.cmp(a.1)));
    let mut out: Vec<&str> = parsed.into_iter().map(|(_, n)| n).collect();
    out.extend(names.iter().rev().filter(|n| Version::parse(n).is_none()));
    out
}

fn read_yaml(path: &Path) -> Result<Value> {
    let text = fs::read_to_string(path).map_err(|e| TablesError::io(path, e))?;
    serde_yaml_ng::from_str(&text).map_err(|e| TablesError::document(path, format!("invalid YAML: {e}")))
}

/// (system, backend, version) is not one of the spec's databases.
fn unknown_database(tree: &DataTree, table: &TableFile, system: &str, backend: &str, version: &str) -> TablesError {
    let db = format!("{system}/{backend}/{version}");
    let entries = tree.databases().entries();
    let same: Vec<&str> =
        entries.iter().filter(|e| e.system == system && e.backend == backend).map(|e| e.version.as_str()).collect();
    if !same.is_empty() {
        return TablesError::NotFound(format!(
            "unknown database '{db}' (no {} table): {system}/{backend} has versions {}",
            table.label,
            same.join(", ")
        ));
    }
    let mut systems: Vec<&str> = entries.iter().map(|e| e.system.as_str()).collect();
    systems.dedup();
    if systems.contains(&system) {
        let mut backends: Vec<&str> =
            entries.iter().filter(|e| e.system == system).map(|e| e.backend.as_str()).collect();
        backends.sort();
        backends.dedup();
        return TablesError::NotFound(format!(
            "unknown database '{db}': {system} has no backend '{backend}'; its backends: {}",
            backends.join(", ")
        ));
    }
    TablesError::NotFound(format!("unknown database '{db}': no system '{system}'; systems: {}", systems.join(", ")))
}

/// A database whose table has no source: the spec's "file does not exist"
/// miss, saying why (no file, a partial own dir, donors needing the shared layer).
#[allow(clippy::too_many_arguments)]
fn no_table(
    tree: &DataTree,
    table: &TableFile,
    system: &str,
    backend: &str,
    version: &str,
    primary: Option<&PerfFile>,
    donors: &[String],
    shared: bool,
) -> TablesError {
    let db = format!("{system}/{backend}/{version}");
    let label = table.label;
    if let Some(f) = primary.filter(|f| f.partial_dir) {
        return TablesError::Missing(format!(
            "database '{db}' has no {label} table: its own file {} is in a dir marked partial",
            f.path.display()
        ));
    }
    if !shared && !donors.is_empty() {
        return TablesError::Missing(format!(
            "database '{db}' has no {label} file of its own; its {} reuses {} (enable the shared layer)",
            table.file,
            donors.join(", ")
        ));
    }
    if !shared && tree.databases().get(system, backend, version).ok().flatten().is_some_and(|e| e.marker_only) {
        return TablesError::Missing(format!(
            "database '{db}' has no {label} file of its own; all its tables come from the shared layer (enable it)"
        ));
    }
    let available: Vec<String> = tree
        .perf_files()
        .iter()
        .filter(|f| f.table == table.table && f.system == system && !f.partial_dir)
        .map(|f| format!("{}/{}", f.backend, f.version))
        .collect();
    let older = if shared { " and no older version has one" } else { "" };
    TablesError::Missing(format!(
        "database '{db}' has no {label} table (no file of its own{older}); {system} has {label} tables for {}",
        if available.is_empty() { "no version".to_string() } else { available.join(", ") }
    ))
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
        // Communication tables in the comm family dir: primary file only.
        assert_eq!(versions(&CUSTOM_ALLREDUCE_FILE, "h200_sxm", "vllm", "0.19.0", true), ["0.19.0"]);
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

    /// The partial and reuse rules of docs/spec/families_hybrid_vl_databases.md
    /// 4.2-4.4 on a made-up tree: one partial table makes a family dir
    /// partial and unread, even as the requested version's own; a top-level
    /// `status` is ignored; a legacy INCOMPLETE.txt dir is no database but
    /// still an older donor; a marker-only version is a database, but not
    /// `latest`.
    #[test]
    fn partial_and_marker_rules() -> std::result::Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let data = dir.path().join("systems/data/h200_sxm");
        let put = |rel: &str, text: &str| -> std::io::Result<()> {
            let path = data.join(rel);
            std::fs::create_dir_all(path.parent().unwrap_or(&data))?;
            std::fs::write(path, text)
        };
        put("gemm/vllm/1.0.0/gemm_perf.parquet", "")?;
        put("gemm/vllm/1.0.0/collection_meta.yaml", "tables:\n  moe_perf:\n    status: partial\n")?;
        put("kda/vllm/1.0.0/kda_perf.parquet", "")?;
        put("gemm/vllm/0.9.0/gemm_perf.parquet", "")?;
        put("gemm/vllm/0.9.0/collection_meta.yaml", "status: partial\n")?;
        put("vllm/0.8.0/gemm_perf.parquet", "")?;
        put("vllm/0.8.0/INCOMPLETE.txt", "")?;
        put("gemm/vllm/0.7.0/gemm_perf.parquet", "")?;
        put("gemm/vllm/0.7.0/collection_meta.yaml", "tables:\n  gemm_perf:\n    status: partial\n")?;
        put("gemm/vllm/0.6.0/gemm_perf.parquet", "")?;
        put("gemm/vllm/1.1.0/SHARED_LAYER_REUSE.txt", "")?;
        put("nccl/2.20.0/nccl_perf.parquet", "")?;
        let tree = DataTree::open(&[dir.path()])?;
        let got = |version: &str, shared: bool| -> Result<Vec<String>> {
            Ok(plan(&tree, &GEMM_FILE, "h200_sxm", "vllm", version, shared)?.into_iter().map(|s| s.version).collect())
        };
        assert_eq!(got("1.0.0", true)?, ["0.9.0", "0.8.0", "0.6.0"]);
        assert_eq!(got("1.1.0", true)?, ["0.9.0", "0.8.0", "0.6.0"]);
        assert_eq!(got("0.9.0", false)?, ["0.9.0"]);
        let err = got("1.1.0", false).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err.contains("come from the shared layer"), "{err}");
        for not_a_database in ["0.8.0", "0.7.0"] {
            let err = got(not_a_database, true).err().map(|e| e.to_string()).unwrap_or_default();
            assert!(err.contains("unknown database"), "{not_a_database}: {err}");
        }
        let listed: Vec<(String, bool, bool)> =
            tree.databases().entries().iter().map(|e| (e.db(), e.marker_only, e.latest)).collect();
        let want = [
            ("h200_sxm/vllm/0.6.0", false, false),
            ("h200_sxm/vllm/0.9.0", false, false),
            ("h200_sxm/vllm/1.0.0", false, true),
            ("h200_sxm/vllm/1.1.0", true, false),
        ];
        assert_eq!(listed, want.map(|(d, m, l)| (d.to_string(), m, l)));
        // The NCCL table is read, though nccl is no database backend.
        assert_eq!(plan(&tree, &NCCL_FILE, "h200_sxm", "nccl", "2.20.0", true)?.len(), 1);
        Ok(())
    }

    /// A malformed sidecar fails every use of its system, naming the file.
    #[test]
    fn a_malformed_reuse_yaml_fails_its_system() -> std::result::Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let v = dir.path().join("systems/data/h200_sxm/gemm/vllm/1.0.0");
        std::fs::create_dir_all(&v)?;
        std::fs::write(v.join("gemm_perf.parquet"), "")?;
        std::fs::write(v.join("reuse.yaml"), "reuses: []\n")?;
        let tree = DataTree::open(&[dir.path()])?;
        let err = plan(&tree, &GEMM_FILE, "h200_sxm", "vllm", "1.0.0", true).err().map(|e| e.to_string());
        let err = err.unwrap_or_default();
        assert!(err.contains("reuse.yaml") && err.contains("`reuse` key"), "{err}");
        Ok(())
    }

    /// Published data: the spec's database count and its examples (appendix A/B).
    #[test]
    fn the_spec_database_set() {
        let set = crate::test_data::tree().databases();
        assert_eq!(set.entries().len(), 124);
        let has = |db: &str| set.entries().iter().any(|e| e.db() == db);
        for db in ["h200_sxm/vllm/0.22.0", "h200_sxm/trtllm/1.3.0rc15", "rtx_pro_6000_server/trtllm/1.3.0rc23"] {
            assert!(has(db), "{db}");
        }
        for db in ["h200_sxm/trtllm/1.3.0rc11", "gb300/vllm/0.14.0", "rtx_pro_6000_server/sglang/0.5.9"] {
            assert!(!has(db), "{db}");
        }
        assert!(set.entries().iter().all(|e| e.backend != "nccl" && e.backend != "oneccl"));
        let latest = |s: &str, b: &str| set.latest(s, b).ok().flatten().map(|e| e.version.clone());
        assert_eq!(latest("rtx_pro_6000_server", "trtllm").as_deref(), Some("1.3.0rc20"));
        assert_eq!(latest("h200_sxm", "sglang").as_deref(), Some("0.5.16"));
        assert_eq!(latest("a100_sxm", "vllm").as_deref(), Some("0.14.0"));
    }

    /// A partial family dir is not read even for its own version:
    /// b300_sxm/sglang/0.5.14's attention comes from 0.5.10 and 0.5.9.
    #[test]
    fn a_partial_own_dir_is_skipped() {
        let got = versions(&CONTEXT_ATTENTION_FILE, "b300_sxm", "sglang", "0.5.14", true);
        assert_eq!(got, ["0.5.10", "0.5.9"]);
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
