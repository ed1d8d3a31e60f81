//! `carve`: data and meta carving.
//!
//! Data carving finds files by their headers in the unallocated space of
//! each parsed file system (or whole partitions, or the whole image, as
//! options), ends each by its format's structure, footer or maximum size,
//! validates it where the format allows, and writes it to the case channel
//! under `carved/<type>/<nnn>/<id>.<ext>` with a `carved_items` row
//! (offset, length, type, validation, hashes, entropy). Signatures are
//! built in (JPEG, PNG, GIF, BMP, PDF, ZIP/DOCX/XLSX, SQLite, RFC 5322
//! e-mail, HTML) and/or read from a scalpel/foremost signature file.
//!
//! A data item that ends broken where a fragmented file the filesystem
//! stage mapped exactly begins is carved again along that file's runs
//! (see `follow`).
//!
//! Meta carving finds FAT directory entries and NTFS `FILE` records in
//! the same pass (unallocated space and slack; deleted entries of live
//! directories and of the MFT) and records what they say, with their
//! content where its clusters are still free.
//!
//! The evidence is read once, in order, with bounded read-ahead; the
//! per-byte work (search, hashing, verification, writing) runs on every
//! core. See `scan` for why results do not depend on the thread count.
//! Memory: the read-ahead, plus per sink worker (one per thread) the items
//! it has open and up to 16 MiB of ended items whose MD5 and SHA-1 wait to
//! be computed sixteen at a time (and as much in reused buffers; see
//! `sink`): bounded whatever the image size.

mod conf;
pub mod exercise;
mod follow;
mod formats;
mod ids;
mod meta;
mod pattern;
mod region;
mod scan;
mod signatures;
mod sink;

use super::StageSpec;
use crate::casedb::queue::WorkRange;
use crate::casedb::{ItemKind, Write};
use crate::digest::Algorithm;
use crate::stage::{
    Problem, ProgressUnit, Severity, Stage, StageContext, StageError, StageOptions, StageSummary,
    parse_options,
};
use formats::Format;
use ids::Ids;
use pattern::HeaderSearch;
use region::{Extras, Scope};
use serde::Deserialize;
use signatures::Sig;
use std::path::PathBuf;
use std::sync::atomic::Ordering;

pub(super) const SPEC: StageSpec = StageSpec {
    name: "carve",
    about: "data carving (built-in and scalpel/foremost signatures) and meta carving (FAT entries, NTFS records) into the case channel",
    build,
    needs: &[],
    default: super::Inclusion::Always,
    preflight: None,
    units: crate::stage::Units::Parts,
};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Options {
    /// `unallocated`, `partition` or `image`.
    #[serde(default = "default_scope")]
    scope: Scope,
    /// Headers only at sector starts (foremost `-q`).
    #[serde(default = "yes")]
    aligned: bool,
    /// Built-in types to carve.
    #[serde(default = "all_types")]
    types: Vec<String>,
    /// A scalpel/foremost signature file, added to the built-ins.
    signatures: Option<PathBuf>,
    /// Meta carving.
    #[serde(default = "yes")]
    meta: bool,
    /// Meta carving of file slack too.
    #[serde(default = "yes")]
    slack: bool,
    /// Digests of carved items.
    #[serde(default = "default_algorithms")]
    algorithms: Vec<Algorithm>,
    /// Entropy of carved items.
    #[serde(default = "yes")]
    entropy: bool,
    /// Keep data items that fail validation or are cut short (fragments,
    /// overwritten files), flagged `invalid` / `truncated`.
    #[serde(default)]
    keep_broken: bool,
    /// Carve a broken item again along the clusters of the fragmented file
    /// it starts, when the filesystem stage mapped that file exactly (see
    /// `follow`).
    #[serde(default = "yes")]
    follow_fragments: bool,
    /// Read block size in KiB (a tuning knob; headers straddling blocks
    /// are found whatever it is).
    #[serde(default = "default_block_kib")]
    block_kib: u64,
}

fn default_scope() -> Scope {
    Scope::Unallocated
}

fn yes() -> bool {
    true
}

fn all_types() -> Vec<String> {
    Format::all().iter().map(|f| f.name().to_string()).collect()
}

fn default_algorithms() -> Vec<Algorithm> {
    vec![Algorithm::Md5, Algorithm::Sha1]
}

fn default_block_kib() -> u64 {
    1024
}

fn config(message: impl Into<String>) -> StageError {
    StageError::Config {
        stage: "carve".into(),
        message: message.into(),
    }
}

