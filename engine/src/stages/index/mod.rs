//! `index`: the dtSearch pass of a suite. Every text-bearing item is read
//! again from the evidence (files and carved items through their extents,
//! optionally file slack and unallocated space; carved NTFS resident
//! content, which has no place on the media, from the case channel),
//! its text extracted ([`extract`]), and a full-text index written to the
//! case channel (`case/index/`), with its temporary segments on the temp
//! channel. `caseload search` queries it ([`crate::search`]).
//!
//! # Why tantivy
//!
//! Measured (`benches/index_extract.rs`, group `engine`: the same 16 MiB
//! of corpus text, 64 KiB documents, both in memory, one criterion run on
//! a shared 2-core machine under load 10): tantivy with one indexing thread
//! 20.6 MiB/s, SQLite FTS5 (`unicode61`) 39.0 MiB/s. So per thread FTS5 is
//! not slower, contrary to the rough figures. tantivy is kept
//! because the stage indexes on every thread into separate segments
//! (written on the temp channel, merged at the end), where an FTS5 table takes
//! one writer at a time; on the 4 GiB corpus the stage used 40 s of CPU
//! for reading, extracting and indexing 877 MB of text (22 MB per CPU
//! second). Re-measure on a quiet machine before relying on the ratio.
//!
//! # Channels and counting
//!
//! tantivy's file I/O goes through [`crate::textindex::ChannelDirectory`], a
//! `Directory` over channel files, never memory maps (page faults on a map
//! would bypass the counters): segments are written on the temp channel
//! (as IPED and Autopsy put their index temp on a fast disk), and the
//! merges write their output straight into the case channel
//! ([`crate::textindex::MovingDirectory`]); the few live segments no merge
//! rewrote are copied there. So the index is written to the case once and
//! never merged in temp and copied whole (which cost 0.53 s per GiB of a
//! 16 GiB image against 0.16 at 1 GiB: a large copy waits on writeback).
//!
//! # Memory
//!
//! Bounded by: per extraction worker one item buffer of at most
//! `max_item_mib` for structured formats (plain text and binary strings
//! are streamed in 1 MiB reads) plus nested member buffers (halved per
//! level); the documents queued for tantivy, held under
//! [`QUEUE_BYTES`] by a byte budget; tantivy's indexing arenas, one per
//! thread, flushed to a segment when full: `memory_mib` is the stage's
//! total, split across its threads (never below tantivy's floor of 15 MB
//! a thread), so a 64-thread workstation holds what a 2-thread one does
//! rather than 32 times it; the final merge, done in groups of at most
//! `MERGE_BYTES` of segments so that what tantivy holds per merged segment
//! does not grow with the image. The groups are independent and merged at
//! once, a merge thread each up to the stage's threads, so the merge uses
//! the cores (it was 5.4 of 7.8 s at 16 cores, merged one group after
//! another). An index of at most `segments_per_tier` segments (10, as
//! Lucene's tiered policy) is not merged at all.
//!
//! # Determinism
//!
//! An item's text, and so its documents (one per text chunk of at most
//! [`CHUNK`] bytes, split at white space), depend only on its bytes and the
//! options; which worker handled it does not matter. So the set of
//! documents, their terms, positions and stored text (where the profile
//! keeps it, [`stores_text`]), and every search
//! result are identical whatever the thread count. What differs is
//! tantivy's internal doc-id order and segment files (their bytes), which
//! no result depends on (search output is sorted by item).

use super::StageSpec;
use crate::casedb::{CaseReader, DISK_START, ItemKind, StoredContent};
use crate::extract::{self, Extraction, Format, Limits, Sink, StreamDecoder};
use crate::source::{EvidenceReader, SourceError};
use crate::stage::{
    Problem, ProgressUnit, Severity, Stage, StageContext, StageError, StageOptions, StageSummary,
    parse_options,
};
use crate::textindex::{ChannelDirectory, Fields, INDEX_DIR, MovingDirectory, schema};
use crossbeam_channel::bounded;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::io::{Read, Seek};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use tantivy::directory::Directory;
use tantivy::index::{SegmentComponent, SegmentId};
use tantivy::indexer::NoMergePolicy;
use tantivy::{Document, Index, IndexSettings, IndexWriter, SegmentMeta, TantivyDocument};

pub(super) const SPEC: StageSpec = StageSpec {
    name: "index",
    about: "text extraction and a full-text index of files, carved items (and optionally slack and unallocated space), with an entropy test",
    build,
    needs: &[(
        &["filesystem", "carve"],
        "it indexes the files, carved items and free space those stages record",
    )],
    default: super::Inclusion::Always,
    preflight: None,
    units: crate::stage::Units::FileBatches,
};

/// Where segments are built inside the temp channel.
const BUILD_DIR: &str = "index-build";
/// In a planned case, each file batch's index, in the case directory
/// (`index-shards/FIRST-LAST`) until the finish unit merges them.
pub const SHARDS_DIR: &str = "index-shards";

/// Whether the profile's index keeps a copy of each document's text
/// beside its words and positions. Autopsy's Solr does (its schema's
/// `text` and `content_str` are stored fields: hits are shown and regular
/// expressions matched from them); FTK 4's dtSearch does not by default
/// (its index holds word locations; caching the text is an option chosen
/// when an index is created, dtSearch article DTS0226), so its index is
/// smaller and writes less to temp and case. caseload's own
/// keeps it: `search --regex` reads it (counts come from the postings for
/// every profile).
fn stores_text(profile: crate::casedb::Profile) -> bool {
    match profile {
        crate::casedb::Profile::Native | crate::casedb::Profile::Autopsy => true,
        crate::casedb::Profile::Ftk4 => false,
    }
}

/// Text per document: an item's text is indexed in chunks of about this
/// size (split at white space), so no document is unbounded.
pub const CHUNK: usize = 1 << 20;
/// Bytes of documents queued for tantivy's indexing threads at most.
/// Sixteen chunks: enough to keep every writer thread fed (at most six
/// with the default arenas). The queue fills whenever extraction outruns
/// indexing, as it does with many extraction threads, so its size is
/// memory held: 64 MiB made the peak RSS at `--threads 16` 1.5x that at 2,
/// and 16 MiB indexed the 1 GiB corpus as fast (medians of 5 at 2 threads:
/// 2.39 s against 2.43 s).
pub const QUEUE_BYTES: usize = 16 << 20;
/// Items smaller than this are not judged by entropy: a few hundred bytes
/// of text-with-binary give too noisy an estimate.
pub const ENTROPY_MIN_BYTES: u64 = 4096;
/// Evidence read size.
const WINDOW: usize = 1 << 20;

