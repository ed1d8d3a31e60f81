//! `kff`: the Known File Filter. Every file's and carved item's hashes
//! (whichever `file-hash` and `carve` computed: MD5, SHA-1, SHA-256) are
//! looked up in the hash library's sets; each match is a `hits` row (kind
//! `kff`, name = set, category `known`/`notable`, detail = the matching
//! hashes), the item's `kff` column becomes `notable` (any notable match) or
//! `known`, and each notable match is also recorded as a finding.
//!
//! The library is a separate SQLite file (`kff.sqlite` in the database
//! channel directory unless `library` names another), opened through the
//! case's counting VFS: every lookup's page reads are charged to the
//! database channel. Lookups are point queries spread over a library far
//! larger than memory, the small random reads that made database IOPS
//! decisive in the FTK study. Worker threads each hold a connection and
//! take contiguous slices of a page of items; results are written in item
//! order, so the case database does not depend on the thread count.
//!
//! A profile that keeps the KFF in the case database (ftk4: FTK 4 moved
//! its KFF library into its database) has the stage's preparation copy the
//! chosen sets from the library file into the case's PostgreSQL tables
//! (`casedb::LibraryLoader`) before processing starts, outside the stage's
//! time, as FTK's library is there before a case is processed; the stage
//! then looks every hash up on the database server, one indexed query per
//! hash on a connection per thread.
//!
//! Excluding known files from later work, as suites do, is the later
//! stages' business: they read `files.kff` (the `index` stage skips
//! `kff = 'known'`), so `kff` must run before them in the stage list.
//!
//! Options: `library` (path of the library), `sets` (names of the sets to
//! use; default every complete set), `carved` (also look up carved items;
//! default true).

use super::StageSpec;
use crate::casedb::{CaseReader, HashedTable, KffHit, LibrarySet, Write};
use crate::hashset::{
    Category, HashKind, HashSetError, Library, Lookup, Query, SetInfo, SetLookup, find_parallel,
};
use crate::source::hex;
use crate::stage::{
    Preparation, Problem, ProgressUnit, Severity, Stage, StageContext, StageError, StageOptions,
    StageSummary, parse_options,
};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::PathBuf;

pub(super) const SPEC: StageSpec = StageSpec {
    name: "kff",
    about: "Known File Filter: look up every file's and carved item's hashes in the hash library's known and notable sets",
    build,
    needs: &[(
        &["file-hash", "carve"],
        "it looks up the hashes those stages compute",
    )],
    default: super::Inclusion::WhenConfigured,
    preflight: Some(preflight),
    units: crate::stage::Units::FileBatches,
};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Options {
    library: Option<PathBuf>,
    sets: Option<Vec<String>>,
    #[serde(default = "yes")]
    carved: bool,
}

fn yes() -> bool {
    true
}

fn build(options: &StageOptions) -> Result<Box<dyn Stage>, StageError> {
    let o: Options = parse_options("kff", options)?;
    if o.sets.as_ref().is_some_and(Vec::is_empty) {
        return Err(config(
            "`sets` is empty: name at least one set, or leave it out to use them all",
        ));
    }
    Ok(Box::new(Kff {
        library: o.library,
        sets: o.sets,
        carved: o.carved,
    }))
}

/// The library must be there and hold a complete set (the named ones,
/// when `sets` names them).
fn preflight(options: &StageOptions, database_dir: &std::path::Path) -> Result<(), String> {
    let o: Options = parse_options("kff", options).map_err(|e| e.to_string())?;
    let path = o
        .library
        .unwrap_or_else(|| database_dir.join(crate::hashset::LIBRARY_FILE_NAME));
    if !path.is_file() {
        return Err(format!(
            "no hash library at `{}`: give --hashset known=FILE (or notable=FILE) or --kff-library",
            path.display()
        ));
    }
    let library = Library::open_read_only(&path, None).map_err(|e| format!("hash library: {e}"))?;
    let lookup = library
        .lookup(o.sets.as_deref())
        .map_err(|e| format!("hash library `{}`: {e}", path.display()))?;
    if lookup.sets().is_empty() {
        return Err(format!(
            "the hash library `{}` holds no complete set to look up",
            path.display()
        ));
    }
    Ok(())
}

