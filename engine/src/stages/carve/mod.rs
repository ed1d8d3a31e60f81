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
mod meta;
mod pattern;
mod region;
mod scan;
mod signatures;
mod sink;

use super::StageSpec;
use crate::casedb::{ItemKind, Write};
use crate::digest::Algorithm;
use crate::stage::{
    Problem, ProgressUnit, Severity, Stage, StageContext, StageError, StageOptions, StageSummary,
    parse_options,
};
use formats::Format;
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
    units: crate::stage::Units::Whole,
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

impl Stage for Carve {
    fn name(&self) -> &'static str {
        "carve"
    }

    fn run(&self, ctx: &StageContext<'_>) -> Result<StageSummary, StageError> {
        ctx.db.writer().flush()?;
        let mut reader = ctx.db.reader()?;
        let first_id = reader.next_carved_id()?;
        let follow = if self.follow_fragments {
            Some(follow::fragmented_starts(&mut reader, ctx.evidence_id)?)
        } else {
            None
        };
        let volume_ids: Vec<(u64, i64)> = reader
            .volumes(ctx.evidence_id)?
            .into_iter()
            .map(|v| (v.offset, v.id))
            .collect();
        drop(reader);
        let (volumes, notes) = region::volumes(ctx.evidence, &volume_ids);
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
        ctx.progress
            .set_total(ctx.evidence.size(), ProgressUnit::Bytes);
        let threads = ctx.threads.max(1);
        let settings = scan::Settings {
            sigs: &self.sigs,
            search: self.search.as_ref(),
            block: self.block,
            readers: threads,
            in_flight: 4 + 2 * threads,
            first_id,
        };
        let sink = sink::Sink::new(ctx, self.digests, follow);
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
            let mut plan = |emit: &mut dyn FnMut(region::Region) -> bool| {
                let mut note = |n: String| {
                    notes
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .push(n)
                };
                region::plan(ctx.evidence, &volumes, self.scope, extras, emit, &mut note);
            };
            let r = scan::run(ctx, &settings, &senders, &sink.failed, &mut plan);
            drop(senders);
            r
        });
        sink.take_fatal()?;
        let outcome = outcome?;
        for n in notes
            .into_inner()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
        {
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
        let followed = follow::broken_items(ctx, &sink)?;
        if self.meta {
            fat_conflicts(ctx, first_id)?;
        }
        let mut summary = StageSummary {
            items: sink.items.load(Ordering::Relaxed),
            bytes: outcome.bytes,
            ..StageSummary::default()
        };
        let d = &mut summary.details;
        for (k, n) in ctx.db.reader()?.carved_counts(first_id, ctx.evidence_id)? {
            d.insert(k, n.into());
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
        d.insert("followed".into(), followed.into());
        Ok(summary)
    }
}

/// Mark FAT meta items whose recovered clusters hold the start of another
/// deleted entry's content: the file was fragmented (or the clusters
/// reused), so the contiguous recovery is wrong. Rows are read in order of
/// their content's offset, so memory holds one group of equal offsets.
fn fat_conflicts(ctx: &StageContext<'_>, first_id: i64) -> Result<(), StageError> {
    // The current group: rows sharing a start offset.
    let mut group: Vec<(i64, i64, i64)> = Vec::new();
    let mut conflicted = Vec::new();
    ctx.db
        .reader()?
        .fat_meta_contents(first_id, ctx.evidence_id, &mut |id, start, len| {
            if group.first().is_some_and(|g| g.1 != start) {
                // `start` is the next content start after the group's.
                for &(gid, gstart, glen) in &group {
                    if start < gstart.saturating_add(glen) {
                        conflicted.push(gid);
                    }
                }
                group.clear();
            }
            group.push((id, start, len));
            Ok(())
        })?;
    for id in conflicted {
        ctx.db.writer().exec(Write::InvalidateCarved {
            id,
            reason: "another deleted entry starts inside its clusters: fragmented or reused, so not this file".into(),
        })?;
    }
    ctx.db.writer().flush()?;
    Ok(())
}
