//! The `ftk4` profile: FTK 4's case database on PostgreSQL, as the FTK 4
//! study processed its evidence. Every object an examiner can list is an
//! item row (the evidence, each volume, each file system entry, each
//! member a compound file was expanded into, each carved item), with its
//! parent found by a query as it is added, and its attributes as property
//! rows of their own; hashing and type detection update the item and add
//! properties; duplicate flagging and the Known File Filter update items'
//! flags. Commits come every [`FTK4_BATCH`] writes, each one a WAL flush
//! the database device must absorb. docs/profiles.md lists each knob with
//! where it comes from.

use super::super::DbError;
use super::super::conn::Conn;
use super::super::rows::{HashColumn, ItemKind};
use super::super::value::Value;
use super::super::write::{Reply, Write};
use super::{extension, file_id, split_path};

/// Writes per transaction. *Calibrated* (docs/profiles.md): FTK commits
/// processed items in small groups, so that the base system's database
/// disk, not its evidence disk, bounds pre-processing as the study found.
pub const FTK4_BATCH: usize = 2;

/// Item ids: a file's is its caseload row id; others are their row id in
/// a range of their own (caseload's file and carved ids stay below 2^40,
/// extracted ids below 2^56: `NewExtracted::id_of`).
const EXTRACTED_BASE: i64 = 1 << 57;
const CARVED_BASE: i64 = 1 << 58;
const VOLUME_BASE: i64 = 1 << 59;
const EVIDENCE_ITEM: i64 = 1 << 60;

/// Where an item came from (`ftk_items.source`).
const SOURCE_EVIDENCE: i64 = 0;
const SOURCE_VOLUME: i64 = 1;
const SOURCE_FILE: i64 = 2;
const SOURCE_EXTRACTED: i64 = 3;
const SOURCE_CARVED: i64 = 4;

/// `ftk_items.flags` bits, as FTK's item list filters on them.
const FLAG_DELETED: i64 = 1;
const FLAG_FOLDER: i64 = 2;
const FLAG_CARVED: i64 = 4;
const FLAG_FROM_CONTAINER: i64 = 8;
const FLAG_DUPLICATE: i64 = 16;
const FLAG_BAD_EXTENSION: i64 = 32;
const FLAG_KFF_ALERT: i64 = 64;
const FLAG_KFF_IGNORE: i64 = 128;

/// FTK's case tables for what caseload records, and the indexes a case
/// review needs (the item list sorted and filtered by name, path,
/// extension, category, hash, flags; an item's children; its properties).
pub(super) const SCHEMA: &str = "
CREATE TABLE ftk_case_info (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE ftk_property_names (property_id INTEGER PRIMARY KEY, name TEXT NOT NULL);
CREATE TABLE ftk_items (
    item_id       BIGINT PRIMARY KEY,
    parent_id     BIGINT,
    volume_id     BIGINT,
    source        INTEGER NOT NULL,
    name          TEXT NOT NULL,
    path          TEXT NOT NULL,
    extension     TEXT,
    category      TEXT,
    logical_size  BIGINT,
    created       BIGINT,
    modified      BIGINT,
    accessed      BIGINT,
    changed       BIGINT,
    md5           TEXT,
    sha1          TEXT,
    flags         BIGINT NOT NULL DEFAULT 0,
    kff_status    TEXT,
    kff_set       TEXT,
    label         TEXT,
    checked       INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX ftk_items_parent ON ftk_items(parent_id);
CREATE INDEX ftk_items_path ON ftk_items(volume_id, path);
CREATE INDEX ftk_items_name ON ftk_items(name);
CREATE INDEX ftk_items_extension ON ftk_items(extension);
CREATE INDEX ftk_items_category ON ftk_items(category);
CREATE INDEX ftk_items_md5 ON ftk_items(md5);
CREATE INDEX ftk_items_sha1 ON ftk_items(sha1);
CREATE INDEX ftk_items_flags ON ftk_items(flags);
CREATE TABLE ftk_item_properties (
    item_id     BIGINT NOT NULL,
    property_id INTEGER NOT NULL,
    value       TEXT,
    PRIMARY KEY (item_id, property_id)
);
CREATE INDEX ftk_item_properties_by_property ON ftk_item_properties(property_id);
INSERT INTO ftk_case_info (name, value) VALUES ('product', 'FTK 4 (caseload profile ftk4)');
INSERT INTO ftk_case_info (name, value) VALUES ('pre-processing', 'MD5, SHA-1, flag duplicates, expand compound files, KFF');
INSERT INTO ftk_property_names (property_id, name) VALUES
    (1, 'Evidence path'), (2, 'Evidence size'), (3, 'Volume offset'), (4, 'Volume length'),
    (5, 'File system'), (10, 'Metadata address'), (11, 'Short name'), (12, 'Attributes'),
    (13, 'Recovery'), (14, 'Start sector'), (15, 'Fragments'), (16, 'Data runs'),
    (17, 'FN created'), (18, 'FN modified'), (19, 'FN accessed'), (20, 'FN changed'),
    (21, 'Physical size'), (30, 'File type'), (31, 'Entropy'), (32, 'SHA-256'),
    (40, 'Container'), (41, 'Member path'), (50, 'Carving method'), (51, 'Carved offset'),
    (52, 'Carved length'), (53, 'Validation'), (60, 'KFF hits');
";

/// One item row.
struct Item<'a> {
    id: i64,
    parent: Option<i64>,
    /// caseload's volume, for items of a file system.
    volume: Option<i64>,
    source: i64,
    name: &'a str,
    path: &'a str,
    size: Option<u64>,
    times: [Option<i64>; 4],
    md5: Option<&'a str>,
    sha1: Option<&'a str>,
    category: Option<&'a str>,
    flags: i64,
}

impl Item<'_> {
    fn insert(&self, conn: &mut Conn) -> Result<(), DbError> {
        let extension = extension(self.name);
        let [mtime, atime, ctime, crtime] = self.times;
        conn.execute(
            "INSERT INTO ftk_items (item_id, parent_id, volume_id, source, name, path, extension, category, logical_size,
                created, modified, accessed, changed, md5, sha1, flags)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)",
            &[
                self.id.into(),
                self.parent.into(),
                self.volume.into(),
                self.source.into(),
                self.name.to_string().into(),
                self.path.to_string().into(),
                extension.into(),
                self.category.map(str::to_string).into(),
                self.size.into(),
                crtime.into(),
                mtime.into(),
                atime.into(),
                ctime.into(),
                self.md5.map(str::to_string).into(),
                self.sha1.map(str::to_string).into(),
                self.flags.into(),
            ],
        )?;
        Ok(())
    }
}

