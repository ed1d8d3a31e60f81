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
use crate::casedb::{Extents, ItemKind, NewFile, NewVolume, StoredContent, VolumeFs, Write};
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
    needs: &[],
    default: super::Inclusion::Always,
    preflight: None,
    units: crate::stage::Units::Whole,
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

/// `files.extents` of a record's runs.
fn extents(runs: &[Run]) -> Extents {
    Extents(runs.to_vec())
}

/// The `files` row of a record.
fn new_file(volume_id: i64, rec: FileRecord) -> NewFile {
    let content = match &rec.content {
        Content::None => StoredContent::None,
        Content::Resident(bytes) => StoredContent::Resident(bytes.clone()),
        Content::Runs(runs) => StoredContent::Runs(extents(runs)),
        Content::Compressed {
            runs,
            unit,
            size,
            initialized,
        } => StoredContent::Compressed {
            runs: extents(runs),
            unit: *unit,
            size: *size,
            initialized: *initialized,
        },
        Content::Encoded { encoding, runs } => StoredContent::Encoded {
            encoding: match encoding {
                caseload_fs::Encoding::NtfsCompressed => "ntfs-compressed",
                caseload_fs::Encoding::NtfsEncrypted => "ntfs-encrypted",
            }
            .to_string(),
            runs: extents(runs),
        },
    };
    let slack = (!rec.slack.is_empty()).then(|| {
        Extents(
            rec.slack
                .iter()
                .map(|e| Run::Data {
                    offset: e.offset,
                    len: e.len,
                })
                .collect(),
        )
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
    NewFile {
        volume_id,
        meta_addr: rec.meta.to_string(),
        path: rec.display_path(),
        name: rec.tsk_name(),
        short_name: rec.short_name.clone(),
        kind: kind_name(rec.kind),
        size: rec.size,
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
        content,
        slack,
        errors: rec
            .errors
            .iter()
            .map(|e| (e.offset, e.to_string()))
            .collect(),
        raw_name: rec.raw_name,
    }
}

fn insert_file(ctx: &StageContext<'_>, file: NewFile) -> Result<(), StageError> {
    ctx.recorded
        .errors
        .fetch_add(file.errors.len() as u64, Ordering::Relaxed);
    ctx.db.writer().exec(Write::File {
        run_id: ctx.run_id,
        stage: ctx.stage,
        file: Box::new(file),
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
                item_kind: Some(ItemKind::Volume),
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
                item_kind: Some(ItemKind::Volume),
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
        let vs = match caseload_fs::open_volume_system(&reader) {
            Ok(vs) => vs,
            Err(e) => {
                // Damaged evidence under the partition tables (an E01 chunk
                // that fails its checksum): no volume can be found, but the
                // run goes on (image hash, carving and the index over raw
                // bytes need no file system); the damage is recorded.
                let sectors = match &e {
                    caseload_fs::FsError::Io { offset, len, .. } => {
                        Some((offset / 512, (offset + (*len as u64).max(1) - 1) / 512))
                    }
                    _ => None,
                };
                ctx.record(
                    Severity::Error,
                    Problem {
                        item_kind: Some(ItemKind::Evidence),
                        item_id: Some(ctx.evidence_id),
                        sectors,
                        message: format!(
                            "volume system: {e}; no volume or file system could be read"
                        ),
                        ..Problem::default()
                    },
                )?;
                caseload_fs::VolumeSystem {
                    scheme: Scheme::None,
                    sector_size: 512,
                    disk_length: ctx.evidence.size(),
                    partitions: Vec::new(),
                    tables: Vec::new(),
                    errors: Vec::new(),
                }
            }
        };
        let scheme = match vs.scheme {
            Scheme::Mbr => "mbr",
            Scheme::Gpt => "gpt",
            Scheme::None => "none",
        };
        for e in &vs.errors {
            ctx.record(
                Severity::Error,
                Problem {
                    item_kind: Some(ItemKind::Evidence),
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
            let volume_id = ctx
                .db
                .writer()
                .call(Write::Volume(NewVolume {
                    evidence_id: ctx.evidence_id,
                    slot: index as i64,
                    scheme,
                    offset: part.offset,
                    length: part.length,
                    type_code: format!("{:?}", part.ptype),
                    description: part.description.clone(),
                }))?
                .id()?;
            volumes += 1;
            record_fs_errors(ctx, volume_id, &part.errors, 0)?;
            let fs = match caseload_fs::open_filesystem(reader.clone(), part.offset, part.length) {
                Ok(fs) => fs,
                Err(e) => {
                    ctx.record(
                        Severity::Error,
                        Problem {
                            item_kind: Some(ItemKind::Volume),
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
                ctx.db.writer().exec(Write::VolumeFs(VolumeFs {
                    volume_id,
                    fs_type: kind.to_string(),
                    fs_label: None,
                    parsed: false,
                }))?;
                ctx.record(
                    Severity::Warning,
                    Problem {
                        item_kind: Some(ItemKind::Volume),
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
                match insert_file(ctx, new_file(volume_id, rec)) {
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
                        item_kind: Some(ItemKind::Volume),
                        item_id: Some(volume_id),
                        message: format!("walking the {fs_type} file system failed: {e}"),
                        ..Problem::default()
                    },
                )?,
            }
            ctx.db.writer().exec(Write::VolumeFs(VolumeFs {
                volume_id,
                fs_type,
                fs_label: label,
                parsed: true,
            }))?;
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
