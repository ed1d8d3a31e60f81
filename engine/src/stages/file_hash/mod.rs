//! `file-hash`: read every file's content from the evidence through its
//! extents and compute content hashes (MD5/SHA-1/SHA-256, selectable), the
//! type from its signature (flagging extensions that contradict it), its
//! entropy, and then duplicate groups by hash. Each part is switchable.
//!
//! Files are read in disk order of their first extent (as a suite sorts its
//! work to limit seeking); the reads that follow extents are the evidence
//! channel's real, mostly non-sequential, pattern. Workers on all threads
//! each take whole files, so results do not depend on the thread count; each
//! file's results are one queued UPDATE on the database channel.
//!
//! With `expand` (the ftk4 profile's default), compound files (ZIP, OOXML,
//! mailboxes, e-mail) are expanded into their members, each hashed and
//! recorded as an item of its own ([`expand`]).

mod expand;

use super::StageSpec;
use crate::casedb::{DISK_START, FileDigests, HashColumn, ItemKind, Reply, StoredContent, Write};
use crate::digest::Algorithm;
use crate::signature;
use crate::source::{EvidenceReader, SourceError, hex};
use crate::stage::{
    Problem, ProgressUnit, Severity, Stage, StageContext, StageError, StageOptions, StageSummary,
    parse_options,
};
use caseload_digests::Digest;
use caseload_fs::{ContentReader, Run};
use crossbeam_channel::bounded;
use serde::Deserialize;
use std::sync::atomic::{AtomicU64, Ordering};

pub(super) const SPEC: StageSpec = StageSpec {
    name: "file-hash",
    about: "content hashes, signature analysis, entropy and duplicate flagging for every file",
    build,
    needs: &[(
        &["filesystem"],
        "it hashes the file records the filesystem stage writes",
    )],
    default: super::Inclusion::Always,
    preflight: None,
    units: crate::stage::Units::FileBatches,
};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Options {
    #[serde(default = "default_algorithms")]
    algorithms: Vec<Algorithm>,
    #[serde(default = "yes")]
    signature: bool,
    #[serde(default = "yes")]
    entropy: bool,
    #[serde(default = "yes")]
    duplicates: bool,
    /// Expand compound files (default: the profile's choice).
    expand: Option<bool>,
}

fn default_algorithms() -> Vec<Algorithm> {
    vec![Algorithm::Md5, Algorithm::Sha1]
}

fn yes() -> bool {
    true
}

fn build(options: &StageOptions) -> Result<Box<dyn Stage>, StageError> {
    let o: Options = parse_options("file-hash", options)?;
    if o.duplicates && o.algorithms.is_empty() {
        return Err(StageError::Config {
            stage: "file-hash".into(),
            message: "`duplicates = true` needs at least one hash in `algorithms`".into(),
        });
    }
    Ok(Box::new(FileHash {
        md5: o.algorithms.contains(&Algorithm::Md5),
        sha1: o.algorithms.contains(&Algorithm::Sha1),
        sha256: o.algorithms.contains(&Algorithm::Sha256),
        signature: o.signature,
        entropy: o.entropy,
        duplicates: o.duplicates,
        expand: o.expand,
    }))
}

/// The file-hash stage.
#[derive(Debug)]
pub struct FileHash {
    md5: bool,
    sha1: bool,
    sha256: bool,
    signature: bool,
    entropy: bool,
    duplicates: bool,
    expand: Option<bool>,
}

/// Largest compound file expanded (its bytes are held to be parsed).
const EXPAND_MAX: u64 = 32 << 20;
/// Bytes of a file's head (or all of a smaller file) before it is judged
/// compound or not: the signature head.
const HEAD_LEN_U64: u64 = signature::HEAD_LEN as u64;

/// One file to process, as read from the files table.
struct Job {
    id: i64,
    path: String,
    name: String,
    size: u64,
    content: StoredContent,
    /// Signature analysis applies to files only (not directories).
    is_file: bool,
}