/// Add the properties that have a value, one row each.
fn properties(conn: &mut Conn, item: i64, values: &[(i64, Value)]) -> Result<(), DbError> {
    for (property, value) in values {
        if matches!(value, Value::Null) {
            continue;
        }
        conn.execute(
            "INSERT INTO ftk_item_properties (item_id, property_id, value) VALUES (?1, ?2, ?3)
             ON CONFLICT (item_id, property_id) DO UPDATE SET value = excluded.value",
            &[item.into(), (*property).into(), text(value).into()],
        )?;
    }
    Ok(())
}

/// A property's value as the text FTK's property table holds.
fn text(value: &Value) -> String {
    match value {
        Value::Null => String::new(),
        Value::Int(i) => i.to_string(),
        Value::Real(r) => r.to_string(),
        Value::Text(s) => s.clone(),
        Value::Blob(b) => crate::source::hex(b),
    }
}

/// The item of the folder holding `path` on volume `volume`, looked up
/// by its path as FTK finds an item's parent when it adds it (a live
/// folder before a deleted one of the same path, then the first added);
/// the volume's item for the root.
fn parent_item(conn: &mut Conn, volume: i64, path: &str) -> Result<i64, DbError> {
    let volume_item = VOLUME_BASE + volume;
    let (parent_path, _) = split_path(path);
    let parent_path = parent_path.trim_end_matches('/');
    if parent_path.is_empty() {
        return Ok(volume_item);
    }
    let found = conn
        .query(
            "SELECT item_id FROM ftk_items WHERE volume_id = ?1 AND path = ?2 AND source = ?3 AND (flags & ?4) <> 0
             ORDER BY (flags & ?5), item_id LIMIT 1",
            &[
                volume.into(),
                parent_path.to_string().into(),
                SOURCE_FILE.into(),
                FLAG_FOLDER.into(),
                FLAG_DELETED.into(),
            ],
        )?
        .into_iter()
        .next()
        .map(|mut r| r.get::<i64>(0))
        .transpose()?;
    Ok(found.unwrap_or(volume_item))
}

