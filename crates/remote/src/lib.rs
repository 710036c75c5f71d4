//! Perf-data trees that live somewhere else than a local directory.
//!
//! A remote tree is never read in place: it is mirrored into the local
//! cache and read like any local tree, so a scan does no network I/O per
//! query. HTTP has no listing, so an HTTP tree carries a manifest at its
//! root ([`MANIFEST_FILE`]) naming every file with its size and SHA-256;
//! `aicsql data manifest DIR` writes it ([`write_manifest`]).

mod error;
mod manifest;
mod mirror;
mod mount;
mod root;

pub use error::RemoteError;
pub use manifest::{MANIFEST_FILE, Manifest, ManifestEntry, ManifestError, read_manifest, write_manifest};
pub use mirror::{MirrorReport, complete_mirror, mirror, mirror_dir};
pub use mount::{mount_roots, summary};
pub use root::{DataRoot, RemoteTree, Scheme, parse_option};
