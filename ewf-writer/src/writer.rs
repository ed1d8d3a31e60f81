//! The streaming writer: media bytes in, segment files out.
//!
//! Three kinds of thread cooperate:
//! - the caller's thread fills batches of consecutive chunks (about 1 MiB),
//!   each in a buffer taken from a fixed pool (so at most `pool` batches are
//!   ever in flight and memory is bounded whatever the media size);
//!   [`EwfWriter::read_media`] reads the source straight into the batch;
//! - worker threads compress batches, each chunk independently;
//! - one output thread puts the results back in media order, hashes the raw
//!   chunks (MD5) and hands them to the [`Sink`], then passes the buffers to
//!   a SHA-1 thread, which returns them to the pool.
//!
//! Threads hand over batches, not chunks: with 32 KiB chunks a handover per
//! chunk cost a tenth of the CPU on two cores (channel wake-ups, yields and
//! a copy of every byte into its chunk buffer; `perf`, 1 GiB convert).
//!
//! Each chunk's stored bytes depend only on its content and the options, and
//! the output thread writes strictly in chunk order, so the files are
//! byte-identical whatever the number of workers and however they are
//! scheduled.

use crate::chunk::ChunkEncoder;
use crate::error::EwfWriteError;
use crate::options::{Compression, WriterOptions};
use crate::plan::Plan;
use crate::sink::{Sink, SinkResult};
use caseload_digests::{Digest, Sha1};
use crossbeam_channel::{Receiver, Sender, bounded, unbounded};
use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// Memory allowed for chunk buffers in flight (raw and stored copies).
const IN_FLIGHT_BYTES: u64 = 64 << 20;

/// Media bytes handed between threads at once (whole chunks, at least one).
const BATCH_BYTES: u64 = 1 << 20;

/// One segment file of a finished image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentFile {
    /// Its path.
    pub path: PathBuf,
    /// Its size in bytes.
    pub size: u64,
}

/// What a finished image holds.
#[derive(Debug, Clone)]
pub struct Summary {
    /// The segment files, in order (`.E01` first).
    pub segments: Vec<SegmentFile>,
    /// MD5 of the media as stored (including any sector padding).
    pub md5: [u8; 16],
    /// SHA-1 of the media as stored.
    pub sha1: [u8; 20],
    /// Bytes the caller supplied.
    pub source_size: u64,
    /// Media size recorded in the image: the source rounded up to whole
    /// 512-byte sectors.
    pub media_size: u64,
    /// Zero bytes appended to reach whole sectors (0 when the source was a
    /// whole number of sectors). When non-zero the stored hashes cover the
    /// padded media, not the source alone.
    pub padding_bytes: u64,
    /// Bytes per chunk.
    pub chunk_size: u64,
    /// Chunks in the image.
    pub chunks: u64,
    /// Chunks stored compressed.
    pub compressed_chunks: u64,
    /// Total size of the segment files.
    pub stored_bytes: u64,
    /// The segment set identifier written in the volume and data sections.
    pub guid: [u8; 16],
    /// Compression used.
    pub compression: Compression,
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl Summary {
    /// MD5 as lowercase hex.
    pub fn md5_hex(&self) -> String {
        hex(&self.md5)
    }

    /// SHA-1 as lowercase hex.
    pub fn sha1_hex(&self) -> String {
        hex(&self.sha1)
    }

    /// The GUID in 8-4-4-4-12 text form as `ewfinfo` prints it: EWF stores
    /// it in the Windows layout, whose first three fields are little-endian.
    pub fn guid_string(&self) -> String {
        let g = &self.guid;
        let rev = |b: &[u8]| hex(&b.iter().rev().copied().collect::<Vec<u8>>());
        format!(
            "{}-{}-{}-{}-{}",
            rev(&g[0..4]),
            rev(&g[4..6]),
            rev(&g[6..8]),
            hex(&g[8..10]),
            hex(&g[10..16])
        )
    }

    /// Whether the source had to be padded to whole sectors.
    pub fn padded(&self) -> bool {
        self.padding_bytes > 0
    }
}

/// Consecutive chunks of media, `raw[..len]`, batch `seq` in media order;
/// every chunk is whole except perhaps the image's last.
struct Job {
    seq: u64,
    raw: Vec<u8>,
    len: usize,
    /// The batch's last chunk is the image's short final chunk (see
    /// [`ChunkEncoder::encode`]).
    force_last: bool,
}

/// One chunk as it goes into the file.
#[derive(Default)]
struct Stored {
    bytes: Vec<u8>,
    compressed: bool,
}

struct Done {
    seq: u64,
    raw: Vec<u8>,
    len: usize,
    /// One per chunk of the batch, in order.
    chunks: Vec<Stored>,
    ok: bool,
}

/// The batch the caller is filling.
struct Filling {
    raw: Vec<u8>,
    len: usize,
}

/// State shared between the caller and the output thread.
#[derive(Default)]
struct Shared {
    failed: AtomicBool,
    abort: AtomicBool,
    error: Mutex<Option<EwfWriteError>>,
}

impl Shared {
    fn fail(&self, e: EwfWriteError) {
        let mut slot = self
            .error
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if slot.is_none() {
            *slot = Some(e);
        }
        self.failed.store(true, Ordering::SeqCst);
    }

