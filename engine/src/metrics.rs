//! Process figures around a stage: CPU time (user and system, all threads)
//! and peak resident memory.
//!
//! Peak memory per stage uses Linux's resettable high-water mark: writing `5`
//! to `/proc/self/clear_refs` resets `VmHWM`, so the value read at the end of
//! a stage is that stage's peak. Where the reset is refused, the figure is
//! the process peak so far and is labelled so.

use serde::{Deserialize, Serialize};
use std::time::Duration;

/// CPU time consumed by the whole process so far.
#[derive(Debug, Clone, Copy, Default)]
pub struct CpuTimes {
    /// User time.
    pub user: Duration,
    /// System time.
    pub system: Duration,
}

impl CpuTimes {
    /// Now.
    pub fn now() -> CpuTimes {
        let (user, system) = crate::os::process_cpu_times();
        CpuTimes { user, system }
    }

    /// Time consumed since `earlier`.
    pub fn since(&self, earlier: &CpuTimes) -> CpuTimes {
        CpuTimes {
            user: self.user.saturating_sub(earlier.user),
            system: self.system.saturating_sub(earlier.system),
        }
    }
}

/// Whether a peak-memory figure covers one stage or the process so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PeakScope {
    /// The high-water mark was reset at the stage's start.
    Stage,
    /// Reset refused: the process's peak so far.
    Process,
}

/// Hand memory freed by earlier work back to the kernel. glibc keeps freed
/// heap in its per-thread arenas, so without this a stage would start (and
/// its peak be measured) with the previous stage's high-water mark still
/// resident: the scale run showed carve and KFF "peaking" at the index
/// stage's 400 MB while using a fraction of it.
pub fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks the allocator's own free lists.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Set the allocator up so that memory use stays flat with image size.
/// Call once, first thing in `main`, before any thread starts.
///
/// glibc's defaults let resident memory grow with the amount of work, not
/// with what is live: up to eight arenas per core each keep their freed
/// blocks, and the mmap threshold rises with every large block freed (up
/// to 32 MiB), so the index writer's and the carver's megabyte buffers end
/// up carved out of arenas that never shrink. Measured on the ftk4 stages
/// of a 4 GiB corpus (heap peak 195 MB under heaptrack): index 261 MB
/// anonymous, carve 219 MB with the defaults; 143 and 74 MB with two
/// arenas, a fixed 256 KiB mmap threshold and a 1 MiB trim threshold
/// (benches/scripts/scale.sh). Two arenas alone are not enough (16 GiB:
/// index 313, carve 172 MB); the fixed threshold is what keeps large
/// buffers from settling in the arenas. Its cost is a map, page faults and
/// zeroing per large allocation, so hot paths recycle their buffers (the
/// carve scan's blocks: 7.3 s before, 5.4 s after, as fast as glibc's
/// defaults).
pub fn tune_allocator() {
    // glibc only: Windows' heap has no such knobs.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // The escape hatch for measuring what the tuning costs or saves:
        // glibc's defaults (and GLIBC_TUNABLES) apply untouched.
        if std::env::var_os("CASELOAD_MALLOC_DEFAULTS").is_some() {
            return;
        }
        // SAFETY: mallopt only sets the allocator's parameters; called
        // before other threads exist.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, 2);
            libc::mallopt(libc::M_MMAP_THRESHOLD, 256 << 10);
            libc::mallopt(libc::M_TRIM_THRESHOLD, 1 << 20);
        }
    }
}

/// Reset the resident-memory high-water mark; returns whether it worked.
pub fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", b"5").is_ok()
}

/// Peak resident memory (VmHWM; on Windows the peak working set, which
/// cannot be reset, so stage figures there are the process's peak so far).
pub fn peak_rss() -> Option<u64> {
    #[cfg(windows)]
    return crate::os::working_set().map(|(_, peak)| peak);
    #[cfg(not(windows))]
    status_kb("VmHWM:")
}

/// Current resident memory (VmRSS; on Windows the working set) in bytes.
pub fn current_rss() -> Option<u64> {
    #[cfg(windows)]
    return crate::os::working_set().map(|(now, _)| now);
    #[cfg(not(windows))]
    status_kb("VmRSS:")
}

#[cfg(not(windows))]
fn status_kb(key: &str) -> Option<u64> {
    std::fs::read_to_string("/proc/self/status")
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map(|kb| kb * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_time_advances_and_peak_rss_is_read() {
        let a = CpuTimes::now();
        let start = std::time::Instant::now();
        let mut x = 0u64;
        // Spin (not optimisable away) for 50 ms of wall time.
        while start.elapsed() < Duration::from_millis(50) {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
        let d = CpuTimes::now().since(&a);
        assert!(d.user + d.system > Duration::ZERO);
        assert!(peak_rss().unwrap() > 0);
        assert!(current_rss().unwrap() > 0);
    }
}
