//! Latency of channel operations as a log-linear histogram: eight buckets
//! per power of two of nanoseconds (each at most 12.5% wide), so
//! percentiles of any interval come from subtracting two snapshots, in
//! fixed memory, with one atomic add per operation.
//!
//! Only operations caseload times itself are in it: its own calls, the
//! SQLite VFS's. A database server's I/O is charged as totals (its
//! latencies are the server's), so a channel's latency `ops` can be fewer
//! than its operation count.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Sub-buckets per power of two.
const SUB: usize = 8;
const SUB_BITS: u32 = 3;
/// Buckets: values below 8 ns one each, then eight per power of two up to
/// 2^44 ns (about 4.9 hours), the last bucket holding anything longer.
pub const LATENCY_BUCKETS: usize = (44 - SUB_BITS as usize + 1) * SUB + SUB;

/// The bucket of a latency of `ns` nanoseconds.
fn bucket(ns: u64) -> usize {
    if ns < SUB as u64 {
        return ns as usize;
    }
    let exp = 63 - ns.leading_zeros(); // >= 3
    let mantissa = ((ns >> (exp - SUB_BITS)) & (SUB as u64 - 1)) as usize;
    ((exp - SUB_BITS + 1) as usize * SUB + mantissa).min(LATENCY_BUCKETS - 1)
}

/// The lowest latency (ns) bucket `b` holds.
fn lower_bound(b: usize) -> u64 {
    if b < SUB {
        return b as u64;
    }
    let exp = (b / SUB) as u32 + SUB_BITS - 1;
    let mantissa = (b % SUB) as u64;
    (1u64 << exp) + (mantissa << (exp - SUB_BITS))
}

/// The highest latency (ns) bucket `b` holds.
fn upper_bound(b: usize) -> u64 {
    if b + 1 >= LATENCY_BUCKETS {
        u64::MAX
    } else {
        lower_bound(b + 1) - 1
    }
}

/// Live latency counts of one kind of operation on one channel.
#[derive(Debug)]
pub(crate) struct LatencyCounters([AtomicU64; LATENCY_BUCKETS]);

impl Default for LatencyCounters {
    fn default() -> Self {
        LatencyCounters(std::array::from_fn(|_| AtomicU64::new(0)))
    }
}

impl LatencyCounters {
    /// Count one operation that took `took`.
    pub(crate) fn record(&self, took: Duration) {
        let ns = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        self.0[bucket(ns)].fetch_add(1, Ordering::Relaxed);
    }

    /// The counts now.
    pub(crate) fn snapshot(&self) -> LatencyHistogram {
        LatencyHistogram(std::array::from_fn(|i| self.0[i].load(Ordering::Relaxed)))
    }

    /// Add counts measured elsewhere.
    pub(crate) fn add(&self, h: &LatencyHistogram) {
        for (c, &n) in self.0.iter().zip(h.0.iter()) {
            if n != 0 {
                c.fetch_add(n, Ordering::Relaxed);
            }
        }
    }
}

/// Operations by latency. In JSON: the operations counted, p50/p95/p99 in
/// microseconds (the upper bound of the bucket the percentile falls in, so
/// never under the true value by more than a bucket's width, 12.5%), and
/// the non-empty buckets keyed by their lower bound in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LatencyHistogram(pub [u64; LATENCY_BUCKETS]);

impl Default for LatencyHistogram {
    fn default() -> Self {
        LatencyHistogram([0; LATENCY_BUCKETS])
    }
}

impl LatencyHistogram {
    /// Operations counted.
    pub fn ops(&self) -> u64 {
        self.0.iter().sum()
    }

