//! The modelled workstation's page cache (`--ram`): an LRU over the pages
//! of every file a run touches, held to a budget in bytes, and put into
//! effect on this machine's kernel page cache.
//!
//! Why a model rather than a cgroup memory limit: a limit charges the
//! page cache to whichever process first touched a page (the database
//! server's pages to the server, a lab's backing files to its device
//! server), counts caseload's own heap against the same number, and ends
//! in the OOM killer when it is reached; and this machine's kernel, with
//! 24 GiB and nothing else to do, would keep every page anyway. The model
//! decides, page by page, what a workstation with that much memory would
//! still hold, and makes the kernel forget the rest:
//!
//! - every read and write through a channel ([`crate::channel`]'s files and
//!   the counting SQLite VFS) touches its pages, moving them to the front;
//!   a read of pages the model holds is a hit, of others a miss (the
//!   kernel then fetches them from the device, as it would);
//! - the kernel's read-ahead is modelled too: a sequential read (or one
//!   from a file's start) also brings in what follows it, up to twice the
//!   file's device's read-ahead window (`read_ahead_kb`: the kernel keeps
//!   the window being read and starts the next one before it is done), as
//!   resident but not yet read; the first read of such a page counts as a
//!   miss (the device did the work);
//! - when the pages held pass the budget, the least recently used go:
//!   dirty ones are written back first (`sync_file_range`, waited for, by
//!   the thread whose access overflowed the budget, as direct reclaim makes
//!   a process wait), then dropped from the kernel's cache with
//!   `posix_fadvise(POSIX_FADV_DONTNEED)`, which drops only clean pages.
//!   The kernel caches a file in folios of up to 2 MiB (large folios from
//!   read-ahead) and drops a folio only whole: where pages of a dropped
//!   range stay resident, the aligned 2 MiB block around them is dropped
//!   too and the model forgets it, as the kernel's reclaim would take the
//!   folio whole;
//! - files the run does not read itself (a private PostgreSQL server's
//!   data files) are brought into the same LRU by
//!   [`residency`](super::residency), which watches what the kernel holds
//!   of them.
//!
//! Pages are tracked in granules of 4 KiB (the kernel's page) up to a
//! budget of 4 GiB; above it the granule grows so that the model never
//! holds more than about a million entries (about 48 MiB), whatever the
//! budget. Eviction works in batches (down to the budget less 1/64 of it,
//! at most 4 MiB) so that the system calls are few and the kernel's
//! cached pages exceed the budget by at most one batch and the read-ahead
//! windows in flight.

use rustc_hash::FxHashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

/// The kernel's page size, the model's smallest granule.
pub use super::residency::PAGE;

/// Where a file's cache figures are kept (its channel's counters): the
/// model reports what it served and dropped, the channel keeps the books.
pub trait CacheAccounts: Send + Sync + std::fmt::Debug {
    /// A read's bytes found in the modelled cache and not.
    fn record_cache(&self, hit: u64, miss: u64);
    /// `bytes` dropped from the cache, `dirty` of them written back first,
    /// which took `took` (time the evicting thread waited).
    fn record_eviction(&self, bytes: u64, dirty: u64, took: std::time::Duration);
}
/// Most granules the model holds; larger budgets get larger granules.
const MAX_GRANULES: u64 = 1 << 20;
/// Largest eviction batch.
const MAX_BATCH: u64 = 4 << 20;
/// The largest folio the kernel caches a file in (a PMD: 2 MiB on x86-64
/// and arm64 with 4 KiB pages).
const MAX_FOLIO: u64 = 2 << 20;
const NIL: u32 = u32::MAX;

/// A file known to the model (a handle's registration).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CachedFile(u32);

/// What the model did over a run, in bytes (the per-channel hit and miss
/// figures are on the channels' counters).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ModelTotals {
    /// Bytes held at the end.
    pub resident_bytes: u64,
    /// Most bytes held at any time.
    pub peak_resident_bytes: u64,
    /// Files seen.
    pub files: u64,
    /// Ranges dropped from the kernel's cache.
    pub evictions: u64,
    /// Drops the kernel refused or that found the file gone.
    pub failed_evictions: u64,
}

