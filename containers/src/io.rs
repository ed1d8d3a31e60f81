//! The bytes under a container: the caller's [`Backing`] files, read whole
//! or through a fixed-size page cache for the containers' tables.

use crate::error::{ContainerError, format};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Positioned, read-only access to one file of a container, usable from any
/// thread. The engine implements it over its evidence channel so every byte
/// read is counted; [`FileBacking`] is a plain implementation.
pub trait Backing: Send + Sync {
    /// Reads up to `buf.len()` bytes at `offset`; returns how many were read
    /// (fewer only at the end of the file, 0 past it).
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize>;

    /// Length of the file in bytes.
    fn len(&self) -> u64;

    /// Whether the file is empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<T: Backing + ?Sized> Backing for Box<T> {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        (**self).read_at(buf, offset)
    }

    fn len(&self) -> u64 {
        (**self).len()
    }
}

impl<T: Backing + ?Sized> Backing for std::sync::Arc<T> {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        (**self).read_at(buf, offset)
    }

    fn len(&self) -> u64 {
        (**self).len()
    }
}

/// Bytes held in memory (tests, small images).
impl Backing for Vec<u8> {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let Ok(start) = usize::try_from(offset) else {
            return Ok(0);
        };
        let Some(have) = self.get(start..) else {
            return Ok(0);
        };
        let n = have.len().min(buf.len());
        buf[..n].copy_from_slice(&have[..n]);
        Ok(n)
    }

    fn len(&self) -> u64 {
        self.len() as u64
    }
}

/// A file opened from the file system, read with the platform's positioned
/// read (no shared cursor, so any thread may read at once).
#[derive(Debug)]
pub struct FileBacking {
    file: std::fs::File,
    len: u64,
}

impl FileBacking {
    /// Opens `path` read-only.
    pub fn open(path: &Path) -> io::Result<FileBacking> {
        let file = std::fs::File::open(path)?;
        let len = file.metadata()?.len();
        Ok(FileBacking { file, len })
    }

    /// An opener for [`crate::Container::open_path`] that opens each file
    /// with [`FileBacking::open`].
    pub fn opener(path: &Path) -> io::Result<Box<dyn Backing>> {
        Ok(Box::new(FileBacking::open(path)?))
    }
}

impl Backing for FileBacking {
    #[cfg(unix)]
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        std::os::unix::fs::FileExt::read_at(&self.file, buf, offset)
    }

    #[cfg(windows)]
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        std::os::windows::fs::FileExt::seek_read(&self.file, buf, offset)
    }

    #[cfg(not(any(unix, windows)))]
    fn read_at(&self, _buf: &mut [u8], _offset: u64) -> io::Result<usize> {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "positioned reads need Unix or Windows",
        ))
    }

    fn len(&self) -> u64 {
        self.len
    }
}

/// Opens a file a container names (a VMDK descriptor's extents, relative
/// to the descriptor's folder), so the caller can count its reads.
pub type Opener<'a> = dyn Fn(&Path) -> io::Result<Box<dyn Backing>> + 'a;

/// Size of one page of the table cache.
const PAGE: u64 = 64 << 10;
/// Pages the table cache holds (4 MiB): grain tables, L2 tables and BATs
/// of any size are read through it, so memory does not grow with them.
const PAGES: usize = 64;

struct Page {
    file: usize,
    index: u64,
    bytes: Vec<u8>,
    used: u64,
}

/// One file of a container.
pub(crate) struct File {
    pub(crate) path: PathBuf,
    pub(crate) backing: Box<dyn Backing>,
}

/// The files of a container and the page cache over their tables.
pub(crate) struct Files {
    files: Vec<File>,
    pages: Mutex<(Vec<Page>, u64)>,
    /// Inflates the container's compressed units (grains, clusters) with
    /// the backend caseload-inflate's rule names for them.
    pub(crate) inflater: caseload_inflate::Inflater,
}

impl Files {
    pub(crate) fn new() -> Files {
        Files {
            files: Vec::new(),
            pages: Mutex::new((Vec::new(), 0)),
            inflater: caseload_inflate::Inflater::new(caseload_inflate::Unit::ContainerGrain),
        }
    }

    /// Adds a file; returns its index.
    pub(crate) fn add(&mut self, path: PathBuf, backing: Box<dyn Backing>) -> usize {
        self.files.push(File { path, backing });
        self.files.len() - 1
    }

    /// Index of a file already added under `path`.
    pub(crate) fn find(&self, path: &Path) -> Option<usize> {
        self.files.iter().position(|f| f.path == path)
    }

    pub(crate) fn paths(&self) -> Vec<PathBuf> {
        self.files.iter().map(|f| f.path.clone()).collect()
    }

    pub(crate) fn path(&self, file: usize) -> &Path {
        self.files
            .get(file)
            .map_or(Path::new("?"), |f| f.path.as_path())
    }

    pub(crate) fn len(&self, file: usize) -> u64 {
        self.files.get(file).map_or(0, |f| f.backing.len())
    }

    /// Fills `buf` from `offset` of `file` directly; an error names the
    /// structure (`what`) when the file ends first.
    pub(crate) fn read_exact(
        &self,
        file: usize,
        offset: u64,
        buf: &mut [u8],
        what: &str,
    ) -> Result<(), ContainerError> {
        let got = self.read_some(file, offset, buf)?;
        if got < buf.len() {
            return Err(format(
                self.path(file),
                offset,
                format!(
                    "{what}: {} bytes needed, file ends after {got} (file size {})",
                    buf.len(),
                    self.len(file)
                ),
            ));
        }
        Ok(())
    }

