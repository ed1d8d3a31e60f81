//! The segment files: receives stored chunks in media order and lays them
//! out as sections (see the crate documentation for the layout).
//!
//! Runs on the writer's output thread. It is the only code that touches the
//! files, so every write is sequential except two small patches: a group's
//! `sectors` descriptor, whose size is known only when the group closes, and
//! at the very end the set identifier in each segment's `volume`/`data`
//! section, which is derived from the media hashes.

use crate::error::EwfWriteError;
use crate::format::{
    DESCRIPTOR_LEN, VOLUME_BODY_LEN, VolumeInfo, descriptor, digest_body, file_header, hash_body,
    table_body, volume_body,
};
use crate::layout::{Cursor, Placement};
use crate::options::GuidChoice;
use crate::plan::Plan;
use caseload_digests::Sha1;
use caseload_digests::{Digest, Md5};
use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// One segment file written so far.
#[derive(Debug, Clone)]
pub(crate) struct SegmentRecord {
    /// Its path.
    pub path: PathBuf,
    /// Offset of its `volume`/`data` body, where the GUID is patched.
    pub volume_body: u64,
    /// Its final size in bytes (set when it is closed).
    pub size: u64,
}

/// What the sink reports when the image is complete.
#[derive(Debug)]
pub(crate) struct SinkResult {
    pub segments: Vec<SegmentRecord>,
    pub md5: [u8; 16],
    pub sha1: [u8; 20],
    pub guid: [u8; 16],
    pub compressed_chunks: u64,
}

/// The output side of the writer.
pub(crate) struct Sink {
    plan: Arc<Plan>,
    file: Option<BufWriter<File>>,
    /// Logical end of the current segment file.
    offset: u64,
    cursor: Cursor,
    entries: Vec<u32>,
    segments: Vec<SegmentRecord>,
    md5: Md5,
    chunks_done: u64,
    compressed_chunks: u64,
    /// Set once the image is complete; until then dropping the sink removes
    /// its files, whatever path led there.
    complete: bool,
}

impl Drop for Sink {
    fn drop(&mut self) {
        if !self.complete {
            self.remove_files();
        }
    }
}

fn write_error(path: &Path, source: io::Error) -> EwfWriteError {
    EwfWriteError::Write {
        path: path.to_path_buf(),
        source,
    }
}

impl Sink {
    /// Create segment 1 and write its prologue.
    pub(crate) fn new(plan: Arc<Plan>) -> Result<Sink, EwfWriteError> {
        let cursor = plan.geometry.fresh(1);
        let mut sink = Sink {
            plan,
            file: None,
            offset: 0,
            cursor,
            entries: Vec::new(),
            segments: Vec::new(),
            md5: Md5::new(),
            chunks_done: 0,
            compressed_chunks: 0,
            complete: false,
        };
        sink.open_segment(1)?;
        Ok(sink)
    }

    fn current_path(&self) -> &Path {
        self.segments
            .last()
            .map_or(self.plan.prefix.as_path(), |s| s.path.as_path())
    }

    /// Append bytes to the current segment.
    fn emit(&mut self, bytes: &[u8]) -> Result<(), EwfWriteError> {
        let result = match self.file.as_mut() {
            Some(f) => f.write_all(bytes),
            None => Err(io::Error::other("no segment file is open")),
        };
        result.map_err(|e| write_error(self.current_path(), e))?;
        self.offset += bytes.len() as u64;
        Ok(())
    }

    /// Overwrite bytes at `at` in the current segment, then return to its end.
    fn patch(&mut self, at: u64, bytes: &[u8]) -> Result<(), EwfWriteError> {
        let end = self.offset;
        let result = match self.file.as_mut() {
            Some(f) => f
                .seek(SeekFrom::Start(at))
                .and_then(|_| f.write_all(bytes))
                .and_then(|()| f.seek(SeekFrom::Start(end)).map(|_| ())),
            None => Err(io::Error::other("no segment file is open")),
        };
        result.map_err(|e| write_error(self.current_path(), e))
    }

    /// Write a whole section whose body is `body`.
    fn section(&mut self, kind: &str, body: &[u8]) -> Result<(), EwfWriteError> {
        let size = DESCRIPTOR_LEN + body.len() as u64;
        let d = descriptor(kind, self.offset + size, size);
        self.emit(&d)?;
        self.emit(body)
    }

    fn volume_info(&self, guid: [u8; 16]) -> VolumeInfo {
        VolumeInfo {
            // The plan refuses images whose chunk count exceeds 32 bits.
            chunk_count: u32::try_from(self.plan.chunk_count).unwrap_or(u32::MAX),
            sectors_per_chunk: self.plan.options.chunk_sectors,
            sector_count: self.plan.media_size / u64::from(crate::format::BYTES_PER_SECTOR),
            compression: self.plan.options.compression,
            guid,
        }
    }

