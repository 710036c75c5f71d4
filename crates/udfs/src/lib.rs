//! aiconfigurator's estimators as DataFusion functions, one file per
//! function, over the `aicsql-tables` engine.

pub mod config;

pub use config::AicOptions;
