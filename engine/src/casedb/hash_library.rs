//! The KFF hash library inside the case database, as FTK 4 keeps it: FTK 4
//! moved its Known File Filter from flat files into its database, so every
//! KFF lookup is a query on the database server, its index and table pages
//! read from the database drive. The `ftk4` profile loads the chosen sets
//! of caseload's hash library (the SQLite file the `hashset` commands
//! fill) into tables of the case's PostgreSQL database before processing
//! starts, and the `kff` stage looks hashes up there.
//!
//! Tables (dropped and made again on every load; `--force` drops them
//! with the case): `kff_library_sets` (id as in the library, name,
//! category, hashes per kind) and one table per kind, `kff_library_md5`,
//! `kff_library_sha1`, `kff_library_sha256` (`hash bytea`, `set_id
//! bigint`). Rows go in with `COPY ... (FORMAT binary)`, the way a bulk
//! import fills a table; the primary key `(hash, set_id)` is built after
//! them, the tables vacuumed and analysed and a checkpoint taken, so that
//! processing starts on a library at rest, as FTK's is.

use super::conn::{PgConn, pg_error};
use super::{CaseDb, DbError, Engine};
use std::io::Write as _;

/// The hash kinds the library tables hold, by their column names.
pub const LIBRARY_KINDS: [&str; 3] = ["md5", "sha1", "sha256"];

/// Tables of the library, in the order they are dropped.
pub(crate) const LIBRARY_TABLES: &[&str] = &[
    "kff_library_md5",
    "kff_library_sha1",
    "kff_library_sha256",
    "kff_library_sets",
];

/// A set as the case database lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LibrarySet {
    /// The set's id in the hash library.
    pub id: i64,
    /// Its name.
    pub name: String,
    /// `known` or `notable`.
    pub category: String,
    /// Distinct hashes per kind, in [`LIBRARY_KINDS`] order.
    pub hashes: [u64; 3],
}

/// A statement per kind, picked by the kind's index in [`LIBRARY_KINDS`]
/// (table names are never formatted into SQL).
fn per_kind(kind: usize, statements: [&'static str; 3]) -> Result<&'static str, DbError> {
    statements
        .get(kind)
        .copied()
        .ok_or_else(|| DbError::Writer(format!("no hash kind number {kind}")))
}

/// Loads sets into the case database's library tables.
pub struct LibraryLoader {
    conn: PgConn,
}

impl std::fmt::Debug for LibraryLoader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LibraryLoader").finish_non_exhaustive()
    }
}

/// The binary COPY header: signature, flags, header extension length.
const COPY_HEADER: &[u8] = b"PGCOPY\n\xff\r\n\0\0\0\0\0\0\0\0\0";

/// Rows of one kind on their way to the server.
pub struct HashCopy<'a> {
    writer: ::postgres::CopyInWriter<'a>,
    buf: Vec<u8>,
    rows: u64,
    sql: &'static str,
}

impl std::fmt::Debug for HashCopy<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HashCopy")
            .field("rows", &self.rows)
            .finish_non_exhaustive()
    }
}

fn copy_error(e: std::io::Error, sql: &str) -> DbError {
    DbError::Query {
        engine: "PostgreSQL",
        message: e.to_string(),
        statement: sql.into(),
        lost: false,
    }
}

impl HashCopy<'_> {
    /// Send one row: a binary digest and the id of the set holding it.
    pub fn push(&mut self, hash: &[u8], set_id: i64) -> Result<(), DbError> {
        let len = i32::try_from(hash.len())
            .map_err(|_| DbError::Writer("a digest longer than 2 GiB".into()))?;
        // Tuple: field count, then each field's length and bytes.
        self.buf.extend_from_slice(&2i16.to_be_bytes());
        self.buf.extend_from_slice(&len.to_be_bytes());
        self.buf.extend_from_slice(hash);
        self.buf.extend_from_slice(&8i32.to_be_bytes());
        self.buf.extend_from_slice(&set_id.to_be_bytes());
        self.rows += 1;
        if self.buf.len() >= 1 << 16 {
            self.writer
                .write_all(&self.buf)
                .map_err(|e| copy_error(e, self.sql))?;
            self.buf.clear();
        }
        Ok(())
    }

    /// End the copy; rows sent.
    pub fn finish(mut self) -> Result<u64, DbError> {
        self.buf.extend_from_slice(&(-1i16).to_be_bytes());
        self.writer
            .write_all(&self.buf)
            .map_err(|e| copy_error(e, self.sql))?;
        self.writer.finish().map_err(|e| pg_error(&e, self.sql))?;
        Ok(self.rows)
    }
}

impl LibraryLoader {
    /// List a set.
    pub fn add_set(&mut self, set: &LibrarySet) -> Result<(), DbError> {
        let sql = "INSERT INTO kff_library_sets (id, name, category, md5, sha1, sha256) VALUES ($1, $2, $3, $4, $5, $6)";
        let n = |i: usize| i64::try_from(set.hashes[i]).unwrap_or(i64::MAX);
        self.conn
            .client
            .execute(
                sql,
                &[&set.id, &set.name, &set.category, &n(0), &n(1), &n(2)],
            )
            .map_err(|e| pg_error(&e, sql))?;
        Ok(())
    }

