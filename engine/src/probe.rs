//! Device probes: what each channel's storage can do, so stage figures can
//! be read against it. Per channel: sequential write and read MB/s, 4 KiB
//! random-read IOPS, fsync latency, and the mean commit of a commit chain.
//!
//! Writable channels get a scratch file (removed afterwards). The evidence
//! channel is never written: it is probed only by reading given evidence
//! files, with the same read tests. Reads bypass the page cache with
//! `O_DIRECT` (Linux) or `FILE_FLAG_NO_BUFFERING` (Windows) where the file
//! system allows it (tmpfs does not; the result then says `direct: false`
//! and the read figures are cache-speed).

use crate::channel::ChannelKind;
use crate::os::FileAt;
use serde::{Deserialize, Serialize};
use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How much to probe.
#[derive(Debug, Clone, Copy)]
pub struct ProbeOptions {
    /// Size of the scratch file (sequential tests).
    pub file_size: u64,
    /// How long the random-read test runs.
    pub random_duration: Duration,
    /// fsync round trips measured.
    pub fsyncs: usize,
}

impl Default for ProbeOptions {
    fn default() -> Self {
        ProbeOptions {
            file_size: 256 << 20,
            random_duration: Duration::from_secs(3),
            fsyncs: 100,
        }
    }
}

/// One channel's probe.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ChannelProbe {
    /// Channel.
    pub channel: Option<ChannelKind>,
    /// Directory (or evidence file) probed.
    pub path: PathBuf,
    /// Sequential write MB/s (1 MiB writes, fsync included).
    pub seq_write_mb_per_s: Option<f64>,
    /// Sequential read MB/s (1 MiB reads).
    pub seq_read_mb_per_s: Option<f64>,
    /// Sequential read MB/s in 128 KiB reads (the kernel's default
    /// read-ahead size: a device that charges per request shows it here).
    #[serde(default)]
    pub seq_read_128k_mb_per_s: Option<f64>,
    /// 4 KiB random reads per second (queue depth 1).
    pub random_read_iops: Option<f64>,
    /// 4 KiB random reads per second from four threads at once: a device
    /// that serves one request at a time (a rotating disk) gains little
    /// over queue depth 1, one that serves several (flash) gains much.
    /// Absent in probes of earlier versions.
    #[serde(default)]
    pub random_read_iops_qd4: Option<f64>,
    /// Median fsync latency of a 4 KiB write, milliseconds.
    pub fsync_median_ms: Option<f64>,
    /// 99th-percentile fsync latency, milliseconds.
    pub fsync_p99_ms: Option<f64>,
    /// Mean latency of a commit in a database's commit chain: an 8 KiB
    /// write appended after the last, then fdatasync, the next issued as
    /// soon as it returns; milliseconds. A chain pays every commit in
    /// turn, so its cost is the mean, not the median (a device with a
    /// write cache answers most syncs at once and a few after a long
    /// destage). Absent in probes of earlier versions.
    #[serde(default)]
    pub commit_mean_ms: Option<f64>,
    /// Whether reads bypassed the page cache (`O_DIRECT`).
    pub direct: bool,
    /// Anything that could not be measured, and why.
    pub notes: Vec<String>,
    /// Other channels on the same directory, measured once with this one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shared_with: Vec<ChannelKind>,
}

const BLOCK: usize = 1 << 20;
const SMALL: usize = 4096;

/// A buffer aligned for `O_DIRECT`.
struct Aligned {
    buf: Vec<u8>,
    offset: usize,
    len: usize,
}

impl Aligned {
    fn new(len: usize) -> Self {
        let buf = vec![0u8; len + 4096];
        let offset = buf.as_ptr().align_offset(4096);
        Aligned { buf, offset, len }
    }
    fn as_mut(&mut self) -> &mut [u8] {
        &mut self.buf[self.offset..self.offset + self.len]
    }
    fn as_ref(&self) -> &[u8] {
        &self.buf[self.offset..self.offset + self.len]
    }
}

/// `path` opened for reads past the cache where the file system allows,
/// else through it with its pages dropped; whether reads bypass the cache.
fn open_direct(path: &Path) -> io::Result<(File, bool)> {
    match crate::os::open_unbuffered(path) {
        Ok(f) => Ok((f, true)),
        Err(_) => {
            let f = File::open(path)?;
            crate::os::drop_cached(&f);
            Ok((f, false))
        }
    }
}