#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields)]
struct Options {
    /// Index files (allocated and recoverable deleted ones).
    #[serde(default = "yes")]
    files: bool,
    /// Index carved items.
    #[serde(default = "yes")]
    carved: bool,
    /// Index file slack as items of their own.
    #[serde(default)]
    slack: bool,
    /// Index unallocated space ("index unallocated"), in chunks.
    #[serde(default)]
    unallocated: bool,
    /// Size of one unallocated-space item.
    #[serde(default = "default_unallocated_chunk")]
    unallocated_chunk_mib: u64,
    /// Printable strings of binary items.
    #[serde(default = "yes")]
    binary_strings: bool,
    /// Skip unstructured items whose entropy says encrypted or compressed.
    #[serde(default = "yes")]
    skip_high_entropy: bool,
    /// Bits per byte above which an item counts as high-entropy.
    #[serde(default = "default_threshold")]
    entropy_threshold: f64,
    /// Skip files the KFF stage marked known.
    #[serde(default)]
    skip_known: bool,
    /// Largest item (or member) parsed as a structured format.
    #[serde(default = "default_item_mib")]
    max_item_mib: u64,
    /// Decoded bytes one item may expand to (zip bombs).
    #[serde(default = "default_expansion_mib")]
    max_expansion_mib: u64,
    /// Container nesting depth.
    #[serde(default = "default_depth")]
    max_depth: u32,
    /// tantivy's indexing arenas, all threads together (split across
    /// them, at least [`ARENA_MIN`] each: no more writer threads than
    /// that allows).
    #[serde(default = "default_memory_mib")]
    memory_mib: u64,
    /// Segments the index may end with before the final merge runs
    /// (Lucene's `segmentsPerTier`; see [`SEGMENTS_PER_TIER`]).
    #[serde(default = "default_segments_per_tier")]
    segments_per_tier: usize,
}

fn default_segments_per_tier() -> usize {
    SEGMENTS_PER_TIER
}

fn yes() -> bool {
    true
}
fn default_unallocated_chunk() -> u64 {
    16
}
fn default_threshold() -> f64 {
    7.5
}
fn default_item_mib() -> u64 {
    32
}
fn default_expansion_mib() -> u64 {
    256
}
fn default_depth() -> u32 {
    6
}
/// 96 MiB: 48 MiB a thread on two cores, as before the budget was the
/// stage's.
fn default_memory_mib() -> u64 {
    96
}

/// tantivy's smallest arena a thread (`MEMORY_BUDGET_NUM_BYTES_MIN`:
/// 15 MB, which it does not export).
const ARENA_MIN: usize = 15_000_000;

/// tantivy's writer threads: the run's, but no more than the budget
/// `total` gives each its smallest arena. Sixteen threads took 16 times
/// tantivy's 15 MB floor, 2.5 times the 96 MiB budget (index peak RSS at
/// `--threads 16` 1.77x that at 2); the text extraction keeps every thread.
fn writer_threads(total: u64, threads: usize) -> usize {
    let fit = usize::try_from(total / ARENA_MIN as u64).unwrap_or(usize::MAX);
    threads.max(1).min(fit.max(1))
}

/// Each thread's arena: the stage's `total` bytes split across `threads`,
/// at least [`ARENA_MIN`].
fn arena_per_thread(total: u64, threads: usize) -> usize {
    let each = total / threads.max(1) as u64;
    usize::try_from(each).unwrap_or(usize::MAX).max(ARENA_MIN)
}

fn build(options: &StageOptions) -> Result<Box<dyn Stage>, StageError> {
    let o: Options = parse_options("index", options)?;
    let bad = |message: String| StageError::Config {
        stage: "index".into(),
        message,
    };
    if !(0.0..=8.0).contains(&o.entropy_threshold) {
        return Err(bad(format!(
            "`entropy_threshold` must be between 0 and 8 bits per byte, not {}",
            o.entropy_threshold
        )));
    }
    if o.memory_mib < 16 || o.memory_mib > 4000 {
        return Err(bad("`memory_mib` must be between 16 and 4000".into()));
    }
    if o.segments_per_tier == 0 || o.segments_per_tier > 1000 {
        return Err(bad("`segments_per_tier` must be between 1 and 1000".into()));
    }
    if o.max_item_mib == 0 || o.max_expansion_mib == 0 || o.unallocated_chunk_mib == 0 {
        return Err(bad(
            "`max_item_mib`, `max_expansion_mib` and `unallocated_chunk_mib` must be at least 1"
                .into(),
        ));
    }
    Ok(Box::new(IndexStage { o }))
}

/// The index stage.
#[derive(Debug)]
pub struct IndexStage {
    o: Options,
}

/// A byte budget for queued documents: a document holds a permit for its
/// text until tantivy has indexed (and dropped) it.
struct Budget {
    used: Mutex<usize>,
    freed: Condvar,
    cap: usize,
}

struct Permit {
    budget: Arc<Budget>,
    bytes: usize,
}

impl Budget {
    fn acquire(self: &Arc<Self>, bytes: usize) -> Permit {
        let mut used = self
            .used
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        while *used > 0 && *used + bytes > self.cap {
            used = self
                .freed
                .wait(used)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        }
        *used += bytes;
        Permit {
            budget: Arc::clone(self),
            bytes,
        }
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        let mut used = self
            .budget
            .used
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *used = used.saturating_sub(self.bytes);
        self.budget.freed.notify_all();
    }
}

/// A document with its queue permit: tantivy drops it once indexed.
struct ItemDoc {
    doc: TantivyDocument,
    _permit: Permit,
}

impl Document for ItemDoc {
    type Value<'a> = <TantivyDocument as Document>::Value<'a>;
    type FieldsValuesIter<'a> = <TantivyDocument as Document>::FieldsValuesIter<'a>;

    fn iter_fields_and_values(&self) -> Self::FieldsValuesIter<'_> {
        self.doc.iter_fields_and_values()
    }
}

/// Kinds of indexed items.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DocKind {
    File,
    Carved,
    Slack,
    Unallocated,
}

impl DocKind {
    fn name(self) -> &'static str {
        match self {
            DocKind::File => "file",
            DocKind::Carved => "carved",
            DocKind::Slack => "slack",
            DocKind::Unallocated => "unallocated",
        }
    }

    /// `item_kind` for processing errors.
    fn error_kind(self) -> ItemKind {
        match self {
            DocKind::File | DocKind::Slack => ItemKind::File,
            DocKind::Carved => ItemKind::Carved,
            DocKind::Unallocated => ItemKind::Evidence,
        }
    }
}

/// Where an item's bytes are.
enum Bytes {
    /// Runs on the media (`None` offset: a sparse run of zeros).
    Runs(Vec<(Option<u64>, u64)>),
    /// Bytes held in the database (NTFS resident data).
    Resident(Vec<u8>),
    /// Stored runs caseload-fs decodes as they are read (NTFS LZNT1
    /// units, APFS resource-fork blocks), from this evidence.
    Decoded(caseload_fs::Content, EvidenceReader),
}

/// One item to index.
struct Job {
    kind: DocKind,
    id: i64,
    label: String,
    bytes: Bytes,
}

