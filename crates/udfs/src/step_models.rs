//! The step models (or serving models) a function prices with: each
//! distinct (model, db) pair is resolved and built once, consecutive rows
//! that share it skip even the lookup, and the built models outlive the
//! batch. A function keeps a small pool of them, one set per concurrent
//! call, so the next batch finds its op lists, table handles and (serving)
//! priced passes warm: a query whose input arrives in many small batches
//! costs what one large batch costs.

use std::sync::{Arc, Mutex};

use aicsql_serving::{Server, ServingError};
use aicsql_tables::DataTree;
use aicsql_tables::step::{StepError, StepModel};

use crate::options::ModelOptions;
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

/// What a function keeps per (model, db, quant overrides): a step model,
/// or a serving model.
pub(crate) trait Built: Sized + Send {
    fn build(
        tree: &Arc<DataTree>,
        model: &str,
        database: (&str, &str, &str),
        shared: bool,
        options: ModelOptions,
    ) -> Result<Self, ServingError>;
}

impl Built for StepModel<'static> {
    fn build(
        tree: &Arc<DataTree>,
        model: &str,
        (system, backend, version): (&str, &str, &str),
        shared: bool,
        options: ModelOptions,
    ) -> Result<Self, ServingError> {
        let step = StepModel::shared(Arc::clone(tree), model, system, backend, version, shared)?
            .with_quant_overrides(options.quant)?;
        // A step takes no acceptance (the options refuse it for steps).
        let depth = options.nextn.resolve(step.checkpoint_nextn());
        Ok(step.with_nextn(depth)?)
    }
}

impl Built for Server<'static> {
    fn build(
        tree: &Arc<DataTree>,
        model: &str,
        (system, backend, version): (&str, &str, &str),
        shared: bool,
        options: ModelOptions,
    ) -> Result<Self, ServingError> {
        Server::shared(Arc::clone(tree), model, system, backend, version, shared)?
            .with_quant_overrides(options.quant)?
            .with_mtp(options.nextn, options.nextn_accepted)?
            .with_images(options.images)
    }
}

/// Distinct (model, db) pairs one set keeps before it starts over, and the
/// sets a pool keeps (about one per concurrent call): with a serving
/// model's memo of priced passes (~2 MiB at most) a pool stays below
/// 512 MiB however it is used, and typically holds a few MiB.
const MAX_MODELS: usize = 32;
const MAX_SETS: usize = 8;

/// The models of one call, resolved once per distinct (model, db) pair
/// under the call's settings.
pub(crate) struct Models<T> {
    function: &'static str,
    tree: Arc<DataTree>,
    options: AicOptions,
    entries: Vec<Entry<T>>,
    last: usize,
}

/// One built model: (model, db as given, its options, db resolved, model).
type Entry<T> = (String, String, ModelOptions, String, T);

impl<T: Built> Models<T> {
    /// The session's model options (a call without an options argument).
    pub(crate) fn session_options(&self) -> ModelOptions {
        ModelOptions {
            quant: self.options.quant,
            nextn: self.options.nextn,
            nextn_accepted: self.options.nextn_accepted,
            images: self.options.images,
        }
    }

    /// The model for `(model, db)` with the model options `options` (a row's options over
    /// the session's).
    pub(crate) fn get_with(&mut self, model: &str, db: &str, options: ModelOptions) -> Result<(&mut T, &str), NoModel> {
        let index = self.index(model, db, options)?;
        let entry = &mut self.entries[index];
        Ok((&mut entry.4, entry.3.as_str()))
    }

