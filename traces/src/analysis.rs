//! The figures `caseload trace compare` sets side by side for two traces:
//! per channel and phase, bytes and operations, request sizes, syncs per
//! GiB written, the sequential share, concurrency, and re-use: how far back
//! each re-read page was last touched (its LRU stack distance, Mattson et
//! al. 1970), from which the hit ratio an LRU page cache of any size would
//! have had follows in one pass.
//!
//! Memory: per file and page, the time it was last touched, and a Fenwick
//! tree over access times (one bit's worth of count per page access), so a
//! trace of N page accesses costs O(N) memory and O(N log N) time.

use crate::format::{Channel, Op, Record, TraceReader};
use crate::import::error::FormatError;
use std::collections::{BTreeMap, HashMap};
use std::io::BufRead;

/// The page size re-use is counted in (the x86 page cache's).
pub const PAGE: u64 = 4096;

/// Pages of one request walked at most (64 GiB).
const MAX_PAGES_PER_REQUEST: u64 = 1 << 24;

/// Distinct pages tracked before re-use is sampled (SHARDS, Waldspurger et
/// al., FAST 2015: pages whose hash falls under a threshold stand for all,
/// distances scaled by the rate): about 1 GiB of memory at most, for a
/// 64 GiB working set; beyond it the hit ratios are estimates.
pub const MAX_TRACKED_PAGES: u64 = 16 << 20;

/// Request sizes are counted in power-of-two buckets from 512 B to 16 MiB.
pub const SIZE_BUCKETS: [u64; 16] = [
    512,
    1 << 10,
    2 << 10,
    4 << 10,
    8 << 10,
    16 << 10,
    32 << 10,
    64 << 10,
    128 << 10,
    256 << 10,
    512 << 10,
    1 << 20,
    2 << 20,
    4 << 20,
    8 << 20,
    16 << 20,
];

/// The figures of one channel in one phase.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct ChannelFigures {
    /// Bytes read.
    pub read_bytes: u64,
    /// Reads.
    pub read_ops: u64,
    /// Bytes written.
    pub write_bytes: u64,
    /// Writes.
    pub write_ops: u64,
    /// Syncs.
    pub syncs: u64,
    /// Other operations (open, create, close, stat, rename, remove, mkdir,
    /// truncate, directory syncs).
    pub meta_ops: u64,
    /// Reads by size: `read_sizes[i]` counts reads up to `SIZE_BUCKETS[i]`
    /// bytes (the last bucket: everything larger too).
    pub read_sizes: Vec<u64>,
    /// Writes by size, as `read_sizes`.
    pub write_sizes: Vec<u64>,
    /// Syncs per GiB written (0 without writes).
    pub syncs_per_gib_written: f64,
    /// Reads and writes that began where the previous one on the same file
    /// ended, as a share of all reads and writes.
    pub sequential_share: f64,
    /// Operations in flight on average while the channel was busy (the
    /// sum of durations over the time some operation was in flight; 0
    /// without durations).
    pub mean_in_flight: f64,
    /// The most operations in flight at once.
    pub max_in_flight: u64,
}

/// Figures of a whole trace.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct TraceFigures {
    /// Per phase (the trace's own phases, or `all`), per channel.
    pub phases: BTreeMap<String, BTreeMap<Channel, ChannelFigures>>,
    /// Phases in the order they began.
    pub phase_order: Vec<String>,
    /// Threads seen.
    pub threads: u64,
    /// First operation to last, seconds.
    pub seconds: f64,
    /// Re-use of pages over the whole trace.
    pub reuse: Reuse,
}

/// Re-use of pages: accesses, first touches and the LRU stack distances
/// of the rest.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Reuse {
    /// Page accesses by reads and writes.
    pub accesses: u64,
    /// Accesses to a page never touched before in the trace (a cache of
    /// any size misses them, unless the file existed and was cached: not
    /// known from a trace).
    pub first_touches: u64,
    /// Read accesses.
    pub read_accesses: u64,
    /// Read accesses that were first touches.
    pub read_first_touches: u64,
    /// Distinct pages touched (bytes: this times [`PAGE`]).
    pub distinct_pages: u64,
    /// Re-read accesses by stack distance: `distances[k]` counts those at a
    /// distance below 2^k pages (and at least 2^(k-1)).
    pub read_distances: Vec<u64>,
    /// For each cache size asked for (bytes), the hit ratio of reads an
    /// LRU cache of that size would have had.
    pub hit_ratios: Vec<(u64, f64)>,
    /// The share of pages followed (1: every page; below 1 the counts are
    /// of the sampled pages and the hit ratios estimates).
    pub sample_rate: f64,
}

/// A Fenwick tree counting marks at access times.
struct Fenwick(Vec<u32>);