/// A small deterministic generator for random offsets.
fn xorshift(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

/// MB/s of reading `file` from the start up to `limit` in reads of
/// `buf`'s size.
fn sequential_read(file: &File, buf: &mut [u8], limit: u64) -> io::Result<Option<f64>> {
    let start = Instant::now();
    let mut pos = 0u64;
    while pos + buf.len() as u64 <= limit {
        let n = file.read_at(buf, pos)?;
        if n == 0 {
            break;
        }
        pos += n as u64;
    }
    let secs = start.elapsed().as_secs_f64();
    Ok((pos > 0 && secs > 0.0).then(|| pos as f64 / 1e6 / secs))
}

fn read_tests(
    path: &Path,
    size: u64,
    options: &ProbeOptions,
    out: &mut ChannelProbe,
) -> io::Result<()> {
    let (file, direct) = open_direct(path)?;
    out.direct = direct;
    let mut buf = Aligned::new(BLOCK);
    let limit = size.min(options.file_size.max(BLOCK as u64));
    out.seq_read_mb_per_s = sequential_read(&file, buf.as_mut(), limit)?;
    if !direct {
        crate::os::drop_cached(&file);
    }
    out.seq_read_128k_mb_per_s = sequential_read(&file, &mut buf.as_mut()[..128 << 10], limit)?;
    if !direct {
        crate::os::drop_cached(&file);
    }
    let blocks = size / SMALL as u64;
    if blocks == 0 {
        out.notes.push("file too small for random reads".into());
        return Ok(());
    }
    out.random_read_iops = Some(random_reads(&file, blocks, options, 1)?);
    out.random_read_iops_qd4 = Some(random_reads(&file, blocks, options, 4)?);
    Ok(())
}

/// 4 KiB random reads per second over `blocks` from `threads` threads at
/// once (one: queue depth 1), for the probe's random-read time.
fn random_reads(file: &File, blocks: u64, options: &ProbeOptions, threads: u64) -> io::Result<f64> {
    let start = Instant::now();
    let counts = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                scope.spawn(move || -> io::Result<u64> {
                    let mut small = Aligned::new(SMALL);
                    let mut state = 0x2545_F491_4F6C_DD1Du64 ^ t.wrapping_mul(0x9E37_79B9);
                    let mut reads = 0u64;
                    while start.elapsed() < options.random_duration {
                        let block = xorshift(&mut state) % blocks;
                        file.read_at(small.as_mut(), block * SMALL as u64)?;
                        reads += 1;
                    }
                    Ok(reads)
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| {
                w.join()
                    .unwrap_or_else(|_| Err(io::Error::other("probe thread failed")))
            })
            .collect::<io::Result<Vec<u64>>>()
    })?;
    Ok(counts.iter().sum::<u64>() as f64 / start.elapsed().as_secs_f64())
}

/// A log block: what a database commit writes (PostgreSQL's WAL page).
const COMMIT_BLOCK: usize = 8192;

/// Mean milliseconds of a commit chain in `file` (already written and
/// synced, so each commit overwrites allocated blocks and its fdatasync
/// has no metadata to write, as with a database's preallocated log).
fn commit_chain(file: &File, data: &[u8], options: &ProbeOptions) -> io::Result<Option<f64>> {
    let span = (options.file_size / COMMIT_BLOCK as u64).max(1);
    let mut total = 0.0;
    for i in 0..options.fsyncs as u64 {
        let t = Instant::now();
        file.write_all_at(&data[..COMMIT_BLOCK], (i % span) * COMMIT_BLOCK as u64)?;
        file.sync_data()?;
        total += t.elapsed().as_secs_f64() * 1e3;
    }
    Ok((options.fsyncs > 0).then(|| total / options.fsyncs as f64))
}

