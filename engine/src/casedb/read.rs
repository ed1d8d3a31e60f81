//! The reads stages, exports and KFF make of a case, as named methods. Each
//! returns typed rows; pages are keyed so a caller never holds a read open
//! while the writer commits (a rollback-journal SQLite database would block
//! it).

use super::DbError;
use super::conn::{Conn, Dialect};
use super::extents::Extents;
use super::rows::{
    CarvedContent, DiskKey, FileContent, FileSlack, HashedItem, ItemKind, ListedFile,
    StoredContent, Volume,
};
use super::value::Row;
use std::collections::HashSet;
use std::sync::{Arc, Mutex};

/// Rows per page of the paged reads.
pub const PAGE: usize = 1000;

/// Idle connections kept for reuse (PostgreSQL: each is a server process
/// whose I/O counters must outlive the stage that used it).
pub(crate) type Pool = Arc<Mutex<Vec<Conn>>>;

/// A FAT meta item's recovered content, as the carve stage's conflict
/// check reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct FatMetaContent {
    /// The item.
    pub id: i64,
    /// Media offset of its content's first run.
    pub start: i64,
    /// Its content's length.
    pub length: i64,
    /// Its validation.
    pub validation: String,
}

/// A read connection to the case database. Call
/// [`DbWriter::flush`](super::DbWriter::flush) first to see everything
/// written so far.
pub struct CaseReader {
    conn: Option<Conn>,
    pool: Option<Pool>,
}

impl std::fmt::Debug for CaseReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CaseReader").finish_non_exhaustive()
    }
}

impl Drop for CaseReader {
    fn drop(&mut self) {
        if let (Some(conn), Some(pool)) = (self.conn.take(), &self.pool) {
            pool.lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push(conn);
        }
    }
}

/// Which table a KFF pass reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HashedTable {
    /// `files` (directories left out: their content is file-system
    /// metadata, not a file a hash set lists).
    Files,
    /// `carved_items`.
    Carved,
    /// `extracted_items` (members of compound files).
    Extracted,
}

impl HashedTable {
    /// The item kind its rows are.
    pub fn kind(self) -> ItemKind {
        match self {
            HashedTable::Files => ItemKind::File,
            HashedTable::Carved => ItemKind::Carved,
            HashedTable::Extracted => ItemKind::Extracted,
        }
    }

    /// The table's name.
    pub fn table(self) -> &'static str {
        match self {
            HashedTable::Files => "files",
            HashedTable::Carved => "carved_items",
            HashedTable::Extracted => "extracted_items",
        }
    }
}

/// Files of an evidence whose runs the file system gives exactly (live
/// files; deleted NTFS files, whose records keep their runs), from
/// `files f` joined with `volumes v`; `?1` is the evidence.
const MAPPED: &str = "v.evidence_id = ?1 AND f.kind = 'file'
    AND (f.recovery = 'allocated' OR (f.recovery = 'unallocated' AND v.fs_type = 'NTFS'))
    AND f.first_offset IS NOT NULL AND f.extents IS NOT NULL";

fn file_content(mut r: Row) -> Result<FileContent, DbError> {
    let key = (r.get(0)?, r.get(1)?);
    let extents: Option<String> = r.get(6)?;
    let encoding: Option<String> = r.get(7)?;
    let resident: Option<Vec<u8>> = r.get(8)?;
    Ok(FileContent {
        key,
        id: key.1,
        path: r.get(2)?,
        name: r.get(3)?,
        size: r.get::<i64>(4)?.max(0) as u64,
        kind: r.get(5)?,
        content: StoredContent::from_columns(extents, encoding, resident),
    })
}

impl CaseReader {
    pub(crate) fn new(conn: Conn, pool: Option<Pool>) -> Self {
        CaseReader {
            conn: Some(conn),
            pool,
        }
    }

    pub(super) fn conn(&mut self) -> Result<&mut Conn, DbError> {
        self.conn
            .as_mut()
            .ok_or_else(|| DbError::Writer("the reader's connection is gone".into()))
    }

