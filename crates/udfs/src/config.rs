//! Session settings in the `aic` namespace (`SET aic.on_miss = 'error'`).

use datafusion::common::config::ConfigExtension;
use datafusion::common::extensions_options;

extensions_options! {
    /// Settings of the aicsql estimators.
    pub struct AicOptions {
        /// Backend used when a database argument names only a system (`'h200_sxm'`).
        pub backend: String, default = String::new()
        /// Version used when a database argument names no version; `latest` is
        /// the newest (PEP 440) version that has the table.
        pub version: String, default = "latest".to_string()
        /// What a data miss returns: `null` (default) or `error`.
        pub on_miss: String, default = "null".to_string()
        /// Union a table with older versions of the same backend (the spec's
        /// default SILICON behaviour); false reads the database's own file only.
        pub shared_layer: bool, default = true
    }
}

impl ConfigExtension for AicOptions {
    const PREFIX: &'static str = "aic";
}
