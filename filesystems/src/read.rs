//! Positioned reads: the only way this crate touches evidence.
//!
//! Every parser reads through [`ReadAt`], so the engine can hand in its own
//! counted evidence sources (raw, split raw, E01) and see every byte the
//! parsers move. Nothing in this crate opens a file itself.

use std::io;
use std::sync::Arc;

/// A read-only byte source addressed by absolute offset.
///
/// `read_at` may return fewer bytes than asked only at the end of the source;
/// a return of `0` means `offset` is at or past the end. Implementations must
/// be usable from several threads at once (`&self`, `Send + Sync`).
pub trait ReadAt: Send + Sync {
    /// Reads up to `buf.len()` bytes starting at `offset`.
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize>;

    /// Total length of the source in bytes.
    fn len(&self) -> u64;

    /// Whether the source holds no bytes at all.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl ReadAt for [u8] {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let Ok(start) = usize::try_from(offset) else {
            return Ok(0);
        };
        let Some(avail) = self.get(start..) else {
            return Ok(0);
        };
        let n = avail.len().min(buf.len());
        buf[..n].copy_from_slice(&avail[..n]);
        Ok(n)
    }

    fn len(&self) -> u64 {
        <[u8]>::len(self) as u64
    }
}

impl ReadAt for Vec<u8> {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        self.as_slice().read_at(buf, offset)
    }

    fn len(&self) -> u64 {
        Vec::len(self) as u64
    }
}

impl<T: ReadAt + ?Sized> ReadAt for &T {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        (**self).read_at(buf, offset)
    }

    fn len(&self) -> u64 {
        (**self).len()
    }
}

impl<T: ReadAt + ?Sized> ReadAt for Arc<T> {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        (**self).read_at(buf, offset)
    }

    fn len(&self) -> u64 {
        (**self).len()
    }
}

impl<T: ReadAt + ?Sized> ReadAt for Box<T> {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        (**self).read_at(buf, offset)
    }

    fn len(&self) -> u64 {
        (**self).len()
    }
}

/// A file opened by the caller. Its length is taken from the file's metadata
/// at each call (a stat is far cheaper than the reads it sizes); if the
/// metadata cannot be read the length is reported as 0, which makes every
/// parser see an empty source rather than guess.
impl ReadAt for std::fs::File {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        loop {
            #[cfg(unix)]
            let r = std::os::unix::fs::FileExt::read_at(self, buf, offset);
            #[cfg(windows)]
            let r = std::os::windows::fs::FileExt::seek_read(self, buf, offset);
            match r {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                other => return other,
            }
        }
    }

    fn len(&self) -> u64 {
        self.metadata().map(|m| m.len()).unwrap_or(0)
    }
}

/// Reads as many bytes as the source holds into `buf` starting at `offset`,
/// retrying short reads, and returns how many were read (less than
/// `buf.len()` only at the end of the source).
pub fn read_full<R: ReadAt + ?Sized>(src: &R, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        let Some(pos) = offset.checked_add(done as u64) else {
            break;
        };
        let n = src.read_at(&mut buf[done..], pos)?;
        if n == 0 {
            break;
        }
        done += n;
    }
    Ok(done)
}

/// Like [`read_full`] but fails with `UnexpectedEof` when the source ends
/// before `buf` is filled.
pub fn read_exact_at<R: ReadAt + ?Sized>(src: &R, buf: &mut [u8], offset: u64) -> io::Result<()> {
    let n = read_full(src, buf, offset)?;
    if n < buf.len() {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            format!(
                "source ends after {n} of {} bytes at offset {offset}",
                buf.len()
            ),
        ));
    }
    Ok(())
}

/// A sub-range of another source (a partition inside a disk), addressed from
/// zero. Reads past the window's end return short, never spill into the
/// bytes beyond it.
#[derive(Debug, Clone)]
pub struct Window<R> {
    inner: R,
    start: u64,
    len: u64,
}

impl<R: ReadAt> Window<R> {
    /// A window of `len` bytes starting at `start` in `inner`, clipped to the
    /// end of `inner`.
    pub fn new(inner: R, start: u64, len: u64) -> Self {
        let avail = inner.len().saturating_sub(start);
        Self {
            inner,
            start,
            len: len.min(avail),
        }
    }

    /// Offset of the window in the underlying source.
    pub fn start(&self) -> u64 {
        self.start
    }

    /// The underlying source.
    pub fn inner(&self) -> &R {
        &self.inner
    }
}

impl<R: ReadAt> ReadAt for Window<R> {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        if offset >= self.len {
            return Ok(0);
        }
        let n = usize::try_from(self.len - offset)
            .unwrap_or(usize::MAX)
            .min(buf.len());
        match self.start.checked_add(offset) {
            Some(pos) => self.inner.read_at(&mut buf[..n], pos),
            None => Ok(0),
        }
    }

    fn len(&self) -> u64 {
        self.len
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slice_reads_are_short_only_at_the_end() {
        let data: Vec<u8> = (0..100u8).collect();
        let mut buf = [0u8; 30];
        assert_eq!(data.read_at(&mut buf, 80).unwrap(), 20);
        assert_eq!(&buf[..20], &data[80..]);
        assert_eq!(data.read_at(&mut buf, 100).unwrap(), 0);
        assert_eq!(data.read_at(&mut buf, u64::MAX).unwrap(), 0);
    }

    #[test]
    fn window_clips_to_its_range_and_to_the_source() {
        let data: Vec<u8> = (0..100u8).collect();
        let w = Window::new(&data, 90, 50);
        assert_eq!(w.len(), 10);
        let mut buf = [0u8; 16];
        assert_eq!(read_full(&w, &mut buf, 0).unwrap(), 10);
        assert_eq!(&buf[..10], &data[90..]);
        assert!(read_exact_at(&w, &mut buf, 0).is_err());
        let inner = Window::new(&data, 10, 20);
        assert_eq!(read_full(&inner, &mut buf, 15).unwrap(), 5);
        assert_eq!(&buf[..5], &data[25..30]);
    }
}
