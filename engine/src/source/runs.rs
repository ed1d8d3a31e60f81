//! Large reads for small requests.
//!
//! Stages ask the evidence for what they need: a 4 KiB directory cluster, a
//! 20 KiB file, one 32 KiB E01 chunk. On a device that charges per request
//! (a cloud volume with an IOPS cap, a network share, a throttled disk) the
//! request rate then decides the time, not the bytes. So sources read the
//! media in *runs*: aligned stretches of at most [`ReadOptions::run_bytes`]
//! (an E01's consecutive stored chunks, a raw image's aligned blocks), one
//! positioned read each, kept in a small cache shared by every thread. A
//! thread that needs a run another thread is reading waits for that read
//! instead of issuing its own, so no run is read twice while it is held.
//! Memory is bounded: at most `cache_runs` runs are held (plus the ones
//! threads are using at that moment).

use std::sync::{Arc, Mutex, OnceLock};

/// How a source reads its media.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadOptions {
    /// Largest read issued for one run, in bytes (an E01 run holds the
    /// chunks whose stored bytes fit; at least one chunk).
    pub run_bytes: u64,
    /// Runs kept in the shared cache.
    pub cache_runs: usize,
}

/// Default largest read: 2 MiB. Measured on a throttled evidence device
/// (see `benches/scripts/evidence-read-bench.sh`): large enough that a
/// request-capped device streams near its bandwidth, small enough that a
/// stage's scattered small reads do not drag in much they never use.
pub const DEFAULT_RUN_BYTES: u64 = 2 << 20;

/// Smallest run accepted (one sector).
pub const MIN_RUN_BYTES: u64 = 512;

/// Largest run accepted.
pub const MAX_RUN_BYTES: u64 = 64 << 20;

impl Default for ReadOptions {
    fn default() -> Self {
        ReadOptions {
            run_bytes: DEFAULT_RUN_BYTES,
            cache_runs: 8,
        }
    }
}

/// One run's bytes and where they start (a media or segment offset).
#[derive(Debug)]
pub(crate) struct Run {
    /// Offset of `bytes[0]`.
    pub start: u64,
    /// What the read returned (short only at the end of a file).
    pub bytes: Vec<u8>,
}

impl Run {
    /// `len` bytes at `offset`, if the run holds all of them.
    pub(crate) fn slice(&self, offset: u64, len: usize) -> Option<&[u8]> {
        let from = usize::try_from(offset.checked_sub(self.start)?).ok()?;
        self.bytes.get(from..from.checked_add(len)?)
    }
}

/// The bytes of one run, once read; `None` when the read failed (the
/// caller then reads what it needs on its own, to report the damage
/// exactly).
type Filled = Option<Arc<Run>>;

struct Slot {
    key: u64,
    data: Arc<OnceLock<Filled>>,
    used: u64,
}

/// A bounded cache of runs shared by the threads reading one source.
pub(crate) struct RunCache {
    slots: Mutex<(Vec<Slot>, u64)>,
    capacity: usize,
}

impl std::fmt::Debug for RunCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunCache")
            .field("capacity", &self.capacity)
            .finish_non_exhaustive()
    }
}

impl RunCache {
    /// A cache of at most `capacity` runs.
    pub(crate) fn new(capacity: usize) -> Self {
        RunCache {
            slots: Mutex::new((Vec::new(), 0)),
            capacity: capacity.max(1),
        }
    }

    /// The bytes of run `key`, read by `fill` exactly once while the run is
    /// held: other threads asking for it meanwhile wait for that read.
    pub(crate) fn get(&self, key: u64, fill: impl FnOnce() -> Filled) -> Filled {
        let cell = {
            let mut guard = self
                .slots
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let (slots, tick) = &mut *guard;
            *tick += 1;
            let now = *tick;
            match slots.iter_mut().find(|s| s.key == key) {
                Some(s) => {
                    s.used = now;
                    Arc::clone(&s.data)
                }
                None => {
                    if slots.len() >= self.capacity
                        && let Some((oldest, _)) =
                            slots.iter().enumerate().min_by_key(|(_, s)| s.used)
                    {
                        // Threads still using it keep their own handle.
                        slots.swap_remove(oldest);
                    }
                    let data = Arc::new(OnceLock::new());
                    slots.push(Slot {
                        key,
                        data: Arc::clone(&data),
                        used: now,
                    });
                    data
                }
            }
        };
        cell.get_or_init(fill).clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn a_run_is_read_once_while_held_and_the_cache_stays_bounded() {
        let cache = RunCache::new(2);
        let reads = AtomicUsize::new(0);
        let fill = |k: u64| {
            reads.fetch_add(1, Ordering::SeqCst);
            std::thread::sleep(std::time::Duration::from_millis(20));
            Some(Arc::new(Run {
                start: k,
                bytes: vec![k as u8; 4],
            }))
        };
        // Eight threads at once on one run: one read.
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| assert_eq!(cache.get(7, || fill(7)).unwrap().bytes[0], 7));
            }
        });
        assert_eq!(reads.load(Ordering::SeqCst), 1);
        // Two more runs evict the least recently used one (7).
        cache.get(1, || fill(1));
        cache.get(2, || fill(2));
        cache.get(7, || fill(7));
        assert_eq!(reads.load(Ordering::SeqCst), 4);
        assert!(cache.slots.lock().unwrap().0.len() <= 2);
        // A failed read is remembered as failed (the caller falls back).
        assert!(cache.get(9, || None).is_none());
        assert!(cache.get(9, || fill(9)).is_none());
        let run = Run {
            start: 100,
            bytes: vec![1, 2, 3],
        };
        assert_eq!(run.slice(101, 2), Some(&[2u8, 3][..]));
        assert_eq!(run.slice(101, 3), None);
        assert_eq!(run.slice(99, 1), None);
    }
}