impl Job {
    fn size(&self) -> u64 {
        match &self.bytes {
            Bytes::Runs(r) => r.iter().map(|&(_, l)| l).sum(),
            Bytes::Resident(b) => b.len() as u64,
            Bytes::Decoded(c, _) => c.len(),
        }
    }
}

/// Reads an item's bytes in order, from the evidence through its runs.
struct ItemReader<'a> {
    ctx: &'a StageContext<'a>,
    bytes: &'a Bytes,
    run: usize,
    done_in_run: u64,
    resident_pos: usize,
    /// The decoder, which keeps the unit or block it decoded last.
    decoded: Option<caseload_fs::ContentReader<'a, EvidenceReader>>,
}

impl<'a> ItemReader<'a> {
    fn new(ctx: &'a StageContext<'a>, bytes: &'a Bytes) -> Self {
        ItemReader {
            ctx,
            bytes,
            run: 0,
            done_in_run: 0,
            resident_pos: 0,
            decoded: match bytes {
                Bytes::Decoded(content, evidence) => {
                    Some(caseload_fs::ContentReader::new(evidence, content))
                }
                _ => None,
            },
        }
    }

    /// Fill as much of `buf` as the item has left; 0 at its end.
    fn read(&mut self, buf: &mut [u8]) -> Result<usize, SourceError> {
        match self.bytes {
            Bytes::Resident(b) => {
                let n = (b.len() - self.resident_pos).min(buf.len());
                buf[..n].copy_from_slice(&b[self.resident_pos..self.resident_pos + n]);
                self.resident_pos += n;
                Ok(n)
            }
            Bytes::Decoded(content, _) => {
                let Some(decoder) = self.decoded.as_mut() else {
                    return Ok(0);
                };
                let at = decoder.stream_position().unwrap_or(0);
                decoder.read(buf).map_err(|e| {
                    let first = content.extents().first().map_or(0, |e| e.offset / 512);
                    SourceError::Corrupt {
                        first_sector: first,
                        last_sector: first,
                        reason: format!("decoding the compressed stream at byte {at}: {e}"),
                    }
                })
            }
            Bytes::Runs(runs) => {
                let mut filled = 0;
                while filled < buf.len() {
                    let Some(&(offset, len)) = runs.get(self.run) else {
                        break;
                    };
                    let left = len - self.done_in_run.min(len);
                    if left == 0 {
                        self.run += 1;
                        self.done_in_run = 0;
                        continue;
                    }
                    let n = usize::try_from(left)
                        .unwrap_or(usize::MAX)
                        .min(buf.len() - filled);
                    let dst = &mut buf[filled..filled + n];
                    match offset {
                        Some(o) => {
                            let at = o + self.done_in_run;
                            let got = self.ctx.evidence.read_at(dst, at)?;
                            if got < n {
                                return Err(SourceError::Corrupt {
                                    first_sector: (at + got as u64) / 512,
                                    last_sector: (o + len).div_ceil(512).saturating_sub(1),
                                    reason: "item runs past the end of the evidence".into(),
                                });
                            }
                        }
                        None => dst.fill(0),
                    }
                    self.done_in_run += n as u64;
                    filled += n;
                }
                Ok(filled)
            }
        }
    }
}

/// How an item's text is cut into documents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Chunking {
    /// Bytes a chunk holds before looking for white space to end at.
    base_min: usize,
    /// Bytes a chunk holds at most before its overlapping window.
    base_max: usize,
    /// Bytes a chunk holds at most with its window (the window is the
    /// next chunk's start, indexed twice). Equal to `base_max`: no window.
    total: usize,
}

/// Bytes before a window's end in which to look for white space to end
/// it at (Autopsy's `WHITE_SPACE_BUFFER_SIZE`).
const WINDOW_SEEK: usize = 512;

impl Chunking {
    /// caseload's own: 1 MiB documents, cut at white space, no overlap.
    const NATIVE: Chunking = Chunking {
        base_min: CHUNK / 2,
        base_max: CHUNK,
        total: CHUNK,
    };
    /// Autopsy's keyword-search chunker (KeywordSearch `Chunker`): a base
    /// of 30-31 KiB ended at white space, then a window up to 32,760 bytes
    /// in all that the next chunk starts with.
    const AUTOPSY: Chunking = Chunking {
        base_min: 30 * 1024,
        base_max: 31 * 1024,
        total: 32_760,
    };

    fn of(profile: crate::casedb::Profile) -> Chunking {
        // (The index's stored copy of the text: `stores_text`.)
        match profile {
            // dtSearch, FTK's index, takes each item whole, as native does.
            crate::casedb::Profile::Native | crate::casedb::Profile::Ftk4 => Chunking::NATIVE,
            crate::casedb::Profile::Autopsy => Chunking::AUTOPSY,
        }
    }

    /// The end of a piece of `buf` of at most `max` bytes, at the last
    /// white space after `min` (else `max`), on a character boundary.
    fn cut(buf: &str, min: usize, max: usize) -> usize {
        // The limit itself may fall inside a multi-byte character (found
        // by the 64 GiB scale run: a U+2028 straddling the 1 MiB mark):
        // step back to a boundary before slicing.
        let mut max = max.min(buf.len());
        while !buf.is_char_boundary(max) {
            max -= 1;
        }
        buf[..max]
            .rfind(char::is_whitespace)
            .filter(|&c| c > min)
            .unwrap_or(max)
    }
}

/// Turns an item's text into documents (see [`Chunking`]).
struct DocSink<'a> {
    writer: &'a IndexWriter<ItemDoc>,
    fields: Fields,
    budget: &'a Arc<Budget>,
    kind: DocKind,
    id: i64,
    label: &'a str,
    part: u64,
    buf: String,
    chunking: Chunking,
    error: Option<tantivy::TantivyError>,
}

impl DocSink<'_> {
    fn emit_doc(&mut self, text: String) {
        if text.trim().is_empty() || self.error.is_some() {
            return;
        }
        let mut doc = TantivyDocument::new();
        doc.add_text(self.fields.kind, self.kind.name());
        doc.add_i64(self.fields.id, self.id);
        doc.add_u64(self.fields.part, self.part);
        doc.add_text(self.fields.label, self.label);
        let permit = self.budget.acquire(text.len() + self.label.len() + 64);
        doc.add_text(self.fields.text, text);
        self.part += 1;
        if let Err(e) = self.writer.add_document(ItemDoc {
            doc,
            _permit: permit,
        }) {
            self.error = Some(e);
        }
    }

    fn finish(&mut self) {
        let rest = std::mem::take(&mut self.buf);
        self.emit_doc(rest);
    }
}

