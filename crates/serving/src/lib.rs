//! Serving estimates over the engine step, as aiconfigurator v0.11.0 prices
//! them: a deployment (a model on a database, a parallel layout, a batch
//! and a workload) served aggregated (in-flight batching) or disaggregated
//! (prefill and decode workers), with the memory it needs. Plain Rust over
//! `aicsql-tables`; the SQL functions are adapters over [`Server`].

mod agg;
mod backend;
mod disagg;
mod error;
mod images;
mod memory;
mod mtp;
mod parallel;
mod search;
mod server;

pub use agg::{AggEstimate, AggQuery, KvSizing};
pub use backend::Backend;
pub use disagg::{DisaggEstimate, DisaggQuery, WorkerEstimate};
pub use error::ServingError;
pub use images::{Images, MAX_IMAGE_SIDE, MAX_IMAGES};
pub use memory::Memory;
pub use mtp::{NextN, accepted_tokens};
pub use parallel::{Label, Parallel};
pub use search::{
    AggCandidate, BackendServers, Candidate, DefaultSearch, DisaggCandidate, Experiment, Experiments, LoadMatch,
    LoadTarget, MergedPicks, Mode, Outcome, Recommendation, Search, SearchQuery, Skipped, recommend_experiments,
    search_experiments,
};
pub use server::Server;
