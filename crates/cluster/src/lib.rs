//! aicsql on Apache Ballista: the same SQL, the same numbers, on a scheduler
//! and executors.
//!
//! * [`AicLogicalCodec`] / [`AicPhysicalCodec`] carry the `aic` catalog's
//!   tables, the perf scans and the table function calls as descriptions;
//!   each process rebuilds them over its own mount of the data.
//! * [`run_scheduler`] and [`run_executor`] start the two kinds of process
//!   with every aicsql function, table function, the catalog and the `aic.*`
//!   settings registered.
//! * [`connect`] makes a client session against a scheduler, [`standalone`]
//!   one with an in-process scheduler and executor.
//!
//! What is distributed: the partitions of the plan. A scan of a driving
//! table (parquet files, `aic.perf.*`) runs its partitions as tasks on the
//! executors, and every scalar function (`step_latency`, `estimate_agg`,
//! `search_best`, ...) runs where its partition runs. A table function call
//! (`search_agg(...)`, `engine_step(...)`) is one partition of its own,
//! computed on the executor that runs it; a `UNION ALL` of calls spreads
//! over the executors. What is not: the planning (the client resolves the
//! catalog and checks arguments) and the final collection of the rows.

mod codec;
mod fingerprint;
mod proto;

use std::net::SocketAddr;
use std::sync::Arc;

use datafusion::common::{DataFusionError, Result};
use datafusion::execution::SessionState;
use datafusion::prelude::{SessionConfig, SessionContext};

use ballista::extension::SessionContextExt;
use ballista_core::extension::SessionConfigExt;
use ballista_core::registry::BallistaFunctionRegistry;
use ballista_core::utils::default_session_builder;
use ballista_executor::executor_process::{ExecutorProcessConfig, start_executor_process};
use ballista_scheduler::cluster::BallistaCluster;
use ballista_scheduler::config::SchedulerConfig;
use ballista_scheduler::scheduler_process::start_server;

use aicsql_catalog::{AicCatalog, CATALOG_NAME, PerfScanPartitions};
use aicsql_tables::DataTree;

pub use codec::{AicLogicalCodec, AicPhysicalCodec, Mount};
pub use fingerprint::fingerprint;

/// The port a scheduler listens on unless told otherwise (Ballista's).
pub const DEFAULT_SCHEDULER_PORT: u16 = 50050;

/// The fewest partitions a client plans a query into (Ballista's default).
pub const CLIENT_TARGET_PARTITIONS: usize = 16;

/// The session configuration of every aicsql process of a cluster: aicsql's
/// own (see `aicsql_udfs::session_config`), Ballista's defaults, and the
/// codecs over `mount`.
///
/// Two settings keep the numbers right on Ballista 55, whose tasks each run
/// a slice of a stage's partitions by rewriting the leaves Ballista knows
/// (aicsql's perf scans and table calls are not among them, so they would
/// run whole in every task of their stage):
/// * perf scans are planned as one partition ([`PerfScanPartitions`]);
/// * Ballista's adaptive planner is off: its stages keep every branch of a
///   `UNION ALL` together, where the static planner gives a branch it cannot
///   slice a stage of its own (one task: one call, run once).
pub fn session_config(mount: &Arc<Mount>, base: SessionConfig) -> SessionConfig {
    aicsql_udfs::session_config(base.upgrade_for_ballista())
        .with_ballista_adaptive_query_planner(false)
        .with_extension(Arc::new(PerfScanPartitions(1)))
        .with_ballista_logical_extension_codec(Arc::new(AicLogicalCodec::new(Arc::clone(mount))))
        .with_ballista_physical_extension_codec(Arc::new(AicPhysicalCodec::new(Arc::clone(mount))))
}

/// Registers the `aic` catalog and every aicsql function on `ctx`.
pub fn register(ctx: &SessionContext, tree: &Arc<DataTree>) {
    ctx.register_catalog(CATALOG_NAME, Arc::new(AicCatalog::new(Arc::clone(tree))));
    aicsql_udfs::register_all(ctx, tree);
}