    /// The latency at or under which a share `q` (0–1) of the operations
    /// completed, in nanoseconds (the upper bound of its bucket); `None`
    /// with no operations.
    pub fn percentile_ns(&self, q: f64) -> Option<u64> {
        let total = self.ops();
        if total == 0 {
            return None;
        }
        // The rank of the operation at the percentile, 1-based.
        let rank = ((q.clamp(0.0, 1.0) * total as f64).ceil() as u64).clamp(1, total);
        let mut seen = 0u64;
        for (b, &n) in self.0.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return Some(upper_bound(b));
            }
        }
        None
    }

    /// The percentile in microseconds, for reports.
    pub fn percentile_us(&self, q: f64) -> Option<f64> {
        self.percentile_ns(q).map(|ns| ns as f64 / 1000.0)
    }

    pub(crate) fn zip(&self, other: &LatencyHistogram, f: impl Fn(u64, u64) -> u64) -> Self {
        LatencyHistogram(std::array::from_fn(|i| f(self.0[i], other.0[i])))
    }
}

#[derive(Serialize, Deserialize)]
struct LatencyJson {
    ops: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    p50_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    p95_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    p99_us: Option<f64>,
    /// Keyed by the bucket's lower bound in ns, as a string (JSON keys).
    #[serde(default)]
    buckets: BTreeMap<String, u64>,
}

impl Serialize for LatencyHistogram {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        LatencyJson {
            ops: self.ops(),
            p50_us: self.percentile_us(0.50),
            p95_us: self.percentile_us(0.95),
            p99_us: self.percentile_us(0.99),
            buckets: self
                .0
                .iter()
                .enumerate()
                .filter(|(_, n)| **n != 0)
                .map(|(b, &n)| (lower_bound(b).to_string(), n))
                .collect(),
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for LatencyHistogram {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let json = LatencyJson::deserialize(d)?;
        let mut out = [0u64; LATENCY_BUCKETS];
        for (lower, n) in json.buckets {
            let lower: u64 = lower.parse().map_err(serde::de::Error::custom)?;
            out[bucket(lower)] += n;
        }
        Ok(LatencyHistogram(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_cover_every_value_in_order_and_are_narrow() {
        let mut last = 0;
        for b in 0..LATENCY_BUCKETS - 1 {
            assert_eq!(bucket(lower_bound(b)), b);
            assert_eq!(bucket(upper_bound(b)), b);
            assert_eq!(upper_bound(b) + 1, lower_bound(b + 1));
            assert!(b == 0 || lower_bound(b) > last);
            last = lower_bound(b);
            if b >= SUB {
                let width = upper_bound(b) - lower_bound(b) + 1;
                assert!(width * 8 <= lower_bound(b), "bucket {b} too wide");
            }
        }
        assert_eq!(bucket(u64::MAX), LATENCY_BUCKETS - 1);
        assert_eq!(bucket(0), 0);
    }

    #[test]
    fn percentiles_fall_in_the_right_bucket_and_survive_json() {
        let c = LatencyCounters::default();
        // 90 fast operations (10 µs), 9 slow (1 ms), 1 very slow (100 ms).
        for _ in 0..90 {
            c.record(Duration::from_micros(10));
        }
        for _ in 0..9 {
            c.record(Duration::from_millis(1));
        }
        c.record(Duration::from_millis(100));
        let h = c.snapshot();
        assert_eq!(h.ops(), 100);
        let p50 = h.percentile_ns(0.5).unwrap();
        assert!((10_000..=11_250).contains(&p50), "{p50}");
        let p95 = h.percentile_ns(0.95).unwrap();
        assert!((1_000_000..=1_125_000).contains(&p95), "{p95}");
        let p99 = h.percentile_ns(0.99).unwrap();
        assert!((1_000_000..=1_125_000).contains(&p99), "{p99}");
        assert!(h.percentile_ns(1.0).unwrap() >= 100_000_000);
        let json = serde_json::to_value(h).unwrap();
        assert_eq!(json["ops"], 100);
        assert!(json["p50_us"].as_f64().unwrap() >= 10.0);
        let back: LatencyHistogram = serde_json::from_value(json).unwrap();
        assert_eq!(back, h);
        assert_eq!(LatencyHistogram::default().percentile_ns(0.5), None);
    }
}
