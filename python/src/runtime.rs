//! The module's own tokio runtime. Providers handed to datafusion-python run
//! their async work on it, so they never depend on the host having a reactor
//! running on the calling thread.

use std::sync::OnceLock;

use tokio::runtime::{Builder, Handle, Runtime};

static RUNTIME: OnceLock<Runtime> = OnceLock::new();

pub fn handle() -> Handle {
    RUNTIME
        .get_or_init(|| {
            Builder::new_multi_thread()
                .thread_name("aicsql")
                .enable_all()
                .build()
                // Only fails when the OS refuses threads; nothing can run then.
                .expect("aicsql: cannot start its tokio runtime")
        })
        .handle()
        .clone()
}
