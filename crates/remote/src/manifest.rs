//! `aicsql-manifest.json`: what an HTTP(S) data tree holds, so a mirror can
//! list it without a listing API and verify every byte it downloads.

use std::fmt;
use std::fs;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The manifest's file name, at the tree's root.
pub const MANIFEST_FILE: &str = "aicsql-manifest.json";

/// The format written; a reader refuses other versions by name.
const FORMAT_VERSION: u32 = 1;

/// One file of the tree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManifestEntry {
    /// Relative to the tree's root, `/`-separated.
    pub path: String,
    pub size: u64,
    /// Lowercase hex.
    pub sha256: String,
}

/// Every file of a tree but the manifest itself, by path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    pub version: u32,
    pub files: Vec<ManifestEntry>,
}

impl Manifest {
    /// The entry of `path`, if the tree has it.
    pub fn get(&self, path: &str) -> Option<&ManifestEntry> {
        self.files.binary_search_by(|e| e.path.as_str().cmp(path)).ok().map(|i| &self.files[i])
    }

    /// Total bytes of the tree's files.
    pub fn total_size(&self) -> u64 {
        self.files.iter().map(|e| e.size).sum()
    }

    /// Checks what a reader relies on: the version, relative `/`-separated
    /// paths that stay inside the tree, sorted without repeats, hex digests.
    pub fn validate(&self) -> Result<(), String> {
        if self.version != FORMAT_VERSION {
            return Err(format!("manifest version {} is not the supported version {FORMAT_VERSION}", self.version));
        }
        for (i, e) in self.files.iter().enumerate() {
            let bad_part = e.path.split('/').any(|p| p.is_empty() || p == "." || p == "..");
            if e.path.is_empty() || e.path.starts_with('/') || e.path.contains('\\') || bad_part {
                return Err(format!("entry {i}: path '{}' is not a relative path inside the tree", e.path));
            }
            if e.sha256.len() != 64 || !e.sha256.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
                return Err(format!("entry {i} ('{}'): sha256 '{}' is not 64 lowercase hex digits", e.path, e.sha256));
            }
            if i > 0 && self.files[i - 1].path >= e.path {
                return Err(format!("entry {i} ('{}'): paths are not sorted without repeats", e.path));
            }
        }
        Ok(())
    }
}

/// A manifest that could not be written or read, naming the file.
#[derive(Debug)]
pub enum ManifestError {
    Io { path: PathBuf, what: &'static str, source: io::Error },
    Invalid { path: PathBuf, reason: String },
}

impl fmt::Display for ManifestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ManifestError::Io { path, what, source } => write!(f, "cannot {what} {}: {source}", path.display()),
            ManifestError::Invalid { path, reason } => {
                write!(f, "{} is not a valid data-tree manifest: {reason}", path.display())
            }
        }
    }
}

impl std::error::Error for ManifestError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ManifestError::Io { source, .. } => Some(source),
            ManifestError::Invalid { .. } => None,
        }
    }
}

fn io_error<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> ManifestError + 'a {
    move |source| ManifestError::Io { path: path.to_path_buf(), what, source }
}

/// The SHA-256 of a file (lowercase hex) and its size, read in blocks.
pub(crate) fn file_digest(path: &Path) -> Result<(u64, String), ManifestError> {
    let mut file = fs::File::open(path).map_err(io_error("open", path))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    let mut size = 0u64;
    loop {
        let n = file.read(&mut buf).map_err(io_error("read", path))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        size += n as u64;
    }
    Ok((size, hex(&hasher.finalize())))
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        out.push(DIGITS[usize::from(b >> 4)] as char);
        out.push(DIGITS[usize::from(b & 15)] as char);
    }
    out
}

/// Every regular file under `dir` (symlinks followed), relative and
/// `/`-separated, sorted; the manifest itself and hidden names (temporary
/// files of an interrupted write start with a dot) are left out.
fn tree_files(root: &Path) -> Result<Vec<(String, PathBuf)>, ManifestError> {
    let mut out = Vec::new();
    let mut pending = vec![(String::new(), root.to_path_buf())];
    while let Some((prefix, dir)) = pending.pop() {
        for entry in fs::read_dir(&dir).map_err(io_error("list", &dir))? {
            let entry = entry.map_err(io_error("list", &dir))?;
            let name = entry.file_name();
            let Some(name) = name.to_str() else {
                return Err(ManifestError::Invalid {
                    path: entry.path(),
                    reason: "the file name is not UTF-8 (a manifest path must be)".into(),
                });
            };
            if name.starts_with('.') || (prefix.is_empty() && name == MANIFEST_FILE) {
                continue;
            }
            let path = entry.path();
            let relative = if prefix.is_empty() { name.to_string() } else { format!("{prefix}/{name}") };
            let meta = fs::metadata(&path).map_err(io_error("inspect", &path))?;
            if meta.is_dir() {
                pending.push((relative, path));
            } else if meta.is_file() {
                out.push((relative, path));
            }
        }
    }
    out.sort();
    Ok(out)
}

