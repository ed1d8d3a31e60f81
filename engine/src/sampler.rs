//! Whole-machine CPU and load sampled while a stage runs (the Munin view):
//! user, system and iowait shares of all CPUs and the 1-minute load average,
//! read from `/proc/stat` and `/proc/loadavg` on a background thread. It
//! shows what a stage's own CPU figures cannot: time the CPUs sat waiting
//! for I/O, and other load on a shared machine.
//!
//! The same thread samples the process's own resident memory split by kind
//! (`RssAnon`, `RssFile`, `RssShmem` in `/proc/self/status`). `VmHWM` alone
//! cannot tell heap that grows with the image from mapped index or hash-set
//! files that the kernel can drop under pressure; the split can.

use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// One sample: shares of all CPUs' time since the previous sample.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
pub struct CpuSample {
    /// Seconds since the stage started.
    pub t: f64,
    /// User (and nice) share, percent of all CPUs.
    pub user_pct: f64,
    /// System (and irq) share, percent.
    pub system_pct: f64,
    /// I/O wait share, percent.
    pub iowait_pct: f64,
    /// 1-minute load average.
    pub load1: f64,
    /// caseload's own anonymous resident memory at the sample, bytes: where
    /// in a stage its memory grows.
    #[serde(default)]
    pub anon_bytes: u64,
}

/// What the sampler saw over a stage.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct CpuProfile {
    /// Sampling interval, seconds.
    pub interval_seconds: f64,
    /// Average user share over the stage.
    pub user_pct: f64,
    /// Average system share.
    pub system_pct: f64,
    /// Average iowait share.
    pub iowait_pct: f64,
    /// Highest 1-minute load average seen.
    pub load1_max: f64,
    /// The samples (at most [`MAX_SAMPLES`], evenly thinned).
    pub samples: Vec<CpuSample>,
}

/// Highest resident memory of each kind seen by the sampler over a stage.
/// Sampled, so a spike shorter than one interval can be missed; `VmHWM`
/// (`peak_rss_bytes`) is the exact total.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct MemoryPeaks {
    /// Anonymous memory (heap, stacks): what the process itself allocated.
    pub anon_bytes: u64,
    /// File-backed pages mapped by the process (memory-mapped index
    /// segments, hash sets, the executable): reclaimable page cache.
    pub file_bytes: u64,
    /// Shared memory.
    pub shmem_bytes: u64,
}

impl MemoryPeaks {
    /// The process's resident memory by kind now.
    pub fn now() -> Option<MemoryPeaks> {
        let status = std::fs::read_to_string("/proc/self/status").ok()?;
        let kb = |key: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(key))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
                .map(|k| k * 1024)
        };
        Some(MemoryPeaks {
            anon_bytes: kb("RssAnon:")?,
            file_bytes: kb("RssFile:")?,
            shmem_bytes: kb("RssShmem:").unwrap_or(0),
        })
    }

    fn max(self, other: MemoryPeaks) -> MemoryPeaks {
        MemoryPeaks {
            anon_bytes: self.anon_bytes.max(other.anon_bytes),
            file_bytes: self.file_bytes.max(other.file_bytes),
            shmem_bytes: self.shmem_bytes.max(other.shmem_bytes),
        }
    }
}

/// Samples kept per stage; longer stages keep every other one, and so on.
pub const MAX_SAMPLES: usize = 512;

#[derive(Debug, Clone, Copy, Default)]
struct Ticks {
    user: u64,
    system: u64,
    iowait: u64,
    total: u64,
}

fn read_ticks() -> Option<Ticks> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal ...
    let get = |i: usize| v.get(i).copied().unwrap_or(0);
    Some(Ticks {
        user: get(0) + get(1),
        system: get(2) + get(5) + get(6),
        iowait: get(4),
        total: v.iter().take(8).sum(),
    })
}

fn read_load1() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|v| v.parse().ok()))
        .unwrap_or(0.0)
}

fn share(part: u64, total: u64) -> f64 {
    if total == 0 {
        0.0
    } else {
        part as f64 * 100.0 / total as f64
    }
}

/// A running sampler; [`Sampler::finish`] stops it and returns the profile.
pub struct Sampler {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<(Vec<CpuSample>, MemoryPeaks)>>,
    first: Option<Ticks>,
    interval: Duration,
}

