//! Version directories and the database set the spec derives from them
//! (docs/spec/families_hybrid_vl_databases.md section 4).
//!
//! A *version dir* is `data/<system>/<backend>/<version>/` (legacy layout)
//! or `data/<system>/<family>/<backend>/<version>/` (family layout). What a
//! version dir says about itself lives in three sidecars, read once when the
//! tree is opened:
//!
//! * `collection_meta.yaml`: one table marked `status: partial` makes the
//!   whole dir partial (a top-level `status` is not looked at);
//!   `INCOMPLETE.txt` is the legacy marker, honoured only where there is no
//!   `collection_meta.yaml`;
//! * `reuse.yaml`: tables this version takes from named donor versions; a
//!   non-empty list declares reuse, and then `SHARED_LAYER_REUSE.txt` (the
//!   legacy marker: "all my tables come from the shared layer") is ignored;
//! * any other regular file makes the dir one that *has perf files*.
//!
//! A (system, backend, version) is a database when one of its dirs is not
//! partial and has perf files or declares reuse (4.2). Only the serving
//! backends count: communication-library dirs (`nccl/`, `oneccl/`,
//! `comm/nccl/`) hold tables the databases use, but are not databases.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use serde_yaml_ng::Value;

use crate::error::{Result, TablesError};

/// The backends a database can be of.
pub const DATABASE_BACKENDS: [&str; 3] = ["trtllm", "sglang", "vllm"];

/// First-level directory names that are backends (legacy layout) rather
/// than families; the communication libraries are among them, so a
/// top-level `nccl/` is never mistaken for a family.
pub const BACKEND_DIRS: [&str; 5] = ["trtllm", "sglang", "vllm", "nccl", "oneccl"];

/// The legacy "served by the shared layer" marker.
pub const SHARED_LAYER_MARKER: &str = "SHARED_LAYER_REUSE.txt";
/// The legacy "collection did not finish" marker.
pub const INCOMPLETE_MARKER: &str = "INCOMPLETE.txt";
pub const REUSE_YAML: &str = "reuse.yaml";
pub const COLLECTION_META: &str = "collection_meta.yaml";

const SIDECARS: [&str; 4] = [SHARED_LAYER_MARKER, INCOMPLETE_MARKER, REUSE_YAML, COLLECTION_META];

/// One `reuse.yaml` entry: `table` (e.g. `gemm_perf`) comes from `from_version`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReuseEntry {
    pub table: String,
    pub from_version: String,
}

/// How a version dir declares shared-layer reuse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReuseDecl {
    None,
    /// `SHARED_LAYER_REUSE.txt` without a `reuse.yaml`.
    Marker,
    /// A non-empty `reuse.yaml`, entries in file order.
    Entries(Vec<ReuseEntry>),
}

/// What a version dir's sidecars and files say.
#[derive(Debug, Clone)]
pub struct DirState {
    pub partial: bool,
    pub reuse: ReuseDecl,
    pub has_perf_files: bool,
}

impl DirState {
    /// The dir makes its version a database (4.2 step 3).
    pub fn declares_version(&self) -> bool {
        !self.partial && (self.has_perf_files || self.reuse != ReuseDecl::None)
    }
}

/// One version directory of one root.
#[derive(Debug, Clone)]
pub struct VersionDir {
    pub system: String,
    pub backend: String,
    pub version: String,
    /// The family directory (family layout), `None` for the legacy layout.
    pub family: Option<String>,
    pub root: usize,
    pub path: PathBuf,
    /// The sidecars' verdict, or the malformed sidecar and what is wrong with it.
    state: std::result::Result<DirState, (PathBuf, String)>,
}

impl VersionDir {
    pub(crate) fn read(
        system: &str,
        backend: &str,
        version: &str,
        family: Option<&str>,
        root: usize,
        path: PathBuf,
    ) -> Result<VersionDir> {
        let state = read_state(&path)?;
        Ok(VersionDir {
            system: system.to_string(),
            backend: backend.to_string(),
            version: version.to_string(),
            family: family.map(str::to_string),
            root,
            path,
            state,
        })
    }

