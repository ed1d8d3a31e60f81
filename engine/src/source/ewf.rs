//! EWF (E01/Ex01) evidence through the `ewf` crate.
//!
//! The `ewf` crate parses the container: segment headers, sections, the chunk
//! tables (paged lazily, so memory stays bounded for terabyte images), the
//! stored hashes and the case metadata. Its segments are handed to it as
//! counting backings, so its own parsing reads are charged to the evidence
//! channel.
//!
//! For EWF v1 the media read path is our own, on top of the crate's chunk
//! table: it reads a chunk's stored bytes once through the counted segment,
//! inflates compressed chunks with flate2 (zlib-rs backend) and verifies the
//! Adler-32 trailer of uncompressed ones, which the crate does not check.
//! (libdeflate's whole-buffer inflate was tried too: faster on a synthetic
//! criterion sample, but 31% of the stage's CPU against zlib-rs's 24% on a
//! real corpus E01, so zlib-rs stays.)
//! That lets a damaged chunk be reported with its exact sector range, and lets
//! many threads inflate distinct chunks at once without sharing a cache lock.

use super::runs::{FLOOR_BYTES, Fetch, HINT_GAP_BYTES, ReadOptions, Run, RunReader, Runs, reuse};
use super::{
    EvidenceSource, SECTOR_SIZE, SourceError, SourceFormat, SourceInfo, StoredHashes, hex,
};
use crate::channel::{Channel, ChannelError, ChannelFile, ChannelSnapshot};
use ::ewf::{EwfReader, SegmentBacking, SegmentSource};
use flate2::{Decompress, FlushDecompress, Status};
use std::cell::RefCell;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// An E01/Ex01 set.
pub struct EwfSource {
    /// Distinguishes sources in the per-thread chunk cache.
    id: u64,
    /// Runs of consecutive stored chunks (units: chunks).
    runs: Runs,
    read: ReadOptions,
    reader: EwfReader,
    segments: Vec<Arc<CountedSegment>>,
    chunk_size: u64,
    size: u64,
    version2: bool,
    info: SourceInfo,
    evidence: Channel,
}

impl std::fmt::Debug for EwfSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EwfSource")
            .field("files", &self.info.files)
            .field("size", &self.size)
            .finish_non_exhaustive()
    }
}

/// One segment file whose reads are counted on the evidence channel.
struct CountedSegment {
    file: ChannelFile,
    len: u64,
}

impl SegmentBacking for CountedSegment {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        self.file.read_at(buf, offset)
    }

    fn len(&self) -> u64 {
        self.len
    }
}

