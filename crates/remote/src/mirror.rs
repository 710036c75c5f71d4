//! Mirroring a remote tree into the local cache: list it (a store listing,
//! or the manifest over HTTP), download what changed (size and ETag, or
//! size and SHA-256), each file written beside its place and renamed into
//! it, files the tree no longer has removed. The mirror is marked complete
//! only after all of it holds; a refresh unmarks it first, so an
//! interrupted one leaves a mirror that is refreshed again, never read.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use object_store::path::Path as StorePath;
use object_store::{BackoffConfig, ClientConfigKey, GetOptions, ObjectStore, ObjectStoreExt, RetryConfig};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::RemoteError;
use crate::manifest::{MANIFEST_FILE, hex, read_manifest};
use crate::root::{RemoteTree, Scheme};

/// Files fetched side by side.
const PARALLEL_DOWNLOADS: usize = 8;
/// One request's limits; retries stop after `RETRIES` or `RETRY_WINDOW`.
const REQUEST_TIMEOUT: &str = "60s";
const CONNECT_TIMEOUT: &str = "5s";
const RETRIES: usize = 2;
const RETRY_WINDOW: Duration = Duration::from_secs(20);

/// Inside a mirror's directory: the files, what they were fetched as, and
/// the mark of a complete mirror (holding the URL).
const TREE_DIR: &str = "tree";
const STATE_FILE: &str = "mirror-state.json";
const COMPLETE_FILE: &str = "complete";

/// What a file was fetched as: its size and the store's version tag
/// (`etag:...`) or its digest (`sha256:...`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Stamp {
    size: u64,
    tag: String,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct State {
    url: String,
    files: BTreeMap<String, Stamp>,
}

/// One file of a listing.
struct Listed {
    path: String,
    location: StorePath,
    stamp: Stamp,
    /// The digest a download must have (HTTP trees).
    sha256: Option<String>,
    /// The listing's ETag (S3, GCS): the GET is conditional on it, so the
    /// bytes mirrored are the ones the recorded stamp describes even when
    /// the object is replaced between the listing and the download.
    etag: Option<String>,
}

/// What a mirror run did.
#[derive(Debug, Clone, PartialEq)]
pub struct MirrorReport {
    /// The local tree to read.
    pub dir: PathBuf,
    pub files: usize,
    pub bytes: u64,
    pub downloaded: usize,
    pub bytes_downloaded: u64,
    pub removed: usize,
    /// The store was unreachable and the complete mirror was used as it is.
    pub offline: bool,
    pub elapsed: Duration,
}

/// Where `tree` is mirrored under `cache`: a readable name plus a digest of
/// the whole URL (two prefixes of one bucket never share a mirror).
pub fn mirror_dir(cache: &Path, tree: &RemoteTree) -> PathBuf {
    let readable: String = format!("{}-{}", tree.host(), tree.prefix())
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '.' || c == '-' { c } else { '_' })
        .take(60)
        .collect();
    let digest = hex(&Sha256::digest(tree.url().as_bytes()));
    // A dot directory: mounting the cache itself never finds the mirrors.
    cache.join(".remote").join(format!("{readable}-{}", &digest[..12]))
}

/// The local tree of a complete mirror of `tree`, if there is one.
pub fn complete_mirror(cache: &Path, tree: &RemoteTree) -> Option<PathBuf> {
    let root = mirror_dir(cache, tree);
    let mark = std::fs::read_to_string(root.join(COMPLETE_FILE)).ok()?;
    (mark.trim() == tree.url()).then(|| root.join(TREE_DIR))
}

fn cache_error<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> RemoteError + 'a {
    move |source| RemoteError::Cache { path: path.to_path_buf(), what, source }
}

