//! I/O channels: the one door to every file caseload touches on its
//! storage, and the one place where it is counted.
//!
//! A channel is a directory (hence a device) with a role: `evidence`,
//! `database`, `case` or `temp`. Every operation on a channel goes through
//! [`Channel`] or a [`ChannelFile`] it handed out, and adds to the channel's
//! counters: bytes and operations read and written, fsyncs, the wall time
//! spent inside those calls ("blocked"), and opens, creates, renames,
//! removes, directory syncs and metadata reads by kind. No raw path leaves a
//! channel to be opened elsewhere (a test fails when engine code opens,
//! creates or removes files with `std::fs` outside the modules allowed to);
//! the exceptions are named methods: [`Channel::dir`] (for reports and
//! page-cache control), [`Channel::sqlite_path`] (a SQLite file, opened
//! through the counting VFS registered on this channel's counters) and
//! [`Channel::server_dir`] (a database server's data directory, whose I/O
//! the server does itself and [`Channel::charge_foreign`] adds in). Code
//! that must read on handles of its own (a library that takes paths)
//! charges its reads with `charge_foreign` too.
//!
//! Stages run one after another within a pipeline, so a stage's figures are
//! the difference between two [`ChannelSnapshot`]s taken around it.

pub mod kind;

use crate::cache::model::{CachedFile, PageCacheModel};
use crate::fault::{FaultState, InjectedFault};
use crate::latency::{LatencyCounters, LatencyHistogram};
use crate::os::FileAt;
use crate::trace::{Trace, TraceOp};
pub use kind::ChannelKind;
use serde::{Deserialize, Serialize};
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// Live counters of one channel, shared by every handle on it.
#[derive(Debug)]
pub struct ChannelCounters {
    bytes_read: AtomicU64,
    read_ops: AtomicU64,
    bytes_written: AtomicU64,
    write_ops: AtomicU64,
    fsyncs: AtomicU64,
    read_blocked_ns: AtomicU64,
    write_blocked_ns: AtomicU64,
    sync_blocked_ns: AtomicU64,
    opens: AtomicU64,
    creates: AtomicU64,
    renames: AtomicU64,
    removes: AtomicU64,
    dir_syncs: AtomicU64,
    stats: AtomicU64,
    cache_hit_bytes: AtomicU64,
    cache_miss_bytes: AtomicU64,
    cache_evicted_bytes: AtomicU64,
    cache_written_back_bytes: AtomicU64,
    read_sizes: [AtomicU64; SIZE_BUCKETS],
    write_sizes: [AtomicU64; SIZE_BUCKETS],
    read_latency: LatencyCounters,
    write_latency: LatencyCounters,
    sync_latency: LatencyCounters,
    /// The run's trace, when it records one (`run --trace`).
    trace: OnceLock<Arc<Trace>>,
    /// The modelled workstation's page cache, when the run models one
    /// (`--ram`).
    page_cache: OnceLock<Arc<PageCacheModel>>,
    /// An injected fault and the first write-side error.
    fault: FaultState,
}

impl Default for ChannelCounters {
    fn default() -> Self {
        ChannelCounters {
            bytes_read: AtomicU64::new(0),
            read_ops: AtomicU64::new(0),
            bytes_written: AtomicU64::new(0),
            write_ops: AtomicU64::new(0),
            fsyncs: AtomicU64::new(0),
            read_blocked_ns: AtomicU64::new(0),
            write_blocked_ns: AtomicU64::new(0),
            sync_blocked_ns: AtomicU64::new(0),
            opens: AtomicU64::new(0),
            creates: AtomicU64::new(0),
            renames: AtomicU64::new(0),
            removes: AtomicU64::new(0),
            dir_syncs: AtomicU64::new(0),
            stats: AtomicU64::new(0),
            cache_hit_bytes: AtomicU64::new(0),
            cache_miss_bytes: AtomicU64::new(0),
            cache_evicted_bytes: AtomicU64::new(0),
            cache_written_back_bytes: AtomicU64::new(0),
            read_sizes: std::array::from_fn(|_| AtomicU64::new(0)),
            write_sizes: std::array::from_fn(|_| AtomicU64::new(0)),
            read_latency: LatencyCounters::default(),
            write_latency: LatencyCounters::default(),
            sync_latency: LatencyCounters::default(),
            trace: OnceLock::new(),
            page_cache: OnceLock::new(),
            fault: FaultState::default(),
        }
    }
}

/// Buckets of a [`SizeHistogram`]: 0 bytes, then one per power of two up to
/// 2^38 and beyond, and a last one for operations whose size is unknown
/// (I/O charged by a server or library that reports totals only).
pub const SIZE_BUCKETS: usize = 41;
const UNKNOWN_BUCKET: usize = SIZE_BUCKETS - 1;

/// The bucket of an operation of `bytes`: 0 for none, else 1 + log2.
fn size_bucket(bytes: u64) -> usize {
    if bytes == 0 {
        0
    } else {
        (64 - bytes.leading_zeros() as usize).min(UNKNOWN_BUCKET - 1)
    }
}

/// How many operations moved how many bytes, by powers of two: bucket `b`
/// (1 and up) holds operations of `2^(b-1)` to `2^b - 1` bytes, bucket 0
/// those of none. In JSON: a map from each bucket's lower bound in bytes
/// (`"0"`, `"1"`, `"2"`, `"4"`, ... `"4096"`, ...) to its count, non-empty
/// buckets only, and `"unknown"` for operations of unknown size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SizeHistogram(pub [u64; SIZE_BUCKETS]);

impl Default for SizeHistogram {
    fn default() -> Self {
        SizeHistogram([0; SIZE_BUCKETS])
    }
}

impl SizeHistogram {
    /// Operations counted.
    pub fn total(&self) -> u64 {
        self.0.iter().sum()
    }

    /// The lowest and highest byte count the buckets allow, over all
    /// operations of known size.
    pub fn byte_bounds(&self) -> (u64, u64) {
        let mut low = 0u64;
        let mut high = 0u64;
        for (b, &n) in self.0.iter().enumerate().take(UNKNOWN_BUCKET) {
            if b == 0 {
                continue;
            }
            let lo = 1u64 << (b - 1);
            let hi = if b == UNKNOWN_BUCKET - 1 {
                u64::MAX
            } else {
                (1u64 << b) - 1
            };
            low = low.saturating_add(lo.saturating_mul(n));
            high = high.saturating_add(hi.saturating_mul(n));
        }
        (low, high)
    }

    /// Operations of unknown size.
    pub fn unknown(&self) -> u64 {
        self.0[UNKNOWN_BUCKET]
    }

    fn zip(&self, other: &SizeHistogram, f: impl Fn(u64, u64) -> u64) -> SizeHistogram {
        let mut out = [0u64; SIZE_BUCKETS];
        for (i, o) in out.iter_mut().enumerate() {
            *o = f(self.0[i], other.0[i]);
        }
        SizeHistogram(out)
    }
}

