//! An iozone-like automatic matrix (`iozone -a`): for every file size
//! (64 KiB to 512 MiB, doubling) and record size (4 KiB to 16 MiB,
//! doubling), write, rewrite, read, reread, random read and random write.
//!
//! As iozone: a record larger than the file is not run (said in the
//! notes), and for files over 32 MiB records start at 64 KiB (iozone's
//! own rule, which keeps the matrix's time bounded). Unlike iozone's
//! default, writes are timed up to their `fsync` (iozone `-e`) and read,
//! random read and random write start with the file's pages dropped from
//! the page cache; reread is the cached read iozone means by it.

use super::{BenchError, Rng, fill, io_err, mb_s, read_sequential, shuffled, write_sequential};
use caseload_engine::channel::Channel;
use serde::Serialize;
use std::time::Instant;

/// The matrix's bounds, each a power of two.
#[derive(Debug, Clone)]
pub struct IozoneOptions {
    /// Smallest file (iozone: 64 KiB).
    pub min_file: u64,
    /// Largest file (iozone: 512 MiB).
    pub max_file: u64,
    /// Smallest record (iozone: 4 KiB).
    pub min_record: u64,
    /// Largest record (iozone: 16 MiB).
    pub max_record: u64,
}

impl Default for IozoneOptions {
    fn default() -> Self {
        IozoneOptions {
            min_file: 64 << 10,
            max_file: 512 << 20,
            min_record: 4 << 10,
            max_record: 16 << 20,
        }
    }
}

/// The six tests of a cell, in iozone's order.
pub const TESTS: [&str; 6] = [
    "write",
    "rewrite",
    "read",
    "reread",
    "random_read",
    "random_write",
];

/// One file size and record size: MB/s of each test, in [`TESTS`] order.
#[derive(Debug, Clone, Serialize)]
pub struct Cell {
    /// File size, bytes.
    pub file_size: u64,
    /// Record size, bytes.
    pub record: u64,
    /// Write, MB/s.
    pub write: f64,
    /// Rewrite, MB/s.
    pub rewrite: f64,
    /// Read, MB/s.
    pub read: f64,
    /// Reread (cached), MB/s.
    pub reread: f64,
    /// Random read, MB/s.
    pub random_read: f64,
    /// Random write, MB/s.
    pub random_write: f64,
}

impl Cell {
    /// The figure of test `name` (one of [`TESTS`]).
    pub fn figure(&self, name: &str) -> Option<f64> {
        Some(match name {
            "write" => self.write,
            "rewrite" => self.rewrite,
            "read" => self.read,
            "reread" => self.reread,
            "random_read" => self.random_read,
            "random_write" => self.random_write,
            _ => return None,
        })
    }
}

/// The matrix.
#[derive(Debug, Clone, Serialize)]
pub struct IozoneResult {
    /// Cells run, by file size then record size.
    pub cells: Vec<Cell>,
    /// Cells not run, and why.
    pub skipped: Vec<String>,
}

impl IozoneResult {
    /// The figure of test `name` for a file of `file_size` in records of
    /// `record`, if that cell ran.
    pub fn figure(&self, file_size: u64, record: u64, name: &str) -> Option<f64> {
        self.cells
            .iter()
            .find(|c| c.file_size == file_size && c.record == record)
            .and_then(|c| c.figure(name))
    }
}

fn powers(lo: u64, hi: u64) -> Vec<u64> {
    let mut v = Vec::new();
    let mut x = lo;
    while x <= hi {
        v.push(x);
        x = x.saturating_mul(2);
        if x == u64::MAX {
            break;
        }
    }
    v
}

pub(crate) fn check(o: &IozoneOptions) -> Result<(), BenchError> {
    let ok = |x: u64| x.is_power_of_two();
    if !(ok(o.min_file) && ok(o.max_file) && ok(o.min_record) && ok(o.max_record))
        || o.min_file > o.max_file
        || o.min_record > o.max_record
        || o.min_record < 512
    {
        return Err(BenchError::Options(format!(
            "iozone: file sizes {}..{} and records {}..{} must be powers of two, smallest first, records at least 512 bytes",
            o.min_file, o.max_file, o.min_record, o.max_record
        )));
    }
    Ok(())
}