impl EwfSource {
    /// Open the set whose first segment is `first`.
    pub fn open(first: &Path, channel: &Channel, read: ReadOptions) -> Result<Self, SourceError> {
        let paths = discover_segments(first)?;
        let mut segments = Vec::with_capacity(paths.len());
        let mut container_bytes = 0u64;
        let mut version2 = false;
        for (i, path) in paths.iter().enumerate() {
            let file = channel.open_path_read_only(path).map_err(|e| match e {
                ChannelError::Io { source, .. } => SourceError::Open {
                    path: path.clone(),
                    source,
                },
                other => SourceError::Channel(other),
            })?;
            let len = file.len().map_err(|source| SourceError::Open {
                path: path.clone(),
                source,
            })?;
            let number = segment_number(&file, path, &mut version2)?;
            if number != i as u64 + 1 {
                return Err(SourceError::Inconsistent {
                    path: first.to_path_buf(),
                    reason: format!(
                        "`{}` is segment {} of its set, expected segment {}",
                        path.display(),
                        number,
                        i + 1
                    ),
                });
            }
            container_bytes += len;
            segments.push(Arc::new(CountedSegment { file, len }));
        }
        let format_error = |e: ::ewf::EwfError| SourceError::Format {
            path: first.to_path_buf(),
            reason: e.to_string(),
        };
        let reader = if version2 {
            // The crate reads EWF v2 only from paths; its reads are then
            // charged chunk by chunk in `read_at` below.
            EwfReader::open_segments(&paths).map_err(format_error)?
        } else {
            let sources = segments
                .iter()
                .map(|s| SegmentSource::from_backing(Arc::clone(s) as Arc<dyn SegmentBacking>))
                .collect();
            EwfReader::open_lazy_from_sources(sources).map_err(format_error)?
        };
        let chunk_size = reader.chunk_size();
        let size = reader.total_size();
        if chunk_size == 0 || chunk_size % SECTOR_SIZE != 0 || chunk_size > 64 << 20 {
            return Err(SourceError::Format {
                path: first.to_path_buf(),
                reason: format!("implausible chunk size {chunk_size}"),
            });
        }
        let expected_chunks = size.div_ceil(chunk_size);
        let mut notes = Vec::new();
        if (reader.chunk_count() as u64) < expected_chunks {
            // Keep going: what the tables do list is readable, and reads of
            // the rest fail with their sector ranges.
            notes.push(format!(
                "the chunk tables list {} chunks but the media ({} bytes) needs {}; a segment is missing or truncated, sectors {}-{} are unreadable",
                reader.chunk_count(),
                size,
                expected_chunks,
                reader.chunk_count() as u64 * chunk_size / SECTOR_SIZE,
                size.div_ceil(SECTOR_SIZE).saturating_sub(1)
            ));
        }
        let stored = reader.stored_hashes();
        let meta = reader.metadata();
        let metadata = [
            ("case_number", &meta.case_number),
            ("evidence_number", &meta.evidence_number),
            ("description", &meta.description),
            ("examiner", &meta.examiner),
            ("notes", &meta.notes),
            ("acquiry_software", &meta.acquiry_software),
            ("os_version", &meta.os_version),
            ("acquiry_date", &meta.acquiry_date),
            ("system_date", &meta.system_date),
        ]
        .into_iter()
        .filter_map(|(k, v)| v.as_ref().map(|v| (k.to_string(), v.clone())))
        .collect();
        let info = SourceInfo {
            format: if version2 {
                SourceFormat::Ewf2
            } else {
                SourceFormat::Ewf
            },
            files: paths,
            container_bytes,
            media_size: size,
            chunk_size: Some(chunk_size),
            stored_hashes: StoredHashes {
                md5: stored.md5.map(|h| hex(&h)),
                sha1: stored.sha1.map(|h| hex(&h)),
            },
            metadata,
            notes,
            read_run_bytes: Some(read.run_bytes),
        };
        static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        Ok(EwfSource {
            id: NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            runs: Runs::new(
                (read.run_bytes / chunk_size).max(1),
                (FLOOR_BYTES / chunk_size).max(1),
                HINT_GAP_BYTES / chunk_size,
                size.div_ceil(chunk_size),
                // One chunk alone is read as asked; a sequential request
                // under a run gets read-ahead: its stored bytes are a
                // fraction of its media size, small for the device.
                (1, (read.run_bytes / chunk_size).max(1)),
                read.cache_runs,
            ),
            read,
            reader,
            segments,
            chunk_size,
            size,
            version2,
            info,
            evidence: channel.clone(),
        })
    }

    fn chunk_sectors(&self, chunk: u64) -> (u64, u64) {
        let first = chunk * self.chunk_size / SECTOR_SIZE;
        let end = ((chunk + 1) * self.chunk_size).min(self.size);
        (
            first,
            end.div_ceil(SECTOR_SIZE).saturating_sub(1).max(first),
        )
    }

    fn corrupt(&self, chunk: u64, reason: String) -> SourceError {
        let (first_sector, last_sector) = self.chunk_sectors(chunk);
        SourceError::Corrupt {
            first_sector,
            last_sector,
            reason: format!("chunk {chunk}: {reason}"),
        }
    }