    /// Reads as much of `buf` as the file holds from `offset`.
    pub(crate) fn read_some(
        &self,
        file: usize,
        offset: u64,
        buf: &mut [u8],
    ) -> Result<usize, ContainerError> {
        let Some(f) = self.files.get(file) else {
            return Err(format(Path::new("?"), offset, "no such container file"));
        };
        let mut done = 0;
        while done < buf.len() {
            let at = offset.saturating_add(done as u64);
            match f.backing.read_at(&mut buf[done..], at) {
                Ok(0) => break,
                Ok(n) => done += n.min(buf.len() - done),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(source) => {
                    return Err(ContainerError::Io {
                        path: f.path.clone(),
                        offset: at,
                        source,
                    });
                }
            }
        }
        Ok(done)
    }

    /// Fills `buf` from `offset` of `file` through the page cache (for
    /// small, often re-read structures: table entries, bitmaps).
    pub(crate) fn table(
        &self,
        file: usize,
        offset: u64,
        buf: &mut [u8],
        what: &str,
    ) -> Result<(), ContainerError> {
        let mut done = 0usize;
        while done < buf.len() {
            let at = offset.saturating_add(done as u64);
            let index = at / PAGE;
            let within = at % PAGE;
            let n = self.copy_from_page(file, index, within, &mut buf[done..])?;
            if n == 0 {
                return Err(format(
                    self.path(file),
                    at,
                    format!(
                        "{what} lies past the end of the file (size {})",
                        self.len(file)
                    ),
                ));
            }
            done += n;
        }
        Ok(())
    }

    fn copy_from_page(
        &self,
        file: usize,
        index: u64,
        within: u64,
        out: &mut [u8],
    ) -> Result<usize, ContainerError> {
        let copy = |bytes: &[u8], out: &mut [u8]| -> usize {
            let Ok(w) = usize::try_from(within) else {
                return 0;
            };
            let have = bytes.get(w..).unwrap_or(&[]);
            let n = have.len().min(out.len());
            out[..n].copy_from_slice(&have[..n]);
            n
        };
        {
            let mut guard = self.pages.lock().unwrap_or_else(|p| p.into_inner());
            let (pages, clock) = &mut *guard;
            *clock += 1;
            let now = *clock;
            if let Some(p) = pages
                .iter_mut()
                .find(|p| p.file == file && p.index == index)
            {
                p.used = now;
                return Ok(copy(&p.bytes, out));
            }
        }
        // Read outside the lock so other threads' hits are not held up.
        let mut bytes = vec![0u8; PAGE as usize];
        let got = self.read_some(file, index.saturating_mul(PAGE), &mut bytes)?;
        bytes.truncate(got);
        let n = copy(&bytes, out);
        let mut guard = self.pages.lock().unwrap_or_else(|p| p.into_inner());
        let (pages, clock) = &mut *guard;
        *clock += 1;
        let page = Page {
            file,
            index,
            bytes,
            used: *clock,
        };
        if pages.len() < PAGES {
            pages.push(page);
        } else if let Some(oldest) = pages.iter_mut().min_by_key(|p| p.used) {
            *oldest = page;
        }
        Ok(n)
    }

    pub(crate) fn u32_le(
        &self,
        file: usize,
        offset: u64,
        what: &str,
    ) -> Result<u32, ContainerError> {
        let mut b = [0u8; 4];
        self.table(file, offset, &mut b, what)?;
        Ok(u32::from_le_bytes(b))
    }

    pub(crate) fn u64_le(
        &self,
        file: usize,
        offset: u64,
        what: &str,
    ) -> Result<u64, ContainerError> {
        let mut b = [0u8; 8];
        self.table(file, offset, &mut b, what)?;
        Ok(u64::from_le_bytes(b))
    }

    pub(crate) fn u32_be(
        &self,
        file: usize,
        offset: u64,
        what: &str,
    ) -> Result<u32, ContainerError> {
        let mut b = [0u8; 4];
        self.table(file, offset, &mut b, what)?;
        Ok(u32::from_be_bytes(b))
    }

    pub(crate) fn u64_be(
        &self,
        file: usize,
        offset: u64,
        what: &str,
    ) -> Result<u64, ContainerError> {
        let mut b = [0u8; 8];
        self.table(file, offset, &mut b, what)?;
        Ok(u64::from_be_bytes(b))
    }
}

/// Little- and big-endian fields of a header already in memory; a field
/// past the slice reads as 0 (callers check lengths first).
pub(crate) fn le16(b: &[u8], at: usize) -> u16 {
    b.get(at..at + 2)
        .and_then(|s| s.try_into().ok())
        .map_or(0, u16::from_le_bytes)
}

pub(crate) fn le32(b: &[u8], at: usize) -> u32 {
    b.get(at..at + 4)
        .and_then(|s| s.try_into().ok())
        .map_or(0, u32::from_le_bytes)
}

pub(crate) fn le64(b: &[u8], at: usize) -> u64 {
    b.get(at..at + 8)
        .and_then(|s| s.try_into().ok())
        .map_or(0, u64::from_le_bytes)
}

pub(crate) fn be32(b: &[u8], at: usize) -> u32 {
    b.get(at..at + 4)
        .and_then(|s| s.try_into().ok())
        .map_or(0, u32::from_be_bytes)
}

pub(crate) fn be64(b: &[u8], at: usize) -> u64 {
    b.get(at..at + 8)
        .and_then(|s| s.try_into().ok())
        .map_or(0, u64::from_be_bytes)
}

/// CRC-32C (Castagnoli), as VHDX checksums its headers and tables.
pub(crate) fn crc32c(data: &[u8]) -> u32 {
    crc32c::crc32c(data)
}

#[cfg(test)]
mod tests {
    #[test]
    fn crc32c_check_value() {
        assert_eq!(super::crc32c(b"123456789"), 0xE306_9283);
    }
}