/// What was computed for one file.
#[derive(Default)]
struct Outcome {
    md5: Option<String>,
    sha1: Option<String>,
    sha256: Option<String>,
    signature: Option<&'static str>,
    mismatch: Option<bool>,
    entropy: Option<f64>,
    /// The content of a compound file to expand.
    compound: Option<Vec<u8>>,
    /// A compound file larger than [`EXPAND_MAX`].
    compound_too_large: bool,
}

struct Hashers {
    md5: Option<caseload_digests::Md5>,
    sha1: Option<caseload_digests::Sha1>,
    sha256: Option<caseload_digests::Sha256>,
    histogram: Option<signature::ByteHistogram>,
    head: Vec<u8>,
    want_head: bool,
    /// The content so far while it may be a compound file to expand.
    keep: Option<Vec<u8>>,
    /// A compound file too large to expand.
    too_large: bool,
    /// Whether the content is a compound file, once its head is known.
    compound: Option<bool>,
    /// The file's size.
    size: u64,
}

impl Hashers {
    fn new(stage: &FileHash, is_file: bool, size: u64, keep: Option<Vec<u8>>) -> Self {
        Hashers {
            keep,
            too_large: false,
            compound: None,
            size,
            md5: stage.md5.then(caseload_digests::Md5::new),
            sha1: stage.sha1.then(caseload_digests::Sha1::new),
            sha256: stage.sha256.then(caseload_digests::Sha256::new),
            histogram: stage.entropy.then(signature::ByteHistogram::default),
            head: Vec::new(),
            want_head: stage.signature && is_file,
        }
    }

    fn update(&mut self, data: &[u8]) {
        if let Some(h) = &mut self.md5 {
            h.update(data);
        }
        if let Some(h) = &mut self.sha1 {
            h.update(data);
        }
        if let Some(h) = &mut self.sha256 {
            h.update(data);
        }
        if let Some(hist) = &mut self.histogram {
            hist.add(data);
        }
        // The head serves signature analysis and the compound-file test.
        if (self.want_head || self.keep.is_some()) && self.head.len() < signature::HEAD_LEN {
            let take = (signature::HEAD_LEN - self.head.len()).min(data.len());
            self.head.extend_from_slice(&data[..take]);
        }
        if let Some(keep) = &mut self.keep {
            // Only compound files are kept, and only up to the cap. Whether
            // one is is decided on its head (all of a smaller file),
            // however the evidence cut its pieces.
            if self.compound.is_none() && self.head.len() as u64 >= self.size.min(HEAD_LEN_U64) {
                self.compound = Some(expand::is_compound(&self.head));
            }
            if self.compound == Some(false) {
                self.keep = None;
            } else if (keep.len() + data.len()) as u64 > EXPAND_MAX {
                self.too_large = true;
                self.keep = None;
            } else {
                keep.extend_from_slice(data);
            }
        }
    }

    fn finish(self, name: &str, size: u64) -> Outcome {
        let identified = self
            .want_head
            .then(|| signature::identify(&self.head))
            .flatten();
        Outcome {
            md5: self.md5.map(|h| hex(&h.finalize())),
            sha1: self.sha1.map(|h| hex(&h.finalize())),
            sha256: self.sha256.map(|h| hex(&h.finalize())),
            signature: identified,
            mismatch: if self.want_head {
                signature::extension_mismatch(name, identified, size)
            } else {
                None
            },
            entropy: self.histogram.map(|h| h.entropy()),
            // Content shorter than its size is decided on what there is.
            compound: self.keep.filter(|k| {
                !k.is_empty()
                    && self
                        .compound
                        .unwrap_or_else(|| expand::is_compound(&self.head))
            }),
            compound_too_large: self.too_large,
        }
    }
}

const READ_SIZE: usize = 1 << 20;

