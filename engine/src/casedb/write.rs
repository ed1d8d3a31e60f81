//! Every change a run makes to the case database, as data: the writer
//! thread applies these, in batched transactions, on either engine.

use super::DbError;
use super::conn::Conn;
use super::rows::{
    CarvedItem, EvidenceHashes, FileDigests, HashColumn, ItemKind, KffHit, NewEvidence,
    NewExtracted, NewFile, NewRun, NewVolume, ProcessingError, StageRunRow, VolumeFs,
};
use super::value::Value;

/// One change to the case database.
#[derive(Debug, Clone)]
pub enum Write {
    /// Start a run; replies with its id.
    Run(NewRun),
    /// Add the evidence; replies with its id.
    Evidence(NewEvidence),
    /// Store the image hash.
    EvidenceHashes(EvidenceHashes),
    /// Add a volume; replies with its id.
    Volume(NewVolume),
    /// Record a volume's file system.
    VolumeFs(VolumeFs),
    /// Add a file record (and its parse errors, pointing at it).
    File {
        /// The run (for the parse errors).
        run_id: i64,
        /// The stage (for the parse errors).
        stage: &'static str,
        /// The record.
        file: Box<NewFile>,
    },
    /// Store a file's hashes, type and entropy.
    FileDigests(FileDigests),
    /// Add an item extracted from a compound file; replies with its id.
    Extracted(Box<NewExtracted>),
    /// Recompute duplicate groups by a hash column; replies with
    /// `(groups, files in groups)`.
    Duplicates(HashColumn),
    /// Add a carved item.
    Carved(Box<CarvedItem>),
    /// Mark a carved item invalid, with the reason appended to its detail.
    InvalidateCarved {
        /// The item.
        id: i64,
        /// Why.
        reason: String,
    },
    /// Forget every KFF result (before the stage runs again).
    ClearKff,
    /// An item's KFF matches and verdict.
    Kff {
        /// `File` or `Carved`.
        kind: ItemKind,
        /// The item.
        id: i64,
        /// Its matches.
        hits: Vec<KffHit>,
        /// `known` or `notable`.
        verdict: &'static str,
    },
    /// A processing error, warning or finding.
    Problem(ProcessingError),
    /// Remove every row written after `rowid` watermarks taken at a
    /// stage's start (SQLite; `run --resume` undoing a stage cut short):
    /// table name to the largest rowid it held then.
    DiscardAfter(std::collections::BTreeMap<String, i64>),
    /// Mark a work unit done with its figures (JSON), only if `token`
    /// still holds its lease: the last write of a unit's transaction.
    UnitDone {
        /// The unit.
        unit: i64,
        /// The lease token it was claimed with.
        token: String,
        /// Its figures.
        figures: String,
    },
    /// Create a planned case's work queue: its plan and first units.
    CreatePlan(Box<super::queue::PlanRow>, Vec<super::queue::NewUnit>),
    /// Add work units (a split unit adding its stage's batches).
    AddUnits(Vec<super::queue::NewUnit>),
    /// Store the ranges of one part of a stage split by ranges.
    AddRanges {
        /// The stage.
        stage: String,
        /// The part.
        part: u32,
        /// Its ranges, in order.
        ranges: Vec<super::queue::WorkRange>,
    },
    /// What one part of a split stage found that its finish needs.
    PartFacts {
        /// The stage.
        stage: String,
        /// The part.
        part: u32,
        /// The stage's JSON.
        facts: String,
    },
    /// Give a carved item its final id (and its file's new case path),
    /// where it is referred to: the finish of carving split over workers.
    RenumberCarved {
        /// Its provisional id.
        from: i64,
        /// Its final id.
        to: i64,
        /// Its file's case path under the final id.
        case_path: Option<String>,
    },
    /// Finish a run: its stage rows and final status.
    FinishRun {
        /// The run.
        run_id: i64,
        /// One row per stage.
        stages: Vec<StageRunRow>,
        /// `completed` or `failed`.
        status: &'static str,
        /// ISO 8601 UTC.
        finished_at: String,
    },
}

/// What a write answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reply {
    /// Nothing to say.
    Done,
    /// The new row's id.
    Id(i64),
    /// Two counts.
    Counts(i64, i64),
}

impl Reply {
    /// The id, or an error if the write did not give one.
    pub fn id(self) -> Result<i64, DbError> {
        match self {
            Reply::Id(id) => Ok(id),
            other => Err(DbError::Writer(format!("expected a row id, got {other:?}"))),
        }
    }
}