    /// The dir's state; a malformed sidecar is an error naming it.
    pub fn state(&self) -> Result<&DirState> {
        self.state.as_ref().map_err(|(path, message)| TablesError::document(path, message))
    }

    /// Partial for reading purposes: the spec's resolver treats a dir whose
    /// `collection_meta.yaml` cannot be read as not partial, but a broken
    /// sidecar must not pass silently here, so it is an error.
    pub fn is_partial(&self) -> Result<bool> {
        Ok(self.state()?.partial)
    }

    pub fn is_database_backend(&self) -> bool {
        DATABASE_BACKENDS.contains(&self.backend.as_str())
    }
}

/// Reads the sidecars of `dir`. I/O errors listing the dir are errors; a
/// sidecar that is not what it must be is recorded on the dir, so only
/// what uses that system fails, naming the file.
fn read_state(dir: &Path) -> Result<std::result::Result<DirState, (PathBuf, String)>> {
    let mut has_perf_files = false;
    for entry in fs::read_dir(dir).map_err(|e| TablesError::io(dir, e))? {
        let entry = entry.map_err(|e| TablesError::io(dir, e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') || SIDECARS.contains(&name.as_str()) {
            continue;
        }
        if entry.path().is_file() {
            has_perf_files = true;
            break;
        }
    }
    let meta = dir.join(COLLECTION_META);
    let partial = if meta.is_file() {
        match collection_meta_partial(&meta) {
            Ok(p) => p,
            Err(message) => return Ok(Err((meta, message))),
        }
    } else {
        dir.join(INCOMPLETE_MARKER).is_file()
    };
    let reuse_path = dir.join(REUSE_YAML);
    let reuse = if reuse_path.is_file() {
        match parse_reuse_yaml(&reuse_path) {
            Ok(entries) if entries.is_empty() => ReuseDecl::None,
            Ok(entries) => ReuseDecl::Entries(entries),
            Err(message) => return Ok(Err((reuse_path, message))),
        }
    } else if dir.join(SHARED_LAYER_MARKER).is_file() {
        ReuseDecl::Marker
    } else {
        ReuseDecl::None
    };
    Ok(Ok(DirState { partial, reuse, has_perf_files }))
}

fn load_yaml(path: &Path) -> std::result::Result<Value, String> {
    let text = fs::read_to_string(path).map_err(|e| format!("cannot be read ({e})"))?;
    serde_yaml_ng::from_str(&text).map_err(|e| format!("invalid YAML: {e}"))
}

/// `tables: {<table>: {status: partial}, ...}`: any partial table.
fn collection_meta_partial(path: &Path) -> std::result::Result<bool, String> {
    let doc = load_yaml(path)?;
    if !doc.is_mapping() {
        return Err("expected a mapping at the top level".into());
    }
    let Some(tables) = doc.get("tables").and_then(Value::as_mapping) else {
        return Ok(false);
    };
    Ok(tables.values().any(|t| t.get("status").and_then(Value::as_str) == Some("partial")))
}

/// The spec validates `reuse.yaml` strictly: a `reuse` list of mappings with
/// non-empty string `table`, `from_version`, `reason` and `approved_by`. An
/// empty list is valid and declares nothing.
pub(crate) fn parse_reuse_yaml(path: &Path) -> std::result::Result<Vec<ReuseEntry>, String> {
    let doc = load_yaml(path)?;
    if !doc.is_mapping() {
        return Err("expected a mapping at the top level".into());
    }
    let entries = doc.get("reuse").ok_or("missing the top-level `reuse` key")?;
    let entries = entries.as_sequence().ok_or("`reuse` must be a list")?;
    let mut out = Vec::with_capacity(entries.len());
    for (i, entry) in entries.iter().enumerate() {
        if !entry.is_mapping() {
            return Err(format!("reuse[{i}] must be a mapping"));
        }
        let field = |key: &str| match entry.get(key).and_then(Value::as_str) {
            Some(v) if !v.trim().is_empty() => Ok(v.to_string()),
            _ => Err(format!("reuse[{i}].{key} must be a non-empty string")),
        };
        let (table, from_version) = (field("table")?, field("from_version")?);
        field("reason")?;
        field("approved_by")?;
        out.push(ReuseEntry { table, from_version });
    }
    Ok(out)
}

/// One database of the set.
#[derive(Debug, Clone)]
pub struct DatabaseEntry {
    pub system: String,
    pub backend: String,
    pub version: String,
    /// No dir of the version holds a perf file; it declares reuse only, so
    /// every table comes from the shared layer (4.4).
    pub marker_only: bool,
    /// The version `latest` means for (system, backend).
    pub latest: bool,
}

impl DatabaseEntry {
    pub fn db(&self) -> String {
        format!("{}/{}/{}", self.system, self.backend, self.version)
    }
}

/// The spec's databases: every (system, backend, version) one of whose
/// dirs declares it, in (system, backend, PEP 440 version) order.
#[derive(Debug, Default)]
pub struct DatabaseSet {
    entries: Vec<DatabaseEntry>,
    /// Systems whose sidecars could not be read: the spec drops such a
    /// system from its list; here every use of it fails naming the file.
    broken: BTreeMap<String, (PathBuf, String)>,
}

impl DatabaseSet {
    pub(crate) fn build(dirs: &[VersionDir]) -> DatabaseSet {
        let mut broken = BTreeMap::new();
        for d in dirs {
            if let Err((path, message)) = &d.state {
                broken.entry(d.system.clone()).or_insert_with(|| (path.clone(), message.clone()));
            }
        }
        // (system, backend) -> version -> (declared, has perf files in a non-partial dir, declares reuse)
        #[allow(clippy::type_complexity)]
        let mut versions: BTreeMap<(&str, &str), BTreeMap<&str, (bool, bool, bool)>> = BTreeMap::new();
        for d in dirs.iter().filter(|d| d.is_database_backend() && !broken.contains_key(&d.system)) {
            let Ok(state) = &d.state else { continue };
            let slot = versions.entry((&d.system, &d.backend)).or_default().entry(&d.version).or_default();
            slot.0 |= state.declares_version();
            if !state.partial {
                slot.1 |= state.has_perf_files;
                slot.2 |= state.reuse != ReuseDecl::None;
            }
        }
        let mut entries = Vec::new();
        for ((system, backend), by_version) in versions {
            let mut listed: Vec<DatabaseEntry> = by_version
                .into_iter()
                .filter(|(_, (declared, _, _))| *declared)
                .map(|(version, (_, has_perf, reuse))| DatabaseEntry {
                    system: system.to_string(),
                    backend: backend.to_string(),
                    version: version.to_string(),
                    marker_only: !has_perf && reuse,
                    latest: false,
                })
                .collect();
            // The spec's candidates are string-sorted and `max` keeps the
            // first of equal keys (BTreeMap order is that string order).
            let mut best: Option<(LatestKey, usize)> = None;
            for (i, e) in listed.iter().enumerate().filter(|(_, e)| !e.marker_only) {
                let key = latest_key(&e.version);
                if best.as_ref().is_none_or(|(b, _)| key > *b) {
                    best = Some((key, i));
                }
            }
            if let Some((_, i)) = best {
                listed[i].latest = true;
            }
            listed.sort_by(|a, b| crate::discovery::cmp_version_names(&a.version, &b.version));
            entries.extend(listed);
        }
        DatabaseSet { entries, broken }
    }

    pub fn entries(&self) -> &[DatabaseEntry] {
        &self.entries
    }

    /// The database, if it is one; an error if its system's sidecars are broken.
    pub fn get(&self, system: &str, backend: &str, version: &str) -> Result<Option<&DatabaseEntry>> {
        self.check_system(system)?;
        Ok(self.entries.iter().find(|e| e.system == system && e.backend == backend && e.version == version))
    }

    /// `latest` for (system, backend): the newest version by the spec's own
    /// version key, marker-only versions excluded.
    pub fn latest(&self, system: &str, backend: &str) -> Result<Option<&DatabaseEntry>> {
        self.check_system(system)?;
        Ok(self.entries.iter().find(|e| e.system == system && e.backend == backend && e.latest))
    }

    /// A system whose sidecars are malformed: the error naming the file.
    pub fn check_system(&self, system: &str) -> Result<()> {
        match self.broken.get(system) {
            Some((path, message)) => Err(TablesError::document(path, message)),
            None => Ok(()),
        }
    }

    /// Every malformed sidecar's error, one per system.
    pub fn broken(&self) -> impl Iterator<Item = TablesError> + '_ {
        self.broken.values().map(|(path, message)| TablesError::document(path, message))
    }
}

