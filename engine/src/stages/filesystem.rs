//! `filesystem`: find the volumes on the evidence, walk every file system
//! caseload parses (FAT12/16/32, NTFS), and write a row per volume and per
//! file record (allocated and deleted) to the case database.
//!
//! The parsing itself is `caseload-fs`; this stage feeds it the evidence and
//! turns what it yields into rows. Reads of directories, FATs and MFT records
//! go through the evidence channel like every other read, and each record is
//! one queued insert: the small-random-read, many-small-writes pattern of a
//! suite's file-system pass. File systems caseload does not parse (exFAT,
//! ext, ...) are recorded with their type so later stages can still process
//! the partition's bytes.

use super::StageSpec;
use crate::source::EvidenceReader;
use crate::stage::{
    Problem, ProgressUnit, Severity, Stage, StageContext, StageError, StageOptions, StageSummary,
    parse_options,
};
use caseload_fs::{
    Content, FileKind, FileRecord, FileSystem, ProcessingError, Recovery, Run, Scheme, Timestamp,
};
use serde::Deserialize;
use std::ops::ControlFlow;
use std::sync::atomic::Ordering;

pub(super) const SPEC: StageSpec = StageSpec {
    name: "filesystem",
    about: "volumes and file systems: a database row per partition and per file record, allocated and deleted",
    build,
};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Options {
    /// List TSK's virtual files ($MBR, $FAT1, $FAT2, $OrphanFiles).
    #[serde(default = "yes")]
    virtual_files: bool,
}

fn yes() -> bool {
    true
}

fn build(options: &StageOptions) -> Result<Box<dyn Stage>, StageError> {
    let o: Options = parse_options("filesystem", options)?;
    Ok(Box::new(Filesystem {
        virtual_files: o.virtual_files,
    }))
}

/// The filesystem stage.
#[derive(Debug)]
pub struct Filesystem {
    virtual_files: bool,
}

/// The text stored in `files.kind`.
pub fn kind_name(kind: FileKind) -> &'static str {
    match kind {
        FileKind::File => "file",
        FileKind::Directory => "directory",
        FileKind::VolumeLabel => "volume-label",
        FileKind::Virtual => "virtual",
        FileKind::VirtualDirectory => "virtual-directory",
    }
}

fn recovery_name(r: Recovery) -> &'static str {
    match r {
        Recovery::Allocated => "allocated",
        Recovery::Unallocated => "unallocated",
        Recovery::SkippedAllocated => "skipped-allocated",
        Recovery::Overwritten => "overwritten",
        Recovery::Unrecoverable => "unrecoverable",
    }
}

fn secs(t: Option<Timestamp>) -> Option<i64> {
    t.map(|t| t.secs)
}

/// `files.encoding` of an NTFS LZNT1-compressed stream:
/// `ntfs-lznt1:UNIT:SIZE:INITIALIZED` (compression unit bytes, decoded size,
/// valid-data length), enough to decode it again from its stored runs.
pub const COMPRESSED_PREFIX: &str = "ntfs-lznt1:";

/// `files.extents`: JSON `[[offset, len], ...]`, sparse runs as `[null, len]`.
fn runs_json(runs: &[Run]) -> String {
    let parts: Vec<String> = runs
        .iter()
        .map(|r| match *r {
            Run::Data { offset, len } => format!("[{offset},{len}]"),
            Run::Zeros { len } => format!("[null,{len}]"),
        })
        .collect();
    format!("[{}]", parts.join(","))
}

/// The runs of a `files.extents` (or `carved_items.extents`) value, as
/// `runs_json` writes them: `(Some(offset), len)` for data, `(None, len)`
/// for a sparse run.
pub(crate) fn parse_extents(text: &str) -> Result<Vec<(Option<u64>, u64)>, serde_json::Error> {
    serde_json::from_str(text)
}

/// A file row ready to insert.
struct FileRow {
    volume_id: i64,
    meta_addr: String,
    path: String,
    name: String,
    raw_name: Vec<u8>,
    short_name: Option<String>,
    kind: &'static str,
    size: i64,
    allocated: bool,
    recovery: &'static str,
    recoverable: bool,
    attributes: i64,
    times: [Option<i64>; 4],
    fn_times: [Option<i64>; 4],
    extents: Option<String>,
    encoding: Option<String>,
    first_offset: Option<i64>,
    resident: Option<Vec<u8>>,
    slack: Option<String>,
    errors: Vec<ProcessingError>,
}