impl Sampler {
    /// Start sampling every `interval`.
    pub fn start(interval: Duration) -> Sampler {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let first = read_ticks();
        let handle = std::thread::Builder::new()
            .name("caseload-sampler".into())
            .spawn(move || {
                let begin = Instant::now();
                let mut prev = read_ticks();
                let mut samples = Vec::new();
                let mut keep_every = 1usize;
                let mut n = 0usize;
                let mut memory = MemoryPeaks::now().unwrap_or_default();
                while !flag.load(Ordering::Relaxed) {
                    // Sleep in small steps so finish() returns promptly.
                    let until = Instant::now() + interval;
                    while Instant::now() < until && !flag.load(Ordering::Relaxed) {
                        std::thread::sleep(Duration::from_millis(10).min(interval));
                    }
                    let mem = MemoryPeaks::now();
                    if let Some(m) = mem {
                        memory = memory.max(m);
                    }
                    let now = read_ticks();
                    if let (Some(a), Some(b)) = (prev, now) {
                        let total = b.total.saturating_sub(a.total);
                        n += 1;
                        if n.is_multiple_of(keep_every) {
                            samples.push(CpuSample {
                                t: begin.elapsed().as_secs_f64(),
                                user_pct: share(b.user.saturating_sub(a.user), total),
                                system_pct: share(b.system.saturating_sub(a.system), total),
                                iowait_pct: share(b.iowait.saturating_sub(a.iowait), total),
                                load1: read_load1(),
                                anon_bytes: mem.map_or(0, |m| m.anon_bytes),
                            });
                            if samples.len() >= MAX_SAMPLES {
                                // Thin to half and sample half as often.
                                samples = samples.into_iter().step_by(2).collect();
                                keep_every *= 2;
                            }
                        }
                    }
                    prev = now;
                }
                (samples, memory)
            })
            .ok();
        Sampler {
            stop,
            handle,
            first,
            interval,
        }
    }

    /// Stop and summarise. Averages use the whole stage's tick counts, so
    /// they are exact even when the stage was shorter than one interval;
    /// memory peaks include a last reading taken now.
    pub fn finish(mut self) -> (CpuProfile, MemoryPeaks) {
        self.stop.store(true, Ordering::Relaxed);
        let (samples, memory) = self
            .handle
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default();
        let memory = MemoryPeaks::now().map_or(memory, |m| memory.max(m));
        let last = read_ticks();
        let (user_pct, system_pct, iowait_pct) = match (self.first, last) {
            (Some(a), Some(b)) => {
                let total = b.total.saturating_sub(a.total);
                (
                    share(b.user.saturating_sub(a.user), total),
                    share(b.system.saturating_sub(a.system), total),
                    share(b.iowait.saturating_sub(a.iowait), total),
                )
            }
            _ => (0.0, 0.0, 0.0),
        };
        let load1_max = samples.iter().map(|s| s.load1).fold(read_load1(), f64::max);
        let cpu = CpuProfile {
            interval_seconds: self.interval.as_secs_f64(),
            user_pct,
            system_pct,
            iowait_pct,
            load1_max,
            samples,
        };
        (cpu, memory)
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_busy_stage_shows_user_time() {
        let s = Sampler::start(Duration::from_millis(50));
        let t = Instant::now();
        let mut x = 1u64;
        while t.elapsed() < Duration::from_millis(300) {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        }
        assert!(x != 0);
        let (p, _) = s.finish();
        assert!(p.user_pct > 0.0, "{p:?}");
        assert!(!p.samples.is_empty());
        assert!(p.user_pct + p.system_pct + p.iowait_pct <= 100.0 + 1e-9);
    }

    #[test]
    fn heap_growth_shows_as_anonymous_memory() {
        let s = Sampler::start(Duration::from_millis(20));
        let before = MemoryPeaks::now().expect("procfs").anon_bytes;
        // 64 MiB touched page by page, held over several intervals.
        let mut block = vec![0u8; 64 << 20];
        for i in (0..block.len()).step_by(4096) {
            block[i] = 1;
        }
        std::thread::sleep(Duration::from_millis(100));
        let (_, m) = s.finish();
        assert!(block.iter().step_by(4096).all(|&b| b == 1));
        assert!(
            m.anon_bytes >= before + (60 << 20),
            "anon peak {} before {}",
            m.anon_bytes,
            before
        );
        assert!(m.file_bytes > 0, "the executable is file-backed: {m:?}");
    }
}