/// The spec's "latest" ordering key (4.4), not PEP 440: `(X, Y, Z, stable,
/// rc, tail)` from the first `X.Y.Z` (else `X.Y`, else the first three
/// numbers) of the lower-cased name.
pub type LatestKey = (i128, i128, i128, i128, i128, i128);

pub fn latest_key(name: &str) -> LatestKey {
    let s = name.to_ascii_lowercase();
    let b = s.as_bytes();
    let pre = || -> (i128, i128) {
        match find_rc_number(b) {
            Some(n) => (0, n),
            None if s.contains("rc") => (0, 0),
            None => (1, 0),
        }
    };
    let tail = |from: usize| last_number(&b[from..]).unwrap_or(0);
    if let Some((nums, end)) = first_dotted(b, 3) {
        let (stable, rc) = pre();
        return (nums[0], nums[1], nums[2], stable, rc, tail(end));
    }
    if let Some((nums, end)) = first_dotted(b, 2) {
        let (stable, rc) = pre();
        return (nums[0], nums[1], 0, stable, rc, tail(end));
    }
    let numbers = digit_runs(b);
    if numbers.is_empty() {
        return (0, 0, 0, -1, 0, 0);
    }
    let n = |i: usize| numbers.get(i).map(|&(s, e)| number(&b[s..e])).unwrap_or(0);
    (n(0), n(1), n(2), 0, 0, 0)
}

