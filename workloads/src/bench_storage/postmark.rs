//! PostMark-like transactions (Jeffrey Katcher, NetApp TR 3022, 1997): a
//! pool of small files, then transactions that each read or append to one
//! file and create or delete one, then the pool deleted; what mail,
//! news and web servers do to a file system, and what a forensic suite's
//! case folder sees from exported items and carved files.
//!
//! As PostMark 1.5: files of `min_size..=max_size` bytes spread over
//! subdirectories, read and written in blocks, a read bias and a create
//! bias in tenths, an append of a random amount that keeps the file
//! within `max_size`. Unlike PostMark, the run ends with the file system
//! synced (`syncfs`) inside its timing, so that the device's write cost
//! is counted and not left in the page cache.

use super::{BenchError, Rng, fill, io_err, mb_s, read_sequential, write_sequential};
use caseload_engine::channel::Channel;
use serde::Serialize;
use std::time::Instant;

/// Options (PostMark's `set` commands).
#[derive(Debug, Clone)]
pub struct PostmarkOptions {
    /// Files in the initial pool (`set number`, PostMark: 500).
    pub files: u32,
    /// Transactions (`set transactions`, PostMark: 500).
    pub transactions: u32,
    /// Smallest file (`set size`, PostMark: 500 bytes).
    pub min_size: u64,
    /// Largest file (PostMark: 9.77 KiB).
    pub max_size: u64,
    /// Read and write block (`set read`/`set write`, PostMark: 512).
    pub block: usize,
    /// Subdirectories (`set subdirectories`).
    pub subdirs: u32,
    /// Reads in ten read-or-append choices (`set bias read`, PostMark: 5).
    pub read_bias: u32,
    /// Creates in ten create-or-delete choices (`set bias create`, 5).
    pub create_bias: u32,
}

impl Default for PostmarkOptions {
    /// The scale the seeds ran it at rather than PostMark's own tiny
    /// default (500 files, 500 transactions: all in the page cache).
    fn default() -> Self {
        PostmarkOptions {
            files: 5_000,
            transactions: 20_000,
            min_size: 500,
            max_size: 10_000,
            block: 512,
            subdirs: 10,
            read_bias: 5,
            create_bias: 5,
        }
    }
}

/// What the run measured (PostMark's report, per second of its phases).
#[derive(Debug, Clone, Serialize)]
pub struct PostmarkResult {
    /// Whole run, s (pool, transactions, deletion, final sync).
    pub seconds: f64,
    /// Transactions phase, s.
    pub transaction_seconds: f64,
    /// Transactions per second.
    pub transactions_per_s: f64,
    /// Files created in all (pool and transactions).
    pub created: u64,
    /// Created per second of the whole run.
    pub created_per_s: f64,
    /// Files read.
    pub read: u64,
    /// Reads per second of the transactions phase.
    pub read_per_s: f64,
    /// Appends.
    pub appended: u64,
    /// Appends per second of the transactions phase.
    pub appended_per_s: f64,
    /// Files deleted in all.
    pub deleted: u64,
    /// Deleted per second of the whole run.
    pub deleted_per_s: f64,
    /// Bytes read, MB/s of the whole run.
    pub read_mb_s: f64,
    /// Bytes written, MB/s of the whole run.
    pub written_mb_s: f64,
}

struct Pool<'a> {
    dir: &'a Channel,
    o: &'a PostmarkOptions,
    /// Live files: name and size.
    files: Vec<(String, u64)>,
    next: u64,
    block: Vec<u8>,
    read_buf: Vec<u8>,
    created: u64,
    deleted: u64,
    bytes_read: u64,
    bytes_written: u64,
}