impl Sink for DocSink<'_> {
    fn push(&mut self, text: &str) {
        self.buf.push_str(text);
        let c = self.chunking;
        while self.buf.len() >= c.total {
            // Split at white space so no word is cut; a chunk without any
            // is cut at a character boundary.
            let base = Chunking::cut(&self.buf, c.base_min, c.base_max);
            let end = if c.total > c.base_max {
                base.max(Chunking::cut(&self.buf, c.total - WINDOW_SEEK, c.total))
            } else {
                base
            };
            let chunk = self.buf[..end].to_string();
            // The window (end of this chunk) starts the next one.
            self.buf.drain(..base);
            self.emit_doc(chunk);
        }
    }
}

/// Counters shared by the workers.
#[derive(Default)]
struct Tally {
    items: AtomicU64,
    bytes: AtomicU64,
    text_bytes: AtomicU64,
    docs: AtomicU64,
    high_entropy: AtomicU64,
    not_decoded: AtomicU64,
    unreadable: AtomicU64,
    with_problems: AtomicU64,
    capped: AtomicU64,
    formats: Mutex<BTreeMap<&'static str, u64>>,
}

/// What happened to one item.
enum Outcome {
    Indexed {
        format: Format,
        text_bytes: u64,
        docs: u64,
        problems: Vec<String>,
        capped: bool,
    },
    HighEntropy(f64),
}

impl IndexStage {
    fn limits(&self) -> Limits {
        Limits {
            max_item_bytes: usize::try_from(self.o.max_item_mib << 20).unwrap_or(usize::MAX),
            max_expansion: self.o.max_expansion_mib << 20,
            max_depth: self.o.max_depth,
            binary_strings: self.o.binary_strings,
            min_string: 4,
        }
    }

    /// Read, test, extract and index one item.
    fn process(
        &self,
        ctx: &StageContext<'_>,
        job: &Job,
        sink: &mut DocSink<'_>,
        window: &mut [u8],
    ) -> Result<Outcome, SourceError> {
        let limits = self.limits();
        let size = job.size();
        let mut reader = ItemReader::new(ctx, &job.bytes);
        let first = reader.read(window)?;
        ctx.progress.advance(first as u64);
        let head = &window[..first];
        let format = extract::sniff(head);
        let whole = !format.structured() || size <= limits.max_item_bytes as u64;
        let mut problems = Vec::new();
        if format.structured() && !whole {
            problems.push(format!(
                "{} item of {size} bytes is larger than max_item_mib; indexed as text/strings",
                format.name()
            ));
        }
        let unstructured = !format.structured() || !whole;
        if unstructured && self.o.skip_high_entropy && size >= ENTROPY_MIN_BYTES {
            let mut hist = crate::signature::ByteHistogram::default();
            hist.add(head);
            let e = hist.entropy();
            if e > self.o.entropy_threshold {
                ctx.progress.advance(size.saturating_sub(first as u64));
                return Ok(Outcome::HighEntropy(e));
            }
        }
        let mut x = Extraction::new(&limits, sink);
        let found = if !unstructured {
            let mut data = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
            data.extend_from_slice(head);
            loop {
                let n = reader.read(window)?;
                if n == 0 {
                    break;
                }
                ctx.progress.advance(n as u64);
                data.extend_from_slice(&window[..n]);
            }
            x.extract(&data, 0)
        } else {
            let encoding = extract::classify(head);
            let mut decoder = StreamDecoder::new(encoding, &limits);
            decoder.feed(&mut x, head);
            loop {
                let n = reader.read(window)?;
                if n == 0 {
                    break;
                }
                ctx.progress.advance(n as u64);
                decoder.feed(&mut x, &window[..n]);
            }
            decoder.finish(&mut x);
            if encoding.is_some() {
                Format::Text
            } else {
                Format::Strings
            }
        };
        let text_bytes = x.text_bytes;
        let capped = x.expansion_capped();
        problems.append(&mut x.problems);
        sink.finish();
        Ok(Outcome::Indexed {
            format: found,
            text_bytes,
            docs: sink.part,
            problems,
            capped,
        })
    }

    fn record_problem(ctx: &StageContext<'_>, job: &Job, severity: Severity, message: String) {
        let _ = ctx.record(
            severity,
            Problem {
                item_kind: Some(job.kind.error_kind()),
                item_id: Some(job.id),
                path: Some(job.label.clone()),
                message,
                ..Problem::default()
            },
        );
    }
}

fn tantivy_err(e: tantivy::TantivyError) -> StageError {
    StageError::Other(format!("full-text index: {e}"))
}