    fn count(&mut self, sql: &str) -> Result<u64, DbError> {
        self.conn()?.query_one(sql, &[])?.get(0)
    }

    fn pair(&mut self, sql: &str) -> Result<(u64, u64), DbError> {
        let mut r = self.conn()?.query_one(sql, &[])?;
        Ok((r.get(0)?, r.get(1)?))
    }

    /// Rows of `table`, one of caseload's tables or a profile's (its name
    /// is checked, letters and underscores only, and must exist).
    pub fn row_count(&mut self, table: &str) -> Result<u64, DbError> {
        if table.is_empty() || !table.bytes().all(|b| b.is_ascii_lowercase() || b == b'_') {
            return Err(DbError::Writer(format!("`{table}` is not a table name")));
        }
        self.count(&format!("SELECT count(*) FROM {table}"))
    }

    /// Members of compound files (schema 3 and later), in id order: the
    /// compound file's path, then the member's path in it, name,
    /// container kind, size, MD5 and SHA-1.
    pub fn extracted_items(&mut self) -> Result<Vec<ExtractedListing>, DbError> {
        self.conn()?
            .query(
                "SELECT f.path, x.member, x.name, x.container, x.size, x.md5, x.sha1, x.kff
                 FROM extracted_items x JOIN files f ON f.id = x.file_id ORDER BY x.id",
                &[],
            )?
            .into_iter()
            .map(|mut r| {
                Ok(ExtractedListing {
                    file_path: r.get(0)?,
                    member: r.get(1)?,
                    name: r.get(2)?,
                    container: r.get(3)?,
                    size: r.get(4)?,
                    md5: r.get(5)?,
                    sha1: r.get(6)?,
                    kff: r.get(7)?,
                })
            })
            .collect()
    }

    /// The case's `meta.schema_version`.
    pub fn schema_version(&mut self) -> Result<String, DbError> {
        self.conn()?
            .query_one("SELECT value FROM meta WHERE key = 'schema_version'", &[])?
            .get(0)
    }

    /// Every table's largest rowid now (SQLite), so that what is written
    /// after can be told apart (`run --resume`); empty tables give 0.
    pub fn rowid_watermarks(&mut self) -> Result<std::collections::BTreeMap<String, i64>, DbError> {
        let conn = self.conn()?;
        let tables: Vec<String> = conn
            .query(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name",
                &[],
            )?
            .into_iter()
            .map(|mut r| r.get(0))
            .collect::<Result<_, _>>()?;
        let mut out = std::collections::BTreeMap::new();
        for t in tables {
            let quoted = t.replace('"', "\"\"");
            let max: i64 = conn
                .query_one(
                    &format!("SELECT coalesce(max(rowid), 0) FROM \"{quoted}\""),
                    &[],
                )?
                .get(0)?;
            out.insert(t, max);
        }
        Ok(out)
    }

    /// Files file-hash reads (every record with locatable content,
    /// directories and labels too, as TSK's bodyfile hashes them): count
    /// and bytes.
    ///
    /// `ids` limits them to one batch of a planned case (`first..=last`).
    pub fn files_to_hash_totals(&mut self, ids: Option<(i64, i64)>) -> Result<(u64, u64), DbError> {
        let (first, last) = ids.unwrap_or((i64::MIN, i64::MAX));
        let mut r = self.conn()?.query_one(
            "SELECT count(*), CAST(coalesce(sum(size), 0) AS BIGINT) FROM files
             WHERE (recoverable = 1 OR size = 0) AND id BETWEEN ?1 AND ?2",
            &[first.into(), last.into()],
        )?;
        Ok((r.get(0)?, r.get(1)?))
    }

