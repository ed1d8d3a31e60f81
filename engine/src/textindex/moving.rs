//! A tantivy [`Directory`] over two [`ChannelDirectory`]s, for an index
//! built in one place and finished in another: segments are written and
//! merged where the build is (the temp channel), and once [`finishing`]
//! is turned on, every file written from then on, the merges' output and
//! the metadata, goes straight to where the index is kept (the case
//! channel). [`MovingDirectory::settle`] then copies the few live files
//! still left behind. The whole index is therefore never written twice
//! and copied, as it would be if it were merged in temp and copied whole.
//!
//! Reads look where the file is (the destination first: a file written
//! there is the newer, `meta.json` above all); deletes remove it where it
//! is.
//!
//! [`finishing`]: MovingDirectory::finishing

use super::ChannelDirectory;
use std::collections::HashSet;
use std::io;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use tantivy::Directory;
use tantivy::directory::error::{DeleteError, OpenReadError, OpenWriteError};
use tantivy::directory::{FileHandle, WatchCallback, WatchHandle, WritePtr};

/// See the module documentation.
#[derive(Clone, Debug)]
pub struct MovingDirectory {
    build: ChannelDirectory,
    dest: ChannelDirectory,
    finishing: Arc<AtomicBool>,
}

impl MovingDirectory {
    /// An index built in `build` and kept in `dest` (which should be
    /// empty).
    pub fn new(build: ChannelDirectory, dest: ChannelDirectory) -> Self {
        MovingDirectory {
            build,
            dest,
            finishing: Arc::new(AtomicBool::new(false)),
        }
    }

    /// From now on, write every new file to the destination.
    pub fn finishing(&self) {
        self.finishing.store(true, Ordering::SeqCst);
    }

    fn is_finishing(&self) -> bool {
        self.finishing.load(Ordering::SeqCst)
    }

    fn writes_to(&self) -> &ChannelDirectory {
        if self.is_finishing() {
            &self.dest
        } else {
            &self.build
        }
    }

    /// The directory holding `path`. Before [`finishing`] nothing is in
    /// the destination, so it is not looked at: every look is a counted
    /// stat on its channel, and indexing opens many files.
    ///
    /// [`finishing`]: MovingDirectory::finishing
    fn holder(&self, path: &Path) -> &ChannelDirectory {
        if self.is_finishing() && self.dest.exists(path).unwrap_or(false) {
            &self.dest
        } else {
            &self.build
        }
    }

    /// Copy every file still only in the build directory (live segments
    /// no merge rewrote; the metadata when nothing was merged) to the
    /// destination, skipping lock and temporary files, and sync the
    /// destination's directory. Call once the writer is dropped.
    pub fn settle(&self) -> io::Result<()> {
        let kept: HashSet<String> = self.dest.names()?.into_iter().collect();
        for name in self.build.names()? {
            if name.ends_with(".lock") || name.ends_with(".tmp") || kept.contains(&name) {
                continue;
            }
            self.build.copy_to(Path::new(&name), &self.dest)?;
        }
        self.dest.sync_directory()
    }
}

impl Directory for MovingDirectory {
    fn get_file_handle(&self, path: &Path) -> Result<Arc<dyn FileHandle>, OpenReadError> {
        self.holder(path).get_file_handle(path)
    }

    fn delete(&self, path: &Path) -> Result<(), DeleteError> {
        self.holder(path).delete(path)
    }

    fn exists(&self, path: &Path) -> Result<bool, OpenReadError> {
        Ok((self.is_finishing() && self.dest.exists(path)?) || self.build.exists(path)?)
    }

    fn open_write(&self, path: &Path) -> Result<WritePtr, OpenWriteError> {
        // The target refuses a name it holds itself; a name still in the
        // build directory is refused here.
        if self.is_finishing() && self.build.exists(path).unwrap_or(false) {
            return Err(OpenWriteError::FileAlreadyExists(path.to_path_buf()));
        }
        self.writes_to().open_write(path)
    }

    fn atomic_read(&self, path: &Path) -> Result<Vec<u8>, OpenReadError> {
        self.holder(path).atomic_read(path)
    }

    fn atomic_write(&self, path: &Path, data: &[u8]) -> io::Result<()> {
        self.writes_to().atomic_write(path, data)
    }

    fn sync_directory(&self) -> io::Result<()> {
        self.writes_to().sync_directory()
    }

    fn watch(&self, _: WatchCallback) -> tantivy::Result<WatchHandle> {
        Ok(WatchHandle::empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::channel::{Channel, ChannelKind};
    use std::io::Write;
    use tantivy::directory::TerminatingWrite;

    fn write(d: &MovingDirectory, name: &str, byte: u8) {
        let mut w = d.open_write(Path::new(name)).unwrap();
        w.write_all(&[byte; 1000]).unwrap();
        w.flush().unwrap();
        w.into_inner().ok().unwrap().terminate().unwrap();
    }

    #[test]
    fn files_go_to_the_destination_once_finishing_and_settle_moves_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("t")).unwrap();
        std::fs::create_dir_all(dir.path().join("c")).unwrap();
        let temp = Channel::new(ChannelKind::Temp, dir.path().join("t"), Vec::new());
        let case = Channel::new(ChannelKind::Case, dir.path().join("c"), Vec::new());
        let build = ChannelDirectory::new(temp.clone(), "build").unwrap();
        let dest = ChannelDirectory::new(case.clone(), "index").unwrap();
        let d = MovingDirectory::new(build, dest);
        let untouched = case.snapshot();
        write(&d, "a.seg", 1);
        write(&d, "b.seg", 2);
        d.atomic_write(Path::new("meta.json"), b"old").unwrap();
        assert!(d.get_file_handle(Path::new("a.seg")).is_ok());
        // While building, the destination is not even looked at.
        assert_eq!(case.snapshot().since(&untouched).stats, 0);
        d.finishing();
        write(&d, "c.seg", 3);
        d.atomic_write(Path::new("meta.json"), b"new").unwrap();
        assert!(matches!(
            d.open_write(Path::new("a.seg")),
            Err(OpenWriteError::FileAlreadyExists(_))
        ));
        // The newer metadata is read; both places are read through.
        assert_eq!(d.atomic_read(Path::new("meta.json")).unwrap(), b"new");
        let a = d.get_file_handle(Path::new("a.seg")).unwrap();
        assert_eq!(a.read_bytes(0..2).unwrap().as_slice(), &[1, 1]);
        let c = d.get_file_handle(Path::new("c.seg")).unwrap();
        assert_eq!(c.read_bytes(0..2).unwrap().as_slice(), &[3, 3]);
        assert!(case.exists("index/c.seg") && !temp.exists("build/c.seg"));
        // A merged-away segment is deleted where it is.
        d.delete(Path::new("b.seg")).unwrap();
        assert!(!temp.exists("build/b.seg"));
        let before = case.snapshot();
        d.settle().unwrap();
        let mut names = case.list("index").unwrap();
        names.sort();
        assert_eq!(names, ["a.seg", "c.seg", "meta.json"]);
        // Only what was missing is copied: a.seg, not the stale metadata.
        assert_eq!(case.snapshot().since(&before).bytes_written, 1000);
        assert_eq!(
            std::fs::read(dir.path().join("c/index/meta.json")).unwrap(),
            b"new"
        );
    }
}