fn config(message: impl Into<String>) -> StageError {
    StageError::Config {
        stage: "kff".into(),
        message: message.into(),
    }
}

/// The kff stage.
#[derive(Debug)]
pub struct Kff {
    library: Option<PathBuf>,
    sets: Option<Vec<String>>,
    carved: bool,
}

/// Items per page read from the case database.
const PAGE: usize = 4096;

/// Counts for the report.
#[derive(Default)]
struct Counts {
    items: u64,
    lookups: u64,
    hits: u64,
    known: u64,
    notable: u64,
    bad_hashes: u64,
}

impl Counts {
    /// The counts of several passes together.
    fn sum(parts: &[&Counts]) -> Counts {
        let mut all = Counts::default();
        for p in parts {
            all.items += p.items;
            all.lookups += p.lookups;
            all.hits += p.hits;
            all.known += p.known;
            all.notable += p.notable;
            all.bad_hashes += p.bad_hashes;
        }
        all
    }
}

/// A lookup in the case database's copy of the library: one reader
/// connection per thread, one indexed query per hash.
struct CaseLookup {
    reader: CaseReader,
    has: [bool; 3],
}

impl SetLookup for CaseLookup {
    fn has(&self, kind: HashKind) -> bool {
        self.has[kind.index()]
    }

    fn query(
        &mut self,
        kind: HashKind,
        hash: &[u8],
        out: &mut Vec<i64>,
    ) -> Result<(), HashSetError> {
        Ok(self.reader.library_find(kind.index(), hash, out)?)
    }
}

/// Rows between checks for an interruption while loading.
const LOAD_CHECK: u64 = 1 << 16;

impl Kff {
    /// The library file, open through the case's counting VFS, and a
    /// lookup on it with the chosen sets.
    fn open_library(
        &self,
        ctx: &StageContext<'_>,
    ) -> Result<(PathBuf, Library, Lookup), StageError> {
        let path = match &self.library {
            Some(p) => p.clone(),
            None => ctx
                .db
                .sqlite_path_beside(crate::hashset::LIBRARY_FILE_NAME)?,
        };
        let library = Library::open_read_only(&path, Some(ctx.db.vfs_name()))
            .map_err(|e| config(format!("hash library: {e}")))?;
        let lookup = library
            .lookup(self.sets.as_deref())
            .map_err(|e| config(format!("hash library: {e}")))?;
        Ok((path, library, lookup))
    }

    /// Copy the chosen sets into the case database's library tables: rows
    /// per kind, and whether the server took a checkpoint after them (why
    /// not, if not).
    fn load_into_case(
        &self,
        ctx: &StageContext<'_>,
        library: &Library,
        lookup: &Lookup,
    ) -> Result<([u64; 3], Result<(), String>), StageError> {
        let mut sets: Vec<&SetInfo> = lookup.sets().values().collect();
        sets.sort_by_key(|s| s.id);
        let ids: Vec<i64> = sets.iter().map(|s| s.id).collect();
        let mut loader = ctx.db.library_loader()?;
        for s in &sets {
            loader.add_set(&LibrarySet {
                id: s.id,
                name: s.name.clone(),
                category: s.category.as_str().into(),
                hashes: HashKind::ALL.map(|k| s.entries(k)),
            })?;
        }
        let mut rows = [0u64; 3];
        for kind in HashKind::ALL {
            if !lookup.has(kind) {
                continue;
            }
            let mut copy = loader.copy(kind.index())?;
            let mut failed: Option<StageError> = None;
            let mut scanned = 0u64;
            library
                .for_each_entry(kind, &mut |hash, id| {
                    scanned += 1;
                    let checked = if scanned.is_multiple_of(LOAD_CHECK) {
                        ctx.check_cancel()
                    } else {
                        Ok(())
                    };
                    let sent = checked.and_then(|()| {
                        if ids.binary_search(&id).is_err() {
                            return Ok(());
                        }
                        copy.push(hash, id).map_err(StageError::from)
                    });
                    match sent {
                        Ok(()) => std::ops::ControlFlow::Continue(()),
                        Err(e) => {
                            failed = Some(e);
                            std::ops::ControlFlow::Break(())
                        }
                    }
                })
                .map_err(|e| config(format!("hash library: {e}")))?;
            if let Some(e) = failed {
                return Err(e);
            }
            rows[kind.index()] = copy.finish()?;
        }
        let checkpoint = loader.finish()?;
        Ok((rows, checkpoint))
    }