impl Pool<'_> {
    fn create(&mut self, rng: &mut Rng) -> Result<(), BenchError> {
        let size = rng.between(self.o.min_size, self.o.max_size);
        let name = format!(
            "s{}/f{:08}",
            self.next % u64::from(self.o.subdirs.max(1)),
            self.next
        );
        self.next += 1;
        let f = self.dir.create(&name)?;
        write_sequential(&f, size, &self.block)?;
        self.files.push((name, size));
        self.created += 1;
        self.bytes_written += size;
        Ok(())
    }

    fn delete(&mut self, rng: &mut Rng) -> Result<(), BenchError> {
        if self.files.is_empty() {
            return Ok(());
        }
        let i = (rng.next_u64() % self.files.len() as u64) as usize;
        let (name, _) = self.files.swap_remove(i);
        self.dir.remove_file(&name)?;
        self.deleted += 1;
        Ok(())
    }

    fn read(&mut self, rng: &mut Rng) -> Result<(), BenchError> {
        if self.files.is_empty() {
            return Ok(());
        }
        let i = (rng.next_u64() % self.files.len() as u64) as usize;
        let (name, size) = &self.files[i];
        let f = self.dir.open(name)?;
        self.bytes_read += read_sequential(&f, *size, &mut self.read_buf)?;
        Ok(())
    }

    fn append(&mut self, rng: &mut Rng) -> Result<(), BenchError> {
        if self.files.is_empty() {
            return Ok(());
        }
        let i = (rng.next_u64() % self.files.len() as u64) as usize;
        let (name, size) = &mut self.files[i];
        let room = self.o.max_size.saturating_sub(*size);
        if room == 0 {
            return Ok(());
        }
        let add = rng.between(1, room);
        let f = self.dir.open_read_write(&*name)?;
        let mut off = 0;
        while off < add {
            let n = (add - off).min(self.block.len() as u64) as usize;
            f.write_all_at(&self.block[..n], *size + off)
                .map_err(io_err("appending to", &f))?;
            off += n as u64;
        }
        *size += add;
        self.bytes_written += add;
        Ok(())
    }
}

/// Run the transactions in `dir`.
pub fn run(
    dir: &Channel,
    o: &PostmarkOptions,
    seed: u64,
    progress: &mut dyn FnMut(&str),
) -> Result<PostmarkResult, BenchError> {
    if o.block == 0
        || o.min_size > o.max_size
        || o.files == 0
        || o.read_bias > 10
        || o.create_bias > 10
    {
        return Err(BenchError::Options(format!(
            "postmark: {} files of {}..={} bytes in blocks of {}, biases {} and {} of 10",
            o.files, o.min_size, o.max_size, o.block, o.read_bias, o.create_bias
        )));
    }
    let mut rng = Rng::new(seed, 2);
    let mut block = vec![0u8; o.block];
    fill(&mut block, &mut rng);
    let mut pool = Pool {
        dir,
        o,
        files: Vec::with_capacity(o.files as usize),
        next: 0,
        read_buf: vec![0u8; o.block],
        block,
        created: 0,
        deleted: 0,
        bytes_read: 0,
        bytes_written: 0,
    };
    let start = Instant::now();
    for s in 0..o.subdirs.max(1) {
        dir.create_dir(format!("s{s}"))?;
    }
    progress("postmark: creating the pool");
    for _ in 0..o.files {
        pool.create(&mut rng)?;
    }
    progress("postmark: transactions");
    let t = Instant::now();
    let (mut read, mut appended) = (0u64, 0u64);
    for _ in 0..o.transactions {
        if rng.chance(o.read_bias) {
            pool.read(&mut rng)?;
            read += 1;
        } else {
            pool.append(&mut rng)?;
            appended += 1;
        }
        if rng.chance(o.create_bias) {
            pool.create(&mut rng)?;
        } else {
            pool.delete(&mut rng)?;
        }
    }
    let transaction_seconds = t.elapsed().as_secs_f64();
    progress("postmark: deleting the pool");
    while !pool.files.is_empty() {
        let (name, _) = pool.files.swap_remove(pool.files.len() - 1);
        dir.remove_file(&name)?;
        pool.deleted += 1;
    }
    dir.sync_file_system()?;
    let seconds = start.elapsed().as_secs_f64();
    for s in 0..o.subdirs.max(1) {
        dir.remove_all(format!("s{s}"))?;
    }
    let per = |n: u64, s: f64| n as f64 / s.max(1e-9);
    Ok(PostmarkResult {
        seconds,
        transaction_seconds,
        transactions_per_s: per(u64::from(o.transactions), transaction_seconds),
        created: pool.created,
        created_per_s: per(pool.created, seconds),
        read,
        read_per_s: per(read, transaction_seconds),
        appended,
        appended_per_s: per(appended, transaction_seconds),
        deleted: pool.deleted,
        deleted_per_s: per(pool.deleted, seconds),
        read_mb_s: mb_s(pool.bytes_read, seconds),
        written_mb_s: mb_s(pool.bytes_written, seconds),
    })
}