impl FileRow {
    fn from_record(volume_id: i64, rec: FileRecord) -> FileRow {
        let (extents, encoding, resident, first) = match &rec.content {
            Content::None => (None, None, None, None),
            Content::Resident(bytes) => (None, None, Some(bytes.clone()), None),
            Content::Runs(runs) => (Some(runs_json(runs)), None, None, first_data(runs)),
            Content::Compressed {
                runs,
                unit,
                size,
                initialized,
            } => (
                Some(runs_json(runs)),
                Some(format!("{COMPRESSED_PREFIX}{unit}:{size}:{initialized}")),
                None,
                first_data(runs),
            ),
            Content::Encoded { encoding, runs } => (
                Some(runs_json(runs)),
                Some(
                    match encoding {
                        caseload_fs::Encoding::NtfsCompressed => "ntfs-compressed",
                        caseload_fs::Encoding::NtfsEncrypted => "ntfs-encrypted",
                    }
                    .to_string(),
                ),
                None,
                first_data(runs),
            ),
        };
        let slack = (!rec.slack.is_empty()).then(|| {
            let parts: Vec<String> = rec
                .slack
                .iter()
                .map(|e| format!("[{},{}]", e.offset, e.len))
                .collect();
            format!("[{}]", parts.join(","))
        });
        let t = rec.times;
        let fn_times = rec
            .name_times
            .map(|n| {
                [
                    secs(n.modified),
                    secs(n.accessed),
                    secs(n.changed),
                    secs(n.created),
                ]
            })
            .unwrap_or([None; 4]);
        FileRow {
            volume_id,
            meta_addr: rec.meta.to_string(),
            path: rec.display_path(),
            name: rec.tsk_name(),
            short_name: rec.short_name.clone(),
            kind: kind_name(rec.kind),
            size: i64::try_from(rec.size).unwrap_or(i64::MAX),
            allocated: rec.allocated,
            recovery: recovery_name(rec.recovery),
            recoverable: rec.recoverable(),
            attributes: i64::from(rec.attributes),
            times: [
                secs(t.modified),
                secs(t.accessed),
                secs(t.changed),
                secs(t.created),
            ],
            fn_times,
            extents,
            encoding,
            first_offset: first.map(|o| i64::try_from(o).unwrap_or(i64::MAX)),
            resident,
            slack,
            errors: rec.errors,
            raw_name: rec.raw_name,
        }
    }
}

fn first_data(runs: &[Run]) -> Option<u64> {
    runs.iter().find_map(|r| match *r {
        Run::Data { offset, .. } => Some(offset),
        Run::Zeros { .. } => None,
    })
}

fn insert_file(ctx: &StageContext<'_>, row: FileRow) -> Result<(), StageError> {
    let run_id = ctx.run_id;
    let stage = ctx.stage;
    let errors = row.errors.len() as u64;
    ctx.recorded.errors.fetch_add(errors, Ordering::Relaxed);
    ctx.db.writer().exec(move |c| {
        c.prepare_cached(
            "INSERT INTO files (volume_id, meta_addr, path, name, raw_name, short_name, kind, size, allocated, recovery, recoverable,
                                attributes, mtime, atime, ctime, crtime, fn_mtime, fn_atime, fn_ctime, fn_crtime,
                                extents, encoding, first_offset, resident_data, slack)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22, ?23, ?24, ?25)",
        )?
        .execute(rusqlite::params![
            row.volume_id,
            row.meta_addr,
            row.path,
            row.name,
            row.raw_name,
            row.short_name,
            row.kind,
            row.size,
            row.allocated,
            row.recovery,
            row.recoverable,
            row.attributes,
            row.times[0],
            row.times[1],
            row.times[2],
            row.times[3],
            row.fn_times[0],
            row.fn_times[1],
            row.fn_times[2],
            row.fn_times[3],
            row.extents,
            row.encoding,
            row.first_offset,
            row.resident,
            row.slack,
        ])?;
        if !row.errors.is_empty() {
            let file_id = c.last_insert_rowid();
            let mut stmt = c.prepare_cached(
                "INSERT INTO processing_errors (run_id, stage, severity, item_kind, item_id, path, first_sector, last_sector, message)
                 VALUES (?1, ?2, 'error', 'file', ?3, ?4, ?5, ?5, ?6)",
            )?;
            for e in &row.errors {
                stmt.execute(rusqlite::params![
                    run_id,
                    stage,
                    file_id,
                    row.path,
                    e.offset.map(|o| (o / 512) as i64),
                    e.to_string()
                ])?;
            }
        }
        Ok(())
    })?;
    Ok(())
}

fn record_fs_errors(
    ctx: &StageContext<'_>,
    volume_id: i64,
    errors: &[ProcessingError],
    dropped: u64,
) -> Result<(), StageError> {
    for e in errors {
        ctx.record(
            Severity::Error,
            Problem {
                item_kind: Some("volume"),
                item_id: Some(volume_id),
                sectors: e.offset.map(|o| (o / 512, o / 512)),
                message: e.to_string(),
                ..Problem::default()
            },
        )?;
    }
    if dropped > 0 {
        ctx.record(
            Severity::Error,
            Problem {
                item_kind: Some("volume"),
                item_id: Some(volume_id),
                message: format!(
                    "{dropped} further errors on this volume were counted but not kept"
                ),
                ..Problem::default()
            },
        )?;
    }
    Ok(())
}