fn build(options: &StageOptions) -> Result<Box<dyn Stage>, StageError> {
    let o: Options = parse_options("carve", options)?;
    let mut formats = Vec::new();
    for t in &o.types {
        let f = Format::from_name(t).ok_or_else(|| {
            config(format!(
                "unknown type `{t}` in `types` (built-in types: {})",
                all_types().join(", ")
            ))
        })?;
        if !formats.contains(&f) {
            formats.push(f);
        }
    }
    let mut sigs = signatures::builtin(&formats);
    if let Some(path) = &o.signatures {
        let user = conf::load(path).map_err(|e| config(e.to_string()))?;
        if let Some(s) = user.iter().find(|s| {
            s.header.len() > sink::LAG as usize
                || s.footer
                    .as_ref()
                    .is_some_and(|f| f.len() > sink::LAG as usize)
        }) {
            return Err(config(format!(
                "signature file `{}`, line {}: headers and footers longer than {} bytes are not supported",
                path.display(),
                s.line,
                sink::LAG
            )));
        }
        sigs.extend(signatures::user(user, path));
    }
    if !(1..=65_536).contains(&o.block_kib) {
        return Err(config("`block_kib` must be between 1 and 65536"));
    }
    let align = o.aligned.then_some(scan::SECTOR);
    let search = if sigs.is_empty() {
        None
    } else {
        let patterns = sigs.iter().map(|s| s.header.clone()).collect();
        Some(HeaderSearch::new(patterns, align).map_err(config)?)
    };
    if search.is_none() && !o.meta {
        return Err(config(
            "nothing to do: no types, no signature file and `meta = false`",
        ));
    }
    Ok(Box::new(Carve {
        scope: o.scope,
        sigs,
        search,
        meta: o.meta,
        slack: o.slack,
        digests: sink::Digests {
            md5: o.algorithms.contains(&Algorithm::Md5),
            sha1: o.algorithms.contains(&Algorithm::Sha1),
            sha256: o.algorithms.contains(&Algorithm::Sha256),
            entropy: o.entropy,
            keep_broken: o.keep_broken,
        },
        block: o.block_kib * 1024,
        follow_fragments: o.follow_fragments,
    }))
}

/// The header search of the built-in signatures over one block, exactly
/// as the scan's reader threads run it; public for the `carve_scan`
/// criterion bench, which measures the scanner alone.
#[derive(Debug)]
pub struct HeaderScanner(HeaderSearch);

impl HeaderScanner {
    /// The search for every built-in signature, at sector starts only
    /// (`aligned`) or at every byte.
    pub fn builtin(aligned: bool) -> Result<Self, String> {
        let patterns = signatures::builtin(&Format::all())
            .into_iter()
            .map(|s| s.header)
            .collect();
        HeaderSearch::new(patterns, aligned.then_some(scan::SECTOR)).map(HeaderScanner)
    }

    /// Header hits in `block`, whose first byte is at media offset
    /// `offset` (alignment is judged on the media).
    pub fn count(&self, block: &[u8], offset: u64) -> usize {
        let mut n = 0;
        self.0.find(block, offset, 0..block.len(), |_, _| n += 1);
        n
    }
}

/// The carve stage.
pub struct Carve {
    scope: Scope,
    sigs: Vec<Sig>,
    search: Option<HeaderSearch>,
    meta: bool,
    slack: bool,
    digests: sink::Digests,
    block: u64,
    follow_fragments: bool,
}

impl std::fmt::Debug for Carve {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Carve")
            .field("scope", &self.scope)
            .field("signatures", &self.sigs.len())
            .field("meta", &self.meta)
            .finish_non_exhaustive()
    }
}

/// Regions one part holds at most, whatever their bytes (slack regions
/// are small and many): the part's list is held in memory.
const REGIONS_PER_PART: usize = 50_000;

/// What a part of a split carve leaves its finish: how many numbers its
/// scan used and the items it followed (see `ids`).
#[derive(Debug, serde::Serialize, Deserialize)]
struct PartFacts {
    used: u64,
    followed: Vec<(u64, i64)>,
}

