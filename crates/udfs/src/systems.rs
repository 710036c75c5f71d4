//! System constants by name, read once per process and tree.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use datafusion::common::{DataFusionError, Result};

use crate::errors::tables_error;

use aicsql_tables::{DataTree, SystemSpec, system_spec};

/// Parsed `systems/<system>.yaml` files, keyed by system name.
#[derive(Debug, Default)]
pub struct SystemSpecs {
    specs: Mutex<HashMap<String, Arc<SystemSpec>>>,
}

impl SystemSpecs {
    pub fn get(&self, function: &str, tree: &DataTree, system: &str) -> Result<Arc<SystemSpec>> {
        let lock_err = || DataFusionError::Internal(format!("{function}: system cache lock poisoned"));
        if let Some(spec) = self.specs.lock().map_err(|_| lock_err())?.get(system) {
            return Ok(Arc::clone(spec));
        }
        let (spec, _) = system_spec(tree, system).map_err(|e| tables_error(function, e))?;
        let spec = Arc::new(spec);
        self.specs.lock().map_err(|_| lock_err())?.insert(system.to_string(), Arc::clone(&spec));
        Ok(spec)
    }
}
