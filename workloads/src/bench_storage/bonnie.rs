//! bonnie++-like tests (Russell Coker's bonnie++ 1.98): sequential block
//! output, rewrite (read a chunk, dirty it, write it back), sequential
//! block input, random seeks by several processes (a chunk read, one in
//! ten written back), and sequential file creation, stat and deletion.
//!
//! Differences from bonnie++: its file is twice the RAM so that the page
//! cache cannot hold it; here the output and rewrite phases end with an
//! `fsync` inside their timing and the input and seek phases start with
//! the file's pages dropped, so a file smaller than RAM measures the
//! device too. The per-character tests (`putc`/`getc`, a C library
//! benchmark more than a storage one) are left out.

use super::{BenchError, Rng, fill, io_err, mb_s, read_sequential, write_sequential};
use caseload_engine::channel::Channel;
use serde::Serialize;
use std::time::Instant;

/// Options, bonnie++'s defaults where they fit.
#[derive(Debug, Clone)]
pub struct BonnieOptions {
    /// Size of the test file (bonnie++ `-s`).
    pub file_size: u64,
    /// Chunk of each read and write (bonnie++'s 8 KiB).
    pub chunk: usize,
    /// Seeks in all (bonnie++: 8000).
    pub seeks: u32,
    /// Processes seeking at once (bonnie++: 3).
    pub seekers: usize,
    /// Files created, stat'ed and deleted (bonnie++ `-n 16`: 16 × 1024).
    pub files: u32,
}

impl Default for BonnieOptions {
    fn default() -> Self {
        BonnieOptions {
            file_size: 1 << 30,
            chunk: 8 << 10,
            seeks: 8000,
            seekers: 3,
            files: 16 * 1024,
        }
    }
}

/// What the tests measured.
#[derive(Debug, Clone, Serialize)]
pub struct BonnieResult {
    /// Test file, bytes.
    pub file_size: u64,
    /// Chunk, bytes.
    pub chunk: usize,
    /// Sequential block output, MB/s.
    pub seq_write_mb_s: f64,
    /// Rewrite, MB/s (of the file's size).
    pub rewrite_mb_s: f64,
    /// Sequential block input, MB/s.
    pub seq_read_mb_s: f64,
    /// Random seeks per second.
    pub seeks_per_s: f64,
    /// Files in the creation tests.
    pub files: u32,
    /// Sequential creates per second (each file synced with its directory
    /// at the end, inside the timing).
    pub create_per_s: f64,
    /// Stats per second.
    pub stat_per_s: f64,
    /// Deletes per second (the directory synced at the end).
    pub delete_per_s: f64,
}

/// Run the tests in `dir`.
pub fn run(
    dir: &Channel,
    o: &BonnieOptions,
    seed: u64,
    progress: &mut dyn FnMut(&str),
) -> Result<BonnieResult, BenchError> {
    if o.chunk == 0 || o.file_size < o.chunk as u64 || o.seekers == 0 {
        return Err(BenchError::Options(format!(
            "bonnie: a file of {} bytes in chunks of {} bytes by {} seekers",
            o.file_size, o.chunk, o.seekers
        )));
    }
    let mut rng = Rng::new(seed, 1);
    let mut chunk = vec![0u8; o.chunk];
    fill(&mut chunk, &mut rng);
    let name = "bonnie.dat";

    progress("bonnie: sequential output");
    let t = Instant::now();
    let f = dir.create(name)?;
    write_sequential(&f, o.file_size, &chunk)?;
    f.sync_all().map_err(io_err("syncing", &f))?;
    let seq_write = t.elapsed().as_secs_f64();

    progress("bonnie: rewrite");
    f.drop_cached_pages();
    let t = Instant::now();
    let mut off = 0;
    while off < o.file_size {
        let n = (o.file_size - off).min(o.chunk as u64) as usize;
        let got = f
            .read_at(&mut chunk[..n], off)
            .map_err(io_err("reading", &f))?;
        if let Some(b) = chunk[..got].first_mut() {
            *b = b.wrapping_add(1);
        }
        f.write_all_at(&chunk[..got], off)
            .map_err(io_err("rewriting", &f))?;
        off += n as u64;
    }
    f.sync_all().map_err(io_err("syncing", &f))?;
    let rewrite = t.elapsed().as_secs_f64();

    progress("bonnie: sequential input");
    f.drop_cached_pages();
    let t = Instant::now();
    read_sequential(&f, o.file_size, &mut chunk)?;
    let seq_read = t.elapsed().as_secs_f64();

    progress("bonnie: random seeks");
    f.drop_cached_pages();
    let chunks = o.file_size / o.chunk as u64;
    let t = Instant::now();
    let per = o.seeks.div_ceil(o.seekers as u32);
    let results: Vec<Result<(), BenchError>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..o.seekers)
            .map(|k| {
                let f = &f;
                let mut rng = Rng::new(seed, 100 + k as u64);
                s.spawn(move || {
                    let mut buf = vec![0u8; o.chunk];
                    for _ in 0..per {
                        let at = (rng.next_u64() % chunks) * o.chunk as u64;
                        let got = f.read_at(&mut buf, at).map_err(io_err("seeking in", f))?;
                        if rng.chance(1) {
                            f.write_all_at(&buf[..got], at)
                                .map_err(io_err("writing back in", f))?;
                        }
                    }
                    Ok(())
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(BenchError::Options("a seeker panicked".into())))
            })
            .collect()
    });
    results.into_iter().collect::<Result<Vec<()>, _>>()?;
    let seeks = t.elapsed().as_secs_f64();
    drop(f);
    dir.remove_file(name)?;

    progress("bonnie: file creation");
    dir.create_dir("files")?;
    let files = dir.sub("files")?;
    let names: Vec<String> = (0..o.files).map(|i| format!("{i:07}")).collect();
    let t = Instant::now();
    for n in &names {
        files.create(n)?;
    }
    files.sync_dir("")?;
    let create = t.elapsed().as_secs_f64();
    let t = Instant::now();
    for n in &names {
        if !files.exists(n) {
            return Err(BenchError::Options(format!("bonnie: file {n} vanished")));
        }
    }
    let stat = t.elapsed().as_secs_f64();
    let t = Instant::now();
    for n in &names {
        files.remove_file(n)?;
    }
    files.sync_dir("")?;
    let delete = t.elapsed().as_secs_f64();
    dir.remove_all("files")?;

    let per_s = |n: u32, s: f64| f64::from(n) / s.max(1e-9);
    Ok(BonnieResult {
        file_size: o.file_size,
        chunk: o.chunk,
        seq_write_mb_s: mb_s(o.file_size, seq_write),
        rewrite_mb_s: mb_s(o.file_size, rewrite),
        seq_read_mb_s: mb_s(o.file_size, seq_read),
        seeks_per_s: per_s(per * o.seekers as u32, seeks),
        files: o.files,
        create_per_s: per_s(o.files, create),
        stat_per_s: per_s(o.files, stat),
        delete_per_s: per_s(o.files, delete),
    })
}