impl Stage for Carve {
    fn name(&self) -> &'static str {
        "carve"
    }

    fn run(&self, ctx: &StageContext<'_>) -> Result<StageSummary, StageError> {
        match ctx.scope {
            crate::stage::Scope::Finish => self.finish(ctx),
            crate::stage::Scope::Part { part, .. } => self.carve(ctx, Some(part)),
            _ => self.carve(ctx, None),
        }
    }

    fn split(
        &self,
        ctx: &StageContext<'_>,
        max_bytes: u64,
    ) -> Result<Vec<crate::stage::Scope>, StageError> {
        let (volumes, notes) = self.volumes(ctx)?;
        record_notes(ctx, notes)?;
        let mut parts = Vec::new();
        let mut ranges: Vec<WorkRange> = Vec::new();
        let (mut bytes, mut failed) = (0u64, None);
        let mut store = |ranges: &mut Vec<WorkRange>, bytes: &mut u64| {
            let part = u32::try_from(parts.len()).map_err(|_| {
                StageError::Other("more parts than a plan may hold: raise --batch-bytes".into())
            })?;
            parts.push(crate::stage::Scope::Part {
                part,
                ranges: ranges.len() as u64,
                bytes: *bytes,
            });
            ctx.db.writer().exec(Write::AddRanges {
                stage: "carve".into(),
                part,
                ranges: std::mem::take(ranges),
            })?;
            *bytes = 0;
            Ok::<(), StageError>(())
        };
        let mut notes = Vec::new();
        let extras = Extras {
            meta: self.meta,
            slack: self.slack,
        };
        region::plan(
            ctx.evidence,
            &volumes,
            self.scope,
            extras,
            &mut |r| {
                let len = r.end - r.start;
                if !ranges.is_empty()
                    && (bytes.saturating_add(len) > max_bytes || ranges.len() >= REGIONS_PER_PART)
                    && let Err(e) = store(&mut ranges, &mut bytes)
                {
                    failed = Some(e);
                    return false;
                }
                bytes += len;
                ranges.push(WorkRange {
                    start: r.start,
                    end: r.end,
                    volume_offset: r.volume.as_ref().map(|v| v.offset),
                    tag: r.tag(),
                });
                ctx.check_cancel().is_ok()
            },
            &mut |n| notes.push(n),
        );
        if let Some(e) = failed {
            return Err(e);
        }
        ctx.check_cancel()?;
        if !ranges.is_empty() {
            store(&mut ranges, &mut bytes)?;
        }
        record_notes(ctx, notes)?;
        Ok(parts)
    }
}

impl Carve {
    /// The evidence's volumes with what carving needs of their file
    /// systems, and the problems found reading them.
    fn volumes(
        &self,
        ctx: &StageContext<'_>,
    ) -> Result<(Vec<std::sync::Arc<region::Volume>>, Vec<String>), StageError> {
        let volume_ids: Vec<(u64, i64)> = ctx
            .db
            .reader()?
            .volumes(ctx.evidence_id)?
            .into_iter()
            .map(|v| (v.offset, v.id))
            .collect();
        Ok(region::volumes(ctx.evidence, &volume_ids))
    }