    /// Create segment `number` and write its file header and prologue
    /// sections. The GUID is written as zeros and patched in `finish`.
    fn open_segment(&mut self, number: u32) -> Result<(), EwfWriteError> {
        let path = self
            .plan
            .segment_path(number)
            .ok_or(EwfWriteError::TooManySegments {
                segment_size: self.plan.options.segment_size,
                needed: u64::from(number),
                limit: crate::format::MAX_SEGMENTS,
                suggested: self.plan.options.segment_size.saturating_mul(2),
            })?;
        let mut open = OpenOptions::new();
        open.write(true);
        if self.plan.options.overwrite {
            open.create(true).truncate(true);
        } else {
            open.create_new(true);
        }
        let file = open.open(&path).map_err(|source| {
            if source.kind() == io::ErrorKind::AlreadyExists {
                EwfWriteError::SegmentExists { path: path.clone() }
            } else {
                EwfWriteError::Create {
                    path: path.clone(),
                    source,
                }
            }
        })?;
        let segment_number = u16::try_from(number).unwrap_or(u16::MAX);
        self.file = Some(BufWriter::with_capacity(1 << 20, file));
        self.offset = 0;
        self.segments.push(SegmentRecord {
            path,
            volume_body: 0,
            size: 0,
        });
        self.emit(&file_header(segment_number))?;
        let body = volume_body(&self.volume_info([0; 16]));
        if number == 1 {
            let header2 = self.plan.header2.clone();
            self.section("header2", &header2)?;
            self.section("header2", &header2)?;
            let header = self.plan.header.clone();
            self.section("header", &header)?;
            self.mark_volume_body();
            self.section("volume", &body)?;
        } else {
            self.mark_volume_body();
            self.section("data", &body)?;
        }
        debug_assert_eq!(self.offset, self.plan.geometry.fresh(number).pos);
        Ok(())
    }

    fn mark_volume_body(&mut self) {
        let at = self.offset + DESCRIPTOR_LEN;
        if let Some(s) = self.segments.last_mut() {
            s.volume_body = at;
        }
    }

    /// Write the open group's `table` and `table2` and patch its `sectors`
    /// descriptor with the size now known.
    fn close_group(&mut self) -> Result<(), EwfWriteError> {
        let Some(base) = self.cursor.base else {
            return Ok(());
        };
        let table_at = self.offset;
        let body = table_body(base, &self.entries);
        self.section("table", &body)?;
        self.section("table2", &body)?;
        let sectors = descriptor("sectors", table_at, table_at - base);
        self.patch(base, &sectors)?;
        self.entries.clear();
        Ok(())
    }

    /// Finish the current segment with a `next` section and close its file.
    fn close_segment_for_next(&mut self) -> Result<(), EwfWriteError> {
        self.close_group()?;
        let at = self.offset;
        self.emit(&descriptor("next", at, 0))?;
        self.close_file()
    }

    fn close_file(&mut self) -> Result<(), EwfWriteError> {
        if let Some(mut f) = self.file.take() {
            f.flush().map_err(|e| write_error(self.current_path(), e))?;
        }
        let size = self.offset;
        if let Some(s) = self.segments.last_mut() {
            s.size = size;
        }
        Ok(())
    }

    /// Add the next chunk in media order: `raw` is the media bytes (for the
    /// MD5; the writer computes the SHA-1 on another thread), `stored` what
    /// goes in the file.
    pub(crate) fn put(
        &mut self,
        raw: &[u8],
        stored: &[u8],
        compressed: bool,
    ) -> Result<(), EwfWriteError> {
        self.md5.update(raw);
        let len = stored.len() as u64;
        let is_last = self.chunks_done + 1 == self.plan.chunk_count;
        let geometry = self.plan.geometry;
        let too_small = || EwfWriteError::SegmentSizeTooSmall {
            segment_size: geometry.segment_size,
            minimum: geometry.minimum_segment_size(len),
        };
        let placement = geometry.place(&self.cursor, len, is_last);
        match placement {
            Placement::SameGroup => {}
            Placement::NewGroup => {
                self.close_group()?;
                self.open_group()?;
            }
            Placement::NewSegment => {
                if self.cursor.base.is_none() {
                    return Err(too_small());
                }
                let next = self.cursor.segment + 1;
                if geometry.place(&geometry.fresh(next), len, is_last) == Placement::NewSegment {
                    return Err(too_small());
                }
                self.close_segment_for_next()?;
                self.open_segment(next)?;
                self.open_group()?;
            }
        }
        geometry.apply(&mut self.cursor, placement, len);
        let base = self.cursor.base.unwrap_or(0);
        // The layout keeps every chunk's offset below 2^31 from its base.
        let relative = u32::try_from(self.offset - base).unwrap_or(u32::MAX);
        self.entries
            .push(relative | if compressed { 0x8000_0000 } else { 0 });
        self.emit(stored)?;
        debug_assert_eq!(self.offset, self.cursor.pos);
        self.chunks_done += 1;
        if compressed {
            self.compressed_chunks += 1;
        }
        Ok(())
    }

