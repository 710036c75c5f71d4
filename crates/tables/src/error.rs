//! Errors of the data layer. Every error carries the file (or value) it is
//! about, because the user's next step is always "look at that file".
//!
//! Errors come in classes ([`ErrorClass`]) because callers must treat them
//! differently: only a [`ErrorClass::Miss`] (the data does not cover the
//! query, as the spec's `PerfDataNotAvailableError`) may become a NULL; a
//! name that matches nothing, a corrupt file or a bug must reach the user as
//! an error, never look like "no data".

use std::fmt;
use std::path::{Path, PathBuf};

/// What kind of failure an error is, for the caller's decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorClass {
    /// A name the user gave (database, model, system, table, directory) matches nothing mounted.
    NotFound,
    /// The data exists but does not cover the query (a database without that table).
    Miss,
    /// A value the user gave is not valid (an unknown quant mode, a shape out of range).
    Invalid,
    /// A file could not be read or does not say what it must.
    Corrupt,
    /// A bug in aicsql.
    Internal,
}

/// What went wrong, and where.
#[derive(Debug)]
pub enum TablesError {
    /// An I/O error on a file or directory.
    Io { path: PathBuf, source: std::io::Error },
    /// A parquet file that could not be opened or decoded.
    Parquet { path: PathBuf, message: String },
    /// A YAML / JSON / CSV document that does not say what we need.
    Document { path: PathBuf, message: String },
    /// A table file whose contents are wrong: the column and row where known.
    Corrupt { path: PathBuf, column: Option<String>, row: Option<usize>, message: String },
    /// A data directory that holds no aiconfigurator data.
    NoData { path: PathBuf, message: String },
    /// A name that matches nothing mounted; the message lists what is available.
    NotFound(String),
    /// A database that exists but holds no such table: lookups on it miss.
    Missing(String),
    /// A value given by the user that is not valid; the message lists the valid ones.
    Invalid(String),
    /// A broken invariant of aicsql itself.
    Internal(String),
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

    /// A wrong value in a table file, at `column` of `row` (0-based, file order) where known.
    pub fn corrupt(
        path: impl AsRef<Path>,
        column: Option<&str>,
        row: Option<usize>,
        message: impl fmt::Display,
    ) -> Self {
        Self::Corrupt {
            path: path.as_ref().to_path_buf(),
            column: column.map(str::to_string),
            row,
            message: message.to_string(),
        }
    }

    pub fn class(&self) -> ErrorClass {
        match self {
            Self::Io { .. } | Self::Parquet { .. } | Self::Document { .. } | Self::Corrupt { .. } => {
                ErrorClass::Corrupt
            }
            Self::NoData { .. } | Self::NotFound(_) => ErrorClass::NotFound,
            Self::Missing(_) => ErrorClass::Miss,
            Self::Invalid(_) => ErrorClass::Invalid,
            Self::Internal(_) => ErrorClass::Internal,
        }
    }

    /// The file the error is about, if it is about one.
    pub fn path(&self) -> Option<&Path> {
        match self {
            Self::Io { path, .. }
            | Self::Parquet { path, .. }
            | Self::Document { path, .. }
            | Self::Corrupt { path, .. }
            | Self::NoData { path, .. } => Some(path),
            _ => None,
        }
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
            Self::Corrupt { path, column, row, message } => {
                write!(f, "corrupt data in {}", path.display())?;
                if let Some(row) = row {
                    write!(f, ", row {row}")?;
                }
                if let Some(column) = column {
                    write!(f, ", column `{column}`")?;
                }
                write!(f, ": {message}")
            }
            Self::NoData { path, message } => write!(f, "{}: {message}", path.display()),
            Self::NotFound(message) | Self::Missing(message) | Self::Invalid(message) => f.write_str(message),
            Self::Internal(message) => write!(f, "internal error (a bug in aicsql, please report it): {message}"),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn corrupt_names_file_row_and_column() {
        let e = TablesError::corrupt("/d/gemm_perf.parquet", Some("latency"), Some(7), "NaN");
        assert_eq!(e.to_string(), "corrupt data in /d/gemm_perf.parquet, row 7, column `latency`: NaN");
        assert_eq!(e.class(), ErrorClass::Corrupt);
        assert_eq!(e.path(), Some(Path::new("/d/gemm_perf.parquet")));
    }

    #[test]
    fn only_a_missing_table_is_a_miss() {
        let classes = [
            TablesError::NotFound("unknown database 'x/y/z'".into()).class(),
            TablesError::Missing("database 'a/b/c' has no moe table".into()).class(),
            TablesError::Invalid("unknown GEMM quant mode 'q'".into()).class(),
            TablesError::Internal("cache".into()).class(),
            TablesError::document("/s.yaml", "bad").class(),
        ];
        assert_eq!(
            classes,
            [ErrorClass::NotFound, ErrorClass::Miss, ErrorClass::Invalid, ErrorClass::Internal, ErrorClass::Corrupt]
        );
        assert!(TablesError::Internal("x".into()).to_string().contains("a bug in aicsql"));
    }
}