#[derive(Debug, Clone, Copy)]
struct Slot {
    file: u32,
    granule: u64,
    /// LRU neighbours (towards the front, towards the back).
    prev: u32,
    next: u32,
    /// Neighbours in the file's own list.
    fprev: u32,
    fnext: u32,
    /// Dirty while greater than its file's `syncs` (0: clean).
    dirty_at: u32,
    /// Brought in by read-ahead and not read yet.
    ahead: bool,
}

#[derive(Debug)]
struct FileEntry {
    dev: u64,
    ino: u64,
    path: PathBuf,
    counters: Arc<dyn CacheAccounts>,
    /// Head of its granules' list.
    first: u32,
    granules: u64,
    /// Syncs so far (see `Slot::dirty_at`).
    syncs: u32,
    /// Granule after the last one read (sequential-read detection).
    next_read: u64,
    /// Read-ahead window in granules.
    ahead_granules: u64,
    /// Granule up to which read-ahead has been brought in.
    ahead_end: u64,
    /// The file's length in granules as the model knows it (read-ahead
    /// stops there).
    size_granules: u64,
}

#[derive(Debug, Default)]
struct Lru {
    slots: Vec<Slot>,
    free: Vec<u32>,
    head: u32,
    tail: u32,
    index: FxHashMap<u64, u32>,
    files: Vec<FileEntry>,
    by_inode: FxHashMap<(u64, u64), u32>,
    by_path: FxHashMap<PathBuf, u32>,
    resident: u64,
    peak: u64,
    read_ahead_by_dev: FxHashMap<u64, u64>,
}

/// A range to drop from the kernel's cache.
#[derive(Debug)]
struct Eviction {
    file: u32,
    path: PathBuf,
    dev: u64,
    ino: u64,
    counters: Arc<dyn CacheAccounts>,
    offset: u64,
    len: u64,
    dirty_bytes: u64,
}

fn key(file: u32, granule: u64) -> u64 {
    (u64::from(file) << 40) | (granule & ((1 << 40) - 1))
}

impl Lru {
    fn new() -> Lru {
        Lru {
            head: NIL,
            tail: NIL,
            ..Lru::default()
        }
    }

    fn unlink(&mut self, s: u32) {
        let Slot {
            prev,
            next,
            fprev,
            fnext,
            file,
            ..
        } = self.slots[s as usize];
        if prev == NIL {
            self.head = next;
        } else {
            self.slots[prev as usize].next = next;
        }
        if next == NIL {
            self.tail = prev;
        } else {
            self.slots[next as usize].prev = prev;
        }
        if fprev == NIL {
            self.files[file as usize].first = fnext;
        } else {
            self.slots[fprev as usize].fnext = fnext;
        }
        if fnext != NIL {
            self.slots[fnext as usize].fprev = fprev;
        }
    }

    fn push_front(&mut self, s: u32) {
        let old = self.head;
        {
            let slot = &mut self.slots[s as usize];
            slot.prev = NIL;
            slot.next = old;
        }
        if old == NIL {
            self.tail = s;
        } else {
            self.slots[old as usize].prev = s;
        }
        self.head = s;
    }

    /// Move a held slot to the front (its file list is unchanged).
    fn touch(&mut self, s: u32) {
        if self.head == s {
            return;
        }
        let Slot { prev, next, .. } = self.slots[s as usize];
        if prev != NIL {
            self.slots[prev as usize].next = next;
        }
        if next == NIL {
            self.tail = prev;
        } else {
            self.slots[next as usize].prev = prev;
        }
        self.push_front(s);
    }

