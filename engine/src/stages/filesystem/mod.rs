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
use std::io::Write as _;
use std::ops::ControlFlow;

mod spool;
use std::sync::atomic::Ordering;

pub(super) const SPEC: StageSpec = StageSpec {
    name: "filesystem",
    about: "volumes and file systems: a database row per partition and per file record, allocated and deleted",
    build,
    needs: &[],
    default: super::Inclusion::Always,
    preflight: None,
    units: crate::stage::Units::Parts,
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

/// Every value of `files.kind`, in [`FileKind`] order.
const KINDS: [&str; 5] = [
    "file",
    "directory",
    "volume-label",
    "virtual",
    "virtual-directory",
];

/// Every value of `files.recovery`, in [`Recovery`] order.
const RECOVERIES: [&str; 5] = [
    "allocated",
    "unallocated",
    "skipped-allocated",
    "overwritten",
    "unrecoverable",
];

/// The text stored in `files.kind`.
pub fn kind_name(kind: FileKind) -> &'static str {
    KINDS[match kind {
        FileKind::File => 0,
        FileKind::Directory => 1,
        FileKind::VolumeLabel => 2,
        FileKind::Virtual => 3,
        FileKind::VirtualDirectory => 4,
    }]
}

fn recovery_name(r: Recovery) -> &'static str {
    RECOVERIES[match r {
        Recovery::Allocated => 0,
        Recovery::Unallocated => 1,
        Recovery::SkippedAllocated => 2,
        Recovery::Overwritten => 3,
        Recovery::Unrecoverable => 4,
    }]
}

fn secs(t: Option<Timestamp>) -> Option<i64> {
    t.map(|t| t.secs)
}

/// `files.extents` of a record's runs.
fn extents(runs: &[Run]) -> Extents {
    Extents(runs.to_vec())
}