/// A scheduler's or executor's session state: Ballista's default state over
/// `config`, with the catalog and every aicsql function. The scheduler builds
/// each job's state here from the client's settings; the two rules of
/// [`session_config`] are applied again, so a client cannot turn them off
/// (`SET ballista.planner.adaptive.enabled = true` would run a `UNION ALL`
/// branch's call in every task of its stage).
fn server_state(mount: &Arc<Mount>, config: SessionConfig) -> Result<SessionState> {
    let config = config.with_ballista_adaptive_query_planner(false).with_extension(Arc::new(PerfScanPartitions(1)));
    let ctx = SessionContext::new_with_state(default_session_builder(config)?);
    register(&ctx, mount.tree());
    Ok(ctx.state())
}

/// A client session on the scheduler at `url` (`df://host:port`). Queries are
/// planned here and run on the cluster; the processes must mount the same
/// data (checked on every plan).
pub async fn connect(url: &str, mount: &Arc<Mount>, base: SessionConfig) -> Result<SessionContext> {
    // A plan's partitions are the cluster's tasks: at least Ballista's
    // default of 16, not this machine's cores.
    let partitions = base.target_partitions().max(CLIENT_TARGET_PARTITIONS);
    let base = base.with_target_partitions(partitions);
    let state = datafusion::execution::SessionStateBuilder::new()
        .with_default_features()
        .with_config(session_config(mount, base))
        .build();
    let ctx = SessionContext::remote_with_state(url, state).await?;
    // Ballista's upgrade replaces the scalar functions with its own list:
    // aicsql's are registered after it.
    register(&ctx, mount.tree());
    Ok(ctx)
}

/// A session with a scheduler and an executor in this process (tests,
/// trying a query's distributed plan on one machine).
pub async fn standalone(mount: &Arc<Mount>, base: SessionConfig) -> Result<SessionContext> {
    let state = server_state(mount, session_config(mount, base))?;
    let ctx = SessionContext::standalone_with_state(state).await?;
    register(&ctx, mount.tree());
    Ok(ctx)
}

/// How a scheduler listens and judges its executors.
#[derive(Debug, Clone)]
pub struct SchedulerOptions {
    pub bind_host: String,
    pub bind_port: u16,
    /// The host name executors and clients reach this scheduler by.
    pub external_host: String,
    /// An executor silent this long is dead; its running tasks are retried
    /// elsewhere (Ballista's default 180 s).
    pub executor_timeout_seconds: u64,
    /// How often dead executors are looked for.
    pub expire_dead_executor_interval_seconds: u64,
    /// Attempts of a task before its job fails.
    pub task_max_failures: usize,
}

impl Default for SchedulerOptions {
    fn default() -> Self {
        let ballista = SchedulerConfig::default();
        Self {
            bind_host: ballista.bind_host,
            bind_port: ballista.bind_port,
            external_host: ballista.external_host,
            executor_timeout_seconds: ballista.executor_timeout_seconds,
            expire_dead_executor_interval_seconds: ballista.expire_dead_executor_interval_seconds,
            task_max_failures: ballista.task_max_failures,
        }
    }
}

