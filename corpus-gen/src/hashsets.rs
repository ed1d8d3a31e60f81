//! Hash-set files: the known set as NSRL RDS 2.x `NSRLFile.txt` and as an
//! RDS v3-compatible SQLite database, and the notable set as md5sum- and
//! sha1sum-style lists. Each holds the planted entries at seeded positions
//! among streamed decoys; decoys never collide with a planted hash.

use crate::CorpusError;
use crate::rng::Rng;
use crate::words;
use std::collections::HashSet;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

/// File names of the hash sets in the output directory.
pub const NSRL_TXT: &str = "NSRLFile.txt";
/// RDS v3 SQLite file name.
pub const RDS3_DB: &str = "RDSv3.db";
/// Notable set, md5sum style.
pub const NOTABLE_MD5: &str = "notable.md5";
/// Notable set, sha1sum style.
pub const NOTABLE_SHA1: &str = "notable.sha1";

/// A planted hash-set entry (hex digests in lower case).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Planted {
    /// SHA-1.
    pub sha1: String,
    /// MD5.
    pub md5: String,
    /// SHA-256.
    pub sha256: String,
    /// CRC-32 (hex).
    pub crc32: String,
    /// File name.
    pub name: String,
    /// Size in bytes.
    pub size: u64,
}

/// One decoy or planted row.
struct Row {
    sha1: String,
    md5: String,
    sha256: String,
    crc32: String,
    name: String,
    size: u64,
    package: u64,
}

fn hexn(r: &mut Rng, bytes: usize) -> String {
    let mut b = [0u8; 32];
    let b = &mut b[..bytes.min(32)];
    r.fill(b);
    crate::content::hex(b)
}

/// Streams `decoys` rows with the planted ones at seeded positions.
struct Rows<'a> {
    rng: Rng,
    planted: &'a [Planted],
    at: Vec<u64>,
    next_planted: usize,
    emitted_decoys: u64,
    decoys: u64,
    avoid_md5: HashSet<&'a str>,
    avoid_sha1: HashSet<&'a str>,
}

impl<'a> Rows<'a> {
    fn new(seed: u64, label: u64, planted: &'a [Planted], decoys: u64) -> Self {
        let mut pos = Rng::derive(seed, &[0x4853, label, 1]);
        let mut at: Vec<u64> = planted.iter().map(|_| pos.below(decoys + 1)).collect();
        at.sort_unstable();
        Rows {
            rng: Rng::derive(seed, &[0x4853, label, 2]),
            planted,
            at,
            next_planted: 0,
            emitted_decoys: 0,
            decoys,
            avoid_md5: planted.iter().map(|p| p.md5.as_str()).collect(),
            avoid_sha1: planted.iter().map(|p| p.sha1.as_str()).collect(),
        }
    }
}

impl Iterator for Rows<'_> {
    type Item = Row;
    fn next(&mut self) -> Option<Row> {
        if self.next_planted < self.planted.len()
            && self.at[self.next_planted] <= self.emitted_decoys
        {
            let p = &self.planted[self.next_planted];
            self.next_planted += 1;
            return Some(Row {
                sha1: p.sha1.clone(),
                md5: p.md5.clone(),
                sha256: p.sha256.clone(),
                crc32: p.crc32.clone(),
                name: p.name.clone(),
                size: p.size,
                package: 900_001,
            });
        }
        if self.emitted_decoys >= self.decoys {
            return None;
        }
        self.emitted_decoys += 1;
        let r = &mut self.rng;
        loop {
            let md5 = hexn(r, 16);
            let sha1 = hexn(r, 20);
            if self.avoid_md5.contains(md5.as_str()) || self.avoid_sha1.contains(sha1.as_str()) {
                continue;
            }
            let ext = *r.pick(&[
                "dll", "exe", "sys", "txt", "png", "ini", "dat", "xml", "js", "htm",
            ]);
            let name = format!("{}{}.{ext}", words::zipf_word(r), r.below(100));
            return Some(Row {
                sha1,
                md5,
                sha256: hexn(r, 32),
                crc32: hexn(r, 4),
                name,
                size: r.log_uniform(64, 64 << 20),
                package: r.range(1, 200_000),
            });
        }
    }
}

fn io_err(path: &Path) -> impl Fn(std::io::Error) -> CorpusError + '_ {
    move |source| CorpusError::Write {
        path: path.to_path_buf(),
        source,
    }
}

