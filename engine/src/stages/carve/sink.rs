//! The sink: worker threads that write carved items to the case channel,
//! hash them, run their format verifiers and queue their database rows.
//!
//! The scan thread decides what an item is; the sink does the per-byte
//! work, in parallel across items. Each item is handled by one worker (by
//! id), so its messages arrive in order. Hashing runs [`LAG`] bytes behind
//! writing, so an item whose end is decided a little after its last byte
//! (a line end after `</html>`, a footer excluded by NEXT) can still be cut
//! without rehashing; for ends decided much later, the scan sends a
//! [`Msg::Mark`] where the hash state is kept.

use super::formats::{Format, Validation, Verdict, Verifier};
use super::ids::case_path;
use super::meta::{MetaRecord, NtfsData};
use super::region::{FsGeom, Volume};
use crate::casedb::{CarvedItem, CarvedMeta, Extents, ItemKind, Run, Write as DbWrite};
use crate::channel::ChannelFile;
use crate::signature;
use crate::source::hex;
use crate::stage::{Problem, Severity, StageContext, StageError};
use caseload_digests::Digest;
use caseload_lanes::Lanes;
use crossbeam_channel::Receiver;
use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// How far hashing trails writing.
pub const LAG: u64 = 4096;

/// Which digests to compute.
#[derive(Debug, Clone, Copy)]
pub struct Digests {
    /// MD5.
    pub md5: bool,
    /// SHA-1.
    pub sha1: bool,
    /// SHA-256.
    pub sha256: bool,
    /// Entropy.
    pub entropy: bool,
    /// Keep data items found broken (invalid, truncated); otherwise they
    /// are deleted from the case and counted only, as PhotoRec does unless
    /// told to keep corrupted files.
    pub keep_broken: bool,
}

/// What the scan knows when an item is accepted.
#[derive(Debug, Clone)]
pub struct Start {
    /// Row id.
    pub id: i64,
    /// Type recorded (`jpeg`, a user extension...).
    pub type_name: String,
    /// Extension of the carved file.
    pub ext: String,
    /// Media offset.
    pub offset: u64,
    /// `volumes.id`, when the filesystem stage recorded the volume.
    pub volume_id: Option<i64>,
    /// Where it was found (`unallocated`, `partition`, ...).
    pub source: &'static str,
    /// Which signature matched (`jpeg`, `scalpel.conf:12`).
    pub signature: String,
    /// The built-in format (user signatures have none).
    pub builtin: Option<Format>,
    /// The signature's maximum item size.
    pub max_size: u64,
}

/// Messages from the scan thread.
pub enum Msg {
    /// An item was accepted.
    Start(Box<Start>),
    /// Bytes of an item (its probation buffer).
    Bytes(i64, Vec<u8>),
    /// Bytes of an item from a scanned block.
    Slice(i64, Arc<Vec<u8>>, usize, usize),
    /// The item may end where its bytes end now: keep the hash state.
    Mark(i64),
    /// The item is `len` bytes long.
    End {
        /// Row id.
        id: i64,
        /// Length.
        len: u64,
        /// The delimiter's verdict.
        verdict: Verdict,
        /// Type and extension when known only at the end.
        final_type: Option<(&'static str, &'static str)>,
    },
    /// A metadata record to store, with its content when recoverable.
    Meta(Box<MetaJob>),
    /// A candidate rejected before it proved itself, at the start of a
    /// fragmented file: to be followed along the file's map (id 0, no
    /// row).
    Unproven(Box<Start>),
}

/// A meta-carved record to process.
pub struct MetaJob {
    /// Row id.
    pub id: i64,
    /// The record.
    pub record: MetaRecord,
    /// The volume it was found in.
    pub volume: Option<Arc<Volume>>,
    /// Where it was found.
    pub source: &'static str,
}

/// An item's bytes are kept for MD5 and SHA-1 up to this size (see
/// [`Kept`]).
const KEEP_MAX: usize = 4 << 20;

/// A sink worker's kept items, at most (sixteen at a time are hashed,
/// earlier when this bound is reached), and as much again in buffers it
/// reuses.
const KEPT_MAX: usize = 16 << 20;

/// A sink worker's open items keep this many bytes between them, at most:
/// an item that would take them past it streams from then on. Without it
/// the bound was [`scan::MAX_OPEN`](super::scan::MAX_OPEN) items of
/// [`KEEP_MAX`] each (256 MiB), and what was kept grew with the image (a
/// 4 GiB corpus kept 55 MB at its peak, a 1 GiB one 11 MB: more large
/// items open at once).
const OPEN_KEPT_MAX: usize = 16 << 20;

/// The bytes of an item whose MD5 and SHA-1 wait for [`Lanes`]. Each of
/// them is a single chain of dependent instructions, so the sink keeps the
/// bytes of small items and hashes them sixteen at a time when they end
/// (~7x the speed of one at a time for MD5, ~3x for SHA-1: they were the
/// sink's largest costs); an item that grows past [`KEEP_MAX`], and
/// content copied piece by piece, streams.
enum Kept {
    /// The item's bytes so far.
    Bytes(Vec<u8>),
    /// In a snapshot: the first bytes of those kept (as many as the
    /// snapshot's position).
    Prefix,
}

