//! The single pass: regions are cut into blocks, read and searched in
//! parallel, and consumed strictly in order by one thread that runs every
//! open item's delimiter and hands item bytes to the sink.
//!
//! Pipeline: a producer thread turns regions into block jobs (at most
//! `in_flight` exist at once: it waits for a permit per job, which the
//! consumer returns when it is done with a block); reader threads read
//! each block (E01 chunks inflate there) and search it for headers and
//! metadata records; the consumer reorders blocks by sequence number and
//! processes them. Blocks are aligned to multiples of their size on the
//! media, so sectors never straddle two blocks, and the consumer keeps one
//! block of look-behind to find headers that straddle two.
//!
//! Everything the consumer decides depends only on the bytes and their
//! order, never on timing, so items, ids and files are the same whatever
//! the thread count.

use super::formats::Context;
use super::formats::{Cut, Delimiter, Step, Validation, Verdict};
use super::ids::Ids;
use super::meta::{
    FatSectorParser, MetaRecord, Report, declared_record_size, is_dir_sector, is_file_record_start,
    parse_file_record,
};
use super::pattern::HeaderSearch;
use super::region::{FsGeom, Region};
use super::signatures::Sig;
use super::sink::{MetaJob, Msg, Start};
use crate::source::{Block, SourceError, read_block};
use crate::stage::{StageContext, StageError};
use crossbeam_channel::{Receiver, Sender, bounded, unbounded};
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Bytes an item may show before it must have proved itself.
pub const PROBATION: usize = 64 << 10;

/// Open items at most; further headers are skipped (and counted) until
/// one ends.
pub const MAX_OPEN: usize = 64;

/// Sector size of the aligned search and of metadata records.
pub const SECTOR: u64 = 512;

/// What a reader found in a block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum HitKind {
    /// Header of signature `i`.
    Data(u32),
    /// A FAT directory sector.
    Fat,
    /// An NTFS `FILE` record.
    Ntfs,
}

/// A hit at a media offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Hit {
    /// Media offset.
    pub pos: u64,
    /// What.
    pub kind: HitKind,
}

/// A block to read.
struct Job {
    seq: u64,
    region: Arc<Region>,
    offset: u64,
    len: usize,
    last: bool,
}

/// A block read and searched.
struct Scanned {
    job: Job,
    data: Arc<Vec<u8>>,
    hits: Vec<Hit>,
    errors: Vec<SourceError>,
}

/// Scan settings.
pub struct Settings<'a> {
    /// Signatures, indexed as the search's patterns.
    pub sigs: &'a [Sig],
    /// Header search (`None` when data carving is off).
    pub search: Option<&'a HeaderSearch>,
    /// Block size.
    pub block: u64,
    /// Reader threads.
    pub readers: usize,
    /// Blocks in flight at most.
    pub in_flight: usize,
    /// How items are numbered.
    pub ids: Ids,
    /// Where fragmented files the filesystem stage mapped start: a
    /// candidate rejected there before it proved itself is handed on to be
    /// followed along the file's map (its first fragment may end inside a
    /// long header segment, so the contiguous bytes never prove it).
    pub fragmented: Option<&'a std::collections::HashSet<u64>>,
}

/// What the scan did.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Bytes scanned.
    pub bytes: u64,
    /// Regions scanned.
    pub regions: u64,
    /// Headers found (before probation).
    pub candidates: u64,
    /// Candidates rejected in probation.
    pub rejected: u64,
    /// Headers skipped because too many items were open.
    pub skipped: u64,
    /// Headers inside an open item of their family.
    pub nested: u64,
    /// Numbers used (items accepted, also those dropped later).
    pub used: u64,
    /// Items not stored because the part ran out of provisional ids.
    pub unnumbered: u64,
}

