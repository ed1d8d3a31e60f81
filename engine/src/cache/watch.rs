//! A watcher that brings the files of a directory the run does not read
//! itself (a private PostgreSQL server's data directory) into the modelled
//! page cache.
//!
//! The server reads and writes its files with its own processes, so the
//! model cannot see each access; it sees what the kernel holds. Every
//! [`WATCH_INTERVAL`] the watcher lists the directory, registers each
//! file, and tells the model which of its pages are resident
//! ([`PageCacheModel::observe`]): pages new since the last look join the
//! LRU at the front, pages the kernel no longer holds leave it, and past
//! the budget the least recently seen go, the server's among them. Files
//! that disappeared (a dropped table, a recycled WAL segment under a new
//! name is the same inode and is followed) are forgotten.

use super::model::{CacheAccounts, CachedFile, PageCacheModel};
use super::residency::resident_pages;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

/// How often the watcher looks.
pub const WATCH_INTERVAL: Duration = Duration::from_millis(250);

/// A thread keeping a directory's files in the model, until dropped.
#[derive(Debug)]
pub struct ResidencyWatch {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl ResidencyWatch {
    /// Watch each directory (recursively), charging its files to its
    /// channel's counters.
    pub fn start(
        model: Arc<PageCacheModel>,
        dirs: Vec<(PathBuf, Arc<dyn CacheAccounts>)>,
    ) -> std::io::Result<ResidencyWatch> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("cache-residency".into())
            .spawn(move || {
                let mut known: Vec<BTreeMap<PathBuf, CachedFile>> =
                    vec![BTreeMap::new(); dirs.len()];
                while !flag.load(Ordering::Relaxed) {
                    for ((dir, counters), known) in dirs.iter().zip(known.iter_mut()) {
                        look(&model, dir, counters, known);
                    }
                    std::thread::sleep(WATCH_INTERVAL);
                }
            })?;
        Ok(ResidencyWatch {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for ResidencyWatch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// One look over `dir`.
fn look(
    model: &PageCacheModel,
    dir: &Path,
    counters: &Arc<dyn CacheAccounts>,
    known: &mut BTreeMap<PathBuf, CachedFile>,
) {
    let mut seen: BTreeMap<PathBuf, CachedFile> = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let Ok(meta) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            if meta.is_dir() {
                stack.push(path);
            } else if meta.is_file() {
                let Ok(identity) = crate::os::path_identity(&path) else {
                    continue;
                };
                let id = model.register(&path, identity, meta.len(), Arc::clone(counters));
                if let Ok(resident) = resident_pages(&path) {
                    model.observe(id, &resident);
                }
                seen.insert(path, id);
            }
        }
    }
    for gone in known.keys().filter(|p| !seen.contains_key(*p)) {
        model.removed_file(gone);
    }
    *known = seen;
}