    fn take_error(&self) -> EwfWriteError {
        self.error
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
            .unwrap_or(EwfWriteError::Stopped)
    }

    fn stopped(&self) -> bool {
        self.failed.load(Ordering::SeqCst) || self.abort.load(Ordering::SeqCst)
    }
}

/// A streaming EWF v1 writer.
///
/// Give it the media size up front, then the media bytes strictly in order
/// through [`write_media`](Self::write_media), [`std::io::Write`] or
/// [`read_media`](Self::read_media) (which reads a source straight into the
/// writer's buffers), then call [`finish`](Self::finish). It never holds
/// more than a bounded number of chunks in memory (about 64 MiB). Dropping
/// a writer that has not finished removes the segment files it created.
///
/// ```no_run
/// use caseload_ewf_writer::{EwfWriter, WriterOptions};
/// use std::io::Write;
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let media = vec![0u8; 1 << 20];
/// let mut w = EwfWriter::create("/tmp/disk", media.len() as u64, WriterOptions::default())?;
/// w.write_all(&media)?;
/// let summary = w.finish()?;
/// println!("{} segments, MD5 {}", summary.segments.len(), summary.md5_hex());
/// # Ok(()) }
/// ```
pub struct EwfWriter {
    plan: Arc<Plan>,
    shared: Arc<Shared>,
    current: Option<Filling>,
    next_seq: u64,
    received: u64,
    free: Receiver<Vec<u8>>,
    jobs: Option<Sender<Job>>,
    workers: Vec<JoinHandle<()>>,
    output: Option<JoinHandle<Option<SinkResult>>>,
    finished: bool,
}

impl std::fmt::Debug for EwfWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EwfWriter")
            .field("prefix", &self.plan.prefix)
            .field("media_size", &self.plan.source_size)
            .field("received", &self.received)
            .finish_non_exhaustive()
    }
}

