//! Finding the perf data: data roots, releases, and the files each serves.
//!
//! A *data root* is a directory holding `systems/` (and usually
//! `model_configs/`), i.e. the `aiconfigurator/` or `aiconfigurator_core/`
//! package folder of an unpacked wheel. Several roots can be mounted; where
//! two hold the same relative path, the root of the newer release serves it.
//! Discovery only lists directories: no data file is opened here.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::cache::TableCache;
use crate::error::{Result, TablesError};
use crate::pep440::Version;
use crate::version_dirs::{BACKEND_DIRS, DatabaseSet, VersionDir};

/// Name of the marker file the fetch step writes beside each unpacked release.
pub const RELEASE_MARKER: &str = "RELEASE";

/// Where a data root came from, e.g. `aiconfigurator-core==0.12.0`.
#[derive(Debug, Clone)]
pub struct Release {
    /// `name==version`, or `local:<dir>` for a tree without release metadata.
    pub label: String,
    version: Option<Version>,
}

impl Release {
    fn published(label: String) -> Release {
        let version = label.split_once("==").and_then(|(_, v)| Version::parse(v));
        Release { label, version }
    }

    fn local(dir: &Path) -> Release {
        Release { label: format!("local:{}", dir.display()), version: None }
    }

    /// True for trees that carry no release metadata (a user's own data).
    pub fn is_local(&self) -> bool {
        self.label.starts_with("local:")
    }
}

/// One mounted data root.
#[derive(Debug, Clone)]
pub struct DataRoot {
    /// The directory that holds `systems/`.
    pub dir: PathBuf,
    pub release: Release,
    /// Position on the command line / in the mount list.
    pub mount_index: usize,
}

impl DataRoot {
    /// Precedence key: a user's own (unlabelled) tree overrides published
    /// data; among releases the newer wins; ties go to the earlier mount.
    fn rank(&self) -> (bool, Option<&Version>, std::cmp::Reverse<usize>) {
        (self.release.is_local(), self.release.version.as_ref(), std::cmp::Reverse(self.mount_index))
    }
}

/// Directory layout a perf file was found in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// `systems/data/<system>/<backend>/<version>/<table>_perf.parquet` (aiconfigurator 0.10).
    Legacy,
    /// `systems/data/<system>/<family>/<backend>/<version>/<table>_perf.parquet` (core 0.12).
    Family,
}

/// One perf table file of one database, after release precedence.
#[derive(Debug, Clone)]
pub struct PerfFile {
    pub system: String,
    pub backend: String,
    pub version: String,
    /// Table kind: the file stem without `_perf` (`gemm`, `moe`, ...).
    pub table: String,
    /// Family directory (family layout only).
    pub family: Option<String>,
    pub layout: Layout,
    /// Index into [`DataTree::roots`] of the root that serves the file.
    pub root: usize,
    pub path: PathBuf,
    /// Roots that hold the same (system, backend, version, table) but lost.
    pub shadowed: Vec<usize>,
    /// The file's version dir is partial. Only a legacy-layout file can win
    /// while partial (partial family dirs are never read, docs/spec
    /// families_hybrid_vl_databases.md 4.3): it is then no database's own
    /// file, but still a shared-layer donor of newer versions.
    pub partial_dir: bool,
}

impl PerfFile {
    /// `system/backend/version`, the database name used throughout SQL.
    pub fn db(&self) -> String {
        format!("{}/{}/{}", self.system, self.backend, self.version)
    }

    /// The version directory holding the file (`collection_meta.yaml`, `reuse.yaml` live there).
    pub fn version_dir(&self) -> &Path {
        self.path.parent().unwrap_or(Path::new(""))
    }
}

/// A plain document (system YAML, model config, support matrix CSV) after
/// release precedence by file name.
#[derive(Debug, Clone)]
pub struct DocFile {
    /// File name without extension (`h200_sxm`, `Qwen--Qwen3-32B-FP8_config`).
    pub stem: String,
    pub root: usize,
    pub path: PathBuf,
}

/// Everything mounted: roots, and the files they serve.
#[derive(Debug)]
pub struct DataTree {
    roots: Vec<DataRoot>,
    perf_files: Vec<PerfFile>,
    version_dirs: Vec<VersionDir>,
    databases: DatabaseSet,
    system_yamls: Vec<DocFile>,
    model_configs: Vec<DocFile>,
    support_matrices: Vec<DocFile>,
    parquet_opens: AtomicUsize,
    cache: TableCache,
    /// Modification times of the mounted directories and roots at opening.
    stamps: Vec<(PathBuf, Option<std::time::SystemTime>)>,
}

