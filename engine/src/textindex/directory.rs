//! A tantivy [`Directory`] over a caseload [`Channel`]: every byte tantivy
//! reads or writes for the index goes through a [`ChannelFile`] and is
//! counted on that channel.
//!
//! tantivy's own `MmapDirectory` maps segment files into memory; page faults
//! on a mapping are invisible to the channel counters, so that directory
//! (and the `mmap` feature) is not used. Reads here are positioned reads
//! (`pread`) into owned buffers: tantivy asks for byte ranges (a postings
//! block, a doc-store block, a term-dictionary), so each request is one
//! counted read of exactly the bytes it needs.

use crate::channel::{Channel, ChannelError, ChannelFile};
use std::collections::HashMap;
use std::io::{self, Write};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use tantivy::directory::error::{DeleteError, OpenReadError, OpenWriteError};
use tantivy::directory::{
    AntiCallToken, FileHandle, OwnedBytes, TerminatingWrite, WatchCallback, WatchHandle, WritePtr,
};
use tantivy::{Directory, HasLen};

/// tantivy files inside one sub-directory of a channel.
#[derive(Clone, Debug)]
pub struct ChannelDirectory {
    channel: Channel,
    /// Sub-directory of the channel, relative.
    base: PathBuf,
    /// Open read handles, shared so a file is opened once per process.
    handles: Arc<Mutex<HashMap<PathBuf, Arc<ChannelHandle>>>>,
}

impl ChannelDirectory {
    /// A directory `base` (relative) inside `channel`, created if absent.
    pub fn new(channel: Channel, base: impl Into<PathBuf>) -> io::Result<Self> {
        let base = base.into();
        channel.create_dir(&base).map_err(io::Error::other)?;
        Ok(ChannelDirectory {
            channel,
            base,
            handles: Arc::new(Mutex::new(HashMap::new())),
        })
    }

    fn relative(&self, path: &Path) -> PathBuf {
        self.base.join(path)
    }

    /// The names of the files in this directory.
    pub fn names(&self) -> io::Result<Vec<String>> {
        self.channel.list(&self.base).map_err(io::Error::other)
    }

    /// Copy the file `path` to the same name in `to` (both counted), in
    /// 1 MiB pieces, and sync the copy.
    pub fn copy_to(&self, path: &Path, to: &ChannelDirectory) -> io::Result<()> {
        let src = self
            .channel
            .open(self.relative(path))
            .map_err(io::Error::other)?;
        let mut dst = to
            .channel
            .create(to.relative(path))
            .map_err(io::Error::other)?;
        let mut buf = vec![0u8; 1 << 20];
        let mut at = 0u64;
        loop {
            let n = src.read_at(&mut buf, at)?;
            if n == 0 {
                break;
            }
            dst.write_all(&buf[..n])?;
            at += n as u64;
        }
        dst.sync_data()
    }

    fn forget(&self, path: &Path) {
        self.handles
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(path);
    }
}

/// A file opened for reading; its length is fixed at open (tantivy files
/// are write-once).
#[derive(Debug)]
struct ChannelHandle {
    file: ChannelFile,
    len: usize,
}

impl HasLen for ChannelHandle {
    fn len(&self) -> usize {
        self.len
    }
}

impl FileHandle for ChannelHandle {
    fn read_bytes(&self, range: Range<usize>) -> io::Result<OwnedBytes> {
        if range.start > range.end || range.end > self.len {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "range {range:?} outside `{}` ({} bytes)",
                    self.file.path().display(),
                    self.len
                ),
            ));
        }
        let mut buf = vec![0u8; range.end - range.start];
        let got = self.file.read_at(&mut buf, range.start as u64)?;
        if got != buf.len() {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("`{}` is shorter than it was", self.file.path().display()),
            ));
        }
        Ok(OwnedBytes::new(buf))
    }
}

/// A file being written; counted writes in tantivy's buffer-sized pieces.
struct ChannelWriter {
    file: ChannelFile,
}

impl Write for ChannelWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.file.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl TerminatingWrite for ChannelWriter {
    fn terminate_ref(&mut self, _: AntiCallToken) -> io::Result<()> {
        // Every finished file is made durable, as tantivy's own
        // `MmapDirectory` does (and Lucene, under Autopsy's Solr, at each
        // commit): the segments' writes are paid on the channel that
        // holds them while the stage runs. Without it a small case's
        // segments die in the page cache unwritten and a large one's are
        // throttled to writeback, so a temp drive would look free on a
        // small case and the cost per GiB would grow with the image.
        self.file.sync_data()
    }
}

fn not_found(path: &Path) -> OpenReadError {
    OpenReadError::FileDoesNotExist(path.to_path_buf())
}

impl Directory for ChannelDirectory {
    fn get_file_handle(&self, path: &Path) -> Result<Arc<dyn FileHandle>, OpenReadError> {
        let key = path.to_path_buf();
        let mut handles = self
            .handles
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(h) = handles.get(&key) {
            return Ok(Arc::clone(h) as Arc<dyn FileHandle>);
        }
        let rel = self.relative(path);
        let file = self.channel.open(&rel).map_err(|_| not_found(path))?;
        let len = file.len().map_err(|e| OpenReadError::IoError {
            io_error: Arc::new(e),
            filepath: path.to_path_buf(),
        })?;
        let handle = Arc::new(ChannelHandle {
            file,
            len: usize::try_from(len).unwrap_or(usize::MAX),
        });
        handles.insert(key, Arc::clone(&handle));
        Ok(handle)
    }

