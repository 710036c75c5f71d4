//! Errors of remote trees: each names the URL and says what to do.

use std::fmt;
use std::path::PathBuf;

use crate::manifest::ManifestError;

#[derive(Debug)]
pub enum RemoteError {
    /// The text is not a URL a data root can have.
    BadUrl {
        url: String,
        reason: String,
    },
    UnknownScheme {
        url: String,
        scheme: String,
    },
    /// A store option the store does not know, or a malformed one.
    BadOption {
        url: String,
        key: String,
        reason: String,
    },
    /// The store refused the request: no or wrong credentials.
    Unauthenticated {
        url: String,
        detail: String,
    },
    /// The credentials are valid but may not read the tree.
    AccessDenied {
        url: String,
        detail: String,
    },
    /// The bucket, the prefix or the manifest is not there.
    NotFound {
        url: String,
        detail: String,
    },
    /// The store did not answer in time (after the bounded retries).
    Unreachable {
        url: String,
        detail: String,
    },
    /// A downloaded file is not what the listing or manifest promised.
    Corrupt {
        url: String,
        path: String,
        reason: String,
    },
    /// A file was replaced between the listing and its download (its ETag
    /// no longer matched); the download was dropped.
    Changed {
        url: String,
        path: String,
    },
    /// Any other store failure.
    Store {
        url: String,
        detail: String,
    },
    /// The local mirror could not be written.
    Cache {
        path: PathBuf,
        what: &'static str,
        source: std::io::Error,
    },
    Manifest {
        url: String,
        source: ManifestError,
    },
}

impl fmt::Display for RemoteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RemoteError::BadUrl { url, reason } => write!(f, "data root '{url}' is not a valid URL: {reason}"),
            RemoteError::UnknownScheme { url, scheme } => write!(
                f,
                "data root '{url}': unknown scheme '{scheme}' (a data root is a local path, file://, s3://, gs://, http:// or https://)"
            ),
            RemoteError::BadOption { url, key, reason } => write!(f, "data root '{url}': option '{key}': {reason}"),
            RemoteError::Unauthenticated { url, detail } => write!(
                f,
                "data root '{url}': the store refused the credentials ({detail}); set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or GOOGLE_APPLICATION_CREDENTIALS), or give the options aws.access_key_id and aws.secret_access_key (--data-option in the shell, data_options in Python), or aws.skip_signature=true for a public bucket"
            ),
            RemoteError::AccessDenied { url, detail } => write!(
                f,
                "data root '{url}': access denied ({detail}); the credentials in use may not list or read this prefix: \
                 grant them list and read on it (on S3, s3:ListBucket on the bucket and s3:GetObject on the prefix) or give others"
            ),
            RemoteError::Changed { url, path } => write!(
                f,
                "data root '{url}': {path} changed while it was being mirrored (someone is writing the tree); \
                 nothing of it was kept and the mirror is not marked complete: run the command again"
            ),
            RemoteError::NotFound { url, detail } => {
                write!(f, "data root '{url}': not found ({detail}); check the bucket, the prefix and the region")
            }
            RemoteError::Unreachable { url, detail } => write!(
                f,
                "data root '{url}': the store did not answer ({detail}); check the endpoint and the network, or use the local mirror offline"
            ),
            RemoteError::Corrupt { url, path, reason } => write!(
                f,
                "data root '{url}': '{path}' arrived corrupt ({reason}); nothing of it was kept, run `aicsql data mirror {url}` again"
            ),
            RemoteError::Store { url, detail } => write!(f, "data root '{url}': {detail}"),
            RemoteError::Cache { path, what, source } => {
                write!(f, "cannot {what} the local mirror at {}: {source}", path.display())
            }
            RemoteError::Manifest { url, source } => write!(f, "data root '{url}': {source}"),
        }
    }
}

impl std::error::Error for RemoteError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RemoteError::Cache { source, .. } => Some(source),
            RemoteError::Manifest { source, .. } => Some(source),
            _ => None,
        }
    }
}

impl RemoteError {
    /// Sorts a store's error into what the user can act on.
    pub(crate) fn from_store(url: &str, e: object_store::Error) -> RemoteError {
        let url = url.to_string();
        let detail = e.to_string();
        match e {
            object_store::Error::NotFound { .. } => RemoteError::NotFound { url, detail },
            object_store::Error::PermissionDenied { .. } => RemoteError::AccessDenied { url, detail },
            object_store::Error::Unauthenticated { .. } => RemoteError::Unauthenticated { url, detail },
            object_store::Error::UnknownConfigurationKey { key, .. } => {
                RemoteError::BadOption { url, key, reason: "the store has no such option".into() }
            }
            _ => classify_text(url, detail),
        }
    }

    /// Whether the store could not be reached at all (so a complete mirror
    /// may stand in for it).
    pub fn is_unreachable(&self) -> bool {
        matches!(self, RemoteError::Unreachable { .. })
    }
}

/// Stores report several conditions only in their message (S3's error
/// codes, the HTTP client's connection and timeout errors).
fn classify_text(url: String, detail: String) -> RemoteError {
    let has = |needle: &str| detail.contains(needle);
    // Credential failures first: S3 answers them with 403 as well.
    if has("169.254.169.254") || has("latest/api/token") {
        // No key in the environment or the options: the store fell back to
        // the instance-metadata service, which is not there.
        RemoteError::Unauthenticated {
            url,
            detail: format!(
                "no credentials in the environment or the options, and no instance metadata service: {detail}"
            ),
        }
    } else if has("InvalidAccessKeyId")
        || has("SignatureDoesNotMatch")
        || has("ExpiredToken")
        || has("InvalidToken")
        || has("status 401")
        || has("401 Unauthorized")
    {
        RemoteError::Unauthenticated { url, detail }
    } else if has("NoSuchBucket") || has("404 Not Found") || has("status 404") {
        RemoteError::NotFound { url, detail }
    } else if has("AccessDenied") || has("403 Forbidden") || has("status 403") {
        RemoteError::AccessDenied { url, detail }
    } else if has("timed out")
        || has("timeout")
        || has("error sending request")
        || has("Connection refused")
        || has("dns error")
        || has("connect")
    {
        RemoteError::Unreachable { url, detail }
    } else {
        RemoteError::Store { url, detail }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// S3 answers bad credentials with 403 too: they must not read as
    /// access denied; the metadata-service fallback means no credentials.
    #[test]
    fn classifies_store_messages_by_what_the_user_can_do() {
        let kind = |detail: &str| match classify_text("s3://b/p/".into(), detail.into()) {
            RemoteError::Unauthenticated { .. } => "unauthenticated",
            RemoteError::AccessDenied { .. } => "denied",
            RemoteError::NotFound { .. } => "not found",
            RemoteError::Unreachable { .. } => "unreachable",
            _ => "other",
        };
        let cases = [
            ("403 Forbidden: <Code>InvalidAccessKeyId</Code>", "unauthenticated"),
            ("403 Forbidden: <Code>SignatureDoesNotMatch</Code>", "unauthenticated"),
            ("PUT http://169.254.169.254/latest/api/token - 403 Forbidden", "unauthenticated"),
            ("403 Forbidden: <Code>AccessDenied</Code>", "denied"),
            ("404 Not Found: <Code>NoSuchBucket</Code>", "not found"),
            ("HTTP error: error sending request", "unreachable"),
            ("operation timed out", "unreachable"),
            ("500 Internal Server Error", "other"),
        ];
        for (detail, expected) in cases {
            assert_eq!(kind(detail), expected, "{detail}");
        }
    }
}