    /// Where chunk `chunk`'s stored bytes are, checked against its
    /// segment: (segment, offset, bytes to read, compressed).
    fn locate(&self, chunk: u64, logical: u64) -> Result<(usize, u64, usize, bool), SourceError> {
        let index =
            usize::try_from(chunk).map_err(|_| self.corrupt(chunk, "index overflow".into()))?;
        // The `ewf` crate (0.4.10) indexes past a hostile table section's
        // end when it reads its chunk table lazily (found by the e01 fuzz
        // target): its panic is caught here and is this chunk's error. The
        // reader stays usable: its cache lock recovers from poisoning.
        let entry = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.reader.debug_chunk(index)
        }))
        .map_err(|_| {
            self.corrupt(
                chunk,
                "chunk table: a table section is shorter than its header says".into(),
            )
        })?;
        let (offset, stored, compressed, segment) =
            entry.map_err(|e| self.corrupt(chunk, format!("chunk table: {e}")))?;
        // A stored chunk is at most the chunk plus its checksum; compressed
        // data a little larger than the chunk is legal zlib but nothing sane
        // writes it. Anything beyond that is a corrupt table entry.
        if stored == 0 || stored > self.chunk_size * 2 + 1024 {
            return Err(self.corrupt(
                chunk,
                format!("table gives an implausible stored size {stored}"),
            ));
        }
        let seg = self.segments.get(segment).ok_or_else(|| {
            self.corrupt(
                chunk,
                format!("table points at segment {} which is absent", segment + 1),
            )
        })?;
        // The crate derives a chunk's size from the next table entry or the
        // end of the segment's first `sectors` section, which can overshoot
        // for the last chunk of a later group or a short final chunk. What
        // is certain: the data starts inside the segment, a stored chunk is
        // its logical length plus a 4-byte Adler-32, and a deflate stream
        // ends by itself (bytes after it are ignored).
        let available = seg.len.saturating_sub(offset);
        let needed = if compressed { 1 } else { logical };
        if available < needed {
            return Err(self.corrupt(
                chunk,
                format!(
                    "data at {offset}+{needed} lies beyond the end of segment {} ({} bytes): corrupt table entry or truncated segment",
                    segment + 1,
                    seg.len
                ),
            ));
        }
        let stored = if compressed {
            stored.min(available)
        } else {
            (logical + 4).min(available)
        };
        let stored = usize::try_from(stored)
            .map_err(|_| self.corrupt(chunk, "stored size overflows".into()))?;
        Ok((segment, offset, stored, compressed))
    }

    /// Logical bytes of chunk `chunk` (the last one may be short).
    fn logical(&self, chunk: u64) -> u64 {
        self.size
            .saturating_sub(chunk.saturating_mul(self.chunk_size))
            .min(self.chunk_size)
    }

    /// Decode chunk `chunk` into `out` (which must hold its logical
    /// length), for a request that reaches to chunk `want_end`.
    /// `run` is the run the previous chunk of the same request came from:
    /// kept while it holds the next ones, so the shared cache is asked once
    /// per run, not once per chunk.
    fn decode_chunk(
        &self,
        chunk: u64,
        out: &mut [u8],
        want_end: u64,
        run: &mut Option<Arc<Run>>,
    ) -> Result<(), SourceError> {
        let logical = out.len() as u64;
        let (segment, offset, stored, compressed) = self.locate(chunk, logical)?;
        let seg = &self.segments[segment];
        if !run
            .as_ref()
            .is_some_and(|r| r.units.0 <= chunk && chunk < r.units.1)
        {
            *run = match self.runs.fetch(chunk, want_end, self) {
                Fetch::Run(r) => Some(r),
                Fetch::Direct => None,
            };
        }
        let held = run.as_ref().and_then(|r| r.slice(segment, offset, stored));
        if !compressed {
            return match held {
                Some(bytes) => {
                    let logical = out.len();
                    if stored < logical {
                        return Err(self.corrupt(
                            chunk,
                            format!("stored chunk is {stored} bytes, expected {logical}"),
                        ));
                    }
                    out.copy_from_slice(&bytes[..logical]);
                    match bytes.get(logical..logical + 4) {
                        Some(t) => self.check_adler(chunk, out, [t[0], t[1], t[2], t[3]]),
                        None => Ok(()),
                    }
                }
                None => self.read_stored_chunk(chunk, seg, offset, stored, out),
            };
        }
        match held {
            Some(bytes) => self.inflate(chunk, bytes, out),
            None => RAW.with(|raw| {
                let mut raw = raw.borrow_mut();
                // Grow only: shrinking and regrowing would zero-fill on every chunk.
                if raw.len() < stored {
                    raw.resize(stored, 0);
                }
                let n = seg
                    .file
                    .read_at(&mut raw[..stored], offset)
                    .map_err(|e| self.corrupt(chunk, format!("read failed: {e}")))?;
                if n < stored {
                    return Err(self.corrupt(
                        chunk,
                        "segment ends inside the chunk: truncated segment".into(),
                    ));
                }
                self.inflate(chunk, &raw[..stored], out)
            }),
        }
    }

    /// Inflate a compressed chunk's stored bytes into `out`.
    fn inflate(&self, chunk: u64, stored: &[u8], out: &mut [u8]) -> Result<(), SourceError> {
        let logical = out.len() as u64;
        INFLATE.with(|inflater| {
            let mut inflater = inflater.borrow_mut();
            inflater.reset(true);
            let status = inflater.decompress(stored, out, FlushDecompress::Finish);
            match status {
                Ok(Status::StreamEnd) if inflater.total_out() == logical => Ok(()),
                Ok(Status::StreamEnd) => Err(self.corrupt(
                    chunk,
                    format!(
                        "inflates to {} bytes, expected {logical}",
                        inflater.total_out()
                    ),
                )),
                Ok(_) => Err(self.corrupt(
                    chunk,
                    "compressed data ends early or inflates too large".into(),
                )),
                Err(e) => Err(self.corrupt(
                    chunk,
                    format!("inflate failed ({e}): checksum or data damaged"),
                )),
            }
        })
    }

    /// Check a stored chunk against the Adler-32 that follows it.
    fn check_adler(&self, chunk: u64, data: &[u8], trailer: [u8; 4]) -> Result<(), SourceError> {
        let want = u32::from_le_bytes(trailer);
        // zlib-rs's Adler-32 is vectorised (AVX2/AVX-512); adler2's
        // scalar one cost 2.7% of the E01 image hash.
        let got = caseload_digests::adler32(data);
        if want != got {
            return Err(self.corrupt(
                chunk,
                format!("Adler-32 mismatch (stored {want:08x}, computed {got:08x})"),
            ));
        }
        Ok(())
    }

    /// An uncompressed chunk: read straight into `out` (no staging copy),
    /// then check the Adler-32 that follows it, when the segment holds it.
    fn read_stored_chunk(
        &self,
        chunk: u64,
        seg: &CountedSegment,
        offset: u64,
        stored: usize,
        out: &mut [u8],
    ) -> Result<(), SourceError> {
        let logical = out.len();
        if stored < logical {
            return Err(self.corrupt(
                chunk,
                format!("stored chunk is {stored} bytes, expected {logical}"),
            ));
        }
        let truncated = || {
            self.corrupt(
                chunk,
                "segment ends inside the chunk: truncated segment".into(),
            )
        };
        let n = seg
            .file
            .read_at(out, offset)
            .map_err(|e| self.corrupt(chunk, format!("read failed: {e}")))?;
        if n < logical {
            return Err(truncated());
        }
        if stored >= logical + 4 {
            let mut trailer = [0u8; 4];
            let n = seg
                .file
                .read_at(&mut trailer, offset + logical as u64)
                .map_err(|e| self.corrupt(chunk, format!("read failed: {e}")))?;
            if n < 4 {
                return Err(truncated());
            }
            self.check_adler(chunk, out, trailer)?;
        }
        Ok(())
    }

    /// EWF v2: the crate reads; we charge the chunk's stored bytes.
    fn read_v2(&self, buf: &mut [u8], offset: u64) -> Result<usize, SourceError> {
        let start = std::time::Instant::now();
        let n = self.reader.read_at(buf, offset).map_err(|e| {
            let chunk = offset / self.chunk_size;
            self.corrupt(chunk, e.to_string())
        })?;
        let first = offset / self.chunk_size;
        let last = (offset + n.max(1) as u64 - 1) / self.chunk_size;
        let mut stored = 0u64;
        for c in first..=last {
            if let Ok((_, s, _, _)) = self.reader.debug_chunk(c as usize) {
                stored += s;
            }
        }
        // The crate reads EWF2 segments on handles of its own (it takes
        // paths only): charge the stored bytes of the chunks it read.
        self.evidence.charge_foreign(&ChannelSnapshot {
            bytes_read: stored,
            read_ops: 1,
            read_blocked_ns: u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX),
            ..ChannelSnapshot::default()
        });
        Ok(n)
    }
}

