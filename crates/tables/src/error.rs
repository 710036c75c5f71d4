//! Errors of the data layer. Every error carries the file (or value) it is
//! about, because the user's next step is always "look at that file".

use std::fmt;
use std::path::{Path, PathBuf};

/// What went wrong, and where.
#[derive(Debug)]
pub enum TablesError {
    /// An I/O error on a file or directory.
    Io { path: PathBuf, source: std::io::Error },
    /// A parquet file that could not be opened or decoded.
    Parquet { path: PathBuf, message: String },
    /// A YAML / JSON / CSV document that does not say what we need.
    Document { path: PathBuf, message: String },
    /// A data directory that holds no aiconfigurator data.
    NoData { path: PathBuf, message: String },
    /// A value given by the user that names nothing we know.
    InvalidInput(String),
}

impl TablesError {
    pub fn io(path: impl AsRef<Path>, source: std::io::Error) -> Self {
        Self::Io { path: path.as_ref().to_path_buf(), source }
    }

    pub fn parquet(path: impl AsRef<Path>, message: impl fmt::Display) -> Self {
        Self::Parquet { path: path.as_ref().to_path_buf(), message: message.to_string() }
    }

    pub fn document(path: impl AsRef<Path>, message: impl fmt::Display) -> Self {
        Self::Document { path: path.as_ref().to_path_buf(), message: message.to_string() }
    }
}

impl fmt::Display for TablesError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Io { path, source } => write!(f, "{}: {source}", path.display()),
            Self::Parquet { path, message } => {
                write!(f, "cannot read parquet file {}: {message}", path.display())
            }
            Self::Document { path, message } => write!(f, "{}: {message}", path.display()),
            Self::NoData { path, message } => write!(f, "{}: {message}", path.display()),
            Self::InvalidInput(message) => f.write_str(message),
        }
    }
}

impl std::error::Error for TablesError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

pub type Result<T, E = TablesError> = std::result::Result<T, E>;