/// Digest state; a mark keeps a [`Hashers::snapshot`] of it.
struct Hashers {
    want: Digests,
    kept: Option<Kept>,
    md5: Option<caseload_digests::Md5>,
    sha1: Option<caseload_digests::Sha1>,
    sha256: Option<caseload_digests::Sha256>,
    histogram: Option<signature::ByteHistogram>,
}

impl Hashers {
    /// Hashers that stream every digest.
    fn new(d: Digests) -> Self {
        Hashers {
            want: d,
            kept: None,
            md5: d.md5.then(caseload_digests::Md5::new),
            sha1: d.sha1.then(caseload_digests::Sha1::new),
            sha256: d.sha256.then(caseload_digests::Sha256::new),
            histogram: d.entropy.then(signature::ByteHistogram::default),
        }
    }

    /// Hashers that keep the bytes for MD5 and SHA-1 (see [`Kept`]) in
    /// `buffer`.
    fn keeping(d: Digests, buffer: Vec<u8>) -> Self {
        if !(d.md5 || d.sha1) {
            return Hashers::new(d);
        }
        Hashers {
            kept: Some(Kept::Bytes(buffer)),
            md5: None,
            sha1: None,
            ..Hashers::new(d)
        }
    }

    fn update(&mut self, b: &[u8]) {
        if let Some(Kept::Bytes(v)) = &mut self.kept {
            v.extend_from_slice(b);
        }
        self.update_streamed(b);
        if let Some(h) = &mut self.sha256 {
            h.update(b);
        }
        if let Some(hist) = &mut self.histogram {
            hist.add(b);
        }
    }

    /// Bytes kept so far.
    fn kept_len(&self) -> usize {
        match &self.kept {
            Some(Kept::Bytes(v)) => v.len(),
            _ => 0,
        }
    }

    /// Whether `more` bytes would take the kept bytes past [`KEEP_MAX`].
    fn would_outgrow(&self, more: usize) -> bool {
        matches!(&self.kept, Some(Kept::Bytes(v)) if v.len() + more > KEEP_MAX)
    }

    /// Feed the streaming MD5 and SHA-1 (those there are).
    fn update_streamed(&mut self, b: &[u8]) {
        if let Some(h) = &mut self.md5 {
            h.update(b);
        }
        if let Some(h) = &mut self.sha1 {
            h.update(b);
        }
    }

    /// Stop keeping bytes: stream MD5 and SHA-1 (as wanted) from `bytes`.
    fn stream(&mut self, bytes: &[u8]) {
        self.kept = None;
        self.md5 = self.want.md5.then(caseload_digests::Md5::new);
        self.sha1 = self.want.sha1.then(caseload_digests::Sha1::new);
        self.update_streamed(bytes);
    }

    /// The state as it is now, to return to with [`Hashers::restore`].
    fn snapshot(&self) -> Hashers {
        Hashers {
            want: self.want,
            kept: self.kept.as_ref().map(|_| Kept::Prefix),
            md5: self.md5.clone(),
            sha1: self.sha1.clone(),
            sha256: self.sha256.clone(),
            histogram: self.histogram.clone(),
        }
    }

    /// Return to `snap`, taken after `at` bytes.
    fn restore(&mut self, mut snap: Hashers, at: u64) {
        if let Some(Kept::Prefix) = snap.kept
            && let Some(Kept::Bytes(mut v)) = self.kept.take()
        {
            v.truncate(usize::try_from(at).unwrap_or(usize::MAX));
            snap.kept = Some(Kept::Bytes(v));
        }
        *self = snap;
    }

    /// The digests, and the kept bytes when MD5 and SHA-1 are still to be
    /// computed.
    fn finish(self) -> (Digested, Option<Vec<u8>>) {
        let kept = match self.kept {
            Some(Kept::Bytes(v)) => Some(v),
            Some(Kept::Prefix) | None => None,
        };
        let digests = (
            self.md5.map(|h| hex(&h.finalize())),
            self.sha1.map(|h| hex(&h.finalize())),
            self.sha256.map(|h| hex(&h.finalize())),
            self.histogram.map(|h| h.entropy()),
        );
        (digests, kept)
    }
}

/// An item being written.
struct Item {
    start: Box<Start>,
    /// Content checks of its format.
    verifier: Option<Box<dyn Verifier>>,
    file: ChannelFile,
    rel: PathBuf,
    written: u64,
    hashed: u64,
    pending: Vec<u8>,
    hashers: Hashers,
    snapshot: Option<(u64, Hashers)>,
    failed: Option<String>,
}

/// Before item `id` takes `more` bytes: if the open items' kept bytes
/// would pass [`OPEN_KEPT_MAX`], it streams from now on (the items kept
/// so far stay with [`Lanes`]).
fn keep_within_budget(items: &mut HashMap<i64, Item>, id: i64, more: usize) {
    let kept: usize = items.values().map(|it| it.hashers.kept_len()).sum();
    if kept + more > OPEN_KEPT_MAX
        && let Some(it) = items.get_mut(&id)
    {
        it.stream_kept();
    }
}

impl Item {
    fn hash(&mut self, b: &[u8]) {
        if self.hashers.would_outgrow(b.len()) {
            self.stream_kept();
        }
        self.hashers.update(b);
        if let Some(v) = self.verifier.as_mut() {
            v.update(b);
        }
        self.hashed += b.len() as u64;
    }