impl Serialize for SizeHistogram {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = s.serialize_map(None)?;
        for (b, &n) in self.0.iter().enumerate() {
            if n == 0 {
                continue;
            }
            if b == UNKNOWN_BUCKET {
                map.serialize_entry("unknown", &n)?;
            } else {
                let lower = if b == 0 { 0 } else { 1u64 << (b - 1) };
                map.serialize_entry(&lower.to_string(), &n)?;
            }
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for SizeHistogram {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let map = std::collections::BTreeMap::<String, u64>::deserialize(d)?;
        let mut out = [0u64; SIZE_BUCKETS];
        for (k, n) in map {
            let b = if k == "unknown" {
                UNKNOWN_BUCKET
            } else {
                let lower: u64 = k.parse().map_err(serde::de::Error::custom)?;
                size_bucket(lower)
            };
            out[b] += n;
        }
        Ok(SizeHistogram(out))
    }
}

/// Operations on a channel other than reads, writes and file syncs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetaOp {
    /// A file opened.
    Open,
    /// A file or directory created.
    Create,
    /// A rename.
    Rename,
    /// A file or directory removed.
    Remove,
    /// A directory synced (also counted as an fsync).
    DirSync,
    /// Metadata read: a stat, a directory listing.
    Stat,
}

impl ChannelCounters {
    /// Count one operation of `kind`.
    fn record_op(&self, kind: MetaOp) {
        let c = match kind {
            MetaOp::Open => &self.opens,
            MetaOp::Create => &self.creates,
            MetaOp::Rename => &self.renames,
            MetaOp::Remove => &self.removes,
            MetaOp::DirSync => &self.dir_syncs,
            MetaOp::Stat => &self.stats,
        };
        c.fetch_add(1, Ordering::Relaxed);
    }

    /// Count one read of `bytes` that took `took`.
    pub(crate) fn record_read(&self, bytes: u64, took: Duration) {
        self.bytes_read.fetch_add(bytes, Ordering::Relaxed);
        self.read_ops.fetch_add(1, Ordering::Relaxed);
        self.read_sizes[size_bucket(bytes)].fetch_add(1, Ordering::Relaxed);
        self.read_latency.record(took);
        self.read_blocked_ns
            .fetch_add(duration_ns(took), Ordering::Relaxed);
    }

    /// Before a write of `len` bytes: the injected fault's error, if it
    /// trips (or has); the error is noted as the channel's.
    pub(crate) fn check_write(&self, kind: ChannelKind, path: &Path, len: u64) -> io::Result<()> {
        let written = self.bytes_written.load(Ordering::Relaxed);
        self.fault
            .before_write(written, len)
            .inspect_err(|e| self.note_error(kind, "write", path, e))
    }

    /// Before a sync: the injected fault's error, if any (noted).
    pub(crate) fn check_sync(&self, kind: ChannelKind, path: &Path) -> io::Result<()> {
        self.fault
            .before_sync()
            .inspect_err(|e| self.note_error(kind, "sync", path, e))
    }

    /// Note a write-side error of the channel (the first one is kept).
    pub(crate) fn note_error(
        &self,
        kind: ChannelKind,
        op: &str,
        path: &Path,
        e: &dyn std::fmt::Display,
    ) {
        self.fault
            .note(format!("{kind} channel: {op} `{}`: {e}", path.display()));
    }

    /// Count one write of `bytes` that took `took`.
    pub(crate) fn record_write(&self, bytes: u64, took: Duration) {
        self.bytes_written.fetch_add(bytes, Ordering::Relaxed);
        self.write_ops.fetch_add(1, Ordering::Relaxed);
        self.write_sizes[size_bucket(bytes)].fetch_add(1, Ordering::Relaxed);
        self.write_latency.record(took);
        self.write_blocked_ns
            .fetch_add(duration_ns(took), Ordering::Relaxed);
    }

    /// Count one fsync/fdatasync that took `took`.
    pub(crate) fn record_sync(&self, took: Duration) {
        self.fsyncs.fetch_add(1, Ordering::Relaxed);
        self.sync_latency.record(took);
        self.sync_blocked_ns
            .fetch_add(duration_ns(took), Ordering::Relaxed);
    }

    /// Count a read's bytes found in the modelled page cache and not.
    pub(crate) fn record_cache(&self, hit: u64, miss: u64) {
        self.cache_hit_bytes.fetch_add(hit, Ordering::Relaxed);
        self.cache_miss_bytes.fetch_add(miss, Ordering::Relaxed);
    }

    /// Count `bytes` of this channel's files dropped from the modelled
    /// page cache, `dirty` of them written back first, which took `took`
    /// (time the evicting thread waited: charged as write time).
    pub(crate) fn record_eviction(&self, bytes: u64, dirty: u64, took: Duration) {
        self.cache_evicted_bytes.fetch_add(bytes, Ordering::Relaxed);
        if dirty > 0 {
            self.cache_written_back_bytes
                .fetch_add(dirty, Ordering::Relaxed);
            self.write_blocked_ns
                .fetch_add(duration_ns(took), Ordering::Relaxed);
        }
    }

    /// The modelled page cache, if the run models one.
    pub(crate) fn page_cache(&self) -> Option<&Arc<PageCacheModel>> {
        self.page_cache.get()
    }

    /// Add figures measured elsewhere (a database server's own I/O).
    pub(crate) fn add(&self, d: &ChannelSnapshot) {
        self.bytes_read.fetch_add(d.bytes_read, Ordering::Relaxed);
        self.read_ops.fetch_add(d.read_ops, Ordering::Relaxed);
        self.bytes_written
            .fetch_add(d.bytes_written, Ordering::Relaxed);
        self.write_ops.fetch_add(d.write_ops, Ordering::Relaxed);
        self.fsyncs.fetch_add(d.fsyncs, Ordering::Relaxed);
        self.read_blocked_ns
            .fetch_add(d.read_blocked_ns, Ordering::Relaxed);
        self.write_blocked_ns
            .fetch_add(d.write_blocked_ns, Ordering::Relaxed);
        self.sync_blocked_ns
            .fetch_add(d.sync_blocked_ns, Ordering::Relaxed);
        self.opens.fetch_add(d.opens, Ordering::Relaxed);
        self.creates.fetch_add(d.creates, Ordering::Relaxed);
        self.renames.fetch_add(d.renames, Ordering::Relaxed);
        self.removes.fetch_add(d.removes, Ordering::Relaxed);
        self.dir_syncs.fetch_add(d.dir_syncs, Ordering::Relaxed);
        self.stats.fetch_add(d.stats, Ordering::Relaxed);
        self.record_cache(d.cache_hit_bytes, d.cache_miss_bytes);
        self.cache_evicted_bytes
            .fetch_add(d.cache_evicted_bytes, Ordering::Relaxed);
        self.cache_written_back_bytes
            .fetch_add(d.cache_written_back_bytes, Ordering::Relaxed);
        // Sizes the caller knew, and the rest of its operations as unknown,
        // so the histograms still add up to the operation counts.
        for (counts, hist, ops) in [
            (&self.read_sizes, &d.read_sizes, d.read_ops),
            (&self.write_sizes, &d.write_sizes, d.write_ops),
        ] {
            for (c, &n) in counts.iter().zip(hist.0.iter()) {
                c.fetch_add(n, Ordering::Relaxed);
            }
            counts[UNKNOWN_BUCKET].fetch_add(ops.saturating_sub(hist.total()), Ordering::Relaxed);
        }
        // Latencies only where the caller timed single operations.
        self.read_latency.add(&d.read_latency);
        self.write_latency.add(&d.write_latency);
        self.sync_latency.add(&d.sync_latency);
    }

