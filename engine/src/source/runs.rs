//! Large reads for small requests, sized like a kernel's read-ahead.
//!
//! Stages ask the evidence for what they need: a 4 KiB directory cluster, a
//! 20 KiB file, one 32 KiB E01 chunk. On a device that charges per request
//! (a cloud volume with an IOPS cap, a network share, a throttled disk) the
//! request rate then decides the time, not the bytes; on a fast device,
//! reading much more than was asked costs time instead. So a source reads
//! *runs*: stretches of the media read with one positioned read each (a raw
//! image's bytes, an E01's consecutive stored chunks), sized by what is
//! known of what comes next:
//!
//! - inside a span a stage said it will read ([`Runs::hint`]: the files it
//!   is about to hash in disk order, the free space it is about to carve),
//!   a run reaches to the span's end, at most [`ReadOptions::run_bytes`];
//! - a request that continues a run just read (a sequential reader without
//!   a hint: an MFT, a directory tree laid out in order) gets a run twice
//!   as long as that one, from a floor up to the maximum, as read-ahead
//!   grows;
//! - anything else (a boot sector, a scattered directory cluster) is read
//!   as asked, straight into the caller's buffer.
//!
//! Runs are kept in a small cache shared by every thread. A thread that
//! needs bytes a run another thread is reading holds waits for that read
//! instead of issuing its own, so no run is read twice while it is held.
//! Memory is bounded: at most `cache_runs` runs of at most `run_bytes`
//! (plus the ones threads are using at that moment). Positions here are in
//! a source's *units*: bytes for a raw image, chunks for an E01.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};

/// How a source reads its media.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadOptions {
    /// Largest read issued for a run, in bytes (an E01 run holds the
    /// chunks of that much media; at least one chunk).
    pub run_bytes: u64,
    /// Runs kept in the shared cache.
    pub cache_runs: usize,
}

/// Default largest read: 2 MiB. Measured on a throttled evidence device
/// (see `benches/scripts/evidence-read-bench.sh`): large enough that a
/// request-capped device streams near its bandwidth.
pub const DEFAULT_RUN_BYTES: u64 = 2 << 20;

/// Smallest run accepted (one sector).
pub const MIN_RUN_BYTES: u64 = 512;

/// Largest run accepted.
pub const MAX_RUN_BYTES: u64 = 64 << 20;

/// Smallest run read for a request that continues another (bytes): the
/// kernel's default read-ahead window.
pub const FLOOR_BYTES: u64 = 128 << 10;

/// Spans a stage hints that are at most this far apart are read as one
/// (bytes): two small files with a cluster's slack or a little free space
/// between them cost one request, not two. Kept small because every byte
/// of a gap is read for nothing when the device is fast.
pub const HINT_GAP_BYTES: u64 = 32 << 10;

/// Runs cached beyond one per reader thread (see [`ReadOptions::for_threads`]).
pub const SHARED_RUNS: usize = 6;

impl ReadOptions {
    /// Runs of at most `run_bytes` for `threads` reader threads: room for
    /// one run in use per thread and [`SHARED_RUNS`] more shared, so the
    /// cache grows by one run a thread. It held two a thread (one in use,
    /// one coming): at 16 threads 36 runs, 72 MiB at the default size,
    /// which made the index stage's peak RSS at `--threads 16` 1.5x that
    /// at 2. With one a thread the evidence reads the same bytes on a raw
    /// image (1 GiB corpus, every stage) and 2-3% more in an E01's
    /// file-hash stage at 16 threads; a fixed 8 read 9% more there.
    pub fn for_threads(run_bytes: u64, threads: usize) -> Self {
        ReadOptions {
            run_bytes,
            cache_runs: threads.max(1) + SHARED_RUNS,
        }
    }
}

impl Default for ReadOptions {
    fn default() -> Self {
        ReadOptions {
            run_bytes: DEFAULT_RUN_BYTES,
            cache_runs: 8,
        }
    }
}

