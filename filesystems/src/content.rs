//! Reading a record's content through its runs, in bounded memory.

use std::io::{self, Read, Seek, SeekFrom};

use crate::apfs::decmpfs;
use crate::read::ReadAt;
use crate::record::{Content, Run, clip_runs};

/// Bytes a read of `want` at `offset` gets from content of `size` bytes,
/// `None` at or past its end.
fn span(size: u64, offset: u64, want: usize) -> Option<usize> {
    (offset < size).then(|| {
        usize::try_from(size - offset)
            .unwrap_or(usize::MAX)
            .min(want)
    })
}

/// An APFS resource fork's error, named as one.
fn fork_error(e: &io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("resource fork: {e}"))
}

/// A reader over one record's [`Content`]: reads go to the source through
/// the runs (zero runs are produced without reading), resident bytes are
/// served from the record, NTFS-compressed units and APFS resource-fork
/// blocks are decoded one at a time. It holds at most one decoded unit or
/// block (64 KiB), its stored bytes and a page of the fork's block table,
/// so memory stays fixed whatever the file size.
///
/// For [`Content::Encoded`] it yields the stored bytes, not the decoded file.
#[derive(Debug)]
pub struct ContentReader<'a, R: ?Sized> {
    src: &'a R,
    content: &'a Content,
    pos: u64,
    len: u64,
    /// Index of the run holding `pos`, and the file offset that run starts
    /// at, so sequential reads do not rescan the run list.
    run_idx: usize,
    run_start: u64,
    /// The compression unit decoded last: (index, bytes).
    unit: Option<(u64, Vec<u8>)>,
    /// An APFS resource fork's block and table page read last.
    fork: ForkCache,
}

/// Bytes of an APFS resource fork's block table read at a time.
const TABLE_PAGE: u64 = 4096;

/// What a reader of [`Content::Decmpfs`] keeps from one read to the next.
#[derive(Debug, Default)]
struct ForkCache {
    /// The block decoded last: (index, decoded bytes).
    block: Option<(u64, Vec<u8>)>,
    /// The page of the fork read last for its table: (page, bytes).
    page: Option<(u64, Vec<u8>)>,
    /// A block's stored bytes, reused.
    stored: Vec<u8>,
}

impl<'a, R: ReadAt + ?Sized> ContentReader<'a, R> {
    /// A reader positioned at the start of `content`.
    pub fn new(src: &'a R, content: &'a Content) -> Self {
        Self {
            src,
            content,
            pos: 0,
            len: content.len(),
            run_idx: 0,
            run_start: 0,
            unit: None,
            fork: ForkCache::default(),
        }
    }

