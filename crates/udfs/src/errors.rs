//! Turning data-layer errors into the function's error: every message starts
//! with the function's name, and a broken invariant of aicsql is reported as
//! an internal error (DataFusion's "this is a bug" class), never as the
//! user's fault and never as a NULL.

use datafusion::common::DataFusionError;

use aicsql_serving::ServingError;
use aicsql_tables::error::{ErrorClass, TablesError};
use aicsql_tables::step::StepError;

/// `e` as `function`'s error.
pub fn tables_error(function: &str, e: TablesError) -> DataFusionError {
    match e.class() {
        ErrorClass::Internal => DataFusionError::Internal(format!("{function}: {e}")),
        _ => DataFusionError::Execution(format!("{function}: {e}")),
    }
}

/// A step error of `model` on `db` as `function`'s error (misses are
/// handled by the caller, under `aic.on_miss`).
pub fn step_error(function: &str, model: &str, db: &str, error: StepError) -> DataFusionError {
    match error {
        StepError::Data(e) if e.class() == ErrorClass::Internal => {
            DataFusionError::Internal(format!("{function}: {model} on {db}: {e}"))
        }
        other => DataFusionError::Execution(format!("{function}: {model} on {db}: {other}")),
    }
}

/// A serving error of `model` on `db` as `function`'s error (misses and
/// OOMs are handled by the caller, under `aic.on_miss`).
pub fn serving_error(function: &str, model: &str, db: &str, error: ServingError) -> DataFusionError {
    match error {
        ServingError::Step(e) => step_error(function, model, db, e),
        other => DataFusionError::Execution(format!("{function}: {model} on {db}: {other}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bugs_are_internal_and_everything_names_the_function() {
        let bug = tables_error("gemm_latency", TablesError::Internal("cache holds another type".into()));
        assert!(matches!(bug, DataFusionError::Internal(ref m) if m.starts_with("gemm_latency: ")), "{bug}");
        let corrupt = tables_error("gemm_latency", TablesError::corrupt("/x.parquet", Some("m"), Some(3), "bad"));
        assert!(matches!(corrupt, DataFusionError::Execution(ref m) if m.contains("/x.parquet")), "{corrupt}");
        let step = step_error("step_latency", "Org/M", "a/b/c", StepError::Data(TablesError::Internal("x".into())));
        assert!(matches!(step, DataFusionError::Internal(ref m) if m.starts_with("step_latency: Org/M on a/b/c")));
    }
}