/// Search a block for headers and metadata records.
fn search_block(settings: &Settings<'_>, region: &Region, offset: u64, data: &[u8]) -> Vec<Hit> {
    let mut hits = Vec::new();
    if region.data
        && let Some(search) = settings.search
    {
        search.find(data, offset, 0..data.len(), |p, i| {
            hits.push(Hit {
                pos: offset + p as u64,
                kind: HitKind::Data(i as u32),
            })
        });
    }
    if region.meta.is_some() {
        let fat = region.volume.as_ref().and_then(|v| match &v.fs {
            FsGeom::Fat(g) => Some(g),
            _ => None,
        });
        let first = offset.div_ceil(SECTOR) * SECTOR;
        let mut s = first;
        while s + SECTOR <= offset + data.len() as u64 && s + SECTOR <= region.end {
            let at = (s - offset) as usize;
            let sector = &data[at..at + SECTOR as usize];
            if is_file_record_start(sector) {
                hits.push(Hit {
                    pos: s,
                    kind: HitKind::Ntfs,
                });
            } else if let Some(g) = fat
                && is_dir_sector(sector, Some(g))
            {
                hits.push(Hit {
                    pos: s,
                    kind: HitKind::Fat,
                });
            }
            s += SECTOR;
        }
    }
    hits.sort_unstable();
    hits
}

/// An item being delimited.
struct Open {
    sig: usize,
    start: u64,
    /// Next byte to feed.
    fed: u64,
    max_end: u64,
    delim: Box<dyn Delimiter>,
    /// Bytes held until the item is accepted.
    probation: Vec<u8>,
    /// Row id once accepted.
    id: Option<i64>,
    /// Bytes handed to the sink.
    forwarded: u64,
    last_mark: Option<u64>,
    /// Where it was found.
    source: &'static str,
    volume_id: Option<i64>,
}

/// An NTFS record whose bytes continue into the next block.
struct PartialRecord {
    at: u64,
    bytes: Vec<u8>,
    want: usize,
    region: Arc<Region>,
}

/// The ordered consumer.
struct Consumer<'a, 'c> {
    ctx: &'a StageContext<'c>,
    settings: &'a Settings<'a>,
    sinks: &'a [Sender<Msg>],
    failed: &'a AtomicBool,
    open: Vec<Open>,
    /// Numbers used so far.
    next: u64,
    fat: FatSectorParser,
    record: Option<PartialRecord>,
    /// The block before the one being processed, when adjacent in the
    /// same region (look-behind for context checks).
    behind: Option<(u64, Arc<Vec<u8>>)>,
    out: Outcome,
}

impl Consumer<'_, '_> {
    fn send(&self, id: i64, msg: Msg) -> bool {
        let n = self.sinks.len().max(1);
        let w = usize::try_from(id.unsigned_abs()).unwrap_or(0) % n;
        self.sinks[w].send(msg).is_ok()
    }