    /// Start a group: a `sectors` descriptor whose size is patched later.
    fn open_group(&mut self) -> Result<(), EwfWriteError> {
        let placeholder = descriptor("sectors", 0, 0);
        self.emit(&placeholder)
    }

    /// Close the last group, write the closing sections, fix the GUID in
    /// every segment and return what was written. `sha1` is the media's.
    pub(crate) fn finish(mut self, sha1: [u8; 20]) -> Result<SinkResult, EwfWriteError> {
        match self.finish_inner(sha1) {
            Ok(r) => Ok(r),
            Err(e) => {
                self.remove_files();
                Err(e)
            }
        }
    }

    fn finish_inner(&mut self, sha1: [u8; 20]) -> Result<SinkResult, EwfWriteError> {
        if self.chunks_done != self.plan.chunk_count {
            return Err(EwfWriteError::ThreadFailed);
        }
        let md5: [u8; 16] = std::mem::take(&mut self.md5).finalize().into();
        let guid = self.guid(&md5, &sha1);
        let volume = volume_body(&self.volume_info(guid));
        self.close_group()?;
        if self.cursor.segment == 1 {
            self.section("data", &volume)?;
        }
        self.section("digest", &digest_body(&md5, &sha1))?;
        self.section("hash", &hash_body(&md5))?;
        let at = self.offset;
        self.emit(&descriptor("done", at, 0))?;
        self.close_file()?;
        for seg in &self.segments {
            patch_file(&seg.path, seg.volume_body, &volume)?;
        }
        if self.plan.options.overwrite {
            self.remove_stale_segments();
        }
        self.complete = true;
        Ok(SinkResult {
            segments: self.segments.clone(),
            md5,
            sha1,
            guid,
            compressed_chunks: self.compressed_chunks,
        })
    }

    /// With overwrite, an older set under the same prefix may have had more
    /// segments; leaving them would make readers append them to this image.
    fn remove_stale_segments(&self) {
        let mut n = self.cursor.segment + 1;
        while let Some(path) = self.plan.segment_path(n) {
            if !path.is_file() || std::fs::remove_file(&path).is_err() {
                break;
            }
            n += 1;
        }
    }

    /// The segment set identifier.
    fn guid(&self, md5: &[u8; 16], sha1: &[u8; 20]) -> [u8; 16] {
        match self.plan.options.guid {
            GuidChoice::Fixed(g) => g,
            GuidChoice::Random => random_guid(),
            GuidChoice::Derived => {
                let o = &self.plan.options;
                let mut h = Sha1::new();
                h.update(b"caseload-ewf-writer set identifier v1\0");
                h.update(md5);
                h.update(sha1);
                h.update(self.plan.source_size.to_le_bytes());
                h.update(o.chunk_sectors.to_le_bytes());
                h.update(o.segment_size.to_le_bytes());
                h.update([o.compression.volume_level()]);
                h.update(o.acquired.to_le_bytes());
                let m = &o.metadata;
                for field in [
                    &m.case_number,
                    &m.evidence_number,
                    &m.examiner,
                    &m.description,
                    &m.notes,
                ] {
                    h.update((field.len() as u64).to_le_bytes());
                    h.update(field.as_bytes());
                }
                let digest: [u8; 20] = h.finalize().into();
                let mut g = [0u8; 16];
                g.copy_from_slice(&digest[..16]);
                mark_version(&mut g, 5);
                g
            }
        }
    }

    /// Remove every segment this sink created (after a failure or abort).
    pub(crate) fn remove_files(&mut self) {
        self.file = None;
        for seg in self.segments.drain(..) {
            let _ = std::fs::remove_file(&seg.path);
        }
    }
}

/// Rewrite a `volume`/`data` body (GUID and checksum) in a closed segment.
fn patch_file(path: &Path, at: u64, body: &[u8; VOLUME_BODY_LEN]) -> Result<(), EwfWriteError> {
    let result = OpenOptions::new().write(true).open(path).and_then(|mut f| {
        f.seek(SeekFrom::Start(at))?;
        f.write_all(body)?;
        f.flush()
    });
    result.map_err(|e| write_error(path, e))
}

/// A version 4 GUID from the standard library's per-process random keys
/// (seeded from the operating system), mixed with the time and process id.
/// Uniqueness, not secrecy, is what a set identifier needs.
fn random_guid() -> [u8; 16] {
    use std::hash::{BuildHasher, Hasher};
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let mut g = [0u8; 16];
    for (i, part) in g.chunks_mut(8).enumerate() {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u128(nanos);
        h.write_u32(std::process::id());
        h.write_usize(i);
        part.copy_from_slice(&h.finish().to_le_bytes());
    }
    mark_version(&mut g, 4);
    g
}

/// Set the RFC 4122 version and variant bits. EWF stores the GUID in the
/// Windows layout (first three fields little-endian), which is how libewf
/// prints it, so the version nibble lives in the high half of byte 7.
fn mark_version(g: &mut [u8; 16], version: u8) {
    g[7] = (g[7] & 0x0f) | (version << 4);
    g[8] = (g[8] & 0x3f) | 0x80;
}