/// Run the matrix in `dir`; cells not run are said in `notes` too.
pub fn run(
    dir: &Channel,
    o: &IozoneOptions,
    seed: u64,
    notes: &mut Vec<String>,
    progress: &mut dyn FnMut(&str),
) -> Result<IozoneResult, BenchError> {
    check(o)?;
    let mut rng = Rng::new(seed, 3);
    let mut data = vec![0u8; o.max_record.min(o.max_file) as usize];
    fill(&mut data, &mut rng);
    let mut cells = Vec::new();
    let mut skipped = Vec::new();
    let (mut too_big, mut too_small) = (0, 0);
    for file_size in powers(o.min_file, o.max_file) {
        for record in powers(o.min_record, o.max_record) {
            if record > file_size {
                too_big += 1;
                skipped.push(format!(
                    "record {} KiB > file {} KiB",
                    record >> 10,
                    file_size >> 10
                ));
                continue;
            }
            if file_size > 32 << 20 && record < 64 << 10 {
                too_small += 1;
                skipped.push(format!(
                    "record {} KiB < 64 KiB on a file of {} MiB (iozone's rule over 32 MiB)",
                    record >> 10,
                    file_size >> 20
                ));
                continue;
            }
            progress(&format!(
                "iozone: file {} KiB, record {} KiB",
                file_size >> 10,
                record >> 10
            ));
            cells.push(cell(
                dir,
                file_size,
                record,
                &data[..record as usize],
                &mut rng,
            )?);
        }
    }
    if too_big > 0 {
        notes.push(format!(
            "iozone: {too_big} cells with a record larger than the file were not run"
        ));
    }
    if too_small > 0 {
        notes.push(format!(
            "iozone: {too_small} cells with records under 64 KiB on files over 32 MiB were not run (as iozone -a)"
        ));
    }
    Ok(IozoneResult { cells, skipped })
}

fn cell(
    dir: &Channel,
    file_size: u64,
    record: u64,
    data: &[u8],
    rng: &mut Rng,
) -> Result<Cell, BenchError> {
    let name = format!("iozone-{file_size}-{record}.tmp");
    let records = file_size / record;
    let timed = |f: &mut dyn FnMut() -> Result<(), BenchError>| -> Result<f64, BenchError> {
        let t = Instant::now();
        f()?;
        Ok(mb_s(file_size, t.elapsed().as_secs_f64()))
    };
    let f = dir.create(&name)?;
    // Write and rewrite are the same pass: the first over a new file.
    let mut write_through = || {
        write_sequential(&f, file_size, data)?;
        f.sync_all().map_err(io_err("syncing", &f))
    };
    let write = timed(&mut write_through)?;
    let rewrite = timed(&mut write_through)?;
    let mut buf = vec![0u8; record as usize];
    f.drop_cached_pages();
    let read = timed(&mut || read_sequential(&f, file_size, &mut buf).map(drop))?;
    let reread = timed(&mut || read_sequential(&f, file_size, &mut buf).map(drop))?;
    let order = shuffled(records, rng);
    f.drop_cached_pages();
    let random_read = timed(&mut || {
        for &r in &order {
            f.read_at(&mut buf, r * record)
                .map_err(io_err("reading", &f))?;
        }
        Ok(())
    })?;
    let order = shuffled(records, rng);
    f.drop_cached_pages();
    let random_write = timed(&mut || {
        for &r in &order {
            f.write_all_at(data, r * record)
                .map_err(io_err("writing", &f))?;
        }
        f.sync_all().map_err(io_err("syncing", &f))
    })?;
    drop(f);
    dir.remove_file(&name)?;
    Ok(Cell {
        file_size,
        record,
        write,
        rewrite,
        read,
        reread,
        random_read,
        random_write,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_matrix_has_iozones_bounds() {
        assert_eq!(powers(64 << 10, 512 << 20).len(), 14);
        assert_eq!(powers(4 << 10, 16 << 20).len(), 13);
        assert!(check(&IozoneOptions::default()).is_ok());
        let bad = IozoneOptions {
            min_record: 3000,
            ..IozoneOptions::default()
        };
        assert!(check(&bad).is_err());
    }
}