/// The `files` row of a record.
fn new_file(volume_id: i64, rec: FileRecord, fs_type: caseload_fs::FsKind) -> NewFile {
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
        Content::Decmpfs { runs, codec, size } => StoredContent::Decmpfs {
            runs: extents(runs),
            codec: *codec,
            size: *size,
        },
        Content::Encoded { encoding, runs } => StoredContent::Encoded {
            encoding: match encoding {
                caseload_fs::Encoding::NtfsCompressed => "ntfs-compressed",
                caseload_fs::Encoding::NtfsEncrypted => "ntfs-encrypted",
                caseload_fs::Encoding::ApfsCompressed => "apfs-compressed",
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
        fs_type,
        size: rec.size,
        allocated: rec.allocated,
        recovery: recovery_name(rec.recovery),
        recoverable: rec.recoverable(),
        attributes: i64::from(rec.attributes),
        owner: [
            i64::from(rec.owner.mode),
            i64::from(rec.owner.uid),
            i64::from(rec.owner.gid),
        ],
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

/// What the walk of one volume produces, in order: stored at once in a
/// run, spooled for the finish under a planned case's worker (`spool`,
/// which writes it with its file record `F` in a form of its own).
#[derive(Debug, serde::Serialize, serde::Deserialize)]
#[serde(tag = "event", rename_all = "kebab-case")]
pub(crate) enum Event<F = Box<NewFile>> {
    /// A file record.
    File(F),
    /// A problem with the volume.
    Problem {
        /// How bad.
        severity: Severity,
        /// Damaged sectors.
        sectors: Option<(u64, u64)>,
        /// What happened.
        message: String,
    },
    /// What the volume's file system is.
    VolumeFs {
        /// Its type.
        fs_type: String,
        /// Its label.
        fs_label: Option<String>,
        /// Whether it was walked.
        parsed: bool,
    },
}

impl<F> Event<F> {
    /// The same event with its file record converted by `f`.
    fn map_file<G, E>(self, f: impl FnOnce(F) -> Result<G, E>) -> Result<Event<G>, E> {
        Ok(match self {
            Event::File(file) => Event::File(f(file)?),
            Event::Problem {
                severity,
                sectors,
                message,
            } => Event::Problem {
                severity,
                sectors,
                message,
            },
            Event::VolumeFs {
                fs_type,
                fs_label,
                parsed,
            } => Event::VolumeFs {
                fs_type,
                fs_label,
                parsed,
            },
        })
    }
}

/// Store one event of volume row `volume_id`.
fn apply(ctx: &StageContext<'_>, volume_id: i64, event: Event) -> Result<(), StageError> {
    match event {
        Event::File(mut file) => {
            file.volume_id = volume_id;
            ctx.recorded
                .errors
                .fetch_add(file.errors.len() as u64, Ordering::Relaxed);
            ctx.db.writer().exec(Write::File {
                run_id: ctx.run_id,
                stage: ctx.stage,
                file,
            })?;
        }
        Event::Problem {
            severity,
            sectors,
            message,
        } => ctx.record(
            severity,
            Problem {
                item_kind: Some(ItemKind::Volume),
                item_id: Some(volume_id),
                sectors,
                message,
                ..Problem::default()
            },
        )?,
        Event::VolumeFs {
            fs_type,
            fs_label,
            parsed,
        } => ctx.db.writer().exec(Write::VolumeFs(VolumeFs {
            volume_id,
            fs_type,
            fs_label,
            parsed,
        }))?,
    }
    Ok(())
}

fn fs_errors(
    errors: &[ProcessingError],
    dropped: u64,
    emit: &mut dyn FnMut(Event) -> Result<(), StageError>,
) -> Result<(), StageError> {
    for e in errors {
        emit(Event::Problem {
            severity: Severity::Error,
            sectors: e.offset.map(|o| (o / 512, o / 512)),
            message: e.to_string(),
        })?;
    }
    if dropped > 0 {
        emit(Event::Problem {
            severity: Severity::Error,
            sectors: None,
            message: format!("{dropped} further errors on this volume were counted but not kept"),
        })?;
    }
    Ok(())
}

/// What the walk of volumes counted.
#[derive(Debug, Default, Clone, Copy)]
struct Counts {
    parsed: u64,
    records: u64,
    deleted: u64,
}

impl Counts {
    fn plus(self, o: Counts) -> Counts {
        Counts {
            parsed: self.parsed + o.parsed,
            records: self.records + o.records,
            deleted: self.deleted + o.deleted,
        }
    }

    fn into_summary(self, volumes: Option<u64>) -> StageSummary {
        let mut summary = StageSummary {
            items: self.records,
            ..StageSummary::default()
        };
        let d = &mut summary.details;
        if let Some(v) = volumes {
            d.insert("volumes".into(), v.into());
        }
        d.insert("parsed_file_systems".into(), self.parsed.into());
        d.insert("records".into(), self.records.into());
        d.insert("deleted_records".into(), self.deleted.into());
        summary
    }
}

fn scheme_name(scheme: Scheme) -> &'static str {
    match scheme {
        Scheme::Mbr => "mbr",
        Scheme::Gpt => "gpt",
        Scheme::None => "none",
    }
}

/// Store the row of volume `index`; its id.
fn insert_volume(
    ctx: &StageContext<'_>,
    index: usize,
    scheme: Scheme,
    part: &caseload_fs::Partition,
) -> Result<i64, StageError> {
    Ok(ctx
        .db
        .writer()
        .call(Write::Volume(NewVolume {
            evidence_id: ctx.evidence_id,
            slot: index as i64,
            scheme: scheme_name(scheme),
            offset: part.offset,
            length: part.length,
            type_code: format!("{:?}", part.ptype),
            description: part.description.clone(),
        }))?
        .id()?)
}

/// Record the volume system's own errors (not a partition's).
fn record_volume_system(
    ctx: &StageContext<'_>,
    vs: &caseload_fs::VolumeSystem,
) -> Result<(), StageError> {
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
    Ok(())
}

/// What the split of a planned case left its finish: the volume rows, in
/// slot order.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct SplitFacts {
    volume_ids: Vec<i64>,
}

impl Stage for Filesystem {
    fn name(&self) -> &'static str {
        "filesystem"
    }

    fn run(&self, ctx: &StageContext<'_>) -> Result<StageSummary, StageError> {
        match ctx.scope {
            crate::stage::Scope::Part { part, .. } => return self.walk_part(ctx, part),
            crate::stage::Scope::Finish => return self.store_spools(ctx),
            _ => {}
        }
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
        record_volume_system(ctx, &vs)?;
        let mut counts = Counts::default();
        for (index, part) in vs.partitions.iter().enumerate() {
            ctx.check_cancel()?;
            let volume_id = insert_volume(ctx, index, vs.scheme, part)?;
            let c = self.walk_volume(ctx, &reader, part, &mut |e| apply(ctx, volume_id, e))?;
            counts = counts.plus(c);
        }
        Ok(counts.into_summary(Some(vs.partitions.len() as u64)))
    }

    /// A disk of two or more volumes is walked one volume per part: the
    /// split stores the volume rows (a single run's ids) and the volume
    /// system's errors; each part spools its walk; the finish stores the
    /// spools in order. A disk of one volume (or none readable) is one
    /// whole unit, as in a run.
    fn split(
        &self,
        ctx: &StageContext<'_>,
        _max_bytes: u64,
    ) -> Result<Vec<crate::stage::Scope>, StageError> {
        let reader = EvidenceReader(std::sync::Arc::clone(ctx.evidence));
        let vs = match caseload_fs::open_volume_system(&reader) {
            Ok(vs) if vs.partitions.len() >= 2 => vs,
            _ => return Ok(vec![crate::stage::Scope::Whole]),
        };
        record_volume_system(ctx, &vs)?;
        let mut parts = Vec::new();
        let mut volume_ids = Vec::new();
        for (index, part) in vs.partitions.iter().enumerate() {
            volume_ids.push(insert_volume(ctx, index, vs.scheme, part)?);
            parts.push(crate::stage::Scope::Part {
                part: u32::try_from(index)
                    .map_err(|_| StageError::Other("too many volumes".into()))?,
                ranges: 1,
                bytes: part.length,
            });
        }
        let facts = SplitFacts { volume_ids };
        ctx.db.writer().exec(Write::PartFacts {
            stage: "filesystem".into(),
            part: 0,
            facts: serde_json::to_string(&facts).map_err(|e| StageError::Other(e.to_string()))?,
        })?;
        Ok(parts)
    }

    fn committed(&self, ctx: &StageContext<'_>) -> Result<(), StageError> {
        if ctx.scope == crate::stage::Scope::Finish {
            ctx.case.remove_all(spool::DIR)?;
        }
        Ok(())
    }
}