/// The store of `tree` and the tree's prefix in it.
fn open_store(tree: &RemoteTree) -> Result<(Arc<dyn ObjectStore>, StorePath), RemoteError> {
    let url = tree.url();
    let store_error = |e| RemoteError::from_store(url, e);
    let retry = RetryConfig { backoff: BackoffConfig::default(), max_retries: RETRIES, retry_timeout: RETRY_WINDOW };
    let given = |key: &str| tree.options.iter().any(|(k, _)| k.ends_with(key));
    let mut client: Vec<(ClientConfigKey, &str)> = Vec::new();
    if !given(".timeout") {
        client.push((ClientConfigKey::Timeout, REQUEST_TIMEOUT));
    }
    if !given(".connect_timeout") {
        client.push((ClientConfigKey::ConnectTimeout, CONNECT_TIMEOUT));
    }
    // datafusion-cli's option names (`aws.region`) are object_store's
    // (`aws_region`) with the dot.
    let key_of = |key: &str, ns: &str, prefix: &str| -> Result<String, RemoteError> {
        match key.strip_prefix(ns) {
            Some(rest) => Ok(format!("{prefix}{rest}")),
            None => Err(RemoteError::BadOption {
                url: url.to_string(),
                key: key.to_string(),
                reason: format!("this store takes {ns}* options"),
            }),
        }
    };
    let prefix = StorePath::parse(tree.prefix())
        .map_err(|e| RemoteError::BadUrl { url: url.to_string(), reason: e.to_string() })?;
    let store: Arc<dyn ObjectStore> = match tree.scheme {
        Scheme::S3 => {
            use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
            let mut b = AmazonS3Builder::from_env().with_url(url).with_retry(retry);
            for (key, value) in client {
                b = b.with_config(AmazonS3ConfigKey::Client(key), value);
            }
            for (key, value) in &tree.options {
                let name = key_of(key, "aws.", "aws_")?;
                let parsed: AmazonS3ConfigKey = name.parse().map_err(|_| RemoteError::BadOption {
                    url: url.to_string(),
                    key: key.clone(),
                    reason: "S3 has no such option".into(),
                })?;
                b = b.with_config(parsed, value);
            }
            Arc::new(b.build().map_err(store_error)?)
        }
        Scheme::Gcs => {
            use object_store::gcp::{GoogleCloudStorageBuilder, GoogleConfigKey};
            let mut b = GoogleCloudStorageBuilder::from_env().with_url(url).with_retry(retry);
            for (key, value) in client {
                b = b.with_config(GoogleConfigKey::Client(key), value);
            }
            for (key, value) in &tree.options {
                let name = key_of(key, "gcp.", "google_")?;
                let parsed: GoogleConfigKey = name.parse().map_err(|_| RemoteError::BadOption {
                    url: url.to_string(),
                    key: key.clone(),
                    reason: "GCS has no such option".into(),
                })?;
                b = b.with_config(parsed, value);
            }
            Arc::new(b.build().map_err(store_error)?)
        }
        Scheme::Http => {
            use object_store::http::HttpBuilder;
            // Paths are appended to the base as segments: no trailing `/`.
            let base = url.trim_end_matches('/');
            let mut b = HttpBuilder::new().with_url(base).with_retry(retry);
            for (key, value) in client {
                b = b.with_config(key, value);
            }
            if url.starts_with("http://") {
                b = b.with_config(ClientConfigKey::AllowHttp, "true");
            }
            if let Some((key, _)) = tree.options.first() {
                return Err(RemoteError::BadOption {
                    url: url.to_string(),
                    key: key.clone(),
                    reason: "an HTTP(S) tree takes no store options".into(),
                });
            }
            Arc::new(b.build().map_err(store_error)?)
        }
    };
    let prefix = if tree.scheme == Scheme::Http { StorePath::default() } else { prefix };
    Ok((store, prefix))
}