    /// Carve: the whole scope (`part` none), or one part of a split
    /// stage, with provisional ids.
    fn carve(&self, ctx: &StageContext<'_>, part: Option<u32>) -> Result<StageSummary, StageError> {
        ctx.db.writer().flush()?;
        let mut reader = ctx.db.reader()?;
        let first_id = reader.next_carved_id()?;
        let ids = match part {
            None => Ids::From(first_id),
            Some(part) => Ids::Provisional {
                part,
                followed: false,
            },
        };
        let follow = if self.follow_fragments {
            Some(follow::fragmented_starts(&mut reader, ctx.evidence_id)?)
        } else {
            None
        };
        let stored = match part {
            Some(p) => Some(reader.work_ranges("carve", p)?),
            None => None,
        };
        drop(reader);
        let (volumes, notes) = self.volumes(ctx)?;
        // A part's split recorded these once for the stage.
        if part.is_none() {
            record_notes(ctx, notes)?;
        }
        let regions = match stored {
            None => None,
            Some(stored) => {
                let mut regions = Vec::with_capacity(stored.len());
                for r in stored {
                    regions.push(
                        region::Region::stored(r.start, r.end, r.volume_offset, r.tag, &volumes)
                            .ok_or_else(|| {
                                StageError::Other(format!(
                                    "a stored region ({}..{}, tag {}) is not one this caseload plans: was the case planned by another version?",
                                    r.start, r.end, r.tag
                                ))
                            })?,
                    );
                }
                Some(regions)
            }
        };
        let total = regions.as_ref().map_or(ctx.evidence.size(), |r| {
            r.iter().map(|r| r.end - r.start).sum()
        });
        ctx.progress.set_total(total, ProgressUnit::Bytes);
        let threads = ctx.threads.max(1);
        let sink = sink::Sink::new(ctx, self.digests, follow);
        let settings = scan::Settings {
            sigs: &self.sigs,
            search: self.search.as_ref(),
            block: self.block,
            readers: threads,
            in_flight: 4 + 2 * threads,
            ids,
            fragmented: sink.broken.as_ref().map(|(starts, _)| starts),
        };
        let extras = Extras {
            meta: self.meta,
            slack: self.slack,
        };
        let notes = std::sync::Mutex::new(Vec::new());
        let outcome = std::thread::scope(|scope| {
            let mut senders = Vec::new();
            for _ in 0..threads {
                let (tx, rx) = crossbeam_channel::bounded(64);
                senders.push(tx);
                let sink = &sink;
                scope.spawn(move || sink.work(rx));
            }
            let mut regions = regions;
            let mut plan = |emit: &mut dyn FnMut(region::Region) -> bool| match regions.take() {
                Some(stored) => {
                    for r in stored {
                        if !emit(r) {
                            break;
                        }
                    }
                }
                None => {
                    let mut note = |n: String| {
                        notes
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner)
                            .push(n)
                    };
                    region::plan(ctx.evidence, &volumes, self.scope, extras, emit, &mut note);
                }
            };
            let r = scan::run(ctx, &settings, &senders, &sink.failed, &mut plan);
            drop(senders);
            r
        });
        sink.take_fatal()?;
        let outcome = outcome?;
        if outcome.unnumbered > 0 {
            return Err(StageError::Other(format!(
                "one part found more items than it may number ({}): plan with a smaller --batch-bytes",
                outcome.used
            )));
        }
        record_notes(
            ctx,
            notes
                .into_inner()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )?;
        if outcome.skipped > 0 {
            ctx.record(
                Severity::Warning,
                Problem {
                    message: format!(
                        "{} headers were not carved: more than {} items were open at once",
                        outcome.skipped,
                        scan::MAX_OPEN
                    ),
                    ..Problem::default()
                },
            )?;
        }
        ctx.db.writer().flush()?;
        let followed = follow::broken_items(
            ctx,
            &sink,
            part.map(|part| Ids::Provisional {
                part,
                followed: true,
            }),
        )?;
        let mut summary = StageSummary {
            items: sink.items.load(Ordering::Relaxed),
            bytes: outcome.bytes,
            ..StageSummary::default()
        };
        let d = &mut summary.details;
        match part {
            None => {
                if self.meta {
                    fat_conflicts(ctx, first_id..=i64::MAX)?;
                    ctx.db.writer().flush()?;
                }
                for (k, n) in ctx
                    .db
                    .reader()?
                    .carved_counts(first_id..=i64::MAX, ctx.evidence_id)?
                {
                    d.insert(k, n.into());
                }
            }
            Some(part) => {
                let facts = PartFacts {
                    used: outcome.used,
                    followed: followed.numbered,
                };
                ctx.db.writer().exec(Write::PartFacts {
                    stage: "carve".into(),
                    part,
                    facts: serde_json::to_string(&facts)
                        .map_err(|e| StageError::Other(e.to_string()))?,
                })?;
            }
        }
        d.insert(
            "carved_items".into(),
            sink.items.load(Ordering::Relaxed).into(),
        );
        d.insert(
            "carved_bytes".into(),
            sink.bytes.load(Ordering::Relaxed).into(),
        );
        d.insert(
            "meta_records".into(),
            sink.meta.load(Ordering::Relaxed).into(),
        );
        d.insert(
            "meta_content".into(),
            sink.meta_content.load(Ordering::Relaxed).into(),
        );
        d.insert("scanned_bytes".into(), outcome.bytes.into());
        d.insert("regions".into(), outcome.regions.into());
        d.insert("header_hits".into(), outcome.candidates.into());
        d.insert("rejected".into(), outcome.rejected.into());
        d.insert("nested".into(), outcome.nested.into());
        d.insert("skipped".into(), outcome.skipped.into());
        d.insert("followed".into(), followed.stored.into());
        Ok(summary)
    }

    /// The finish of a split carve: every part's items get the ids a
    /// single run would have given them (see `ids`), their files the
    /// matching case paths; then the case-wide checks.
    fn finish(&self, ctx: &StageContext<'_>) -> Result<StageSummary, StageError> {
        ctx.db.writer().flush()?;
        let mut reader = ctx.db.reader()?;
        let first = reader.next_carved_id()?;
        let mut used = Vec::new();
        let mut calls = Vec::new();
        for (part, facts) in reader.part_facts("carve")? {
            if part as usize != used.len() {
                return Err(StageError::Other(format!(
                    "carve part {} left nothing for the finish",
                    used.len()
                )));
            }
            let f: PartFacts = serde_json::from_str(&facts).map_err(|e| {
                StageError::Other(format!("carve part {part}'s record is not readable: {e}"))
            })?;
            used.push(f.used);
            calls.extend(f.followed);
        }
        let mut numbers = ids::Renumbering::new(first, &used);
        // Followed items come after the highest id the scan stored.
        let mut scan_top = None;
        let mut unknown = None;
        reader.provisional_carved(ctx.evidence_id, &mut |id, _| {
            match ids::decode(id) {
                Some(p) if p.followed => {}
                _ => match numbers.final_id(id) {
                    Some(f) => scan_top = scan_top.max(Some(f)),
                    None => unknown = unknown.or(Some(id)),
                },
            }
            Ok(())
        })?;
        numbers.follow(scan_top.map_or(first, |t| t + 1), calls);
        // FAT conflicts are judged on the stored rows before they move;
        // their counts are corrected for the rows invalidated here, which
        // this unit's readers cannot see before its commit.
        let invalidated = if self.meta {
            fat_conflicts(ctx, i64::MIN..=-1)?
        } else {
            Vec::new()
        };
        let mut counts: std::collections::BTreeMap<String, u64> = reader
            .carved_counts(i64::MIN..=-1, ctx.evidence_id)?
            .into_iter()
            .collect();
        for old in invalidated {
            if old != "invalid" {
                if let Some(n) = counts.get_mut(&format!("meta_{old}")) {
                    *n = n.saturating_sub(1);
                }
                *counts.entry("meta_invalid".into()).or_default() += 1;
            }
        }
        let mut moved = 0u64;
        reader.provisional_carved(ctx.evidence_id, &mut |id, path| {
            let Some(to) = numbers.final_id(id) else {
                unknown = unknown.or(Some(id));
                return Ok(());
            };
            let case_path = match path {
                Some(old) => {
                    let new = ids::moved_path(&old, to);
                    move_file(ctx, std::path::Path::new(&old), &new)?;
                    moved += 1;
                    Some(new.display().to_string())
                }
                None => None,
            };
            ctx.db.writer().exec(Write::RenumberCarved {
                from: id,
                to,
                case_path,
            })?;
            Ok(())
        })?;
        if let Some(id) = unknown {
            return Err(StageError::Other(format!(
                "carved item {id} was numbered by no part the finish knows of"
            )));
        }
        let mut summary = StageSummary::default();
        for (k, n) in counts {
            summary.details.insert(k, n.into());
        }
        summary.details.insert("files_moved".into(), moved.into());
        Ok(summary)
    }
}