impl EwfWriter {
    /// Start an image of `media_size` bytes at `prefix` (`prefix.E01`, ...).
    ///
    /// Everything that can be refused without data is refused here, before
    /// any file is created: an empty media, unsupported chunk size, a chunk
    /// count over 32 bits, a segment size too small for one chunk, more
    /// segments (if nothing compressed) than `.E01`..`.ZZZ` can name, and
    /// (unless `overwrite`) existing segment files.
    pub fn create(
        prefix: impl AsRef<Path>,
        media_size: u64,
        options: WriterOptions,
    ) -> Result<EwfWriter, EwfWriteError> {
        let plan = Arc::new(Plan::new(prefix.as_ref(), media_size, &options)?);
        if !options.overwrite {
            for n in 1..=plan.worst_case_segments {
                let path = u32::try_from(n).ok().and_then(|n| plan.segment_path(n));
                if let Some(path) = path
                    && std::fs::symlink_metadata(&path).is_ok()
                {
                    return Err(EwfWriteError::SegmentExists { path });
                }
            }
        }
        let sink = Sink::new(Arc::clone(&plan))?;

        let threads = options.worker_threads().max(1);
        let batch_bytes = (BATCH_BYTES / plan.chunk_size).max(1) * plan.chunk_size;
        // Raw and stored copies of each batch in flight share the budget.
        let by_memory = IN_FLIGHT_BYTES / (2 * batch_bytes);
        let pool = ((threads as u64) * 4).clamp(4, by_memory.clamp(4, 1024)) as usize;
        let chunk_size = plan.chunk_size as usize;
        let batch_bytes = batch_bytes as usize;
        let (free_tx, free_rx) = bounded::<Vec<u8>>(pool);
        for _ in 0..pool {
            // The channel was made with exactly this capacity.
            let _ = free_tx.send(vec![0u8; batch_bytes]);
        }
        let (job_tx, job_rx) = unbounded::<Job>();
        let (done_tx, done_rx) = unbounded::<Done>();
        let (spare_tx, spare_rx) = unbounded::<Vec<Stored>>();
        let shared = Arc::new(Shared::default());

        let mut workers = Vec::with_capacity(threads);
        for i in 0..threads {
            let jobs = job_rx.clone();
            let done = done_tx.clone();
            let spare = spare_rx.clone();
            let compression = options.compression;
            let spawned = std::thread::Builder::new()
                .name(format!("ewf-compress-{i}"))
                .spawn(move || compress_worker(compression, chunk_size, &jobs, &done, &spare));
            match spawned {
                Ok(h) => workers.push(h),
                Err(_) => break,
            }
        }
        drop(done_tx);
        let out_shared = Arc::clone(&shared);
        let chunk_count = plan.chunk_count;
        let output = std::thread::Builder::new()
            .name("ewf-output".into())
            .spawn(move || {
                output_loop(
                    sink,
                    chunk_size,
                    chunk_count,
                    &done_rx,
                    &free_tx,
                    &spare_tx,
                    &out_shared,
                )
            });
        let output = match output {
            Ok(h) if !workers.is_empty() => Some(h),
            _ => return Err(EwfWriteError::ThreadFailed),
        };
        Ok(EwfWriter {
            plan,
            shared,
            current: None,
            next_seq: 0,
            received: 0,
            free: free_rx,
            jobs: Some(job_tx),
            workers,
            output,
            finished: false,
        })
    }

    /// Bytes of media received so far.
    pub fn bytes_written(&self) -> u64 {
        self.received
    }

    /// The number of bytes declared at creation.
    pub fn declared_size(&self) -> u64 {
        self.plan.source_size
    }

    /// Append media bytes. The first error stops the writer: it is returned
    /// once, later calls return [`EwfWriteError::Stopped`], and the segment
    /// files are removed when the writer is dropped.
    pub fn write_media(&mut self, mut data: &[u8]) -> Result<(), EwfWriteError> {
        if self.shared.stopped() {
            return Err(self.shared.take_error());
        }
        let remaining = self.plan.source_size - self.received;
        if data.len() as u64 > remaining {
            return Err(EwfWriteError::TooMuchData {
                expected: self.plan.source_size,
            });
        }
        while !data.is_empty() {
            let batch = self.filling()?;
            let n = (batch.raw.len() - batch.len).min(data.len());
            batch.raw[batch.len..batch.len + n].copy_from_slice(&data[..n]);
            batch.len += n;
            data = &data[n..];
            self.received += n as u64;
            self.submit_if_full()?;
        }
        Ok(())
    }

    /// Read the next media bytes from `source` straight into the writer's
    /// buffer (one `read` call, no copy); returns how many, 0 when the
    /// source has ended or all declared bytes are in. A read error is
    /// returned as [`EwfWriteError::SourceRead`] at its media offset and
    /// stops the writer like any other error.
    pub fn read_media(&mut self, source: &mut dyn io::Read) -> Result<usize, EwfWriteError> {
        if self.shared.stopped() {
            return Err(self.shared.take_error());
        }
        let remaining = self.plan.source_size - self.received;
        if remaining == 0 {
            return Ok(0);
        }
        let offset = self.received;
        let batch = self.filling()?;
        let want = ((batch.raw.len() - batch.len) as u64).min(remaining) as usize;
        let n = loop {
            match source.read(&mut batch.raw[batch.len..batch.len + want]) {
                Ok(n) => break n.min(want),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(source) => {
                    self.shared
                        .fail(EwfWriteError::SourceRead { offset, source });
                    return Err(self.shared.take_error());
                }
            }
        };
        batch.len += n;
        self.received += n as u64;
        self.submit_if_full()?;
        Ok(n)
    }