/// One run's bytes: units `units.0..units.1`, read from file `file` of the
/// source at byte `start`.
#[derive(Debug)]
pub(crate) struct Run {
    /// The units it holds.
    pub units: (u64, u64),
    /// Which of the source's files (a part or segment).
    pub file: usize,
    /// Offset of `bytes[0]` in that file.
    pub start: u64,
    /// What the read returned (short only at the end of a file).
    pub bytes: Vec<u8>,
}

impl Run {
    /// `len` bytes at `offset` of file `file`, if the run holds all of them.
    pub(crate) fn slice(&self, file: usize, offset: u64, len: usize) -> Option<&[u8]> {
        if file != self.file {
            return None;
        }
        let from = usize::try_from(offset.checked_sub(self.start)?).ok()?;
        self.bytes.get(from..from.checked_add(len)?)
    }
}

/// What a source knows of its media, for sizing runs.
pub(crate) trait RunReader {
    /// How far from `start` (towards `end`) one read can fetch: an E01's
    /// chunks must be stored together in one segment. At least `start + 1`.
    fn stretch(&self, start: u64, end: u64) -> u64;
    /// Read units `start..end` as one run into `buffer` (a recycled one:
    /// resize it, its old bytes are not to be trusted); `None` when the
    /// read failed (the caller then reads what it needs on its own, to
    /// report the damage exactly).
    fn fill(&self, start: u64, end: u64, buffer: Vec<u8>) -> Option<Run>;
}

/// Make a recycled run buffer `len` bytes long. New buffers get room for
/// the largest run (`most`), so any later run fits in them: a buffer
/// allocated to size for every run would be fresh memory each time, paid
/// for in page faults. Only bytes beyond the buffer's old length are
/// cleared: a fill keeps only what its read returns.
pub(crate) fn reuse(bytes: &mut Vec<u8>, len: usize, most: usize) {
    if bytes.capacity() < len {
        *bytes = Vec::with_capacity(len.max(most));
    }
    if bytes.len() < len {
        bytes.resize(len, 0);
    } else {
        bytes.truncate(len);
    }
}

/// Where a request's bytes come from.
pub(crate) enum Fetch {
    /// A run holding the request's first unit (and perhaps more).
    Run(Arc<Run>),
    /// Read the request as asked, from the media (it is a lone small
    /// request, or the run holding it could not be read).
    Direct,
}

type Filled = Option<Arc<Run>>;

struct Slot {
    start: u64,
    end: u64,
    data: Arc<OnceLock<Filled>>,
    used: u64,
}

struct State {
    slots: Vec<Slot>,
    tick: u64,
    /// Recently read stretches: (end, length), newest last.
    recent: VecDeque<(u64, u64)>,
    /// Spans stages said they will read, newest last.
    hints: VecDeque<Hint>,
}

/// A span a stage will read, and how far runs have covered it.
#[derive(Debug, Clone, Copy)]
struct Hint {
    start: u64,
    end: u64,
    /// Runs planned in it reach here: reads are expected near it (a read
    /// far ahead of it, or behind it, is some other access, say a carved
    /// item's content, and is not stretched).
    front: u64,
}

const RECENT: usize = 32;
const HINTS: usize = 1024;

/// The run planner and cache of one source.
pub(crate) struct Runs {
    /// Largest run, in units.
    max: u64,
    /// Smallest continuation run, in units.
    floor: u64,
    /// Hinted spans closer than this merge, in units.
    gap: u64,
    /// The media's end, in units.
    limit: u64,
    /// A lone request of at most this many units is read as asked.
    lone: u64,
    /// A sequential request shorter than this gets read-ahead.
    ahead_below: u64,
    capacity: usize,
    state: Mutex<State>,
    /// Buffers of evicted runs no thread holds any more, for new runs:
    /// fresh ones would be zeroed and faulted in page by page.
    spare: Mutex<Vec<Vec<u8>>>,
}

impl std::fmt::Debug for Runs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runs")
            .field("max", &self.max)
            .field("floor", &self.floor)
            .field("capacity", &self.capacity)
            .finish_non_exhaustive()
    }
}