/// The rows FTK writes for `write` (applied, with `reply`).
pub(super) fn after(write: &Write, reply: &Reply, conn: &mut Conn) -> Result<(), DbError> {
    match (write, reply) {
        (Write::Evidence(e), Reply::Id(_)) => {
            Item {
                id: EVIDENCE_ITEM,
                parent: None,
                volume: None,
                source: SOURCE_EVIDENCE,
                name: split_path(&e.path).1,
                path: "",
                size: Some(e.media_size),
                times: [None; 4],
                md5: None,
                sha1: None,
                category: Some("evidence"),
                flags: FLAG_FOLDER,
            }
            .insert(conn)?;
            properties(
                conn,
                EVIDENCE_ITEM,
                &[(1, e.path.clone().into()), (2, e.media_size.into())],
            )?;
        }
        (Write::EvidenceHashes(h), _) => {
            conn.execute(
                "UPDATE ftk_items SET md5 = ?1, sha1 = ?2 WHERE item_id = ?3",
                &[
                    h.md5.clone().into(),
                    h.sha1.clone().into(),
                    EVIDENCE_ITEM.into(),
                ],
            )?;
        }
        (Write::Volume(v), Reply::Id(id)) => {
            let item = VOLUME_BASE + id;
            Item {
                id: item,
                parent: Some(EVIDENCE_ITEM),
                volume: Some(*id),
                source: SOURCE_VOLUME,
                name: &v.description,
                path: "",
                size: Some(v.length),
                times: [None; 4],
                md5: None,
                sha1: None,
                category: Some("volume"),
                flags: FLAG_FOLDER,
            }
            .insert(conn)?;
            properties(conn, item, &[(3, v.offset.into()), (4, v.length.into())])?;
        }
        (Write::VolumeFs(v), _) => {
            properties(
                conn,
                VOLUME_BASE + v.volume_id,
                &[(5, v.fs_type.clone().into())],
            )?;
        }
        (Write::File { file: f, .. }, reply) => {
            let id = file_id(reply, conn)?;
            let parent = parent_item(conn, f.volume_id, &f.path)?;
            let dir = matches!(f.kind, "directory" | "virtual-directory");
            let mut flags = 0;
            if !f.allocated {
                flags |= FLAG_DELETED;
            }
            if dir {
                flags |= FLAG_FOLDER;
            }
            Item {
                id,
                parent: Some(parent),
                volume: Some(f.volume_id),
                source: SOURCE_FILE,
                name: &f.name,
                path: &f.path,
                size: Some(f.size),
                times: f.times,
                md5: None,
                sha1: None,
                category: dir.then_some("folder"),
                flags,
            }
            .insert(conn)?;
            let stored = f.content.runs();
            let runs = stored.map(|r| r.data_runs()).unwrap_or_default();
            let physical: u64 = runs.iter().map(|(_, l)| l).sum();
            let [fn_m, fn_a, fn_c, fn_cr] = f.fn_times;
            properties(
                conn,
                id,
                &[
                    (10, f.meta_addr.clone().into()),
                    (11, f.short_name.clone().into()),
                    (12, f.attributes.into()),
                    (13, f.recovery.into()),
                    (14, runs.first().map(|(o, _)| o / 512).into()),
                    (15, (!runs.is_empty()).then_some(runs.len() as u64).into()),
                    (
                        16,
                        stored.filter(|_| runs.len() > 1).map(|r| r.encode()).into(),
                    ),
                    (17, fn_cr.into()),
                    (18, fn_m.into()),
                    (19, fn_a.into()),
                    (20, fn_c.into()),
                    (21, (physical > 0).then_some(physical).into()),
                ],
            )?;
        }
        (Write::FileDigests(d), _) => {
            let bad = if d.extension_mismatch == Some(true) {
                FLAG_BAD_EXTENSION
            } else {
                0
            };
            conn.execute(
                "UPDATE ftk_items SET md5 = ?1, sha1 = ?2, category = coalesce(category, ?3), flags = flags | ?4 WHERE item_id = ?5",
                &[
                    d.md5.clone().into(),
                    d.sha1.clone().into(),
                    d.signature.into(),
                    bad.into(),
                    d.file_id.into(),
                ],
            )?;
            properties(
                conn,
                d.file_id,
                &[
                    (30, d.signature.into()),
                    (31, d.entropy.into()),
                    (32, d.sha256.clone().into()),
                ],
            )?;
        }
        (Write::Extracted(x), Reply::Id(id)) => {
            let item = EXTRACTED_BASE + id;
            Item {
                id: item,
                // Under the member it came out of, else the file.
                parent: Some(x.parent_id.map_or(x.file_id, |p| EXTRACTED_BASE + p)),
                volume: None,
                source: SOURCE_EXTRACTED,
                name: &x.name,
                path: &x.member,
                size: Some(x.size),
                times: [None; 4],
                md5: x.md5.as_deref(),
                sha1: x.sha1.as_deref(),
                category: x.signature,
                flags: FLAG_FROM_CONTAINER,
            }
            .insert(conn)?;
            properties(
                conn,
                item,
                &[
                    (40, x.container.into()),
                    (41, x.member.clone().into()),
                    (32, x.sha256.clone().into()),
                ],
            )?;
        }
        (Write::Carved(c), _) => {
            let item = CARVED_BASE + c.id;
            let name = c
                .case_path
                .as_deref()
                .map(|p| split_path(p).1)
                .unwrap_or(&c.type_name);
            Item {
                id: item,
                parent: Some(c.volume_id.map_or(EVIDENCE_ITEM, |v| VOLUME_BASE + v)),
                volume: c.volume_id,
                source: SOURCE_CARVED,
                name,
                path: c.case_path.as_deref().unwrap_or(""),
                size: Some(c.length),
                times: [None; 4],
                md5: c.md5.as_deref(),
                sha1: c.sha1.as_deref(),
                category: Some(&c.type_name),
                flags: FLAG_CARVED,
            }
            .insert(conn)?;
            properties(
                conn,
                item,
                &[
                    (50, c.method.into()),
                    (51, c.offset.into()),
                    (52, c.length.into()),
                    (53, c.validation.into()),
                    (31, c.entropy.into()),
                ],
            )?;
        }
        (
            Write::RenumberCarved {
                from,
                to,
                case_path,
            },
            _,
        ) => {
            let (old, new) = (CARVED_BASE + from, CARVED_BASE + to);
            match case_path {
                Some(p) => conn.execute(
                    "UPDATE ftk_items SET item_id = ?1, name = ?2, path = ?3 WHERE item_id = ?4",
                    &[
                        new.into(),
                        split_path(p).1.into(),
                        p.clone().into(),
                        old.into(),
                    ],
                )?,
                None => conn.execute(
                    "UPDATE ftk_items SET item_id = ?1 WHERE item_id = ?2",
                    &[new.into(), old.into()],
                )?,
            };
            conn.execute(
                "UPDATE ftk_item_properties SET item_id = ?1 WHERE item_id = ?2",
                &[new.into(), old.into()],
            )?;
        }
        (Write::InvalidateCarved { id, .. }, _) => {
            conn.execute(
                "UPDATE ftk_items SET flags = flags & ?1 WHERE item_id = ?2",
                &[(!FLAG_CARVED).into(), (CARVED_BASE + id).into()],
            )?;
        }
        (Write::Duplicates(column), _) => {
            // FTK flags every item whose hash another item shares.
            // FTK items carry MD5 and SHA-1; grouped by SHA-256, caseload's
            // duplicates are flagged by whichever of those was computed.
            let column = match column {
                HashColumn::Md5 => "md5",
                HashColumn::Sha1 => "sha1",
                HashColumn::Sha256 => "coalesce(md5, sha1)",
            };
            conn.execute(
                &format!(
                    "UPDATE ftk_items SET flags = flags | ?1 WHERE {column} IN
                     (SELECT {column} FROM ftk_items WHERE {column} IS NOT NULL AND (flags & ?2) = 0
                      GROUP BY {column} HAVING count(*) > 1)"
                ),
                &[FLAG_DUPLICATE.into(), FLAG_FOLDER.into()],
            )?;
        }
        (Write::ClearKff, _) => {
            conn.execute(
                "UPDATE ftk_items SET kff_status = NULL, kff_set = NULL, flags = flags & ?1 WHERE kff_status IS NOT NULL",
                &[(!(FLAG_KFF_ALERT | FLAG_KFF_IGNORE)).into()],
            )?;
        }
        (
            Write::Kff {
                kind,
                id,
                hits,
                verdict,
            },
            _,
        ) => {
            let item = match kind {
                ItemKind::File => *id,
                ItemKind::Extracted => EXTRACTED_BASE + id,
                ItemKind::Carved => CARVED_BASE + id,
                ItemKind::Evidence | ItemKind::Volume => return Ok(()),
            };
            let flag = if *verdict == "notable" {
                FLAG_KFF_ALERT
            } else {
                FLAG_KFF_IGNORE
            };
            let sets: Vec<&str> = hits.iter().map(|h| h.set.as_str()).collect();
            conn.execute(
                "UPDATE ftk_items SET kff_status = ?1, kff_set = ?2, flags = flags | ?3 WHERE item_id = ?4",
                &[
                    (*verdict).into(),
                    sets.join(", ").into(),
                    flag.into(),
                    item.into(),
                ],
            )?;
            properties(conn, item, &[(60, (hits.len() as u64).into())])?;
        }
        _ => {}
    }
    Ok(())
}
