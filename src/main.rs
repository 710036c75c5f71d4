//! `aicsql`: the datafusion-cli shell with the aicsql catalog and functions.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use datafusion::common::{DataFusionError, Result};
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion_cli::catalog::DynamicObjectStoreCatalog;
use datafusion_cli::exec;
use datafusion_cli::object_storage::instrumented::InstrumentedObjectStoreRegistry;
use datafusion_cli::print_format::PrintFormat;
use datafusion_cli::print_options::{MaxRows, PrintOptions};

use aicsql::{SessionBuilder, default_data_dir, fetch};
use aicsql_remote::DataRoot;

#[derive(Debug, Parser)]
#[command(
    name = "aicsql",
    version,
    about = "SQL over aiconfigurator's kernel-performance tables",
    long_about = "SQL over aiconfigurator's kernel-performance tables.\n\n\
        Without -c or -f, starts an interactive shell. The published data is fetched into \
        the cache ($AICSQL_DATA, default ~/.cache/aicsql) on first use."
)]
struct Args {
    #[command(subcommand)]
    command: Option<Command>,

    /// SQL to run (repeatable; with -f, runs in command-line order, in one session)
    #[arg(short = 'c', long = "command", value_name = "SQL")]
    commands: Vec<String>,

    /// SQL file to run (repeatable)
    #[arg(short = 'f', long = "file", value_name = "FILE")]
    files: Vec<PathBuf>,

    /// Output format
    #[arg(long, value_enum, default_value_t = PrintFormat::Automatic)]
    format: PrintFormat,

    /// Data tree to mount (repeatable): a directory, file://, or a remote
    /// tree (s3://bucket/prefix, gs://bucket/prefix, https://host/prefix/)
    /// mirrored into the cache first; default: the cache, fetched if empty
    #[arg(long = "data", value_name = "DIR|URL", global = true)]
    data: Vec<String>,

    /// A store option for the remote data trees (repeatable), named as
    /// datafusion-cli names them: aws.region=..., aws.endpoint=...,
    /// aws.access_key_id=..., aws.allow_http=true, gcp.service_account_path=...
    #[arg(long = "data-option", value_name = "KEY=VALUE", global = true, value_parser = aicsql_remote::parse_option)]
    data_option: Vec<(String, String)>,

    /// Run the queries on the Ballista cluster whose scheduler is at URL
    /// (df://host:port, started with `aicsql cluster scheduler`); every
    /// process of the cluster must mount the same data
    #[arg(long, value_name = "URL")]
    cluster: Option<String>,

    /// Print only query results (no timing, no banner)
    #[arg(short, long)]
    quiet: bool,

    /// Rows to show in table output ('inf' for all; default 40). Other
    /// formats print every row unless this is given.
    #[arg(long)]
    maxrows: Option<MaxRows>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Manage the perf-data cache
    Data {
        #[command(subcommand)]
        action: DataAction,
    },
    /// Draw a query's rows: a search's Pareto frontier, a GEMM curve, an
    /// engine step per op, or estimates against measurements (columns in
    /// docs/plots.md; queries/plot/ has one query of each)
    Plot {
        /// pareto, gemm, step or accuracy
        #[arg(value_enum)]
        kind: PlotKind,
        /// SQL to run after the files; its last statement's rows are drawn
        #[arg(long, value_name = "QUERY", required_unless_present = "query_file")]
        sql: Option<String>,
        /// SQL file to run (repeatable, in order, before --sql): every
        /// statement runs in one session, the last one's rows are drawn
        #[arg(long = "file", value_name = "FILE")]
        query_file: Vec<PathBuf>,
        /// Write SVG or PNG (by extension) instead of drawing in the terminal
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
    },
    /// Run a process of a Ballista cluster that serves aicsql queries
    /// (`aicsql --cluster df://host:port` connects to it)
    Cluster {
        #[command(subcommand)]
        role: ClusterRole,
    },
    /// Print the function reference (every function, setting and catalog
    /// table, as docs/functions.md holds it)
    Docs {
        /// Write it to this file instead of standard output
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
    },
}

