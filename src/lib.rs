//! aicsql: SQL over aiconfigurator's published kernel-performance tables.
//!
//! [`SessionBuilder`] makes a DataFusion [`SessionContext`] with the `aic`
//! catalog, the `aic.*` settings and `information_schema`; the `aicsql`
//! binary drives it with the datafusion-cli library.

pub mod fetch;
pub mod reference;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use datafusion::arrow::record_batch::RecordBatch;
use datafusion::common::{DataFusionError, Result};
use datafusion::execution::runtime_env::RuntimeEnv;
use datafusion::prelude::{SessionConfig, SessionContext};
use datafusion::sql::parser::DFParser;
use datafusion::sql::sqlparser::dialect::dialect_from_str;

pub use aicsql_catalog::{AicCatalog, CATALOG_NAME};
pub use aicsql_tables::DataTree;
pub use aicsql_udfs::AicOptions;

/// Environment variable naming the data cache (default `~/.cache/aicsql`).
pub const DATA_ENV: &str = "AICSQL_DATA";

/// The data cache used when no `--data` is given: `$AICSQL_DATA`, else
/// `$XDG_CACHE_HOME/aicsql`, else `~/.cache/aicsql`.
pub fn default_data_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os(DATA_ENV).filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    if let Some(dir) = std::env::var_os("XDG_CACHE_HOME").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir).join("aicsql");
    }
    let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("."));
    home.join(".cache").join("aicsql")
}

/// Builds sessions over one mounted data tree.
#[derive(Debug, Clone)]
pub struct SessionBuilder {
    tree: Arc<DataTree>,
    config: SessionConfig,
    runtime: Option<Arc<RuntimeEnv>>,
}

impl SessionBuilder {
    /// Mounts the given data directories (see [`DataTree::open`]).
    pub fn open<P: AsRef<Path>>(data_dirs: &[P]) -> Result<Self> {
        let tree = DataTree::open(data_dirs).map_err(|e| DataFusionError::External(Box::new(e)))?;
        Ok(Self::with_tree(Arc::new(tree)))
    }

    /// Mounts data roots as the shell's `--data` takes them: local
    /// directories, `file://` URLs, and remote trees (`s3://bucket/prefix/`,
    /// `gs://...`, `https://host/prefix/` with its manifest), several at
    /// once with the same newer-release-wins merge. Remote trees are
    /// mirrored into the cache ([`default_data_dir`]) first, so queries do
    /// no network I/O; `options` are the store options given with them,
    /// named like datafusion-cli's (`aws.region`, `aws.endpoint`, ...),
    /// besides the standard `AWS_*` / `GOOGLE_*` environment. What the mirror
    /// did goes to the `log` crate (an offline mirror in use is a warning).
    pub async fn mount<S: AsRef<str>>(roots: &[S], options: &[(String, String)]) -> Result<Self> {
        let mut log = |line: &str| match line.strip_prefix("warning: ") {
            Some(warning) => log::warn!("{warning}"),
            None => log::info!("{line}"),
        };
        Self::mount_in(&default_data_dir(), roots, options, &mut log).await
    }

    /// [`Self::mount`] with the mirrors kept under `cache` and their
    /// one-line summaries (and offline warnings) given to `log`.
    pub async fn mount_in<S: AsRef<str>>(
        cache: &Path,
        roots: &[S],
        options: &[(String, String)],
        log: &mut (dyn FnMut(&str) + Send),
    ) -> Result<Self> {
        let dirs = aicsql_remote::mount_roots(roots, options, cache, log)
            .await
            .map_err(|e| DataFusionError::External(Box::new(e)))?;
        Self::open(&dirs)
    }

    /// Uses an already mounted tree (shared between sessions).
    pub fn with_tree(tree: Arc<DataTree>) -> Self {
        Self { tree, config: Self::default_config(), runtime: None }
    }

    /// The configuration every aicsql session starts from (see
    /// [`aicsql_udfs::session_config`]).
    pub fn default_config() -> SessionConfig {
        aicsql_udfs::session_config(SessionConfig::new())
    }

    /// Replaces the session configuration (the `aic` options and
    /// `information_schema` are added if missing, leaf-expression pushdown
    /// is turned off; see [`aicsql_udfs::session_config`]).
    pub fn config(mut self, config: SessionConfig) -> Self {
        self.config = aicsql_udfs::session_config(config);
        self
    }

    pub fn runtime(mut self, runtime: Arc<RuntimeEnv>) -> Self {
        self.runtime = Some(runtime);
        self
    }

    pub fn tree(&self) -> &Arc<DataTree> {
        &self.tree
    }

    /// A new session with the `aic` catalog registered.
    pub fn build(&self) -> SessionContext {
        let ctx = match &self.runtime {
            Some(rt) => SessionContext::new_with_config_rt(self.config.clone(), Arc::clone(rt)),
            None => SessionContext::new_with_config(self.config.clone()),
        };
        register(&ctx, Arc::clone(&self.tree));
        ctx
    }
}

/// Registers the `aic` catalog and the aicsql functions on an existing
/// session (the same registration every process of a cluster does).
pub fn register(ctx: &SessionContext, tree: Arc<DataTree>) {
    aicsql_cluster::register(ctx, &tree);
}

/// Runs every statement of `sql` in order in `ctx` (a query file holds
/// several: a `CREATE TABLE` the later ones read, then their SELECTs) and
/// returns each statement's rows. The first failure stops the run and names
/// the statement's place.
pub async fn run_statements(ctx: &SessionContext, sql: &str) -> Result<Vec<Vec<RecordBatch>>> {
    let dialect = ctx.state().config().options().sql_parser.dialect;
    let parser_dialect = dialect_from_str(dialect).ok_or_else(|| {
        DataFusionError::Plan(format!("unknown SQL dialect {dialect} (datafusion.sql_parser.dialect)"))
    })?;
    let statements = DFParser::parse_sql_with_dialect(sql, parser_dialect.as_ref())?;
    let count = statements.len();
    let mut results = Vec::with_capacity(count);
    for (i, statement) in statements.into_iter().enumerate() {
        let at = |e: DataFusionError| e.context(format!("statement {} of {count}", i + 1));
        let plan = ctx.state().statement_to_plan(statement).await.map_err(at)?;
        let frame = ctx.execute_logical_plan(plan).await.map_err(at)?;
        results.push(frame.collect().await.map_err(at)?);
    }
    Ok(results)
}
