//! `gemm_sol(db, quant, m, n, k)`: the GEMM speed-of-light latency.

use std::sync::{Arc, OnceLock};

use datafusion::arrow::datatypes::DataType;
use datafusion::common::{DataFusionError, Result};
use datafusion::logical_expr::{ColumnarValue, Documentation, ScalarFunctionArgs, ScalarUDFImpl, Signature};

use aicsql_tables::sol::GemmSol;
use aicsql_tables::{DataTree, system_spec};

use crate::errors::tables_error;
use crate::gemm_args::{coerce_gemm, evaluate, gemm_signature};
use crate::{DOC_SECTION_AICSQL, SharedTree};

/// The bound every measured latency is raised to and every util is
/// measured against: shows how far a kernel is from the hardware limit.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct GemmSolFn {
    tree: SharedTree,
    signature: Signature,
}

impl GemmSolFn {
    pub fn new(tree: Arc<DataTree>) -> Self {
        Self { tree: SharedTree(tree), signature: gemm_signature() }
    }
}

impl ScalarUDFImpl for GemmSolFn {
    fn name(&self) -> &str {
        "gemm_sol"
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
            |db, quant, _| {
                let (spec, _) = system_spec(&self.tree, &db.system).map_err(|e| tables_error(name, e))?;
                GemmSol::new(&spec, quant)
                    .map_err(|e| DataFusionError::Execution(format!("{name}: systems/{}.yaml: {e}", db.system)))
            },
            |sol, m, n, k| Ok(Some(sol.latency_ms(m, n, k))),
        )
    }

    fn documentation(&self) -> Option<&Documentation> {
        static DOC: OnceLock<Documentation> = OnceLock::new();
        Some(DOC.get_or_init(|| {
            Documentation::builder(
                DOC_SECTION_AICSQL,
                "Speed-of-light latency in milliseconds of a GEMM on the database's system: \
                 max(2*m*n*k / flops(quant), bytes(quant) * (m*n + m*k + n*k) / mem_bw) * 1000, with flops \
                 chosen by the quant's compute multiplier (bf16 / fp8 / fp4 tensor-core flops). \
                 gemm_sol / gemm_latency is the util the estimator interpolates.",
                "gemm_sol(db, quant, m, n, k)",
            )
            .with_sql_example(
                r#"```sql
> SELECT gemm_sol('h200_sxm/vllm/0.19.0', 'fp8_block', 1024, 1280, 5120) AS sol_ms;
+----------------------+
| sol_ms               |
+----------------------+
| 0.006785527199191102 |
+----------------------+
```"#,
            )
            .with_argument("db", "Database 'system/backend/version' (only its system's constants are used).")
            .with_argument(
                "quant",
                "GEMM quant mode (bfloat16, fp8, fp8_static, fp8_block, nvfp4, int8_wo, int4_wo, sq).",
            )
            .with_argument("m", "Rows of the activation (tokens), m >= 0.")
            .with_argument("n", "Output features, n >= 1.")
            .with_argument("k", "Reduction dimension, k >= 1.")
            .build()
        }))
    }
}