    fn region_source(region: &Region) -> &'static str {
        region.source.as_str()
    }

    /// Process one block; `junction` are header hits straddling into the
    /// next block.
    fn process(&mut self, b: &Scanned, junction: Vec<Hit>) -> Result<(), StageError> {
        for e in &b.errors {
            self.ctx.record_source_error(e)?;
        }
        let off = b.job.offset;
        let end = off + b.data.len() as u64;
        let region = &b.job.region;
        self.complete_record(b);
        let mut hits = b.hits.clone();
        hits.extend(junction);
        hits.sort_unstable();
        for hit in hits {
            match hit.kind {
                HitKind::Data(i) => {
                    let i = i as usize;
                    let sig = &self.settings.sigs[i];
                    if sig.ends_at_own_header() {
                        // Open items reach the header first; an accepted
                        // one of the same family is cut short there.
                        self.advance(b, hit.pos.min(end));
                        let family = sig.family;
                        if let Some(j) = self.open.iter().position(|o| {
                            o.id.is_some()
                                && self.settings.sigs[o.sig].family == family
                                && o.start < hit.pos
                        }) {
                            self.close(j, b, Cut::NextHeader);
                        }
                    }
                    let sig = &self.settings.sigs[i];
                    let target = (hit.pos + sig.header.len() as u64).min(end);
                    self.advance(b, target);
                    self.out.candidates += 1;
                    if !self.context_ok(sig.context, b, hit.pos) {
                        continue;
                    }
                    let nested = self.open.iter().any(|o| {
                        o.id.is_some()
                            && self.settings.sigs[o.sig].family == sig.family
                            && o.start < hit.pos
                    });
                    if nested {
                        self.out.nested += 1;
                        continue;
                    }
                    if self.open.len() >= MAX_OPEN {
                        self.out.skipped += 1;
                        continue;
                    }
                    self.open.push(Open {
                        sig: i,
                        start: hit.pos,
                        fed: hit.pos,
                        max_end: hit.pos.saturating_add(sig.max_size),
                        delim: sig.delimiter(),
                        probation: Vec::new(),
                        id: None,
                        forwarded: hit.pos,
                        last_mark: None,
                        source: region.source.as_str(),
                        volume_id: region.volume.as_ref().and_then(|v| v.volume_id),
                    });
                    let k = self.open.len() - 1;
                    self.feed(k, b, target);
                }
                HitKind::Fat => {
                    let at = (hit.pos - off) as usize;
                    let Some(sector) = b.data.get(at..at + SECTOR as usize) else {
                        continue;
                    };
                    let volume = region.volume.clone();
                    let geometry = volume.as_ref().and_then(|v| match &v.fs {
                        FsGeom::Fat(g) => Some(g.clone()),
                        _ => None,
                    });
                    let report = region.meta.unwrap_or(Report::DeletedOnly);
                    let mut found = Vec::new();
                    self.fat
                        .sector(sector, hit.pos, geometry.as_ref(), report, &mut |r| {
                            found.push(r)
                        });
                    for r in found {
                        self.meta(r, region);
                    }
                }
                HitKind::Ntfs => {
                    let at = (hit.pos - off) as usize;
                    let want = match region.volume.as_ref().map(|v| &v.fs) {
                        Some(FsGeom::Ntfs { geometry, .. }) => {
                            usize::try_from(geometry.record_size).unwrap_or(1024)
                        }
                        _ => declared_record_size(&b.data[at..]).map_or(0, |s| s as usize),
                    };
                    if want == 0 || hit.pos + want as u64 > region.end {
                        continue;
                    }
                    let avail = b.data.len() - at;
                    let take = want.min(avail);
                    let bytes = b.data[at..at + take].to_vec();
                    if take == want {
                        self.record_done(bytes, hit.pos, region);
                    } else {
                        self.record = Some(PartialRecord {
                            at: hit.pos,
                            bytes,
                            want,
                            region: Arc::clone(region),
                        });
                    }
                }
            }
            if self.failed.load(Ordering::Relaxed) {
                return Ok(());
            }
        }
        self.advance(b, end);
        if b.job.last {
            self.finish_all(Cut::RangeEnd);
            self.fat = FatSectorParser::default();
            self.record = None;
            self.behind = None;
        } else {
            self.behind = Some((off, Arc::clone(&b.data)));
        }
        Ok(())
    }

    /// Complete an NTFS record begun in the previous block.
    fn complete_record(&mut self, b: &Scanned) {
        let Some(mut p) = self.record.take() else {
            return;
        };
        let need = p.want - p.bytes.len();
        if b.job.offset != p.at + p.bytes.len() as u64 || b.data.len() < need {
            return;
        }
        p.bytes.extend_from_slice(&b.data[..need]);
        let region = Arc::clone(&p.region);
        self.record_done(p.bytes, p.at, &region);
    }

    fn record_done(&mut self, bytes: Vec<u8>, at: u64, region: &Arc<Region>) {
        let geometry = region.volume.as_ref().and_then(|v| match &v.fs {
            FsGeom::Ntfs { geometry, .. } => Some(geometry.clone()),
            _ => None,
        });
        let Some(r) = parse_file_record(bytes, at, geometry.as_ref()) else {
            return;
        };
        if region.meta == Some(Report::DeletedOnly) && !r.deleted {
            return;
        }
        self.meta(r, region);
    }

    /// The next item's id. A part that has used every provisional id it
    /// may (2^32 items) stops the scan: the stage then fails (the id
    /// given meanwhile is never committed).
    fn take_id(&mut self) -> i64 {
        match self.settings.ids.at(self.next) {
            Some(id) => {
                self.next += 1;
                id
            }
            None => {
                self.out.unnumbered += 1;
                self.failed.store(true, Ordering::Relaxed);
                0
            }
        }
    }

    fn meta(&mut self, record: MetaRecord, region: &Region) {
        let id = self.take_id();
        let job = MetaJob {
            id,
            record,
            volume: region.volume.clone(),
            source: Self::region_source(region),
        };
        self.send(id, Msg::Meta(Box::new(job)));
    }

    /// Context checks on the bytes before a hit (this block and the one
    /// behind it).
    fn context_ok(&self, context: Context, b: &Scanned, pos: u64) -> bool {
        if context == Context::Any {
            return true;
        }
        let off = b.job.offset;
        let region_start = b.job.region.start;
        let want = 1024u64.min(pos - region_start) as usize;
        let mut before = Vec::with_capacity(want);
        let in_block = (pos - off) as usize;
        if in_block < want
            && let Some((boff, bdata)) = &self.behind
            && boff + bdata.len() as u64 == off
        {
            let need = want - in_block;
            before.extend_from_slice(&bdata[bdata.len().saturating_sub(need)..]);
        }
        before.extend_from_slice(&b.data[in_block.saturating_sub(want)..in_block]);
        match context {
            Context::Any => true,
            Context::HtmlRoot => {
                let lower: Vec<u8> = before.iter().map(u8::to_ascii_lowercase).collect();
                let Some(d) = memchr::memmem::rfind(&lower, b"<!doctype html") else {
                    return true;
                };
                let Some(close) = lower[d..].iter().position(|&c| c == b'>') else {
                    return true;
                };
                !lower[d + close + 1..].iter().all(u8::is_ascii_whitespace)
            }
            Context::MessageStart => {
                // Inside a header block the previous line is a field (or a
                // folded continuation) and ends right before the hit.
                if before.last() != Some(&b'\n') {
                    return true;
                }
                let body = &before[..before.len() - 1];
                let body = body.strip_suffix(b"\r").unwrap_or(body);
                let line_start = body.iter().rposition(|&c| c == b'\n').map_or(0, |p| p + 1);
                let line = &body[line_start..];
                let folded = line.first().is_some_and(|&c| c == b' ' || c == b'\t');
                let field = line
                    .iter()
                    .position(|&c| c == b':')
                    .is_some_and(|c| c > 0 && line[..c].iter().all(|&x| (33..=126).contains(&x)));
                !(folded || field)
            }
        }
    }

    /// Feed every open item up to media offset `to` (within block `b`).
    fn advance(&mut self, b: &Scanned, to: u64) {
        let mut k = 0;
        while k < self.open.len() {
            if self.feed(k, b, to) {
                k += 1;
            }
        }
    }

    /// Feed item `k` up to `to`; false when it ended (and was removed).
    fn feed(&mut self, k: usize, b: &Scanned, to: u64) -> bool {
        let off = b.job.offset;
        let o = &mut self.open[k];
        let to = to.min(o.max_end);
        if o.fed >= to {
            if o.fed >= o.max_end {
                return self.close(k, b, Cut::MaxSize);
            }
            return true;
        }
        let from = o.fed;
        let slice = &b.data[(from - off) as usize..(to - off) as usize];
        let step = o.delim.feed(slice);
        o.fed = to;
        let mark = o.delim.mark();
        match step {
            Step::More => {
                if !self.forward(k, b, from, to, mark) {
                    return false;
                }
                if self.open[k].id.is_none() {
                    return true;
                }
                if self.open[k].fed >= self.open[k].max_end {
                    return self.close(k, b, Cut::MaxSize);
                }
                true
            }
            Step::End { len, verdict } => {
                let upto = o.start.saturating_add(len).min(to);
                if self.forward(k, b, from, upto.max(from), mark) {
                    self.end(k, len, verdict);
                }
                false
            }
            Step::Reject => {
                self.reject(k, from);
                false
            }
        }
    }

    /// Hand the bytes `[from, to)` of block `b` to the sink (holding them
    /// while the item is in probation), with a mark where one was set.
    /// False when the item was dropped (probation ran out).
    fn forward(&mut self, k: usize, b: &Scanned, from: u64, to: u64, mark: Option<u64>) -> bool {
        let off = b.job.offset;
        let new_mark = {
            let o = &self.open[k];
            mark.filter(|&m| o.last_mark.is_none_or(|l| m > l))
        };
        if self.open[k].id.is_none() {
            let accepted = self.open[k].delim.accepted();
            let o = &mut self.open[k];
            o.probation
                .extend_from_slice(&b.data[(from - off) as usize..(to - off) as usize]);
            if let Some(m) = new_mark {
                o.last_mark = Some(m);
            }
            if !accepted {
                if o.probation.len() <= PROBATION {
                    return true;
                }
                if !o.delim.outlasts_probation() {
                    // Too long without proving itself.
                    self.reject(k, from);
                    return false;
                }
            }
            self.accept(k);
            return true;
        }
        let id = self.open[k].id.unwrap_or_default();
        let mut pos = from;
        if let Some(m) = new_mark
            && m >= pos
            && m <= to
        {
            if m > pos {
                self.send(
                    id,
                    Msg::Slice(
                        id,
                        Arc::clone(&b.data),
                        (pos - off) as usize,
                        (m - off) as usize,
                    ),
                );
            }
            self.send(id, Msg::Mark(id));
            self.open[k].last_mark = Some(m);
            pos = m;
        }
        if to > pos {
            self.send(
                id,
                Msg::Slice(
                    id,
                    Arc::clone(&b.data),
                    (pos - off) as usize,
                    (to - off) as usize,
                ),
            );
        }
        self.open[k].forwarded = to;
        true
    }

    /// What the sink is told of open item `o` numbered `id`.
    fn start_of(&self, o: &Open, id: i64) -> Start {
        let sig = &self.settings.sigs[o.sig];
        Start {
            id,
            type_name: sig.type_name.clone(),
            ext: sig.ext.clone(),
            offset: o.start,
            volume_id: o.volume_id,
            source: o.source,
            signature: sig.label.clone(),
            builtin: sig.builtin(),
            max_size: sig.max_size,
        }
    }

    /// The item proved itself: give it an id and send what it held.
    fn accept(&mut self, k: usize) {
        let id = self.take_id();
        let start = self.start_of(&self.open[k], id);
        let o = &mut self.open[k];
        o.id = Some(id);
        let held = std::mem::take(&mut o.probation);
        let mark = o.last_mark;
        let start_at = o.start;
        o.forwarded = start_at + held.len() as u64;
        let msgs = {
            let mut v = vec![Msg::Start(Box::new(start))];
            match mark {
                Some(m) if m > start_at && m - start_at <= held.len() as u64 => {
                    let cut = (m - start_at) as usize;
                    let mut tail = held;
                    let head: Vec<u8> = tail.drain(..cut).collect();
                    v.push(Msg::Bytes(id, head));
                    v.push(Msg::Mark(id));
                    v.push(Msg::Bytes(id, tail));
                }
                _ => v.push(Msg::Bytes(id, held)),
            }
            v
        };
        for m in msgs {
            self.send(id, m);
        }
    }

    fn end(&mut self, k: usize, len: u64, verdict: Verdict) {
        if self.open[k].id.is_none() {
            // Ended while still in probation: the end is proof enough.
            let o = &mut self.open[k];
            let keep = usize::try_from(len)
                .unwrap_or(usize::MAX)
                .min(o.probation.len());
            o.probation.truncate(keep);
            self.accept(k);
        }
        let o = self.open.remove(k);
        let final_type = o.delim.final_type();
        if let Some(id) = o.id {
            self.send(
                id,
                Msg::End {
                    id,
                    len,
                    verdict,
                    final_type,
                },
            );
        }
    }

    fn reject(&mut self, k: usize, at: u64) {
        let o = self.open.remove(k);
        match o.id {
            None => {
                self.out.rejected += 1;
                if self
                    .settings
                    .fragmented
                    .is_some_and(|f| f.contains(&o.start))
                {
                    // No row: the item is numbered if followed.
                    let start = self.start_of(&o, 0);
                    self.send(0, Msg::Unproven(Box::new(start)));
                }
            }
            // A delimiter that rejects after accepting: keep what was
            // carved, flagged.
            Some(id) => {
                let len = at.saturating_sub(o.start);
                self.send(
                    id,
                    Msg::End {
                        id,
                        len,
                        verdict: Verdict::new(
                            Validation::Invalid,
                            "structure broke after the header",
                        ),
                        final_type: None,
                    },
                );
            }
        }
    }

    fn close(&mut self, k: usize, _b: &Scanned, cut: Cut) -> bool {
        let fed = self.open[k].fed - self.open[k].start;
        match self.open[k].delim.finish(cut, fed) {
            Step::End { len, verdict } => self.end(k, len, verdict),
            Step::Reject | Step::More => {
                let at = self.open[k].fed;
                self.reject(k, at);
            }
        }
        false
    }

    /// Close every open item at the end of a region.
    fn finish_all(&mut self, cut: Cut) {
        while !self.open.is_empty() {
            let k = self.open.len() - 1;
            let fed = self.open[k].fed - self.open[k].start;
            match self.open[k].delim.finish(cut, fed) {
                Step::End { len, verdict } => {
                    if self.open[k].id.is_none() {
                        self.open[k]
                            .probation
                            .truncate(usize::try_from(len).unwrap_or(usize::MAX));
                    }
                    self.end(k, len, verdict)
                }
                Step::Reject | Step::More => {
                    let at = self.open[k].fed;
                    self.reject(k, at);
                }
            }
        }
    }
}