    fn receive(&mut self, data: &[u8]) {
        if self.failed.is_none()
            && let Err(e) = self.file.write_all(data)
        {
            self.failed = Some(format!("writing the carved file failed: {e}"));
        }
        self.written += data.len() as u64;
        let total = self.pending.len() + data.len();
        let lag = LAG as usize;
        if total <= lag {
            self.pending.extend_from_slice(data);
            return;
        }
        let to_hash = total - lag;
        let from_pending = to_hash.min(self.pending.len());
        let pending = std::mem::take(&mut self.pending);
        self.hash(&pending[..from_pending]);
        let from_data = to_hash - from_pending;
        self.hash(&data[..from_data]);
        self.pending = pending;
        self.pending.drain(..from_pending);
        self.pending.extend_from_slice(&data[from_data..]);
    }

    /// The item outgrew [`KEEP_MAX`]: hash what was kept and stream the
    /// rest, in the snapshot too.
    fn stream_kept(&mut self) {
        let Some(Kept::Bytes(kept)) = self.hashers.kept.take() else {
            return;
        };
        let mut from = 0;
        if let Some((at, snap)) = &mut self.snapshot
            && let Some(Kept::Prefix) = snap.kept
        {
            from = usize::try_from(*at).unwrap_or(usize::MAX).min(kept.len());
            snap.stream(&kept[..from]);
            (self.hashers.md5, self.hashers.sha1) = (snap.md5.clone(), snap.sha1.clone());
        } else {
            self.hashers.stream(&[]);
        }
        self.hashers.update_streamed(&kept[from..]);
    }

    fn mark(&mut self) {
        let pending = std::mem::take(&mut self.pending);
        self.hash(&pending);
        self.pending = pending;
        self.pending.clear();
        self.snapshot = Some((self.hashed, self.hashers.snapshot()));
    }

    /// Settle the hash state on `len` bytes; the note when it could not.
    fn settle(&mut self, len: u64) -> Option<String> {
        if len >= self.hashed {
            let take = usize::try_from(len - self.hashed)
                .unwrap_or(usize::MAX)
                .min(self.pending.len());
            let pending = std::mem::take(&mut self.pending);
            self.hash(&pending[..take]);
            return None;
        }
        match self.snapshot.take() {
            Some((at, h)) if at == len => {
                self.hashers.restore(h, at);
                self.hashed = len;
                None
            }
            _ => Some(format!(
                "internal: end {len} before the hashed {} bytes",
                self.hashed
            )),
        }
    }
}

/// Shared sink state.
pub struct Sink<'a> {
    ctx: &'a StageContext<'a>,
    digests: Digests,
    /// A fatal error (case channel full...) stops the stage.
    pub fatal: std::sync::Mutex<Option<StageError>>,
    /// Set with `fatal`, for cheap polling.
    pub failed: AtomicBool,
    /// Items stored and their bytes.
    pub items: AtomicU64,
    /// Bytes written.
    pub bytes: AtomicU64,
    /// Validation counts: valid, invalid, truncated, unchecked.
    pub counts: [AtomicU64; 4],
    /// Meta records stored, and those with recovered content.
    pub meta: AtomicU64,
    /// Meta records whose content was recovered.
    pub meta_content: AtomicU64,
    /// Broken data items deleted (invalid, truncated).
    pub discarded: [AtomicU64; 2],
    /// Where fragmented, exactly mapped files start, when asked to follow
    /// broken items along them (see `follow`), and the broken items of
    /// built-in formats found there.
    pub broken: Option<(HashSet<u64>, std::sync::Mutex<Vec<Start>>)>,
    evidence_id: i64,
}

impl<'a> Sink<'a> {
    /// A sink writing through `ctx`.
    pub fn new(ctx: &'a StageContext<'a>, digests: Digests, follow: Option<HashSet<u64>>) -> Self {
        Sink {
            ctx,
            digests,
            fatal: std::sync::Mutex::new(None),
            failed: AtomicBool::new(false),
            items: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            counts: Default::default(),
            meta: AtomicU64::new(0),
            meta_content: AtomicU64::new(0),
            discarded: Default::default(),
            broken: follow.map(|starts| (starts, Default::default())),
            evidence_id: ctx.evidence_id,
        }
    }

    /// Count a stored item.
    fn count(&self, v: Validation) {
        self.counts[count_index(v)].fetch_add(1, Ordering::Relaxed);
        self.items.fetch_add(1, Ordering::Relaxed);
    }

    /// Keep `start` to be followed along the file system's map when a
    /// fragmented file starts there and a built-in format can delimit it.
    fn to_follow(&self, start: &Start) {
        if start.builtin.is_some()
            && let Some((starts, list)) = &self.broken
            && starts.contains(&start.offset)
        {
            list.lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push(start.clone());
        }
    }

    /// Drop a broken item (`discarded` slot `slot`) and its case file.
    fn discard(&self, slot: usize, rel: &std::path::Path) {
        self.discarded[slot].fetch_add(1, Ordering::Relaxed);
        if let Err(e) = self.ctx.case.remove_file(rel) {
            self.fail(e.into());
        }
    }