    /// The batch being filled, taking a free buffer when there is none.
    fn filling(&mut self) -> Result<&mut Filling, EwfWriteError> {
        if self.current.is_none() {
            let raw = self.take_buffer()?;
            self.current = Some(Filling { raw, len: 0 });
        }
        self.current.as_mut().ok_or(EwfWriteError::ThreadFailed)
    }

    fn submit_if_full(&mut self) -> Result<(), EwfWriteError> {
        match &self.current {
            Some(b) if b.len == b.raw.len() => self.submit(false),
            _ => Ok(()),
        }
    }

    /// Wait for a free batch buffer; the SHA-1 thread returns them.
    fn take_buffer(&mut self) -> Result<Vec<u8>, EwfWriteError> {
        match self.free.recv() {
            Ok(buf) if !self.shared.stopped() => Ok(buf),
            Ok(_) => Err(self.shared.take_error()),
            Err(_) => {
                self.shared.fail(EwfWriteError::ThreadFailed);
                Err(self.shared.take_error())
            }
        }
    }

    fn submit(&mut self, force_last: bool) -> Result<(), EwfWriteError> {
        let Some(Filling { raw, len }) = self.current.take() else {
            return Ok(());
        };
        let job = Job {
            seq: self.next_seq,
            raw,
            len,
            force_last,
        };
        self.next_seq += 1;
        let sent = self.jobs.as_ref().map(|j| j.send(job).is_ok());
        if sent != Some(true) {
            self.shared.fail(EwfWriteError::ThreadFailed);
        }
        if self.shared.stopped() {
            return Err(self.shared.take_error());
        }
        Ok(())
    }

    /// Write the closing sections and return what was written.
    ///
    /// Fails (and removes the segments) if fewer bytes than the declared
    /// media size were written. A source that is not a whole number of
    /// 512-byte sectors is padded with zeros here; the summary records it.
    pub fn finish(mut self) -> Result<Summary, EwfWriteError> {
        if self.shared.stopped() {
            return Err(self.shared.take_error());
        }
        if self.received < self.plan.source_size {
            return Err(EwfWriteError::ShortMedia {
                expected: self.plan.source_size,
                got: self.received,
            });
        }
        let chunk_size = self.plan.chunk_size as usize;
        if let Some(batch) = self.current.as_mut()
            && batch.len > 0
        {
            // This batch ends with the image's last chunk, which may be
            // short; a source that is not whole sectors is padded with
            // zeros to the chunk's recorded length.
            let chunks = batch.len.div_ceil(chunk_size);
            let last_len = self.plan.chunk_len(self.plan.chunk_count - 1) as usize;
            let end = (chunks - 1) * chunk_size + last_len;
            batch.raw[batch.len..end].fill(0);
            batch.len = end;
            self.submit(last_len < chunk_size)?;
        }
        let result = self.join();
        self.finished = true;
        let Some(done) = result else {
            return Err(self.shared.take_error());
        };
        let segments: Vec<SegmentFile> = done
            .segments
            .iter()
            .map(|s| SegmentFile {
                path: s.path.clone(),
                size: s.size,
            })
            .collect();
        Ok(Summary {
            stored_bytes: segments.iter().map(|s| s.size).sum(),
            segments,
            md5: done.md5,
            sha1: done.sha1,
            source_size: self.plan.source_size,
            media_size: self.plan.media_size,
            padding_bytes: self.plan.media_size - self.plan.source_size,
            chunk_size: self.plan.chunk_size,
            chunks: self.plan.chunk_count,
            compressed_chunks: done.compressed_chunks,
            guid: done.guid,
            compression: self.plan.options.compression,
        })
    }

    /// Stop the workers and the output thread and collect the output.
    fn join(&mut self) -> Option<SinkResult> {
        self.jobs = None;
        for w in self.workers.drain(..) {
            if w.join().is_err() {
                self.shared.fail(EwfWriteError::ThreadFailed);
            }
        }
        match self.output.take().map(JoinHandle::join) {
            Some(Ok(result)) => result,
            _ => {
                self.shared.fail(EwfWriteError::ThreadFailed);
                None
            }
        }
    }