    /// The models of a disaggregated deployment's two roles: the prefill's
    /// for `(model, db)` and, when `decode_system` makes the deployment
    /// heterogeneous, the decode's on that system
    /// ([`crate::database::decode_database_arg`]); the prefill's resolved
    /// database name.
    pub(crate) fn get_roles(
        &mut self,
        model: &str,
        db: &str,
        decode_system: &str,
        options: ModelOptions,
    ) -> Result<(&mut T, &str, Option<&mut T>), NoModel> {
        let prefill = self.index(model, db, options)?;
        let decode_arg = crate::database::Database::from_name(&self.entries[prefill].3)
            .and_then(|resolved| crate::database::decode_database_arg(db, &resolved, decode_system, &self.options));
        let Some(decode_arg) = decode_arg else {
            let entry = &mut self.entries[prefill];
            return Ok((&mut entry.4, entry.3.as_str(), None));
        };
        let decode = self.index(model, &decode_arg, options).map_err(|e| match e {
            NoModel::Refused { reason, error } => NoModel::Refused {
                reason: format!("{reason}{}", crate::database::decode_system_note(decode_system)),
                error: crate::database::on_decode_system(error, decode_system),
            },
            broken => broken,
        })?;
        // Building the decode model may have started the set over.
        let prefill = if self.entries[..].get(prefill).is_some_and(|e| e.0 == model && e.1 == db && e.2 == options) {
            prefill
        } else {
            self.index(model, db, options)?
        };
        let [p, d] = self.entries.get_disjoint_mut([prefill, decode]).map_err(|_| {
            NoModel::Broken(DataFusionError::Internal(format!(
                "{}: the prefill and decode models of {model} share an entry ({db}, {decode_arg})",
                self.function
            )))
        })?;
        Ok((&mut p.4, p.3.as_str(), Some(&mut d.4)))
    }

    /// The entry of `(model, db, options)`, built if absent.
    fn index(&mut self, model: &str, db: &str, options: ModelOptions) -> Result<usize, NoModel> {
        let hit = |e: &Entry<T>| e.0 == model && e.1 == db && e.2 == options;
        let index = match self.entries.get(self.last).filter(|e| hit(e)) {
            Some(_) => self.last,
            None => match self.entries.iter().position(hit) {
                Some(i) => i,
                None => {
                    let function = self.function;
                    let database = resolve(function, &self.tree, db, &self.options).map_err(|e| match e {
                        DataFusionError::Execution(ref m) | DataFusionError::Plan(ref m) => {
                            let reason = m.strip_prefix(function).and_then(|r| r.strip_prefix(": ")).unwrap_or(m);
                            NoModel::Refused { reason: reason.to_string(), error: e }
                        }
                        e => NoModel::Broken(e),
                    })?;
                    let name = database.name();
                    let step = T::build(
                        &self.tree,
                        model,
                        (&database.system, &database.backend, &database.version),
                        self.options.shared_layer,
                        options,
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
                    if self.entries.len() >= MAX_MODELS {
                        self.entries.clear();
                    }
                    self.entries.push((model.to_string(), db.to_string(), options, name, step));
                    self.entries.len() - 1
                }
            },
        };
        self.last = index;
        Ok(index)
    }
}

/// A function's warm model sets. Calls take one (built under the same
/// settings, or a new one) and give it back when they finish, so
/// concurrent partitions never share a set.
pub(crate) struct ModelPool<T> {
    function: &'static str,
    sets: Mutex<Vec<Models<T>>>,
}

impl<T: Built> ModelPool<T> {
    pub(crate) fn new(function: &'static str) -> Self {
        Self { function, sets: Mutex::new(Vec::new()) }
    }

    /// A set for a call under `options`.
    pub(crate) fn take(&self, tree: &Arc<DataTree>, options: &AicOptions) -> Models<T> {
        let mut sets = self.sets.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        match sets.iter().rposition(|m| Arc::ptr_eq(&m.tree, tree) && m.options == *options) {
            Some(i) => sets.swap_remove(i),
            None => Models {
                function: self.function,
                tree: Arc::clone(tree),
                options: options.clone(),
                entries: Vec::new(),
                last: 0,
            },
        }
    }

    /// Returns a set after the call (a failed call's set too: what it
    /// built is still valid).
    pub(crate) fn give(&self, models: Models<T>) {
        let mut sets = self.sets.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if sets.len() >= MAX_SETS {
            sets.remove(0);
        }
        sets.push(models);
    }
}

impl<T> std::fmt::Debug for ModelPool<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelPool").field("function", &self.function).finish_non_exhaustive()
    }
}

/// A pool is a cache: two functions over the same tree are the same
/// function whatever their pools hold.
impl<T> PartialEq for ModelPool<T> {
    fn eq(&self, other: &Self) -> bool {
        self.function == other.function
    }
}

impl<T> Eq for ModelPool<T> {}

impl<T> std::hash::Hash for ModelPool<T> {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.function.hash(state);
    }
}
