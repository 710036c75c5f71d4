//! `gemm_latency` under load: a million random queries over every public
//! database and quant, and the same scan on eight threads.

mod common;

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, Float64Array, Int64Array, RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::datasource::MemTable;
use datafusion::prelude::SessionContext;

use aicsql::SessionBuilder;

#[path = "support/rng.rs"]
mod rng;
use rng::Rng;

/// Every (database, quant) pair with GEMM data of its own, from the catalog itself.
async fn pairs(ctx: &SessionContext) -> Vec<(String, String)> {
    let batches = ctx
        .sql(
            // aic.perf.gemm also holds rows of version dirs that are no
            // database (a legacy INCOMPLETE.txt dir is still a donor).
            "SELECT DISTINCT g.system || '/' || g.backend || '/' || g.version AS db, g.gemm_dtype \
             FROM aic.perf.gemm g JOIN (SELECT DISTINCT db FROM aic.meta.databases) d \
             ON d.db = g.system || '/' || g.backend || '/' || g.version ORDER BY 1, 2",
        )
        .await
        .expect("plan")
        .collect()
        .await
        .expect("scan");
    let mut out = Vec::new();
    for b in &batches {
        let db = b.column(0).as_any().downcast_ref::<StringArray>().expect("text");
        let q = b.column(1).as_any().downcast_ref::<StringArray>().expect("text");
        for i in 0..b.num_rows() {
            out.push((db.value(i).to_string(), q.value(i).to_string()));
        }
    }
    out
}

fn random_queries(pairs: &[(String, String)], rows: usize, seed: u64) -> RecordBatch {
    let mut rng = Rng(seed);
    let (mut db, mut quant, mut m, mut n, mut k) = (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..rows {
        let (d, q) = &pairs[rng.below(pairs.len() as u64) as usize];
        // One row in 50 has a NULL somewhere.
        let null_at = if rng.below(50) == 0 { rng.below(5) } else { 5 };
        db.push((null_at != 0).then(|| d.clone()));
        quant.push((null_at != 1).then(|| q.clone()));
        m.push((null_at != 2).then(|| rng.below((1 << 22) + 1) as i64));
        n.push((null_at != 3).then(|| 1 + rng.below(1 << 18) as i64));
        k.push((null_at != 4).then(|| 1 + rng.below(1 << 18) as i64));
    }
    let schema = Arc::new(Schema::new(vec![
        Field::new("db", DataType::Utf8, true),
        Field::new("quant", DataType::Utf8, true),
        Field::new("m", DataType::Int64, true),
        Field::new("n", DataType::Int64, true),
        Field::new("k", DataType::Int64, true),
    ]));
    let columns: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from(db)),
        Arc::new(StringArray::from(quant)),
        Arc::new(Int64Array::from(m)),
        Arc::new(Int64Array::from(n)),
        Arc::new(Int64Array::from(k)),
    ];
    RecordBatch::try_new(schema, columns).expect("batch")
}

async fn latencies(ctx: &SessionContext, batch: &RecordBatch) -> Vec<Option<f64>> {
    let table = MemTable::try_new(batch.schema(), vec![vec![batch.clone()]]).expect("table");
    ctx.register_table("queries", Arc::new(table)).expect("register");
    let out = ctx
        .sql("SELECT gemm_latency(db, quant, m, n, k) FROM queries")
        .await
        .expect("plan")
        .collect()
        .await
        .expect("gemm_latency over random queries");
    ctx.deregister_table("queries").expect("deregister");
    out.iter()
        .flat_map(|b| {
            let a = b.column(0).as_any().downcast_ref::<Float64Array>().expect("f64").clone();
            (0..a.len()).map(move |i| a.is_valid(i).then(|| a.value(i))).collect::<Vec<_>>()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_million_random_queries_never_give_nonsense() {
    let ctx = SessionBuilder::with_tree(common::tree()).build();
    let pairs = pairs(&ctx).await;
    assert!(pairs.len() > 100, "expected every public database and quant, got {}", pairs.len());
    let batch = random_queries(&pairs, 1_000_000, 0x5eed_a1c5);
    let values = latencies(&ctx, &batch).await;
    assert_eq!(values.len(), 1_000_000);
    let mut answered = 0usize;
    for (i, v) in values.iter().enumerate() {
        if let Some(v) = v {
            assert!(v.is_finite() && *v > 0.0, "row {i}: {v}");
            answered += 1;
        }
    }
    // NULL inputs (about 2 %) and misses are NULL; most shapes get an answer.
    assert!(answered > 500_000, "only {answered} of 1M queries answered");
}

#[test]
fn eight_threads_scanning_the_same_queries_agree() {
    let tree = common::tree();
    let pairs = {
        let rt = tokio::runtime::Runtime::new().expect("tokio");
        rt.block_on(pairs(&SessionBuilder::with_tree(Arc::clone(&tree)).build()))
    };
    let batch = random_queries(&pairs, 100_000, 0xa11_7ea5);
    let results: Vec<Vec<Option<u64>>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..8)
            .map(|_| {
                let (tree, batch) = (Arc::clone(&tree), batch.clone());
                s.spawn(move || {
                    let rt = tokio::runtime::Builder::new_current_thread().build().expect("tokio");
                    let ctx = SessionBuilder::with_tree(tree).build();
                    rt.block_on(latencies(&ctx, &batch)).into_iter().map(|v| v.map(f64::to_bits)).collect()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("thread")).collect()
    });
    for (t, r) in results.iter().enumerate().skip(1) {
        assert!(r == &results[0], "thread {t} disagrees with thread 0");
    }
    assert!(results[0].iter().filter(|v| v.is_some()).count() > 50_000);
}