impl Filesystem {
    /// Walk one partition, handing each record, problem and the file
    /// system's type to `emit` in a single run's order.
    fn walk_volume(
        &self,
        ctx: &StageContext<'_>,
        reader: &EvidenceReader,
        part: &caseload_fs::Partition,
        emit: &mut dyn FnMut(Event) -> Result<(), StageError>,
    ) -> Result<Counts, StageError> {
        let mut counts = Counts::default();
        fs_errors(&part.errors, 0, emit)?;
        let fs = match caseload_fs::open_filesystem(reader.clone(), part.offset, part.length) {
            Ok(fs) => fs,
            Err(e) => {
                emit(Event::Problem {
                    severity: Severity::Error,
                    sectors: None,
                    message: format!(
                        "file system at byte {} could not be opened: {e}",
                        part.offset
                    ),
                })?;
                return Ok(counts);
            }
        };
        let fs_kind = fs.kind();
        let fs_type = fs_kind.to_string();
        if let FileSystem::Unsupported(kind) = &fs {
            emit(Event::VolumeFs {
                fs_type: kind.to_string(),
                fs_label: None,
                parsed: false,
            })?;
            emit(Event::Problem {
                severity: Severity::Warning,
                sectors: None,
                message: format!(
                    "{kind} at byte {} is not parsed by this version; stages that need no file system still cover it",
                    part.offset
                ),
            })?;
            return Ok(counts);
        }
        counts.parsed += 1;
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
            // exFAT lists an empty label's entry as TSK names it.
            if rec.kind == FileKind::VolumeLabel
                && rec.allocated
                && rec.parent.is_empty()
                && label.is_none()
                && rec.name != "$EMPTY_VOLUME_LABEL"
            {
                label = Some(rec.name.trim_end().to_string());
            }
            counts.records += 1;
            if !rec.allocated {
                counts.deleted += 1;
            }
            ctx.progress.advance(1);
            // The volume row is the caller's: the file's is filled in
            // where it is stored.
            match emit(Event::File(Box::new(new_file(0, rec, fs_kind)))) {
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
            Ok(s) => fs_errors(&s.errors.errors, s.errors.dropped, emit)?,
            Err(e) => emit(Event::Problem {
                severity: Severity::Error,
                sectors: None,
                message: format!("walking the {fs_type} file system failed: {e}"),
            })?,
        }
        emit(Event::VolumeFs {
            fs_type,
            fs_label: label,
            parsed: true,
        })?;
        Ok(counts)
    }