/// Probe a writable channel directory with a scratch file.
pub fn probe_dir(kind: ChannelKind, dir: &Path, options: &ProbeOptions) -> ChannelProbe {
    let mut out = ChannelProbe {
        channel: Some(kind),
        path: dir.to_path_buf(),
        ..ChannelProbe::default()
    };
    let scratch = dir.join(format!(".caseload-probe-{}", std::process::id()));
    let result = (|| -> io::Result<()> {
        let file = OpenOptions::new()
            .write(true)
            .read(true)
            .create_new(true)
            .open(&scratch)?;
        let mut block = Aligned::new(BLOCK);
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        for chunk in block.as_mut().chunks_mut(8) {
            let v = xorshift(&mut state).to_le_bytes();
            chunk.copy_from_slice(&v[..chunk.len()]);
        }
        let start = Instant::now();
        let mut pos = 0u64;
        while pos < options.file_size {
            file.write_all_at(block.as_ref(), pos)?;
            pos += BLOCK as u64;
        }
        file.sync_all()?;
        out.seq_write_mb_per_s = Some(pos as f64 / 1e6 / start.elapsed().as_secs_f64());
        let mut latencies = Vec::with_capacity(options.fsyncs);
        let blocks = (options.file_size / SMALL as u64).max(1);
        for _ in 0..options.fsyncs {
            let offset = (xorshift(&mut state) % blocks) * SMALL as u64;
            let t = Instant::now();
            file.write_all_at(&block.as_ref()[..SMALL], offset)?;
            file.sync_data()?;
            latencies.push(t.elapsed().as_secs_f64() * 1e3);
        }
        latencies.sort_by(f64::total_cmp);
        if !latencies.is_empty() {
            out.fsync_median_ms = Some(latencies[latencies.len() / 2]);
            out.fsync_p99_ms =
                Some(latencies[(latencies.len() * 99 / 100).min(latencies.len() - 1)]);
        }
        out.commit_mean_ms = commit_chain(&file, block.as_ref(), options)?;
        crate::os::drop_cached(&file);
        drop(file);
        read_tests(&scratch, options.file_size, options, &mut out)
    })();
    if let Err(e) = result {
        out.notes.push(format!("probe failed: {e}"));
    }
    let _ = std::fs::remove_file(&scratch);
    out
}

/// Probe the evidence channel by reading an evidence file (never written).
pub fn probe_evidence(file: &Path, options: &ProbeOptions) -> ChannelProbe {
    let mut out = ChannelProbe {
        channel: Some(ChannelKind::Evidence),
        path: file.to_path_buf(),
        ..ChannelProbe::default()
    };
    out.notes
        .push("evidence is read only: write and fsync tests are not run".into());
    let size = std::fs::metadata(file).map_or(0, |m| m.len());
    if let Err(e) = read_tests(file, size, options, &mut out) {
        out.notes.push(format!("probe failed: {e}"));
    }
    out
}

/// Probe a layout's writable channels (and the evidence file, when given),
/// each distinct directory once: channels sharing a directory (the
/// single-disk preset) are one measurement, listed in its `shared_with`.
pub fn probe_layout(
    layout: &crate::layout::Layout,
    evidence: Option<&Path>,
    options: &ProbeOptions,
) -> Vec<ChannelProbe> {
    let mut out = Vec::new();
    if let Some(file) = evidence {
        out.push(probe_evidence(file, options));
    }
    let mut seen: Vec<(PathBuf, usize)> = Vec::new();
    for kind in [ChannelKind::Database, ChannelKind::Case, ChannelKind::Temp] {
        let Ok(dir) = layout.dir(kind) else { continue };
        let key = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
        if let Some((_, at)) = seen.iter().find(|(d, _)| *d == key) {
            out[*at].shared_with.push(kind);
            continue;
        }
        seen.push((key, out.len()));
        out.push(probe_dir(kind, dir, options));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_probe_measures_everything_and_cleans_up() {
        let dir = tempfile::tempdir().unwrap();
        let options = ProbeOptions {
            file_size: 8 << 20,
            random_duration: Duration::from_millis(100),
            fsyncs: 5,
        };
        let p = probe_dir(ChannelKind::Temp, dir.path(), &options);
        assert!(p.notes.is_empty(), "{:?}", p.notes);
        assert!(p.seq_write_mb_per_s.unwrap() > 0.0);
        assert!(p.seq_read_mb_per_s.unwrap() > 0.0);
        assert!(p.random_read_iops.unwrap() > 0.0);
        assert!(p.random_read_iops_qd4.unwrap() > 0.0);
        assert!(p.fsync_median_ms.unwrap() >= 0.0);
        assert!(p.commit_mean_ms.unwrap() > 0.0);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        let ev = dir.path().join("ev.dd");
        std::fs::write(&ev, vec![7u8; 4 << 20]).unwrap();
        let before = std::fs::metadata(&ev).unwrap().modified().unwrap();
        let e = probe_evidence(&ev, &options);
        assert!(e.seq_read_mb_per_s.is_some() && e.random_read_iops.is_some());
        assert!(e.seq_write_mb_per_s.is_none());
        assert_eq!(std::fs::read(&ev).unwrap(), vec![7u8; 4 << 20]);
        assert_eq!(std::fs::metadata(&ev).unwrap().modified().unwrap(), before);
    }
}
