//! The process-wide table cache: each (tree, database, quant, shared layer)
//! is loaded once and then shared by every caller and thread.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use crate::discovery::DataTree;
use crate::error::Result;
use crate::gemm::GemmTable;
use crate::quant::GemmQuant;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    roots: Vec<PathBuf>,
    system: String,
    backend: String,
    version: String,
    quant: GemmQuant,
    shared_layer: bool,
}

/// One slot per key. The map lock is held only to find the slot; the slot
/// lock is held while loading, so different tables load in parallel and
/// concurrent callers of the same key wait for the single load. Failed loads
/// are not cached: the next call retries (the data may have been fetched).
type Slot = Arc<Mutex<Option<Arc<GemmTable>>>>;

fn slots() -> &'static Mutex<HashMap<Key, Slot>> {
    static SLOTS: OnceLock<Mutex<HashMap<Key, Slot>>> = OnceLock::new();
    SLOTS.get_or_init(Mutex::default)
}

pub(super) fn get(
    tree: &DataTree,
    system: &str,
    backend: &str,
    version: &str,
    quant: GemmQuant,
    shared_layer: bool,
) -> Result<Arc<GemmTable>> {
    let key = Key {
        roots: tree.roots().iter().map(|r| r.dir.clone()).collect(),
        system: system.to_string(),
        backend: backend.to_string(),
        version: version.to_string(),
        quant,
        shared_layer,
    };
    // A panic elsewhere while holding a lock leaves the data consistent
    // (slots are only ever filled with complete tables), so poisoning is ignored.
    let slot = Arc::clone(slots().lock().unwrap_or_else(PoisonError::into_inner).entry(key).or_default());
    let mut table = slot.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(table) = table.as_ref() {
        return Ok(Arc::clone(table));
    }
    let loaded = Arc::new(GemmTable::load(tree, system, backend, version, quant, shared_layer)?);
    *table = Some(Arc::clone(&loaded));
    Ok(loaded)
}
