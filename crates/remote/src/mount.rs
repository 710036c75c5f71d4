//! From what a user writes after `--data` (or `data=` in Python) to the
//! local directories a [`DataTree`](../aicsql_tables/struct.DataTree.html)
//! mounts: local roots as given, remote ones mirrored into the cache first.
//! The shell, the Rust `SessionBuilder` and the Python package all go
//! through here, so a URL means the same thing in each.

use std::path::{Path, PathBuf};

use crate::error::RemoteError;
use crate::mirror::{MirrorReport, mirror};
use crate::root::{DataRoot, RemoteTree};

/// The local directories for `roots`, in the order given (the data tree's
/// newer-release-wins merge does not depend on it). Remote roots get the
/// store `options` (`aws.region=...`); each is mirrored into `cache` and
/// summarised through `log` in one line. Nothing is mirrored until every
/// root has parsed, so a typo in the third root costs no download of the
/// first.
pub async fn mount_roots<S: AsRef<str>>(
    roots: &[S],
    options: &[(String, String)],
    cache: &Path,
    log: &mut (dyn FnMut(&str) + Send),
) -> Result<Vec<PathBuf>, RemoteError> {
    let parsed = roots.iter().map(|r| DataRoot::parse(r.as_ref(), options)).collect::<Result<Vec<_>, _>>()?;
    let mut dirs = Vec::with_capacity(parsed.len());
    for root in parsed {
        match root {
            DataRoot::Local(dir) => dirs.push(dir),
            DataRoot::Remote(tree) => {
                let report = mirror(&tree, cache, log).await?;
                if !report.offline {
                    log(&summary(&tree, &report));
                }
                dirs.push(report.dir);
            }
        }
    }
    Ok(dirs)
}

/// `s3://b/p/: 1356 files (100.1 MB), 3 fetched (0.2 MB), 0 removed, in 0.4 s; mirror at ...`
pub fn summary(tree: &RemoteTree, report: &MirrorReport) -> String {
    format!(
        "{}: {} files ({:.1} MB), {} fetched ({:.1} MB), {} removed, in {:.1} s; mirror at {}",
        tree.url(),
        report.files,
        report.bytes as f64 / 1e6,
        report.downloaded,
        report.bytes_downloaded as f64 / 1e6,
        report.removed,
        report.elapsed.as_secs_f64(),
        report.dir.display()
    )
}
