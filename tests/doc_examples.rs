//! The documentation says what is true: `docs/functions.md` is what `aicsql
//! docs` generates from the code now, and every SQL block that shows output
//! (in README.md and in the reference, the functions' own examples included)
//! runs on the real data and prints exactly that output.
//!
//! `AICSQL_BLESS=1 cargo test --test doc_examples` rewrites the reference;
//! shown outputs in the README and in the functions' documentation are
//! edited by hand (the failure prints the real output to paste).

mod common;

use std::path::PathBuf;

use datafusion::arrow::util::pretty::pretty_format_batches;
use datafusion::prelude::SessionContext;

use aicsql::SessionBuilder;
use aicsql::reference::{REGENERATE, function_reference};

fn repo_file(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(name)
}

fn session() -> SessionContext {
    SessionBuilder::with_tree(common::tree()).build()
}

/// One example: the statements and the output the document shows.
#[derive(Debug)]
struct Example {
    origin: String,
    statements: Vec<String>,
    shown: String,
}

/// A fenced block of a Markdown text.
struct Block {
    info: String,
    body: String,
    /// Line numbers (from 0) of the opening and closing fences.
    open: usize,
    close: usize,
}

fn fenced_blocks(text: &str) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut open: Option<(String, Vec<&str>, usize)> = None;
    for (i, line) in text.lines().enumerate() {
        match (&mut open, line.trim_start().strip_prefix("```")) {
            (None, Some(info)) => open = Some((info.trim().to_string(), Vec::new(), i)),
            (Some(_), Some("")) => {
                if let Some((info, body, at)) = open.take() {
                    blocks.push(Block { info, body: body.join("\n"), open: at, close: i });
                }
            }
            (Some((_, body, _)), _) => body.push(line),
            (None, None) => {}
        }
    }
    assert!(open.is_none(), "an unclosed code fence");
    blocks
}

/// Statements of a SQL text, split on `;` at line ends (no example puts
/// two statements on one line).
fn statements(sql: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    for line in sql.lines() {
        if line.trim().is_empty() || line.trim_start().starts_with("--") {
            continue;
        }
        current.push_str(line);
        current.push('\n');
        if line.trim_end().ends_with(';') {
            out.push(std::mem::take(&mut current));
        }
    }
    if !current.trim().is_empty() {
        out.push(current);
    }
    out
}

/// The examples of a Markdown document, in its two conventions: a ```sql
/// block followed directly by an output block (the README), and a ```sql
/// block of `> ` prompts each followed by its output (the functions'
/// documentation, as DataFusion writes its own).
fn examples(name: &str, text: &str) -> Vec<Example> {
    let lines: Vec<&str> = text.lines().collect();
    let blocks = fenced_blocks(text);
    let mut out = Vec::new();
    for (i, block) in blocks.iter().enumerate() {
        if block.info != "sql" {
            continue;
        }
        let origin = format!("{name}:{}", block.open + 1);
        if block.body.lines().any(|l| l.starts_with("> ")) {
            // Prompt style: `> ` starts a statement, indented lines continue
            // it, the other lines are its output.
            let (mut sql, mut shown) = (String::new(), String::new());
            for line in block.body.lines() {
                if let Some(rest) = line.strip_prefix("> ") {
                    sql.push_str(rest);
                    sql.push('\n');
                } else if line.starts_with("  ") && shown.is_empty() {
                    sql.push_str(line);
                    sql.push('\n');
                } else {
                    shown.push_str(line);
                    shown.push('\n');
                }
            }
            out.push(Example { origin, statements: statements(&sql), shown });
            continue;
        }
        // Block style: an output block follows with only blank lines between.
        let Some(next) = blocks.get(i + 1) else { continue };
        let adjacent = lines[block.close + 1..next.open].iter().all(|l| l.trim().is_empty());
        if adjacent && matches!(next.info.as_str(), "" | "text") && next.body.trim_start().starts_with('+') {
            out.push(Example { origin, statements: statements(&block.body), shown: next.body.clone() });
        }
    }
    out
}

