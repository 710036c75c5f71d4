//! What can stop an estimate, in the classes a caller treats differently.

use std::fmt;

use aicsql_tables::StepError;

/// Why a deployment has no estimate.
#[derive(Debug)]
pub enum ServingError {
    /// A step of the estimate could not be priced: a perf-data miss, an
    /// input the spec refuses, or unreadable data (the step's own classes).
    /// A miss of any step is a miss of the estimate, never a smaller number.
    Step(StepError),
    /// The deployment does not fit in GPU memory (the spec's OOM error);
    /// the message is the spec's.
    OutOfMemory(String),
    /// The arguments describe no deployment the spec prices (a bad parallel
    /// string, a zero budget, a parallelism the serving layer does not cover).
    Input(String),
}

impl ServingError {
    pub(crate) fn input(message: impl Into<String>) -> ServingError {
        ServingError::Input(message.into())
    }

    /// A perf-data miss or an OOM: the spec's answer for this deployment is
    /// "no estimate", which SQL reports as NULL with a reason (or an error
    /// under `aic.on_miss = 'error'`), like a lookup miss.
    pub fn is_no_estimate(&self) -> bool {
        matches!(
            self,
            ServingError::OutOfMemory(_) | ServingError::Step(StepError::Miss { .. } | StepError::Refused(_))
        )
    }
}

impl From<StepError> for ServingError {
    fn from(e: StepError) -> Self {
        ServingError::Step(e)
    }
}

impl fmt::Display for ServingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ServingError::Step(e) => write!(f, "{e}"),
            ServingError::OutOfMemory(message) | ServingError::Input(message) => f.write_str(message),
        }
    }
}

impl std::error::Error for ServingError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ServingError::Step(e) => Some(e),
            _ => None,
        }
    }
}