impl Stage for Filesystem {
    fn name(&self) -> &'static str {
        "filesystem"
    }

    fn run(&self, ctx: &StageContext<'_>) -> Result<StageSummary, StageError> {
        let reader = EvidenceReader(std::sync::Arc::clone(ctx.evidence));
        ctx.progress.set_total(0, ProgressUnit::Items);
        let vs = caseload_fs::open_volume_system(&reader)
            .map_err(|e| StageError::Other(format!("volume system: {e}")))?;
        let scheme = match vs.scheme {
            Scheme::Mbr => "mbr",
            Scheme::Gpt => "gpt",
            Scheme::None => "none",
        };
        for e in &vs.errors {
            ctx.record(
                Severity::Error,
                Problem {
                    item_kind: Some("evidence"),
                    item_id: Some(ctx.evidence_id),
                    sectors: e.offset.map(|o| (o / 512, o / 512)),
                    message: format!("volume system: {e}"),
                    ..Problem::default()
                },
            )?;
        }
        let mut summary = StageSummary::default();
        let mut volumes = 0u64;
        let mut parsed = 0u64;
        let mut records = 0u64;
        let mut deleted = 0u64;
        for (index, part) in vs.partitions.iter().enumerate() {
            ctx.check_cancel()?;
            let (evidence_id, offset, length, description, type_code) = (
                ctx.evidence_id,
                part.offset as i64,
                part.length as i64,
                part.description.clone(),
                format!("{:?}", part.ptype),
            );
            let slot = index as i64;
            let volume_id = ctx.db.writer().call(move |c| {
                c.execute(
                    "INSERT INTO volumes (evidence_id, slot, scheme, offset, length, type_code, description)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                    rusqlite::params![evidence_id, slot, scheme, offset, length, type_code, description],
                )?;
                Ok(c.last_insert_rowid())
            })?;
            volumes += 1;
            record_fs_errors(ctx, volume_id, &part.errors, 0)?;
            let fs = match caseload_fs::open_filesystem(reader.clone(), part.offset, part.length) {
                Ok(fs) => fs,
                Err(e) => {
                    ctx.record(
                        Severity::Error,
                        Problem {
                            item_kind: Some("volume"),
                            item_id: Some(volume_id),
                            message: format!(
                                "file system at byte {} could not be opened: {e}",
                                part.offset
                            ),
                            ..Problem::default()
                        },
                    )?;
                    continue;
                }
            };
            let fs_type = fs.kind().to_string();
            if let FileSystem::Unsupported(kind) = &fs {
                let k = kind.to_string();
                ctx.db.writer().exec(move |c| {
                    c.execute(
                        "UPDATE volumes SET fs_type = ?1 WHERE id = ?2",
                        rusqlite::params![k, volume_id],
                    )?;
                    Ok(())
                })?;
                ctx.record(
                    Severity::Warning,
                    Problem {
                        item_kind: Some("volume"),
                        item_id: Some(volume_id),
                        message: format!(
                            "{kind} at byte {} is not parsed by this version; stages that need no file system still cover it",
                            part.offset
                        ),
                        ..Problem::default()
                    },
                )?;
                continue;
            }
            parsed += 1;
            let mut label: Option<String> = None;
            let mut failure: Option<StageError> = None;
            let walk = fs.walk(|rec| {
                if ctx.cancel.load(Ordering::Relaxed) {
                    failure = Some(StageError::Interrupted);
                    return ControlFlow::Break(());
                }
                if !self.virtual_files
                    && matches!(rec.kind, FileKind::Virtual | FileKind::VirtualDirectory)
                {
                    return ControlFlow::Continue(());
                }
                if rec.kind == FileKind::VolumeLabel
                    && rec.allocated
                    && rec.parent.is_empty()
                    && label.is_none()
                {
                    label = Some(rec.name.trim_end().to_string());
                }
                records += 1;
                if !rec.allocated {
                    deleted += 1;
                }
                ctx.progress.advance(1);
                match insert_file(ctx, FileRow::from_record(volume_id, rec)) {
                    Ok(()) => ControlFlow::Continue(()),
                    Err(e) => {
                        failure = Some(e);
                        ControlFlow::Break(())
                    }
                }
            });
            if let Some(e) = failure {
                return Err(e);
            }
            match walk {
                Ok(s) => record_fs_errors(ctx, volume_id, &s.errors.errors, s.errors.dropped)?,
                Err(e) => ctx.record(
                    Severity::Error,
                    Problem {
                        item_kind: Some("volume"),
                        item_id: Some(volume_id),
                        message: format!("walking the {fs_type} file system failed: {e}"),
                        ..Problem::default()
                    },
                )?,
            }
            ctx.db.writer().exec(move |c| {
                c.execute(
                    "UPDATE volumes SET fs_type = ?1, fs_label = ?2, parsed = 1 WHERE id = ?3",
                    rusqlite::params![fs_type, label, volume_id],
                )?;
                Ok(())
            })?;
        }
        summary.items = records;
        summary.details.insert("volumes".into(), volumes.into());
        summary
            .details
            .insert("parsed_file_systems".into(), parsed.into());
        summary.details.insert("records".into(), records.into());
        summary
            .details
            .insert("deleted_records".into(), deleted.into());
        Ok(summary)
    }
}