impl Fenwick {
    fn add(&mut self, i: usize, v: i32) {
        let mut i = i + 1;
        while i <= self.0.len() {
            self.0[i - 1] = self.0[i - 1].wrapping_add_signed(v);
            i += i & i.wrapping_neg();
        }
    }
    fn prefix(&self, i: usize) -> u64 {
        // Sum of marks at times < i.
        let mut i = i.min(self.0.len());
        let mut s = 0u64;
        while i > 0 {
            s += u64::from(self.0[i - 1]);
            i -= i & i.wrapping_neg();
        }
        s
    }
    /// Double until `len` fits. The tree's size is a power of two, so the
    /// doubled tree keeps every old node (each covers only old positions),
    /// its new nodes cover only empty positions but the last, which covers
    /// everything: the old total.
    fn grow(&mut self, len: usize) {
        while self.0.len() < len {
            let n = self.0.len();
            let total = self.prefix(n) as u32;
            self.0.resize(2 * n, 0);
            self.0[2 * n - 1] = total;
        }
    }
}

/// Mattson's stack distances over page accesses, in access order.
struct StackDistances {
    /// The share of pages followed (1: all), as a threshold on a hash.
    rate: f64,
    threshold: u64,
    last: HashMap<(u32, u64), usize>,
    marks: Fenwick,
    time: usize,
    sizes_pages: Vec<u64>,
    read_hits: Vec<u64>,
    reuse: Reuse,
}

impl StackDistances {
    fn new(cache_bytes: &[u64], rate: f64) -> Self {
        let rate = rate.clamp(1e-6, 1.0);
        StackDistances {
            rate,
            threshold: (rate * (1u64 << 32) as f64) as u64,
            last: HashMap::new(),
            marks: Fenwick(vec![0; 1 << 16]),
            time: 0,
            sizes_pages: cache_bytes.iter().map(|b| b / PAGE).collect(),
            read_hits: vec![0; cache_bytes.len()],
            reuse: Reuse {
                read_distances: vec![0; 48],
                ..Reuse::default()
            },
        }
    }

    fn access(&mut self, file: u32, page: u64, read: bool) {
        if self.rate < 1.0 {
            // A fixed mixer (splitmix64's), so the same pages are followed
            // on every run.
            let mut z = page ^ (u64::from(file) << 40) ^ 0x9e37_79b9_7f4a_7c15;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^= z >> 31;
            if (z & 0xffff_ffff) >= self.threshold {
                return;
            }
        }
        if self.time >= self.marks.0.len() {
            self.marks.grow(self.time + 1);
        }
        self.reuse.accesses += 1;
        if read {
            self.reuse.read_accesses += 1;
        }
        match self.last.insert((file, page), self.time) {
            None => {
                self.reuse.first_touches += 1;
                self.reuse.distinct_pages += 1;
                if read {
                    self.reuse.read_first_touches += 1;
                }
            }
            Some(prev) => {
                // Distinct pages touched since: those whose last touch is
                // after `prev`.
                let sampled = self.marks.prefix(self.time) - self.marks.prefix(prev + 1);
                let distance = (sampled as f64 / self.rate) as u64;
                self.marks.add(prev, -1);
                if read {
                    let k = (64 - distance.leading_zeros()) as usize;
                    if let Some(slot) = self.reuse.read_distances.get_mut(k) {
                        *slot += 1;
                    }
                    for (hits, &size) in self.read_hits.iter_mut().zip(&self.sizes_pages) {
                        if distance < size {
                            *hits += 1;
                        }
                    }
                }
            }
        }
        self.marks.add(self.time, 1);
        self.time += 1;
    }

    fn finish(mut self, cache_bytes: &[u64]) -> Reuse {
        let reads = self.reuse.read_accesses.max(1) as f64;
        self.reuse.hit_ratios = cache_bytes
            .iter()
            .zip(&self.read_hits)
            .map(|(&b, &h)| (b, h as f64 / reads))
            .collect();
        while self.reuse.read_distances.last() == Some(&0) {
            self.reuse.read_distances.pop();
        }
        self.reuse
    }
}

#[derive(Default)]
struct Busy {
    /// (start, end) of operations with a duration, in order of start.
    spans: Vec<(u64, u64)>,
}

fn bucket(len: u64) -> usize {
    SIZE_BUCKETS
        .iter()
        .position(|&b| len <= b)
        .unwrap_or(SIZE_BUCKETS.len() - 1)
}