fn returning_id(conn: &mut Conn, sql: &str, params: &[Value]) -> Result<i64, DbError> {
    let id = conn.query_one(sql, params)?.get(0)?;
    conn.count_inserted_row();
    Ok(id)
}

fn problem(conn: &mut Conn, p: &ProcessingError) -> Result<(), DbError> {
    conn.execute(
        "INSERT INTO processing_errors (run_id, stage, severity, item_kind, item_id, path, first_sector, last_sector, message)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        &[
            p.run_id.into(),
            p.stage.clone().into(),
            p.severity.into(),
            p.item.map(|(k, _)| k.as_str()).into(),
            p.item.and_then(|(_, id)| id).into(),
            p.path.clone().into(),
            p.sectors.map(|s| s.0).into(),
            p.sectors.map(|s| s.1).into(),
            p.message.clone().into(),
        ],
    )?;
    Ok(())
}

impl Write {
    /// Whether the writer must commit right after this write: writes that
    /// reply with an id, so that a later write's failure (which on
    /// PostgreSQL rolls the batch back to be replayed) never replays them
    /// under a new id.
    pub(crate) fn commits(&self) -> bool {
        matches!(
            self,
            Write::Run(_)
                | Write::Evidence(_)
                | Write::Volume(_)
                | Write::Duplicates(_)
                | Write::ClearKff
                | Write::DiscardAfter(_)
                | Write::CreatePlan(..)
        )
    }