    fn delete(&self, path: &Path) -> Result<(), DeleteError> {
        self.forget(path);
        self.channel
            .remove_file(self.relative(path))
            .map_err(|e| match e {
                ChannelError::Io { source, .. } if source.kind() == io::ErrorKind::NotFound => {
                    DeleteError::FileDoesNotExist(path.to_path_buf())
                }
                other => DeleteError::IoError {
                    io_error: Arc::new(io::Error::other(other)),
                    filepath: path.to_path_buf(),
                },
            })
    }

    fn exists(&self, path: &Path) -> Result<bool, OpenReadError> {
        Ok(self.channel.exists(self.relative(path)))
    }

    fn open_write(&self, path: &Path) -> Result<WritePtr, OpenWriteError> {
        if self.channel.exists(self.relative(path)) {
            return Err(OpenWriteError::FileAlreadyExists(path.to_path_buf()));
        }
        self.forget(path);
        let file =
            self.channel
                .create(self.relative(path))
                .map_err(|e| OpenWriteError::IoError {
                    io_error: Arc::new(io::Error::other(e)),
                    filepath: path.to_path_buf(),
                })?;
        Ok(io::BufWriter::with_capacity(
            256 * 1024,
            Box::new(ChannelWriter { file }),
        ))
    }

    fn atomic_read(&self, path: &Path) -> Result<Vec<u8>, OpenReadError> {
        let file = self
            .channel
            .open(self.relative(path))
            .map_err(|_| not_found(path))?;
        let io_err = |e: io::Error| OpenReadError::IoError {
            io_error: Arc::new(e),
            filepath: path.to_path_buf(),
        };
        let len = file.len().map_err(io_err)?;
        let mut buf = vec![0u8; usize::try_from(len).unwrap_or(0)];
        let got = file.read_at(&mut buf, 0).map_err(io_err)?;
        buf.truncate(got);
        Ok(buf)
    }

    fn atomic_write(&self, path: &Path, data: &[u8]) -> io::Result<()> {
        // Written under a temporary name and renamed: readers never see a
        // partial meta.json.
        let mut tmp_name = path.as_os_str().to_owned();
        tmp_name.push(".tmp");
        let tmp = PathBuf::from(tmp_name);
        let mut file = self
            .channel
            .create(self.relative(&tmp))
            .map_err(io::Error::other)?;
        file.write_all(data)?;
        file.sync_data()?;
        drop(file);
        self.forget(path);
        self.channel
            .rename(self.relative(&tmp), self.relative(path))
            .map_err(io::Error::other)
    }

    fn sync_directory(&self) -> io::Result<()> {
        self.channel.sync_dir(&self.base).map_err(io::Error::other)
    }

    fn watch(&self, _: WatchCallback) -> tantivy::Result<WatchHandle> {
        // Readers are reloaded explicitly; nothing watches meta.json.
        Ok(WatchHandle::empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::channel::ChannelKind;

    #[test]
    fn reads_and_writes_are_counted_and_ranges_checked() {
        let dir = tempfile::tempdir().unwrap();
        let ch = Channel::new(ChannelKind::Temp, dir.path(), Vec::new());
        let d = ChannelDirectory::new(ch.clone(), "idx").unwrap();
        let mut w = d.open_write(Path::new("a.bin")).unwrap();
        w.write_all(&[5u8; 100_000]).unwrap();
        w.flush().unwrap();
        assert_eq!(ch.snapshot().fsyncs, 0);
        w.into_inner().ok().unwrap().terminate().unwrap();
        // A finished file is synced, as tantivy's own directory does.
        assert_eq!(ch.snapshot().fsyncs, 1);
        assert!(d.open_write(Path::new("a.bin")).is_err());
        let before = ch.snapshot();
        let h = d.get_file_handle(Path::new("a.bin")).unwrap();
        assert_eq!(h.len(), 100_000);
        assert_eq!(h.read_bytes(10..20).unwrap().as_slice(), &[5u8; 10]);
        assert!(h.read_bytes(99_990..100_001).is_err());
        let after = ch.snapshot().since(&before);
        assert_eq!(after.bytes_read, 10);
        assert_eq!(ch.snapshot().bytes_written, 100_000);
        d.atomic_write(Path::new("meta.json"), b"{}").unwrap();
        assert_eq!(d.atomic_read(Path::new("meta.json")).unwrap(), b"{}");
        assert!(d.exists(Path::new("meta.json")).unwrap());
        d.delete(Path::new("a.bin")).unwrap();
        assert!(!d.exists(Path::new("a.bin")).unwrap());
        assert!(matches!(
            d.delete(Path::new("a.bin")),
            Err(DeleteError::FileDoesNotExist(_))
        ));
    }
}