    /// The ids of the files the file-hash stage reads, in batches of about
    /// `files` files or `bytes` bytes of content, whichever comes first:
    /// `(first, last)` id ranges covering them all, in id order (a
    /// planned case's work units).
    pub fn file_hash_batches(
        &mut self,
        files: u64,
        bytes: u64,
    ) -> Result<Vec<(i64, i64)>, DbError> {
        let mut out = Vec::new();
        let mut open: Option<(i64, i64, u64, u64)> = None;
        let mut after = i64::MIN;
        loop {
            let page = self.conn()?.query(
                "SELECT id, size FROM files WHERE (recoverable = 1 OR size = 0) AND id > ?1
                 ORDER BY id LIMIT ?2",
                &[after.into(), PAGE.into()],
            )?;
            if page.is_empty() {
                break;
            }
            for mut row in page {
                let id: i64 = row.get(0)?;
                after = id;
                let size: u64 = row.get(1)?;
                let (first, _, n, b) = open.unwrap_or((id, id, 0, 0));
                let (n, b) = (n + 1, b.saturating_add(size));
                if n >= files.max(1) || b >= bytes.max(1) {
                    out.push((first, id));
                    open = None;
                } else {
                    open = Some((first, id, n, b));
                }
            }
        }
        if let Some((first, last, _, _)) = open {
            out.push((first, last));
        }
        Ok(out)
    }

    /// The next page of those files after `after`, in disk order.
    pub fn files_to_hash(
        &mut self,
        after: DiskKey,
        ids: Option<(i64, i64)>,
    ) -> Result<Vec<FileContent>, DbError> {
        let (first, last) = ids.unwrap_or((i64::MIN, i64::MAX));
        self.conn()?
            .query(
                "SELECT coalesce(first_offset, -1), id, path, name, size, kind, extents, encoding, resident_data
                 FROM files WHERE (recoverable = 1 OR size = 0)
                   AND (coalesce(first_offset, -1), id) > (?1, ?2)
                   AND id BETWEEN ?4 AND ?5
                 ORDER BY coalesce(first_offset, -1), id LIMIT ?3",
                &[after.0.into(), after.1.into(), PAGE.into(), first.into(), last.into()],
            )?
            .into_iter()
            .map(file_content)
            .collect()
    }

    /// Files the index reads (files with content): count and bytes.
    pub fn files_to_index_totals(&mut self) -> Result<(u64, u64), DbError> {
        self.pair(
            "SELECT count(*), CAST(coalesce(sum(size), 0) AS BIGINT) FROM files WHERE kind = 'file' AND recoverable = 1 AND size > 0",
        )
    }

    /// Of those, how many KFF marked known.
    pub fn known_files_to_index(&mut self) -> Result<u64, DbError> {
        self.count(
            "SELECT count(*) FROM files WHERE kind = 'file' AND recoverable = 1 AND size > 0 AND kff = 'known'",
        )
    }

    /// The next page of files to index after `after`, in disk order,
    /// leaving out known files when `skip_known`.
    ///
    /// `ids` limits them to one batch of a planned case (`first..=last`).
    pub fn files_to_index(
        &mut self,
        after: DiskKey,
        skip_known: bool,
        ids: Option<(i64, i64)>,
    ) -> Result<Vec<FileContent>, DbError> {
        let (first, last) = ids.unwrap_or((i64::MIN, i64::MAX));
        self.conn()?
            .query(
                "SELECT coalesce(first_offset, -1), id, path, name, size, kind, extents, encoding, resident_data
                 FROM files WHERE kind = 'file' AND recoverable = 1 AND size > 0
                   AND (?3 = 0 OR coalesce(kff, '') <> 'known')
                   AND (coalesce(first_offset, -1), id) > (?1, ?2)
                   AND id BETWEEN ?5 AND ?6
                 ORDER BY coalesce(first_offset, -1), id LIMIT ?4",
                &[
                    after.0.into(),
                    after.1.into(),
                    skip_known.into(),
                    PAGE.into(),
                    first.into(),
                    last.into(),
                ],
            )?
            .into_iter()
            .map(file_content)
            .collect()
    }

    /// Bytes of carved content the index can read.
    pub fn carved_bytes_to_index(&mut self) -> Result<u64, DbError> {
        self.count(
            "SELECT CAST(coalesce(sum(coalesce(content_length, length)), 0) AS BIGINT) FROM carved_items
             WHERE extents IS NOT NULL OR case_path IS NOT NULL",
        )
    }