/// Read a trace and compute its figures, with the read hit ratio of an
/// LRU cache of each of `cache_bytes`; re-use followed on `rate` of the
/// pages (1: all; see [`sample_rate`]).
pub fn analyse(
    input: impl BufRead,
    cache_bytes: &[u64],
    rate: f64,
) -> Result<TraceFigures, FormatError> {
    let mut reader = TraceReader::new(input)?;
    let mut figures = TraceFigures::default();
    let mut phase = "all".to_string();
    let mut ends: HashMap<u32, u64> = HashMap::new();
    let mut sequential: HashMap<(String, Channel), (u64, u64)> = HashMap::new();
    let mut busy: HashMap<(String, Channel), Busy> = HashMap::new();
    let mut stack = StackDistances::new(cache_bytes, rate);
    let mut first_t: Option<u64> = None;
    let mut last_t = 0u64;
    while let Some(r) = reader.next_record() {
        let r: Record = r?;
        match r.op {
            Op::Thread => {
                figures.threads += 1;
                continue;
            }
            Op::Phase => {
                phase = r
                    .path
                    .as_deref()
                    .map(|p| String::from_utf8_lossy(p).into_owned())
                    .unwrap_or_default();
                if !figures.phase_order.contains(&phase) {
                    figures.phase_order.push(phase.clone());
                }
                continue;
            }
            Op::Add => continue,
            _ => {}
        }
        let Some(channel) = r.channel else { continue };
        first_t.get_or_insert(r.t_ns);
        last_t = last_t.max(r.t_ns.saturating_add(r.dur_ns));
        if figures.phase_order.is_empty() {
            figures.phase_order.push(phase.clone());
        }
        let f = figures
            .phases
            .entry(phase.clone())
            .or_default()
            .entry(channel)
            .or_insert_with(|| ChannelFigures {
                read_sizes: vec![0; SIZE_BUCKETS.len()],
                write_sizes: vec![0; SIZE_BUCKETS.len()],
                ..ChannelFigures::default()
            });
        if r.dur_ns > 0 {
            busy.entry((phase.clone(), channel))
                .or_default()
                .spans
                .push((r.t_ns, r.t_ns.saturating_add(r.dur_ns)));
        }
        match r.op {
            Op::Read | Op::Write => {
                let read = r.op == Op::Read;
                if read {
                    f.read_bytes = f.read_bytes.saturating_add(r.len);
                    f.read_ops += 1;
                    f.read_sizes[bucket(r.len)] += 1;
                } else {
                    f.write_bytes = f.write_bytes.saturating_add(r.len);
                    f.write_ops += 1;
                    f.write_sizes[bucket(r.len)] += 1;
                }
                let seq = sequential.entry((phase.clone(), channel)).or_default();
                seq.1 += 1;
                if ends.get(&r.file) == Some(&r.offset) && r.offset > 0 {
                    seq.0 += 1;
                }
                ends.insert(r.file, r.offset.saturating_add(r.len));
                if r.len > 0 {
                    let first = r.offset / PAGE;
                    // A request of more than 64 GiB is no real one; its
                    // pages past that are not walked (a hostile trace must
                    // not make this loop for ever).
                    let last = (r.offset.saturating_add(r.len - 1) / PAGE)
                        .min(first + MAX_PAGES_PER_REQUEST);
                    for page in first..=last {
                        stack.access(r.file, page, read);
                    }
                }
            }
            Op::Sync => f.syncs += 1,
            _ => f.meta_ops += 1,
        }
    }
    for (phase, channels) in figures.phases.iter_mut() {
        for (channel, f) in channels.iter_mut() {
            let gib = f.write_bytes as f64 / (1u64 << 30) as f64;
            f.syncs_per_gib_written = if gib > 0.0 { f.syncs as f64 / gib } else { 0.0 };
            if let Some((seq, all)) = sequential.get(&(phase.clone(), *channel))
                && *all > 0
            {
                f.sequential_share = *seq as f64 / *all as f64;
            }
            if let Some(b) = busy.get_mut(&(phase.clone(), *channel)) {
                let (mean, max) = in_flight(&mut b.spans);
                f.mean_in_flight = mean;
                f.max_in_flight = max;
            }
        }
    }
    figures.seconds = last_t.saturating_sub(first_t.unwrap_or(0)) as f64 / 1e9;
    figures.reuse = stack.finish(cache_bytes);
    figures.reuse.sample_rate = rate;
    Ok(figures)
}

/// The bytes of evidence a trace reads: over its evidence files, the
/// furthest byte read of each (what `--scale-from` scales memory by).
pub fn evidence_bytes(input: impl BufRead) -> Result<u64, FormatError> {
    let mut reader = TraceReader::new(input)?;
    let mut furthest: HashMap<u32, u64> = HashMap::new();
    while let Some(r) = reader.next_record() {
        let r = r?;
        if r.op == Op::Read && r.channel == Some(Channel::Evidence) {
            let e = furthest.entry(r.file).or_default();
            *e = (*e).max(r.offset.saturating_add(r.len));
        }
    }
    Ok(furthest.values().sum())
}

