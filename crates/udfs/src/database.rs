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
    if backend == "auto" {
        return Err(invalid(
            function,
            format!(
                "backend 'auto' (every backend of the system, database '{arg}') is taken by search_default, which runs \
                 and names each backend's experiments; name one backend here, e.g. '{system}/vllm'"
            ),
        ));
    }
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

/// The database argument of a disaggregated deployment's decode role on
/// `decode_system` (the spec's `--decode-system`,
/// docs/spec/experiments.md 1.3): the prefill's backend; the prefill's
/// version when the call named one (in `arg` or `aic.version`), else
/// `latest`, the decode system's own, as each role of the spec's task
/// resolves `None`. `None` when `decode_system` is empty or the prefill's
/// system: the deployment is not heterogeneous.
pub fn decode_database_arg(arg: &str, prefill: &Database, decode_system: &str, options: &AicOptions) -> Option<String> {
    let decode_system = decode_system.trim();
    if decode_system.is_empty() || decode_system == prefill.system {
        return None;
    }
    let named = arg.split('/').nth(2).unwrap_or(options.version.as_str());
    let version = if named == "latest" { "latest" } else { prefill.version.as_str() };
    Some(format!("{decode_system}/{}/{version}", prefill.backend))
}

/// What an error about the decode role's database adds: which setting
/// named the system.
pub fn decode_system_note(decode_system: &str) -> String {
    format!(" (the decode workers' system, decode_system = '{}')", decode_system.trim())
}

/// An error about the decode role's database, saying so.
pub fn on_decode_system(e: DataFusionError, decode_system: &str) -> DataFusionError {
    let note = decode_system_note(decode_system);
    match e {
        DataFusionError::Execution(m) => DataFusionError::Execution(m + &note),
        DataFusionError::Plan(m) => DataFusionError::Plan(m + &note),
        e => e,
    }
}

impl Database {
    /// A resolved name, `system/backend/version`, back into its parts.
    pub fn from_name(name: &str) -> Option<Database> {
        let mut parts = name.splitn(3, '/');
        let (system, backend, version) = (parts.next()?, parts.next()?, parts.next()?);
        Some(Database { system: system.into(), backend: backend.into(), version: version.into() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_decode_role_keeps_a_named_version_and_resolves_latest_itself() {
        let prefill = Database { system: "h200_sxm".into(), backend: "vllm".into(), version: "0.24.0".into() };
        let o = AicOptions::default();
        let arg = |a: &str, d: &str, o: &AicOptions| decode_database_arg(a, &prefill, d, o);
        assert_eq!(arg("h200_sxm/vllm/0.24.0", "gb300", &o).as_deref(), Some("gb300/vllm/0.24.0"));
        assert_eq!(arg("h200_sxm/vllm", "gb300", &o).as_deref(), Some("gb300/vllm/latest"));
        assert_eq!(arg("h200_sxm/vllm/latest", " gb300 ", &o).as_deref(), Some("gb300/vllm/latest"));
        let pinned = AicOptions { version: "0.24.0".into(), ..AicOptions::default() };
        assert_eq!(arg("h200_sxm/vllm", "gb300", &pinned).as_deref(), Some("gb300/vllm/0.24.0"));
        assert_eq!(arg("h200_sxm/vllm/0.24.0", "", &o), None);
        assert_eq!(arg("h200_sxm/vllm/0.24.0", "h200_sxm", &o), None);
    }
}
