//! How many threads one call's searches may use.
//!
//! A search runs its layouts (a table function) or its rows (`search_best`)
//! on the session's partitions' worth of threads: on one machine the session
//! owns the cores. An executor of a cluster runs several tasks at once, and
//! each task's session carries the client's partition count (16 or more), so
//! the executor caps every search of its process to its own share of cores.

use std::sync::atomic::{AtomicUsize, Ordering};

use datafusion::config::ConfigOptions;

static CAP: AtomicUsize = AtomicUsize::new(usize::MAX);

/// Caps the threads of every search in this process at `threads` (at least 1).
pub fn cap_search_threads(threads: usize) {
    CAP.store(threads.max(1), Ordering::Relaxed);
}

/// The threads a search may use in a session with `config`:
/// `datafusion.execution.target_partitions`, within this process's cap.
pub(crate) fn search_threads(config: &ConfigOptions) -> usize {
    config.execution.target_partitions.min(CAP.load(Ordering::Relaxed)).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cap_bounds_the_sessions_partitions() {
        let mut config = ConfigOptions::new();
        config.execution.target_partitions = 16;
        assert_eq!(search_threads(&config), 16);
        cap_search_threads(2);
        assert_eq!(search_threads(&config), 2);
        config.execution.target_partitions = 1;
        assert_eq!(search_threads(&config), 1);
        cap_search_threads(0);
        config.execution.target_partitions = 16;
        assert_eq!(search_threads(&config), 1, "a cap of 0 means 1");
        cap_search_threads(usize::MAX);
    }
}