    /// Start sending the rows of one kind (an index of [`LIBRARY_KINDS`]).
    pub fn copy(&mut self, kind: usize) -> Result<HashCopy<'_>, DbError> {
        let sql = per_kind(
            kind,
            [
                "COPY kff_library_md5 (hash, set_id) FROM STDIN (FORMAT binary)",
                "COPY kff_library_sha1 (hash, set_id) FROM STDIN (FORMAT binary)",
                "COPY kff_library_sha256 (hash, set_id) FROM STDIN (FORMAT binary)",
            ],
        )?;
        let writer = self
            .conn
            .client
            .copy_in(sql)
            .map_err(|e| pg_error(&e, sql))?;
        let mut buf = Vec::with_capacity(1 << 17);
        buf.extend_from_slice(COPY_HEADER);
        Ok(HashCopy {
            writer,
            buf,
            rows: 0,
            sql,
        })
    }

    /// Build the keys, vacuum and analyse, and checkpoint: the tables are
    /// settled on disk, as a library installed long before the case would
    /// be. (Left to itself, autovacuum would visit the freshly loaded
    /// tables during the first stages and charge them its writes.)
    /// The inner result says whether the checkpoint ran (it needs a
    /// superuser or `pg_checkpoint` on an external server).
    pub fn finish(mut self) -> Result<Result<(), String>, DbError> {
        let keys = "ALTER TABLE kff_library_md5 ADD PRIMARY KEY (hash, set_id);
            ALTER TABLE kff_library_sha1 ADD PRIMARY KEY (hash, set_id);
            ALTER TABLE kff_library_sha256 ADD PRIMARY KEY (hash, set_id)";
        self.conn
            .client
            .batch_execute(keys)
            .map_err(|e| pg_error(&e, keys))?;
        // One statement: VACUUM refuses to run inside a transaction block.
        let vacuum = "VACUUM (ANALYZE) kff_library_sets, kff_library_md5, kff_library_sha1, kff_library_sha256";
        self.conn
            .client
            .batch_execute(vacuum)
            .map_err(|e| pg_error(&e, vacuum))?;
        let checkpoint = self
            .conn
            .client
            .batch_execute("CHECKPOINT")
            .map_err(|e| pg_error(&e, "CHECKPOINT").to_string());
        // Publish this session's statistics (its key builds' temporary
        // files) now, not when its server process happens to exit.
        self.conn.publish_stats();
        Ok(checkpoint)
    }
}

impl CaseDb {
    /// Start loading the hash library into the case database, replacing
    /// any loaded before. PostgreSQL only.
    pub fn library_loader(&self) -> Result<LibraryLoader, DbError> {
        let Engine::Postgres(pg) = &self.engine else {
            return Err(DbError::Writer(
                "the hash library goes into a PostgreSQL case database only".into(),
            ));
        };
        let mut client = pg.connect()?;
        let sql = format!(
            "DROP TABLE IF EXISTS {};
            CREATE TABLE kff_library_sets (
                id       bigint PRIMARY KEY,
                name     text NOT NULL UNIQUE,
                category text NOT NULL CHECK (category IN ('known', 'notable')),
                md5      bigint NOT NULL,
                sha1     bigint NOT NULL,
                sha256   bigint NOT NULL
            );
            CREATE TABLE kff_library_md5 (hash bytea NOT NULL, set_id bigint NOT NULL);
            CREATE TABLE kff_library_sha1 (hash bytea NOT NULL, set_id bigint NOT NULL);
            CREATE TABLE kff_library_sha256 (hash bytea NOT NULL, set_id bigint NOT NULL);",
            LIBRARY_TABLES.join(", ")
        );
        client.batch_execute(&sql).map_err(|e| pg_error(&e, &sql))?;
        Ok(LibraryLoader {
            conn: PgConn::new(client),
        })
    }
}

impl super::CaseReader {
    /// The sets loaded into the case database (none: no library there).
    pub fn library_sets(&mut self) -> Result<Vec<LibrarySet>, DbError> {
        let conn = self.conn()?;
        if conn.dialect() != super::Dialect::Postgres {
            return Ok(Vec::new());
        }
        let there: bool = conn
            .query_one("SELECT to_regclass('kff_library_sets') IS NOT NULL", &[])?
            .get(0)?;
        if !there {
            return Ok(Vec::new());
        }
        let mut out = Vec::new();
        for mut r in conn.query(
            "SELECT id, name, category, md5, sha1, sha256 FROM kff_library_sets ORDER BY id",
            &[],
        )? {
            let mut hashes = [0u64; 3];
            for (i, h) in hashes.iter_mut().enumerate() {
                *h = u64::try_from(r.get::<i64>(3 + i)?).unwrap_or(0);
            }
            out.push(LibrarySet {
                id: r.get(0)?,
                name: r.get(1)?,
                category: r.get(2)?,
                hashes,
            });
        }
        Ok(out)
    }

    /// Ids of the loaded sets holding `hash` (a binary digest of the kind
    /// at `kind` in [`LIBRARY_KINDS`]), appended to `out` in ascending
    /// order: one indexed point query on the server.
    pub fn library_find(
        &mut self,
        kind: usize,
        hash: &[u8],
        out: &mut Vec<i64>,
    ) -> Result<(), DbError> {
        let sql = per_kind(
            kind,
            [
                "SELECT set_id FROM kff_library_md5 WHERE hash = ?1 ORDER BY set_id",
                "SELECT set_id FROM kff_library_sha1 WHERE hash = ?1 ORDER BY set_id",
                "SELECT set_id FROM kff_library_sha256 WHERE hash = ?1 ORDER BY set_id",
            ],
        )?;
        let conn = self.conn()?;
        conn.for_each(sql, &[super::Value::Blob(hash.to_vec())], &mut |mut r| {
            out.push(r.get(0)?);
            Ok(())
        })
    }
}