    fn insert(&mut self, file: u32, granule: u64, ahead: bool) -> u32 {
        let first = self.files[file as usize].first;
        let slot = Slot {
            file,
            granule,
            prev: NIL,
            next: NIL,
            fprev: NIL,
            fnext: first,
            dirty_at: 0,
            ahead,
        };
        let s = match self.free.pop() {
            Some(s) => {
                self.slots[s as usize] = slot;
                s
            }
            None => {
                self.slots.push(slot);
                u32::try_from(self.slots.len() - 1).unwrap_or(NIL - 1)
            }
        };
        if first != NIL {
            self.slots[first as usize].fprev = s;
        }
        let f = &mut self.files[file as usize];
        f.first = s;
        f.granules += 1;
        self.push_front(s);
        self.index.insert(key(file, granule), s);
        self.resident += 1;
        self.peak = self.peak.max(self.resident);
        s
    }

    fn remove(&mut self, s: u32) {
        let Slot { file, granule, .. } = self.slots[s as usize];
        self.unlink(s);
        self.index.remove(&key(file, granule));
        self.files[file as usize].granules -= 1;
        self.free.push(s);
        self.resident -= 1;
    }

    /// Drop every granule of `file` at or after `from` (0: all).
    fn drop_file_from(&mut self, file: u32, from: u64) {
        let mut s = self.files[file as usize].first;
        while s != NIL {
            let next = self.slots[s as usize].fnext;
            if self.slots[s as usize].granule >= from {
                self.remove(s);
            }
            s = next;
        }
    }

    /// A file is gone: its pages go, and its inode may be reused.
    fn forget(&mut self, id: u32) {
        self.drop_file_from(id, 0);
        let f = &mut self.files[id as usize];
        f.next_read = 0;
        f.ahead_end = 0;
        let k = (f.dev, f.ino);
        if self.by_inode.get(&k) == Some(&id) {
            self.by_inode.remove(&k);
        }
    }

    fn is_dirty(&self, s: &Slot) -> bool {
        s.dirty_at > self.files[s.file as usize].syncs
    }
}

/// The page cache of the modelled workstation.
#[derive(Debug)]
pub struct PageCacheModel {
    granule: u64,
    budget: u64,
    low_water: u64,
    lru: Mutex<Lru>,
    evictions: std::sync::atomic::AtomicU64,
    failed_evictions: std::sync::atomic::AtomicU64,
}

impl PageCacheModel {
    /// A model holding at most `budget_bytes` (at least one granule).
    pub fn new(budget_bytes: u64) -> PageCacheModel {
        let granule = granule_for(budget_bytes);
        let budget = (budget_bytes / granule).max(1);
        let batch = (budget / 64).clamp(1, (MAX_BATCH / granule).max(1));
        PageCacheModel {
            granule,
            budget,
            low_water: budget.saturating_sub(batch),
            lru: Mutex::new(Lru::new()),
            evictions: Default::default(),
            failed_evictions: Default::default(),
        }
    }

    /// The granule in bytes.
    pub fn granule(&self) -> u64 {
        self.granule
    }