    /// The run's trace, if one is being recorded.
    pub(crate) fn trace(&self) -> Option<&Arc<Trace>> {
        self.trace.get()
    }

    /// The counters' values now.
    pub fn snapshot(&self) -> ChannelSnapshot {
        ChannelSnapshot {
            bytes_read: self.bytes_read.load(Ordering::Relaxed),
            read_ops: self.read_ops.load(Ordering::Relaxed),
            bytes_written: self.bytes_written.load(Ordering::Relaxed),
            write_ops: self.write_ops.load(Ordering::Relaxed),
            fsyncs: self.fsyncs.load(Ordering::Relaxed),
            read_blocked_ns: self.read_blocked_ns.load(Ordering::Relaxed),
            write_blocked_ns: self.write_blocked_ns.load(Ordering::Relaxed),
            sync_blocked_ns: self.sync_blocked_ns.load(Ordering::Relaxed),
            opens: self.opens.load(Ordering::Relaxed),
            creates: self.creates.load(Ordering::Relaxed),
            renames: self.renames.load(Ordering::Relaxed),
            removes: self.removes.load(Ordering::Relaxed),
            dir_syncs: self.dir_syncs.load(Ordering::Relaxed),
            stats: self.stats.load(Ordering::Relaxed),
            cache_hit_bytes: self.cache_hit_bytes.load(Ordering::Relaxed),
            cache_miss_bytes: self.cache_miss_bytes.load(Ordering::Relaxed),
            cache_evicted_bytes: self.cache_evicted_bytes.load(Ordering::Relaxed),
            cache_written_back_bytes: self.cache_written_back_bytes.load(Ordering::Relaxed),
            read_sizes: SizeHistogram(std::array::from_fn(|i| {
                self.read_sizes[i].load(Ordering::Relaxed)
            })),
            write_sizes: SizeHistogram(std::array::from_fn(|i| {
                self.write_sizes[i].load(Ordering::Relaxed)
            })),
            read_latency: self.read_latency.snapshot(),
            write_latency: self.write_latency.snapshot(),
            sync_latency: self.sync_latency.snapshot(),
        }
    }
}

impl crate::cache::model::CacheAccounts for ChannelCounters {
    fn record_cache(&self, hit: u64, miss: u64) {
        ChannelCounters::record_cache(self, hit, miss)
    }

    fn record_eviction(&self, bytes: u64, dirty: u64, took: Duration) {
        ChannelCounters::record_eviction(self, bytes, dirty, took)
    }
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

fn duration_ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// Counter values at one instant; subtract two to get an interval's figures.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChannelSnapshot {
    /// Bytes read.
    pub bytes_read: u64,
    /// Read operations (system calls).
    pub read_ops: u64,
    /// Bytes written.
    pub bytes_written: u64,
    /// Write operations (system calls).
    pub write_ops: u64,
    /// fsync/fdatasync calls.
    pub fsyncs: u64,
    /// Nanoseconds spent inside read calls.
    pub read_blocked_ns: u64,
    /// Nanoseconds spent inside write calls.
    pub write_blocked_ns: u64,
    /// Nanoseconds spent inside fsync calls.
    pub sync_blocked_ns: u64,
    /// Files opened.
    #[serde(default)]
    pub opens: u64,
    /// Files and directories created.
    #[serde(default)]
    pub creates: u64,
    /// Renames.
    #[serde(default)]
    pub renames: u64,
    /// Files and directories removed.
    #[serde(default)]
    pub removes: u64,
    /// Directory syncs (each also counted in `fsyncs`).
    #[serde(default)]
    pub dir_syncs: u64,
    /// Metadata reads (stat, directory listing).
    #[serde(default)]
    pub stats: u64,
    /// Bytes read that the modelled page cache held (`--ram`; absent
    /// without it).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_hit_bytes: u64,
    /// Bytes read that it did not hold: the device's.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_miss_bytes: u64,
    /// Bytes of this channel's files the model dropped from the cache.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_evicted_bytes: u64,
    /// Of those, dirty bytes written back first.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_written_back_bytes: u64,
    /// Read operations by size.
    #[serde(default)]
    pub read_sizes: SizeHistogram,
    /// Write operations by size.
    #[serde(default)]
    pub write_sizes: SizeHistogram,
    /// Reads by latency (the operations caseload timed itself).
    #[serde(default)]
    pub read_latency: LatencyHistogram,
    /// Writes by latency.
    #[serde(default)]
    pub write_latency: LatencyHistogram,
    /// File syncs by latency.
    #[serde(default)]
    pub sync_latency: LatencyHistogram,
}

impl ChannelSnapshot {
    /// Figures accumulated between `earlier` and `self`.
    pub fn since(&self, earlier: &ChannelSnapshot) -> ChannelSnapshot {
        ChannelSnapshot {
            bytes_read: self.bytes_read.saturating_sub(earlier.bytes_read),
            read_ops: self.read_ops.saturating_sub(earlier.read_ops),
            bytes_written: self.bytes_written.saturating_sub(earlier.bytes_written),
            write_ops: self.write_ops.saturating_sub(earlier.write_ops),
            fsyncs: self.fsyncs.saturating_sub(earlier.fsyncs),
            read_blocked_ns: self.read_blocked_ns.saturating_sub(earlier.read_blocked_ns),
            write_blocked_ns: self
                .write_blocked_ns
                .saturating_sub(earlier.write_blocked_ns),
            sync_blocked_ns: self.sync_blocked_ns.saturating_sub(earlier.sync_blocked_ns),
            opens: self.opens.saturating_sub(earlier.opens),
            creates: self.creates.saturating_sub(earlier.creates),
            renames: self.renames.saturating_sub(earlier.renames),
            removes: self.removes.saturating_sub(earlier.removes),
            dir_syncs: self.dir_syncs.saturating_sub(earlier.dir_syncs),
            stats: self.stats.saturating_sub(earlier.stats),
            cache_hit_bytes: self.cache_hit_bytes.saturating_sub(earlier.cache_hit_bytes),
            cache_miss_bytes: self
                .cache_miss_bytes
                .saturating_sub(earlier.cache_miss_bytes),
            cache_evicted_bytes: self
                .cache_evicted_bytes
                .saturating_sub(earlier.cache_evicted_bytes),
            cache_written_back_bytes: self
                .cache_written_back_bytes
                .saturating_sub(earlier.cache_written_back_bytes),
            read_sizes: self
                .read_sizes
                .zip(&earlier.read_sizes, u64::saturating_sub),
            write_sizes: self
                .write_sizes
                .zip(&earlier.write_sizes, u64::saturating_sub),
            read_latency: self
                .read_latency
                .zip(&earlier.read_latency, u64::saturating_sub),
            write_latency: self
                .write_latency
                .zip(&earlier.write_latency, u64::saturating_sub),
            sync_latency: self
                .sync_latency
                .zip(&earlier.sync_latency, u64::saturating_sub),
        }
    }