/// Headers straddling the junction of two adjacent blocks: those starting
/// in `a`'s tail whose pattern ends in `b`.
fn junction_hits(settings: &Settings<'_>, a: &Scanned, b: &Scanned) -> Vec<Hit> {
    let Some(search) = settings.search else {
        return Vec::new();
    };
    if !a.job.region.data || search.max_len() < 2 {
        return Vec::new();
    }
    let k = search.max_len() - 1;
    let tail = &a.data[a.data.len().saturating_sub(k)..];
    let mut joint = tail.to_vec();
    joint.extend_from_slice(&b.data[..k.min(b.data.len())]);
    let base = a.job.offset + (a.data.len() - tail.len()) as u64;
    let mut hits = Vec::new();
    search.find(&joint, base, 0..tail.len(), |p, i| {
        if p + settings.sigs[i].header.len() > tail.len() {
            hits.push(Hit {
                pos: base + p as u64,
                kind: HitKind::Data(i as u32),
            });
        }
    });
    hits
}

/// Produces the regions to scan, in order, through the callback it is
/// given (which returns false to stop).
pub type PlanFn<'a> = dyn FnMut(&mut dyn FnMut(Region) -> bool) + Send + 'a;

/// Run the scan over the regions `plan` produces.
pub fn run(
    ctx: &StageContext<'_>,
    settings: &Settings<'_>,
    sinks: &[Sender<Msg>],
    failed: &AtomicBool,
    plan: &mut PlanFn<'_>,
) -> Result<Outcome, StageError> {
    let in_flight = settings.in_flight.max(2);
    let (permit_tx, permit_rx) = bounded::<()>(in_flight);
    for _ in 0..in_flight {
        let _ = permit_tx.send(());
    }
    let (job_tx, job_rx) = bounded::<Job>(in_flight);
    let (done_tx, done_rx) = unbounded::<Scanned>();
    // Block buffers come back once nothing holds them (see `Recycler`).
    let (pool_tx, pool_rx) = bounded::<Vec<u8>>(in_flight);
    let stop = AtomicBool::new(false);
    // Blocks are read as asked (1 MiB by default: large enough for a
    // request-capped device; 2 MiB blocks made the whole-image scan 6%
    // slower from the page cache).
    let block = settings.block.max(SECTOR);
    std::thread::scope(|scope| {
        // Producer.
        let stop_p = &stop;
        scope.spawn(move || {
            let mut seq = 0u64;
            let mut emit = |region: Region| -> bool {
                // Each region is read whole, in order: runs (an E01's
                // read-ahead) stop at its end, not in allocated space the
                // scan skips.
                ctx.evidence
                    .hint(region.start, region.end.saturating_sub(region.start));
                let region = Arc::new(region);
                let mut at = region.start;
                while at < region.end {
                    if stop_p.load(Ordering::Relaxed) || permit_rx.recv().is_err() {
                        return false;
                    }
                    let next = ((at / block) + 1).saturating_mul(block).min(region.end);
                    let job = Job {
                        seq,
                        region: Arc::clone(&region),
                        offset: at,
                        len: usize::try_from(next - at).unwrap_or(0),
                        last: next == region.end,
                    };
                    seq += 1;
                    if job_tx.send(job).is_err() {
                        return false;
                    }
                    at = next;
                }
                true
            };
            plan(&mut emit);
            drop(job_tx);
        });
        // Readers.
        for _ in 0..settings.readers.max(1) {
            let job_rx: Receiver<Job> = job_rx.clone();
            let done_tx = done_tx.clone();
            let pool_rx = pool_rx.clone();
            scope.spawn(move || {
                for job in job_rx {
                    // Damaged units are zero-filled and reported, so one bad
                    // sector costs only itself.
                    let src = ctx.evidence.as_ref();
                    let unit = src.damage_unit().max(1);
                    let buffer = pool_rx.try_recv().unwrap_or_default();
                    let Block { data, errors, .. } =
                        read_block(src, job.offset, job.len as u64, unit, buffer);
                    let hits = search_block(settings, &job.region, job.offset, &data);
                    let s = Scanned {
                        job,
                        data: Arc::new(data),
                        hits,
                        errors,
                    };
                    if done_tx.send(s).is_err() {
                        break;
                    }
                }
            });
        }
        drop(job_rx);
        drop(done_tx);
        // Consumer: this thread.
        let mut c = Consumer {
            ctx,
            settings,
            sinks,
            failed,
            open: Vec::new(),
            next: 0,
            fat: FatSectorParser::default(),
            record: None,
            behind: None,
            out: Outcome::default(),
        };
        let mut recycler = Recycler {
            held: VecDeque::new(),
            limit: 2 * in_flight,
            pool: pool_tx,
        };
        let result = consume(&mut c, &done_rx, &permit_tx, &mut recycler);
        stop.store(true, Ordering::Relaxed);
        // Unblock the producer and drain the readers.
        drop(permit_tx);
        while done_rx.recv().is_ok() {}
        c.out.used = c.next;
        result.map(|()| c.out)
    })
}