/// Write the four hash-set files under `tmp(name)` paths; the caller renames
/// them into place once the whole corpus is complete.
pub fn write_all(
    seed: u64,
    decoys: u64,
    known: &[Planted],
    notable: &[Planted],
    tmp: &dyn Fn(&str) -> PathBuf,
) -> Result<(), CorpusError> {
    // Known set: NSRL RDS 2.x text (quoted CSV, upper-case hex, CRLF,
    // header line) and RDS v3 SQLite, filled from one pass over the rows.
    let nsrl_path = tmp(NSRL_TXT);
    let f = std::fs::File::create(&nsrl_path).map_err(io_err(&nsrl_path))?;
    let mut w = BufWriter::with_capacity(1 << 20, f);
    w.write_all(b"\"SHA-1\",\"MD5\",\"CRC32\",\"FileName\",\"FileSize\",\"ProductCode\",\"OpSystemCode\",\"SpecialCode\"\r\n")
        .map_err(io_err(&nsrl_path))?;
    let db_path = tmp(RDS3_DB);
    let _ = std::fs::remove_file(&db_path);
    {
        let mut db = rusqlite::Connection::open(&db_path)?;
        db.execute_batch(
            "PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; PRAGMA page_size=4096;
             CREATE TABLE VERSION (version VARCHAR UNIQUE NOT NULL, build_set VARCHAR NOT NULL,
                build_date TIMESTAMP NOT NULL, release_date TIMESTAMP NOT NULL, description VARCHAR NOT NULL);
             CREATE TABLE PKG (package_id INTEGER NOT NULL, name VARCHAR NOT NULL, version VARCHAR NOT NULL,
                operating_system_id INTEGER NOT NULL, manufacturer_id INTEGER NOT NULL,
                language VARCHAR NOT NULL, application_type VARCHAR NOT NULL);
             CREATE TABLE FILE (sha256 VARCHAR NOT NULL, sha1 VARCHAR NOT NULL, md5 VARCHAR NOT NULL,
                crc32 VARCHAR NOT NULL, file_name VARCHAR NOT NULL, file_size INTEGER NOT NULL,
                package_id INTEGER NOT NULL);
             INSERT INTO VERSION VALUES ('caseload-corpus-1', 'synthetic', '2024-12-01', '2024-12-01',
                'Synthetic known set: planted corpus files plus random decoys');
             INSERT INTO PKG VALUES (900001, 'caseload corpus planted', '1.0', 1, 1, 'English', 'Synthetic');",
        )?;
        let tx = db.transaction()?;
        {
            let mut st = tx.prepare(
                "INSERT INTO FILE (sha256, sha1, md5, crc32, file_name, file_size, package_id) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            )?;
            for mut r in Rows::new(seed, 1, known, decoys) {
                r.sha1.make_ascii_uppercase();
                r.md5.make_ascii_uppercase();
                r.crc32.make_ascii_uppercase();
                r.sha256.make_ascii_uppercase();
                write!(
                    w,
                    "\"{}\",\"{}\",\"{}\",\"{}\",{},{},\"{}\",\"\"\r\n",
                    r.sha1,
                    r.md5,
                    r.crc32,
                    r.name,
                    r.size,
                    r.package,
                    if r.package == 900_001 { "WIN10" } else { "362" }
                )
                .map_err(io_err(&nsrl_path))?;
                st.execute(rusqlite::params![
                    r.sha256,
                    r.sha1,
                    r.md5,
                    r.crc32,
                    r.name,
                    r.size as i64,
                    r.package as i64
                ])?;
            }
        }
        tx.commit()?;
    }
    w.into_inner()
        .map_err(|e| io_err(&nsrl_path)(e.into_error()))?
        .sync_all()
        .map_err(io_err(&nsrl_path))?;

    // Notable set: md5sum- and sha1sum-style lists from one pass.
    let md5_path = tmp(NOTABLE_MD5);
    let sha1_path = tmp(NOTABLE_SHA1);
    let open = |p: &Path| -> Result<BufWriter<std::fs::File>, CorpusError> {
        Ok(BufWriter::with_capacity(
            1 << 20,
            std::fs::File::create(p).map_err(io_err(p))?,
        ))
    };
    let mut wm = open(&md5_path)?;
    let mut ws = open(&sha1_path)?;
    for r in Rows::new(seed, 2, notable, decoys) {
        writeln!(wm, "{}  {}", r.md5, r.name).map_err(io_err(&md5_path))?;
        writeln!(ws, "{}  {}", r.sha1, r.name).map_err(io_err(&sha1_path))?;
    }
    for (w, p) in [(wm, &md5_path), (ws, &sha1_path)] {
        w.into_inner()
            .map_err(|e| io_err(p)(e.into_error()))?
            .sync_all()
            .map_err(io_err(p))?;
    }
    Ok(())
}