    /// Apply on `conn`, inside the writer's open transaction.
    pub(crate) fn apply(&self, conn: &mut Conn) -> Result<Reply, DbError> {
        match self {
            Write::Run(r) => returning_id(
                conn,
                "INSERT INTO runs (started_at, caseload_version, workload, stages, threads, cache_mode, db_engine, journal_mode, synchronous, batch_size, status)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, 'running') RETURNING id",
                &[
                    r.started_at.clone().into(),
                    env!("CARGO_PKG_VERSION").into(),
                    r.workload.clone().into(),
                    r.stages.join(",").into(),
                    r.threads.into(),
                    r.cache_mode.clone().into(),
                    r.db_engine.clone().into(),
                    r.journal_mode.clone().into(),
                    r.synchronous.clone().into(),
                    r.batch_size.into(),
                ],
            )
            .map(Reply::Id),
            Write::Evidence(e) => {
                let id = returning_id(
                    conn,
                    "INSERT INTO evidence (path, format, media_size, container_bytes, chunk_size, stored_md5, stored_sha1)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) RETURNING id",
                    &[
                        e.path.clone().into(),
                        e.format.clone().into(),
                        e.media_size.into(),
                        e.container_bytes.into(),
                        e.chunk_size.into(),
                        e.stored_md5.clone().into(),
                        e.stored_sha1.clone().into(),
                    ],
                )?;
                for (seq, (path, bytes)) in e.files.iter().enumerate() {
                    conn.execute(
                        "INSERT INTO evidence_files (evidence_id, seq, path, bytes) VALUES (?1, ?2, ?3, ?4)",
                        &[id.into(), seq.into(), path.into(), (*bytes).into()],
                    )?;
                }
                for (k, v) in &e.metadata {
                    conn.execute(
                        "INSERT INTO evidence_metadata (evidence_id, key, value) VALUES (?1, ?2, ?3)",
                        &[id.into(), k.into(), v.into()],
                    )?;
                }
                Ok(Reply::Id(id))
            }
            Write::EvidenceHashes(h) => {
                conn.execute(
                    "UPDATE evidence SET md5 = ?1, sha1 = ?2, sha256 = ?3, hash_verified = ?4 WHERE id = ?5",
                    &[
                        h.md5.clone().into(),
                        h.sha1.clone().into(),
                        h.sha256.clone().into(),
                        h.verified.into(),
                        h.evidence_id.into(),
                    ],
                )?;
                Ok(Reply::Done)
            }
            Write::Volume(v) => returning_id(
                conn,
                "INSERT INTO volumes (evidence_id, slot, scheme, \"offset\", length, type_code, description)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) RETURNING id",
                &[
                    v.evidence_id.into(),
                    v.slot.into(),
                    v.scheme.into(),
                    v.offset.into(),
                    v.length.into(),
                    v.type_code.clone().into(),
                    v.description.clone().into(),
                ],
            )
            .map(Reply::Id),
            Write::VolumeFs(v) => {
                conn.execute(
                    "UPDATE volumes SET fs_type = ?1, fs_label = ?2, parsed = ?3 WHERE id = ?4",
                    &[
                        v.fs_type.clone().into(),
                        v.fs_label.clone().into(),
                        v.parsed.into(),
                        v.volume_id.into(),
                    ],
                )?;
                Ok(Reply::Done)
            }
            Write::File {
                run_id,
                stage,
                file: f,
            } => {
                let (extents, encoding, first_offset, resident) = f.content.columns();
                let sql = "INSERT INTO files (volume_id, meta_addr, path, name, raw_name, short_name, kind, size, allocated, recovery, recoverable,
                                attributes, mtime, atime, ctime, crtime, fn_mtime, fn_atime, fn_ctime, fn_crtime,
                                extents, encoding, first_offset, resident_data, slack, mode, uid, gid)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22, ?23, ?24, ?25, ?26, ?27, ?28)";
                let params = [
                    f.volume_id.into(),
                    f.meta_addr.clone().into(),
                    f.path.clone().into(),
                    f.name.clone().into(),
                    f.raw_name.clone().into(),
                    f.short_name.clone().into(),
                    f.kind.into(),
                    f.size.into(),
                    f.allocated.into(),
                    f.recovery.into(),
                    f.recoverable.into(),
                    f.attributes.into(),
                    f.times[0].into(),
                    f.times[1].into(),
                    f.times[2].into(),
                    f.times[3].into(),
                    f.fn_times[0].into(),
                    f.fn_times[1].into(),
                    f.fn_times[2].into(),
                    f.fn_times[3].into(),
                    extents.into(),
                    encoding.into(),
                    first_offset.into(),
                    resident.into(),
                    f.slack.as_ref().map(|s| s.encode()).into(),
                    f.owner[0].into(),
                    f.owner[1].into(),
                    f.owner[2].into(),
                ];
                if f.errors.is_empty() {
                    conn.execute(sql, &params)?;
                    return Ok(Reply::Done);
                }
                let id = returning_id(conn, &format!("{sql} RETURNING id"), &params)?;
                for (offset, message) in &f.errors {
                    let sector = offset.map(|o| o / 512);
                    problem(
                        conn,
                        &ProcessingError {
                            run_id: *run_id,
                            stage: (*stage).to_string(),
                            severity: "error",
                            item: Some((ItemKind::File, Some(id))),
                            path: Some(f.path.clone()),
                            sectors: sector.map(|s| (s, s)),
                            message: message.clone(),
                        },
                    )?;
                }
                Ok(Reply::Id(id))
            }
            Write::FileDigests(d) => {
                conn.execute(
                    "UPDATE files SET md5 = ?1, sha1 = ?2, sha256 = ?3, signature = ?4, extension_mismatch = ?5, entropy = ?6 WHERE id = ?7",
                    &[
                        d.md5.clone().into(),
                        d.sha1.clone().into(),
                        d.sha256.clone().into(),
                        d.signature.into(),
                        d.extension_mismatch.into(),
                        d.entropy.into(),
                        d.file_id.into(),
                    ],
                )?;
                Ok(Reply::Done)
            }
            Write::Extracted(x) => {
                // Its id is the stage's (independent of worker order).
                conn.execute(
                    "INSERT INTO extracted_items (id, file_id, parent_id, member, name, container, size, md5, sha1, sha256, signature)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
                    &[
                        x.id.into(),
                        x.file_id.into(),
                        x.parent_id.into(),
                        x.member.clone().into(),
                        x.name.clone().into(),
                        x.container.into(),
                        x.size.into(),
                        x.md5.clone().into(),
                        x.sha1.clone().into(),
                        x.sha256.clone().into(),
                        x.signature.into(),
                    ],
                )?;
                Ok(Reply::Id(x.id))
            }
            Write::Duplicates(column) => duplicates(conn, *column),
            Write::Carved(c) => {
                let m = c.meta.as_ref();
                conn.execute(
                    "INSERT INTO carved_items (id, evidence_id, volume_id, method, \"offset\", length, type, validation, case_path,
                        md5, sha1, sha256, entropy, detail, source, signature, record, name, kind, size, content_length,
                        deleted, meta_addr, first_cluster, extents, mtime, atime, ctime, crtime)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20,
                        ?21, ?22, ?23, ?24, ?25, ?26, ?27, ?28, ?29)",
                    &[
                        c.id.into(),
                        c.evidence_id.into(),
                        c.volume_id.into(),
                        c.method.into(),
                        c.offset.into(),
                        c.length.into(),
                        c.type_name.clone().into(),
                        c.validation.into(),
                        c.case_path.clone().into(),
                        c.md5.clone().into(),
                        c.sha1.clone().into(),
                        c.sha256.clone().into(),
                        c.entropy.into(),
                        c.detail.clone().into(),
                        c.source.into(),
                        c.signature.clone().into(),
                        m.map(|m| m.record).into(),
                        m.map(|m| m.name.clone()).into(),
                        m.map(|m| m.kind).into(),
                        m.map(|m| m.size).into(),
                        c.content_length.into(),
                        m.map(|m| m.deleted).into(),
                        m.and_then(|m| m.meta_addr.clone()).into(),
                        m.and_then(|m| m.first_cluster).into(),
                        c.extents.as_ref().map(|e| e.encode()).into(),
                        m.and_then(|m| m.times[0]).into(),
                        m.and_then(|m| m.times[1]).into(),
                        m.and_then(|m| m.times[2]).into(),
                        m.and_then(|m| m.times[3]).into(),
                    ],
                )?;
                Ok(Reply::Done)
            }
            Write::InvalidateCarved { id, reason } => {
                conn.execute(
                    "UPDATE carved_items SET validation = 'invalid',
                        detail = coalesce(detail || '; ', '') || ?1
                     WHERE id = ?2",
                    &[reason.into(), (*id).into()],
                )?;
                Ok(Reply::Done)
            }
            Write::ClearKff => {
                conn.execute("DELETE FROM hits WHERE kind = 'kff'", &[])?;
                conn.execute(
                    "UPDATE files SET kff = NULL WHERE kff IS NOT NULL",
                    &[],
                )?;
                conn.execute(
                    "UPDATE carved_items SET kff = NULL WHERE kff IS NOT NULL",
                    &[],
                )?;
                conn.execute(
                    "UPDATE extracted_items SET kff = NULL WHERE kff IS NOT NULL",
                    &[],
                )?;
                Ok(Reply::Done)
            }
            Write::Kff {
                kind,
                id,
                hits,
                verdict,
            } => {
                for h in hits {
                    conn.execute(
                        "INSERT INTO hits (item_kind, item_id, kind, name, category, detail, count) VALUES (?1, ?2, 'kff', ?3, ?4, ?5, 1)",
                        &[
                            kind.as_str().into(),
                            (*id).into(),
                            h.set.clone().into(),
                            h.category.into(),
                            h.detail.clone().into(),
                        ],
                    )?;
                }
                let sql = match kind {
                    ItemKind::Carved => "UPDATE carved_items SET kff = ?1 WHERE id = ?2",
                    ItemKind::Extracted => "UPDATE extracted_items SET kff = ?1 WHERE id = ?2",
                    _ => "UPDATE files SET kff = ?1 WHERE id = ?2",
                };
                conn.execute(sql, &[(*verdict).into(), (*id).into()])?;
                Ok(Reply::Done)
            }
            Write::Problem(p) => problem(conn, p).map(|()| Reply::Done),
            Write::UnitDone {
                unit,
                token,
                figures,
            } => super::queue::unit_done(conn, *unit, token, figures).map(|()| Reply::Done),
            Write::CreatePlan(plan, units) => {
                super::queue::create(conn, plan, units).map(|()| Reply::Done)
            }
            Write::AddUnits(units) => super::queue::add_units(conn, units).map(|()| Reply::Done),
            Write::AddRanges {
                stage,
                part,
                ranges,
            } => super::queue::add_ranges(conn, stage, *part, ranges).map(|()| Reply::Done),
            Write::PartFacts { stage, part, facts } => {
                super::queue::part_facts(conn, stage, *part, facts).map(|()| Reply::Done)
            }
            Write::RenumberCarved {
                from,
                to,
                case_path,
            } => {
                conn.execute(
                    "UPDATE carved_items SET id = ?1, case_path = ?2 WHERE id = ?3",
                    &[(*to).into(), case_path.clone().into(), (*from).into()],
                )?;
                conn.execute(
                    "UPDATE processing_errors SET item_id = ?1, path = coalesce(?2, path)
                     WHERE item_kind = 'carved' AND item_id = ?3",
                    &[(*to).into(), case_path.clone().into(), (*from).into()],
                )?;
                Ok(Reply::Done)
            }
            Write::DiscardAfter(marks) => {
                for (table, rowid) in marks {
                    // The names come from the database's own catalogue.
                    let table = table.replace('"', "\"\"");
                    conn.execute(
                        &format!("DELETE FROM \"{table}\" WHERE rowid > ?1"),
                        &[(*rowid).into()],
                    )?;
                }
                Ok(Reply::Done)
            }
            Write::FinishRun {
                run_id,
                stages,
                status,
                finished_at,
            } => {
                // A run resumed after it was killed in its final
                // bookkeeping finishes again: its rows replace the first.
                conn.execute(
                    "DELETE FROM channel_figures WHERE stage_run_id IN (SELECT id FROM stage_runs WHERE run_id = ?1)",
                    &[(*run_id).into()],
                )?;
                conn.execute(
                    "DELETE FROM stage_runs WHERE run_id = ?1",
                    &[(*run_id).into()],
                )?;
                for s in stages {
                    let stage_run_id = returning_id(
                        conn,
                        "INSERT INTO stage_runs (run_id, seq, stage, status, started_at, wall_ns, cpu_user_ns, cpu_system_ns, peak_rss_bytes, items, bytes, summary)
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12) RETURNING id",
                        &[
                            (*run_id).into(),
                            s.seq.into(),
                            s.stage.clone().into(),
                            s.status.clone().into(),
                            s.started_at.clone().into(),
                            s.wall_ns.into(),
                            s.cpu_user_ns.into(),
                            s.cpu_system_ns.into(),
                            s.peak_rss_bytes.into(),
                            s.items.into(),
                            s.bytes.into(),
                            s.summary.clone().into(),
                        ],
                    )?;
                    for (channel, c) in &s.channels {
                        conn.execute(
                            "INSERT INTO channel_figures (stage_run_id, channel, bytes_read, read_ops, bytes_written, write_ops, fsyncs, read_blocked_ns, write_blocked_ns, sync_blocked_ns)
                             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
                            &[
                                stage_run_id.into(),
                                channel.into(),
                                c.bytes_read.into(),
                                c.read_ops.into(),
                                c.bytes_written.into(),
                                c.write_ops.into(),
                                c.fsyncs.into(),
                                c.read_blocked_ns.into(),
                                c.write_blocked_ns.into(),
                                c.sync_blocked_ns.into(),
                            ],
                        )?;
                    }
                }
                conn.execute(
                    "UPDATE runs SET finished_at = ?1, status = ?2 WHERE id = ?3",
                    &[finished_at.into(), (*status).into(), (*run_id).into()],
                )?;
                Ok(Reply::Done)
            }
        }
    }
}