impl FileHash {
    /// Read a job's content through the evidence and compute its outcome.
    fn process(
        &self,
        ctx: &StageContext<'_>,
        job: &Job,
        buf: &mut [u8],
        keep: Option<Vec<u8>>,
    ) -> Result<Outcome, SourceError> {
        let mut hashers = Hashers::new(self, job.is_file, job.size, keep);
        match &job.content {
            StoredContent::Compressed { runs, .. } | StoredContent::Decmpfs { runs, .. } => {
                // Decoded a unit or block at a time by caseload-fs, reading
                // the stored runs through the evidence; read in order, so
                // the reader keeps its unit, block and table page from one
                // read to the next.
                let content = job.content.decoded().unwrap_or_default();
                let first = runs.first_offset().unwrap_or(0) / 512;
                let reader = EvidenceReader(std::sync::Arc::clone(ctx.evidence));
                let mut decoded = ContentReader::new(&reader, &content);
                let mut done = 0u64;
                while done < decoded.len() {
                    let n = usize::try_from((decoded.len() - done).min(buf.len() as u64))
                        .unwrap_or(buf.len());
                    let got = std::io::Read::read(&mut decoded, &mut buf[..n]).map_err(|e| {
                        SourceError::Corrupt {
                            first_sector: first,
                            last_sector: first,
                            reason: format!("decoding the compressed stream at byte {done}: {e}"),
                        }
                    })?;
                    if got == 0 {
                        break;
                    }
                    hashers.update(&buf[..got]);
                    ctx.progress.advance(got as u64);
                    done += got as u64;
                }
            }
            StoredContent::Resident(bytes) => hashers.update(bytes),
            StoredContent::Runs(runs) => {
                for run in &runs.0 {
                    let (offset, len) = match *run {
                        Run::Data { offset, len } => (Some(offset), len),
                        Run::Zeros { len } => (None, len),
                    };
                    match offset {
                        Some(o) => {
                            // The evidence hands its bytes over without a copy.
                            let got = ctx.evidence.visit(o, len, &mut |bytes| {
                                hashers.update(bytes);
                                ctx.progress.advance(bytes.len() as u64);
                            })?;
                            if got < len {
                                return Err(SourceError::Corrupt {
                                    first_sector: (o + got) / 512,
                                    last_sector: (o + len).div_ceil(512).saturating_sub(1),
                                    reason: "file extent runs past the end of the evidence".into(),
                                });
                            }
                        }
                        None => {
                            let mut done = 0u64;
                            buf.fill(0);
                            while done < len {
                                let n = usize::try_from((len - done).min(buf.len() as u64))
                                    .unwrap_or(buf.len());
                                hashers.update(&buf[..n]);
                                done += n as u64;
                                ctx.progress.advance(n as u64);
                            }
                        }
                    }
                }
            }
            // Refused before a worker gets them (not decoded).
            StoredContent::Encoded { .. } | StoredContent::None => {}
        }
        Ok(hashers.finish(&job.name, job.size))
    }
}

/// FTK's temp folder for extracted children, in the run's temp directory.
const ADTEMP: &str = "ADTemp";

/// ADTemp while the stage runs: removed when it ends, also on an error or
/// a cancel.
struct AdTemp<'a>(Option<&'a crate::channel::Channel>);

impl Drop for AdTemp<'_> {
    fn drop(&mut self) {
        if let Some(temp) = self.0 {
            let _ = temp.remove_all(ADTEMP);
        }
    }
}

/// What expansion did, over all workers.
#[derive(Default)]
struct Expanded {
    files: AtomicU64,
    items: AtomicU64,
    bytes: AtomicU64,
}

impl FileHash {
    /// Expand a compound file's content into items, each a queued write.
    fn expand_file(
        &self,
        ctx: &StageContext<'_>,
        job: &Job,
        data: &[u8],
        scratch: &str,
        expanded: &Expanded,
    ) {
        let wanted = expand::Wanted {
            md5: self.md5,
            sha1: self.sha1,
            sha256: self.sha256,
        };
        let x = expand::expand(data, job.id, wanted, ctx.temp, scratch);
        expanded.files.fetch_add(1, Ordering::Relaxed);
        expanded
            .items
            .fetch_add(x.members.len() as u64, Ordering::Relaxed);
        expanded.bytes.fetch_add(x.bytes, Ordering::Relaxed);
        for member in x.members {
            let _ = ctx.db.writer().exec(Write::Extracted(Box::new(member)));
        }
        for message in x.problems {
            warn_file(ctx, job, format!("expanding the compound file: {message}"));
        }
    }
}