    /// Sum of two intervals (aggregating instances).
    pub fn plus(&self, other: &ChannelSnapshot) -> ChannelSnapshot {
        ChannelSnapshot {
            bytes_read: self.bytes_read + other.bytes_read,
            read_ops: self.read_ops + other.read_ops,
            bytes_written: self.bytes_written + other.bytes_written,
            write_ops: self.write_ops + other.write_ops,
            fsyncs: self.fsyncs + other.fsyncs,
            read_blocked_ns: self.read_blocked_ns + other.read_blocked_ns,
            write_blocked_ns: self.write_blocked_ns + other.write_blocked_ns,
            sync_blocked_ns: self.sync_blocked_ns + other.sync_blocked_ns,
            opens: self.opens + other.opens,
            creates: self.creates + other.creates,
            renames: self.renames + other.renames,
            removes: self.removes + other.removes,
            dir_syncs: self.dir_syncs + other.dir_syncs,
            stats: self.stats + other.stats,
            cache_hit_bytes: self.cache_hit_bytes + other.cache_hit_bytes,
            cache_miss_bytes: self.cache_miss_bytes + other.cache_miss_bytes,
            cache_evicted_bytes: self.cache_evicted_bytes + other.cache_evicted_bytes,
            cache_written_back_bytes: self.cache_written_back_bytes
                + other.cache_written_back_bytes,
            read_sizes: self.read_sizes.zip(&other.read_sizes, |a, b| a + b),
            write_sizes: self.write_sizes.zip(&other.write_sizes, |a, b| a + b),
            read_latency: self.read_latency.zip(&other.read_latency, |a, b| a + b),
            write_latency: self.write_latency.zip(&other.write_latency, |a, b| a + b),
            sync_latency: self.sync_latency.zip(&other.sync_latency, |a, b| a + b),
        }
    }

    /// Mean bytes per read operation (0 with none).
    pub fn mean_read_bytes(&self) -> u64 {
        self.bytes_read.checked_div(self.read_ops).unwrap_or(0)
    }

    /// Mean bytes per write operation (0 with none).
    pub fn mean_write_bytes(&self) -> u64 {
        self.bytes_written.checked_div(self.write_ops).unwrap_or(0)
    }

    /// Total nanoseconds blocked in any call.
    pub fn blocked_ns(&self) -> u64 {
        self.read_blocked_ns + self.write_blocked_ns + self.sync_blocked_ns
    }
}

/// Errors from channel operations.
#[derive(Debug, thiserror::Error)]
pub enum ChannelError {
    /// A relative path tried to leave the channel directory.
    #[error("path `{path}` would leave the {channel} channel directory")]
    Escapes {
        /// The channel.
        channel: ChannelKind,
        /// The offending path.
        path: PathBuf,
    },
    /// The path is one of the evidence files, which are never written.
    #[error("refusing to write `{}`: it is evidence, which is opened read-only", .0.display())]
    WouldWriteEvidence(PathBuf),
    /// The channel already records into a trace.
    #[error("the {0} channel is already traced")]
    AlreadyTraced(ChannelKind),
    /// An I/O error on the channel.
    #[error("{channel} channel: {op} `{}`: {source}", path.display())]
    Io {
        /// The channel.
        channel: ChannelKind,
        /// What was being done.
        op: &'static str,
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
}

/// A directory with a role, and the counters for everything done on it.
#[derive(Debug, Clone)]
pub struct Channel {
    kind: ChannelKind,
    root: PathBuf,
    counters: Arc<ChannelCounters>,
    /// Evidence files, canonicalised: writes to these are refused whatever
    /// channel they come through.
    protected: Arc<Vec<PathBuf>>,
}

impl Channel {
    /// A channel rooted at `root`. `protected` lists files that must never be
    /// opened for writing through it (the evidence).
    pub fn new(kind: ChannelKind, root: impl Into<PathBuf>, protected: Vec<PathBuf>) -> Self {
        Channel {
            kind,
            root: root.into(),
            counters: Arc::new(ChannelCounters::default()),
            protected: Arc::new(protected),
        }
    }

    /// The channel's role.
    pub fn kind(&self) -> ChannelKind {
        self.kind
    }

    /// The channel's directory, for reports and page-cache control. Files
    /// in it are opened through the channel, never through this path.
    pub fn dir(&self) -> &Path {
        &self.root
    }

    /// The shared counters, for the case database's counting SQLite VFS
    /// and server accounting (both in `casedb`), which count as they go.
    pub(crate) fn counters(&self) -> &Arc<ChannelCounters> {
        &self.counters
    }

    /// Add figures of I/O done on this channel's files by code on handles
    /// of its own: a database server's processes, a library that opens
    /// files by path.
    pub fn charge_foreign(&self, delta: &ChannelSnapshot) {
        self.counters.add(delta);
    }

    /// The path of a SQLite file in the channel, for SQLite to open through
    /// a counting VFS registered on this channel (`casedb`), which counts
    /// every read, write and sync it makes.
    pub fn sqlite_path(&self, name: impl AsRef<Path>) -> Result<PathBuf, ChannelError> {
        self.path(name)
    }

    /// The directory handed to a database server as its home (a private
    /// PostgreSQL cluster's data directory goes in it); the server's own
    /// I/O is charged with [`charge_foreign`](Self::charge_foreign).
    pub fn server_dir(&self) -> &Path {
        &self.root
    }

    /// The counters' values now.
    pub fn snapshot(&self) -> ChannelSnapshot {
        self.counters.snapshot()
    }

    /// Inject `fault` into this channel (and the channels sharing its
    /// counters): it trips after `fault.after_bytes` more bytes written; a
    /// `gone` fault removes this channel's directory.
    pub fn arm_fault(&self, fault: &InjectedFault) {
        let written = self.counters.bytes_written.load(Ordering::Relaxed);
        let removable = !self.protected.iter().any(|p| p.starts_with(&self.root));
        self.counters.fault.arm(
            self.kind,
            fault.error,
            written.saturating_add(fault.after_bytes),
            self.root.clone(),
            removable,
        );
    }

    /// Why this channel can no longer be trusted with the case: its first
    /// write-side error, or its directory gone. `None` when healthy.
    pub fn fault(&self) -> Option<String> {
        if !self.root.is_dir() {
            return Some(format!(
                "{} channel: the directory `{}` is gone (removed or unmounted during the run)",
                self.kind,
                self.root.display()
            ));
        }
        self.counters.fault.first()
    }

    /// Make the channel's directory again after it vanished during a run,
    /// to hold the report that says so.
    pub fn recreate_dir(&self) -> Result<(), ChannelError> {
        self.meta(MetaOp::Create, &self.root);
        std::fs::create_dir_all(&self.root)
            .map_err(|e| self.io_err("create directory", &self.root, e))
    }

    /// A create or write-side operation on `path` is about to happen: the
    /// injected error if the fault has tripped, and never a new channel
    /// directory in place of one that vanished (what was written in the old
    /// one would silently be missing).
    fn before_create(&self, op: &'static str, path: &Path) -> Result<(), ChannelError> {
        let refused = if self.root.is_dir() {
            self.counters.fault.before_create()
        } else {
            Err(io::Error::new(
                io::ErrorKind::NotFound,
                "the channel's directory is gone",
            ))
        };
        refused.map_err(|e| self.io_err(op, path, e))
    }