impl Stage for IndexStage {
    fn name(&self) -> &'static str {
        "index"
    }

    fn committed(&self, ctx: &StageContext<'_>) -> Result<(), StageError> {
        if ctx.scope == crate::stage::Scope::Finish {
            ctx.case.remove_all(SHARDS_DIR)?;
        }
        Ok(())
    }

    fn run(&self, ctx: &StageContext<'_>) -> Result<StageSummary, StageError> {
        let started = std::time::Instant::now();
        let mut reader = ctx.db.reader()?;
        let (schema, fields) = schema(stores_text(ctx.db.options().profile));
        let _ = ctx.temp.remove_all(BUILD_DIR);
        let build_dir = ChannelDirectory::new(ctx.temp.clone(), BUILD_DIR)
            .map_err(|e| StageError::Other(format!("index temp directory: {e}")))?;
        // Where this run's index is kept: a batch's shard, or the case's
        // index. Its segments are built in temp and its merges written
        // there directly (`MovingDirectory`). The finish merges the shards
        // instead (`merge_shards`).
        let kept = match ctx.scope {
            crate::stage::Scope::Files { first, last } => {
                ctx.case.create_dir(SHARDS_DIR)?;
                Some(format!("{SHARDS_DIR}/{first}-{last}"))
            }
            crate::stage::Scope::Whole | crate::stage::Scope::Part { .. } => {
                Some(INDEX_DIR.to_string())
            }
            crate::stage::Scope::Finish => None,
        };
        let moving = match kept {
            Some(to) => {
                ctx.case.remove_all(&to)?;
                let dest = ChannelDirectory::new(ctx.case.clone(), to.as_str())
                    .map_err(|e| StageError::Other(format!("index directory `{to}`: {e}")))?;
                Some((to, MovingDirectory::new(build_dir.clone(), dest)))
            }
            None => None,
        };
        let dir: Box<dyn Directory> = match &moving {
            Some((_, m)) => Box::new(m.clone()),
            None => Box::new(build_dir.clone()),
        };
        let index = Index::create(dir, schema, IndexSettings::default()).map_err(tantivy_err)?;
        let threads = ctx.threads.max(1);
        let writers = writer_threads(self.o.memory_mib << 20, threads);
        let options = tantivy::indexer::IndexWriterOptions::builder()
            .num_worker_threads(writers)
            .memory_budget_per_thread(arena_per_thread(self.o.memory_mib << 20, writers))
            // The merges at the end run side by side, one group a thread.
            .num_merge_threads(writers)
            .build();
        let mut writer: IndexWriter<ItemDoc> =
            index.writer_with_options(options).map_err(tantivy_err)?;
        // One merge at the end, not background merges while indexing.
        writer.set_merge_policy(Box::new(NoMergePolicy));

        // Totals for progress.
        let mut total: u64 = 0;
        let skipped_known = if self.o.skip_known {
            reader.known_files_to_index()?
        } else {
            0
        };
        if self.o.files {
            let (n, bytes) = reader.files_to_index_totals()?;
            total += bytes;
            if n == 0 && ctx.scope == crate::stage::Scope::Whole {
                ctx.record(
                    Severity::Warning,
                    Problem {
                        message: "no files to index: run the filesystem stage first (or the evidence has no parsed file system)".into(),
                        ..Problem::default()
                    },
                )?;
            }
        }
        if self.o.carved {
            total += reader.carved_bytes_to_index()?;
        }
        ctx.progress.set_total(total, ProgressUnit::Bytes);

        let chunking = Chunking::of(ctx.db.options().profile);
        let budget = Arc::new(Budget {
            used: Mutex::new(0),
            freed: Condvar::new(),
            cap: QUEUE_BYTES,
        });
        let tally = Tally::default();
        let index_error: Mutex<Option<tantivy::TantivyError>> = Mutex::new(None);
        let (tx, rx) = bounded::<Job>(64);
        let feed: Result<(), StageError> = std::thread::scope(|scope| {
            for _ in 0..threads {
                let rx = rx.clone();
                let (writer, budget, tally, index_error) = (&writer, &budget, &tally, &index_error);
                scope.spawn(move || {
                    let mut window = vec![0u8; WINDOW];
                    for job in rx {
                        if ctx.cancel.load(Ordering::Relaxed) {
                            continue;
                        }
                        let mut sink = DocSink {
                            writer,
                            fields,
                            budget,
                            kind: job.kind,
                            id: job.id,
                            label: &job.label,
                            part: 0,
                            buf: String::new(),
                            chunking,
                            error: None,
                        };
                        let outcome = self.process(ctx, &job, &mut sink, &mut window);
                        if let Some(e) = sink.error.take() {
                            let mut slot = index_error
                                .lock()
                                .unwrap_or_else(std::sync::PoisonError::into_inner);
                            slot.get_or_insert(e);
                        }
                        match outcome {
                            Ok(Outcome::Indexed {
                                format,
                                text_bytes,
                                docs,
                                problems,
                                capped,
                            }) => {
                                tally.items.fetch_add(1, Ordering::Relaxed);
                                tally.bytes.fetch_add(job.size(), Ordering::Relaxed);
                                tally.text_bytes.fetch_add(text_bytes, Ordering::Relaxed);
                                tally.docs.fetch_add(docs, Ordering::Relaxed);
                                if capped {
                                    tally.capped.fetch_add(1, Ordering::Relaxed);
                                }
                                *tally
                                    .formats
                                    .lock()
                                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                                    .entry(format.name())
                                    .or_default() += 1;
                                if !problems.is_empty() {
                                    tally.with_problems.fetch_add(1, Ordering::Relaxed);
                                }
                                for p in problems {
                                    Self::record_problem(ctx, &job, Severity::Warning, p);
                                }
                            }
                            Ok(Outcome::HighEntropy(e)) => {
                                tally.high_entropy.fetch_add(1, Ordering::Relaxed);
                                Self::record_problem(
                                    ctx,
                                    &job,
                                    Severity::Finding,
                                    format!("entropy {e:.3} bits/byte: looks encrypted or compressed; not indexed"),
                                );
                            }
                            Err(e) => {
                                tally.unreadable.fetch_add(1, Ordering::Relaxed);
                                let _ = ctx.record(
                                    Severity::Error,
                                    Problem {
                                        item_kind: Some(job.kind.error_kind()),
                                        item_id: Some(job.id),
                                        path: Some(job.label.clone()),
                                        sectors: e.sector_range(),
                                        message: format!("content could not be read: {e}"),
                                    },
                                );
                            }
                        }
                    }
                });
            }
            drop(rx);
            let result = self.feed(ctx, &mut reader, &tx, &tally);
            drop(tx);
            result
        });
        feed?;
        ctx.check_cancel()?;
        if let Some(e) = index_error
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
        {
            return Err(tantivy_err(e));
        }
        ctx.progress.message("merging the index");
        // Phases, for run.json: reading and indexing, the merge, and the
        // copy (or shard merge) into the case directory.
        // The commit writes each thread's last segment: indexing, as
        // docs/run-json.md says, not merging.
        writer.commit().map_err(tantivy_err)?;
        let fed = started.elapsed();
        // The metas are dropped before the merges: a live `SegmentMeta`
        // keeps its segment's files from the garbage collection below, and
        // the merged-away segments stayed in the case's index (a 2-thread
        // run kept 153 MB where 97 MB were live).
        let groups = {
            let metas = index.searchable_segment_metas().map_err(tantivy_err)?;
            merge_groups(index.directory(), &metas, writers, self.o.segments_per_tier)
        };
        // The merges' output and the metadata go where the index is kept.
        if let Some((_, m)) = &moving {
            m.finishing();
        }
        // Independent groups, merged at once (tantivy queues them on its
        // merge threads); each waited for, the first error kept.
        let merging: Vec<_> = groups.iter().map(|group| writer.merge(group)).collect();
        let mut merge_error = None;
        for m in merging {
            if let Err(e) = m.wait()
                && merge_error.is_none()
            {
                merge_error = Some(e);
            }
        }
        if let Some(e) = merge_error {
            return Err(tantivy_err(e));
        }
        writer.garbage_collect_files().wait().map_err(tantivy_err)?;
        writer.wait_merging_threads().map_err(tantivy_err)?;
        drop(index);
        let merged_at = started.elapsed();

        // A batch's index is a shard in the case directory (a redone
        // batch replaces its own); the finish merges every shard with its
        // own items into the case's index.
        let (index_bytes, shard) = match &moving {
            Some((to, m)) => {
                // Live segments no merge rewrote (and the metadata, if
                // nothing was merged) are still in temp: copied.
                m.settle()
                    .map_err(|e| StageError::Other(format!("index: settling `{to}`: {e}")))?;
                let shard = matches!(ctx.scope, crate::stage::Scope::Files { .. });
                (ctx.case.tree_bytes(to), shard)
            }
            None => {
                ctx.case.remove_all(INDEX_DIR)?;
                let out = ChannelDirectory::new(ctx.case.clone(), INDEX_DIR)
                    .map_err(|e| StageError::Other(format!("index directory: {e}")))?;
                drop(merge_shards(ctx, build_dir, out.clone())?);
                out.sync_directory()
                    .map_err(|e| StageError::Other(format!("index: syncing the index: {e}")))?;
                // The shards go once this is committed (`committed`): a
                // finish redone after a lost lease merges them again.
                (ctx.case.tree_bytes(INDEX_DIR), false)
            }
        };
        drop(moving);
        let _ = ctx.temp.remove_all(BUILD_DIR);

        let secs = started.elapsed().as_secs_f64();
        let text_bytes = tally.text_bytes.load(Ordering::Relaxed);
        let mut summary = StageSummary {
            items: tally.items.load(Ordering::Relaxed),
            bytes: tally.bytes.load(Ordering::Relaxed),
            ..StageSummary::default()
        };
        let d = &mut summary.details;
        let round = |x: std::time::Duration| (x.as_secs_f64() * 1000.0).round() / 1000.0;
        d.insert(
            "phase_seconds".into(),
            serde_json::json!({
                "index": round(fed),
                "merge": round(merged_at - fed),
                "copy": round(started.elapsed() - merged_at),
            }),
        );
        d.insert("items_indexed".into(), summary.items.into());
        d.insert(
            "documents".into(),
            tally.docs.load(Ordering::Relaxed).into(),
        );
        d.insert("text_bytes".into(), text_bytes.into());
        if shard {
            d.insert("shard_bytes".into(), index_bytes.into());
        } else {
            d.insert("index_bytes".into(), index_bytes.into());
        }
        // Ratios of a whole run only: a unit's text is part of the index's.
        if text_bytes > 0 && ctx.scope == crate::stage::Scope::Whole {
            d.insert(
                "index_share_of_text".into(),
                serde_json::json!(
                    (index_bytes as f64 / text_bytes as f64 * 1000.0).round() / 1000.0
                ),
            );
        }
        if secs > 0.0 && ctx.scope == crate::stage::Scope::Whole {
            d.insert(
                "text_mb_per_s".into(),
                serde_json::json!((text_bytes as f64 / 1e6 / secs * 10.0).round() / 10.0),
            );
        }
        d.insert(
            "skipped_high_entropy".into(),
            tally.high_entropy.load(Ordering::Relaxed).into(),
        );
        d.insert("skipped_known".into(), skipped_known.into());
        d.insert(
            "not_decoded".into(),
            tally.not_decoded.load(Ordering::Relaxed).into(),
        );
        d.insert(
            "unreadable".into(),
            tally.unreadable.load(Ordering::Relaxed).into(),
        );
        d.insert(
            "items_with_problems".into(),
            tally.with_problems.load(Ordering::Relaxed).into(),
        );
        d.insert(
            "expansion_capped".into(),
            tally.capped.load(Ordering::Relaxed).into(),
        );
        let formats = tally
            .formats
            .into_inner()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        d.insert("formats".into(), serde_json::json!(formats));
        Ok(summary)
    }
}