    fn pass<L: SetLookup>(
        &self,
        ctx: &StageContext<'_>,
        sets: &BTreeMap<i64, (String, Category)>,
        lookups: &mut [L],
        items: HashedTable,
        counts: &mut Counts,
    ) -> Result<(), StageError> {
        let mut reader = ctx.db.reader()?;
        // A planned case's batch looks up its own files only.
        let (first, last_id) = match (items, ctx.scope.file_range()) {
            (HashedTable::Files, Some(range)) => range,
            _ => (i64::MIN, i64::MAX),
        };
        let mut after = first.saturating_sub(1);
        loop {
            ctx.check_cancel()?;
            let mut page = reader.hashed_items(items, after, PAGE)?;
            page.retain(|item| item.id <= last_id);
            let Some(last) = page.last() else { break };
            after = last.id;
            // Queries of the page, and which item and kind each belongs to.
            let mut queries = Vec::with_capacity(page.len() * 2);
            let mut owners = Vec::with_capacity(page.len() * 2);
            for (i, item) in page.iter().enumerate() {
                for kind in HashKind::ALL {
                    let Some(text) = &item.hashes[kind.index()] else {
                        continue;
                    };
                    if !lookups[0].has(kind) {
                        continue;
                    }
                    match Query::from_hex(text).filter(|q| q.kind == kind) {
                        Some(q) => {
                            queries.push(q);
                            owners.push((i, kind));
                        }
                        None => {
                            counts.bad_hashes += 1;
                            ctx.record(
                                Severity::Warning,
                                Problem {
                                    item_kind: Some(items.kind()),
                                    item_id: Some(item.id),
                                    path: Some(item.label.clone()),
                                    message: format!(
                                        "{} column holds `{text}`, not a {} digest; not looked up",
                                        kind.as_str(),
                                        kind.label()
                                    ),
                                    ..Problem::default()
                                },
                            )?;
                        }
                    }
                }
            }
            let found = find_parallel(lookups, &queries)
                .map_err(|e| StageError::Other(format!("hash library: {e}")))?;
            counts.lookups += queries.len() as u64;
            counts.items += page.len() as u64;
            // Per item: set id -> matching (kind, digest), in set-id order.
            let mut per_item: BTreeMap<usize, BTreeMap<i64, Vec<String>>> = BTreeMap::new();
            for ((i, kind), (ids, q)) in owners.iter().zip(found.iter().zip(&queries)) {
                for id in ids {
                    per_item
                        .entry(*i)
                        .or_default()
                        .entry(*id)
                        .or_default()
                        .push(format!("{}:{}", kind.as_str(), hex(q.digest())));
                }
            }
            for (i, by_set) in per_item {
                let item = &page[i];
                let mut rows = Vec::with_capacity(by_set.len());
                let mut verdict = Category::Known;
                for (set_id, matched) in by_set {
                    let Some((name, category)) = sets.get(&set_id) else {
                        continue;
                    };
                    if *category == Category::Notable {
                        verdict = Category::Notable;
                    }
                    rows.push(KffHit {
                        set: name.clone(),
                        category: category.as_str(),
                        detail: matched.join(","),
                    });
                }
                if rows.is_empty() {
                    continue;
                }
                counts.hits += rows.len() as u64;
                match verdict {
                    Category::Known => counts.known += 1,
                    Category::Notable => counts.notable += 1,
                }
                let findings: Vec<(String, String)> = rows
                    .iter()
                    .filter(|r| r.category == Category::Notable.as_str())
                    .map(|r| (r.set.clone(), r.detail.clone()))
                    .collect();
                ctx.db.writer().exec(Write::Kff {
                    kind: items.kind(),
                    id: item.id,
                    hits: rows,
                    verdict: verdict.as_str(),
                })?;
                for (set, detail) in findings {
                    ctx.record(
                        Severity::Finding,
                        Problem {
                            item_kind: Some(items.kind()),
                            item_id: Some(item.id),
                            path: Some(item.label.clone()),
                            message: format!("notable: in hash set `{set}` ({detail})"),
                            ..Problem::default()
                        },
                    )?;
                }
            }
            ctx.progress.advance(page.len() as u64);
        }
        Ok(())
    }
}