    /// The fatal error a worker met, if any.
    pub fn take_fatal(&self) -> Result<(), StageError> {
        match self
            .fatal
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
        {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    fn fail(&self, e: StageError) {
        let mut f = self
            .fatal
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if f.is_none() {
            *f = Some(e);
        }
        self.failed.store(true, Ordering::Relaxed);
    }

    /// Run one worker until its channel closes.
    pub fn work(&self, rx: Receiver<Msg>) {
        let mut items: HashMap<i64, Item> = HashMap::new();
        let mut lanes = Lanes::new(KEPT_MAX, self.digests.md5, self.digests.sha1);
        for msg in rx {
            if self.failed.load(Ordering::Relaxed) {
                continue;
            }
            match msg {
                Msg::Start(s) => {
                    let rel = case_path(s.id, &s.type_name, &s.ext);
                    match self.ctx.case.create(&rel) {
                        Ok(file) => {
                            let id = s.id;
                            items.insert(
                                id,
                                Item {
                                    verifier: s.builtin.and_then(Format::verifier),
                                    start: s,
                                    file,
                                    rel,
                                    written: 0,
                                    hashed: 0,
                                    pending: Vec::new(),
                                    hashers: Hashers::keeping(self.digests, lanes.buffer()),
                                    snapshot: None,
                                    failed: None,
                                },
                            );
                        }
                        Err(e) => self.fail(e.into()),
                    }
                }
                Msg::Bytes(id, b) => {
                    keep_within_budget(&mut items, id, b.len());
                    if let Some(it) = items.get_mut(&id) {
                        it.receive(&b);
                    }
                }
                Msg::Slice(id, block, from, to) => {
                    keep_within_budget(&mut items, id, to - from);
                    if let Some(it) = items.get_mut(&id) {
                        it.receive(&block[from..to]);
                    }
                }
                Msg::Mark(id) => {
                    if let Some(it) = items.get_mut(&id) {
                        it.mark();
                    }
                }
                Msg::End {
                    id,
                    len,
                    verdict,
                    final_type,
                } => {
                    if let Some(it) = items.remove(&id) {
                        self.end(it, len, verdict, final_type, &mut lanes);
                    }
                }
                Msg::Meta(job) => self.meta(*job),
                Msg::Unproven(s) => self.to_follow(&s),
            }
        }
        if !self.failed.load(Ordering::Relaxed) {
            self.insert_hashed(lanes.finish());
        }
    }

    fn end(
        &self,
        mut it: Item,
        len: u64,
        verdict: Verdict,
        final_type: Option<(&'static str, &'static str)>,
        lanes: &mut Lanes<Row>,
    ) {
        let settle_note = it.settle(len);
        if it.written > len
            && let Err(e) = it.file.file().set_len(len)
        {
            it.failed
                .get_or_insert(format!("cutting the carved file failed: {e}"));
        }
        let checked = it.verifier.take().and_then(|v| v.finish(len));
        let mut verdict = verdict.lower(checked);
        if let Some(n) = settle_note {
            verdict = verdict.lower(Some(Verdict::new(Validation::Invalid, n)));
        }
        let broken = broken_index(verdict.validation);
        if broken.is_some() {
            self.to_follow(&it.start);
        }
        if let Some(b) = broken
            && !self.digests.keep_broken
        {
            drop(it.file);
            self.discard(b, &it.rel);
            return;
        }
        let (mut type_name, mut rel) = (it.start.type_name.clone(), it.rel.clone());
        if let Some((t, ext)) = final_type
            && t != type_name
        {
            let new_rel = case_path(it.start.id, t, ext);
            if let Err(e) = new_rel
                .parent()
                .map_or(Ok(()), |parent| self.ctx.case.create_dir(parent))
            {
                self.fail(e.into());
                return;
            }
            match self.ctx.case.rename(&it.rel, &new_rel) {
                Ok(()) => {
                    type_name = t.to_string();
                    rel = new_rel;
                }
                Err(e) => {
                    it.failed
                        .get_or_insert(format!("renaming the carved file failed: {e}"));
                }
            }
        }
        let (digests, kept) = it.hashers.finish();
        self.count(verdict.validation);
        self.bytes.fetch_add(len, Ordering::Relaxed);
        let s = it.start;
        if let Some(f) = it.failed {
            let _ = self.ctx.record(
                Severity::Error,
                Problem {
                    item_kind: Some(ItemKind::Carved),
                    item_id: Some(s.id),
                    path: Some(rel.display().to_string()),
                    message: f,
                    ..Problem::default()
                },
            );
        }
        let row = Row {
            type_name,
            case_path: Some(rel.display().to_string()),
            ..Row::data(self.evidence_id, &s, len, verdict, digests)
        };
        match kept {
            Some(bytes) => self.insert_hashed(lanes.push(row, bytes)),
            None => self.insert(row),
        }
    }

    /// Store rows whose MD5 and SHA-1 [`Lanes`] computed.
    fn insert_hashed(&self, hashed: Vec<(Row, caseload_lanes::Digests)>) {
        for (mut row, d) in hashed {
            row.md5 = d.md5.map(|d| hex(&d));
            row.sha1 = d.sha1.map(|d| hex(&d));
            self.insert(row);
        }
    }

    fn insert(&self, row: Row) {
        let item = CarvedItem {
            id: row.id,
            evidence_id: row.evidence_id,
            volume_id: row.volume_id,
            method: row.method,
            offset: row.offset,
            length: row.length,
            type_name: row.type_name,
            validation: row.validation,
            case_path: row.case_path,
            md5: row.md5,
            sha1: row.sha1,
            sha256: row.sha256,
            entropy: row.entropy,
            detail: row.detail,
            source: row.source,
            signature: row.signature,
            meta: row.meta.map(|m| CarvedMeta {
                record: m.record,
                name: m.name,
                kind: m.kind,
                size: m.size,
                deleted: m.deleted,
                meta_addr: m.meta_addr,
                first_cluster: m.first_cluster,
                times: m.times,
            }),
            content_length: row.content_length,
            extents: row.extents,
        };
        if let Err(e) = self.ctx.db.writer().exec(DbWrite::Carved(Box::new(item))) {
            self.fail(e.into());
        }
    }

    /// Store a metadata record, recovering its content when its clusters
    /// are still free.
    fn meta(&self, job: MetaJob) {
        let rec = &job.record;
        let plan = content_plan(self.ctx, rec, job.volume.as_deref());
        self.meta.fetch_add(1, Ordering::Relaxed);
        let (mut validation, mut notes) = (Validation::Unchecked, Vec::new());
        if let Some(n) = &rec.note {
            notes.push(n.clone());
        }
        let mut type_name = "unknown".to_string();
        let mut digests = (None, None, None, None);
        let mut case_rel = None;
        let mut content_length = None;
        let mut extents_json = None;
        let (source, extents) = match plan {
            Plan::Nothing(why) => {
                notes.push(why);
                (None, None)
            }
            Plan::Content(pieces) => {
                let text = to_extents(&pieces);
                (Some(Content::Pieces(pieces)), Some(text))
            }
            Plan::Resident(bytes) => {
                notes.push("resident data, from the record itself".into());
                (Some(Content::Bytes(bytes)), None)
            }
        };
        if let Some(content) = source {
            match self.write_meta_content(job.id, &content, rec.size) {
                Ok(w) => {
                    self.meta_content.fetch_add(1, Ordering::Relaxed);
                    type_name = w.type_name;
                    if let Some(v) = w.verdict {
                        validation = v.validation;
                        if let Some(n) = v.note {
                            notes.push(n);
                        }
                    } else {
                        notes.push("content recovered; its format gives nothing to check".into());
                    }
                    digests = w.digests;
                    case_rel = Some(w.rel.display().to_string());
                    content_length = Some(w.length);
                    extents_json = extents;
                }
                Err(WriteError::Source(msg)) => notes.push(msg),
                Err(WriteError::Fatal(e)) => {
                    self.fail(e);
                    return;
                }
            }
        }
        self.count(validation);
        let (md5, sha1, sha256, entropy) = digests;
        let row = Row {
            id: job.id,
            evidence_id: self.evidence_id,
            volume_id: job.volume.as_ref().and_then(|v| v.volume_id),
            method: "meta",
            offset: rec.offset,
            length: rec.length,
            type_name,
            validation: validation.as_str(),
            case_path: case_rel,
            md5,
            sha1,
            sha256,
            entropy,
            detail: (!notes.is_empty()).then(|| notes.join("; ")),
            source: job.source,
            signature: None,
            meta: Some(job.record),
            content_length,
            extents: extents_json,
        };
        self.insert(row);
    }

    fn write_meta_content(
        &self,
        id: i64,
        content: &Content,
        size: u64,
    ) -> Result<Written, WriteError> {
        let size = match content {
            Content::Bytes(b) => b.len() as u64,
            Content::Pieces(_) => size,
        };
        // Identify the type from the first bytes, to name the file and
        // pick a verifier.
        let head_len = (signature::HEAD_LEN as u64).min(size) as usize;
        let mut head = vec![0u8; head_len];
        content.read(self.ctx, 0, &mut head)?;
        let kind = signature::identify(&head);
        let format = kind.and_then(Format::from_identified);
        let ext = format.map_or("bin", Format::extension);
        let rel = case_path(id, "meta", ext);
        let (digests, verdict) =
            self.copy_content(&rel, content, size, format.and_then(Format::verifier))?;
        Ok(Written {
            length: size,
            type_name: kind.unwrap_or("unknown").to_string(),
            digests,
            verdict,
            rel,
        })
    }

    /// Copy `size` bytes of content to the case file `rel`, hashing and
    /// verifying them on the way.
    fn copy_content(
        &self,
        rel: &std::path::Path,
        content: &Content,
        size: u64,
        mut verifier: Option<Box<dyn Verifier>>,
    ) -> Result<(Digested, Option<Verdict>), WriteError> {
        let mut buf = vec![0u8; (1u64 << 20).min(size) as usize];
        let mut file = self
            .ctx
            .case
            .create(rel)
            .map_err(|e| WriteError::Fatal(e.into()))?;
        let mut hashers = Hashers::new(self.digests);
        let mut done = 0u64;
        while done < size {
            self.ctx.check_cancel().map_err(WriteError::Fatal)?;
            let n = usize::try_from((size - done).min(buf.len() as u64)).unwrap_or(buf.len());
            content.read(self.ctx, done, &mut buf[..n])?;
            file.write_all(&buf[..n]).map_err(|e| {
                WriteError::Source(format!("writing the recovered content failed: {e}"))
            })?;
            hashers.update(&buf[..n]);
            if let Some(v) = verifier.as_mut() {
                v.update(&buf[..n]);
            }
            done += n as u64;
        }
        let verdict = verifier.and_then(|v| v.finish(size));
        self.bytes.fetch_add(size, Ordering::Relaxed);
        Ok((hashers.finish().0, verdict))
    }

    /// Store a broken item carved again along the clusters of the file
    /// at `path` (`pieces`, in order) as row `id`, with the delimiter's
    /// verdict on the joined bytes lowered by the format's verifier. A
    /// broken result is stored only with `keep_broken`.
    pub fn followed(
        &self,
        id: i64,
        b: &Start,
        pieces: &[Piece],
        path: &str,
        delimited: Verdict,
        final_type: Option<(&'static str, &'static str)>,
    ) {
        let (type_name, ext) = final_type.map_or((b.type_name.as_str(), b.ext.as_str()), |t| t);
        let size: u64 = pieces.iter().map(Piece::len).sum();
        let rel = case_path(id, type_name, ext);
        let content = Content::Pieces(pieces.to_vec());
        let verifier = b.builtin.and_then(Format::verifier);
        let (digests, verdict) = match self.copy_content(&rel, &content, size, verifier) {
            Ok(r) => r,
            Err(WriteError::Fatal(e)) => return self.fail(e),
            Err(WriteError::Source(msg)) => (
                (None, None, None, None),
                Some(Verdict::new(Validation::Invalid, msg)),
            ),
        };
        let how = format!(
            "carved along the {} fragments of `{path}` as the file system maps them (the contiguous carve broke off)",
            pieces.len()
        );
        let verdict = delimited
            .lower(Some(Verdict::new(Validation::Valid, how)))
            .lower(verdict);
        if let Some(b) = broken_index(verdict.validation)
            && !self.digests.keep_broken
        {
            self.discard(b, &rel);
            return;
        }
        self.count(verdict.validation);
        self.insert(Row {
            id,
            type_name: type_name.to_string(),
            case_path: Some(rel.display().to_string()),
            extents: Some(to_extents(pieces)),
            ..Row::data(self.evidence_id, b, size, verdict, digests)
        });
    }
}

/// The slot of `Sink::counts` for a validation.
fn count_index(v: Validation) -> usize {
    match v {
        Validation::Valid => 0,
        Validation::Invalid => 1,
        Validation::Truncated => 2,
        Validation::Unchecked => 3,
    }
}

/// The slot of `Sink::discarded` for a broken item's validation.
fn broken_index(v: Validation) -> Option<usize> {
    match v {
        Validation::Invalid => Some(0),
        Validation::Truncated => Some(1),
        Validation::Valid | Validation::Unchecked => None,
    }
}

/// Digests and entropy of content, as `Hashers::finish` gives them.
type Digested = (Option<String>, Option<String>, Option<String>, Option<f64>);

/// A row of `carved_items`.
struct Row {
    id: i64,
    evidence_id: i64,
    volume_id: Option<i64>,
    method: &'static str,
    offset: u64,
    length: u64,
    type_name: String,
    validation: &'static str,
    case_path: Option<String>,
    md5: Option<String>,
    sha1: Option<String>,
    sha256: Option<String>,
    entropy: Option<f64>,
    detail: Option<String>,
    source: &'static str,
    signature: Option<String>,
    meta: Option<MetaRecord>,
    content_length: Option<u64>,
    extents: Option<Extents>,
}

impl Row {
    /// The row of data item `s`, `len` bytes from its header on, with its
    /// type and extension as the scan saw them and no case file.
    fn data(evidence_id: i64, s: &Start, len: u64, verdict: Verdict, digests: Digested) -> Row {
        let (md5, sha1, sha256, entropy) = digests;
        Row {
            id: s.id,
            evidence_id,
            volume_id: s.volume_id,
            method: "data",
            offset: s.offset,
            length: len,
            type_name: s.type_name.clone(),
            validation: verdict.validation.as_str(),
            case_path: None,
            md5,
            sha1,
            sha256,
            entropy,
            detail: verdict.note,
            source: s.source,
            signature: Some(s.signature.clone()),
            meta: None,
            content_length: Some(len),
            extents: Some(Extents::single(s.offset, len)),
        }
    }
}

/// A piece of recovered content: bytes at a media offset, or zeros.
#[derive(Debug, Clone, Copy)]
pub enum Piece {
    /// `(offset, length)` on the media.
    At(u64, u64),
    /// Zeros (a sparse run).
    Zeros(u64),
}

impl Piece {
    /// Bytes it holds.
    pub fn len(&self) -> u64 {
        match *self {
            Piece::At(_, l) | Piece::Zeros(l) => l,
        }
    }
}

/// Pieces as the case database stores them.
pub(super) fn to_extents(pieces: &[Piece]) -> Extents {
    Extents(
        pieces
            .iter()
            .map(|p| match *p {
                Piece::At(offset, len) => Run::Data { offset, len },
                Piece::Zeros(len) => Run::Zeros { len },
            })
            .collect(),
    )
}

/// Stored extents as pieces.
pub(super) fn from_extents(extents: &Extents) -> Vec<Piece> {
    extents
        .0
        .iter()
        .map(|r| match *r {
            Run::Data { offset, len } => Piece::At(offset, len),
            Run::Zeros { len } => Piece::Zeros(len),
        })
        .collect()
}

enum Plan {
    Nothing(String),
    /// Content at these places on the media.
    Content(Vec<Piece>),
    /// Content held in the record itself (NTFS resident data).
    Resident(Vec<u8>),
}

pub enum WriteError {
    /// The content could not be read; the record is still stored.
    Source(String),
    /// The stage cannot go on.
    Fatal(StageError),
}

struct Written {
    length: u64,
    type_name: String,
    digests: Digested,
    verdict: Option<Verdict>,
    rel: PathBuf,
}

/// Recovered content to copy.
enum Content {
    Pieces(Vec<Piece>),
    Bytes(Vec<u8>),
}

impl Content {
    /// Fill `buf` with the content from content offset `from`.
    fn read(&self, ctx: &StageContext<'_>, from: u64, buf: &mut [u8]) -> Result<(), WriteError> {
        match self {
            Content::Pieces(p) => read_pieces(ctx, p, from, buf),
            Content::Bytes(b) => {
                let start = usize::try_from(from).unwrap_or(usize::MAX).min(b.len());
                let n = buf.len().min(b.len() - start);
                buf[..n].copy_from_slice(&b[start..start + n]);
                buf[n..].fill(0);
                Ok(())
            }
        }
    }
}

/// Read `buf.len()` bytes of the content at content offset `from`.
pub fn read_pieces(
    ctx: &StageContext<'_>,
    pieces: &[Piece],
    from: u64,
    buf: &mut [u8],
) -> Result<(), WriteError> {
    let mut pos = 0u64;
    let mut filled = 0usize;
    for p in pieces {
        let len = p.len();
        let end = pos + len;
        let want_from = from + filled as u64;
        if filled < buf.len() && want_from < end {
            let skip = want_from - pos;
            let n = usize::try_from(len - skip)
                .unwrap_or(usize::MAX)
                .min(buf.len() - filled);
            let dst = &mut buf[filled..filled + n];
            match *p {
                Piece::Zeros(_) => dst.fill(0),
                Piece::At(o, _) => {
                    let got = ctx.evidence.read_at(dst, o + skip).map_err(|e| {
                        WriteError::Source(format!("reading the content failed: {e}"))
                    })?;
                    if got < n {
                        return Err(WriteError::Source(
                            "content runs past the end of the evidence".into(),
                        ));
                    }
                }
            }
            filled += n;
        }
        pos = end;
        if filled == buf.len() {
            break;
        }
    }
    if filled < buf.len() {
        buf[filled..].fill(0);
    }
    Ok(())
}

/// Where a record's content is, if it can be recovered.
fn content_plan(ctx: &StageContext<'_>, rec: &MetaRecord, volume: Option<&Volume>) -> Plan {
    if rec.kind != "file" {
        return Plan::Nothing("a directory: no content".into());
    }
    if rec.size == 0 {
        return Plan::Nothing("empty file".into());
    }
    let mut read =
        |at: u64, buf: &mut [u8]| matches!(ctx.evidence.read_at(buf, at), Ok(n) if n == buf.len());
    match (&rec.data, volume.map(|v| &v.fs)) {
        (NtfsData::Resident(bytes), _) => Plan::Resident(bytes.clone()),
        (NtfsData::Encoded, _) => {
            Plan::Nothing("compressed or encrypted stream: not recovered".into())
        }
        (
            NtfsData::Runs(runs),
            Some(FsGeom::Ntfs {
                geometry, bitmap, ..
            }),
        ) => {
            let cs = geometry.cluster_size;
            let mut pieces = Vec::new();
            let mut left = rec.size;
            for &(lcn, count) in runs {
                if left == 0 {
                    break;
                }
                let bytes = count.saturating_mul(cs).min(left);
                match lcn {
                    Some(c) => {
                        if !clusters_free_ntfs(geometry, bitmap, c, count, &mut read) {
                            return Plan::Nothing(
                                "its clusters are allocated to other data now".into(),
                            );
                        }
                        pieces.push(Piece::At(geometry.base + c * cs, bytes));
                    }
                    None => pieces.push(Piece::Zeros(bytes)),
                }
                left -= bytes;
            }
            if left > 0 {
                return Plan::Nothing("its runs are shorter than its size".into());
            }
            Plan::Content(pieces)
        }
        (NtfsData::Runs(_), _) => {
            Plan::Nothing("found outside an NTFS volume: clusters cannot be placed".into())
        }
        (NtfsData::None, Some(FsGeom::Fat(g))) => {
            let Some(first) = rec.first_cluster else {
                return Plan::Nothing("no first cluster".into());
            };
            let n = rec.size.div_ceil(g.cluster_size);
            if first.saturating_add(n - 1) > g.last_cluster {
                return Plan::Nothing("its clusters run past the end of the volume".into());
            }
            // TSK-style recovery: the clusters from the first one on, for
            // the size, all of them free now.
            match g.all_free(first, n, &mut read) {
                Some(true) => {}
                Some(false) => {
                    return Plan::Nothing("its clusters are allocated to other data now".into());
                }
                None => return Plan::Nothing("the FAT could not be read".into()),
            }
            Plan::Content(vec![Piece::At(g.cluster_offset(first), rec.size)])
        }
        _ => Plan::Nothing("found outside a parsed FAT volume: clusters cannot be placed".into()),
    }
}

/// Whether clusters `[first, first + count)` are free in `$Bitmap`.
fn clusters_free_ntfs(
    g: &super::meta::NtfsGeometry,
    bitmap: &[(Option<u64>, u64)],
    first: u64,
    count: u64,
    read: &mut dyn FnMut(u64, &mut [u8]) -> bool,
) -> bool {
    if bitmap.is_empty() {
        return false;
    }
    if count == 0 {
        return true;
    }
    let end = first.saturating_add(count);
    let (b0, b1) = (first / 8, (end - 1) / 8 + 1);
    let mut byte = b0;
    let mut buf = vec![0u8; 4096];
    while byte < b1 {
        let n = usize::try_from((b1 - byte).min(buf.len() as u64)).unwrap_or(buf.len());
        // Bitmap bytes may cross a run boundary: read them one run piece
        // at a time.
        let mut k = 0usize;
        while k < n {
            let pos = byte + k as u64;
            let Some((at, room)) = file_offset(g, bitmap, pos) else {
                return false;
            };
            let m = usize::try_from(room.min((n - k) as u64)).unwrap_or(n - k);
            if !read(at, &mut buf[k..k + m]) {
                return false;
            }
            k += m;
        }
        for (i, &b) in buf[..n].iter().enumerate() {
            let base = (byte + i as u64) * 8;
            for bit in 0..8u64 {
                let c = base + bit;
                if c >= first && c < end && b & (1 << bit) != 0 {
                    return false;
                }
            }
        }
        byte += n as u64;
    }
    true
}

/// Media offset of byte `pos` of a non-resident stream with `runs`, and
/// the bytes left in its run from there.
fn file_offset(
    g: &super::meta::NtfsGeometry,
    runs: &[(Option<u64>, u64)],
    pos: u64,
) -> Option<(u64, u64)> {
    let cs = g.cluster_size;
    let mut vpos = 0u64;
    for &(lcn, count) in runs {
        let len = count.checked_mul(cs)?;
        if pos < vpos + len {
            return lcn.map(|l| (g.base + l * cs + (pos - vpos), vpos + len - pos));
        }
        vpos += len;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::channel::{Channel, ChannelKind};

    /// The MD5 and SHA-1 an item ends with, its bytes fed in 64 KiB
    /// pieces with a mark after `mark` bytes (if any), then cut to `len`.
    fn carve(data: &[u8], mark: Option<usize>, len: usize) -> (String, String) {
        let dir = tempfile::tempdir().unwrap();
        let case = Channel::new(ChannelKind::Case, dir.path(), Vec::new());
        let digests = Digests {
            md5: true,
            sha1: true,
            sha256: false,
            entropy: true,
            keep_broken: false,
        };
        let mut it = Item {
            start: Box::new(Start {
                id: 1,
                type_name: "jpeg".into(),
                ext: "jpg".into(),
                offset: 0,
                volume_id: None,
                source: "image",
                signature: "jpeg".into(),
                builtin: None,
                max_size: u64::MAX,
            }),
            verifier: None,
            file: case.create("1.jpg").unwrap(),
            rel: "1.jpg".into(),
            written: 0,
            hashed: 0,
            pending: Vec::new(),
            hashers: Hashers::keeping(digests, Vec::new()),
            snapshot: None,
            failed: None,
        };
        let mut fed = 0;
        for piece in data.chunks(64 << 10) {
            if let Some(m) = mark
                && fed <= m
                && m < fed + piece.len()
            {
                it.receive(&piece[..m - fed]);
                it.mark();
                it.receive(&piece[m - fed..]);
            } else {
                it.receive(piece);
            }
            fed += piece.len();
        }
        assert_eq!(it.settle(len as u64), None);
        let ((md5, sha1, _, _), kept) = it.hashers.finish();
        match kept {
            Some(bytes) => {
                assert!(md5.is_none() && sha1.is_none());
                assert_eq!(bytes.len(), len);
                (
                    hex(&md5::Md5::digest(&bytes)),
                    hex(&sha1::Sha1::digest(&bytes)),
                )
            }
            None => (md5.unwrap(), sha1.unwrap()),
        }
    }

    /// Kept and streamed MD5 and SHA-1 agree with plain digests of the
    /// item's bytes: small and large items, cut at their end or back at a mark,
    /// with the mark before or after the item outgrows KEEP_MAX.
    #[test]
    fn kept_or_streamed_digests_are_those_of_the_item() {
        let data = crate::noise::noise(KEEP_MAX + 300_000, 7);
        let cases = [
            (10_000, None, 10_000),
            (20_000, Some(5_000), 5_000),
            (20_000, Some(5_000), 20_000),
            (data.len(), None, data.len()),
            (data.len(), Some(1_000_000), 1_000_000),
            (data.len(), Some(1_000_000), data.len()),
            (data.len(), Some(KEEP_MAX + 100_000), KEEP_MAX + 100_000),
        ];
        for (fed, mark, len) in cases {
            let want = (
                hex(&md5::Md5::digest(&data[..len])),
                hex(&sha1::Sha1::digest(&data[..len])),
            );
            assert_eq!(
                carve(&data[..fed], mark, len),
                want,
                "fed {fed}, mark {mark:?}, len {len}"
            );
        }
    }
}