    /// One volume of a planned case: its walk, spooled to the case
    /// directory for the finish.
    fn walk_part(&self, ctx: &StageContext<'_>, slot: u32) -> Result<StageSummary, StageError> {
        let reader = EvidenceReader(std::sync::Arc::clone(ctx.evidence));
        let vs = caseload_fs::open_volume_system(&reader).map_err(|e| {
            StageError::Other(format!(
                "volume system: {e}; it was read when the case was planned"
            ))
        })?;
        let part = vs.partitions.get(slot as usize).ok_or_else(|| {
            StageError::Other(format!(
                "volume {slot} is not on this evidence: not the planned evidence"
            ))
        })?;
        ctx.case.create_dir(spool::DIR)?;
        let path = spool::path(slot);
        let file = ctx.case.create(&path)?;
        let mut out = std::io::BufWriter::with_capacity(1 << 20, file);
        let mut emit = |event: Event| -> Result<(), StageError> {
            let line = spool::encode(event).map_err(|e| StageError::Other(e.to_string()))?;
            out.write_all(line.as_bytes())
                .and_then(|()| out.write_all(b"\n"))
                .map_err(|e| spool_error(&path, &e))
        };
        let counts = self.walk_volume(ctx, &reader, part, &mut emit)?;
        // On the shared mount before the unit commits: the finish may
        // run on another worker.
        let file = out
            .into_inner()
            .map_err(|e| spool_error(&path, e.error()))?;
        file.sync_all().map_err(|e| spool_error(&path, &e))?;
        let mut summary = counts.into_summary(None);
        summary.details.insert(
            "spool_bytes".into(),
            file.len().map_err(|e| spool_error(&path, &e))?.into(),
        );
        Ok(summary)
    }

    /// The finish of a planned case: every volume's spool stored in slot
    /// order (removed once that is committed: [`Stage::committed`]).
    /// Nothing when the split left the stage whole.
    fn store_spools(&self, ctx: &StageContext<'_>) -> Result<StageSummary, StageError> {
        let facts = ctx.db.reader()?.part_facts("filesystem")?;
        let Some((_, facts)) = facts.first() else {
            return Ok(StageSummary::default());
        };
        let facts: SplitFacts = serde_json::from_str(facts).map_err(|e| {
            StageError::Other(format!("the walk's plan record is not readable: {e}"))
        })?;
        for (slot, &volume_id) in facts.volume_ids.iter().enumerate() {
            let path = spool::path(slot as u32);
            let file = ctx.case.open(&path)?;
            let lines = std::io::BufReader::with_capacity(1 << 20, file);
            for (n, line) in std::io::BufRead::lines(lines).enumerate() {
                ctx.check_cancel()?;
                let line = line.map_err(|e| spool_error(&path, &e))?;
                let event = spool::decode(&line)
                    .map_err(|e| StageError::Other(format!("{path}, line {}: {e}", n + 1)))?;
                apply(ctx, volume_id, event)?;
            }
        }
        ctx.db.writer().flush()?;
        let mut summary = StageSummary::default();
        summary
            .details
            .insert("volumes".into(), (facts.volume_ids.len() as u64).into());
        summary.details.insert(
            "spools_stored".into(),
            (facts.volume_ids.len() as u64).into(),
        );
        Ok(summary)
    }
}

fn spool_error(path: &str, e: &std::io::Error) -> StageError {
    StageError::Other(format!("walk spool `{path}` in the case directory: {e}"))
}