    /// Total length of the content.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the content is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Reads from file offset `offset` into `buf`; returns the bytes read
    /// (fewer only at the end of the content). Fails if the source ends
    /// before a run does.
    pub fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        match self.content {
            Content::Compressed { .. } => return self.read_compressed(buf, offset, &mut None),
            Content::Decmpfs { .. } => {
                return self.read_decmpfs(buf, offset, &mut ForkCache::default());
            }
            _ => {}
        }
        let mut idx = 0;
        let mut start = 0;
        self.read_from(buf, offset, &mut idx, &mut start)
    }

    /// Reads decoded bytes of a compressed stream, decoding the units the
    /// range covers (keeping the last one in `cache`).
    fn read_compressed(
        &self,
        buf: &mut [u8],
        offset: u64,
        cache: &mut Option<(u64, Vec<u8>)>,
    ) -> io::Result<usize> {
        let Content::Compressed {
            runs,
            unit,
            size,
            initialized,
        } = self.content
        else {
            return Ok(0);
        };
        let unit = (*unit).max(1);
        let Some(n) = span(*size, offset, buf.len()) else {
            return Ok(0);
        };
        let mut done = 0usize;
        while done < n {
            let p = offset + done as u64;
            if p >= *initialized {
                buf[done..n].fill(0);
                break;
            }
            let k = p / unit;
            if cache.as_ref().is_none_or(|(i, _)| *i != k) {
                *cache = Some((k, self.decode_unit(runs, unit, k)?));
            }
            let bytes = cache.as_ref().map_or(&[][..], |(_, b)| &b[..]);
            let within = usize::try_from(p - k * unit).unwrap_or(usize::MAX);
            let take = usize::try_from((k + 1) * unit - p)
                .unwrap_or(usize::MAX)
                .min(n - done)
                .min(usize::try_from(initialized - p).unwrap_or(usize::MAX));
            let dst = &mut buf[done..done + take];
            let src = bytes.get(within..).unwrap_or(&[]);
            let m = src.len().min(take);
            dst[..m].copy_from_slice(&src[..m]);
            dst[m..].fill(0);
            done += take;
        }
        Ok(n)
    }

    /// Decodes compression unit `k`: all sparse reads as zeros, all stored
    /// is kept as is, stored clusters followed by sparse ones are LZNT1.
    fn decode_unit(&self, runs: &[Run], unit: u64, k: u64) -> io::Result<Vec<u8>> {
        let unit_len = usize::try_from(unit).map_err(|_| {
            io::Error::new(io::ErrorKind::InvalidData, "compression unit too large")
        })?;
        let parts = clip_runs(runs, k * unit, (k + 1) * unit);
        let sparse = parts.iter().any(|r| matches!(r, Run::Zeros { .. }));
        let mut stored = Vec::new();
        for r in &parts {
            if let Run::Data { offset, len } = *r {
                let start = stored.len();
                stored.resize(start + usize::try_from(len).unwrap_or(0), 0);
                crate::read::read_exact_at(self.src, &mut stored[start..], offset)?;
            }
        }
        let mut out = if sparse && !stored.is_empty() {
            let mut out = Vec::with_capacity(unit_len);
            crate::lznt1::decompress(&stored, &mut out, unit_len).map_err(|e| {
                io::Error::new(io::ErrorKind::InvalidData, format!("unit {k}: {e}"))
            })?;
            out
        } else {
            stored
        };
        out.resize(unit_len, 0);
        Ok(out)
    }

    /// Reads decoded bytes of an APFS resource-fork-compressed file,
    /// decoding the blocks the range covers (keeping the last in `cache`).
    fn read_decmpfs(
        &self,
        buf: &mut [u8],
        offset: u64,
        cache: &mut ForkCache,
    ) -> io::Result<usize> {
        let Content::Decmpfs { runs, codec, size } = self.content else {
            return Ok(0);
        };
        let Some(n) = span(*size, offset, buf.len()) else {
            return Ok(0);
        };
        let fork_len = runs.iter().fold(0u64, |t, r| t.saturating_add(r.len()));
        let mut done = 0usize;
        while done < n {
            let p = offset + done as u64;
            let k = p / decmpfs::BLOCK;
            if cache.block.as_ref().is_none_or(|(i, _)| *i != k) {
                let page = &mut cache.page;
                let (at, len) = decmpfs::block_location(*codec, k, fork_len, &mut |at, dst| {
                    self.read_table(runs, fork_len, page, at, dst)
                })
                .map_err(|e| fork_error(&e))?;
                let stored = &mut cache.stored;
                stored.resize(usize::try_from(len).unwrap_or(0), 0);
                self.read_fork(runs, fork_len, stored, at)
                    .map_err(|e| fork_error(&e))?;
                let want =
                    usize::try_from((size - k * decmpfs::BLOCK).min(decmpfs::BLOCK)).unwrap_or(0);
                let mut out = cache.block.take().map(|(_, b)| b).unwrap_or_default();
                decmpfs::decode_block(*codec, &format!("block {k}"), stored, want, &mut out)
                    .map_err(|e| fork_error(&e))?;
                cache.block = Some((k, out));
            }
            let bytes = cache.block.as_ref().map_or(&[][..], |(_, b)| &b[..]);
            let within = usize::try_from(p - k * decmpfs::BLOCK).unwrap_or(usize::MAX);
            let src = bytes.get(within..).unwrap_or(&[]);
            let take = src.len().min(n - done);
            if take == 0 {
                break;
            }
            buf[done..done + take].copy_from_slice(&src[..take]);
            done += take;
        }
        Ok(done)
    }

    /// Fills `dst` from fork offset `at`, through the page cache (the
    /// table's entries are read a few bytes at a time).
    fn read_table(
        &self,
        runs: &[Run],
        fork_len: u64,
        page: &mut Option<(u64, Vec<u8>)>,
        at: u64,
        dst: &mut [u8],
    ) -> io::Result<()> {
        let mut done = 0usize;
        while done < dst.len() {
            let p = at + done as u64;
            let k = p / TABLE_PAGE;
            if page.as_ref().is_none_or(|(i, _)| *i != k) {
                let start = k * TABLE_PAGE;
                let len = (fork_len.saturating_sub(start)).min(TABLE_PAGE);
                let mut bytes = page.take().map(|(_, b)| b).unwrap_or_default();
                bytes.resize(usize::try_from(len).unwrap_or(0), 0);
                self.read_fork(runs, fork_len, &mut bytes, start)?;
                *page = Some((k, bytes));
            }
            let bytes = page.as_ref().map_or(&[][..], |(_, b)| &b[..]);
            let src = bytes
                .get(usize::try_from(p - k * TABLE_PAGE).unwrap_or(usize::MAX)..)
                .unwrap_or(&[]);
            let take = src.len().min(dst.len() - done);
            if take == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!("fork byte {p} is past its end ({fork_len} bytes)"),
                ));
            }
            dst[done..done + take].copy_from_slice(&src[..take]);
            done += take;
        }
        Ok(())
    }

    /// Fills `dst` with the fork's bytes from fork offset `at`.
    fn read_fork(&self, runs: &[Run], fork_len: u64, dst: &mut [u8], at: u64) -> io::Result<()> {
        let got = self.read_runs(runs, fork_len, dst, at, &mut 0, &mut 0)?;
        if got < dst.len() {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!(
                    "fork bytes {at}..{} are past its end",
                    at + dst.len() as u64
                ),
            ));
        }
        Ok(())
    }

    fn read_from(
        &self,
        buf: &mut [u8],
        offset: u64,
        run_idx: &mut usize,
        run_start: &mut u64,
    ) -> io::Result<usize> {
        if offset >= self.len || buf.is_empty() {
            return Ok(0);
        }
        let runs = match self.content {
            Content::None => return Ok(0),
            Content::Resident(bytes) => {
                let start = usize::try_from(offset).unwrap_or(usize::MAX);
                let avail = bytes.get(start..).unwrap_or(&[]);
                let n = avail.len().min(buf.len());
                buf[..n].copy_from_slice(&avail[..n]);
                return Ok(n);
            }
            Content::Runs(r) | Content::Encoded { runs: r, .. } => r,
            // Handled by `read_compressed` and `read_decmpfs`.
            Content::Compressed { .. } | Content::Decmpfs { .. } => return Ok(0),
        };
        self.read_runs(runs, self.len, buf, offset, run_idx, run_start)
    }

    /// Reads `runs` (`len` bytes in all) from offset `offset`, starting
    /// the scan at run `run_idx` (which begins at `run_start`).
    fn read_runs(
        &self,
        runs: &[Run],
        len: u64,
        buf: &mut [u8],
        offset: u64,
        run_idx: &mut usize,
        run_start: &mut u64,
    ) -> io::Result<usize> {
        if offset >= len || buf.is_empty() {
            return Ok(0);
        }
        // Restart the scan if asked to go backwards.
        if offset < *run_start {
            *run_idx = 0;
            *run_start = 0;
        }
        let mut done = 0usize;
        let mut off = offset;
        while done < buf.len() {
            let Some(run) = runs.get(*run_idx) else {
                break;
            };
            let run_len = run.len();
            if off >= run_start.saturating_add(run_len) {
                *run_start = run_start.saturating_add(run_len);
                *run_idx += 1;
                continue;
            }
            let within = off - *run_start;
            let want = usize::try_from(run_len - within)
                .unwrap_or(usize::MAX)
                .min(buf.len() - done);
            let dst = &mut buf[done..done + want];
            match *run {
                Run::Zeros { .. } => dst.fill(0),
                Run::Data { offset: at, .. } => {
                    let pos = at.checked_add(within).ok_or_else(|| {
                        io::Error::new(io::ErrorKind::InvalidData, "run offset overflows")
                    })?;
                    crate::read::read_exact_at(self.src, dst, pos)?;
                }
            }
            done += want;
            off += want as u64;
        }
        Ok(done)
    }
}