    /// Record every later operation on this channel (and channels sharing
    /// its counters) in `trace`. A channel is traced at most once: a second
    /// call is refused.
    pub fn set_trace(&self, trace: Arc<Trace>) -> Result<(), ChannelError> {
        self.counters
            .trace
            .set(trace)
            .map_err(|_| ChannelError::AlreadyTraced(self.kind))
    }

    /// Model the workstation's page cache over every later operation on
    /// this channel (and channels sharing its counters). Set at most once:
    /// a second call is ignored.
    pub fn set_page_cache(&self, model: Arc<PageCacheModel>) {
        let _ = self.counters.page_cache.set(model);
    }

    /// Create (truncating) a file of caseload's own instruments inside the
    /// channel (the trace): its I/O is not counted or traced, being the
    /// measurement, not the workload.
    pub fn create_instrument(&self, relative: impl AsRef<Path>) -> Result<File, ChannelError> {
        let path = self.path(relative)?;
        self.refuse_evidence(&path)?;
        self.create_parent(&path, false)?;
        File::create(&path).map_err(|e| self.instrument_err("create", &path, e))
    }

    /// Replace an instrument file whole (a run's progress record): written
    /// under `NAME.tmp`, synced, renamed over `NAME`, so that a process
    /// killed at any point leaves the old content or the new; not counted.
    pub fn replace_instrument(
        &self,
        relative: impl AsRef<Path>,
        content: &[u8],
    ) -> Result<(), ChannelError> {
        use std::io::Write as _;
        let path = self.path(relative)?;
        let mut tmp = path.clone().into_os_string();
        tmp.push(".tmp");
        let tmp = PathBuf::from(tmp);
        self.refuse_evidence(&path)?;
        self.refuse_evidence(&tmp)?;
        let mut file = File::create(&tmp).map_err(|e| self.instrument_err("create", &tmp, e))?;
        file.write_all(content)
            .and_then(|()| file.sync_data())
            .map_err(|e| self.instrument_err("write", &tmp, e))?;
        std::fs::rename(&tmp, &path).map_err(|e| self.instrument_err("rename", &tmp, e))?;
        // The new name is durable only once its directory is synced.
        let dir = path.parent().unwrap_or(&self.root);
        File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| self.instrument_err("sync directory", dir, e))
    }

    /// An error on one of caseload's own files: not the workload's, so not
    /// noted as the channel's fault.
    fn instrument_err(&self, op: &'static str, path: &Path, source: io::Error) -> ChannelError {
        ChannelError::Io {
            channel: self.kind,
            op,
            path: path.to_path_buf(),
            source,
        }
    }

    /// Read an instrument file whole (`None` when absent); not counted.
    pub fn read_instrument(
        &self,
        relative: impl AsRef<Path>,
    ) -> Result<Option<Vec<u8>>, ChannelError> {
        let path = self.path(relative)?;
        match std::fs::read(&path) {
            Ok(b) => Ok(Some(b)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(self.instrument_err("open", &path, e)),
        }
    }

    /// Remove an instrument file if it is there; not counted.
    pub fn remove_instrument(&self, relative: impl AsRef<Path>) -> Result<(), ChannelError> {
        let path = self.path(relative)?;
        self.refuse_evidence(&path)?;
        match std::fs::remove_file(&path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => {
                Err(self.instrument_err("remove", &path, e))
            }
            _ => Ok(()),
        }
    }

    /// Create the directory `path` goes in when it is missing; counted
    /// and traced unless it is for an instrument.
    fn create_parent(&self, path: &Path, counted: bool) -> Result<(), ChannelError> {
        if let Some(parent) = path.parent()
            && !parent.is_dir()
        {
            self.before_create("create directory", parent)?;
            if counted {
                self.meta(MetaOp::Create, parent);
            }
            std::fs::create_dir_all(parent)
                .map_err(|e| self.io_err("create directory", parent, e))?;
        }
        Ok(())
    }

    /// Count a metadata operation on `path` and trace it.
    fn meta(&self, op: MetaOp, path: &Path) {
        self.counters.record_op(op);
        if let Some(t) = self.counters.trace() {
            let op = match op {
                MetaOp::Open => TraceOp::Open,
                MetaOp::Create => TraceOp::Mkdir,
                MetaOp::Rename => TraceOp::Rename,
                MetaOp::Remove => TraceOp::Remove,
                MetaOp::DirSync => TraceOp::DirSync,
                MetaOp::Stat => TraceOp::Stat,
            };
            t.path_op(self.kind, op, path, None);
        }
    }

    /// A file handed out by this channel, numbered in the trace if any.
    fn file(&self, file: File, path: PathBuf, created: bool) -> ChannelFile {
        let trace_id = OnceLock::new();
        if let Some(t) = self.counters.trace() {
            let _ = trace_id.set(t.file(self.kind, &path, created));
        }
        ChannelFile {
            file,
            path,
            counters: Arc::clone(&self.counters),
            kind: self.kind,
            position: 0,
            trace_id,
            cached: OnceLock::new(),
        }
    }

    /// Resolve a relative path inside the channel, refusing absolute paths and
    /// `..` so that nothing is ever written outside the channel directory.
    fn path(&self, relative: impl AsRef<Path>) -> Result<PathBuf, ChannelError> {
        let relative = relative.as_ref();
        let safe = relative
            .components()
            .all(|c| matches!(c, Component::Normal(_) | Component::CurDir));
        if !safe || relative.as_os_str().is_empty() {
            return Err(ChannelError::Escapes {
                channel: self.kind,
                path: relative.to_path_buf(),
            });
        }
        Ok(self.root.join(relative))
    }

    /// An I/O error on this channel; noted as the channel's fault when it
    /// is on the write side (a failed open or listing is the caller's to
    /// judge).
    fn io_err(&self, op: &'static str, path: &Path, source: io::Error) -> ChannelError {
        if !matches!(op, "open" | "list" | "remove") {
            self.counters.note_error(self.kind, op, path, &source);
        }
        ChannelError::Io {
            channel: self.kind,
            op,
            path: path.to_path_buf(),
            source,
        }
    }

    /// Create (truncating) a file inside the channel for writing.
    pub fn create(&self, relative: impl AsRef<Path>) -> Result<ChannelFile, ChannelError> {
        let path = self.path(relative)?;
        self.refuse_evidence(&path)?;
        self.create_parent(&path, true)?;
        self.before_create("create", &path)?;
        self.counters.record_op(MetaOp::Create);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .map_err(|e| self.io_err("create", &path, e))?;
        let file = self.file(file, path, true);
        // Created over an old file, the same inode lost its pages.
        if let Some((model, id)) = file.cached() {
            model.truncated(id, 0);
        }
        Ok(file)
    }

    /// Create a directory (and its parents) inside the channel.
    pub fn create_dir(&self, relative: impl AsRef<Path>) -> Result<(), ChannelError> {
        let path = self.path(relative)?;
        self.before_create("create directory", &path)?;
        self.meta(MetaOp::Create, &path);
        std::fs::create_dir_all(&path).map_err(|e| self.io_err("create directory", &path, e))
    }

    /// Create a directory inside the channel and return a channel rooted
    /// there, counting on this channel's counters (a run's private temp
    /// directory).
    pub fn sub(&self, relative: impl AsRef<Path>) -> Result<Channel, ChannelError> {
        let path = self.path(relative.as_ref())?;
        self.create_dir(relative)?;
        Ok(Channel {
            kind: self.kind,
            root: path,
            counters: Arc::clone(&self.counters),
            protected: Arc::clone(&self.protected),
        })
    }

    /// Rename a file or directory inside the channel.
    pub fn rename(&self, from: impl AsRef<Path>, to: impl AsRef<Path>) -> Result<(), ChannelError> {
        let (from, to) = (self.path(from)?, self.path(to)?);
        self.refuse_evidence(&to)?;
        self.counters.record_op(MetaOp::Rename);
        if let Some(t) = self.counters.trace() {
            t.path_op(self.kind, TraceOp::Rename, &from, Some(&to));
        }
        std::fs::rename(&from, &to).map_err(|e| self.io_err("rename", &from, e))?;
        if let Some(m) = self.counters.page_cache() {
            m.renamed(&from, &to, to.is_dir());
        }
        Ok(())
    }

    /// Remove a file inside the channel.
    pub fn remove_file(&self, relative: impl AsRef<Path>) -> Result<(), ChannelError> {
        let path = self.path(relative)?;
        self.refuse_evidence(&path)?;
        self.meta(MetaOp::Remove, &path);
        std::fs::remove_file(&path).map_err(|e| self.io_err("remove", &path, e))?;
        if let Some(m) = self.counters.page_cache() {
            m.removed_file(&path);
        }
        Ok(())
    }

    /// Remove a file or a directory tree inside the channel, if it exists.
    pub fn remove_all(&self, relative: impl AsRef<Path>) -> Result<(), ChannelError> {
        let path = self.path(relative)?;
        self.refuse_evidence(&path)?;
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            return Ok(());
        };
        self.meta(MetaOp::Remove, &path);
        let r = if meta.is_dir() {
            std::fs::remove_dir_all(&path)
        } else {
            std::fs::remove_file(&path)
        };
        if let Some(m) = self.counters.page_cache() {
            if meta.is_dir() {
                m.removed_tree(&path);
            } else {
                m.removed_file(&path);
            }
        }
        r.map_err(|e| self.io_err("remove", &path, e))
    }

