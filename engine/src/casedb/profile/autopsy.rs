//! The `autopsy` profile: the case database of Autopsy's single-user
//! cases, as The Sleuth Kit's `TskDbSqlite` (tsk/auto/tsk_db_sqlite.cpp)
//! and `tsk_loaddb` build it: SQLite with 4 KiB pages, the rollback
//! journal, synchronous OFF and the file grown 1 MiB at a time; an object
//! row, a file row of TSK's columns and a layout row per data run for every
//! file, each file after a lookup of its parent directory's object, a
//! directory's `.` and `..` and a file's slack as rows of their own,
//! timeline events per file time; the walk in one transaction; after
//! hashing and type detection one UPDATE of the file row per file.

use super::super::DbError;
use super::super::conn::Conn;
use super::super::rows::StoredContent;
use super::super::write::{Reply, Write};
use super::{extension, file_id, split_path};
use caseload_fs::FsKind;

/// Object ids of TSK rows: the image is object 1, volumes' file systems
/// follow, files' objects are their caseload row ids plus this.
const FS_OBJ_BASE: i64 = 1;
const FILE_OBJ_BASE: i64 = 1 << 24;
/// Objects TSK adds beside a file (a directory's `.` and `..`, a file's
/// slack): `EXTRA_OBJ_BASE + 4·id + k`, k = 1..3.
const EXTRA_OBJ_BASE: i64 = 1 << 40;

/// TSK object types (TSK_DB_OBJECT_TYPE_ENUM): image, file system, file.
const OBJ_IMAGE: i64 = 0;
const OBJ_FS: i64 = 2;
const OBJ_FILE: i64 = 4;

/// Writes per transaction: in effect one transaction per stage (the run
/// commits at each stage's end). *Calibrated* against `tsk_loaddb`'s
/// write calls: with 500 files a transaction caseload made 2.04 times
/// TSK's write calls per file on a 1 GiB corpus (3,432 files), with one
/// transaction 1.16 times (docs/profiles.md).
pub const AUTOPSY_BATCH: usize = 1_000_000;