/// The last chunk a thread decoded for a partial read: small files read in
/// disk order often share a chunk, and inflating it once per file would
/// multiply the CPU cost (libewf keeps a chunk cache for the same reason).
struct ChunkCache {
    source: u64,
    chunk: u64,
    valid: bool,
    data: Vec<u8>,
}

thread_local! {
    static RAW: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
    static CHUNK: RefCell<ChunkCache> = const { RefCell::new(ChunkCache { source: 0, chunk: 0, valid: false, data: Vec::new() }) };
    static INFLATE: RefCell<Decompress> = RefCell::new(Decompress::new(true));
}

impl EvidenceSource for EwfSource {
    fn size(&self) -> u64 {
        self.size
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<usize, SourceError> {
        if offset >= self.size {
            return Ok(0);
        }
        let want = usize::try_from((self.size - offset).min(buf.len() as u64)).unwrap_or(buf.len());
        if self.version2 {
            return self.read_v2(&mut buf[..want], offset);
        }
        // The chunk after the request's last: runs are sized from it.
        let want_end = (offset + want as u64).div_ceil(self.chunk_size);
        let mut run: Option<Arc<Run>> = None;
        let mut done = 0usize;
        while done < want {
            let pos = offset + done as u64;
            let chunk = pos / self.chunk_size;
            let chunk_start = chunk * self.chunk_size;
            let logical =
                usize::try_from((self.size - chunk_start).min(self.chunk_size)).unwrap_or(0);
            let within = usize::try_from(pos - chunk_start).unwrap_or(0);
            let take = (logical - within).min(want - done);
            if within == 0 && take == logical {
                // Whole chunk: inflate straight into the caller's buffer.
                self.decode_chunk(chunk, &mut buf[done..done + take], want_end, &mut run)?;
            } else {
                CHUNK.with(|cache| -> Result<(), SourceError> {
                    let mut cache = cache.borrow_mut();
                    if !(cache.valid && cache.source == self.id && cache.chunk == chunk) {
                        cache.valid = false;
                        cache.data.resize(logical, 0);
                        self.decode_chunk(chunk, &mut cache.data[..logical], want_end, &mut run)?;
                        cache.source = self.id;
                        cache.chunk = chunk;
                        cache.valid = true;
                    }
                    buf[done..done + take].copy_from_slice(&cache.data[within..within + take]);
                    Ok(())
                })?;
            }
            done += take;
        }
        Ok(done)
    }

    fn info(&self) -> &SourceInfo {
        &self.info
    }

    fn damage_unit(&self) -> u64 {
        self.chunk_size
    }

    fn read_size(&self) -> u64 {
        self.read.run_bytes.max(self.chunk_size)
    }

    fn hint(&self, offset: u64, len: u64) {
        let end = offset.saturating_add(len).min(self.size);
        self.runs
            .hint(offset / self.chunk_size, end.div_ceil(self.chunk_size));
    }
}

impl EwfSource {
    /// Most stored bytes one run reads: about the run size however well
    /// the chunks compressed (stored chunks are at most chunk + checksum).
    fn stretch_budget(&self) -> usize {
        usize::try_from(self.read.run_bytes.max(self.chunk_size) * 2 + 2048).unwrap_or(usize::MAX)
    }
}

impl RunReader for EwfSource {
    /// Chunks from `start` stored one after another in `start`'s segment.
    fn stretch(&self, start: u64, end: u64) -> u64 {
        let Ok((segment, first, stored, _)) = self.locate(start, self.logical(start)) else {
            return start + 1;
        };
        let budget = self.stretch_budget() as u64;
        let mut next = first + stored as u64;
        let mut c = start + 1;
        while c < end {
            match self.locate(c, self.logical(c)) {
                Ok((s, o, n, _))
                    if s == segment
                        && o >= next
                        && o - next <= 4096
                        && o + n as u64 - first <= budget =>
                {
                    next = o + n as u64;
                    c += 1;
                }
                _ => break,
            }
        }
        c
    }

