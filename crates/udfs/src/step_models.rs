//! The step models (or serving models) of one batch of a function: each
//! distinct (model, db) pair is resolved and built once, and consecutive
//! rows that share it skip even the lookup.

use aicsql_serving::{Server, ServingError};
use aicsql_tables::DataTree;
use aicsql_tables::step::{StepError, StepModel};
use datafusion::common::DataFusionError;

use crate::config::AicOptions;
use crate::database::resolve;
use crate::errors::step_error;

/// Why a (model, db) pair has no step model.
#[derive(Debug)]
pub(crate) enum NoModel {
    /// The query names what the data does not have (an unknown model or
    /// database), or the spec refuses it (an unsupported architecture).
    /// `reason` says why without naming the function, model or database.
    Refused { reason: String, error: DataFusionError },
    /// Unreadable or corrupt data, or a bug: an error wherever it shows.
    Broken(DataFusionError),
}

impl From<NoModel> for DataFusionError {
    fn from(e: NoModel) -> Self {
        match e {
            NoModel::Refused { error, .. } | NoModel::Broken(error) => error,
        }
    }
}

/// What a batch keeps per (model, db): a step model, or a serving model.
pub(crate) trait Built<'a>: Sized {
    fn build(
        tree: &'a DataTree,
        model: &str,
        system: &str,
        backend: &str,
        version: &str,
        shared: bool,
    ) -> Result<Self, ServingError>;
}

impl<'a> Built<'a> for StepModel<'a> {
    fn build(
        tree: &'a DataTree,
        model: &str,
        system: &str,
        backend: &str,
        version: &str,
        shared: bool,
    ) -> Result<Self, ServingError> {
        Ok(StepModel::new(tree, model, system, backend, version, shared)?)
    }
}

impl<'a> Built<'a> for Server<'a> {
    fn build(
        tree: &'a DataTree,
        model: &str,
        system: &str,
        backend: &str,
        version: &str,
        shared: bool,
    ) -> Result<Self, ServingError> {
        Server::new(tree, model, system, backend, version, shared)
    }
}

/// The models of one batch, resolved once per distinct (model, db) pair.
pub(crate) struct Models<'a, T = StepModel<'a>> {
    function: &'static str,
    tree: &'a DataTree,
    options: &'a AicOptions,
    entries: Vec<(String, String, String, T)>,
    last: usize,
}

impl<'a, T: Built<'a>> Models<'a, T> {
    pub(crate) fn new(function: &'static str, tree: &'a DataTree, options: &'a AicOptions) -> Self {
        Self { function, tree, options, entries: Vec::new(), last: 0 }
    }

    /// The model for `(model, db)`, and the resolved database name.
    pub(crate) fn get(&mut self, model: &str, db: &str) -> Result<(&mut T, &str), NoModel> {
        let hit = |e: &(String, String, String, T)| e.0 == model && e.1 == db;
        let index = match self.entries.get(self.last).filter(|e| hit(e)) {
            Some(_) => self.last,
            None => match self.entries.iter().position(hit) {
                Some(i) => i,
                None => {
                    let function = self.function;
                    let database = resolve(function, self.tree, db, self.options).map_err(|e| match e {
                        DataFusionError::Execution(ref m) | DataFusionError::Plan(ref m) => {
                            let reason = m.strip_prefix(function).and_then(|r| r.strip_prefix(": ")).unwrap_or(m);
                            NoModel::Refused { reason: reason.to_string(), error: e }
                        }
                        e => NoModel::Broken(e),
                    })?;
                    let name = database.name();
                    let step = T::build(
                        self.tree,
                        model,
                        &database.system,
                        &database.backend,
                        &database.version,
                        self.options.shared_layer,
                    )
                    .map_err(|e| match e {
                        ServingError::Step(e @ StepError::Data(_)) => {
                            NoModel::Broken(step_error(function, model, &name, e))
                        }
                        ServingError::Step(e) => {
                            NoModel::Refused { reason: e.to_string(), error: step_error(function, model, &name, e) }
                        }
                        e => NoModel::Refused {
                            reason: e.to_string(),
                            error: DataFusionError::Execution(format!("{function}: {model} on {name}: {e}")),
                        },
                    })?;
                    self.entries.push((model.to_string(), db.to_string(), name, step));
                    self.entries.len() - 1
                }
            },
        };
        self.last = index;
        let entry = &mut self.entries[index];
        Ok((&mut entry.3, entry.2.as_str()))
    }
}