/// TSK's tables for what caseload records, with the indexes Autopsy
/// creates before loading (column lists as tsk_loaddb 4.12 writes them),
/// plus one index for the parent lookup by path (TSK finds parents by
/// metadata address through a cache; caseload's rows carry paths).
pub(super) const SCHEMA: &str = "
CREATE TABLE tsk_objects (obj_id INTEGER PRIMARY KEY, par_obj_id INTEGER, type INTEGER NOT NULL);
CREATE INDEX parObjId ON tsk_objects(par_obj_id);
CREATE TABLE tsk_image_info (obj_id INTEGER PRIMARY KEY, type INTEGER, ssize INTEGER, tzone TEXT, size INTEGER, md5 TEXT, sha1 TEXT, sha256 TEXT, display_name TEXT);
CREATE TABLE tsk_image_names (obj_id INTEGER NOT NULL, name TEXT NOT NULL, sequence INTEGER NOT NULL);
CREATE TABLE tsk_fs_info (obj_id INTEGER PRIMARY KEY, data_source_obj_id INTEGER NOT NULL, img_offset INTEGER NOT NULL, fs_type INTEGER NOT NULL, block_size INTEGER NOT NULL, block_count INTEGER NOT NULL, root_inum INTEGER NOT NULL, first_inum INTEGER NOT NULL, last_inum INTEGER NOT NULL, display_name TEXT);
CREATE TABLE tsk_files (obj_id INTEGER PRIMARY KEY, fs_obj_id INTEGER, data_source_obj_id INTEGER NOT NULL, attr_type INTEGER, attr_id INTEGER, name TEXT NOT NULL, meta_addr INTEGER, meta_seq INTEGER, type INTEGER, has_layout INTEGER, has_path INTEGER, dir_type INTEGER, meta_type INTEGER, dir_flags INTEGER, meta_flags INTEGER, size INTEGER, ctime INTEGER, crtime INTEGER, atime INTEGER, mtime INTEGER, mode INTEGER, uid INTEGER, gid INTEGER, md5 TEXT, known INTEGER, parent_path TEXT, mime_type TEXT, extension TEXT);
CREATE INDEX mime_type ON tsk_files(dir_type, mime_type, type);
CREATE INDEX file_extension ON tsk_files(extension);
CREATE INDEX tsk_files_parent_path ON tsk_files(fs_obj_id, parent_path, name);
CREATE TABLE tsk_file_layout (obj_id INTEGER NOT NULL, byte_start INTEGER NOT NULL, byte_len INTEGER NOT NULL, sequence INTEGER NOT NULL);
CREATE INDEX layout_objID ON tsk_file_layout(obj_id);
CREATE TABLE tsk_db_info (schema_ver INTEGER, tsk_ver INTEGER, schema_minor_ver INTEGER);
CREATE TABLE tsk_db_info_extended (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE data_source_info (obj_id INTEGER PRIMARY KEY, device_id TEXT NOT NULL, time_zone TEXT NOT NULL, acquisition_details TEXT, added_date_time INTEGER, acquisition_tool_settings TEXT, acquisition_tool_name TEXT, acquisition_tool_version TEXT, host_id INTEGER);
CREATE TABLE tsk_vs_info (obj_id INTEGER PRIMARY KEY, vs_type INTEGER NOT NULL, img_offset INTEGER NOT NULL, block_size INTEGER NOT NULL);
CREATE TABLE tsk_vs_parts (obj_id INTEGER PRIMARY KEY, addr INTEGER NOT NULL, start INTEGER NOT NULL, length INTEGER NOT NULL, desc TEXT, flags INTEGER NOT NULL);
CREATE TABLE tsk_pool_info (obj_id INTEGER PRIMARY KEY, pool_type INTEGER NOT NULL);
CREATE TABLE file_encoding_types (encoding_type INTEGER PRIMARY KEY, name TEXT NOT NULL);
CREATE TABLE tsk_files_path (obj_id INTEGER PRIMARY KEY, path TEXT NOT NULL, encoding_type INTEGER NOT NULL);
CREATE TABLE tsk_files_derived (obj_id INTEGER PRIMARY KEY, derived_id INTEGER NOT NULL, rederive TEXT);
CREATE TABLE tsk_files_derived_method (derived_id INTEGER PRIMARY KEY, tool_name TEXT NOT NULL, tool_version TEXT NOT NULL, other TEXT);
CREATE TABLE tsk_tag_sets (tag_set_id INTEGER PRIMARY KEY, name TEXT UNIQUE);
CREATE TABLE tag_names (tag_name_id INTEGER PRIMARY KEY, display_name TEXT UNIQUE, description TEXT NOT NULL, color TEXT NOT NULL, knownStatus INTEGER NOT NULL, tag_set_id INTEGER, rank INTEGER);
CREATE TABLE review_statuses (review_status_id INTEGER PRIMARY KEY, review_status_name TEXT NOT NULL, display_name TEXT NOT NULL);
CREATE TABLE blackboard_artifacts (artifact_id INTEGER PRIMARY KEY, obj_id INTEGER NOT NULL, artifact_obj_id INTEGER NOT NULL, data_source_obj_id INTEGER, artifact_type_id INTEGER NOT NULL, review_status_id INTEGER NOT NULL);
CREATE INDEX artifact_objID ON blackboard_artifacts(obj_id);
CREATE INDEX artifact_artifact_objID ON blackboard_artifacts(artifact_obj_id);
CREATE INDEX artifact_typeID ON blackboard_artifacts(artifact_type_id);
CREATE TABLE blackboard_attributes (artifact_id INTEGER NOT NULL, artifact_type_id INTEGER NOT NULL, source TEXT, context TEXT, attribute_type_id INTEGER NOT NULL, value_type INTEGER NOT NULL, value_byte BLOB, value_text TEXT, value_int32 INTEGER, value_int64 INTEGER, value_double NUMERIC(20, 10));
CREATE INDEX attrsArtifactID ON blackboard_attributes(artifact_id);
CREATE TABLE blackboard_artifact_types (artifact_type_id INTEGER PRIMARY KEY, type_name TEXT NOT NULL, display_name TEXT, category_type INTEGER DEFAULT 0);
CREATE TABLE blackboard_attribute_types (attribute_type_id INTEGER PRIMARY KEY, type_name TEXT NOT NULL, display_name TEXT, value_type INTEGER NOT NULL);
CREATE TABLE ingest_module_types (type_id INTEGER PRIMARY KEY, type_name TEXT NOT NULL);
CREATE TABLE ingest_job_status_types (type_id INTEGER PRIMARY KEY, type_name TEXT NOT NULL);
CREATE TABLE ingest_modules (ingest_module_id INTEGER PRIMARY KEY, display_name TEXT NOT NULL, unique_name TEXT UNIQUE NOT NULL, type_id INTEGER NOT NULL, version TEXT NOT NULL);
CREATE TABLE ingest_jobs (ingest_job_id INTEGER PRIMARY KEY, obj_id INTEGER NOT NULL, host_name TEXT NOT NULL, start_date_time INTEGER NOT NULL, end_date_time INTEGER NOT NULL, status_id INTEGER NOT NULL, settings_dir TEXT);
CREATE TABLE ingest_job_modules (ingest_job_id INTEGER, ingest_module_id INTEGER, pipeline_position INTEGER, PRIMARY KEY(ingest_job_id, ingest_module_id));
CREATE TABLE reports (obj_id INTEGER PRIMARY KEY, path TEXT NOT NULL, crtime INTEGER NOT NULL, src_module_name TEXT NOT NULL, report_name TEXT NOT NULL);
CREATE TABLE account_types (account_type_id INTEGER PRIMARY KEY, type_name TEXT UNIQUE NOT NULL, display_name TEXT NOT NULL);
CREATE TABLE accounts (account_id INTEGER PRIMARY KEY, account_type_id INTEGER NOT NULL, account_unique_identifier TEXT NOT NULL, UNIQUE(account_type_id, account_unique_identifier));
CREATE TABLE account_relationships (relationship_id INTEGER PRIMARY KEY, account1_id INTEGER NOT NULL, account2_id INTEGER NOT NULL, relationship_source_obj_id INTEGER NOT NULL, date_time INTEGER, relationship_type INTEGER NOT NULL, data_source_obj_id INTEGER NOT NULL, UNIQUE(account1_id, account2_id, relationship_source_obj_id));
CREATE INDEX relationships_account1 ON account_relationships(account1_id);
CREATE INDEX relationships_account2 ON account_relationships(account2_id);
CREATE INDEX relationships_relationship_source_obj_id ON account_relationships(relationship_source_obj_id);
CREATE INDEX relationships_date_time ON account_relationships(date_time);
CREATE INDEX relationships_relationship_type ON account_relationships(relationship_type);
CREATE INDEX relationships_data_source_obj_id ON account_relationships(data_source_obj_id);
CREATE TABLE tsk_event_types (event_type_id INTEGER PRIMARY KEY, display_name TEXT UNIQUE NOT NULL, super_type_id INTEGER);
CREATE TABLE tsk_event_descriptions (event_description_id INTEGER PRIMARY KEY, full_description TEXT NOT NULL, med_description TEXT, short_description TEXT, data_source_obj_id INTEGER NOT NULL, content_obj_id INTEGER NOT NULL, artifact_id INTEGER, hash_hit INTEGER NOT NULL, tagged INTEGER NOT NULL, UNIQUE (full_description, content_obj_id, artifact_id));
CREATE INDEX events_data_source_obj_id ON tsk_event_descriptions(data_source_obj_id);
CREATE INDEX events_content_obj_id ON tsk_event_descriptions(content_obj_id);
CREATE INDEX events_artifact_id ON tsk_event_descriptions(artifact_id);
CREATE TABLE tsk_events (event_id INTEGER PRIMARY KEY, event_type_id INTEGER NOT NULL, event_description_id INTEGER NOT NULL, time INTEGER NOT NULL, UNIQUE (event_type_id, event_description_id, time));
CREATE INDEX events_sub_type_time ON tsk_events(event_type_id, time);
CREATE INDEX events_time ON tsk_events(time);
CREATE TABLE tsk_examiners (examiner_id INTEGER PRIMARY KEY, login_name TEXT NOT NULL, display_name TEXT, UNIQUE(login_name));
CREATE TABLE content_tags (tag_id INTEGER PRIMARY KEY, obj_id INTEGER NOT NULL, tag_name_id INTEGER NOT NULL, comment TEXT NOT NULL, begin_byte_offset INTEGER NOT NULL, end_byte_offset INTEGER NOT NULL, examiner_id INTEGER);
CREATE TABLE blackboard_artifact_tags (tag_id INTEGER PRIMARY KEY, artifact_id INTEGER NOT NULL, tag_name_id INTEGER NOT NULL, comment TEXT NOT NULL, examiner_id INTEGER);
INSERT INTO tsk_db_info (schema_ver, tsk_ver, schema_minor_ver) VALUES (8, 68223487, 4);
INSERT INTO tsk_db_info_extended (name, value) VALUES ('TSK_VERSION', '68223487');
INSERT INTO tsk_db_info_extended (name, value) VALUES ('SCHEMA_MAJOR_VERSION', '8');
INSERT INTO tsk_db_info_extended (name, value) VALUES ('SCHEMA_MINOR_VERSION', '4');
INSERT INTO tsk_db_info_extended (name, value) VALUES ('CREATION_SCHEMA_MAJOR_VERSION', '8');
INSERT INTO tsk_db_info_extended (name, value) VALUES ('CREATION_SCHEMA_MINOR_VERSION', '4');
INSERT INTO tsk_event_types (event_type_id, display_name, super_type_id) VALUES (0, 'Event Types', NULL);
INSERT INTO tsk_event_types (event_type_id, display_name, super_type_id) VALUES (1, 'File System', 0);
INSERT INTO tsk_event_types (event_type_id, display_name, super_type_id) VALUES (2, 'Web Activity', 0);
INSERT INTO tsk_event_types (event_type_id, display_name, super_type_id) VALUES (3, 'Misc Types', 0);
INSERT INTO tsk_event_types (event_type_id, display_name, super_type_id) VALUES (4, 'Modified', 1);
INSERT INTO tsk_event_types (event_type_id, display_name, super_type_id) VALUES (5, 'Accessed', 1);
INSERT INTO tsk_event_types (event_type_id, display_name, super_type_id) VALUES (6, 'Created', 1);
INSERT INTO tsk_event_types (event_type_id, display_name, super_type_id) VALUES (7, 'Changed', 1);
";

/// The rows Autopsy writes for `write` (applied, with `reply`).
pub(super) fn after(write: &Write, reply: &Reply, conn: &mut Conn) -> Result<(), DbError> {
    match (write, reply) {
        (Write::Evidence(e), Reply::Id(_)) => {
            conn.execute(
                "INSERT INTO tsk_objects (obj_id, par_obj_id, type) VALUES (?1, NULL, ?2)",
                &[1i64.into(), OBJ_IMAGE.into()],
            )?;
            conn.execute(
                "INSERT INTO tsk_image_info (obj_id, type, ssize, tzone, size, display_name) VALUES (1, 0, 512, '', ?1, ?2)",
                &[(e.media_size as i64).into(), e.path.clone().into()],
            )?;
            conn.execute(
                "INSERT INTO tsk_image_names (obj_id, name, sequence) VALUES (1, ?1, 0)",
                &[e.path.clone().into()],
            )?;
            conn.execute(
                "INSERT INTO data_source_info (obj_id, device_id, time_zone) VALUES (1, ?1, '')",
                &[e.path.clone().into()],
            )?;
        }
        (Write::Volume(v), Reply::Id(id)) => {
            let obj = FS_OBJ_BASE + id;
            conn.execute(
                "INSERT INTO tsk_objects (obj_id, par_obj_id, type) VALUES (?1, 1, ?2)",
                &[obj.into(), OBJ_FS.into()],
            )?;
            conn.execute(
                "INSERT INTO tsk_fs_info (obj_id, data_source_obj_id, img_offset, fs_type, block_size, block_count, root_inum, first_inum, last_inum, display_name)
                 VALUES (?1, 1, ?2, 0, 512, ?3, 0, 0, 0, ?4)",
                &[
                    obj.into(),
                    (v.offset as i64).into(),
                    ((v.length / 512) as i64).into(),
                    v.description.clone().into(),
                ],
            )?;
        }
        (Write::File { file: f, .. }, reply) => {
            // A file with parse errors replies with its id (its error
            // rows were inserted after it).
            let id = file_id(reply, conn)?;
            let obj = FILE_OBJ_BASE + id;
            let fs_obj = FS_OBJ_BASE + f.volume_id;
            // TSK's parent paths start at the root: `/`, `/dir/`.
            let parent_path = match split_path(&f.path).0 {
                p if p.starts_with('/') => p.to_string(),
                p => format!("/{p}"),
            };
            // The parent directory's object: TSK looks it up for every
            // file it adds (the root's parent is the file system).
            let parent = match parent_path.trim_end_matches('/').rsplit_once('/') {
                Some((grand, name)) if !name.is_empty() => conn
                    .query(
                        "SELECT obj_id FROM tsk_files WHERE fs_obj_id = ?1 AND parent_path = ?2 AND name = ?3 LIMIT 1",
                        &[fs_obj.into(), format!("{grand}/").into(), name.to_string().into()],
                    )?
                    .into_iter()
                    .next()
                    .and_then(|mut r| r.get::<i64>(0).ok()),
                _ => None,
            };
            conn.execute(
                "INSERT INTO tsk_objects (obj_id, par_obj_id, type) VALUES (?1, ?2, ?3)",
                &[obj.into(), parent.unwrap_or(fs_obj).into(), OBJ_FILE.into()],
            )?;
            let dir = matches!(f.kind, "directory" | "virtual-directory");
            let [mtime, atime, ctime, crtime] = f.times;
            let meta_addr: Option<i64> = f
                .meta_addr
                .split(|c: char| !c.is_ascii_digit())
                .next()
                .and_then(|d| d.parse().ok());
            let runs = f.content.runs().map(|r| r.data_runs()).unwrap_or_default();
            let extension = extension(&f.name);
            // APFS compression: TSK names the row after the decompressed
            // attribute it reads (`NAME:DECOMP`), inline (held in the
            // record) or in the resource fork.
            let compressed = f.fs_type == FsKind::Apfs
                && matches!(
                    f.content,
                    StoredContent::Decmpfs { .. } | StoredContent::Resident(_)
                );
            let row = TskFile {
                obj,
                fs_obj,
                fs_type: f.fs_type,
                compressed,
                name: if compressed {
                    format!("{}:DECOMP", f.name)
                } else {
                    f.name.clone()
                },
                meta_addr,
                kind: if dir { TskKind::Dir } else { TskKind::File },
                allocated: f.allocated,
                size: f.size,
                times: f.times,
                owner: f.owner,
                parent_path: parent_path.clone(),
                extension,
            };
            row.insert(conn, &runs)?;
            // The timeline: a description of the file and an event per
            // time it has (TSK's modified/accessed/created/changed).
            let times = [(4i64, mtime), (5, atime), (6, crtime), (7, ctime)];
            if times.iter().any(|(_, t)| t.is_some()) {
                let description = format!("{parent_path}{}", f.name);
                conn.execute(
                    "INSERT INTO tsk_event_descriptions (full_description, med_description, short_description, data_source_obj_id, content_obj_id, artifact_id, hash_hit, tagged)
                     VALUES (?1, NULL, NULL, 1, ?2, NULL, 0, 0)",
                    &[description.into(), obj.into()],
                )?;
                let described = conn.last_insert_id()?;
                for (event_type, t) in times {
                    if let Some(t) = t {
                        conn.execute(
                            "INSERT OR IGNORE INTO tsk_events (event_type_id, event_description_id, time) VALUES (?1, ?2, ?3)",
                            &[event_type.into(), described.into(), t.into()],
                        )?;
                    }
                }
            }
            // What TSK lists beside: a directory's `.` and `..`, a
            // file's slack as a file of its own.
            let extra = |k: i64| EXTRA_OBJ_BASE + 4 * id + k;
            if dir {
                let inside = format!("{parent_path}{}/", f.name);
                for (k, name) in [(1, "."), (2, "..")] {
                    conn.execute(
                        "INSERT INTO tsk_objects (obj_id, par_obj_id, type) VALUES (?1, ?2, ?3)",
                        &[extra(k).into(), obj.into(), OBJ_FILE.into()],
                    )?;
                    TskFile {
                        obj: extra(k),
                        name: name.to_string(),
                        parent_path: inside.clone(),
                        extension: None,
                        ..row.clone()
                    }
                    .insert(conn, &[])?;
                }
            }
            let slack = f.slack.as_ref().map(|s| s.data_runs()).unwrap_or_default();
            if !slack.is_empty() {
                conn.execute(
                    "INSERT INTO tsk_objects (obj_id, par_obj_id, type) VALUES (?1, ?2, ?3)",
                    &[
                        extra(3).into(),
                        parent.unwrap_or(fs_obj).into(),
                        OBJ_FILE.into(),
                    ],
                )?;
                TskFile {
                    obj: extra(3),
                    name: format!("{}-slack", f.name),
                    kind: TskKind::Slack,
                    size: slack.iter().map(|(_, l)| l).sum(),
                    ..row
                }
                .insert(conn, &slack)?;
            }
        }
        (Write::VolumeFs(v), _) => {
            // TSK_FS_TYPE_ENUM, as tsk_loaddb stores it (checked against
            // tsk_loaddb on each file system).
            let code: i64 = match v.fs_type.as_str() {
                "NTFS" => 0x1,
                "FAT12" => 0x2,
                "FAT16" => 0x4,
                "FAT32" => 0x8,
                "exFAT" => 0xa,
                "Ext2" => 0x80,
                "Ext3" => 0x100,
                "Ext4" => 0x2000,
                "HFS+" => 0x1000,
                "ISO9660" => 0x800,
                "APFS" => 0x10000,
                _ => 0,
            };
            conn.execute(
                "UPDATE tsk_fs_info SET fs_type = ?1 WHERE obj_id = ?2",
                &[code.into(), (FS_OBJ_BASE + v.volume_id).into()],
            )?;
        }
        (Write::FileDigests(d), _) => {
            // Autopsy's hash lookup and file type modules each update the
            // file's row; caseload records both results at once.
            conn.execute(
                "UPDATE tsk_files SET md5 = ?1, mime_type = ?2, known = 0 WHERE obj_id = ?3",
                &[
                    d.md5.clone().into(),
                    d.signature.into(),
                    (FILE_OBJ_BASE + d.file_id).into(),
                ],
            )?;
        }
        _ => {}
    }
    Ok(())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TskKind {
    File,
    Dir,
    Slack,
}

/// One `tsk_files` row and its layout.
#[derive(Debug, Clone)]
struct TskFile {
    obj: i64,
    fs_obj: i64,
    /// The file system (`NewFile::fs_type`).
    fs_type: FsKind,
    /// APFS-compressed (TSK's COMP flag).
    compressed: bool,
    name: String,
    meta_addr: Option<i64>,
    kind: TskKind,
    allocated: bool,
    size: u64,
    times: [Option<i64>; 4],
    /// Permission bits, user and group id.
    owner: [i64; 3],
    parent_path: String,
    extension: Option<String>,
}

impl TskFile {
    /// `attr_type` as tsk_loaddb stores it for an allocated entry: the
    /// file system's data attribute (NTFS `$DATA` 128 and a folder's
    /// `$INDEX_ROOT` 144, APFS's 4352 for files), else DEFAULT (1).
    /// Deleted entries keep the older rule (128 where runs are known, else
    /// 1): TSK's vary there (NTFS: 128, 0 or none).
    fn attr_type(&self, has_runs: bool) -> i64 {
        let dir = self.kind == TskKind::Dir;
        match (self.allocated, self.fs_type, dir) {
            (true, FsKind::Ntfs, false) => 128,
            (true, FsKind::Ntfs, true) => 144,
            (true, FsKind::Apfs, false) => 4352,
            (true, _, _) => 1,
            (false, _, _) if has_runs => 128,
            (false, _, _) => 1,
        }
    }

    /// `meta_flags` as tsk_loaddb stores them: ALLOC (1) or UNALLOC (2),
    /// with USED (4) where TSK's file system sets it (not APFS, not a
    /// deleted exFAT entry) and COMP (16) on APFS-compressed files.
    fn meta_flags(&self) -> i64 {
        match (self.allocated, self.fs_type) {
            (true, FsKind::Apfs) => 1 | if self.compressed { 16 } else { 0 },
            (true, _) => 1 | 4,
            (false, FsKind::ExFat) => 2,
            (false, _) => 2 | 4,
        }
    }

    fn insert(&self, conn: &mut Conn, runs: &[(u64, u64)]) -> Result<(), DbError> {
        let dir = self.kind == TskKind::Dir;
        let [mtime, atime, ctime, crtime] = self.times;
        conn.execute(
            "INSERT INTO tsk_files (obj_id, fs_obj_id, data_source_obj_id, attr_type, attr_id, name, meta_addr, meta_seq, type, has_layout,
                has_path, dir_type, meta_type, dir_flags, meta_flags, size, ctime, crtime, atime, mtime, mode, uid, gid, md5, known,
                parent_path, mime_type, extension)
             VALUES (?1, ?2, 1, ?3, 0, ?4, ?5, 0, ?6, ?7, 1, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?19, ?20, ?21, NULL, 0, ?17, NULL, ?18)",
            &[
                self.obj.into(),
                self.fs_obj.into(),
                self.attr_type(!runs.is_empty()).into(),
                self.name.clone().into(),
                self.meta_addr.into(),
                // TSK_DB_FILES_TYPE_FS, or _SLACK.
                if self.kind == TskKind::Slack { 7i64 } else { 0 }.into(),
                // tsk_loaddb leaves `has_layout` unset (the runs are in
                // tsk_file_layout).
                None::<i64>.into(),
                // TSK_FS_NAME_TYPE_DIR / _REG, META_TYPE_DIR / _REG.
                if dir { 3i64 } else { 5 }.into(),
                if dir { 2i64 } else { 1 }.into(),
                // NAME_FLAG_ALLOC / _UNALLOC.
                if self.allocated { 1i64 } else { 2 }.into(),
                self.meta_flags().into(),
                (self.size as i64).into(),
                ctime.into(),
                crtime.into(),
                atime.into(),
                mtime.into(),
                self.parent_path.clone().into(),
                self.extension.clone().into(),
                // TSK's mode column holds the permission bits alone.
                (self.owner[0] & 0o7777).into(),
                self.owner[1].into(),
                self.owner[2].into(),
            ],
        )?;
        for (seq, (start, len)) in runs.iter().enumerate() {
            conn.execute(
                "INSERT INTO tsk_file_layout (obj_id, byte_start, byte_len, sequence) VALUES (?1, ?2, ?3, ?4)",
                &[
                    self.obj.into(),
                    (*start as i64).into(),
                    (*len as i64).into(),
                    (seq as i64).into(),
                ],
            )?;
        }
        Ok(())
    }
}