fn number(digits: &[u8]) -> i128 {
    digits.iter().fold(0i128, |acc, d| acc.saturating_mul(10).saturating_add(i128::from(d - b'0')))
}

/// Maximal runs of ASCII digits, as (start, end).
fn digit_runs(b: &[u8]) -> Vec<(usize, usize)> {
    let mut runs = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i].is_ascii_digit() {
            let start = i;
            while i < b.len() && b[i].is_ascii_digit() {
                i += 1;
            }
            runs.push((start, i));
        } else {
            i += 1;
        }
    }
    runs
}

/// The first `\d+(\.\d+){parts-1}` (leftmost, greedy): its numbers and end.
/// A match can only start at the start of a digit run and continue through
/// the ends of runs, so runs are tried in order.
fn first_dotted(b: &[u8], parts: usize) -> Option<(Vec<i128>, usize)> {
    let runs = digit_runs(b);
    'start: for first in 0..runs.len() {
        let mut nums = vec![number(&b[runs[first].0..runs[first].1])];
        let mut end = runs[first].1;
        for next in runs.iter().skip(first + 1).take(parts - 1) {
            if b.get(end) != Some(&b'.') || next.0 != end + 1 {
                continue 'start;
            }
            nums.push(number(&b[next.0..next.1]));
            end = next.1;
        }
        if nums.len() == parts {
            return Some((nums, end));
        }
    }
    None
}

/// The number after the first `rc` that is followed by a digit.
fn find_rc_number(b: &[u8]) -> Option<i128> {
    (0..b.len().saturating_sub(2)).find_map(|i| {
        if &b[i..i + 2] == b"rc" && b[i + 2].is_ascii_digit() {
            let end = (i + 2..b.len()).find(|&j| !b[j].is_ascii_digit()).unwrap_or(b.len());
            Some(number(&b[i + 2..end]))
        } else {
            None
        }
    })
}

