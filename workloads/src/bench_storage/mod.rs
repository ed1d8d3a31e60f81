//! `caseload bench-storage`: the storage micro-benchmarks the seed
//! documents publish (bonnie++, PostMark, iozone), run through caseload's
//! own channel door on any directory, layout channel or lab device, so a
//! lab can set its drives beside the seeds' numbers and beside the
//! per-stage figures caseload measures on the same storage.
//!
//! Each benchmark is a module with the same shape (options with the
//! original tool's defaults where they make sense, a run over a scratch
//! directory in the channel, a result of plain figures) and knows nothing
//! of the others. Where the original measures the page cache (iozone's
//! reread, bonnie++'s and PostMark's writes that never reach the device
//! within the timing), caseload says what it does instead: writes are
//! timed up to their `fsync`, reads start after the file's pages were
//! dropped from the cache (`posix_fadvise(DONTNEED)`), except iozone's
//! reread, which is the cached read it is meant to be.
//!
//! The JSON output is a versioned contract ([`SCHEMA_VERSION`]).

pub mod bonnie;
pub mod iozone;
pub mod postmark;

use caseload_engine::channel::{Channel, ChannelError, ChannelFile};
use serde::Serialize;
use std::time::Instant;

/// Version of the JSON report; raised when a field changes meaning or goes.
pub const SCHEMA_VERSION: u32 = 1;

/// Errors of a benchmark run.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// A channel operation failed (its error names the path).
    #[error(transparent)]
    Channel(#[from] ChannelError),
    /// A read or write failed.
    #[error("{what} {path}: {source}")]
    Io {
        /// What was done.
        what: &'static str,
        /// The file.
        path: String,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// The options cannot be run.
    #[error("bench-storage: {0}")]
    Options(String),
}

fn io_err(what: &'static str, file: &ChannelFile) -> impl FnOnce(std::io::Error) -> BenchError {
    let path = file.path().display().to_string();
    move |source| BenchError::Io { what, path, source }
}

/// Which benchmarks to run, with their options.
#[derive(Debug, Clone, Default)]
pub struct BenchOptions {
    /// bonnie++-like sequential, rewrite, seek and file-creation tests.
    pub bonnie: Option<bonnie::BonnieOptions>,
    /// PostMark-like small-file transactions.
    pub postmark: Option<postmark::PostmarkOptions>,
    /// iozone-like record-size by file-size matrix.
    pub iozone: Option<iozone::IozoneOptions>,
    /// Seed of the random offsets, sizes and choices.
    pub seed: u64,
}

/// Where the benchmark ran.
#[derive(Debug, Clone, Serialize)]
pub struct Target {
    /// The directory.
    pub dir: String,
    /// The lab and its device, when run on one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lab: Option<String>,
    /// The layout channel it stands for.
    pub channel: String,
    /// The file system under the directory, as /proc/mounts names it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fs: Option<String>,
}

/// What a run measured.
#[derive(Debug, Clone, Serialize)]
pub struct BenchReport {
    /// `caseload-bench-storage`.
    pub schema: &'static str,
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// Where.
    pub target: Target,
    /// The seed.
    pub seed: u64,
    /// bonnie++-like figures.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bonnie: Option<bonnie::BonnieResult>,
    /// PostMark-like figures.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub postmark: Option<postmark::PostmarkResult>,
    /// iozone-like matrix.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub iozone: Option<iozone::IozoneResult>,
    /// What was skipped or done differently from the original tools.
    pub notes: Vec<String>,
    /// Wall time of the whole run, s.
    pub seconds: f64,
}

/// Run the benchmarks `options` asks for in a scratch directory of
/// `channel` (removed afterwards, also after an error); `progress` hears
/// each phase as it starts.
pub fn run(
    channel: &Channel,
    target: Target,
    options: &BenchOptions,
    progress: &mut dyn FnMut(&str),
) -> Result<BenchReport, BenchError> {
    if options.bonnie.is_none() && options.postmark.is_none() && options.iozone.is_none() {
        return Err(BenchError::Options("no benchmark chosen".into()));
    }
    if let Some(o) = &options.iozone {
        iozone::check(o)?;
    }
    let scratch = format!("caseload-bench-storage-{}", std::process::id());
    channel.create_dir(&scratch)?;
    let dir = channel.sub(&scratch)?;
    let start = Instant::now();
    let mut notes = Vec::new();
    let result = (|| -> Result<_, BenchError> {
        let bonnie = match &options.bonnie {
            Some(o) => Some(bonnie::run(&dir, o, options.seed, progress)?),
            None => None,
        };
        let postmark = match &options.postmark {
            Some(o) => Some(postmark::run(&dir, o, options.seed, progress)?),
            None => None,
        };
        let iozone = match &options.iozone {
            Some(o) => Some(iozone::run(&dir, o, options.seed, &mut notes, progress)?),
            None => None,
        };
        Ok((bonnie, postmark, iozone))
    })();
    let removed = channel.remove_all(&scratch);
    let (bonnie, postmark, iozone) = result?;
    removed?;
    notes.push(
        "writes are timed up to their fsync; reads start with the file's pages dropped from the page cache (iozone's reread excepted)"
            .into(),
    );
    Ok(BenchReport {
        schema: "caseload-bench-storage",
        schema_version: SCHEMA_VERSION,
        target,
        seed: options.seed,
        bonnie,
        postmark,
        iozone,
        notes,
        seconds: start.elapsed().as_secs_f64(),
    })
}

/// MB/s (10^6 bytes per second, as the tools print them) of `bytes` in
/// `secs`.
pub fn mb_s(bytes: u64, secs: f64) -> f64 {
    bytes as f64 / 1e6 / secs.max(1e-9)
}

/// SplitMix64: the benchmarks' offsets, sizes and choices, the same for a
/// seed on every machine.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator for `seed` and stream `stream`.
    pub fn new(seed: u64, stream: u64) -> Rng {
        Rng(seed ^ stream.wrapping_mul(0xA076_1D64_78BD_642F))
    }

    /// The next value.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A value in `lo..=hi`.
    pub fn between(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next_u64() % (hi - lo + 1)
    }

    /// Whether an event of `tenths` chances in ten happens.
    pub fn chance(&mut self, tenths: u32) -> bool {
        self.next_u64() % 10 < u64::from(tenths)
    }
}