/// Record a warning about a file (a worker goes on with the next).
fn warn_file(ctx: &StageContext<'_>, job: &Job, message: String) {
    let _ = ctx.record(
        Severity::Warning,
        Problem {
            item_kind: Some(ItemKind::File),
            item_id: Some(job.id),
            path: Some(job.path.clone()),
            message,
            ..Problem::default()
        },
    );
}

impl Stage for FileHash {
    fn name(&self) -> &'static str {
        "file-hash"
    }

    fn run(&self, ctx: &StageContext<'_>) -> Result<StageSummary, StageError> {
        // Every record with locatable content, directories and labels too:
        // TSK's bodyfile hashes them, and a listing should agree with it.
        let mut reader = ctx.db.reader()?;
        // A planned case's batch hashes its files only; its finish unit
        // only groups duplicates.
        let ids = ctx.scope.file_range();
        let (files, total) = if ctx.scope.has_files() {
            reader.files_to_hash_totals(ids)?
        } else {
            (0, 0)
        };
        if files == 0 && ctx.scope == crate::stage::Scope::Whole {
            ctx.record(
                Severity::Warning,
                Problem {
                    message: "no files to hash: run the filesystem stage first (or the evidence has no parsed file system)".into(),
                    ..Problem::default()
                },
            )?;
        }
        ctx.progress.set_total(total, ProgressUnit::Bytes);
        let hashed = AtomicU64::new(0);
        let bytes = AtomicU64::new(0);
        let mismatches = AtomicU64::new(0);
        let failed = AtomicU64::new(0);
        let (tx, rx) = bounded::<Job>(256);
        let workers = ctx.threads.max(1);
        let expand = self
            .expand
            .unwrap_or_else(|| ctx.db.options().profile.expands_compound_files());
        let expanded = Expanded::default();
        let _adtemp = if expand {
            ctx.temp.create_dir(ADTEMP)?;
            AdTemp(Some(ctx.temp))
        } else {
            AdTemp(None)
        };
        let feed_result: Result<(), StageError> = std::thread::scope(|scope| {
            for worker in 0..workers {
                let rx = rx.clone();
                let (hashed, bytes, mismatches, failed) = (&hashed, &bytes, &mismatches, &failed);
                let expanded = &expanded;
                scope.spawn(move || {
                    let mut buf = vec![0u8; READ_SIZE];
                    // The compound-file buffer, reused from file to file.
                    let mut spare: Vec<u8> = Vec::new();
                    let scratch = format!("{ADTEMP}/expand-{worker}");
                    for job in rx {
                        if ctx.cancel.load(Ordering::Relaxed) {
                            continue;
                        }
                        if let StoredContent::Encoded { encoding, .. } = &job.content {
                            failed.fetch_add(1, Ordering::Relaxed);
                            warn_file(
                                ctx,
                                &job,
                                format!("content is stored {encoding}; not decoded, so not hashed"),
                            );
                            continue;
                        }
                        let keep = (expand && job.is_file).then(|| {
                            spare.clear();
                            std::mem::take(&mut spare)
                        });
                        match self.process(ctx, &job, &mut buf, keep) {
                            Ok(mut o) => {
                                if let Some(data) = o.compound.take() {
                                    self.expand_file(ctx, &job, &data, &scratch, expanded);
                                    spare = data;
                                } else if o.compound_too_large {
                                    warn_file(
                                        ctx,
                                        &job,
                                        format!("compound file larger than {EXPAND_MAX} bytes: hashed, not expanded"),
                                    );
                                }
                                hashed.fetch_add(1, Ordering::Relaxed);
                                bytes.fetch_add(job.size, Ordering::Relaxed);
                                if o.mismatch == Some(true) {
                                    mismatches.fetch_add(1, Ordering::Relaxed);
                                }
                                let _ = ctx.db.writer().exec(Write::FileDigests(FileDigests {
                                    file_id: job.id,
                                    md5: o.md5,
                                    sha1: o.sha1,
                                    sha256: o.sha256,
                                    signature: o.signature,
                                    extension_mismatch: o.mismatch,
                                    entropy: o.entropy,
                                }));
                            }
                            Err(e) => {
                                failed.fetch_add(1, Ordering::Relaxed);
                                let _ = ctx.record(
                                    Severity::Error,
                                    Problem {
                                        item_kind: Some(ItemKind::File),
                                        item_id: Some(job.id),
                                        path: Some(job.path.clone()),
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
            // Disk order of the first extent; resident (no extent) first.
            // Read in short pages so no read transaction stays open while
            // the writer commits (a rollback-journal database would block).
            let mut after = DISK_START;
            'pages: loop {
                if !ctx.scope.has_files() {
                    break;
                }
                let page = reader.files_to_hash(after, ids)?;
                let Some(last) = page.last() else { break };
                after = last.key;
                for f in page {
                    if ctx.cancel.load(Ordering::Relaxed) {
                        break 'pages;
                    }
                    let content = match f.content {
                        Ok(c) => c,
                        Err(e) => {
                            ctx.record(
                                Severity::Error,
                                Problem {
                                    item_kind: Some(ItemKind::File),
                                    item_id: Some(f.id),
                                    path: Some(f.path),
                                    message: format!("unreadable extents in the files table: {e}"),
                                    ..Problem::default()
                                },
                            )?;
                            continue;
                        }
                    };
                    // Files go out in disk order: the evidence may read
                    // neighbours in one run.
                    if let StoredContent::Runs(runs)
                    | StoredContent::Compressed { runs, .. }
                    | StoredContent::Decmpfs { runs, .. } = &content
                    {
                        for run in &runs.0 {
                            if let Run::Data { offset, len } = *run {
                                ctx.evidence.hint(offset, len);
                            }
                        }
                    }
                    let job = Job {
                        id: f.id,
                        path: f.path,
                        name: f.name,
                        size: f.size,
                        content,
                        is_file: f.kind == "file",
                    };
                    if tx.send(job).is_err() {
                        break 'pages;
                    }
                }
            }
            drop(tx);
            Ok(())
        });
        feed_result?;
        ctx.check_cancel()?;

        let mut summary = StageSummary {
            items: hashed.load(Ordering::Relaxed),
            bytes: bytes.load(Ordering::Relaxed),
            ..StageSummary::default()
        };
        if self.duplicates && ctx.scope.has_finish() {
            let column = if self.sha256 {
                HashColumn::Sha256
            } else if self.sha1 {
                HashColumn::Sha1
            } else {
                HashColumn::Md5
            };
            let (groups, dup_files) = match ctx.db.writer().call(Write::Duplicates(column))? {
                Reply::Counts(g, f) => (g, f),
                other => {
                    return Err(StageError::Other(format!(
                        "duplicate groups: unexpected reply {other:?}"
                    )));
                }
            };
            summary
                .details
                .insert("duplicate_groups".into(), groups.into());
            summary
                .details
                .insert("duplicate_files".into(), dup_files.into());
        }
        summary
            .details
            .insert("files_hashed".into(), summary.items.into());
        if expand {
            let d = &mut summary.details;
            d.insert(
                "compound_files".into(),
                expanded.files.load(Ordering::Relaxed).into(),
            );
            d.insert(
                "extracted_items".into(),
                expanded.items.load(Ordering::Relaxed).into(),
            );
            d.insert(
                "extracted_bytes".into(),
                expanded.bytes.load(Ordering::Relaxed).into(),
            );
        }
        summary.details.insert(
            "files_not_hashed".into(),
            failed.load(Ordering::Relaxed).into(),
        );
        summary.details.insert(
            "extension_mismatches".into(),
            mismatches.load(Ordering::Relaxed).into(),
        );
        Ok(summary)
    }
}
