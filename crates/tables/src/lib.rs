//! The data layer of aicsql: finding and loading aiconfigurator's published
//! perf data (both directory layouts, several releases at once), system
//! constants and model configs, and the estimators over them. No DataFusion
//! here; the catalog and the SQL functions are thin adapters over this crate.

pub mod cache;
mod columns;
pub mod discovery;
pub mod error;
pub mod gemm;
pub mod grid;
pub mod kernels;
pub mod limits;
pub mod model;
pub mod modes;
pub mod op_sol;
mod parquet_io;
pub mod pep440;
pub mod pymath;
pub mod quant;
pub mod sol;
pub mod sources;
pub mod step;
pub mod support_matrix;
pub mod system;
#[cfg(test)]
mod test_data;
#[cfg(test)]
mod test_rng;
pub mod version_dirs;

pub use cache::{CacheStats, TableCache};
pub use discovery::{DataRoot, DataTree, DocFile, Layout, PerfFile, RELEASE_MARKER, Release};
pub use error::{Result, TablesError};
pub use gemm::{GemmMiss, GemmPlan, GemmSource, GemmTable, SourceRole, TraceStage, TraceStep};
pub use model::{ModelConfig, read_model_config};
pub use parquet::arrow::arrow_reader::ParquetRecordBatchReader as ParquetBatchReader;
pub use pep440::Version;
pub use quant::GemmQuant;
pub use sol::{GemmSol, MAX_GEMM_DIM};
pub use step::{
    EncoderRun, ImageTokens, Lookup, MemoryInputs, OpKind, OpRow, Phase, PhaseSums, Quants, RowKind, StepError,
    StepModel, StepQuery, StepReport, StepShape, Vision, WindowedKv, engine_step, step_latency,
};
pub use system::{Num, SystemSpec, read_system_yaml, system_spec};