/// Bytes to write: not all zeros nor all alike, so that no layer below
/// (a compressing file system, a deduplicating array) makes them cheap.
pub fn fill(buf: &mut [u8], rng: &mut Rng) {
    for c in buf.chunks_mut(8) {
        let v = rng.next_u64().to_le_bytes();
        c.copy_from_slice(&v[..c.len()]);
    }
}

/// Write `file` from offset 0 in `record`-byte writes up to `size`.
pub(crate) fn write_sequential(
    file: &ChannelFile,
    size: u64,
    record: &[u8],
) -> Result<(), BenchError> {
    let mut off = 0;
    while off < size {
        let n = (size - off).min(record.len() as u64) as usize;
        file.write_all_at(&record[..n], off)
            .map_err(io_err("writing", file))?;
        off += n as u64;
    }
    Ok(())
}

/// Read `file` from offset 0 in `buf`-sized reads up to `size`; bytes read.
pub(crate) fn read_sequential(
    file: &ChannelFile,
    size: u64,
    buf: &mut [u8],
) -> Result<u64, BenchError> {
    let mut off = 0;
    while off < size {
        let n = (size - off).min(buf.len() as u64) as usize;
        let got = file
            .read_at(&mut buf[..n], off)
            .map_err(io_err("reading", file))?;
        if got == 0 {
            break;
        }
        off += got as u64;
    }
    Ok(off)
}

/// A random order of `0..n`.
pub(crate) fn shuffled(n: u64, rng: &mut Rng) -> Vec<u64> {
    let mut v: Vec<u64> = (0..n).collect();
    for i in (1..v.len()).rev() {
        let j = (rng.next_u64() % (i as u64 + 1)) as usize;
        v.swap(i, j);
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_generator_is_the_same_for_a_seed_and_covers_its_range() {
        let mut a = Rng::new(7, 1);
        let mut b = Rng::new(7, 1);
        let xs: Vec<u64> = (0..100).map(|_| a.between(3, 9)).collect();
        assert_eq!(xs, (0..100).map(|_| b.between(3, 9)).collect::<Vec<_>>());
        for v in 3..=9 {
            assert!(xs.contains(&v), "{v}");
        }
        let mut p = shuffled(50, &mut a);
        p.sort_unstable();
        assert_eq!(p, (0..50).collect::<Vec<_>>());
    }
}