/// Every file of the tree.
async fn list(tree: &RemoteTree, store: &dyn ObjectStore, prefix: &StorePath) -> Result<Vec<Listed>, RemoteError> {
    let url = tree.url();
    if tree.scheme == Scheme::Http {
        let location = StorePath::from(MANIFEST_FILE);
        let got = store.get(&location).await.map_err(|e| RemoteError::from_store(url, e))?;
        let bytes = got.bytes().await.map_err(|e| RemoteError::from_store(url, e))?;
        let origin = PathBuf::from(format!("{url}{MANIFEST_FILE}"));
        let manifest =
            read_manifest(&bytes, &origin).map_err(|source| RemoteError::Manifest { url: url.to_string(), source })?;
        return Ok(manifest
            .files
            .into_iter()
            .map(|e| Listed {
                location: StorePath::from_iter(e.path.split('/')),
                stamp: Stamp { size: e.size, tag: format!("sha256:{}", e.sha256) },
                sha256: Some(e.sha256),
                etag: None,
                path: e.path,
            })
            .collect());
    }
    let metas: Vec<object_store::ObjectMeta> =
        store.list(Some(prefix)).try_collect().await.map_err(|e| RemoteError::from_store(url, e))?;
    let mut out = Vec::with_capacity(metas.len());
    for meta in metas {
        let Some(parts) = meta.location.prefix_match(prefix) else { continue };
        let path = parts.map(|p| p.as_ref().to_string()).collect::<Vec<_>>().join("/");
        if path.is_empty() || path.split('/').any(|p| p.starts_with('.')) {
            continue;
        }
        let tag = match &meta.e_tag {
            Some(etag) => format!("etag:{etag}"),
            None => format!("modified:{}", meta.last_modified.to_rfc3339()),
        };
        out.push(Listed {
            path,
            location: meta.location,
            stamp: Stamp { size: meta.size, tag },
            sha256: None,
            etag: meta.e_tag,
        });
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}

/// Downloads one file to `target`, through a hidden file beside it, checking
/// its size (and digest when the listing has one).
async fn download(url: &str, store: &dyn ObjectStore, file: &Listed, target: &Path) -> Result<u64, RemoteError> {
    let dir = target.parent().unwrap_or(Path::new("."));
    tokio::fs::create_dir_all(dir).await.map_err(cache_error("create", dir))?;
    let name = target.file_name().and_then(|n| n.to_str()).unwrap_or("file");
    let staging = dir.join(format!(".{name}.partial"));
    let result = async {
        let options = GetOptions { if_match: file.etag.clone(), ..GetOptions::default() };
        let got = store.get_opts(&file.location, options).await.map_err(|e| match e {
            object_store::Error::Precondition { .. } => {
                RemoteError::Changed { url: url.to_string(), path: file.path.clone() }
            }
            e => RemoteError::from_store(url, e),
        })?;
        let mut stream = got.into_stream();
        let mut out = std::fs::File::create(&staging).map_err(cache_error("write", &staging))?;
        let mut hasher = Sha256::new();
        let mut size = 0u64;
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| RemoteError::from_store(url, e))?;
            hasher.update(&chunk);
            size += chunk.len() as u64;
            out.write_all(&chunk).map_err(cache_error("write", &staging))?;
        }
        out.sync_all().map_err(cache_error("write", &staging))?;
        let corrupt = |reason: String| RemoteError::Corrupt { url: url.to_string(), path: file.path.clone(), reason };
        if size != file.stamp.size {
            return Err(corrupt(format!("{size} bytes, the listing says {}", file.stamp.size)));
        }
        if let Some(expected) = &file.sha256 {
            let got = hex(&hasher.finalize());
            if &got != expected {
                return Err(corrupt(format!("sha256 {got}, the manifest says {expected}")));
            }
        }
        std::fs::rename(&staging, target).map_err(cache_error("replace", target))?;
        Ok(size)
    }
    .await;
    if result.is_err() {
        let _ = std::fs::remove_file(&staging);
    }
    result
}

/// Brings the mirror of `tree` under `cache` up to date and returns where
/// it is. When the store cannot be reached and a complete mirror exists,
/// that mirror is used as it is (`offline`), with a warning through `log`.
pub async fn mirror(
    tree: &RemoteTree,
    cache: &Path,
    log: &mut (dyn FnMut(&str) + Send),
) -> Result<MirrorReport, RemoteError> {
    let started = Instant::now();
    let url = tree.url();
    let root = mirror_dir(cache, tree);
    let files_dir = root.join(TREE_DIR);
    let (store, prefix) = open_store(tree)?;
    let listing = match list(tree, store.as_ref(), &prefix).await {
        Ok(listing) => listing,
        Err(e) if e.is_unreachable() => {
            let Some(dir) = complete_mirror(cache, tree) else { return Err(e) };
            log(&format!("warning: {e}; using the complete mirror of {url} at {} as it is (offline)", dir.display()));
            let state = read_state(&root);
            return Ok(MirrorReport {
                dir,
                files: state.files.len(),
                bytes: state.files.values().map(|s| s.size).sum(),
                downloaded: 0,
                bytes_downloaded: 0,
                removed: 0,
                offline: true,
                elapsed: started.elapsed(),
            });
        }
        Err(e) => return Err(e),
    };
    if listing.is_empty() {
        return Err(RemoteError::NotFound { url: url.to_string(), detail: "the prefix holds no files".into() });
    }
    std::fs::create_dir_all(&files_dir).map_err(cache_error("create", &files_dir))?;
    let mut state = read_state(&root);
    if state.url != url {
        state = State { url: url.to_string(), files: BTreeMap::new() };
    }
    let local = |path: &str| files_dir.join(path);
    let changed: Vec<&Listed> = listing
        .iter()
        .filter(|f| {
            let on_disk = std::fs::metadata(local(&f.path)).map(|m| m.len()).ok();
            state.files.get(&f.path) != Some(&f.stamp) || on_disk != Some(f.stamp.size)
        })
        .collect();
    let listed: std::collections::BTreeSet<&str> = listing.iter().map(|f| f.path.as_str()).collect();
    let stale: Vec<String> = state.files.keys().filter(|p| !listed.contains(p.as_str())).cloned().collect();

    if !changed.is_empty() || !stale.is_empty() {
        // From here until the state is written the mirror is not complete.
        match std::fs::remove_file(root.join(COMPLETE_FILE)) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(RemoteError::Cache { path: root.join(COMPLETE_FILE), what: "unmark", source: e }),
        }
        let total = changed.len();
        log(&format!("mirroring {url}: {total} of {} files to fetch", listing.len()));
        let store_ref = store.as_ref();
        let fetched: Vec<(usize, u64)> = futures::stream::iter(changed.iter().enumerate())
            .map(|(i, f)| {
                let target = local(&f.path);
                async move { download(url, store_ref, f, &target).await.map(|size| (i, size)) }
            })
            .buffer_unordered(PARALLEL_DOWNLOADS)
            .try_collect()
            .await?;
        for (i, _) in &fetched {
            let f = changed[*i];
            state.files.insert(f.path.clone(), f.stamp.clone());
        }
        for path in &stale {
            let target = local(path);
            match std::fs::remove_file(&target) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(RemoteError::Cache { path: target, what: "remove from", source: e }),
            }
            state.files.remove(path);
        }
        write_state(&root, &state)?;
    }
    let bytes_downloaded = changed.iter().map(|f| f.stamp.size).sum();
    let mark = root.join(COMPLETE_FILE);
    if complete_mirror(cache, tree).is_none() {
        write_atomically(&root, COMPLETE_FILE, format!("{url}\n").as_bytes())
            .map_err(cache_error("mark complete", &mark))?;
    }
    Ok(MirrorReport {
        dir: files_dir,
        files: listing.len(),
        bytes: listing.iter().map(|f| f.stamp.size).sum(),
        downloaded: changed.len(),
        bytes_downloaded,
        removed: stale.len(),
        offline: false,
        elapsed: started.elapsed(),
    })
}