/// The share of pages to follow for a trace touching `bytes` (its reads
/// and writes summed: an upper bound on its distinct pages), so that at
/// most [`MAX_TRACKED_PAGES`] are tracked.
pub fn sample_rate(bytes: u64) -> f64 {
    let pages = bytes / PAGE + 1;
    if pages <= MAX_TRACKED_PAGES {
        1.0
    } else {
        MAX_TRACKED_PAGES as f64 / pages as f64
    }
}

/// Bytes a trace reads and writes in all (for [`sample_rate`]).
pub fn bytes_moved(input: impl BufRead) -> Result<u64, FormatError> {
    let mut reader = TraceReader::new(input)?;
    let mut total = 0u64;
    while let Some(r) = reader.next_record() {
        let r = r?;
        if matches!(r.op, Op::Read | Op::Write) {
            total = total.saturating_add(r.len);
        }
    }
    Ok(total)
}

/// Mean operations in flight while any was, and the most at once.
fn in_flight(spans: &mut [(u64, u64)]) -> (f64, u64) {
    if spans.is_empty() {
        return (0.0, 0);
    }
    let total: u64 = spans.iter().map(|(s, e)| e - s).sum();
    let mut events: Vec<(u64, i32)> = spans.iter().flat_map(|&(s, e)| [(s, 1), (e, -1)]).collect();
    // Ends before starts at the same instant: touching is not overlapping.
    events.sort_unstable();
    let (mut depth, mut max, mut busy, mut since) = (0i64, 0i64, 0u64, 0u64);
    for (t, d) in events {
        if depth > 0 {
            busy += t - since;
        }
        depth += i64::from(d);
        max = max.max(depth);
        since = t;
    }
    (
        if busy > 0 {
            total as f64 / busy as f64
        } else {
            0.0
        },
        max as u64,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{write_header, write_record};

    fn trace(records: &[Record]) -> Vec<u8> {
        let mut out = Vec::new();
        write_header(&mut out, &[]).unwrap();
        for r in records {
            write_record(r, &mut out);
        }
        out
    }

    fn read(file: u32, offset: u64, len: u64, t: u64) -> Record {
        Record {
            t_ns: t,
            dur_ns: 10,
            thread: 1,
            channel: Some(Channel::Evidence),
            file,
            op: Op::Read,
            offset,
            len,
            ..Record::default()
        }
    }

    #[test]
    fn stack_distances_give_the_lru_hit_ratio() {
        // Pages 0..8 read twice in a loop: a cache of 8 pages hits every
        // second pass; one of 7 never does (LRU's worst case).
        let mut records = Vec::new();
        let mut t = 0;
        for _ in 0..3 {
            for p in 0..8 {
                records.push(read(1, p * PAGE, PAGE, t));
                t += 100;
            }
        }
        let f = analyse(&trace(&records)[..], &[7 * PAGE, 8 * PAGE, 100 * PAGE], 1.0).unwrap();
        assert_eq!(f.reuse.read_accesses, 24);
        assert_eq!(f.reuse.read_first_touches, 8);
        assert_eq!(f.reuse.hit_ratios[0].1, 0.0);
        assert!((f.reuse.hit_ratios[1].1 - 16.0 / 24.0).abs() < 1e-9);
        assert!((f.reuse.hit_ratios[2].1 - 16.0 / 24.0).abs() < 1e-9);
        let all = &f.phases["all"][&Channel::Evidence];
        assert_eq!((all.read_ops, all.read_bytes), (24, 24 * PAGE));
        // Every read but the first of each pass follows the one before.
        assert!(
            (all.sequential_share - 21.0 / 24.0).abs() < 1e-9,
            "{}",
            all.sequential_share
        );
        assert_eq!(all.read_sizes[bucket(PAGE)], 24);
    }

    #[test]
    fn in_flight_counts_overlaps_only() {
        let mut spans = vec![(0, 10), (5, 15), (20, 30)];
        let (mean, max) = in_flight(&mut spans);
        assert_eq!(max, 2);
        assert!((mean - 30.0 / 25.0).abs() < 1e-9, "{mean}");
    }

    #[test]
    fn the_fenwick_tree_survives_growth() {
        let mut s = StackDistances::new(&[4 * PAGE], 1.0);
        for i in 0..200_000u64 {
            s.access(1, i % 3, true);
        }
        let r = s.finish(&[4 * PAGE]);
        assert_eq!(r.read_first_touches, 3);
        assert!((r.hit_ratios[0].1 - 199_997.0 / 200_000.0).abs() < 1e-9);
    }
}