/// Writes `DIR/aicsql-manifest.json` for the tree at `dir` (atomically: a
/// reader sees the old manifest or the new one) and returns it.
pub fn write_manifest(dir: &Path) -> Result<Manifest, ManifestError> {
    let meta = fs::metadata(dir).map_err(io_error("open", dir))?;
    if !meta.is_dir() {
        return Err(ManifestError::Invalid { path: dir.to_path_buf(), reason: "not a directory".into() });
    }
    let mut files = Vec::new();
    for (relative, path) in tree_files(dir)? {
        let (size, sha256) = file_digest(&path)?;
        files.push(ManifestEntry { path: relative, size, sha256 });
    }
    let manifest = Manifest { version: FORMAT_VERSION, files };
    let target = dir.join(MANIFEST_FILE);
    let staging = dir.join(format!(".{MANIFEST_FILE}.partial"));
    let text = serde_json::to_vec_pretty(&manifest)
        .map_err(|e| ManifestError::Invalid { path: target.clone(), reason: format!("cannot encode: {e}") })?;
    let mut out = fs::File::create(&staging).map_err(io_error("create", &staging))?;
    out.write_all(&text)
        .and_then(|()| out.write_all(b"\n"))
        .and_then(|()| out.sync_all())
        .map_err(io_error("write", &staging))?;
    fs::rename(&staging, &target).map_err(io_error("replace", &target))?;
    Ok(manifest)
}

/// Parses and validates a manifest's bytes; `origin` names it in errors.
pub fn read_manifest(bytes: &[u8], origin: &Path) -> Result<Manifest, ManifestError> {
    let manifest: Manifest = serde_json::from_slice(bytes)
        .map_err(|e| ManifestError::Invalid { path: origin.to_path_buf(), reason: e.to_string() })?;
    manifest.validate().map_err(|reason| ManifestError::Invalid { path: origin.to_path_buf(), reason })?;
    Ok(manifest)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir_all(dir.path().join("systems/data/h200_sxm/vllm")).unwrap();
        fs::write(dir.path().join("systems/h200_sxm.yaml"), b"gpu: h200\n").unwrap();
        fs::write(dir.path().join("systems/data/h200_sxm/vllm/gemm_perf.parquet"), b"").unwrap();
        fs::write(dir.path().join("systems/data/h200_sxm/vllm/.gemm.partial"), b"half").unwrap();
        fs::write(dir.path().join("abc.txt"), b"abc").unwrap();
        dir
    }

    #[test]
    fn lists_every_file_sorted_with_size_and_digest() {
        let dir = tree();
        let m = write_manifest(dir.path()).unwrap();
        let paths: Vec<&str> = m.files.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(paths, ["abc.txt", "systems/data/h200_sxm/vllm/gemm_perf.parquet", "systems/h200_sxm.yaml"]);
        // FIPS 180-2's test vector for "abc", and the empty input's digest.
        let abc = m.get("abc.txt").unwrap();
        assert_eq!(
            (abc.size, abc.sha256.as_str()),
            (3, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        );
        let empty = m.get("systems/data/h200_sxm/vllm/gemm_perf.parquet").unwrap();
        assert_eq!(empty.sha256, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
        assert_eq!(m.total_size(), 3 + 10);
        assert!(m.get("missing").is_none());
    }

    #[test]
    fn round_trips_and_leaves_itself_out() {
        let dir = tree();
        let first = write_manifest(dir.path()).unwrap();
        // A second run sees the first manifest on disk and must not list it.
        let second = write_manifest(dir.path()).unwrap();
        assert_eq!(first, second);
        let on_disk = fs::read(dir.path().join(MANIFEST_FILE)).unwrap();
        assert_eq!(read_manifest(&on_disk, Path::new("m.json")).unwrap(), first);
        assert!(!dir.path().join(format!(".{MANIFEST_FILE}.partial")).exists());
    }

    #[test]
    fn refuses_what_a_reader_cannot_trust() {
        let entry = |path: &str, sha: &str| ManifestEntry { path: path.into(), size: 1, sha256: sha.into() };
        let good = "a".repeat(64);
        let cases = [
            (Manifest { version: 2, files: vec![] }, "version 2"),
            (Manifest { version: 1, files: vec![entry("../etc/passwd", &good)] }, "inside the tree"),
            (Manifest { version: 1, files: vec![entry("/abs", &good)] }, "inside the tree"),
            (Manifest { version: 1, files: vec![entry("a//b", &good)] }, "inside the tree"),
            (Manifest { version: 1, files: vec![entry("a", "ABC")] }, "64 lowercase hex"),
            (Manifest { version: 1, files: vec![entry("b", &good), entry("a", &good)] }, "not sorted"),
            (Manifest { version: 1, files: vec![entry("a", &good), entry("a", &good)] }, "not sorted"),
        ];
        for (manifest, expected) in cases {
            let bytes = serde_json::to_vec(&manifest).unwrap();
            let err =
                read_manifest(&bytes, Path::new("https://host/tree/aicsql-manifest.json")).unwrap_err().to_string();
            assert!(err.contains(expected) && err.contains("https://host/tree"), "{err}");
        }
        let err = read_manifest(b"{not json", Path::new("m.json")).unwrap_err().to_string();
        assert!(err.contains("m.json is not a valid data-tree manifest"), "{err}");
    }

    #[test]
    fn a_file_is_not_a_tree() {
        let dir = tree();
        let err = write_manifest(&dir.path().join("abc.txt")).unwrap_err().to_string();
        assert!(err.contains("not a directory"), "{err}");
        let err = write_manifest(&dir.path().join("nope")).unwrap_err().to_string();
        assert!(err.contains("cannot open"), "{err}");
    }
}