    /// fsync a directory inside the channel (`""` for the channel's own),
    /// so that the names created or renamed in it are durable.
    pub fn sync_dir(&self, relative: impl AsRef<Path>) -> Result<(), ChannelError> {
        let relative = relative.as_ref();
        let path = if relative.as_os_str().is_empty() {
            self.root.clone()
        } else {
            self.path(relative)?
        };
        let start = Instant::now();
        let result = crate::os::sync_dir(&path);
        self.meta(MetaOp::DirSync, &path);
        self.counters.record_sync(start.elapsed());
        result.map_err(|e| self.io_err("sync directory", &path, e))
    }

    /// Flush everything written to the file system the channel lives on
    /// (`syncfs(2)`): data and metadata of every file, as `sync` does for
    /// one file system; counted as a sync.
    pub fn sync_file_system(&self) -> Result<(), ChannelError> {
        let start = Instant::now();
        let result = crate::os::sync_file_system(&self.root);
        self.counters.record_sync(start.elapsed());
        result.map_err(|e| self.io_err("sync file system", &self.root, e))
    }

    /// Whether a file or directory exists inside the channel.
    pub fn exists(&self, relative: impl AsRef<Path>) -> bool {
        match self.path(relative) {
            Ok(p) => {
                self.meta(MetaOp::Stat, &p);
                p.exists()
            }
            Err(_) => {
                self.counters.record_op(MetaOp::Stat);
                false
            }
        }
    }

    /// The names in a directory inside the channel (`""` for its own),
    /// sorted.
    pub fn list(&self, relative: impl AsRef<Path>) -> Result<Vec<String>, ChannelError> {
        let relative = relative.as_ref();
        let path = if relative.as_os_str().is_empty() {
            self.root.clone()
        } else {
            self.path(relative)?
        };
        self.meta(MetaOp::Stat, &path);
        let mut names: Vec<String> = std::fs::read_dir(&path)
            .map_err(|e| self.io_err("list", &path, e))?
            .filter_map(Result::ok)
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        Ok(names)
    }

    /// Bytes of the files under a path inside the channel (`""` for all),
    /// or of the file; 0 when absent.
    pub fn tree_bytes(&self, relative: impl AsRef<Path>) -> u64 {
        fn walk(p: &Path) -> u64 {
            let Ok(meta) = std::fs::symlink_metadata(p) else {
                return 0;
            };
            if !meta.is_dir() {
                return meta.len();
            }
            std::fs::read_dir(p)
                .into_iter()
                .flatten()
                .flatten()
                .map(|e| walk(&e.path()))
                .sum()
        }
        let relative = relative.as_ref();
        let path = if relative.as_os_str().is_empty() {
            Ok(self.root.clone())
        } else {
            self.path(relative)
        };
        self.counters.record_op(MetaOp::Stat);
        path.map_or(0, |p| walk(&p))
    }

    /// Open a file inside the channel read-only.
    pub fn open(&self, relative: impl AsRef<Path>) -> Result<ChannelFile, ChannelError> {
        let path = self.path(relative)?;
        self.open_path_read_only(&path)
    }

    /// Open an existing file inside the channel for reading and writing
    /// (an append, a rewrite in place), without truncating it.
    pub fn open_read_write(&self, relative: impl AsRef<Path>) -> Result<ChannelFile, ChannelError> {
        let path = self.path(relative)?;
        self.refuse_evidence(&path)?;
        self.counters.record_op(MetaOp::Open);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .map_err(|e| self.io_err("open", &path, e))?;
        Ok(self.file(file, path, false))
    }

    /// Open any file read-only and count its reads on this channel (the
    /// evidence channel opens evidence files by absolute path).
    pub fn open_path_read_only(&self, path: &Path) -> Result<ChannelFile, ChannelError> {
        self.counters.record_op(MetaOp::Open);
        let file = File::open(path).map_err(|e| self.io_err("open", path, e))?;
        Ok(self.file(file, path.to_path_buf(), false))
    }

    /// Open any file read-only bypassing the page cache (`O_DIRECT`,
    /// `FILE_FLAG_NO_BUFFERING`): transfers must be aligned to the device's
    /// block in offset, length and buffer address. Counted on this channel.
    pub fn open_path_unbuffered(&self, path: &Path) -> Result<ChannelFile, ChannelError> {
        self.counters.record_op(MetaOp::Open);
        let file = crate::os::open_unbuffered(path).map_err(|e| self.io_err("open", path, e))?;
        Ok(self.file(file, path.to_path_buf(), false))
    }

    /// Open (creating if absent, never truncating) a file inside the
    /// channel for reading and writing bypassing the page cache, as
    /// [`Channel::open_path_unbuffered`].
    pub fn open_unbuffered_read_write(
        &self,
        relative: impl AsRef<Path>,
    ) -> Result<ChannelFile, ChannelError> {
        let path = self.path(relative)?;
        self.refuse_evidence(&path)?;
        self.counters.record_op(MetaOp::Open);
        let file = crate::os::open_unbuffered_read_write(&path)
            .map_err(|e| self.io_err("open", &path, e))?;
        Ok(self.file(file, path, false))
    }

