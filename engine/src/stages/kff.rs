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
//! Excluding known files from later work, as suites do, is the later
//! stages' business: they read `files.kff` (the `index` stage skips
//! `kff = 'known'`), so `kff` must run before them in the stage list.
//!
//! Options: `library` (path of the library), `sets` (names of the sets to
//! use; default every complete set), `carved` (also look up carved items;
//! default true).

use super::StageSpec;
use crate::hashset::{Category, HashKind, Library, Lookup, Query, find_parallel};
use crate::source::hex;
use crate::stage::{
    Problem, ProgressUnit, Severity, Stage, StageContext, StageError, StageOptions, StageSummary,
    parse_options,
};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::PathBuf;

pub(super) const SPEC: StageSpec = StageSpec {
    name: "kff",
    about: "Known File Filter: look up every file's and carved item's hashes in the hash library's known and notable sets",
    build,
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
const PAGE: i64 = 4096;

/// Which table a pass reads.
#[derive(Clone, Copy)]
enum Items {
    Files,
    Carved,
}

impl Items {
    fn kind(self) -> &'static str {
        match self {
            Items::Files => "file",
            Items::Carved => "carved",
        }
    }

    fn table(self) -> &'static str {
        match self {
            Items::Files => "files",
            Items::Carved => "carved_items",
        }
    }

    /// Items with at least one hash. Directories are left out: their
    /// "content" is file-system metadata, not a file a hash set lists.
    fn filter(self) -> &'static str {
        match self {
            Items::Files => {
                "kind <> 'directory' AND (md5 IS NOT NULL OR sha1 IS NOT NULL OR sha256 IS NOT NULL)"
            }
            Items::Carved => "(md5 IS NOT NULL OR sha1 IS NOT NULL OR sha256 IS NOT NULL)",
        }
    }

    /// What to show as the item's path.
    fn label(self) -> &'static str {
        match self {
            Items::Files => "path",
            Items::Carved => "coalesce(case_path, type || ' at offset ' || offset)",
        }
    }
}

/// One item read from the case database.
struct Item {
    id: i64,
    label: String,
    hashes: [Option<String>; 3],
}

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

fn read_page(
    reader: &rusqlite::Connection,
    items: Items,
    after: i64,
) -> rusqlite::Result<Vec<Item>> {
    let mut stmt = reader.prepare_cached(&format!(
        "SELECT id, {}, md5, sha1, sha256 FROM {} WHERE {} AND id > ?1 ORDER BY id LIMIT {PAGE}",
        items.label(),
        items.table(),
        items.filter()
    ))?;
    let rows = stmt.query_map([after], |r| {
        Ok(Item {
            id: r.get(0)?,
            label: r.get::<_, Option<String>>(1)?.unwrap_or_default(),
            hashes: [r.get(2)?, r.get(3)?, r.get(4)?],
        })
    })?;
    rows.collect()
}

impl Kff {
    fn pass(
        &self,
        ctx: &StageContext<'_>,
        lookups: &mut [Lookup],
        items: Items,
        counts: &mut Counts,
    ) -> Result<(), StageError> {
        let reader = ctx.db.reader()?;
        let sql_err = |e: rusqlite::Error| {
            StageError::Other(format!("reading the {} table: {e}", items.table()))
        };
        let sets: BTreeMap<i64, (String, Category)> = lookups[0]
            .sets()
            .iter()
            .map(|(id, s)| (*id, (s.name.clone(), s.category)))
            .collect();
        let mut after = i64::MIN;
        loop {
            ctx.check_cancel()?;
            let page = read_page(&reader, items, after).map_err(sql_err)?;
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
                    rows.push((name.clone(), *category, matched.join(",")));
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
                    .filter(|r| r.1 == Category::Notable)
                    .map(|r| (r.0.clone(), r.2.clone()))
                    .collect();
                let (id, kind, table) = (item.id, items.kind(), items.table());
                ctx.db.writer().exec(move |c| {
                    let mut ins = c.prepare_cached(
                        "INSERT INTO hits (item_kind, item_id, kind, name, category, detail, count) VALUES (?1, ?2, 'kff', ?3, ?4, ?5, 1)",
                    )?;
                    for (name, category, detail) in &rows {
                        ins.execute(rusqlite::params![kind, id, name, category.as_str(), detail])?;
                    }
                    c.prepare_cached(&format!("UPDATE {table} SET kff = ?1 WHERE id = ?2"))?
                        .execute(rusqlite::params![verdict.as_str(), id])?;
                    Ok(())
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

    fn run(&self, ctx: &StageContext<'_>) -> Result<StageSummary, StageError> {
        let path = match &self.library {
            Some(p) => p.clone(),
            None => ctx
                .db
                .path()
                .parent()
                .map(|d| d.join(crate::hashset::LIBRARY_FILE_NAME))
                .unwrap_or_else(|| PathBuf::from(crate::hashset::LIBRARY_FILE_NAME)),
        };
        let library = Library::open_read_only(&path, Some(ctx.db.vfs_name()))
            .map_err(|e| config(format!("hash library: {e}")))?;
        let mut lookups = Vec::with_capacity(ctx.threads.max(1));
        for _ in 0..ctx.threads.max(1) {
            lookups.push(
                library
                    .lookup(self.sets.as_deref())
                    .map_err(|e| config(format!("hash library: {e}")))?,
            );
        }
        let mut set_names: Vec<(String, Category, u64)> = lookups[0]
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

        // A stage run twice in one case must not count its hits twice.
        ctx.db.writer().call(|c| {
            c.execute_batch(
                "DELETE FROM hits WHERE kind = 'kff';
                 UPDATE files SET kff = NULL WHERE kff IS NOT NULL;
                 UPDATE carved_items SET kff = NULL WHERE kff IS NOT NULL;",
            )
        })?;

        let reader = ctx.db.reader()?;
        let count = |items: Items| -> Result<i64, StageError> {
            reader
                .query_row(
                    &format!(
                        "SELECT count(*) FROM {} WHERE {}",
                        items.table(),
                        items.filter()
                    ),
                    [],
                    |r| r.get(0),
                )
                .map_err(|e| StageError::Other(format!("reading the {} table: {e}", items.table())))
        };
        let n_files = count(Items::Files)?;
        let n_carved = if self.carved {
            count(Items::Carved)?
        } else {
            0
        };
        drop(reader);
        ctx.progress
            .set_total((n_files + n_carved) as u64, ProgressUnit::Items);
        if n_files == 0 && n_carved == 0 {
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
        if !set_names.is_empty() {
            self.pass(ctx, &mut lookups, Items::Files, &mut files)?;
            if self.carved {
                self.pass(ctx, &mut lookups, Items::Carved, &mut carved)?;
            }
        }

        let mut summary = StageSummary {
            items: files.items + carved.items,
            bytes: 0,
            ..StageSummary::default()
        };
        let d = &mut summary.details;
        d.insert("library".into(), path.display().to_string().into());
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
        d.insert("lookups".into(), (files.lookups + carved.lookups).into());
        d.insert("hits".into(), (files.hits + carved.hits).into());
        d.insert("known_files".into(), files.known.into());
        d.insert("notable_files".into(), files.notable.into());
        d.insert("known_carved".into(), carved.known.into());
        d.insert("notable_carved".into(), carved.notable.into());
        d.insert(
            "unusable_hashes".into(),
            (files.bad_hashes + carved.bad_hashes).into(),
        );
        Ok(summary)
    }
}