    fn fill(&self, start: u64, end: u64, mut bytes: Vec<u8>) -> Option<Run> {
        let (segment, first, _, _) = self.locate(start, self.logical(start)).ok()?;
        let (_, last, stored, _) = self.locate(end - 1, self.logical(end - 1)).ok()?;
        let seg = self.segments.get(segment)?;
        let span = (last + stored as u64).checked_sub(first)?;
        let len = usize::try_from(span).ok()?;
        reuse(&mut bytes, len, self.stretch_budget());
        let n = seg.file.read_at(&mut bytes, first).ok()?;
        bytes.truncate(n);
        Some(Run {
            units: (start, end),
            file: segment,
            start: first,
            bytes,
        })
    }
}

/// Read the segment number from a segment's file header, noting the version.
fn segment_number(
    file: &ChannelFile,
    path: &Path,
    version2: &mut bool,
) -> Result<u64, SourceError> {
    let mut header = [0u8; 13];
    let n = file
        .read_at(&mut header, 0)
        .map_err(|source| SourceError::Read {
            path: path.to_path_buf(),
            offset: 0,
            source,
        })?;
    if n < 13 {
        return Err(SourceError::Format {
            path: path.to_path_buf(),
            reason: "file is shorter than an EWF file header".into(),
        });
    }
    match &header[..8] {
        // EWF v1: signature, 0x01, segment number (u16 LE), 0x0000.
        b"EVF\x09\x0d\x0a\xff\x00" => Ok(u64::from(u16::from_le_bytes([header[9], header[10]]))),
        // EWF v2: signature, major, minor, compression (u16), segment (u32 LE).
        b"EVF2\r\n\x81\x00" => {
            *version2 = true;
            let mut v2 = [0u8; 16];
            let n = file
                .read_at(&mut v2, 0)
                .map_err(|source| SourceError::Read {
                    path: path.to_path_buf(),
                    offset: 0,
                    source,
                })?;
            if n < 16 {
                return Err(SourceError::Format {
                    path: path.to_path_buf(),
                    reason: "file is shorter than an EWF2 file header".into(),
                });
            }
            Ok(u64::from(u32::from_le_bytes([
                v2[12], v2[13], v2[14], v2[15],
            ])))
        }
        _ => Err(SourceError::Format {
            path: path.to_path_buf(),
            reason: "not an EWF segment (bad signature)".into(),
        }),
    }
}

/// The extension of segment `n` (1-based): E01..E99, then EAA..EZZ, FAA...
/// `template` gives the first letter and case (`E01`, `e01`, `Ex01`).
fn segment_extension(template: &str, n: u64) -> Option<String> {
    let bytes = template.as_bytes();
    let first = *bytes.first()?;
    let lower = first.is_ascii_lowercase();
    if bytes.len() == 4 {
        // Ex01..Ex99, then ExAA..: keep the two-letter prefix.
        let prefix = &template[..2];
        return two_char_counter(n).map(|s| format!("{prefix}{s}"));
    }
    if n < 100 {
        return Some(format!("{}{:02}", first as char, n));
    }
    // After 99, three letters counting from first+"AA".
    let k = n - 100;
    let base = u64::from(first.to_ascii_uppercase() - b'A');
    let total = base * 26 * 26 + k;
    let a = total / (26 * 26);
    if a >= 26 {
        return None;
    }
    let b = (total / 26) % 26;
    let c = total % 26;
    let s: String = [a, b, c]
        .iter()
        .map(|&v| (b'A' + v as u8) as char)
        .collect();
    Some(if lower { s.to_ascii_lowercase() } else { s })
}

fn two_char_counter(n: u64) -> Option<String> {
    if n < 100 {
        return Some(format!("{n:02}"));
    }
    let k = n - 100;
    if k >= 26 * 26 {
        return None;
    }
    Some(format!(
        "{}{}",
        (b'A' + (k / 26) as u8) as char,
        (b'A' + (k % 26) as u8) as char
    ))
}

/// The segments of the set starting at `first`, in order; a gap is an error.
fn discover_segments(first: &Path) -> Result<Vec<PathBuf>, SourceError> {
    let ext = first.extension().and_then(|e| e.to_str()).unwrap_or("");
    let numbered = matches!(ext.len(), 3 | 4) && ext.ends_with("01");
    if !numbered {
        // A lone container with an unusual name: take it as the only segment.
        return Ok(vec![first.to_path_buf()]);
    }
    let mut paths = vec![first.to_path_buf()];
    let mut n = 2;
    while let Some(next_ext) = segment_extension(ext, n) {
        let next = first.with_extension(&next_ext);
        if !next.is_file() {
            // A later segment after a gap means one is missing.
            for gap in 1..=3 {
                if let Some(beyond) =
                    segment_extension(ext, n + gap).map(|e| first.with_extension(e))
                    && beyond.is_file()
                {
                    return Err(SourceError::Inconsistent {
                        path: first.to_path_buf(),
                        reason: format!(
                            "segment `{}` is missing but `{}` exists",
                            next.display(),
                            beyond.display()
                        ),
                    });
                }
            }
            break;
        }
        paths.push(next);
        n += 1;
    }
    Ok(paths)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segment_names_follow_the_ewf_sequence() {
        assert_eq!(segment_extension("E01", 1).as_deref(), Some("E01"));
        assert_eq!(segment_extension("E01", 99).as_deref(), Some("E99"));
        assert_eq!(segment_extension("E01", 100).as_deref(), Some("EAA"));
        assert_eq!(segment_extension("E01", 101).as_deref(), Some("EAB"));
        assert_eq!(segment_extension("E01", 126).as_deref(), Some("EBA"));
        assert_eq!(segment_extension("e01", 100).as_deref(), Some("eaa"));
        assert_eq!(
            segment_extension("E01", 100 + 26 * 26).as_deref(),
            Some("FAA")
        );
        assert_eq!(
            segment_extension("E01", 100 + 22 * 26 * 26 - 1).as_deref(),
            Some("ZZZ")
        );
        assert_eq!(segment_extension("E01", 100 + 22 * 26 * 26), None);
        assert_eq!(segment_extension("Ex01", 2).as_deref(), Some("Ex02"));
    }
}