impl IndexStage {
    /// Send every item to the workers: files in disk order, then carved
    /// items, slack and unallocated space.
    fn feed(
        &self,
        ctx: &StageContext<'_>,
        reader: &mut CaseReader,
        tx: &crossbeam_channel::Sender<Job>,
        tally: &Tally,
    ) -> Result<(), StageError> {
        let send = |job: Job| -> Result<(), StageError> {
            ctx.check_cancel()?;
            // Items go out in disk order: the evidence may read
            // neighbours in one run. Only an item's first window is sure
            // to be read (a high-entropy item stops there); the rest is
            // read on as a sequential reader's.
            if let Bytes::Runs(runs) = &job.bytes {
                let mut left = WINDOW as u64;
                for &(offset, len) in runs {
                    if left == 0 {
                        break;
                    }
                    let n = len.min(left);
                    if let Some(o) = offset {
                        ctx.evidence.hint(o, n);
                    }
                    left -= n;
                }
            }
            tx.send(job).map_err(|_| StageError::Interrupted)
        };
        // A planned case's batches index their files; its finish, every
        // other item (carved, slack, unallocated).
        if self.o.files && ctx.scope.has_files() {
            // Short pages, so no read transaction stays open while the
            // writer commits.
            let mut after = DISK_START;
            loop {
                let page =
                    reader.files_to_index(after, self.o.skip_known, ctx.scope.file_range())?;
                let Some(last) = page.last() else { break };
                after = last.key;
                for f in page {
                    let bytes = match f.content {
                        Ok(StoredContent::Resident(r)) => Bytes::Resident(r),
                        Ok(StoredContent::Runs(r)) => Bytes::Runs(r.pairs()),
                        Ok(StoredContent::None) => continue,
                        Ok(
                            c @ (StoredContent::Compressed { .. } | StoredContent::Decmpfs { .. }),
                        ) => Bytes::Decoded(
                            c.decoded().unwrap_or_default(),
                            EvidenceReader(Arc::clone(ctx.evidence)),
                        ),
                        Ok(StoredContent::Encoded { encoding, .. }) => {
                            self.not_decoded(ctx, tally, f.id, f.path, &encoding)?;
                            continue;
                        }
                        Err(err) => {
                            ctx.record(
                                Severity::Error,
                                Problem {
                                    item_kind: Some(ItemKind::File),
                                    item_id: Some(f.id),
                                    path: Some(f.path),
                                    message: format!(
                                        "unreadable extents in the files table: {err}"
                                    ),
                                    ..Problem::default()
                                },
                            )?;
                            continue;
                        }
                    };
                    send(Job {
                        kind: DocKind::File,
                        id: f.id,
                        label: f.path,
                        bytes,
                    })?;
                }
            }
        }
        if !ctx.scope.has_finish() {
            return Ok(());
        }
        if self.o.carved {
            self.feed_carved(ctx, reader, &send)?;
        }
        if self.o.slack {
            let mut after = i64::MIN;
            loop {
                let page = reader.slack(after)?;
                let Some(last) = page.last() else { break };
                after = last.id;
                for f in page {
                    let Ok(runs) = f.slack else {
                        continue;
                    };
                    send(Job {
                        kind: DocKind::Slack,
                        id: f.id,
                        label: format!("{} (slack)", f.path),
                        bytes: Bytes::Runs(runs.pairs()),
                    })?;
                }
            }
        }
        if self.o.unallocated {
            self.feed_unallocated(ctx, reader, &send)?;
        }
        Ok(())
    }

    /// Count and record a file whose content is stored in an encoding the
    /// index does not decode.
    fn not_decoded(
        &self,
        ctx: &StageContext<'_>,
        tally: &Tally,
        id: i64,
        path: String,
        encoding: &str,
    ) -> Result<(), StageError> {
        tally.not_decoded.fetch_add(1, Ordering::Relaxed);
        ctx.record(
            Severity::Warning,
            Problem {
                item_kind: Some(ItemKind::File),
                item_id: Some(id),
                path: Some(path),
                message: format!("content is stored {encoding}; not decoded, so not indexed"),
                ..Problem::default()
            },
        )
    }