/// Duplicate groups by `column`: the group id is the smallest file id in
/// the group, so it does not depend on the order workers finished in.
fn duplicates(conn: &mut Conn, column: HashColumn) -> Result<Reply, DbError> {
    let (create, update) = match column {
        HashColumn::Md5 => (
            "CREATE TEMP TABLE dup AS SELECT md5 AS h, min(id) AS g, count(*) AS n FROM files
             WHERE md5 IS NOT NULL AND size > 0 AND kind = 'file' GROUP BY md5 HAVING count(*) > 1",
            "UPDATE files SET duplicate_group = dup.g FROM dup
             WHERE files.size > 0 AND files.kind = 'file' AND files.md5 = dup.h",
        ),
        HashColumn::Sha1 => (
            "CREATE TEMP TABLE dup AS SELECT sha1 AS h, min(id) AS g, count(*) AS n FROM files
             WHERE sha1 IS NOT NULL AND size > 0 AND kind = 'file' GROUP BY sha1 HAVING count(*) > 1",
            "UPDATE files SET duplicate_group = dup.g FROM dup
             WHERE files.size > 0 AND files.kind = 'file' AND files.sha1 = dup.h",
        ),
        HashColumn::Sha256 => (
            "CREATE TEMP TABLE dup AS SELECT sha256 AS h, min(id) AS g, count(*) AS n FROM files
             WHERE sha256 IS NOT NULL AND size > 0 AND kind = 'file' GROUP BY sha256 HAVING count(*) > 1",
            "UPDATE files SET duplicate_group = dup.g FROM dup
             WHERE files.size > 0 AND files.kind = 'file' AND files.sha256 = dup.h",
        ),
    };
    conn.execute(
        "UPDATE files SET duplicate_group = NULL WHERE duplicate_group IS NOT NULL",
        &[],
    )?;
    conn.batch(create)?;
    conn.execute(update, &[])?;
    let mut row = conn.query_one(
        "SELECT count(*), CAST(coalesce(sum(n), 0) AS BIGINT) FROM dup",
        &[],
    )?;
    let counts = (row.get(0)?, row.get(1)?);
    conn.batch("DROP TABLE dup")?;
    Ok(Reply::Counts(counts.0, counts.1))
}
