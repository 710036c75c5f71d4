//! The process-wide cache of kernel tables: each (tree, table kind,
//! database, shared layer) is loaded once and then shared by every caller
//! and thread, like [`crate::gemm::GemmTable::cached`].

use std::any::Any;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use crate::discovery::DataTree;
use crate::error::{Result, TablesError};

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    roots: Vec<PathBuf>,
    kind: &'static str,
    system: String,
    backend: String,
    version: String,
    shared_layer: bool,
}

type Shared = Arc<dyn Any + Send + Sync>;

/// One slot per key. The map lock is held only to find the slot; the slot
/// lock is held while loading, so different tables load in parallel and
/// concurrent callers of the same key wait for the single load. Failed loads
/// are not cached: the next call retries (the data may have been fetched).
type Slot = Arc<Mutex<Option<Shared>>>;

fn slots() -> &'static Mutex<HashMap<Key, Slot>> {
    static SLOTS: OnceLock<Mutex<HashMap<Key, Slot>>> = OnceLock::new();
    SLOTS.get_or_init(Mutex::default)
}

/// The shared `T` for the key, produced by `load` on first use.
pub(crate) fn get<T: Send + Sync + 'static>(
    tree: &DataTree,
    kind: &'static str,
    db: (&str, &str, &str),
    shared_layer: bool,
    load: impl FnOnce() -> Result<T>,
) -> Result<Arc<T>> {
    let (system, backend, version) = db;
    let key = Key {
        roots: tree.roots().iter().map(|r| r.dir.clone()).collect(),
        kind,
        system: system.to_string(),
        backend: backend.to_string(),
        version: version.to_string(),
        shared_layer,
    };
    // A panic elsewhere while holding a lock leaves the data consistent
    // (slots are only ever filled with complete tables), so poisoning is ignored.
    let slot = Arc::clone(slots().lock().unwrap_or_else(PoisonError::into_inner).entry(key).or_default());
    let mut entry = slot.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(table) = entry.as_ref() {
        return Arc::clone(table)
            .downcast::<T>()
            .map_err(|_| TablesError::Internal(format!("table cache: `{kind}` holds another type")));
    }
    let loaded = Arc::new(load()?);
    *entry = Some(Arc::clone(&loaded) as Shared);
    Ok(loaded)
}