    fn refuse_evidence(&self, path: &Path) -> Result<(), ChannelError> {
        if self.protected.is_empty() {
            return Ok(());
        }
        // The file may not exist yet: compare the canonical parent + name.
        let canonical = match (path.parent(), path.file_name()) {
            (Some(parent), Some(name)) => crate::os::resolve(parent)
                .map(|p| p.join(name))
                .unwrap_or_else(|_| path.to_path_buf()),
            _ => path.to_path_buf(),
        };
        if self.protected.contains(&canonical) {
            return Err(ChannelError::WouldWriteEvidence(canonical));
        }
        Ok(())
    }
}

/// A file opened through a channel: every read, write and sync is counted.
#[derive(Debug)]
pub struct ChannelFile {
    file: File,
    path: PathBuf,
    counters: Arc<ChannelCounters>,
    kind: ChannelKind,
    position: u64,
    /// The file's number in the run's trace, from its first traced
    /// operation (a file opened before the trace started, the evidence, is
    /// numbered when first used).
    trace_id: OnceLock<u32>,
    /// The file in the modelled page cache, from its first operation
    /// (`None`: the run models none, or the file could not be told).
    cached: OnceLock<Option<CachedFile>>,
}

impl ChannelFile {
    /// The modelled page cache and this file in it, if the run models one.
    fn cached(&self) -> Option<(&Arc<PageCacheModel>, CachedFile)> {
        let model = self.counters.page_cache()?;
        let id = self.cached.get_or_init(|| {
            let len = self.file.metadata().ok()?.len();
            let id = crate::os::file_identity(&self.file).ok()?;
            Some(model.register(&self.path, id, len, self.counters.clone()))
        });
        id.map(|id| (model, id))
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The underlying file, for calls that are not I/O (metadata, fadvise).
    pub fn file(&self) -> &File {
        &self.file
    }

    /// Ask the kernel to drop the file's clean pages from its page cache
    /// (`posix_fadvise(DONTNEED)`), so that the next read reaches the
    /// device; whether the kernel took the advice.
    pub fn drop_cached_pages(&self) -> bool {
        crate::os::drop_cached(&self.file)
    }

    /// Positioned read; counted. Returns the bytes read (short only at EOF).
    pub fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let start = Instant::now();
        let mut done = 0;
        let mut calls = 0u64;
        let mut call_start = start;
        let result = loop {
            if done == buf.len() {
                break Ok(done);
            }
            calls += 1;
            let at = offset + done as u64;
            let got = self.file.read_at(&mut buf[done..], at);
            // Each system call is an operation of the trace, as a tracer of
            // the process sees it (a short read's last call reads 0 bytes).
            let now = Instant::now();
            self.trace(
                TraceOp::Read,
                at,
                *got.as_ref().unwrap_or(&0) as u64,
                now - call_start,
            );
            call_start = now;
            match got {
                Ok(0) => break Ok(done),
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => break Err(e),
            }
        };
        let took = start.elapsed();
        // A loop of short reads is still one logical operation per call made.
        for _ in 1..calls {
            self.counters.record_read(0, Duration::ZERO);
        }
        self.counters.record_read(done as u64, took);
        if let Some((model, id)) = self.cached() {
            model.read(id, offset, done as u64);
        }
        result
    }

    fn trace(&self, op: TraceOp, offset: u64, len: u64, took: Duration) {
        if let Some(t) = self.counters.trace() {
            let id = *self
                .trace_id
                .get_or_init(|| t.file(self.kind, &self.path, false));
            t.op(self.kind, id, op, offset, len, took);
        }
    }

    /// Positioned write of the whole buffer; counted.
    pub fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.counters
            .check_write(self.kind, &self.path, buf.len() as u64)?;
        let start = Instant::now();
        let result = self
            .file
            .write_all_at(buf, offset)
            .inspect_err(|e| self.counters.note_error(self.kind, "write", &self.path, e));
        let took = start.elapsed();
        self.counters.record_write(buf.len() as u64, took);
        self.trace(TraceOp::Write, offset, buf.len() as u64, took);
        if let Some((model, id)) = self.cached() {
            model.write(id, offset, buf.len() as u64);
        }
        result
    }

    /// fsync the file; counted.
    pub fn sync_all(&self) -> io::Result<()> {
        self.sync_with(File::sync_all)
    }

    /// fdatasync the file; counted as an fsync.
    pub fn sync_data(&self) -> io::Result<()> {
        self.sync_with(File::sync_data)
    }

    /// Start writing back the file's dirty pages in `len` bytes from
    /// `offset` (0: to the end), waiting for them when `wait`
    /// (`sync_file_range` on Linux): a replayed `writeback`. Not counted
    /// as a sync (it flushes no device cache and promises nothing) nor as
    /// a write (its bytes were counted when written).
    pub fn start_writeback(&self, offset: u64, len: u64, wait: bool) -> io::Result<()> {
        crate::os::start_writeback(&self.file, offset, len, wait).inspect_err(|e| {
            self.counters
                .note_error(self.kind, "writeback", &self.path, e)
        })
    }

    /// A sync of the file by `sync` (fsync or fdatasync): checked against
    /// an injected fault, counted, traced, and the modelled cache told.
    fn sync_with(&self, sync: fn(&File) -> io::Result<()>) -> io::Result<()> {
        self.counters.check_sync(self.kind, &self.path)?;
        let start = Instant::now();
        let result = sync(&self.file)
            .inspect_err(|e| self.counters.note_error(self.kind, "sync", &self.path, e));
        let took = start.elapsed();
        self.counters.record_sync(took);
        self.trace(TraceOp::Sync, 0, 0, took);
        if result.is_ok()
            && let Some((model, id)) = self.cached()
        {
            model.synced(id);
        }
        result
    }

    /// Set the file's length (truncate or extend); counted as a write of
    /// no bytes, traced as a truncate.
    pub fn set_len(&self, len: u64) -> io::Result<()> {
        self.counters.check_write(self.kind, &self.path, 0)?;
        let start = Instant::now();
        let result = self.file.set_len(len).inspect_err(|e| {
            self.counters
                .note_error(self.kind, "truncate", &self.path, e)
        });
        let took = start.elapsed();
        self.counters.record_write(0, took);
        self.trace(TraceOp::Truncate, 0, len, took);
        if let Some((model, id)) = self.cached() {
            model.truncated(id, len);
        }
        result
    }

    /// The file's length.
    pub fn len(&self) -> io::Result<u64> {
        Ok(self.file.metadata()?.len())
    }

    /// Whether the file is empty.
    pub fn is_empty(&self) -> io::Result<bool> {
        Ok(self.len()? == 0)
    }

    /// The channel this file belongs to.
    pub fn channel(&self) -> ChannelKind {
        self.kind
    }
}