#[derive(Debug, Subcommand)]
enum ClusterRole {
    /// The scheduler: plans distributed queries and hands their tasks to
    /// the executors
    Scheduler {
        /// Address to listen on
        #[arg(long, default_value = "127.0.0.1")]
        bind_host: String,
        /// Port to listen on
        #[arg(long, default_value_t = aicsql_cluster::DEFAULT_SCHEDULER_PORT)]
        bind_port: u16,
        /// Host name executors and clients reach the scheduler by
        #[arg(long, default_value = "localhost")]
        external_host: String,
        /// Seconds without a heartbeat after which an executor is dead and
        /// its tasks are retried elsewhere
        #[arg(long, default_value_t = 180, value_parser = clap::value_parser!(u64).range(1..))]
        executor_timeout_seconds: u64,
        /// Seconds between looks for dead executors
        #[arg(long, default_value_t = 15, value_parser = clap::value_parser!(u64).range(1..))]
        expire_dead_executor_interval_seconds: u64,
        /// Attempts of a task before its query fails
        #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u64).range(1..))]
        task_max_failures: u64,
    },
    /// An executor: runs tasks (partitions of queries) for a scheduler
    Executor {
        /// Address to listen on
        #[arg(long, default_value = "127.0.0.1")]
        bind_host: String,
        /// Host name the scheduler and other executors reach this one by
        #[arg(long)]
        external_host: Option<String>,
        /// Arrow Flight port (shuffle data)
        #[arg(long, default_value_t = 50051)]
        bind_port: u16,
        /// gRPC port
        #[arg(long, default_value_t = 50052)]
        bind_grpc_port: u16,
        /// Scheduler host
        #[arg(long, default_value = "localhost")]
        scheduler_host: String,
        /// Scheduler port
        #[arg(long, default_value_t = aicsql_cluster::DEFAULT_SCHEDULER_PORT)]
        scheduler_port: u16,
        /// Tasks run at once (default: the machine's cores); a task's
        /// searches share the cores that leaves it
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
        concurrent_tasks: Option<u64>,
        /// Directory for shuffle files (default: a temporary directory)
        #[arg(long)]
        work_dir: Option<String>,
        /// Seconds between heartbeats to the scheduler
        #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..))]
        heartbeat_interval_seconds: u64,
    },
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum PlotKind {
    Pareto,
    Gemm,
    Step,
    Accuracy,
}

impl PlotKind {
    fn kind(self) -> aicsql_plot::Kind {
        match self {
            PlotKind::Pareto => aicsql_plot::Kind::Pareto,
            PlotKind::Gemm => aicsql_plot::Kind::Gemm,
            PlotKind::Step => aicsql_plot::Kind::Step,
            PlotKind::Accuracy => aicsql_plot::Kind::Accuracy,
        }
    }
}

#[derive(Debug, Subcommand)]
enum DataAction {
    /// Download and unpack the published perf data (no network if already present)
    Fetch,
    /// Write DIR/aicsql-manifest.json: every file's path, size and SHA-256,
    /// which a tree served over HTTP(S) needs (HTTP has no listing)
    Manifest {
        /// The data tree's root
        dir: PathBuf,
    },
    /// Bring the local mirror of a remote tree up to date (only changed
    /// files are fetched); `--data URL` does the same before a query
    Mirror {
        /// s3://bucket/prefix, gs://bucket/prefix or https://host/prefix/
        url: String,
    },
}

/// A statement source, in command-line order.
enum Input {
    Sql(String),
    File(PathBuf),
}

/// The table functions for `--help`: `SHOW FUNCTIONS` lists scalar
/// functions only, so the shell's help is where users find these.
fn table_functions_help() -> String {
    let mut text = String::from("Table functions (SELECT ... FROM name(...); `aicsql docs` has the full reference):\n");
    for (_, doc) in aicsql_udfs::table_function_docs() {
        text.push_str("  ");
        text.push_str(&doc.syntax_example);
        text.push('\n');
    }
    text
}

fn main() -> ExitCode {
    let matches = Args::command().after_help(table_functions_help()).get_matches();
    let args = match Args::from_arg_matches(&matches) {
        Ok(args) => args,
        Err(e) => e.exit(),
    };
    let mut inputs: Vec<(usize, Input)> = Vec::new();
    if let Some(idx) = matches.indices_of("commands") {
        inputs.extend(idx.zip(args.commands.iter().cloned().map(Input::Sql)));
    }
    if let Some(idx) = matches.indices_of("files") {
        inputs.extend(idx.zip(args.files.iter().cloned().map(Input::File)));
    }
    inputs.sort_by_key(|(i, _)| *i);
    let inputs = inputs.into_iter().map(|(_, input)| input).collect();

    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("Error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(args, inputs)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("Error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn log_to_stderr(quiet: bool) -> impl FnMut(&str) {
    move |line: &str| {
        if !quiet {
            eprintln!("aicsql: {line}");
        }
    }
}

/// Runs the statements and draws the last one's rows: into `out`, or on the terminal.
async fn plot(
    ctx: &datafusion::prelude::SessionContext,
    kind: aicsql_plot::Kind,
    sql: &str,
    out: Option<&std::path::Path>,
) -> Result<()> {
    let batches = aicsql::run_statements(ctx, sql)
        .await?
        .pop()
        .ok_or_else(|| DataFusionError::Plan(format!("plot {}: the SQL holds no statement", kind.name())))?;
    let plot_err = |e: aicsql_plot::PlotError| DataFusionError::Execution(format!("plot {}: {e}", kind.name()));
    let figure = aicsql_plot::Figure::from_batches(kind, &batches).map_err(plot_err)?;
    let series: Vec<String> = figure.summary().iter().map(|(name, n)| format!("{name}: {n}")).collect();
    match out {
        Some(path) => {
            aicsql_plot::write(&figure, path).map_err(plot_err)?;
            eprintln!("aicsql: wrote {} ({})", path.display(), series.join(", "));
        }
        None => {
            // The terminal's size where the shell says it, else 100 x 32.
            let size = |name: &str, default: u32| {
                std::env::var(name).ok().and_then(|v| v.parse::<u32>().ok()).unwrap_or(default)
            };
            let color = std::io::IsTerminal::is_terminal(&std::io::stdout());
            let text =
                aicsql_plot::to_terminal(&figure, size("COLUMNS", 100), size("LINES", 32).saturating_sub(2), color)
                    .map_err(plot_err)?;
            print!("{text}");
            println!("{}", series.join(", "));
        }
    }
    Ok(())
}

/// The local trees to mount: the `--data` roots (remote ones mirrored into
/// the cache first), else the cache, fetched if it is empty.
async fn data_dirs(args: &Args) -> Result<Vec<PathBuf>> {
    if args.data.is_empty() {
        let cache = default_data_dir();
        if !fetch::is_complete(&cache) {
            fetch::ensure_data(&cache, &mut log_to_stderr(args.quiet))
                .map_err(|e| DataFusionError::External(Box::new(e)))?;
        }
        return Ok(vec![cache]);
    }
    mount_roots(&args.data, &args.data_option, args.quiet).await
}

/// Mirrors the remote ones among `roots` into the cache and says what it
/// did on stderr; warnings (an offline mirror in use) show even under --quiet.
async fn mount_roots(roots: &[String], options: &[(String, String)], quiet: bool) -> Result<Vec<PathBuf>> {
    let mut log = move |line: &str| {
        if !quiet || line.starts_with("warning:") {
            eprintln!("aicsql: {line}");
        }
    };
    aicsql_remote::mount_roots(roots, options, &default_data_dir(), &mut log)
        .await
        .map_err(|e| DataFusionError::External(Box::new(e)))
}

/// Runs a scheduler or an executor over the mounted data until stopped.
async fn serve(args: &Args, role: &ClusterRole) -> Result<()> {
    if let Some(url) = &args.cluster {
        return Err(DataFusionError::Plan(format!(
            "--cluster {url} connects a client to a cluster; a scheduler or an executor finds its scheduler with \
             --scheduler-host / --scheduler-port"
        )));
    }
    // Ballista reports through the `log` crate: info by default, RUST_LOG
    // to change it.
    let _ = env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info")).try_init();
    let tree = SessionBuilder::open(&data_dirs(args).await?)?.tree().clone();
    let mount = aicsql_cluster::Mount::new(tree);
    log::info!(
        "aicsql cluster: {} perf files mounted, data fingerprint {:016x}",
        mount.tree().perf_files().len(),
        mount.fingerprint()
    );
    match role {
        ClusterRole::Scheduler {
            bind_host,
            bind_port,
            external_host,
            executor_timeout_seconds,
            expire_dead_executor_interval_seconds,
            task_max_failures,
        } => {
            let options = aicsql_cluster::SchedulerOptions {
                bind_host: bind_host.clone(),
                bind_port: *bind_port,
                external_host: external_host.clone(),
                executor_timeout_seconds: *executor_timeout_seconds,
                expire_dead_executor_interval_seconds: *expire_dead_executor_interval_seconds,
                task_max_failures: usize::try_from(*task_max_failures).unwrap_or(usize::MAX),
            };
            aicsql_cluster::run_scheduler(mount, options).await
        }
        ClusterRole::Executor {
            bind_host,
            external_host,
            bind_port,
            bind_grpc_port,
            scheduler_host,
            scheduler_port,
            concurrent_tasks,
            work_dir,
            heartbeat_interval_seconds,
        } => {
            let defaults = aicsql_cluster::ExecutorOptions::default();
            let options = aicsql_cluster::ExecutorOptions {
                bind_host: bind_host.clone(),
                external_host: external_host.clone(),
                port: *bind_port,
                grpc_port: *bind_grpc_port,
                scheduler_host: scheduler_host.clone(),
                scheduler_port: *scheduler_port,
                vcores: concurrent_tasks.map_or(defaults.vcores, |n| usize::try_from(n).unwrap_or(usize::MAX)),
                work_dir: work_dir.clone(),
                heartbeat_interval_seconds: *heartbeat_interval_seconds,
            };
            aicsql_cluster::run_executor(mount, options).await
        }
    }
}

async fn run(args: Args, inputs: Vec<Input>) -> Result<()> {
    if let Some(Command::Data { action: DataAction::Fetch }) = &args.command {
        let mut dirs = Vec::new();
        for text in &args.data {
            match DataRoot::parse(text, &args.data_option).map_err(|e| DataFusionError::External(Box::new(e)))? {
                DataRoot::Local(dir) => dirs.push(dir),
                DataRoot::Remote(tree) => {
                    return Err(DataFusionError::Plan(format!(
                        "data fetch downloads the published data into a local directory; to refresh the mirror of {tree} run `aicsql data mirror {tree}`"
                    )));
                }
            }
        }
        if dirs.is_empty() {
            dirs.push(default_data_dir());
        }
        for dir in dirs {
            let report = fetch::ensure_data(&dir, &mut log_to_stderr(false))
                .map_err(|e| DataFusionError::External(Box::new(e)))?;
            for label in &report.present {
                println!("{label}: already in {}", dir.display());
            }
            for label in &report.fetched {
                println!("{label}: fetched into {}", dir.display());
            }
        }
        return Ok(());
    }

    if let Some(Command::Data { action: DataAction::Manifest { dir } }) = &args.command {
        let manifest = aicsql_remote::write_manifest(dir).map_err(|e| DataFusionError::External(Box::new(e)))?;
        println!(
            "{}: {} files, {} bytes",
            dir.join(aicsql_remote::MANIFEST_FILE).display(),
            manifest.files.len(),
            manifest.total_size()
        );
        return Ok(());
    }

    if let Some(Command::Data { action: DataAction::Mirror { url } }) = &args.command {
        match DataRoot::parse(url, &args.data_option).map_err(|e| DataFusionError::External(Box::new(e)))? {
            DataRoot::Remote(_) => {
                for dir in mount_roots(std::slice::from_ref(url), &args.data_option, false).await? {
                    println!("{}", dir.display());
                }
            }
            DataRoot::Local(dir) => {
                return Err(DataFusionError::Plan(format!(
                    "data mirror takes a remote tree (s3://, gs://, http(s)://); {} is local and is read in place",
                    dir.display()
                )));
            }
        }
        return Ok(());
    }

    if let Some(Command::Plot { kind, sql, query_file, out }) = &args.command {
        let mut script = String::new();
        for path in query_file {
            let text = std::fs::read_to_string(path)
                .map_err(|e| DataFusionError::Execution(format!("cannot read {}: {e}", path.display())))?;
            script.push_str(&text);
            // A file's last statement may lack its ';'.
            script.push_str("\n;\n");
        }
        script.push_str(sql.as_deref().unwrap_or_default());
        if script.trim().is_empty() {
            return Err(DataFusionError::Plan("plot: give the query with --sql or --file".into()));
        }
        let builder = SessionBuilder::open(&data_dirs(&args).await?)?;
        let ctx = match &args.cluster {
            Some(url) => {
                let mount = aicsql_cluster::Mount::new(Arc::clone(builder.tree()));
                aicsql_cluster::connect(url, &mount, SessionBuilder::default_config()).await?
            }
            None => builder.build(),
        };
        return plot(&ctx, kind.kind(), &script, out.as_deref()).await;
    }
    if let Some(Command::Docs { out }) = &args.command {
        if args.cluster.is_some() {
            return Err(DataFusionError::Plan(
                "docs lists the functions of this build and runs no query: --cluster has nothing to do here".into(),
            ));
        }
        let ctx = SessionBuilder::open(&data_dirs(&args).await?)?.build();
        let text = aicsql::reference::function_reference(&ctx).await?;
        return match out {
            Some(path) => std::fs::write(path, text)
                .map_err(|e| DataFusionError::Execution(format!("cannot write {}: {e}", path.display()))),
            None => {
                print!("{text}");
                Ok(())
            }
        };
    }

    if let Some(Command::Cluster { role }) = &args.command {
        return serve(&args, role).await;
    }

    let registry = Arc::new(InstrumentedObjectStoreRegistry::new());
    let runtime_env = RuntimeEnvBuilder::new().with_object_store_registry(registry.clone()).build_arc()?;
    let builder = SessionBuilder::open(&data_dirs(&args).await?)?.runtime(runtime_env);
    let ctx = match &args.cluster {
        Some(url) => {
            let mount = aicsql_cluster::Mount::new(Arc::clone(builder.tree()));
            aicsql_cluster::connect(url, &mount, SessionBuilder::default_config()).await?
        }
        None => {
            let ctx = builder.build().enable_url_table();
            // Let `CREATE EXTERNAL TABLE ... LOCATION 's3://...'` and URL tables find their stores.
            ctx.register_catalog_list(Arc::new(DynamicObjectStoreCatalog::new(
                ctx.state().catalog_list().clone(),
                ctx.state_weak_ref(),
            )));
            ctx
        }
    };

    // Long calls (a support-matrix scan of searches) say how far they are,
    // on a terminal only.
    aicsql_udfs::progress::enable(!args.quiet && std::io::IsTerminal::is_terminal(&std::io::stderr()));

    let mut print_options = PrintOptions {
        format: args.format,
        quiet: args.quiet,
        maxrows: args.maxrows.unwrap_or(match args.format {
            PrintFormat::Table | PrintFormat::Automatic => MaxRows::Limited(40),
            _ => MaxRows::Unlimited,
        }),
        color: true,
        instrumented_registry: registry,
    };

    if inputs.is_empty() {
        if !args.quiet {
            println!("aicsql {} (DataFusion {})", env!("CARGO_PKG_VERSION"), datafusion::DATAFUSION_VERSION);
        }
        return exec::exec_from_repl(&ctx, &mut print_options)
            .await
            .map_err(|e| DataFusionError::External(Box::new(e)));
    }
    for input in inputs {
        match input {
            Input::Sql(sql) => exec::exec_from_commands(&ctx, vec![sql], &print_options).await?,
            Input::File(path) => {
                let sql = std::fs::read_to_string(&path)
                    .map_err(|e| DataFusionError::Execution(format!("cannot read {}: {e}", path.display())))?;
                // The whole file goes to the parser at once: every statement
                // runs, and the first failure stops the run with a non-zero exit.
                exec::exec_from_commands(&ctx, vec![sql], &print_options)
                    .await
                    .map_err(|e| DataFusionError::Execution(format!("{}: {e}", path.display())))?;
            }
        }
    }
    Ok(())
}
