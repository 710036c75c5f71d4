//! Table functions whose rows are computed when the plan runs, not when it
//! is planned.
//!
//! DataFusion calls a table function while it plans the query. Computing the
//! rows there (a `MemTable`) pins the work to the process that plans: on a
//! Ballista cluster that is the client, so nothing of a search would run on
//! the executors. Here planning only evaluates and checks the arguments
//! (types, ranges, the database: errors still come before anything runs) and
//! returns a [`TableCall`]; its [`TableCallExec`] computes the rows in
//! `execute`, with the session options of the task that runs it. A plan of
//! many calls (a `UNION ALL` of searches) has one partition per call, which
//! is what a cluster spreads over its executors.
//!
//! Both carry only a durable description, the function's name and its
//! evaluated arguments, so a codec can send them to another process, which
//! looks the function up by name over its own mounted data.

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::{Session, TableFunctionArgs, TableFunctionImpl, TableProvider};
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::{DataFusionError, Result, ScalarValue};
use datafusion::config::ConfigOptions;
use datafusion::datasource::TableType;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::logical_expr::Expr;
use datafusion::physical_expr::{EquivalenceProperties, Partitioning, PhysicalExpr};
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{DisplayAs, DisplayFormatType, ExecutionPlan, PlanProperties};

use crate::args::constant;

/// A table function computed from its evaluated (constant) arguments.
pub trait RowsFunction: fmt::Debug + Send + Sync {
    /// The name it is registered under.
    fn name(&self) -> &'static str;

    /// The output schema (the same for every call).
    fn schema(&self) -> SchemaRef;

    /// Checks the arguments as planning must: count, types, ranges, the
    /// database. Cheap: it computes no rows.
    fn check(&self, args: &[ScalarValue], config: &ConfigOptions) -> Result<()>;

    /// The rows of the call, in the function's order.
    fn rows(&self, args: &[ScalarValue], config: &ConfigOptions) -> Result<RecordBatch>;
}

/// Registers a [`RowsFunction`] with DataFusion as a table function.
#[derive(Debug)]
pub struct RowsUdtf(pub Arc<dyn RowsFunction>);

impl TableFunctionImpl for RowsUdtf {
    fn call_with_args(&self, args: TableFunctionArgs) -> Result<Arc<dyn TableProvider>> {
        let name = self.0.name();
        let session = args.session();
        let values: Vec<ScalarValue> =
            args.exprs().iter().enumerate().map(|(i, e)| constant(name, session, e, i + 1)).collect::<Result<_>>()?;
        self.0.check(&values, session.config().options())?;
        Ok(Arc::new(TableCall::new(Arc::clone(&self.0), values)))
    }
}

/// One call of a [`RowsFunction`]: the provider a query scans.
#[derive(Debug, Clone)]
pub struct TableCall {
    function: Arc<dyn RowsFunction>,
    args: Vec<ScalarValue>,
}

impl TableCall {
    pub fn new(function: Arc<dyn RowsFunction>, args: Vec<ScalarValue>) -> Self {
        Self { function, args }
    }

    pub fn function(&self) -> &Arc<dyn RowsFunction> {
        &self.function
    }

    pub fn args(&self) -> &[ScalarValue] {
        &self.args
    }
}

#[async_trait]
impl TableProvider for TableCall {
    fn schema(&self) -> SchemaRef {
        self.function.schema()
    }

    fn table_type(&self) -> TableType {
        TableType::Temporary
    }

    async fn scan(
        &self,
        _state: &dyn Session,
        projection: Option<&Vec<usize>>,
        _filters: &[Expr],
        _limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        Ok(Arc::new(TableCallExec::try_new(Arc::clone(&self.function), self.args.clone(), projection.cloned())?))
    }
}

/// Computes one call's rows in its single partition.
#[derive(Debug)]
pub struct TableCallExec {
    function: Arc<dyn RowsFunction>,
    args: Vec<ScalarValue>,
    projection: Option<Vec<usize>>,
    properties: Arc<PlanProperties>,
}

impl TableCallExec {
    pub fn try_new(
        function: Arc<dyn RowsFunction>,
        args: Vec<ScalarValue>,
        projection: Option<Vec<usize>>,
    ) -> Result<Self> {
        let schema = function.schema();
        let projected = match &projection {
            Some(p) => Arc::new(schema.project(p).map_err(|e| {
                DataFusionError::Plan(format!(
                    "{}: projection {p:?} of its {} columns: {e}",
                    function.name(),
                    schema.fields().len()
                ))
            })?),
            None => schema,
        };
        let properties = Arc::new(PlanProperties::new(
            EquivalenceProperties::new(projected),
            Partitioning::UnknownPartitioning(1),
            EmissionType::Final,
            Boundedness::Bounded,
        ));
        Ok(Self { function, args, projection, properties })
    }

    pub fn function(&self) -> &Arc<dyn RowsFunction> {
        &self.function
    }

    pub fn args(&self) -> &[ScalarValue] {
        &self.args
    }

    pub fn projection(&self) -> Option<&[usize]> {
        self.projection.as_deref()
    }
}

impl DisplayAs for TableCallExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        let args: Vec<String> = self.args.iter().map(ScalarValue::to_string).collect();
        write!(f, "TableCallExec: {}({})", self.function.name(), args.join(", "))?;
        if let Some(projection) = &self.projection {
            let schema = self.function.schema();
            let names: Vec<&str> = projection.iter().map(|&i| schema.field(i).name().as_str()).collect();
            write!(f, ", projection=[{}]", names.join(", "))?;
        }
        Ok(())
    }
}

impl ExecutionPlan for TableCallExec {
    fn name(&self) -> &str {
        "TableCallExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![]
    }

    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    #[allow(deprecated)]
    fn with_new_children(self: Arc<Self>, _: Vec<Arc<dyn ExecutionPlan>>) -> Result<Arc<dyn ExecutionPlan>> {
        Ok(self)
    }

    fn execute(&self, partition: usize, context: Arc<TaskContext>) -> Result<SendableRecordBatchStream> {
        if partition != 0 {
            return Err(DataFusionError::Internal(format!(
                "TableCallExec {}: no partition {partition} (it has one)",
                self.function.name()
            )));
        }
        let function = Arc::clone(&self.function);
        let args = self.args.clone();
        let projection = self.projection.clone();
        let schema = self.properties.eq_properties.schema().clone();
        // The rows are computed when the stream is first polled, with the
        // options of the session that runs the task.
        let rows = futures::stream::once(async move {
            let batch = function.rows(&args, context.session_config().options())?;
            match projection {
                Some(p) => Ok(batch.project(&p)?),
                None => Ok(batch),
            }
        });
        Ok(Box::pin(RecordBatchStreamAdapter::new(schema, rows)))
    }
}