    /// The budget in bytes (a whole number of granules).
    pub fn budget_bytes(&self) -> u64 {
        self.budget * self.granule
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Lru> {
        self.lru.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Register a handle on `path` (of `len` bytes, the file
    /// `(dev, ino)`: [`crate::os::file_identity`]), whose I/O is charged
    /// to `counters`. A second handle on the same file shares its pages.
    pub fn register(
        &self,
        path: &Path,
        (dev, ino): (u64, u64),
        len: u64,
        counters: Arc<dyn CacheAccounts>,
    ) -> CachedFile {
        let mut lru = self.lock();
        if let Some(&id) = lru.by_inode.get(&(dev, ino)) {
            let old = std::mem::replace(&mut lru.files[id as usize].path, path.to_path_buf());
            lru.files[id as usize].counters = counters;
            lru.files[id as usize].size_granules = len.div_ceil(self.granule);
            if old != path {
                lru.by_path.remove(&old);
                lru.by_path.insert(path.to_path_buf(), id);
            }
            return CachedFile(id);
        }
        // A new file where an old one was (replaced, not through a
        // channel): the old one's pages are gone.
        if let Some(old) = lru.by_path.remove(path) {
            lru.forget(old);
        }
        let ahead_bytes = match lru.read_ahead_by_dev.get(&dev) {
            Some(&b) => b,
            None => {
                let b = crate::system::read_ahead_bytes(dev);
                lru.read_ahead_by_dev.insert(dev, b);
                b
            }
        };
        let id = u32::try_from(lru.files.len()).unwrap_or(NIL - 1);
        lru.files.push(FileEntry {
            dev,
            ino,
            path: path.to_path_buf(),
            counters,
            first: NIL,
            granules: 0,
            syncs: 0,
            next_read: 0,
            ahead_granules: (2 * ahead_bytes).div_ceil(self.granule),
            ahead_end: 0,
            size_granules: len.div_ceil(self.granule),
        });
        lru.by_inode.insert((dev, ino), id);
        lru.by_path.insert(path.to_path_buf(), id);
        CachedFile(id)
    }

    /// The granules `[offset, offset + len)` covers.
    fn span(&self, offset: u64, len: u64) -> std::ops::Range<u64> {
        offset / self.granule..(offset.saturating_add(len)).div_ceil(self.granule)
    }

    /// A read of `len` bytes at `offset` from `file`: hits and misses are
    /// counted on its channel, and what the budget no longer holds is
    /// dropped.
    pub fn read(&self, file: CachedFile, offset: u64, len: u64) {
        if len == 0 {
            return;
        }
        let span = self.span(offset, len);
        let end = offset.saturating_add(len);
        let (mut hit, mut miss) = (0u64, 0u64);
        let evictions = {
            let mut lru = self.lock();
            let id = file.0;
            for g in span.clone() {
                let lo = (g * self.granule).max(offset);
                let hi = ((g + 1) * self.granule).min(end);
                let bytes = hi - lo;
                match lru.index.get(&key(id, g)).copied() {
                    Some(s) => {
                        let slot = &mut lru.slots[s as usize];
                        if slot.ahead {
                            slot.ahead = false;
                            miss += bytes;
                        } else {
                            hit += bytes;
                        }
                        lru.touch(s);
                    }
                    None => {
                        miss += bytes;
                        lru.insert(id, g, false);
                    }
                }
            }
            // The kernel reads ahead on a sequential read and at a file's
            // start; a random read gets what it asked for.
            let f = &mut lru.files[id as usize];
            let contiguous = span.start == f.next_read;
            if !contiguous {
                // A new stream: what was read ahead of the old one is not
                // ahead of this one.
                f.ahead_end = span.end;
            }
            let sequential = contiguous || span.start == 0;
            let from = span.end.max(f.ahead_end);
            let to = if sequential {
                (span.end + f.ahead_granules).min(f.size_granules.max(span.end))
            } else {
                span.end
            };
            f.next_read = span.end;
            f.ahead_end = to.max(from);
            for g in from..to {
                if !lru.index.contains_key(&key(id, g)) {
                    lru.insert(id, g, true);
                }
            }
            let counters = Arc::clone(&lru.files[id as usize].counters);
            counters.record_cache(hit, miss);
            self.overflow(&mut lru)
        };
        self.evict(evictions);
    }

    /// A write of `len` bytes at `offset` to `file`: its pages are held,
    /// dirty until the file is synced.
    pub fn write(&self, file: CachedFile, offset: u64, len: u64) {
        if len == 0 {
            return;
        }
        let evictions = {
            let mut lru = self.lock();
            let id = file.0;
            let dirty_at = lru.files[id as usize].syncs.saturating_add(1);
            let span = self.span(offset, len);
            let f = &mut lru.files[id as usize];
            f.size_granules = f.size_granules.max(span.end);
            for g in span {
                let s = match lru.index.get(&key(id, g)).copied() {
                    Some(s) => {
                        lru.touch(s);
                        s
                    }
                    None => lru.insert(id, g, false),
                };
                let slot = &mut lru.slots[s as usize];
                slot.dirty_at = dirty_at;
                slot.ahead = false;
            }
            self.overflow(&mut lru)
        };
        self.evict(evictions);
    }

    /// `file` was synced: its pages written so far are clean.
    pub fn synced(&self, file: CachedFile) {
        let mut lru = self.lock();
        let f = &mut lru.files[file.0 as usize];
        f.syncs = f.syncs.saturating_add(1);
    }

    /// `file` was cut to `len` bytes (0 when created over an old file).
    pub fn truncated(&self, file: CachedFile, len: u64) {
        let mut lru = self.lock();
        let keep = len.div_ceil(self.granule);
        lru.drop_file_from(file.0, keep);
        let f = &mut lru.files[file.0 as usize];
        f.ahead_end = f.ahead_end.min(keep);
        f.size_granules = keep;
    }

    /// The file at `path` was removed: its pages are gone with it.
    pub fn removed_file(&self, path: &Path) {
        let mut lru = self.lock();
        if let Some(id) = lru.by_path.remove(path) {
            lru.forget(id);
        }
    }

    /// The directory tree at `path` was removed.
    pub fn removed_tree(&self, path: &Path) {
        let mut lru = self.lock();
        let ids: Vec<(PathBuf, u32)> = lru
            .by_path
            .iter()
            .filter(|(p, _)| p.starts_with(path))
            .map(|(p, &id)| (p.clone(), id))
            .collect();
        for (p, id) in ids {
            lru.by_path.remove(&p);
            lru.forget(id);
        }
    }

    /// `from` (a file, or a directory when `tree`) is now called `to`.
    pub fn renamed(&self, from: &Path, to: &Path, tree: bool) {
        let mut lru = self.lock();
        let moved: Vec<(PathBuf, u32)> = if tree {
            lru.by_path
                .iter()
                .filter(|(p, _)| p.starts_with(from))
                .map(|(p, &id)| (p.clone(), id))
                .collect()
        } else {
            lru.by_path
                .get(from)
                .map(|&id| (from.to_path_buf(), id))
                .into_iter()
                .collect()
        };
        // Whatever `to` named before is replaced.
        if !tree && let Some(old) = lru.by_path.remove(to) {
            lru.forget(old);
        }
        for (p, id) in moved {
            lru.by_path.remove(&p);
            let rest = p.strip_prefix(from).unwrap_or(Path::new(""));
            let new = if rest.as_os_str().is_empty() {
                to.to_path_buf()
            } else {
                to.join(rest)
            };
            lru.files[id as usize].path = new.clone();
            lru.by_path.insert(new, id);
        }
    }

    /// What the kernel holds of a file the run does not read itself (a
    /// database server's): granules it holds that the model does not are
    /// taken in at the front (the model cannot tell when they were last
    /// used, so the server's own pages age from when they were first
    /// seen); granules the model holds that the kernel dropped are
    /// forgotten; then the budget is applied.
    pub fn observe(&self, file: CachedFile, resident: &[bool]) {
        let per = (self.granule / PAGE) as usize;
        let evictions = {
            let mut lru = self.lock();
            let id = file.0;
            let held: Vec<bool> = resident
                .chunks(per.max(1))
                .map(|c| c.iter().any(|&r| r))
                .collect();
            // Forget what the kernel no longer holds.
            let mut s = lru.files[id as usize].first;
            while s != NIL {
                let next = lru.slots[s as usize].fnext;
                let g = lru.slots[s as usize].granule;
                if !held.get(g as usize).copied().unwrap_or(false) && !lru.slots[s as usize].ahead {
                    lru.remove(s);
                }
                s = next;
            }
            for (g, &h) in held.iter().enumerate() {
                if h && !lru.index.contains_key(&key(id, g as u64)) {
                    lru.insert(id, g as u64, false);
                }
            }
            self.overflow(&mut lru)
        };
        self.evict(evictions);
    }

    /// Bytes the model holds of `file`.
    pub fn resident_bytes_of(&self, file: CachedFile) -> u64 {
        self.lock().files[file.0 as usize].granules * self.granule
    }

    /// The model's totals now.
    pub fn totals(&self) -> ModelTotals {
        let lru = self.lock();
        ModelTotals {
            resident_bytes: lru.resident * self.granule,
            peak_resident_bytes: lru.peak * self.granule,
            files: lru.files.len() as u64,
            evictions: self.evictions.load(Ordering::Relaxed),
            failed_evictions: self.failed_evictions.load(Ordering::Relaxed),
        }
    }

    /// Past the budget: take granules from the back down to the low-water
    /// mark, as ranges to drop.
    fn overflow(&self, lru: &mut Lru) -> Vec<Eviction> {
        if lru.resident <= self.budget {
            return Vec::new();
        }
        let mut taken: Vec<(u32, u64, bool)> = Vec::new();
        while lru.resident > self.low_water && lru.tail != NIL {
            let s = lru.tail;
            let slot = lru.slots[s as usize];
            taken.push((slot.file, slot.granule, lru.is_dirty(&slot)));
            lru.remove(s);
        }
        taken.sort_unstable_by_key(|&(f, g, _)| (f, g));
        let mut out: Vec<Eviction> = Vec::new();
        for (f, g, dirty) in taken {
            let offset = g * self.granule;
            if let Some(last) = out.last_mut()
                && last.dev == lru.files[f as usize].dev
                && last.ino == lru.files[f as usize].ino
                && last.offset + last.len == offset
            {
                last.len += self.granule;
                last.dirty_bytes += if dirty { self.granule } else { 0 };
                continue;
            }
            let file = &lru.files[f as usize];
            out.push(Eviction {
                file: f,
                path: file.path.clone(),
                dev: file.dev,
                ino: file.ino,
                counters: Arc::clone(&file.counters),
                offset,
                len: self.granule,
                dirty_bytes: if dirty { self.granule } else { 0 },
            });
        }
        out
    }

    /// Drop the ranges from the kernel's cache (outside the model's lock:
    /// a write-back can take a while, and other threads go on).
    fn evict(&self, evictions: Vec<Eviction>) {
        let mut open: Option<(u64, u64, std::fs::File)> = None;
        for e in evictions {
            let file = match open.take() {
                Some((dev, ino, f)) if dev == e.dev && ino == e.ino => f,
                _ => match open_same(&e.path, e.dev, e.ino) {
                    Some(f) => f,
                    None => {
                        // Removed or replaced behind the model's back:
                        // its pages went with it.
                        self.failed_evictions.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                },
            };
            let started = Instant::now();
            let mut ok = crate::os::drop_cached_range(&file, e.offset, e.len, e.dirty_bytes > 0);
            let mut dropped = e.len;
            if ok {
                // Pages left: a folio reaching past the range. Its block
                // goes whole.
                for block in straddling_blocks(&file, e.offset, e.len) {
                    ok &= crate::os::drop_cached_range(
                        &file,
                        block.start,
                        block.end - block.start,
                        true,
                    );
                    dropped += self.discard(CachedFile(e.file), block);
                }
            }
            e.counters
                .record_eviction(dropped, e.dirty_bytes, started.elapsed());
            let counter = if ok {
                &self.evictions
            } else {
                &self.failed_evictions
            };
            counter.fetch_add(1, Ordering::Relaxed);
            open = Some((e.dev, e.ino, file));
        }
    }
}

/// The 2 MiB-aligned blocks around pages of `[offset, offset + len)` of
/// `file` that the kernel still holds after they were dropped.
fn straddling_blocks(file: &std::fs::File, offset: u64, len: u64) -> Vec<std::ops::Range<u64>> {
    let Ok(left) = super::residency::resident_range(file, offset, len) else {
        return Vec::new();
    };
    let mut blocks: Vec<std::ops::Range<u64>> = Vec::new();
    for (i, _) in left.iter().enumerate().filter(|(_, r)| **r) {
        let at = offset + i as u64 * PAGE;
        let start = at / MAX_FOLIO * MAX_FOLIO;
        if blocks.last().is_none_or(|b| b.start != start) {
            blocks.push(start..start + MAX_FOLIO);
        }
    }
    blocks
}

impl PageCacheModel {
    /// Forget the granules of `file` in `block` (dropped from the kernel
    /// with their folio); the bytes forgotten.
    fn discard(&self, file: CachedFile, block: std::ops::Range<u64>) -> u64 {
        let mut lru = self.lock();
        let mut n = 0;
        for g in block.start / self.granule..block.end.div_ceil(self.granule) {
            if let Some(s) = lru.index.get(&key(file.0, g)).copied() {
                lru.remove(s);
                n += 1;
            }
        }
        n * self.granule
    }
}

/// The granule for a budget: 4 KiB, or more above 4 GiB.
fn granule_for(budget: u64) -> u64 {
    let mut g = PAGE;
    while budget / g > MAX_GRANULES {
        g *= 2;
    }
    g
}

/// Open `path` read-only if it is still the file `(dev, ino)`.
fn open_same(path: &Path, dev: u64, ino: u64) -> Option<std::fs::File> {
    let f = std::fs::File::open(path).ok()?;
    (crate::os::file_identity(&f).ok()? == (dev, ino)).then_some(f)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::channel::ChannelCounters;

    /// A model and a registered file of 64 MiB (sparse), its directory
    /// kept alive with it.
    fn model_with_file(
        budget: u64,
    ) -> (
        PageCacheModel,
        CachedFile,
        Arc<ChannelCounters>,
        tempfile::TempDir,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::File::create(&path)
            .unwrap()
            .set_len(64 << 20)
            .unwrap();
        let m = PageCacheModel::new(budget);
        let c = Arc::new(ChannelCounters::default());
        let id = crate::os::path_identity(&path).unwrap();
        let f = m.register(&path, id, 64 << 20, c.clone());
        (m, f, c, dir)
    }

    #[test]
    fn a_file_within_the_budget_is_held_and_one_beyond_it_is_not() {
        let (m, f, c, _dir) = model_with_file(64 * PAGE);
        // Backwards, away from the file's start: no read-ahead.
        for round in 0..2 {
            for p in (1000..1032u64).rev() {
                m.read(f, p * PAGE, PAGE);
            }
            let s = c.snapshot();
            if round == 0 {
                assert_eq!(s.cache_miss_bytes, 32 * PAGE);
            }
        }
        assert_eq!(c.snapshot().cache_hit_bytes, 32 * PAGE);
        // 128 pages through a 64-page budget, in the same order twice:
        // LRU keeps none of the first pages for the second pass.
        let (m, f, c, _dir) = model_with_file(64 * PAGE);
        for _ in 0..2 {
            for p in (1000..1128u64).rev() {
                m.read(f, p * PAGE, PAGE);
            }
        }
        assert_eq!(c.snapshot().cache_hit_bytes, 0);
        assert!(m.totals().resident_bytes <= 64 * PAGE);
        assert!(m.totals().peak_resident_bytes <= 65 * PAGE);
    }

    #[test]
    fn read_ahead_pages_are_misses_when_read() {
        let (m, f, c, _dir) = model_with_file(1 << 20);
        // A read at the start brings in the read-ahead window too.
        m.read(f, 0, PAGE);
        let ahead = m.resident_bytes_of(f);
        assert!(ahead > PAGE, "{ahead}");
        m.read(f, PAGE, PAGE);
        let s = c.snapshot();
        assert_eq!((s.cache_hit_bytes, s.cache_miss_bytes), (0, 2 * PAGE));
        // Read again: now a hit.
        m.read(f, PAGE, PAGE);
        assert_eq!(c.snapshot().cache_hit_bytes, PAGE);
    }

    #[test]
    fn writes_are_held_dirty_until_synced_and_truncation_forgets() {
        let (m, f, _c, dir) = model_with_file(1 << 20);
        m.write(f, 0, 10 * PAGE);
        {
            let lru = m.lock();
            let s = lru.slots[lru.head as usize];
            assert!(lru.is_dirty(&s));
        }
        m.synced(f);
        {
            let lru = m.lock();
            let s = lru.slots[lru.head as usize];
            assert!(!lru.is_dirty(&s));
        }
        m.truncated(f, 3 * PAGE + 1);
        assert_eq!(m.resident_bytes_of(f), 4 * PAGE);
        m.removed_tree(dir.path());
        assert_eq!(m.totals().resident_bytes, 0);
    }

    #[test]
    fn large_budgets_get_larger_granules() {
        assert_eq!(granule_for(1 << 30), PAGE);
        assert_eq!(granule_for(4 << 30), PAGE);
        assert_eq!(granule_for(64 << 30), 64 << 10);
        let m = PageCacheModel::new(64 << 30);
        assert_eq!(m.budget_bytes(), 64 << 30);
    }

    /// A file of `len` bytes in `dir`, written and then dropped from the
    /// kernel's cache (a cold start).
    fn cold_file(dir: &Path, name: &str, len: usize) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, crate::noise::noise(len, 7)).unwrap();
        let f = std::fs::File::open(&path).unwrap();
        f.sync_all().unwrap();
        crate::os::drop_cached(&f);
        path
    }

    /// Read `path` through a modelled channel twice in 1 MiB reads: the
    /// second pass's hit rate, and the most the kernel held of the file
    /// after any read.
    fn read_twice(dir: &Path, name: &str, budget: u64) -> (f64, u64) {
        use crate::channel::{Channel, ChannelKind};
        let ch = Channel::new(ChannelKind::Case, dir, Vec::new());
        let model = Arc::new(PageCacheModel::new(budget));
        ch.set_page_cache(Arc::clone(&model));
        let file = ch.open(name).unwrap();
        let len = file.len().unwrap();
        let mut buf = vec![0u8; 1 << 20];
        let mut most = 0;
        let mut second = ch.snapshot();
        for pass in 0..2 {
            if pass == 1 {
                second = ch.snapshot();
            }
            let mut at = 0;
            while at < len {
                at += file.read_at(&mut buf, at).unwrap() as u64;
                let r = super::super::residency::resident_bytes(&dir.join(name));
                most = most.max(r);
            }
        }
        let d = ch.snapshot().since(&second);
        assert_eq!(d.cache_hit_bytes + d.cache_miss_bytes, len);
        (d.cache_hit_bytes as f64 / len as f64, most)
    }

    #[test]
    fn the_kernel_holds_the_budget_and_no_more() {
        let dir = crate::noise::disk_tempdir();
        if super::super::residency::on_memory_fs(dir.path()) {
            eprintln!(
                "SKIPPED: no disk-backed temporary directory (the page cache cannot be dropped)"
            );
            return;
        }
        let budget = 32u64 << 20;
        // Twice the budget, read twice in order: LRU holds nothing of the
        // start when the second pass comes back to it.
        cold_file(dir.path(), "big", 2 * budget as usize);
        let (hit_rate, most) = read_twice(dir.path(), "big", budget);
        assert!(hit_rate < 0.10, "hit rate {hit_rate}");
        assert!(
            most as f64 <= budget as f64 * 1.10,
            "the kernel held {most} bytes of a {budget}-byte budget"
        );
        // Half the budget: the second pass is served from memory.
        cold_file(dir.path(), "small", budget as usize / 2);
        let (hit_rate, most) = read_twice(dir.path(), "small", budget);
        assert!(hit_rate > 0.90, "hit rate {hit_rate}");
        assert!(most <= budget, "{most}");
    }

    #[test]
    fn observed_residency_joins_the_lru() {
        let (m, f, _c, _dir) = model_with_file(8 * PAGE);
        let mut resident = vec![false; 16];
        resident[2] = true;
        resident[3] = true;
        m.observe(f, &resident);
        assert_eq!(m.resident_bytes_of(f), 2 * PAGE);
        resident[2] = false;
        m.observe(f, &resident);
        assert_eq!(m.resident_bytes_of(f), PAGE);
    }
}