/// What the shell prints for the statements: each result as a table.
async fn run(ctx: &SessionContext, example: &Example) -> Result<String, String> {
    let mut printed = String::new();
    for sql in &example.statements {
        let batches = ctx
            .sql(sql)
            .await
            .map_err(|e| format!("{sql}: {e}"))?
            .collect()
            .await
            .map_err(|e| format!("{sql}: {e}"))?;
        if batches.iter().all(|b| b.num_rows() == 0) && batches.first().is_none_or(|b| b.num_columns() == 0) {
            continue;
        }
        let table = pretty_format_batches(&batches).map_err(|e| format!("{sql}: cannot print: {e}"))?;
        printed.push_str(&table.to_string());
        printed.push('\n');
    }
    Ok(printed)
}

fn normalise(text: &str) -> String {
    text.lines().map(str::trim_end).filter(|l| !l.is_empty()).collect::<Vec<_>>().join("\n")
}

async fn check_document(name: &str, text: &str) -> usize {
    let ctx = session();
    let examples = examples(name, text);
    let mut failures = Vec::new();
    let mut checked = 0;
    for example in &examples {
        match run(&ctx, example).await {
            Err(e) => failures.push(format!("{}: the example fails: {e}", example.origin)),
            Ok(printed) if example.shown.trim().is_empty() => failures.push(format!(
                "{}: the example shows no output; it prints\n{}",
                example.origin,
                printed.trim_end()
            )),
            Ok(printed) if normalise(&printed) == normalise(&example.shown) => checked += 1,
            Ok(printed) => failures.push(format!(
                "{}: shown output differs from the real output.\n--- shown\n{}\n--- real\n{}",
                example.origin,
                example.shown.trim_end(),
                printed.trim_end()
            )),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} examples in {name}:\n\n{}",
        failures.len(),
        examples.len(),
        failures.join("\n\n")
    );
    checked
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reference_is_current() {
    let generated = function_reference(&session()).await.expect("the reference renders");
    let path = repo_file("docs/functions.md");
    if std::env::var_os("AICSQL_BLESS").is_some() {
        std::fs::write(&path, &generated).expect("write docs/functions.md");
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "docs/functions.md is stale: run `{REGENERATE}` (or AICSQL_BLESS=1 cargo test --test doc_examples)"
    );
    // It covers every function registered and every setting.
    let tree = common::tree();
    for udf in aicsql_udfs::scalar_functions(&tree) {
        assert!(generated.contains(&format!("### `{}`", udf.name())), "{} is not in the reference", udf.name());
    }
    for (name, _) in aicsql_udfs::table_functions(&tree) {
        assert!(generated.contains(&format!("### `{name}`")), "table function {name} is not in the reference");
    }
    for key in ["aic.backend", "aic.version", "aic.on_miss", "aic.shared_layer", "aic.top_n", "aic.strict_sla"] {
        assert!(generated.contains(&format!("| `{key}` |")), "setting {key} is not in the reference");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readme_examples_print_what_they_show() {
    let text = std::fs::read_to_string(repo_file("README.md")).expect("README.md");
    let checked = check_document("README.md", &text).await;
    assert!(checked >= 7, "only {checked} README examples with output found: the parser lost some");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reference_examples_print_what_they_show() {
    let text = std::fs::read_to_string(repo_file("docs/functions.md")).expect("docs/functions.md");
    let checked = check_document("docs/functions.md", &text).await;
    let functions = aicsql_udfs::scalar_functions(&common::tree()).len() + aicsql_udfs::table_function_docs().len();
    assert_eq!(checked, functions, "every function's example shows its output");
}

#[test]
fn the_example_parser_finds_both_styles() {
    let readme = "x\n\n```sql\nSELECT 1 AS a;\n```\n```\n+---+\n| a |\n+---+\n| 1 |\n+---+\n```\n\n```sql\nSELECT 2;\n```\ntext\n```\n+--+\n```\n";
    let found = examples("r", readme);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].statements, vec!["SELECT 1 AS a;\n".to_string()]);
    let doc = "```sql\n> SELECT 1 AS a,\n  2 AS b;\n+---+---+\n| a | b |\n+---+---+\n```";
    let found = examples("d", doc);
    assert_eq!(found[0].statements, vec!["SELECT 1 AS a,\n  2 AS b;\n".to_string()]);
    assert!(found[0].shown.starts_with("+---+---+"));
}