impl<R: ReadAt + ?Sized> Read for ContentReader<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if let Content::Compressed { .. } = self.content {
            let mut cache = self.unit.take();
            let n = self.read_compressed(buf, self.pos, &mut cache);
            self.unit = cache;
            let n = n?;
            self.pos += n as u64;
            return Ok(n);
        }
        if let Content::Decmpfs { .. } = self.content {
            let mut cache = std::mem::take(&mut self.fork);
            let n = self.read_decmpfs(buf, self.pos, &mut cache);
            self.fork = cache;
            let n = n?;
            self.pos += n as u64;
            return Ok(n);
        }
        let (mut idx, mut start) = (self.run_idx, self.run_start);
        let n = self.read_from(buf, self.pos, &mut idx, &mut start)?;
        self.run_idx = idx;
        self.run_start = start;
        self.pos += n as u64;
        Ok(n)
    }
}

impl<R: ReadAt + ?Sized> Seek for ContentReader<'_, R> {
    fn seek(&mut self, pos: SeekFrom) -> io::Result<u64> {
        let target = match pos {
            SeekFrom::Start(p) => Some(p),
            SeekFrom::End(d) => self.len.checked_add_signed(d),
            SeekFrom::Current(d) => self.pos.checked_add_signed(d),
        };
        let target = target.ok_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidInput, "seek before start of content")
        })?;
        self.pos = target;
        Ok(target)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_follow_runs_and_zero_holes() {
        let src: Vec<u8> = (0..=255u8).collect();
        let content = Content::Runs(vec![
            Run::Data { offset: 10, len: 4 },
            Run::Zeros { len: 3 },
            Run::Data {
                offset: 200,
                len: 2,
            },
        ]);
        let mut r = ContentReader::new(&src, &content);
        let mut all = Vec::new();
        r.read_to_end(&mut all).unwrap();
        assert_eq!(all, vec![10, 11, 12, 13, 0, 0, 0, 200, 201]);
        let mut buf = [0u8; 4];
        assert_eq!(r.read_at(&mut buf, 5).unwrap(), 4);
        assert_eq!(buf, [0, 0, 200, 201]);
        r.seek(SeekFrom::Start(2)).unwrap();
        let mut two = [0u8; 2];
        r.read_exact(&mut two).unwrap();
        assert_eq!(two, [12, 13]);
    }

    #[test]
    fn a_run_past_the_source_end_is_an_error_not_a_short_file() {
        let src = vec![1u8; 8];
        let content = Content::Runs(vec![Run::Data { offset: 4, len: 8 }]);
        let mut r = ContentReader::new(&src, &content);
        let mut all = Vec::new();
        assert!(r.read_to_end(&mut all).is_err());
    }
}