    /// Give up: stop the threads and remove the segment files written.
    pub fn abort(mut self) {
        self.shared.abort.store(true, Ordering::SeqCst);
        let _ = self.join();
        self.finished = true;
    }
}

impl Drop for EwfWriter {
    fn drop(&mut self) {
        if !self.finished {
            self.shared.abort.store(true, Ordering::SeqCst);
            let _ = self.join();
        }
    }
}

impl io::Write for EwfWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.write_media(buf).map_err(io::Error::other)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn compress_worker(
    compression: Compression,
    chunk_size: usize,
    jobs: &Receiver<Job>,
    done: &Sender<Done>,
    spare: &Receiver<Vec<Stored>>,
) {
    let mut encoder = ChunkEncoder::new(compression);
    for job in jobs.iter() {
        let mut chunks = spare.try_recv().unwrap_or_default();
        let raw = job.raw;
        let count = job.len.div_ceil(chunk_size);
        chunks.truncate(count);
        chunks.resize_with(count, Stored::default);
        // A panic inside the compressor must not strand the batch's buffer:
        // the output thread waits for every batch in order.
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            for (i, (piece, out)) in raw[..job.len]
                .chunks(chunk_size)
                .zip(chunks.iter_mut())
                .enumerate()
            {
                let force = job.force_last && i + 1 == count;
                out.compressed = encoder.encode(piece, force, &mut out.bytes);
            }
        }));
        let ok = outcome.is_ok();
        if !ok {
            encoder = ChunkEncoder::new(compression);
        }
        let result = Done {
            seq: job.seq,
            raw,
            len: job.len,
            chunks,
            ok,
        };
        if done.send(result).is_err() {
            break;
        }
    }
}

fn output_loop(
    mut sink: Sink,
    chunk_size: usize,
    chunk_count: u64,
    done: &Receiver<Done>,
    free: &Sender<Vec<u8>>,
    spare: &Sender<Vec<Stored>>,
    shared: &Shared,
) -> Option<SinkResult> {
    // SHA-1 runs on its own thread, behind this one: MD5 alone already
    // makes this thread the longest serial path (about 630 MB/s a core),
    // and both hashes must see the chunks in order, which they do here. (A
    // third thread for MD5 alone was slower on two cores: one more thread
    // to share them.)
    let (sha_tx, sha_rx) = unbounded::<(Vec<u8>, usize)>();
    let (chunks_put, sha1) = std::thread::scope(|scope| {
        let hasher = scope.spawn(move || {
            let mut sha1 = Sha1::new();
            for (raw, len) in sha_rx.iter() {
                sha1.update(&raw[..len]);
                let _ = free.try_send(raw);
            }
            let digest: [u8; 20] = sha1.finalize().into();
            digest
        });
        let mut pending: BTreeMap<u64, Done> = BTreeMap::new();
        let mut next = 0u64;
        let mut chunks_put = 0u64;
        for d in done.iter() {
            pending.insert(d.seq, d);
            while let Some(d) = pending.remove(&next) {
                if !shared.stopped() {
                    if !d.ok {
                        shared.fail(EwfWriteError::ThreadFailed);
                    }
                    let pieces = d.raw[..d.len].chunks(chunk_size).zip(&d.chunks);
                    for (raw, stored) in pieces {
                        if shared.stopped() {
                            break;
                        }
                        match sink.put(raw, &stored.bytes, stored.compressed) {
                            Ok(()) => chunks_put += 1,
                            Err(e) => shared.fail(e),
                        }
                    }
                }
                if let Err(returned) = sha_tx.send((d.raw, d.len)) {
                    let _ = free.try_send(returned.0.0);
                }
                let _ = spare.send(d.chunks);
                next += 1;
            }
        }
        drop(sha_tx);
        (chunks_put, hasher.join().ok())
    });
    let sha1 = match sha1 {
        Some(sha1) if !shared.stopped() && chunks_put == chunk_count => sha1,
        _ => {
            sink.remove_files();
            if !shared.stopped() {
                shared.fail(EwfWriteError::ThreadFailed);
            }
            return None;
        }
    };
    match sink.finish(sha1) {
        Ok(r) => Some(r),
        Err(e) => {
            shared.fail(e);
            None
        }
    }
}
