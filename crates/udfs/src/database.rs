//! Resolving a database argument (`'system/backend/version'`, or a prefix
//! completed from `aic.backend` / `aic.version`) against what is mounted.

use datafusion::common::{DataFusionError, Result};

use aicsql_tables::DataTree;

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

/// Completes and checks `arg` against the spec's databases
/// (docs/spec/families_hybrid_vl_databases.md 4.2): a system, backend and
/// version that one of the version's dirs declares. Whether the database
/// has a given table is the table loader's question (its own file, or the
/// shared layer's donors and older versions). `latest` is the spec's
/// latest version of the backend (its own version key; versions served only
/// by the shared layer do not count). Errors name the argument and list
/// what exists.
pub fn resolve(function: &str, tree: &DataTree, arg: &str, options: &AicOptions) -> Result<Database> {
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
    let set = tree.databases();
    let entries = set.entries();
    if system.is_empty() || !entries.iter().any(|e| e.system == system) {
        set.check_system(system).map_err(|e| tables_error(function, e))?;
        let mut systems: Vec<&str> = entries.iter().map(|e| e.system.as_str()).collect();
        systems.dedup();
        return Err(invalid(
            function,
            format!("unknown system '{system}' in database '{arg}'; systems: {}", systems.join(", ")),
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
    let versions = || entries.iter().filter(|e| e.system == system && e.backend == backend);
    if versions().next().is_none() {
        let mut backends: Vec<&str> =
            entries.iter().filter(|e| e.system == system).map(|e| e.backend.as_str()).collect();
        backends.dedup();
        return Err(invalid(
            function,
            format!("no backend '{backend}' on {system} (database '{arg}'); backends: {}", backends.join(", ")),
        ));
    }
    let wanted = version.unwrap_or(options.version.as_str());
    let found = if wanted == "latest" {
        set.latest(system, backend).map_err(|e| tables_error(function, e))?
    } else {
        set.get(system, backend, wanted).map_err(|e| tables_error(function, e))?
    };
    let Some(entry) = found else {
        let listed: Vec<String> = versions()
            .map(|e| if e.marker_only { format!("{} (shared layer only)", e.version) } else { e.version.clone() })
            .collect();
        let what = if wanted == "latest" {
            "no latest version (every version is served by the shared layer only)".to_string()
        } else {
            format!("no database {system}/{backend}/{wanted}")
        };
        return Err(invalid(function, format!("{what} (database '{arg}'); versions: {}", listed.join(", "))));
    };
    Ok(Database { system: entry.system.clone(), backend: entry.backend.clone(), version: entry.version.clone() })
}

fn invalid(function: &str, message: String) -> DataFusionError {
    DataFusionError::Execution(format!("{function}: {message}"))
}
