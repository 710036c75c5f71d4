//! What `--data` names: a local directory, or a remote tree by URL with the
//! options that reach its store.

use std::fmt;
use std::path::PathBuf;

use crate::error::RemoteError;

/// The schemes a remote tree may have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    S3,
    Gcs,
    /// `http://` and `https://`: no listing, a manifest instead.
    Http,
}

/// A data root as given: a local directory (a plain path or `file://`), or
/// a remote tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DataRoot {
    Local(PathBuf),
    Remote(RemoteTree),
}

/// A remote tree: its URL (normalised to end in `/`) and the store options
/// given with it (`aws.region`, `aws.endpoint`, ...; environment variables
/// are read by the store itself).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteTree {
    pub(crate) url: url::Url,
    pub(crate) scheme: Scheme,
    pub(crate) options: Vec<(String, String)>,
}

impl RemoteTree {
    pub fn url(&self) -> &str {
        self.url.as_str()
    }

    pub fn scheme(&self) -> Scheme {
        self.scheme
    }

    /// The bucket (S3, GCS) or host (HTTP).
    pub(crate) fn host(&self) -> &str {
        self.url.host_str().unwrap_or("")
    }

    /// The tree's prefix inside its bucket or under its host, without
    /// leading or trailing `/`.
    pub(crate) fn prefix(&self) -> &str {
        self.url.path().trim_matches('/')
    }
}

impl fmt::Display for RemoteTree {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.url.as_str())
    }
}

impl DataRoot {
    /// Parses what a user gave as a data root. `options` are `key=value`
    /// store options (the shell's `--data-option`), applied to every
    /// remote root.
    pub fn parse(text: &str, options: &[(String, String)]) -> Result<DataRoot, RemoteError> {
        let Some((scheme, _)) = text.split_once("://") else {
            return Ok(DataRoot::Local(PathBuf::from(text)));
        };
        let bad = |reason: String| RemoteError::BadUrl { url: text.to_string(), reason };
        let url = url::Url::parse(text).map_err(|e| bad(e.to_string()))?;
        let scheme = match scheme.to_ascii_lowercase().as_str() {
            "file" => {
                let path = url.to_file_path().map_err(|()| bad("not a local absolute path".into()))?;
                return Ok(DataRoot::Local(path));
            }
            "s3" | "s3a" => Scheme::S3,
            "gs" => Scheme::Gcs,
            "http" | "https" => Scheme::Http,
            other => {
                return Err(RemoteError::UnknownScheme { url: text.to_string(), scheme: other.to_string() });
            }
        };
        if url.host_str().is_none_or(str::is_empty) {
            let what = if scheme == Scheme::Http { "a host" } else { "a bucket" };
            return Err(bad(format!("the URL names no {what}")));
        }
        if url.query().is_some() || url.fragment().is_some() {
            return Err(bad("a data root takes no query or fragment (give store options with --data-option)".into()));
        }
        let mut url = url;
        if !url.path().ends_with('/') {
            let path = format!("{}/", url.path());
            url.set_path(&path);
        }
        for (key, _) in options {
            if !key.contains('.') {
                return Err(RemoteError::BadOption {
                    url: text.to_string(),
                    key: key.clone(),
                    reason: "store options are named like datafusion-cli's: aws.region, aws.endpoint, gcp.service_account_path, ...".into(),
                });
            }
        }
        Ok(DataRoot::Remote(RemoteTree { url, scheme, options: options.to_vec() }))
    }
}

/// Splits `key=value` (the shell's `--data-option`).
pub fn parse_option(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((key, value)) if !key.trim().is_empty() => Ok((key.trim().to_string(), value.to_string())),
        _ => Err(format!("'{text}' is not key=value (e.g. aws.region=us-east-1)")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn remote(text: &str) -> RemoteTree {
        match DataRoot::parse(text, &[]).unwrap() {
            DataRoot::Remote(tree) => tree,
            DataRoot::Local(p) => panic!("{text} parsed as local {}", p.display()),
        }
    }

    #[test]
    fn local_paths_and_file_urls() {
        assert_eq!(DataRoot::parse("data/systems", &[]).unwrap(), DataRoot::Local("data/systems".into()));
        assert_eq!(DataRoot::parse("file:///srv/aic", &[]).unwrap(), DataRoot::Local("/srv/aic".into()));
        let err = DataRoot::parse("file://host/srv", &[]).unwrap_err().to_string();
        assert!(err.contains("file://host/srv") && err.contains("local absolute path"), "{err}");
    }

    #[test]
    fn remote_urls_normalise_to_a_directory() {
        let t = remote("s3://team-perf/aic");
        assert_eq!(
            (t.url(), t.scheme(), t.host(), t.prefix()),
            ("s3://team-perf/aic/", Scheme::S3, "team-perf", "aic")
        );
        let t = remote("https://example.com/perf/tree/");
        assert_eq!((t.scheme(), t.host(), t.prefix()), (Scheme::Http, "example.com", "perf/tree"));
        let t = remote("gs://bucket");
        assert_eq!((t.scheme(), t.prefix()), (Scheme::Gcs, ""));
    }

    #[test]
    fn refuses_what_it_cannot_read() {
        let cases = [
            ("ftp://host/tree", "unknown scheme 'ftp'"),
            ("s3:///tree", "names no a bucket"),
            ("https://host/tree?x=1", "no query"),
            ("s3://bad bucket/x", "s3://bad bucket/x"),
        ];
        for (text, expected) in cases {
            let err = DataRoot::parse(text, &[]).unwrap_err().to_string();
            assert!(err.contains(expected) && err.contains(text.split('?').next().unwrap()), "{text}: {err}");
        }
        let err = DataRoot::parse("s3://b/t", &[("region".into(), "x".into())]).unwrap_err().to_string();
        assert!(err.contains("aws.region"), "{err}");
        assert_eq!(parse_option("aws.region=eu-west-1"), Ok(("aws.region".into(), "eu-west-1".into())));
        assert!(parse_option("aws.region").is_err());
    }
}