/// Gives the readers back the buffers of scanned blocks once nothing else
/// holds them (the sinks hold slices of a block until they have written
/// them). Allocating a fresh megabyte per block cost the carve stage half
/// its time in page faults and zeroing once large allocations are
/// mapped (`metrics::tune_allocator`): 16 GiB corpus, 7.3 s against 5.8 s.
struct Recycler {
    held: VecDeque<Arc<Vec<u8>>>,
    /// Blocks watched at most; older ones are left to be freed.
    limit: usize,
    pool: Sender<Vec<u8>>,
}

impl Recycler {
    fn give(&mut self, data: Arc<Vec<u8>>) {
        self.held.push_back(data);
        // Each block once round the queue: free ones go to the pool, the
        // others back in order.
        for _ in 0..self.held.len() {
            if let Some(a) = self.held.pop_front() {
                match Arc::try_unwrap(a) {
                    Ok(buffer) => {
                        let _ = self.pool.try_send(buffer);
                    }
                    Err(a) => self.held.push_back(a),
                }
            }
        }
        while self.held.len() > self.limit {
            self.held.pop_front();
        }
    }
}

fn consume(
    c: &mut Consumer<'_, '_>,
    done: &Receiver<Scanned>,
    permits: &Sender<()>,
    recycler: &mut Recycler,
) -> Result<(), StageError> {
    let mut pending: BTreeMap<u64, Scanned> = BTreeMap::new();
    let mut next = 0u64;
    let mut held: Option<Scanned> = None;
    loop {
        let b = match pending.remove(&next) {
            Some(b) => b,
            None => match done.recv() {
                Ok(s) => {
                    pending.insert(s.job.seq, s);
                    continue;
                }
                Err(_) => break,
            },
        };
        next += 1;
        c.ctx.check_cancel()?;
        if c.failed.load(Ordering::Relaxed) {
            return Ok(());
        }
        // Process the held block now that its successor is known.
        if let Some(h) = held.take() {
            let adjacent = Arc::ptr_eq(&h.job.region, &b.job.region)
                && h.job.offset + h.data.len() as u64 == b.job.offset;
            let j = if adjacent {
                junction_hits(c.settings, &h, &b)
            } else {
                Vec::new()
            };
            c.process(&h, j)?;
            c.done_block(&h, permits);
            recycler.give(h.data);
        }
        if b.job.last || b.data.len() < b.job.len {
            let mut b = b;
            b.job.last = true;
            c.process(&b, Vec::new())?;
            c.done_block(&b, permits);
            recycler.give(b.data);
        } else {
            held = Some(b);
        }
    }
    if let Some(h) = held.take() {
        c.process(&h, Vec::new())?;
        c.done_block(&h, permits);
    }
    c.finish_all(Cut::RangeEnd);
    Ok(())
}

impl Consumer<'_, '_> {
    fn done_block(&mut self, b: &Scanned, permits: &Sender<()>) {
        self.out.bytes += b.data.len() as u64;
        if b.job.offset == b.job.region.start {
            self.out.regions += 1;
        }
        self.ctx.progress.advance(b.data.len() as u64);
        let _ = permits.send(());
    }
}