impl Write for ChannelFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.counters
            .check_write(self.kind, &self.path, buf.len() as u64)?;
        let start = Instant::now();
        let result = self
            .file
            .write_at(buf, self.position)
            .inspect_err(|e| self.counters.note_error(self.kind, "write", &self.path, e));
        let written = *result.as_ref().unwrap_or(&0);
        let took = start.elapsed();
        self.counters.record_write(written as u64, took);
        self.trace(TraceOp::Write, self.position, written as u64, took);
        if let Some((model, id)) = self.cached() {
            model.write(id, self.position, written as u64);
        }
        self.position += written as u64;
        result
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl io::Read for ChannelFile {
    /// Reads from the file's position on (as writes go): counted.
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.read_at(buf, self.position)?;
        self.position += n as u64;
        Ok(n)
    }
}

impl Drop for ChannelFile {
    fn drop(&mut self) {
        if let (Some(&id), Some(t)) = (self.trace_id.get(), self.counters.trace()) {
            t.op(self.kind, id, TraceOp::Close, 0, 0, Duration::ZERO);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_reads_and_syncs_are_counted() {
        let dir = tempfile::tempdir().unwrap();
        let ch = Channel::new(ChannelKind::Case, dir.path(), Vec::new());
        let before = ch.snapshot();
        let mut f = ch.create("a/b.bin").unwrap();
        f.write_all(&[7u8; 10_000]).unwrap();
        f.sync_all().unwrap();
        let mut buf = vec![0u8; 4096];
        assert_eq!(f.read_at(&mut buf, 8192).unwrap(), 10_000 - 8192);
        let d = ch.snapshot().since(&before);
        assert_eq!(d.bytes_written, 10_000);
        assert_eq!(d.bytes_read, 10_000 - 8192);
        assert_eq!(d.fsyncs, 1);
        assert!(d.write_ops >= 1 && d.read_ops >= 1);
        assert_eq!(
            std::fs::metadata(dir.path().join("a/b.bin")).unwrap().len(),
            10_000
        );
    }

    /// Engine modules allowed to open, create or remove files with
    /// `std::fs` themselves, and why. Everything else goes through a
    /// [`Channel`].
    const OWN_FILE_ACCESS: &[(&str, &str)] = &[
        ("channel/mod.rs", "the door itself"),
        (
            "fault.rs",
            "an injected `gone` fault removes a channel's directory, as an unmount would",
        ),
        ("noise.rs", "unit-test support, compiled only for tests"),
        (
            "cache/mod.rs",
            "page-cache control: opens to fadvise, drop_caches",
        ),
        (
            "cache/model.rs",
            "the modelled page cache: opens a file it holds pages of to drop them",
        ),
        (
            "cache/residency.rs",
            "mincore over a database server's files, which the server reads itself",
        ),
        (
            "cache/watch.rs",
            "lists a database server's directory to follow its files in the model",
        ),
        (
            "probe.rs",
            "device probes outside any run, with O_DIRECT scratch files",
        ),
        ("system.rs", "/proc and /sys"),
        (
            "preflight.rs",
            "checks before any run that files named on the command line can be read",
        ),
        ("metrics.rs", "/proc"),
        ("sampler.rs", "/proc"),
        (
            "os/unix.rs",
            "the system calls behind the door (a directory's fsync, syncfs, O_DIRECT opens), called by the channels and the probes",
        ),
        (
            "os/windows.rs",
            "the Win32 calls behind the door (unbuffered opens, volume flushes), called by the channels and the probes",
        ),
        (
            "os/mod.rs",
            "reopening a file to drop its cached pages or tell its identity, for the cache model",
        ),
        ("layout.rs", "the layout file, a user input"),
        (
            "stages/carve/conf.rs",
            "a scalpel/foremost signature file, a user input",
        ),
        ("hashset/formats.rs", "hash-set source files, user inputs"),
        (
            "casedb/postgres/cluster.rs",
            "the server's data directory and binaries: the server's own I/O, charged by accounting.rs",
        ),
        (
            "casedb/postgres/accounting.rs",
            "/proc and the server's log",
        ),
    ];

    #[test]
    fn no_engine_module_touches_files_behind_the_channels_back() {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let files = crate::noise::rust_sources(&src);
        let pattern = regex::Regex::new(
            r"File::open|File::create|OpenOptions|fs::write\(|fs::read\(|fs::read_to_string|fs::remove_file|fs::remove_dir|fs::rename|fs::create_dir|fs::read_dir|fs::copy|fs::hard_link",
        )
        .unwrap();
        let mut bad = Vec::new();
        for f in &files {
            let rel = f.strip_prefix(&src).unwrap().to_string_lossy().into_owned();
            if OWN_FILE_ACCESS.iter().any(|(m, _)| *m == rel) {
                continue;
            }
            let code = crate::noise::product_code(f);
            for (n, line) in code.lines().enumerate() {
                if !line.trim_start().starts_with("//") && pattern.is_match(line) {
                    bad.push(format!("{rel}:{}: {}", n + 1, line.trim()));
                }
            }
        }
        assert!(
            bad.is_empty(),
            "file access outside the channels:\n{}",
            bad.join("\n")
        );
    }

    #[test]
    fn renames_removes_and_directory_syncs_are_counted_by_kind() {
        let dir = tempfile::tempdir().unwrap();
        let ch = Channel::new(ChannelKind::Case, dir.path(), Vec::new());
        let mut f = ch.create("d/a").unwrap();
        f.write_all(b"x").unwrap();
        drop(f);
        ch.rename("d/a", "d/b").unwrap();
        ch.sync_dir("d").unwrap();
        assert!(ch.exists("d/b") && !ch.exists("d/a"));
        assert_eq!(ch.list("d").unwrap(), ["b"]);
        assert_eq!(ch.tree_bytes(""), 1);
        ch.remove_file("d/b").unwrap();
        ch.remove_all("d").unwrap();
        ch.remove_all("never-there").unwrap();
        let s = ch.snapshot();
        assert_eq!((s.creates, s.renames, s.removes, s.dir_syncs), (2, 1, 2, 1));
        assert_eq!(s.fsyncs, 1, "a directory sync is an fsync");
        assert!(s.stats >= 4);
        assert!(ch.rename("d/x", "../y").is_err());
        assert!(ch.remove_all("..").is_err());
    }

    #[test]
    fn paths_cannot_escape_the_channel() {
        let dir = tempfile::tempdir().unwrap();
        let ch = Channel::new(ChannelKind::Temp, dir.path(), Vec::new());
        assert!(ch.create("../x").is_err());
        assert!(ch.create("/etc/passwd").is_err());
        assert!(ch.create("a/../../x").is_err());
        assert!(ch.create("").is_err());
    }

    #[test]
    fn evidence_files_are_never_opened_for_writing() {
        let dir = tempfile::tempdir().unwrap();
        let evidence = dir.path().join("image.dd");
        std::fs::write(&evidence, b"evidence").unwrap();
        let canonical = std::fs::canonicalize(&evidence).unwrap();
        let ch = Channel::new(ChannelKind::Case, dir.path(), vec![canonical]);
        assert!(matches!(
            ch.create("image.dd"),
            Err(ChannelError::WouldWriteEvidence(_))
        ));
        assert_eq!(std::fs::read(&evidence).unwrap(), b"evidence");
    }
}
