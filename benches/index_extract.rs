//! Criterion benches for the `index` stage's kernels: text extraction per
//! format (inputs from corpus-gen's content generators, the same bytes the
//! stage meets on a corpus image), tokenization by the index's analyzer,
//! and the choice of full-text engine: the same text indexed by tantivy
//! (one indexing thread, as the stage uses per core) and by SQLite FTS5
//! (`unicode61`, the tokenizer closest to tantivy's default), both in
//! memory so only indexing is timed.
//!
//! `benches/scripts/index-bench.sh` measures the whole stage on a corpus
//! image (MB/s of text, peak RSS, index size).

use caseload_corpus::content::{Kind, Pool, Spec, generate};
use caseload_engine::extract::{Extraction, Limits};
use caseload_engine::textindex::schema;
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;
use tantivy::tokenizer::TokenStream;

fn content(pool: &Pool, kind: Kind, size: u64, key: u64) -> Vec<u8> {
    let spec = Spec {
        kind,
        size,
        key,
        keywords: vec!["qzbcdfghjk".into()],
        straddle: Vec::new(),
        variant: 0,
        when: 1_000_000_000,
    };
    generate(&spec, pool).expect("corpus-gen content").bytes
}

/// Extract `data` and return the text.
fn extract(data: &[u8], limits: &Limits) -> String {
    let mut text = String::new();
    let mut x = Extraction::new(limits, &mut text);
    x.extract(data, 0);
    text
}

fn extraction(c: &mut Criterion) {
    let pool = Pool::build(7).expect("corpus-gen pool");
    let limits = Limits::default();
    let mut g = c.benchmark_group("extract");
    for (kind, size) in [
        (Kind::Text, 1 << 20),
        (Kind::Log, 1 << 20),
        (Kind::Html, 1 << 20),
        (Kind::Eml, 1 << 20),
        (Kind::Pdf, 1 << 20),
        (Kind::Docx, 1 << 20),
        (Kind::Xlsx, 1 << 20),
        (Kind::Exe, 1 << 20),
    ] {
        let data = content(&pool, kind, size, 11);
        g.throughput(Throughput::Bytes(data.len() as u64));
        g.bench_with_input(
            BenchmarkId::from_parameter(format!("{kind:?}").to_lowercase()),
            &data,
            |b, d| b.iter(|| black_box(extract(d, &limits))),
        );
    }
    g.finish();
}

/// Text of corpus documents, about `len` bytes.
fn corpus_text(len: usize) -> String {
    let pool = Pool::build(7).expect("corpus-gen pool");
    let limits = Limits::default();
    let mut text = String::new();
    let mut key = 0;
    while text.len() < len {
        key += 1;
        text.push_str(&extract(
            &content(&pool, Kind::Text, 256 << 10, key),
            &limits,
        ));
    }
    text
}

fn tokenization(c: &mut Criterion) {
    let text = corpus_text(4 << 20);
    let (schema, fields) = schema(true);
    let index = tantivy::Index::create_in_ram(schema);
    let mut analyzer = index
        .tokenizer_for_field(fields.text)
        .expect("the text field's analyzer");
    let mut g = c.benchmark_group("tokenize");
    g.throughput(Throughput::Bytes(text.len() as u64));
    g.bench_function("tantivy-default", |b| {
        b.iter(|| {
            let mut stream = analyzer.token_stream(&text);
            let mut n = 0u64;
            while stream.advance() {
                n += stream.token().text.len() as u64;
            }
            black_box(n)
        })
    });
    g.finish();
}

/// Chunks of text as the stage makes documents (one per item here).
fn chunks(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let mut cut = rest.len().min(64 << 10);
        while !rest.is_char_boundary(cut) {
            cut -= 1;
        }
        out.push(&rest[..cut]);
        rest = &rest[cut..];
    }
    out
}

fn engines(c: &mut Criterion) {
    let text = corpus_text(16 << 20);
    let docs = chunks(&text);
    let mut g = c.benchmark_group("engine");
    g.sample_size(10);
    g.throughput(Throughput::Bytes(text.len() as u64));
    g.bench_function("tantivy-1-thread", |b| {
        b.iter(|| {
            let (schema, fields) = schema(true);
            let index = tantivy::Index::create_in_ram(schema);
            let mut w: tantivy::IndexWriter = index
                .writer_with_num_threads(1, 64 << 20)
                .expect("tantivy writer");
            for (i, d) in docs.iter().enumerate() {
                let mut doc = tantivy::TantivyDocument::new();
                doc.add_text(fields.kind, "file");
                doc.add_i64(fields.id, i as i64);
                doc.add_u64(fields.part, 0);
                doc.add_text(fields.label, "label");
                doc.add_text(fields.text, d);
                w.add_document(doc).expect("add");
            }
            w.commit().expect("commit");
        })
    });
    g.bench_function("sqlite-fts5", |b| {
        b.iter(|| {
            let conn = rusqlite::Connection::open_in_memory().expect("sqlite");
            conn.execute_batch(
                "CREATE VIRTUAL TABLE t USING fts5(kind UNINDEXED, id UNINDEXED, label UNINDEXED, text, tokenize = 'unicode61');
                 BEGIN;",
            )
            .expect("fts5 table");
            {
                let mut ins = conn
                    .prepare("INSERT INTO t (kind, id, label, text) VALUES ('file', ?1, 'label', ?2)")
                    .expect("insert");
                for (i, d) in docs.iter().enumerate() {
                    ins.execute(rusqlite::params![i as i64, d]).expect("insert");
                }
            }
            conn.execute_batch("COMMIT;").expect("commit");
        })
    });
    g.finish();
}

criterion_group!(benches, extraction, tokenization, engines);
criterion_main!(benches);