    /// The next page of carved items after `after` = (offset, id), in media
    /// order, leaving out known items when `skip_known`.
    pub fn carved_to_index(
        &mut self,
        after: DiskKey,
        skip_known: bool,
    ) -> Result<Vec<CarvedContent>, DbError> {
        self.conn()?
            .query(
                "SELECT \"offset\", id, type, method, extents, case_path, name FROM carved_items
                 WHERE (\"offset\", id) > (?1, ?2)
                   AND (?3 = 0 OR coalesce(kff, '') <> 'known')
                 ORDER BY \"offset\", id LIMIT ?4",
                &[
                    after.0.into(),
                    after.1.into(),
                    skip_known.into(),
                    PAGE.into(),
                ],
            )?
            .into_iter()
            .map(|mut r| {
                let offset: i64 = r.get(0)?;
                let id: i64 = r.get(1)?;
                let extents: Option<String> = r.get(4)?;
                Ok(CarvedContent {
                    key: (offset, id),
                    id,
                    offset,
                    type_name: r.get(2)?,
                    method: r.get(3)?,
                    extents: extents.as_deref().map(Extents::decode),
                    case_path: r.get(5)?,
                    name: r.get(6)?,
                })
            })
            .collect()
    }

    /// The next page of files with slack after file id `after`.
    pub fn slack(&mut self, after: i64) -> Result<Vec<FileSlack>, DbError> {
        self.conn()?
            .query(
                "SELECT id, path, slack FROM files WHERE slack IS NOT NULL AND id > ?1
                 ORDER BY id LIMIT ?2",
                &[after.into(), PAGE.into()],
            )?
            .into_iter()
            .map(|mut r| {
                let text: String = r.get(2)?;
                Ok(FileSlack {
                    id: r.get(0)?,
                    path: r.get(1)?,
                    slack: Extents::decode(&text),
                })
            })
            .collect()
    }

    /// An evidence's volumes, in id order.
    pub fn volumes(&mut self, evidence_id: i64) -> Result<Vec<Volume>, DbError> {
        self.conn()?
            .query(
                "SELECT id, \"offset\", length, parsed FROM volumes WHERE evidence_id = ?1 ORDER BY id",
                &[evidence_id.into()],
            )?
            .into_iter()
            .map(|mut r| {
                Ok(Volume {
                    id: r.get(0)?,
                    offset: r.get(1)?,
                    length: r.get(2)?,
                    parsed: r.get(3)?,
                })
            })
            .collect()
    }

    /// Volumes whose file system caseload walked, in id order.
    pub fn volumes_parsed(&mut self) -> Result<Vec<Volume>, DbError> {
        self.conn()?
            .query(
                "SELECT id, \"offset\", length, parsed FROM volumes WHERE parsed = 1 ORDER BY id",
                &[],
            )?
            .into_iter()
            .map(|mut r| {
                Ok(Volume {
                    id: r.get(0)?,
                    offset: r.get(1)?,
                    length: r.get(2)?,
                    parsed: r.get(3)?,
                })
            })
            .collect()
    }

    /// The id the next `carved_items` row gets.
    pub fn next_carved_id(&mut self) -> Result<i64, DbError> {
        self.conn()?
            // Final ids only: a split carve's parts number theirs below 0
            // until its finish.
            .query_one(
                "SELECT coalesce(max(id), 0) + 1 FROM carved_items WHERE id > 0",
                &[],
            )?
            .get(0)
    }

    /// Where the fragmented (more than one run), exactly mapped files of
    /// an evidence start. Streamed: the set is as large as the file
    /// system's count of such files.
    pub fn fragmented_file_starts(&mut self, evidence_id: i64) -> Result<HashSet<u64>, DbError> {
        let mut starts = HashSet::new();
        let sql = format!(
            "SELECT f.first_offset, f.extents FROM files f JOIN volumes v ON v.id = f.volume_id WHERE {MAPPED}"
        );
        self.conn()?
            .for_each(&sql, &[evidence_id.into()], &mut |mut r| {
                let start: u64 = r.get(0)?;
                let text: String = r.get(1)?;
                if Extents::decode(&text).is_ok_and(|e| e.0.len() > 1) {
                    starts.insert(start);
                }
                Ok(())
            })?;
        Ok(starts)
    }

    /// The fragmented, exactly mapped files whose content starts at
    /// `offset`: path and runs, in id order.
    pub fn mapped_files_at(
        &mut self,
        evidence_id: i64,
        offset: u64,
    ) -> Result<Vec<(String, Extents)>, DbError> {
        let sql = format!(
            "SELECT f.path, f.extents FROM files f JOIN volumes v ON v.id = f.volume_id
             WHERE coalesce(f.first_offset, -1) = ?2 AND {MAPPED} ORDER BY f.id"
        );
        let mut out = Vec::new();
        for mut r in self
            .conn()?
            .query(&sql, &[evidence_id.into(), offset.into()])?
        {
            let path: String = r.get(0)?;
            let text: String = r.get(1)?;
            if let Ok(e) = Extents::decode(&text)
                && e.0.len() > 1
            {
                out.push((path, e));
            }
        }
        Ok(out)
    }

    /// Carved items of an evidence with ids in `ids`, counted by
    /// `method_validation`.
    pub fn carved_counts(
        &mut self,
        ids: std::ops::RangeInclusive<i64>,
        evidence_id: i64,
    ) -> Result<Vec<(String, u64)>, DbError> {
        self.conn()?
            .query(
                "SELECT method || '_' || validation, count(*) FROM carved_items
                 WHERE id BETWEEN ?1 AND ?2 AND evidence_id = ?3 GROUP BY 1",
                &[
                    (*ids.start()).into(),
                    (*ids.end()).into(),
                    evidence_id.into(),
                ],
            )?
            .into_iter()
            .map(|mut r| Ok((r.get(0)?, r.get(1)?)))
            .collect()
    }

    /// Carved items of an evidence numbered provisionally (a split
    /// carve's parts, below id 0), as `(id, case path)`, handed to `f` one
    /// at a time.
    pub fn provisional_carved(
        &mut self,
        evidence_id: i64,
        f: &mut dyn FnMut(i64, Option<String>) -> Result<(), DbError>,
    ) -> Result<(), DbError> {
        self.conn()?.for_each(
            "SELECT id, case_path FROM carved_items WHERE id < 0 AND evidence_id = ?1 ORDER BY id DESC",
            &[evidence_id.into()],
            &mut |mut r| f(r.get(0)?, r.get(1)?),
        )
    }

    /// The ranges of part `part` of a stage split by ranges, in order.
    pub fn work_ranges(
        &mut self,
        stage: &str,
        part: u32,
    ) -> Result<Vec<super::queue::WorkRange>, DbError> {
        self.conn()?
            .query(
                "SELECT start_byte, end_byte, volume_offset, tag FROM work_ranges
                 WHERE stage = ?1 AND part = ?2 ORDER BY idx",
                &[stage.into(), i64::from(part).into()],
            )?
            .into_iter()
            .map(|mut r| {
                Ok(super::queue::WorkRange {
                    start: r.get(0)?,
                    end: r.get(1)?,
                    volume_offset: r.get(2)?,
                    tag: r.get(3)?,
                })
            })
            .collect()
    }

    /// What each part of a split stage recorded for its finish, by part.
    pub fn part_facts(&mut self, stage: &str) -> Result<Vec<(u32, String)>, DbError> {
        self.conn()?
            .query(
                "SELECT part, facts FROM work_parts WHERE stage = ?1 ORDER BY part",
                &[stage.into()],
            )?
            .into_iter()
            .map(|mut r| {
                let part: i64 = r.get(0)?;
                Ok((u32::try_from(part).unwrap_or(u32::MAX), r.get(1)?))
            })
            .collect()
    }

    /// FAT meta items (ids in `ids`) with recovered content, in order of
    /// start and id, handed to `f` one at a time.
    pub fn fat_meta_contents(
        &mut self,
        ids: std::ops::RangeInclusive<i64>,
        evidence_id: i64,
        f: &mut dyn FnMut(FatMetaContent) -> Result<(), DbError>,
    ) -> Result<(), DbError> {
        let conn = self.conn()?;
        // The first run's offset, read out of the JSON by each engine.
        let sql = match conn.dialect() {
            Dialect::Sqlite => {
                "SELECT id, json_extract(extents, '$[0][0]') AS start, content_length, validation
                 FROM carved_items
                 WHERE method = 'meta' AND record = 'fat-dentry' AND id BETWEEN ?1 AND ?2 AND evidence_id = ?3
                   AND extents IS NOT NULL AND content_length > 0
                 ORDER BY start, id"
            }
            Dialect::Postgres => {
                "SELECT id, CAST((extents::json -> 0 ->> 0) AS BIGINT) AS start, content_length, validation
                 FROM carved_items
                 WHERE method = 'meta' AND record = 'fat-dentry' AND id BETWEEN ?1 AND ?2 AND evidence_id = ?3
                   AND extents IS NOT NULL AND content_length > 0
                 ORDER BY start, id"
            }
        };
        let params = [
            (*ids.start()).into(),
            (*ids.end()).into(),
            evidence_id.into(),
        ];
        conn.for_each(sql, &params, &mut |mut r| {
            let start: Option<i64> = r.get(1)?;
            match start {
                Some(start) => f(FatMetaContent {
                    id: r.get(0)?,
                    start,
                    length: r.get(2)?,
                    validation: r.get(3)?,
                }),
                // A sparse first run has no offset: nothing to compare.
                None => Ok(()),
            }
        })
    }

    /// Items of `table` with at least one hash.
    pub fn hashed_count(&mut self, table: HashedTable) -> Result<u64, DbError> {
        self.count(match table {
            HashedTable::Files => {
                "SELECT count(*) FROM files WHERE kind <> 'directory' AND (md5 IS NOT NULL OR sha1 IS NOT NULL OR sha256 IS NOT NULL)"
            }
            HashedTable::Carved => {
                "SELECT count(*) FROM carved_items WHERE (md5 IS NOT NULL OR sha1 IS NOT NULL OR sha256 IS NOT NULL)"
            }
            HashedTable::Extracted => {
                "SELECT count(*) FROM extracted_items WHERE (md5 IS NOT NULL OR sha1 IS NOT NULL OR sha256 IS NOT NULL)"
            }
        })
    }

    /// The next `limit` of those after id `after`, in id order.
    pub fn hashed_items(
        &mut self,
        table: HashedTable,
        after: i64,
        limit: usize,
    ) -> Result<Vec<HashedItem>, DbError> {
        let sql = match table {
            HashedTable::Files => {
                "SELECT id, path, md5, sha1, sha256 FROM files
                 WHERE kind <> 'directory' AND (md5 IS NOT NULL OR sha1 IS NOT NULL OR sha256 IS NOT NULL)
                   AND id > ?1 ORDER BY id LIMIT ?2"
            }
            HashedTable::Carved => {
                "SELECT id, coalesce(case_path, type || ' at offset ' || \"offset\"), md5, sha1, sha256 FROM carved_items
                 WHERE (md5 IS NOT NULL OR sha1 IS NOT NULL OR sha256 IS NOT NULL)
                   AND id > ?1 ORDER BY id LIMIT ?2"
            }
            HashedTable::Extracted => {
                "SELECT x.id, f.path || '>' || x.member, x.md5, x.sha1, x.sha256
                 FROM extracted_items x JOIN files f ON f.id = x.file_id
                 WHERE (x.md5 IS NOT NULL OR x.sha1 IS NOT NULL OR x.sha256 IS NOT NULL)
                   AND x.id > ?1 ORDER BY x.id LIMIT ?2"
            }
        };
        self.conn()?
            .query(sql, &[after.into(), limit.into()])?
            .into_iter()
            .map(|mut r| {
                Ok(HashedItem {
                    id: r.get(0)?,
                    label: r.get::<Option<String>>(1)?.unwrap_or_default(),
                    hashes: [r.get(2)?, r.get(3)?, r.get(4)?],
                })
            })
            .collect()
    }

    /// The first evidence: path and media size.
    pub fn first_evidence(&mut self) -> Result<Option<(String, i64)>, DbError> {
        let rows = self.conn()?.query(
            "SELECT path, media_size FROM evidence ORDER BY id LIMIT 1",
            &[],
        )?;
        rows.into_iter()
            .next()
            .map(|mut r| Ok((r.get(0)?, r.get(1)?)))
            .transpose()
    }

    /// Every file row with its volume, by volume and id, handed to `f` one
    /// at a time.
    /// `f`'s own error stops the listing and is returned as it is.
    pub fn list_files<E: From<DbError>>(
        &mut self,
        f: &mut dyn FnMut(ListedFile) -> Result<(), E>,
    ) -> Result<(), E> {
        let mut stopped: Option<E> = None;
        // Cases before schema version 4 have no mode, uid or gid.
        let owner = if self.schema_version()?.parse::<u32>().unwrap_or(0) >= 4 {
            "f.mode, f.uid, f.gid"
        } else {
            "NULL, NULL, NULL"
        };
        let sql = format!(
            "SELECT f.id, v.slot, v.\"offset\", v.fs_type, f.meta_addr, f.path, f.name, f.short_name, f.kind, f.size,
                    f.allocated, f.recovery, f.attributes, f.atime, f.mtime, f.ctime, f.crtime, f.extents, f.md5, f.sha1, f.sha256,
                    f.signature, f.extension_mismatch, f.entropy, f.duplicate_group, f.kff, {owner}
             FROM files f JOIN volumes v ON v.id = f.volume_id ORDER BY f.volume_id, f.id"
        );
        let listed = self.conn()?.for_each(&sql, &[], &mut |mut r| {
            let file = ListedFile {
                id: r.get(0)?,
                volume_slot: r.get(1)?,
                volume_offset: r.get(2)?,
                fs_type: r.get(3)?,
                meta_addr: r.get(4)?,
                path: r.get(5)?,
                name: r.get(6)?,
                short_name: r.get(7)?,
                kind: r.get(8)?,
                size: r.get(9)?,
                allocated: r.get(10)?,
                recovery: r.get(11)?,
                attributes: r.get(12)?,
                times: [r.get(13)?, r.get(14)?, r.get(15)?, r.get(16)?],
                extents: r.get(17)?,
                md5: r.get(18)?,
                sha1: r.get(19)?,
                sha256: r.get(20)?,
                signature: r.get(21)?,
                extension_mismatch: r.get(22)?,
                entropy: r.get(23)?,
                duplicate_group: r.get(24)?,
                kff: r.get(25)?,
                owner: match (
                    r.get::<Option<i64>>(26)?,
                    r.get::<Option<i64>>(27)?,
                    r.get::<Option<i64>>(28)?,
                ) {
                    (Some(m), Some(u), Some(g)) => Some([m, u, g]),
                    _ => None,
                },
            };
            f(file).map_err(|e| {
                stopped = Some(e);
                DbError::Writer("listing stopped".into())
            })
        });
        match (stopped, listed) {
            (Some(e), _) => Err(e),
            (None, r) => r.map_err(E::from),
        }
    }
}

/// A member of a compound file as [`CaseReader::extracted_items`] lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtractedListing {
    /// The compound file's path.
    pub file_path: String,
    /// The member's path inside it.
    pub member: String,
    /// Its name.
    pub name: String,
    /// `zip`, `ooxml`, `mbox` or `mail`.
    pub container: String,
    /// Bytes.
    pub size: u64,
    /// MD5.
    pub md5: Option<String>,
    /// SHA-1.
    pub sha1: Option<String>,
    /// KFF verdict.
    pub kff: Option<String>,
}
