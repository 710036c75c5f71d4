//! `gemm_latency(db, quant, m, n, k)`: the spec's GEMM estimate in milliseconds.

use std::sync::{Arc, OnceLock};

use crate::{DOC_SECTION_AICSQL, SharedTree};
use datafusion::arrow::datatypes::DataType;
use datafusion::common::{Result, exec_err};
use datafusion::logical_expr::{ColumnarValue, Documentation, ScalarFunctionArgs, ScalarUDFImpl, Signature};

use aicsql_tables::error::ErrorClass;
use aicsql_tables::{DataTree, GemmTable};

use crate::config::OnMiss;
use crate::errors::tables_error;
use crate::gemm_args::{coerce_gemm, evaluate, gemm_signature};

/// Prices GEMM shapes against a database's measured table exactly as
/// aiconfigurator v0.11.0's Python does (exact hit, own-site curve,
/// util-hold, site transfer), so a SQL join over model shapes reproduces the
/// spec's numbers bit for bit.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct GemmLatency {
    tree: SharedTree,
    signature: Signature,
}

impl GemmLatency {
    pub fn new(tree: Arc<DataTree>) -> Self {
        Self { tree: SharedTree(tree), signature: gemm_signature() }
    }
}

impl ScalarUDFImpl for GemmLatency {
    fn name(&self) -> &str {
        "gemm_latency"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        coerce_gemm(self.name(), arg_types)
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Float64)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let name = self.name();
        evaluate(
            name,
            &self.tree,
            &args,
            // A database without the table (e.g. its GEMMs come only from the
            // shared layer, which is off) misses every lookup, as the spec's
            // "file does not exist" does; corrupt data and bugs stay errors.
            |db, quant, options| match GemmTable::cached(
                &self.tree,
                &db.system,
                &db.backend,
                &db.version,
                quant,
                options.shared_layer,
            ) {
                Ok(table) => Ok((Ok(table), options.on_miss)),
                Err(e) if e.class() == ErrorClass::Miss => Ok((Err(e.to_string()), options.on_miss)),
                Err(e) => Err(tables_error(name, e)),
            },
            |(table, on_miss), m, n, k| {
                let message = match table {
                    Ok(table) => match table.latency(m, n, k) {
                        Ok(ms) => return Ok(Some(ms)),
                        Err(miss) => table.miss_message(miss, m, n, k),
                    },
                    Err(no_table) => no_table.clone(),
                };
                match on_miss {
                    OnMiss::Null => Ok(None),
                    OnMiss::Error => exec_err!("{name}: {message}"),
                }
            },
        )
    }

    fn documentation(&self) -> Option<&Documentation> {
        static DOC: OnceLock<Documentation> = OnceLock::new();
        Some(DOC.get_or_init(|| {
            Documentation::builder(
                DOC_SECTION_AICSQL,
                "Latency in milliseconds of an (m x k) by (k x n) GEMM on a database, estimated from its \
                 measured table as aiconfigurator v0.11.0 does: exact hit, linear interpolation on the own \
                 (n, k) site, util-hold beyond the measured m range, or inverse-distance site transfer from \
                 the 4 nearest sites. Returns NULL on a data miss (or fails, under SET aic.on_miss = 'error'); \
                 gemm_trace shows how a value was reached. SET aic.shared_layer = false prices with the \
                 database's own file only.",
                "gemm_latency(db, quant, m, n, k)",
            )
            .with_sql_example(
                r#"```sql
> SELECT gemm_latency('h200_sxm/vllm/0.19.0', 'fp8_block', 1, 1280, 5120) AS ms;
+----------------------+
| ms                   |
+----------------------+
| 0.021895413193058825 |
+----------------------+
```"#,
            )
            .with_argument(
                "db",
                "Database 'system/backend/version', e.g. 'h200_sxm/vllm/0.19.0'; 'system' or \
                 'system/backend' take the rest from aic.backend / aic.version ('latest' = newest version \
                 with a GEMM table).",
            )
            .with_argument(
                "quant",
                "GEMM quant mode: bfloat16, fp8, fp8_static (reads the fp8 slice), fp8_block, nvfp4, \
                 int8_wo, int4_wo, sq.",
            )
            .with_argument("m", "Rows of the activation (tokens), m >= 0.")
            .with_argument("n", "Output features, n >= 1.")
            .with_argument("k", "Reduction dimension, k >= 1.")
            .build()
        }))
    }
}
