//! The function reference (`docs/functions.md`), generated from what a
//! session holds: each function's own `Documentation`, the table functions'
//! registry (DataFusion 55 keeps no documentation for table functions), the
//! `aic.*` settings and the catalog's tables with their columns. Nothing in
//! it is written by hand, so it cannot drift from the code; a test fails
//! when the committed file is stale.

use std::fmt::Write as _;

use datafusion::arrow::array::{Array, AsArray, RecordBatch};
use datafusion::common::{DataFusionError, Result};
use datafusion::execution::context::SessionContext;
use datafusion::logical_expr::Documentation;

use aicsql_catalog::{CATALOG_NAME, MetaKind};

/// The command that regenerates the committed reference.
pub const REGENERATE: &str = "cargo run -- docs --out docs/functions.md";

/// The whole reference as Markdown, from a session built by
/// [`crate::SessionBuilder`] (its catalog lists the perf tables of the
/// mounted data).
pub async fn function_reference(ctx: &SessionContext) -> Result<String> {
    let mut out = String::new();
    out.push_str("# aicsql function reference\n\n");
    let _ = writeln!(
        out,
        "Generated from the functions' own documentation by `{REGENERATE}`; do not edit by hand \
         (a test fails when this file is stale). Every example with output shown here is run by \
         the tests against the published data and its output compared.\n"
    );
    let scalars = scalar_docs(ctx);
    let tables = aicsql_udfs::table_function_docs();
    out.push_str("## Contents\n\n");
    out.push_str("- Scalar functions: ");
    out.push_str(&links(scalars.iter().map(|(n, _)| n.as_str())));
    out.push_str("\n- Table functions: ");
    out.push_str(&links(tables.iter().map(|(n, _)| *n)));
    out.push_str("\n- [Settings](#settings)\n- [Catalog](#catalog)\n\n");

    out.push_str("## Scalar functions\n\n");
    for (name, doc) in &scalars {
        render_function(&mut out, name, doc);
    }
    out.push_str("## Table functions\n\n");
    out.push_str(
        "Called in `FROM`, with constant arguments: `SELECT * FROM engine_step(...)`. They are listed by \
         `aicsql --help` too (`SHOW FUNCTIONS` lists scalar functions only).\n\n",
    );
    for (name, doc) in &tables {
        render_function(&mut out, name, doc);
    }
    render_settings(&mut out, ctx).await?;
    render_catalog(&mut out, ctx).await?;
    Ok(out)
}

/// aicsql's scalar functions, by name (DataFusion's own are documented
/// upstream).
fn scalar_docs(ctx: &SessionContext) -> Vec<(String, Documentation)> {
    let state = ctx.state();
    let mut docs: Vec<(String, Documentation)> = state
        .scalar_functions()
        .iter()
        .filter_map(|(name, udf)| {
            let doc = udf.documentation()?;
            (doc.doc_section.label == aicsql_udfs::DOC_SECTION_AICSQL.label).then(|| (name.clone(), doc.clone()))
        })
        .collect();
    docs.sort_by(|a, b| a.0.cmp(&b.0));
    docs
}

fn links<'a>(names: impl Iterator<Item = &'a str>) -> String {
    names.map(|n| format!("[`{n}`](#{n})")).collect::<Vec<_>>().join(", ")
}

fn render_function(out: &mut String, name: &str, doc: &Documentation) {
    let _ = writeln!(out, "### `{name}`\n\n```text\n{}\n```\n\n{}\n", doc.syntax_example, doc.description);
    if let Some(args) = &doc.arguments {
        out.push_str("| argument | meaning |\n|---|---|\n");
        for (arg, text) in args {
            let _ = writeln!(out, "| `{arg}` | {} |", cell(text));
        }
        out.push('\n');
    }
    if let Some(example) = &doc.sql_example {
        let _ = writeln!(out, "Example:\n\n{}\n", example.trim());
    }
}

/// A table cell: pipes escaped, on one line.
fn cell(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ").replace('|', "\\|")
}

async fn query(ctx: &SessionContext, sql: &str) -> Result<Vec<RecordBatch>> {
    ctx.sql(sql).await?.collect().await
}

/// The string value of column `i` in `row` of `batch` (NULL: empty).
fn text(batch: &RecordBatch, i: usize, row: usize) -> Result<String> {
    let column = batch.column(i);
    let column = datafusion::arrow::compute::cast(column, &datafusion::arrow::datatypes::DataType::Utf8)?;
    let strings = column
        .as_string_opt::<i32>()
        .ok_or_else(|| DataFusionError::Internal(format!("reference: column {i} did not cast to text")))?;
    Ok(if strings.is_null(row) { String::new() } else { strings.value(row).to_string() })
}

async fn render_settings(out: &mut String, ctx: &SessionContext) -> Result<()> {
    out.push_str("## Settings\n\n");
    out.push_str(
        "`SET aic.<name> = <value>` changes a setting for the session; `SHOW aic.<name>` and \
         `information_schema.df_settings` read them.\n\n| setting | default | meaning |\n|---|---|---|\n",
    );
    let sql = "SELECT name, value, description FROM information_schema.df_settings \
               WHERE name LIKE 'aic.%' ORDER BY name";
    for batch in query(ctx, sql).await? {
        for row in 0..batch.num_rows() {
            let (name, value, description) = (text(&batch, 0, row)?, text(&batch, 1, row)?, text(&batch, 2, row)?);
            let value = if value.is_empty() { "(empty)".to_string() } else { format!("`{value}`") };
            let _ = writeln!(out, "| `{name}` | {value} | {} |", cell(&description));
        }
    }
    out.push('\n');
    Ok(())
}

async fn render_catalog(out: &mut String, ctx: &SessionContext) -> Result<()> {
    out.push_str("## Catalog\n\n");
    let _ = writeln!(
        out,
        "`{CATALOG_NAME}.meta` describes the data; `{CATALOG_NAME}.perf.<kind>` holds the raw rows of every \
         `<kind>_perf.parquet` of the mounted data, unioned over databases, with `system`, `backend`, \
         `version` (from the path) first; a file's own `version` / `backend` columns are kept as \
         `file_version` / `file_backend`, and columns a file lacks are NULL. Filters on `system`, `backend` \
         and `version` choose files before any is opened.\n"
    );
    let sql = format!(
        "SELECT table_schema, table_name, column_name, data_type, is_nullable FROM information_schema.columns \
         WHERE table_catalog = '{CATALOG_NAME}' ORDER BY table_schema, table_name, ordinal_position"
    );
    let mut current: Option<(String, String)> = None;
    for batch in query(ctx, &sql).await? {
        for row in 0..batch.num_rows() {
            let schema = text(&batch, 0, row)?;
            let table = text(&batch, 1, row)?;
            if current.as_ref() != Some(&(schema.clone(), table.clone())) {
                if current.is_some() {
                    out.push('\n');
                }
                let _ = writeln!(out, "### `{CATALOG_NAME}.{schema}.{table}`\n");
                if let Some(kind) = MetaKind::ALL.iter().find(|k| schema == "meta" && k.name() == table) {
                    let _ = writeln!(out, "{}\n", kind.description());
                }
                out.push_str("| column | type | nullable |\n|---|---|---|\n");
                current = Some((schema, table));
            }
            let _ = writeln!(
                out,
                "| `{}` | {} | {} |",
                text(&batch, 2, row)?,
                cell(&text(&batch, 3, row)?),
                text(&batch, 4, row)?
            );
        }
    }
    out.push('\n');
    Ok(())
}