impl DataTree {
    /// What this tree has loaded: every table, system and model config, each
    /// loaded once and shared by whoever holds the tree.
    pub fn cache(&self) -> &TableCache {
        &self.cache
    }

    /// Whether the mounted directories are as they were when the tree was
    /// opened (a fetch or a copy into them changes their modification
    /// time); a holder that keeps trees between sessions opens a new one
    /// when this is false, so new sessions see new data.
    pub fn is_current(&self) -> bool {
        self.stamps.iter().all(|(dir, stamp)| modified(dir) == *stamp)
    }

    /// Mounts every data root found under `dirs` (each may be a root itself,
    /// a cache holding unpacked releases, or a release folder).
    pub fn open<P: AsRef<Path>>(dirs: &[P]) -> Result<DataTree> {
        let mut roots = Vec::new();
        for (mount_index, dir) in dirs.iter().enumerate() {
            let dir = dir.as_ref();
            let meta = fs::metadata(dir).map_err(|e| TablesError::NoData {
                path: dir.to_path_buf(),
                message: format!("data directory is not accessible ({e})"),
            })?;
            if !meta.is_dir() {
                return Err(TablesError::NoData {
                    path: dir.to_path_buf(),
                    message: "data path is not a directory".into(),
                });
            }
            let found = find_roots(dir, 3)?;
            if found.is_empty() {
                return Err(TablesError::NoData {
                    path: dir.to_path_buf(),
                    message: "no aiconfigurator data found (expected a `systems/data` tree \
                              within three levels; run `aicsql data fetch --data DIR` to fill it)"
                        .into(),
                });
            }
            for root_dir in found {
                let release = release_of(&root_dir)?;
                roots.push(DataRoot { dir: root_dir, release, mount_index });
            }
        }
        let mut stamped: Vec<PathBuf> = dirs.iter().map(|d| d.as_ref().to_path_buf()).collect();
        stamped.extend(roots.iter().map(|r| r.dir.clone()));
        let mut tree = Self::from_roots(roots)?;
        tree.stamps = stamped
            .into_iter()
            .map(|dir| {
                let stamp = modified(&dir);
                (dir, stamp)
            })
            .collect();
        Ok(tree)
    }

    fn from_roots(roots: Vec<DataRoot>) -> Result<DataTree> {
        // Visit roots best-first so the first holder of a key serves it.
        let mut order: Vec<usize> = (0..roots.len()).collect();
        order.sort_by(|&a, &b| roots[b].rank().cmp(&roots[a].rank()));

        let mut perf: BTreeMap<(String, String, String, String), PerfFile> = BTreeMap::new();
        let mut version_dirs = Vec::new();
        let mut systems = BTreeMap::new();
        let mut models = BTreeMap::new();
        let mut support = BTreeMap::new();
        for &ri in &order {
            let root = &roots[ri];
            let listing = list_perf_files(&root.dir.join("systems").join("data"), ri)?;
            // Within a root, a family dir's file serves before the legacy
            // path of the same version (the spec's resolver); a partial
            // family dir is never read.
            let mut files = listing.perf;
            files.sort_by_key(|f| f.layout == Layout::Legacy);
            for file in files {
                if file.partial_dir && file.layout == Layout::Family {
                    continue;
                }
                let key = (file.system.clone(), file.backend.clone(), file.version.clone(), file.table.clone());
                match perf.get_mut(&key) {
                    Some(winner) => {
                        if winner.root != ri && !winner.shadowed.contains(&ri) {
                            winner.shadowed.push(ri);
                        }
                    }
                    None => {
                        perf.insert(key, file);
                    }
                }
            }
            version_dirs.extend(listing.dirs);
            collect_docs(&root.dir.join("systems"), ri, |n| n.ends_with(".yaml"), &mut systems)?;
            collect_docs(&root.dir.join("model_configs"), ri, is_model_config, &mut models)?;
            collect_docs(&root.dir.join("systems").join("support_matrix"), ri, |n| n.ends_with(".csv"), &mut support)?;
        }
        let mut perf_files: Vec<PerfFile> = perf.into_values().collect();
        perf_files.sort_by(|a, b| {
            (&a.system, &a.backend)
                .cmp(&(&b.system, &b.backend))
                .then_with(|| cmp_version_names(&a.version, &b.version))
                .then_with(|| a.table.cmp(&b.table))
        });
        let databases = DatabaseSet::build(&version_dirs);
        Ok(DataTree {
            roots,
            perf_files,
            version_dirs,
            databases,
            system_yamls: systems.into_values().collect(),
            model_configs: models.into_values().collect(),
            support_matrices: support.into_values().collect(),
            parquet_opens: AtomicUsize::new(0),
            cache: TableCache::default(),
            stamps: Vec::new(),
        })
    }

