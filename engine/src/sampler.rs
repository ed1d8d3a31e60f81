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
    /// Processes that serve the run but are not its workload (a lab's
    /// device server, which models the drives): their CPU time over the
    /// stage, left out of the shares above and the samples.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub excluded: Vec<ExcludedCpu>,
}

/// A process whose CPU time is kept out of a stage's machine figures.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ExcludedCpu {
    /// What it is.
    pub name: String,
    /// Its process.
    pub pid: u32,
    /// User CPU seconds over the stage.
    pub user_seconds: f64,
    /// System CPU seconds over the stage.
    pub system_seconds: f64,
}

/// A process whose CPU the machine figures leave out (see
/// [`CpuProfile::excluded`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Helper {
    /// What it is.
    pub name: String,
    /// Its process.
    pub pid: u32,
}

/// User and system clock ticks of `pid` (0 when it is gone).
fn process_ticks(pid: u32) -> (u64, u64) {
    let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return (0, 0);
    };
    // The command name is in parentheses and may hold spaces.
    let Some(rest) = text.rfind(')').map(|i| &text[i + 2..]) else {
        return (0, 0);
    };
    let f: Vec<&str> = rest.split(' ').collect();
    let get = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    // utime and stime are fields 14 and 15 of the line, 11 and 12 after
    // the name and state.
    (get(11), get(12))
}

/// The helpers' ticks summed.
fn helper_ticks(helpers: &[Helper]) -> (u64, u64) {
    helpers
        .iter()
        .map(|h| process_ticks(h.pid))
        .fold((0, 0), |(u, s), (a, b)| (u + a, s + b))
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

impl Ticks {
    /// The machine's ticks less a process's (user, system): its time is
    /// neither user nor system nor idle for the rest, so it leaves the
    /// total too.
    fn less(self, (user, system): (u64, u64)) -> Ticks {
        Ticks {
            user: self.user.saturating_sub(user),
            system: self.system.saturating_sub(system),
            iowait: self.iowait,
            total: self.total.saturating_sub(user + system),
        }
    }
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
    helpers: Vec<Helper>,
    first_helpers: Vec<(u64, u64)>,
}

impl Sampler {
    /// Start sampling every `interval`.
    pub fn start(interval: Duration) -> Sampler {
        Sampler::start_excluding(interval, Vec::new())
    }

    /// Start sampling every `interval`, leaving `helpers`' CPU out.
    pub fn start_excluding(interval: Duration, helpers: Vec<Helper>) -> Sampler {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let first = read_ticks().map(|t| t.less(helper_ticks(&helpers)));
        let first_helpers: Vec<(u64, u64)> = helpers.iter().map(|h| process_ticks(h.pid)).collect();
        let sampled = helpers.clone();
        let handle = std::thread::Builder::new()
            .name("caseload-sampler".into())
            .spawn(move || {
                let begin = Instant::now();
                let ticks = || read_ticks().map(|t| t.less(helper_ticks(&sampled)));
                let mut prev = ticks();
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
                    let now = ticks();
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
            helpers,
            first_helpers,
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
        let last = read_ticks().map(|t| t.less(helper_ticks(&self.helpers)));
        // Clock ticks are USER_HZ, 100 a second on Linux.
        let hz = 100.0;
        let excluded = self
            .helpers
            .iter()
            .zip(&self.first_helpers)
            .map(|(h, &(u0, s0))| {
                let (u1, s1) = process_ticks(h.pid);
                ExcludedCpu {
                    name: h.name.clone(),
                    pid: h.pid,
                    user_seconds: u1.saturating_sub(u0) as f64 / hz,
                    system_seconds: s1.saturating_sub(s0) as f64 / hz,
                }
            })
            .collect();
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
            excluded,
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
    fn a_helpers_cpu_is_left_out_of_the_machine() {
        // A busy child process, excluded: the machine's user share stays
        // low while the child's own seconds are counted.
        let mut child = std::process::Command::new("sh")
            .args(["-c", "while :; do :; done"])
            .spawn()
            .expect("sh");
        let s = Sampler::start_excluding(
            Duration::from_millis(50),
            vec![Helper {
                name: "busy".into(),
                pid: child.id(),
            }],
        );
        // Wait for the child's own CPU time rather than a fixed while: on a
        // loaded machine 600 ms of wall time may give it far less.
        let cpu_of = |pid: u32| -> f64 {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let after = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
            let f: Vec<f64> = after
                .split_whitespace()
                .filter_map(|x| x.parse().ok())
                .collect();
            // utime and stime are fields 14 and 15 (11 and 12 after the
            // command name and state), in clock ticks.
            let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
            (f.get(10).copied().unwrap_or(0.0) + f.get(11).copied().unwrap_or(0.0)) / ticks
        };
        let t = Instant::now();
        while cpu_of(child.id()) < 0.4 && t.elapsed() < Duration::from_secs(30) {
            std::thread::sleep(Duration::from_millis(50));
        }
        let (p, _) = s.finish();
        let _ = child.kill();
        let _ = child.wait();
        let spent = p.excluded[0].user_seconds + p.excluded[0].system_seconds;
        assert!(spent > 0.3, "{p:?}");
        // Its ticks leave the machine's user time and the total alike (the
        // rest of the machine may be busy with other tests, so the shares
        // themselves are checked on fixed ticks).
        let machine = Ticks {
            user: 300,
            system: 50,
            iowait: 10,
            total: 400,
        };
        let rest = machine.less((100, 20));
        assert_eq!((rest.user, rest.system, rest.total), (200, 30, 280));
        assert!((share(rest.user, rest.total) - 71.43).abs() < 0.01);
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
