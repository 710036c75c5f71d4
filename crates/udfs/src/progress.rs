//! Progress of long function calls on a terminal: a search per row of a
//! support-matrix scan takes tens of milliseconds, thousands of them
//! minutes, so the shell turns this on when stderr is a terminal and the
//! call reports how far it is (one line, rewritten in place).

use std::io::Write;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

static ENABLED: AtomicBool = AtomicBool::new(false);

/// Whether calls report progress on stderr (off by default: libraries and
/// batch jobs stay quiet; the shell enables it on a terminal).
pub fn enable(on: bool) {
    ENABLED.store(on, Ordering::Relaxed);
}

/// Shown only for calls that last longer than this.
const QUIET_FOR: Duration = Duration::from_secs(1);
const EVERY: Duration = Duration::from_millis(250);

/// The progress of one call over `total` items, shared by its threads.
pub(crate) struct Progress {
    label: &'static str,
    total: usize,
    done: AtomicUsize,
    started: Instant,
    shown: Mutex<Option<Instant>>,
    on: bool,
}

impl Progress {
    pub(crate) fn new(label: &'static str, total: usize) -> Progress {
        Progress {
            label,
            total,
            done: AtomicUsize::new(0),
            started: Instant::now(),
            shown: Mutex::new(None),
            on: ENABLED.load(Ordering::Relaxed) && total > 1,
        }
    }

    /// One item done.
    pub(crate) fn tick(&self) {
        let done = self.done.fetch_add(1, Ordering::Relaxed) + 1;
        if !self.on || self.started.elapsed() < QUIET_FOR {
            return;
        }
        let Ok(mut shown) = self.shown.try_lock() else { return };
        if shown.is_some_and(|at| at.elapsed() < EVERY) && done < self.total {
            return;
        }
        *shown = Some(Instant::now());
        let elapsed = self.started.elapsed().as_secs_f64();
        let eta = elapsed / done as f64 * (self.total - done) as f64;
        let percent = 100.0 * done as f64 / self.total as f64;
        let mut err = std::io::stderr().lock();
        let _ = write!(
            err,
            "\r{}: {done} / {} ({percent:.0} %), {elapsed:.0} s, about {eta:.0} s left   ",
            self.label, self.total
        );
        let _ = err.flush();
    }

    /// Ends the line if one was shown.
    pub(crate) fn finish(&self) {
        if let Ok(shown) = self.shown.lock()
            && shown.is_some()
        {
            let elapsed = self.started.elapsed().as_secs_f64();
            eprintln!("\r{}: {} done in {elapsed:.1} s{:30}", self.label, self.total, "");
        }
    }
}