    pub fn roots(&self) -> &[DataRoot] {
        &self.roots
    }

    /// Perf files in (system, backend, PEP 440 version, table) order.
    pub fn perf_files(&self) -> &[PerfFile] {
        &self.perf_files
    }

    /// Every version dir under `systems/data`, best root first, then in
    /// listing (name) order: family dirs and legacy dirs alike, partial
    /// ones included.
    pub fn version_dirs(&self) -> &[VersionDir] {
        &self.version_dirs
    }

    /// The spec's databases (docs/spec/families_hybrid_vl_databases.md 4.2).
    pub fn databases(&self) -> &DatabaseSet {
        &self.databases
    }

    /// Distinct table kinds, sorted.
    pub fn table_kinds(&self) -> Vec<String> {
        let mut kinds: Vec<String> = self.perf_files.iter().map(|f| f.table.clone()).collect();
        kinds.sort();
        kinds.dedup();
        kinds
    }

    /// `systems/*.yaml` (all YAML documents there; not all describe a system).
    pub fn system_yamls(&self) -> &[DocFile] {
        &self.system_yamls
    }

    /// `model_configs/*_config.json` without the `_hf_quant_config.json` companions.
    pub fn model_configs(&self) -> &[DocFile] {
        &self.model_configs
    }

    /// `systems/support_matrix/*.csv`.
    pub fn support_matrices(&self) -> &[DocFile] {
        &self.support_matrices
    }

    /// The release label of a root.
    pub fn release_label(&self, root: usize) -> &str {
        &self.roots[root].release.label
    }

    /// How many parquet files this tree has opened so far (lazy-loading checks).
    pub fn parquet_opens(&self) -> usize {
        self.parquet_opens.load(Ordering::Relaxed)
    }

    pub(crate) fn note_parquet_open(&self) {
        self.parquet_opens.fetch_add(1, Ordering::Relaxed);
    }
}

/// Orders version directory names by PEP 440; names that do not parse sort
/// after all that do, lexically among themselves.
pub fn cmp_version_names(a: &str, b: &str) -> std::cmp::Ordering {
    match (Version::parse(a), Version::parse(b)) {
        (Some(x), Some(y)) => x.cmp(&y).then_with(|| a.cmp(b)),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => a.cmp(b),
    }
}

fn is_model_config(name: &str) -> bool {
    name.ends_with("_config.json") && !name.ends_with("_hf_quant_config.json")
}

fn read_dir_sorted(dir: &Path) -> Result<Vec<fs::DirEntry>> {
    let mut entries = fs::read_dir(dir)
        .map_err(|e| TablesError::io(dir, e))?
        .collect::<std::io::Result<Vec<_>>>()
        .map_err(|e| TablesError::io(dir, e))?;
    entries.sort_by_key(|e| e.file_name());
    Ok(entries)
}

/// Directories below `dir` (inclusive, up to `depth` levels) that hold `systems/data`.
fn find_roots(dir: &Path, depth: usize) -> Result<Vec<PathBuf>> {
    if dir.join("systems").join("data").is_dir() {
        return Ok(vec![dir.to_path_buf()]);
    }
    if depth == 0 {
        return Ok(Vec::new());
    }
    let mut found = Vec::new();
    for entry in read_dir_sorted(dir)? {
        let path = entry.path();
        let name = entry.file_name();
        if path.is_dir() && !name.to_string_lossy().starts_with('.') {
            found.extend(find_roots(&path, depth - 1)?);
        }
    }
    Ok(found)
}