impl Runs {
    /// Runs of at most `max` units (floor, gap likewise in units) over a
    /// media of `limit` units, `capacity` of them cached; a lone request
    /// of at most `lone` units is read as asked (one read), a longer one
    /// as one run; a request shorter than `ahead_below` units that
    /// continues an earlier read gets read-ahead.
    pub(crate) fn new(
        max: u64,
        floor: u64,
        gap: u64,
        limit: u64,
        (lone, ahead_below): (u64, u64),
        capacity: usize,
    ) -> Self {
        let max = max.max(1);
        Runs {
            max,
            floor: floor.clamp(1, max),
            gap,
            limit,
            lone,
            ahead_below,
            capacity: capacity.max(1),
            state: Mutex::new(State {
                slots: Vec::new(),
                tick: 0,
                recent: VecDeque::new(),
                hints: VecDeque::new(),
            }),
            spare: Mutex::new(Vec::new()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A stage will read units `start..end` soon (in any order, by any
    /// thread). Spans that touch or nearly touch the last one merge with it.
    pub(crate) fn hint(&self, start: u64, end: u64) {
        if end <= start {
            return;
        }
        let mut s = self.lock();
        if let Some(last) = s.hints.back_mut()
            && start <= last.end.saturating_add(self.gap)
            && end.saturating_add(self.gap) >= last.start
        {
            if start < last.start {
                last.start = start;
                last.front = last.front.min(start);
            }
            last.end = last.end.max(end);
            return;
        }
        if s.hints.len() >= HINTS {
            s.hints.pop_front();
        }
        s.hints.push_back(Hint {
            start,
            end,
            front: start,
        });
    }

    /// Whether a run held (or being read) covers unit `pos`.
    pub(crate) fn holds(&self, pos: u64) -> bool {
        self.lock()
            .slots
            .iter()
            .any(|x| x.start <= pos && pos < x.end)
    }

    /// Note a stretch read directly, so a request that continues it is
    /// recognised.
    pub(crate) fn note_direct(&self, start: u64, end: u64) {
        let mut s = self.lock();
        Self::remember(&mut s, start, end);
    }

    /// A stretch was read (or is being read): later requests that continue
    /// it are sequential, and a hint it lies in has been read that far.
    fn remember(s: &mut State, start: u64, end: u64) {
        if s.recent.len() >= RECENT {
            s.recent.pop_front();
        }
        s.recent.push_back((end, end.saturating_sub(start)));
        if let Some(h) = s
            .hints
            .iter_mut()
            .rev()
            .find(|h| h.start <= start && start < h.end)
        {
            h.front = h.front.max(end);
        }
    }

    /// Where the request for units `pos..want_end` gets its first unit.
    pub(crate) fn fetch(&self, pos: u64, want_end: u64, reader: &dyn RunReader) -> Fetch {
        let want_end = want_end.clamp(pos + 1, self.limit.max(pos + 1));
        let cell = {
            let mut s = self.lock();
            s.tick += 1;
            let now = s.tick;
            if let Some(slot) = s.slots.iter_mut().find(|x| x.start <= pos && pos < x.end) {
                slot.used = now;
                (Arc::clone(&slot.data), slot.start, slot.end)
            } else {
                let max = self.max;
                let within = s.hints.iter().rposition(|h| h.start <= pos && pos < h.end);
                // Near where reading the span has got to: stretch the run
                // over what comes next in it.
                let hinted = within
                    .map(|i| s.hints[i])
                    .filter(|h| h.front <= pos && pos < h.front.saturating_add(max))
                    .map(|h| h.end);
                // Exactly where an earlier read ended: a sequential reader.
                // One whose requests are large reads as they are needs no
                // read-ahead.
                let continued = s
                    .recent
                    .iter()
                    .rev()
                    .find(|(end, _)| pos == *end)
                    .filter(|_| want_end - pos < self.ahead_below)
                    .map(|&(_, len)| len.saturating_mul(2).clamp(self.floor, self.max));
                let mut end = match (hinted, continued) {
                    (Some(h), _) => h.min(pos.saturating_add(self.max)),
                    (None, Some(len)) => pos.saturating_add(len),
                    (None, None) => want_end,
                };
                // Never past the span the read lies in (what follows it is
                // not known to be wanted).
                if let Some(i) = within {
                    end = end.min(s.hints[i].end);
                }
                // Never less than asked; never past the media or into a
                // stretch another run already holds.
                end = end.max(want_end).min(self.limit);
                if let Some(next) = s
                    .slots
                    .iter()
                    .filter(|x| x.start > pos)
                    .map(|x| x.start)
                    .min()
                {
                    end = end.min(next);
                }
                let end = reader.stretch(pos, end.max(pos + 1)).max(pos + 1);
                Self::remember(&mut s, pos, end);
                if hinted.is_none() && continued.is_none() && end - pos <= self.lone {
                    // A lone request: read it as asked.
                    return Fetch::Direct;
                }
                if s.slots.len() >= self.capacity
                    && let Some((oldest, _)) =
                        s.slots.iter().enumerate().min_by_key(|(_, x)| x.used)
                {
                    // Threads still using it keep their own handle; if none
                    // does, its buffer is kept for the next run.
                    let old = s.slots.swap_remove(oldest);
                    if let Ok(cell) = Arc::try_unwrap(old.data)
                        && let Some(Some(run)) = cell.into_inner()
                        && let Ok(run) = Arc::try_unwrap(run)
                    {
                        let mut spare = self.spare.lock().unwrap_or_else(PoisonError::into_inner);
                        // A couple suffice: a buffer is freed for each one taken.
                        if spare.len() < 2 {
                            spare.push(run.bytes);
                        }
                    }
                }
                let data = Arc::new(OnceLock::new());
                s.slots.push(Slot {
                    start: pos,
                    end,
                    data: Arc::clone(&data),
                    used: now,
                });
                (data, pos, end)
            }
        };
        let (cell, start, end) = cell;
        match cell.get_or_init(|| {
            let buffer = self
                .spare
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .pop()
                .unwrap_or_default();
            reader.fill(start, end, buffer).map(Arc::new)
        }) {
            Some(run) => Fetch::Run(Arc::clone(run)),
            None => Fetch::Direct,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A media of bytes `i % 251`, one unit per byte, counting reads.
    struct Media {
        reads: AtomicUsize,
        read: Mutex<Vec<(u64, u64)>>,
        fail_at: Option<u64>,
    }

    impl Media {
        fn new() -> Self {
            Media {
                reads: AtomicUsize::new(0),
                read: Mutex::new(Vec::new()),
                fail_at: None,
            }
        }
    }

    impl RunReader for Media {
        fn stretch(&self, _start: u64, end: u64) -> u64 {
            end
        }
        fn fill(&self, start: u64, end: u64, _buffer: Vec<u8>) -> Option<Run> {
            self.reads.fetch_add(1, Ordering::SeqCst);
            self.read.lock().unwrap().push((start, end));
            std::thread::sleep(std::time::Duration::from_millis(5));
            if self.fail_at.is_some_and(|f| (start..end).contains(&f)) {
                return None;
            }
            Some(Run {
                units: (start, end),
                file: 0,
                start,
                bytes: (start..end).map(|i| (i % 251) as u8).collect(),
            })
        }
    }

    fn run_of(f: Fetch) -> Arc<Run> {
        match f {
            Fetch::Run(r) => r,
            Fetch::Direct => panic!("expected a run"),
        }
    }

    /// Runs over a 1 GiB medium in bytes, as the raw source sets them up:
    /// 1 MiB at most, 128 KiB floor and read-ahead bound, lone requests as
    /// asked; spans `gap` bytes apart merge; `capacity` runs cached.
    fn raw_like(gap: u64, capacity: usize) -> Runs {
        Runs::new(
            1 << 20,
            128 << 10,
            gap,
            1 << 30,
            (u64::MAX, 128 << 10),
            capacity,
        )
    }

    #[test]
    fn lone_requests_are_read_as_asked_and_sequential_ones_grow() {
        let m = Media::new();
        let runs = raw_like(64 << 10, 8);
        // A lone 4 KiB read: direct.
        assert!(matches!(
            runs.fetch(10 << 20, (10 << 20) + 4096, &m),
            Fetch::Direct
        ));
        // The next 4 KiB continues it: a floor-sized run.
        let r = run_of(runs.fetch((10 << 20) + 4096, (10 << 20) + 8192, &m));
        assert_eq!(
            r.units,
            ((10 << 20) + 4096, (10 << 20) + 4096 + (128 << 10))
        );
        // Continuing that run: twice as long.
        let r = run_of(runs.fetch(r.units.1, r.units.1 + 4096, &m));
        assert_eq!(r.units.1 - r.units.0, 256 << 10);
        // ... up to the maximum.
        let mut r = r;
        for _ in 0..5 {
            r = run_of(runs.fetch(r.units.1, r.units.1 + 4096, &m));
        }
        assert_eq!(r.units.1 - r.units.0, 1 << 20);
        assert_eq!(r.bytes[0], (r.units.0 % 251) as u8);
    }

    #[test]
    fn hinted_spans_merge_and_bound_the_run() {
        let m = Media::new();
        let runs = raw_like(64 << 10, 8);
        // Three small files, 10 KiB apart: one span.
        runs.hint(0, 20 << 10);
        runs.hint(30 << 10, 50 << 10);
        runs.hint(60 << 10, 70 << 10);
        // Far away: a span of its own.
        runs.hint(500 << 20, (500 << 20) + 4096);
        let r = run_of(runs.fetch(0, 4096, &m));
        assert_eq!(r.units, (0, 70 << 10));
        // The other files are served from it.
        let again = run_of(runs.fetch(60 << 10, 62 << 10, &m));
        assert!(Arc::ptr_eq(&r, &again));
        assert_eq!(m.reads.load(Ordering::SeqCst), 1);
        // A long hinted span is read a maximum at a time.
        runs.hint(100 << 20, 110 << 20);
        let r = run_of(runs.fetch(100 << 20, (100 << 20) + 1, &m));
        assert_eq!(r.units.1 - r.units.0, 1 << 20);
    }

    #[test]
    fn a_run_is_read_once_while_held_and_the_cache_stays_bounded() {
        let m = Media::new();
        let runs = raw_like(0, 2);
        runs.hint(0, 1 << 20);
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| {
                    let r = run_of(runs.fetch(100, 200, &m));
                    assert_eq!(r.bytes[0], 100);
                });
            }
        });
        assert_eq!(m.reads.load(Ordering::SeqCst), 1);
        // Two more runs evict the least recently used one.
        runs.hint(5 << 20, 6 << 20);
        run_of(runs.fetch(5 << 20, (5 << 20) + 1, &m));
        runs.hint(9 << 20, 10 << 20);
        run_of(runs.fetch(9 << 20, (9 << 20) + 1, &m));
        // Behind the hint's front: not stretched, read as asked.
        assert!(matches!(runs.fetch(100, 200, &m), Fetch::Direct));
        assert_eq!(m.reads.load(Ordering::SeqCst), 3);
        assert!(runs.lock().slots.len() <= 2);
        // A run never reaches into one already held.
        let held = run_of(runs.fetch(9 << 20, (9 << 20) + 1, &m));
        runs.note_direct(0, (9 << 20) - 50);
        let before = run_of(runs.fetch((9 << 20) - 50, (9 << 20) - 40, &m));
        assert_eq!(before.units, ((9 << 20) - 50, held.units.0));
    }

    #[test]
    fn a_failed_run_falls_back_to_direct_reads() {
        let mut m = Media::new();
        m.fail_at = Some(3000);
        let runs = raw_like(0, 4);
        runs.hint(0, 1 << 20);
        assert!(matches!(runs.fetch(0, 10, &m), Fetch::Direct));
        let run = Run {
            units: (100, 103),
            file: 1,
            start: 100,
            bytes: vec![1, 2, 3],
        };
        assert_eq!(run.slice(1, 101, 2), Some(&[2u8, 3][..]));
        assert_eq!(run.slice(1, 101, 3), None);
        assert_eq!(run.slice(1, 99, 1), None);
        assert_eq!(run.slice(0, 101, 1), None);
    }
}