impl Stage for Kff {
    fn name(&self) -> &'static str {
        "kff"
    }

    fn prepare(&self, ctx: &StageContext<'_>) -> Result<Option<Preparation>, StageError> {
        if !ctx.db.options().profile.keeps_kff_in_case_db() {
            return Ok(None);
        }
        let (path, library, lookup) = self.open_library(ctx)?;
        let (rows, checkpoint) = self.load_into_case(ctx, &library, &lookup)?;
        let mut details = serde_json::Map::new();
        details.insert("library".into(), path.display().to_string().into());
        let mut names: Vec<&str> = lookup.sets().values().map(|s| s.name.as_str()).collect();
        names.sort_unstable();
        details.insert("sets".into(), names.into());
        for kind in HashKind::ALL {
            details.insert(format!("{}_rows", kind.as_str()), rows[kind.index()].into());
        }
        details.insert("checkpointed".into(), checkpoint.is_ok().into());
        if let Err(why) = checkpoint {
            details.insert("checkpoint_error".into(), why.into());
        }
        Ok(Some(Preparation {
            what: format!(
                "loaded the hash library's sets into the case database (profile {}: the KFF library lives in the database)",
                ctx.db.options().profile.as_str()
            ),
            details,
        }))
    }

    fn run(&self, ctx: &StageContext<'_>) -> Result<StageSummary, StageError> {
        let (path, library, chosen) = self.open_library(ctx)?;
        let in_case = ctx.db.options().profile.keeps_kff_in_case_db();
        let mut file_lookups = Vec::new();
        let mut case_lookups = Vec::new();
        let threads = ctx.threads.max(1);
        if in_case {
            // The sets the preparation loaded must be the chosen ones.
            let mut want: Vec<(i64, [u64; 3])> = chosen
                .sets()
                .values()
                .map(|s| (s.id, HashKind::ALL.map(|k| s.entries(k))))
                .collect();
            want.sort_unstable();
            let loaded: Vec<(i64, [u64; 3])> = ctx
                .db
                .reader()?
                .library_sets()?
                .iter()
                .map(|s| (s.id, s.hashes))
                .collect();
            if loaded != want {
                return Err(StageError::Other(format!(
                    "the case database's hash library holds sets {loaded:?} (id, hashes per kind), not the chosen {want:?} (was the stage prepared?)"
                )));
            }
            let has = HashKind::ALL.map(|k| chosen.has(k));
            for _ in 0..threads {
                case_lookups.push(CaseLookup {
                    reader: ctx.db.reader()?,
                    has,
                });
            }
        } else {
            for _ in 0..threads {
                file_lookups.push(
                    library
                        .lookup(self.sets.as_deref())
                        .map_err(|e| config(format!("hash library: {e}")))?,
                );
            }
        }
        let sets: BTreeMap<i64, (String, Category)> = chosen
            .sets()
            .iter()
            .map(|(id, s)| (*id, (s.name.clone(), s.category)))
            .collect();
        let mut set_names: Vec<(String, Category, u64)> = chosen
            .sets()
            .values()
            .map(|s| (s.name.clone(), s.category, s.md5 + s.sha1 + s.sha256))
            .collect();
        set_names.sort();
        if set_names.is_empty() {
            ctx.record(
                Severity::Warning,
                Problem {
                    message: format!(
                        "the hash library `{}` has no complete set: nothing to look up (import one with `caseload hashset import` or `caseload run --hashset`)",
                        path.display()
                    ),
                    ..Problem::default()
                },
            )?;
        }

        // A stage run twice in one case must not count its hits twice. (A
        // planned case's units start from none, and a unit redone after
        // its worker died starts from what its rolled-back attempt left:
        // nothing.)
        if ctx.scope == crate::stage::Scope::Whole {
            ctx.db.writer().call(Write::ClearKff)?;
        }

        let mut reader = ctx.db.reader()?;
        let n_files = reader.hashed_count(HashedTable::Files)?;
        let n_carved = if self.carved {
            reader.hashed_count(HashedTable::Carved)?
        } else {
            0
        };
        // Members of compound files, when file-hash expanded them (the
        // ftk4 profile): FTK's KFF checks every item.
        let n_extracted = reader.hashed_count(HashedTable::Extracted)?;
        drop(reader);
        ctx.progress
            .set_total(n_files + n_carved + n_extracted, ProgressUnit::Items);
        if n_files == 0 && n_carved == 0 && ctx.scope == crate::stage::Scope::Whole {
            ctx.record(
                Severity::Warning,
                Problem {
                    message:
                        "no hashed files or carved items: run file-hash (and carve) before kff"
                            .into(),
                    ..Problem::default()
                },
            )?;
        }

        let mut files = Counts::default();
        let mut carved = Counts::default();
        let mut extracted = Counts::default();
        if !set_names.is_empty() {
            // Batches look up files; the finish, every other item.
            let mut tables = Vec::new();
            if ctx.scope.has_files() {
                tables.push(HashedTable::Files);
            }
            if ctx.scope.has_finish() {
                if n_extracted > 0 {
                    tables.push(HashedTable::Extracted);
                }
                if self.carved {
                    tables.push(HashedTable::Carved);
                }
            }
            for table in tables {
                let counts = match table {
                    HashedTable::Files => &mut files,
                    HashedTable::Extracted => &mut extracted,
                    HashedTable::Carved => &mut carved,
                };
                if in_case {
                    self.pass(ctx, &sets, &mut case_lookups, table, counts)?;
                } else {
                    self.pass(ctx, &sets, &mut file_lookups, table, counts)?;
                }
            }
        }

        let all = Counts::sum(&[&files, &carved, &extracted]);
        let mut summary = StageSummary {
            items: all.items,
            bytes: 0,
            ..StageSummary::default()
        };
        let d = &mut summary.details;
        d.insert("library".into(), path.display().to_string().into());
        if in_case {
            d.insert(
                "looked_up_in".into(),
                "the case database (kff_library_* tables)".into(),
            );
        }
        d.insert(
            "sets".into(),
            serde_json::Value::Array(
                set_names
                    .iter()
                    .map(|(n, c, e)| {
                        serde_json::json!({ "name": n, "category": c.as_str(), "hashes": e })
                    })
                    .collect(),
            ),
        );
        d.insert("files_looked_up".into(), files.items.into());
        d.insert("carved_looked_up".into(), carved.items.into());
        if n_extracted > 0 {
            d.insert("extracted_looked_up".into(), extracted.items.into());
            d.insert("known_extracted".into(), extracted.known.into());
            d.insert("notable_extracted".into(), extracted.notable.into());
        }
        d.insert("lookups".into(), all.lookups.into());
        d.insert("hits".into(), all.hits.into());
        d.insert("known_files".into(), files.known.into());
        d.insert("notable_files".into(), files.notable.into());
        d.insert("known_carved".into(), carved.known.into());
        d.insert("notable_carved".into(), carved.notable.into());
        d.insert("unusable_hashes".into(), all.bad_hashes.into());
        Ok(summary)
    }
}