fn last_number(b: &[u8]) -> Option<i128> {
    digit_runs(b).last().map(|&(s, e)| number(&b[s..e]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latest_key_examples_of_the_spec() {
        assert_eq!(latest_key("1.3.0rc23"), (1, 3, 0, 0, 23, 23));
        assert_eq!(latest_key("0.5.6.post2"), (0, 5, 6, 1, 0, 2));
        assert_eq!(latest_key("0.1.dev19262"), (0, 1, 0, 1, 0, 19262));
        assert_eq!(latest_key("1.0.0"), (1, 0, 0, 1, 0, 0));
        assert_eq!(latest_key("v2.1"), (2, 1, 0, 1, 0, 0));
        assert_eq!(latest_key("build7"), (7, 0, 0, 0, 0, 0));
        assert_eq!(latest_key("main"), (0, 0, 0, -1, 0, 0));
        assert_eq!(latest_key("1.2rc"), (1, 2, 0, 0, 0, 0));
        // The first X.Y.Z, not the longest.
        assert_eq!(latest_key("a1.2b3.4.5"), (3, 4, 5, 1, 0, 0));
        assert!(latest_key("1.3.0rc23") > latest_key("1.3.0rc20"));
        assert!(latest_key("1.3.0") > latest_key("1.3.0rc23"));
        assert!(latest_key("0.5.16") > latest_key("0.5.9"));
    }

    fn dir_with(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("tempdir");
        for (name, text) in files {
            std::fs::write(dir.path().join(name), text).expect("write");
        }
        dir
    }

    fn state(files: &[(&str, &str)]) -> std::result::Result<DirState, String> {
        let dir = dir_with(files);
        match read_state(dir.path()) {
            Ok(Ok(s)) => Ok(s),
            Ok(Err((_, m))) => Err(m),
            Err(e) => Err(e.to_string()),
        }
    }

    const ENTRY: &str = "reuse:\n- table: gemm_perf\n  from_version: 1.0.0\n  reason: same kernels\n  approved_by: x\n";

    #[test]
    fn sidecars_decide_the_state() {
        let partial_table = "tables:\n  gemm_perf:\n    status: complete\n  moe_perf:\n    status: partial\n";
        let s = state(&[("collection_meta.yaml", partial_table), ("gemm_perf.parquet", "")]).expect("state");
        assert!(s.partial && s.has_perf_files && !s.declares_version());
        // A top-level status is not looked at.
        let s = state(&[("collection_meta.yaml", "status: partial\n"), ("x.json", "")]).expect("state");
        assert!(!s.partial && s.has_perf_files);
        // INCOMPLETE.txt counts only without collection_meta.yaml.
        assert!(state(&[("INCOMPLETE.txt", ""), ("a_perf.parquet", "")]).expect("state").partial);
        assert!(!state(&[("INCOMPLETE.txt", ""), ("collection_meta.yaml", "{}\n")]).expect("state").partial);
        // Marker only: a database served by the shared layer.
        let s = state(&[(SHARED_LAYER_MARKER, "")]).expect("state");
        assert!(s.reuse == ReuseDecl::Marker && !s.has_perf_files && s.declares_version());
        // An empty reuse.yaml declares nothing, and hides the legacy marker.
        let s = state(&[("reuse.yaml", "reuse: []\n"), (SHARED_LAYER_MARKER, "")]).expect("state");
        assert!(s.reuse == ReuseDecl::None && !s.declares_version());
        let s = state(&[("reuse.yaml", ENTRY)]).expect("state");
        assert_eq!(
            s.reuse,
            ReuseDecl::Entries(vec![ReuseEntry { table: "gemm_perf".into(), from_version: "1.0.0".into() }])
        );
    }

    #[test]
    fn malformed_sidecars_are_reported() {
        for (file, text, what) in [
            ("reuse.yaml", "reuses: []\n", "missing the top-level `reuse` key"),
            ("reuse.yaml", "reuse: {}\n", "must be a list"),
            ("reuse.yaml", "reuse:\n- table: gemm_perf\n  from_version: 1.0.0\n", "reason"),
            (
                "reuse.yaml",
                "reuse:\n- table: gemm_perf\n  from_version: 1.0\n  reason: r\n  approved_by: a\n",
                "from_version",
            ),
            ("collection_meta.yaml", "- a\n", "mapping"),
            ("collection_meta.yaml", "tables: [\n", "invalid YAML"),
        ] {
            let err = state(&[(file, text)]).err().unwrap_or_default();
            assert!(err.contains(what), "{file} {text:?}: {err}");
        }
    }
}