    /// Carved items, in media order. A data item's content is its
    /// `extents` on the media (its offset and length); a meta item's row
    /// describes the directory entry or MFT record, so its content is read
    /// through `extents` too, or, for NTFS resident data (no extents), from
    /// the file the carve stage wrote to the case channel. Items without
    /// recovered content are skipped.
    fn feed_carved(
        &self,
        ctx: &StageContext<'_>,
        reader: &mut CaseReader,
        send: &dyn Fn(Job) -> Result<(), StageError>,
    ) -> Result<(), StageError> {
        let mut after = DISK_START;
        loop {
            let page = reader.carved_to_index(after, self.o.skip_known)?;
            let Some(last) = page.last() else { break };
            after = last.key;
            for c in page {
                let (offset, id, kind, method, name) =
                    (c.offset, c.id, c.type_name, c.method, c.name);
                let label = match name {
                    Some(n) if method == "meta" => {
                        format!("carved #{id} ({method} {kind} `{n}`, record at byte {offset})")
                    }
                    _ => format!("carved #{id} ({method} {kind} at byte {offset})"),
                };
                let problem = |message: String| {
                    ctx.record(
                        Severity::Error,
                        Problem {
                            item_kind: Some(ItemKind::Carved),
                            item_id: Some(id),
                            path: Some(label.clone()),
                            message,
                            ..Problem::default()
                        },
                    )
                };
                let bytes = match (c.extents, c.case_path) {
                    (Some(e), _) => match e {
                        Ok(r) => Bytes::Runs(r.pairs()),
                        Err(err) => {
                            problem(format!("unreadable extents in carved_items: {err}"))?;
                            continue;
                        }
                    },
                    (None, Some(p)) => match self.read_case_file(ctx, &p) {
                        Ok(b) => Bytes::Resident(b),
                        Err(message) => {
                            problem(message)?;
                            continue;
                        }
                    },
                    (None, None) => continue,
                };
                send(Job {
                    kind: DocKind::Carved,
                    id,
                    label,
                    bytes,
                })?;
            }
        }
        Ok(())
    }

    /// A carved item's content from the case channel (NTFS resident data,
    /// which has no place on the media of its own): at most `max_item_mib`.
    fn read_case_file(&self, ctx: &StageContext<'_>, path: &str) -> Result<Vec<u8>, String> {
        let file = ctx
            .case
            .open(path)
            .map_err(|e| format!("carved content `{path}` could not be opened: {e}"))?;
        let len = file
            .len()
            .map_err(|e| format!("carved content `{path}`: {e}"))?;
        let cap = self.o.max_item_mib << 20;
        if len > cap {
            return Err(format!(
                "carved content `{path}` of {len} bytes without extents is larger than max_item_mib; not indexed"
            ));
        }
        let mut buf = vec![0u8; usize::try_from(len).unwrap_or(0)];
        let mut at = 0;
        while at < buf.len() {
            let n = file
                .read_at(&mut buf[at..], at as u64)
                .map_err(|e| format!("carved content `{path}`: {e}"))?;
            if n == 0 {
                break;
            }
            at += n;
        }
        buf.truncate(at);
        Ok(buf)
    }

    /// Unallocated clusters of every parsed file system, as items of at
    /// most `unallocated_chunk_mib` of contiguous free space.
    fn feed_unallocated(
        &self,
        ctx: &StageContext<'_>,
        reader: &mut CaseReader,
        send: &dyn Fn(Job) -> Result<(), StageError>,
    ) -> Result<(), StageError> {
        let volumes: Vec<(i64, u64, u64)> = reader
            .volumes_parsed()?
            .into_iter()
            .map(|v| (v.id, v.offset, v.length))
            .collect();
        let chunk = self.o.unallocated_chunk_mib << 20;
        for (volume, offset, length) in volumes {
            let src = EvidenceReader(Arc::clone(ctx.evidence));
            let fs = match caseload_fs::open_filesystem(src, offset, length) {
                Ok(fs) => fs,
                Err(e) => {
                    ctx.record(
                        Severity::Error,
                        Problem {
                            item_kind: Some(ItemKind::Volume),
                            item_id: Some(volume),
                            message: format!("unallocated space not indexed: file system could not be opened: {e}"),
                            ..Problem::default()
                        },
                    )?;
                    continue;
                }
            };
            // Adjacent runs coalesce into one stretch; stretches are cut
            // into chunks.
            let mut pending: Option<(u64, u64)> = None;
            let mut failure: Option<StageError> = None;
            let flush = |start: u64, len: u64, failure: &mut Option<StageError>| {
                let mut at = start;
                while at < start + len && failure.is_none() {
                    let n = chunk.min(start + len - at);
                    let job = Job {
                        kind: DocKind::Unallocated,
                        id: i64::try_from(at).unwrap_or(i64::MAX),
                        label: format!("unallocated bytes {at}-{} (volume {volume})", at + n - 1),
                        bytes: Bytes::Runs(vec![(Some(at), n)]),
                    };
                    if let Err(e) = send(job) {
                        *failure = Some(e);
                    }
                    at += n;
                }
            };
            let walked = fs.unallocated_runs(|e| {
                if failure.is_some() {
                    return;
                }
                match pending {
                    Some((s, l)) if s + l == e.offset => pending = Some((s, l + e.len)),
                    Some((s, l)) => {
                        flush(s, l, &mut failure);
                        pending = Some((e.offset, e.len));
                    }
                    None => pending = Some((e.offset, e.len)),
                }
            });
            if let Some((s, l)) = pending {
                flush(s, l, &mut failure);
            }
            if let Some(e) = failure {
                return Err(e);
            }
            if let Err(e) = walked {
                ctx.record(
                    Severity::Error,
                    Problem {
                        item_kind: Some(ItemKind::Volume),
                        item_id: Some(volume),
                        message: format!("unallocated space of this volume not fully indexed: {e}"),
                        ..Problem::default()
                    },
                )?;
            }
        }
        Ok(())
    }
}

/// Largest group of segments merged into one, by their files' bytes.
/// tantivy holds each merged segment's term dictionary, fast fields and
/// norms in memory while merging (read through [`ChannelDirectory`] into
/// the heap, there being no memory map), about 37 MB per GB of index
/// (measured: merging 3.2 GB of segments at once took 130 MB over the
/// indexing phase, 12.8 GB took about 470 MB). Merging in groups of at
/// most this size keeps that flat whatever the image size, at the cost of
/// one segment per group in the final index (search reads them all).
const MERGE_BYTES: u64 = 512 << 20;

/// Smallest group worth a merge of its own when the merges are spread
/// over the threads: below it, a small case keeps one segment.
const MIN_GROUP_BYTES: u64 = 64 << 20;

/// How many bytes of segments a group gathers: the segments spread over
/// `threads` groups, merged side by side (so the merge uses the cores, as
/// a tiered policy leaves several segments, search reading them all),
/// no group above [`MERGE_BYTES`] nor below [`MIN_GROUP_BYTES`].
fn group_bytes(total: u64, threads: usize) -> u64 {
    total
        .div_ceil(threads.max(1) as u64)
        .clamp(MIN_GROUP_BYTES, MERGE_BYTES)
}