/// Move an item's file to its final case path. A finish redone after a
/// lost lease finds files it had moved already: those are left.
fn move_file(
    ctx: &StageContext<'_>,
    old: &std::path::Path,
    new: &std::path::Path,
) -> Result<(), crate::channel::ChannelError> {
    if let Some(parent) = new.parent() {
        ctx.case.create_dir(parent)?;
    }
    match ctx.case.rename(old, new) {
        Ok(()) => Ok(()),
        Err(_) if !ctx.case.exists(old) && ctx.case.exists(new) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Record problems found reading the evidence's layout as warnings.
fn record_notes(ctx: &StageContext<'_>, notes: Vec<String>) -> Result<(), StageError> {
    for n in notes {
        ctx.record(
            Severity::Warning,
            Problem {
                item_kind: Some(ItemKind::Evidence),
                item_id: Some(ctx.evidence_id),
                message: n,
                ..Problem::default()
            },
        )?;
    }
    Ok(())
}

/// Mark FAT meta items whose recovered clusters hold the start of another
/// deleted entry's content: the file was fragmented (or the clusters
/// reused), so the contiguous recovery is wrong. Rows are read in order of
/// their content's offset, so memory holds one group of equal offsets.
/// Returns the validations the invalidated rows had.
fn fat_conflicts(
    ctx: &StageContext<'_>,
    ids: std::ops::RangeInclusive<i64>,
) -> Result<Vec<String>, StageError> {
    // The current group: rows sharing a start offset.
    let mut group: Vec<crate::casedb::FatMetaContent> = Vec::new();
    let mut conflicted = Vec::new();
    ctx.db
        .reader()?
        .fat_meta_contents(ids, ctx.evidence_id, &mut |row| {
            if group.first().is_some_and(|g| g.start != row.start) {
                // `row` starts the next content after the group's.
                for g in group.drain(..) {
                    if row.start < g.start.saturating_add(g.length) {
                        conflicted.push((g.id, g.validation));
                    }
                }
            }
            group.push(row);
            Ok(())
        })?;
    let mut validations = Vec::with_capacity(conflicted.len());
    for (id, validation) in conflicted {
        ctx.db.writer().exec(Write::InvalidateCarved {
            id,
            reason: "another deleted entry starts inside its clusters: fragmented or reused, so not this file".into(),
        })?;
        validations.push(validation);
    }
    Ok(validations)
}