fn read_state(root: &Path) -> State {
    // A missing or unreadable state only means every file is fetched again.
    std::fs::read(root.join(STATE_FILE)).ok().and_then(|b| serde_json::from_slice(&b).ok()).unwrap_or_default()
}

fn write_state(root: &Path, state: &State) -> Result<(), RemoteError> {
    let path = root.join(STATE_FILE);
    let bytes = serde_json::to_vec_pretty(state).map_err(|e| RemoteError::Cache {
        path: path.clone(),
        what: "encode",
        source: std::io::Error::other(e),
    })?;
    write_atomically(root, STATE_FILE, &bytes).map_err(cache_error("write", &path))
}

fn write_atomically(dir: &Path, name: &str, bytes: &[u8]) -> std::io::Result<()> {
    let staging = dir.join(format!(".{name}.partial"));
    let mut out = std::fs::File::create(&staging)?;
    out.write_all(bytes)?;
    out.sync_all()?;
    std::fs::rename(&staging, dir.join(name))
}

#[cfg(test)]
mod tests {
    use object_store::memory::InMemory;
    use object_store::{PutPayload, PutResult};

    use super::*;

    async fn put(store: &InMemory, path: &str, bytes: &'static [u8]) -> PutResult {
        store.put(&StorePath::from(path), PutPayload::from_static(bytes)).await.unwrap()
    }

    fn listed(path: &str, size: u64, etag: Option<String>) -> Listed {
        let tag = format!("etag:{}", etag.clone().unwrap_or_default());
        Listed { path: path.into(), location: StorePath::from(path), stamp: Stamp { size, tag }, sha256: None, etag }
    }

    /// The GET is conditional on the listed ETag: the listed version lands,
    /// a version replaced since the listing is refused and leaves nothing.
    #[tokio::test]
    async fn a_file_replaced_after_the_listing_is_not_mirrored() {
        let store = InMemory::new();
        let dir = tempfile::tempdir().unwrap();
        let first = put(&store, "aic/a.txt", b"first").await;
        let target = dir.path().join("a.txt");
        let file = listed("aic/a.txt", 5, first.e_tag.clone());
        assert_eq!(download("mem://t/", &store, &file, &target).await.unwrap(), 5);
        assert_eq!(std::fs::read(&target).unwrap(), b"first");

        put(&store, "aic/a.txt", b"second").await;
        let stale = dir.path().join("b.txt");
        let err = download("mem://t/", &store, &file, &stale).await.unwrap_err();
        assert!(matches!(err, RemoteError::Changed { .. }), "{err}");
        assert!(err.to_string().contains("aic/a.txt changed while it was being mirrored"), "{err}");
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(left, vec![std::ffi::OsString::from("a.txt")], "no staging file, no b.txt");
    }
}