/// Runs a scheduler until the process is stopped.
pub async fn run_scheduler(mount: Arc<Mount>, options: SchedulerOptions) -> Result<()> {
    let address: SocketAddr = format!("{}:{}", options.bind_host, options.bind_port).parse().map_err(|e| {
        DataFusionError::Configuration(format!(
            "aicsql cluster scheduler: bad bind address {}:{}: {e}",
            options.bind_host, options.bind_port
        ))
    })?;
    let config_mount = Arc::clone(&mount);
    let state_mount = Arc::clone(&mount);
    let config = SchedulerConfig {
        bind_host: options.bind_host,
        bind_port: options.bind_port,
        external_host: options.external_host,
        executor_timeout_seconds: options.executor_timeout_seconds,
        no_executors_grace_period_seconds: options.executor_timeout_seconds,
        expire_dead_executor_interval_seconds: options.expire_dead_executor_interval_seconds,
        task_max_failures: options.task_max_failures,
        override_config_producer: Some(Arc::new(move || session_config(&config_mount, SessionConfig::new()))),
        override_session_builder: Some(Arc::new(move |config| server_state(&state_mount, config))),
        override_logical_codec: Some(Arc::new(AicLogicalCodec::new(Arc::clone(&mount)))),
        override_physical_codec: Some(Arc::new(AicPhysicalCodec::new(Arc::clone(&mount)))),
        ..SchedulerConfig::default()
    };
    let cluster = BallistaCluster::new_from_config(&config).await.map_err(ballista_error)?;
    start_server(cluster, address, Arc::new(config)).await.map_err(ballista_error)
}

/// How an executor listens, finds its scheduler and runs tasks.
#[derive(Debug, Clone)]
pub struct ExecutorOptions {
    pub bind_host: String,
    /// The host name the scheduler and other executors reach this one by.
    pub external_host: Option<String>,
    /// Arrow Flight port (shuffle data).
    pub port: u16,
    /// gRPC port.
    pub grpc_port: u16,
    pub scheduler_host: String,
    pub scheduler_port: u16,
    /// Tasks run at once (default: the machine's cores).
    pub vcores: usize,
    /// Where shuffle files go (default: a temporary directory).
    pub work_dir: Option<String>,
    /// Seconds between heartbeats to the scheduler.
    pub heartbeat_interval_seconds: u64,
}

impl Default for ExecutorOptions {
    fn default() -> Self {
        let ballista = ExecutorProcessConfig::default();
        Self {
            bind_host: ballista.bind_host,
            external_host: ballista.external_host,
            port: ballista.port,
            grpc_port: ballista.grpc_port,
            scheduler_host: ballista.scheduler_host,
            scheduler_port: ballista.scheduler_port,
            vcores: ballista.vcores,
            work_dir: ballista.work_dir,
            heartbeat_interval_seconds: ballista.executor_heartbeat_interval_seconds,
        }
    }
}

/// Runs an executor until the process is stopped.
///
/// It runs `vcores` tasks at once, so a task's searches get this machine's
/// cores divided by that (at least one thread), not the client's partition
/// count their session carries.
pub async fn run_executor(mount: Arc<Mount>, options: ExecutorOptions) -> Result<()> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    aicsql_udfs::cap_search_threads(cores / options.vcores.max(1));
    let registry = BallistaFunctionRegistry::from(&server_state(&mount, session_config(&mount, SessionConfig::new()))?);
    let config_mount = Arc::clone(&mount);
    let config = ExecutorProcessConfig {
        bind_host: options.bind_host,
        external_host: options.external_host,
        port: options.port,
        grpc_port: options.grpc_port,
        scheduler_host: options.scheduler_host,
        scheduler_port: options.scheduler_port,
        vcores: options.vcores.max(1),
        work_dir: options.work_dir,
        executor_heartbeat_interval_seconds: options.heartbeat_interval_seconds.max(1),
        print_thread_info: false,
        override_function_registry: Some(Arc::new(registry)),
        override_config_producer: Some(Arc::new(move || session_config(&config_mount, SessionConfig::new()))),
        override_logical_codec: Some(Arc::new(AicLogicalCodec::new(Arc::clone(&mount)))),
        override_physical_codec: Some(Arc::new(AicPhysicalCodec::new(Arc::clone(&mount)))),
        ..ExecutorProcessConfig::default()
    };
    start_executor_process(Arc::new(config)).await.map_err(ballista_error)
}

fn ballista_error(e: ballista_core::error::BallistaError) -> DataFusionError {
    DataFusionError::External(Box::new(e))
}