/// Segments an index may end with unmerged (the default of the
/// `segments_per_tier` option): Lucene's `TieredMergePolicy`
/// (under Solr, Autopsy's index) leaves up to `segmentsPerTier` = 10
/// segments of a tier as they are, and below its 2 MB floor every segment
/// is one tier. Merging a handful of segments only rewrote the index (on
/// two cores 0.6-0.9 s of a 3 s stage on 1 GiB, where the copy into the
/// case costs 0.13-0.2 s).
const SEGMENTS_PER_TIER: usize = 10;

/// The merges to run: none when there are at most `per_tier` segments;
/// otherwise consecutive segments (in id order) gathered until the next
/// would pass [`group_bytes`]; groups of one are left as they are.
fn merge_groups(
    dir: &dyn Directory,
    metas: &[SegmentMeta],
    threads: usize,
    per_tier: usize,
) -> Vec<Vec<SegmentId>> {
    if metas.len() <= per_tier {
        return Vec::new();
    }
    let size = |m: &SegmentMeta| -> u64 {
        [
            SegmentComponent::Postings,
            SegmentComponent::Positions,
            SegmentComponent::FastFields,
            SegmentComponent::FieldNorms,
            SegmentComponent::Terms,
            SegmentComponent::Store,
        ]
        .into_iter()
        .filter_map(|c| dir.get_file_handle(&m.relative_path(c)).ok())
        .map(|h| h.len() as u64)
        .sum()
    };
    let mut metas: Vec<(&SegmentMeta, u64)> = metas.iter().map(|m| (m, size(m))).collect();
    metas.sort_by_key(|(m, _)| m.id());
    let limit = group_bytes(metas.iter().map(|(_, b)| b).sum(), threads);
    let mut groups = Vec::new();
    let (mut group, mut bytes) = (Vec::new(), 0u64);
    for (m, b) in metas {
        if !group.is_empty() && bytes + b > limit {
            groups.push(std::mem::take(&mut group));
            bytes = 0;
        }
        group.push(m.id());
        bytes += b;
    }
    groups.push(group);
    groups.retain(|g| g.len() > 1);
    groups
}

/// The finish unit of a planned case: merge the index it built (in
/// `build`) with every batch's shard into one index in `out` (the case's
/// index directory), read and written through the channels (counted).
fn merge_shards(
    ctx: &StageContext<'_>,
    build: ChannelDirectory,
    out: ChannelDirectory,
) -> Result<Index, StageError> {
    let mut indexes = vec![Index::open(build).map_err(tantivy_err)?];
    let mut shards: Vec<String> = if ctx.case.exists(SHARDS_DIR) {
        ctx.case.list(SHARDS_DIR)?
    } else {
        Vec::new()
    };
    shards.sort();
    for shard in shards {
        let dir = ChannelDirectory::new(ctx.case.clone(), format!("{SHARDS_DIR}/{shard}"))
            .map_err(|e| StageError::Other(format!("index shard `{shard}`: {e}")))?;
        indexes.push(Index::open(dir).map_err(tantivy_err)?);
    }
    tantivy::indexer::merge_indices(&indexes, out).map_err(tantivy_err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_are_checked() {
        let opts = |s: &str| -> StageOptions { toml::from_str(s).unwrap() };
        assert!(build(&opts("")).is_ok());
        assert!(build(&opts("entropy_threshold = 9.0")).is_err());
        assert!(build(&opts("memory_mib = 1")).is_err());
        assert!(build(&opts("segments_per_tier = 0")).is_err());
        assert!(build(&opts("segments_per_tier = 1")).is_ok());
        assert!(build(&opts("no_such_option = true")).is_err());
        assert!(build(&opts("slack = true\nunallocated = true\nskip_known = true")).is_ok());
    }

    #[test]
    fn the_arenas_share_the_stage_budget_and_keep_tantivys_floor() {
        let mib = 1u64 << 20;
        // Today's two cores: 48 MiB a thread.
        assert_eq!(arena_per_thread(default_memory_mib() * mib, 2), 48 << 20);
        // More threads share it; the total does not grow with them ...
        assert_eq!(arena_per_thread(256 * mib, 8), 32 << 20);
        // ... until tantivy's floor.
        assert_eq!(arena_per_thread(96 * mib, 16), ARENA_MIN);
        assert_eq!(writer_threads(default_memory_mib() * mib, 16), 6);
        assert_eq!(writer_threads(default_memory_mib() * mib, 2), 2);
        assert_eq!(writer_threads(1, 4), 1);
        assert_eq!(writer_threads(96 * mib, 0), 1);
        assert_eq!(arena_per_thread(96 * mib, 0), 96 << 20);
    }

    #[test]
    fn merge_groups_spread_over_the_threads_within_their_bounds() {
        let mib = 1u64 << 20;
        // A small case: one group.
        assert_eq!(group_bytes(100 * mib, 16), MIN_GROUP_BYTES);
        // Two threads share 300 MiB of segments.
        assert_eq!(group_bytes(300 * mib, 2), 150 * mib);
        // A large case keeps the memory cap.
        assert_eq!(group_bytes(64 << 30, 4), MERGE_BYTES);
        assert_eq!(group_bytes(0, 0), MIN_GROUP_BYTES);
    }

    #[test]
    fn chunks_are_cut_on_character_boundaries() {
        // A three-byte character straddling the limit, no white space
        // before it after `min`: the cut steps back instead of panicking.
        let mut s = "x".repeat(9);
        s.push('\u{2028}'); // bytes 9..12
        s.push_str("yyyy");
        for max in 9..=12 {
            let c = Chunking::cut(&s, 2, max);
            assert!(s.is_char_boundary(c) && c <= max, "max {max}: cut {c}");
        }
        // White space after `min` is still preferred.
        assert_eq!(Chunking::cut("aaaa bbbb cccc", 2, 12), 9);
        // A limit past the end is the end.
        assert_eq!(Chunking::cut("short", 1, 100), 5);
    }

    #[test]
    fn budget_blocks_until_permits_drop() {
        let b = Arc::new(Budget {
            used: Mutex::new(0),
            freed: Condvar::new(),
            cap: 100,
        });
        let p1 = b.acquire(80);
        let b2 = Arc::clone(&b);
        let t = std::thread::spawn(move || {
            let _p = b2.acquire(50);
            *b2.used.lock().unwrap()
        });
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(!t.is_finished());
        drop(p1);
        assert_eq!(t.join().unwrap(), 50);
        // A single request larger than the cap still goes through alone.
        let big = b.acquire(1000);
        assert_eq!(*b.used.lock().unwrap(), 1000);
        drop(big);
    }
}
