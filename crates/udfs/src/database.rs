//! Resolving a database argument (`'system/backend/version'`, or a prefix
//! completed from `aic.backend` / `aic.version`) against what is mounted.

use datafusion::common::{DataFusionError, Result};

use aicsql_tables::sources::{TableFile, reuse_only_versions};
use aicsql_tables::{DataTree, discovery::cmp_version_names};

use crate::config::AicOptions;
use crate::errors::tables_error;

/// A fully named database.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Database {
    pub system: String,
    pub backend: String,
    pub version: String,
}

impl Database {
    pub fn name(&self) -> String {
        format!("{}/{}/{}", self.system, self.backend, self.version)
    }
}

/// Completes and checks `arg` for a table kind: the database must hold a
/// file of that kind, or declare the table in its `reuse.yaml` (then the
/// table loader serves it from the donors, or says why not with the shared
/// layer off). `latest` is the newest version with a file of its own, so a
/// version that only reuses is used when named. Errors name the argument and
/// list what exists.
pub fn resolve(function: &str, tree: &DataTree, file: &TableFile, arg: &str, options: &AicOptions) -> Result<Database> {
    let table = file.table;
    let parts: Vec<&str> = arg.split('/').collect();
    let (system, backend, version) = match parts.as_slice() {
        [s] => (*s, None, None),
        [s, b] => (*s, Some(*b), None),
        [s, b, v] => (*s, Some(*b), Some(*v)),
        _ => {
            return Err(invalid(
                function,
                format!(
                    "database '{arg}' is not of the form 'system/backend/version' (or 'system', 'system/backend' with aic.backend / aic.version set)"
                ),
            ));
        }
    };
    let with_table = || tree.perf_files().iter().filter(|f| f.table == table);
    if system.is_empty() || !with_table().any(|f| f.system == system) {
        let mut systems: Vec<&str> = with_table().map(|f| f.system.as_str()).collect();
        systems.dedup();
        return Err(invalid(
            function,
            format!(
                "unknown system '{system}' in database '{arg}'; systems with a {table} table: {}",
                systems.join(", ")
            ),
        ));
    }
    let backend = match backend {
        Some(b) => b,
        None if !options.backend.is_empty() => options.backend.as_str(),
        None => {
            return Err(invalid(
                function,
                format!("database '{arg}' names no backend; write '{system}/<backend>/<version>' or SET aic.backend"),
            ));
        }
    };
    let versions = || with_table().filter(|f| f.system == system && f.backend == backend).map(|f| f.version.as_str());
    if versions().next().is_none() {
        let mut backends: Vec<&str> = with_table().filter(|f| f.system == system).map(|f| f.backend.as_str()).collect();
        backends.sort();
        backends.dedup();
        return Err(invalid(
            function,
            format!(
                "no {table} table for backend '{backend}' on {system} (database '{arg}'); backends: {}",
                backends.join(", ")
            ),
        ));
    }
    let wanted = version.unwrap_or(options.version.as_str());
    let version = if wanted == "latest" {
        versions().max_by(|a, b| cmp_version_names(a, b)).unwrap_or_default()
    } else if versions().any(|v| v == wanted) {
        wanted
    } else {
        let reusing = reuse_only_versions(tree, file, system, backend).map_err(|e| tables_error(function, e))?;
        if reusing.iter().any(|v| v == wanted) {
            wanted
        } else {
            let mut listed: Vec<String> = versions().map(str::to_string).collect();
            listed.extend(reusing.iter().map(|v| format!("{v} (reuses)")));
            return Err(invalid(
                function,
                format!(
                    "no {table} table for {system}/{backend}/{wanted} (database '{arg}'); versions: {}",
                    listed.join(", ")
                ),
            ));
        }
    };
    Ok(Database { system: system.to_string(), backend: backend.to_string(), version: version.to_string() })
}

fn invalid(function: &str, message: String) -> DataFusionError {
    DataFusionError::Execution(format!("{function}: {message}"))
}