/// The release a root belongs to: the fetch step's marker beside or above
/// it, else an unpacked wheel's `*.dist-info` folder beside it.
fn release_of(root: &Path) -> Result<Release> {
    for dir in [Some(root), root.parent()].into_iter().flatten() {
        let marker = dir.join(RELEASE_MARKER);
        if marker.is_file() {
            let text = fs::read_to_string(&marker).map_err(|e| TablesError::io(&marker, e))?;
            let label = text.trim().to_string();
            if !label.contains("==") {
                return Err(TablesError::document(&marker, "expected `name==version`"));
            }
            return Ok(Release::published(label));
        }
    }
    if let Some(parent) = root.parent() {
        for entry in read_dir_sorted(parent)? {
            let name = entry.file_name().to_string_lossy().into_owned();
            if let Some(stem) = name.strip_suffix(".dist-info")
                && let Some((dist, version)) = stem.rsplit_once('-')
            {
                return Ok(Release::published(format!("{}=={version}", dist.replace('_', "-"))));
            }
        }
    }
    Ok(Release::local(root))
}

/// What one root's `systems/data` holds.
#[derive(Default)]
struct Listing {
    perf: Vec<PerfFile>,
    dirs: Vec<VersionDir>,
}

/// Version dirs are found as the spec finds them (4.2 step 2): a
/// first-level dir named like a backend is the legacy layout
/// (`<backend>/<version>`), any other is a family (`<family>/<backend>/<version>`).
/// Names starting with `.` are skipped, version names starting with `_` too.
fn list_perf_files(data_dir: &Path, root: usize) -> Result<Listing> {
    let mut out = Listing::default();
    for system in read_dir_sorted(data_dir)? {
        if !system.path().is_dir() {
            continue;
        }
        let system_name = system.file_name().to_string_lossy().into_owned();
        for first in subdirs(&system.path())? {
            if BACKEND_DIRS.contains(&first.0.as_str()) {
                for (version, path) in versions(&first.1)? {
                    list_version_dir(&system_name, &first.0, &version, None, root, path, &mut out)?;
                }
            } else {
                for (backend, backend_path) in subdirs(&first.1)? {
                    for (version, path) in versions(&backend_path)? {
                        list_version_dir(&system_name, &backend, &version, Some(&first.0), root, path, &mut out)?;
                    }
                }
            }
        }
    }
    Ok(out)
}

/// Sub-directories of `dir` not starting with `.`, in name order.
fn subdirs(dir: &Path) -> Result<Vec<(String, PathBuf)>> {
    Ok(read_dir_sorted(dir)?
        .into_iter()
        .map(|e| (e.file_name().to_string_lossy().into_owned(), e.path()))
        .filter(|(name, path)| !name.starts_with('.') && path.is_dir())
        .collect())
}

fn versions(dir: &Path) -> Result<Vec<(String, PathBuf)>> {
    Ok(subdirs(dir)?.into_iter().filter(|(name, _)| !name.starts_with('_')).collect())
}

fn list_version_dir(
    system: &str,
    backend: &str,
    version: &str,
    family: Option<&str>,
    root: usize,
    path: PathBuf,
    out: &mut Listing,
) -> Result<()> {
    let dir = VersionDir::read(system, backend, version, family, root, path)?;
    // A broken sidecar fails whatever uses the system, naming the file; the
    // files are listed regardless.
    let partial_dir = dir.is_partial().unwrap_or(false);
    for entry in read_dir_sorted(&dir.path)? {
        let name = entry.file_name().to_string_lossy().into_owned();
        // A perf-table name is a perf file whatever it is on disk: one that
        // cannot be read as a file fails when it is loaded, naming itself,
        // instead of making its database look like it has no such table.
        let Some(table) = name.strip_suffix("_perf.parquet") else {
            continue;
        };
        out.perf.push(PerfFile {
            system: system.to_string(),
            backend: backend.to_string(),
            version: version.to_string(),
            table: table.to_string(),
            family: family.map(str::to_string),
            layout: if family.is_some() { Layout::Family } else { Layout::Legacy },
            root,
            path: entry.path(),
            shadowed: Vec::new(),
            partial_dir,
        });
    }
    out.dirs.push(dir);
    Ok(())
}

fn collect_docs(
    dir: &Path,
    root: usize,
    keep: impl Fn(&str) -> bool,
    into: &mut BTreeMap<String, DocFile>,
) -> Result<()> {
    if !dir.is_dir() {
        return Ok(());
    }
    for entry in read_dir_sorted(dir)? {
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = entry.path();
        if !path.is_file() || !keep(&name) {
            continue;
        }
        let stem = name.rsplit_once('.').map(|(s, _)| s.to_string()).unwrap_or(name.clone());
        into.entry(name).or_insert(DocFile { stem, root, path });
    }
    Ok(())
}

fn modified(dir: &Path) -> Option<std::time::SystemTime> {
    fs::metadata(dir).and_then(|m| m.modified()).ok()
}
