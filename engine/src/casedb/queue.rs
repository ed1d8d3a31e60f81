//! The work queue of a planned case (`caseload plan`, `worker`, `status`):
//! tables in the case database itself, on PostgreSQL, as the suites'
//! distributed engines keep theirs.
//!
//! A worker claims the first ready unit with `FOR UPDATE SKIP LOCKED`
//! (claims never wait on each other) and a lease; it renews the lease
//! while it works and marks the unit done in the same transaction as the
//! unit's rows ([`super::Write::UnitDone`], applied by the case writer),
//! but only while its lease token still holds the unit. A worker that
//! dies loses the unit when the lease runs out, and its uncommitted rows
//! with its connection; the unit is then claimed again. Nothing here is a
//! coordinator: the database's row locks, transactions and clock are.
//!
//! A unit is ready when every unit it waits for is done: the earlier
//! phases of its own stage (a split before the batches, the batches
//! before the finish), and every unit of an earlier stage that a later
//! stage may need (`waits`; image-hash's do not, so it runs beside the
//! others).

use super::DbError;
use super::conn::{Conn, pg_error};
use std::time::{Duration, Instant};

/// The queue's tables (PostgreSQL).
const SCHEMA: &str = "
CREATE TABLE work_plan (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    caseload_version TEXT NOT NULL,
    planned_at TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    spec TEXT NOT NULL,
    lease_seconds DOUBLE PRECISION NOT NULL
);
CREATE TABLE work_units (
    id BIGSERIAL PRIMARY KEY,
    stage TEXT NOT NULL,
    seq INTEGER NOT NULL,
    phase INTEGER NOT NULL,
    waits BOOLEAN NOT NULL,
    scope TEXT NOT NULL,
    state TEXT NOT NULL DEFAULT 'ready' CHECK (state IN ('ready', 'running', 'done', 'failed')),
    worker TEXT,
    token TEXT,
    lease_until TIMESTAMPTZ,
    attempts INTEGER NOT NULL DEFAULT 0,
    failures INTEGER NOT NULL DEFAULT 0,
    last_error TEXT,
    finished_at TIMESTAMPTZ,
    figures TEXT
);
CREATE INDEX work_units_order ON work_units (seq, phase, id);
CREATE TABLE work_workers (
    name TEXT PRIMARY KEY,
    host TEXT NOT NULL,
    pid BIGINT NOT NULL,
    caseload_version TEXT NOT NULL,
    started_at TIMESTAMPTZ NOT NULL,
    last_seen TIMESTAMPTZ NOT NULL,
    state TEXT NOT NULL,
    message TEXT,
    units_done BIGINT NOT NULL DEFAULT 0,
    coordination TEXT
);
CREATE TABLE work_ranges (
    stage TEXT NOT NULL,
    part INTEGER NOT NULL,
    idx INTEGER NOT NULL,
    start_byte BIGINT NOT NULL,
    end_byte BIGINT NOT NULL,
    volume_offset BIGINT,
    tag INTEGER NOT NULL,
    PRIMARY KEY (stage, part, idx)
);
CREATE TABLE work_parts (
    stage TEXT NOT NULL,
    part INTEGER NOT NULL,
    facts TEXT NOT NULL,
    PRIMARY KEY (stage, part)
);
";

/// A byte range of the evidence that one part of a stage split by ranges
/// covers (carving's regions), stored by the stage's split unit for the
/// worker that claims the part: the split reads the file systems once,
/// the parts need not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkRange {
    /// First byte.
    pub start: u64,
    /// One past the last byte.
    pub end: u64,
    /// Where the volume it lies in starts, if any.
    pub volume_offset: Option<u64>,
    /// What the stage needs to know of it, in its own code.
    pub tag: i64,
}

/// The channel on which the queue's changes are announced (PostgreSQL's
/// LISTEN/NOTIFY): a unit done or given back may make others ready, and
/// idle workers wake at once instead of at their next poll.
const CHANGES: &str = "caseload_work";

/// Failures of one unit after which it is failed for good (each by a
/// worker that could not do it: evidence missing on its mount, a stage
/// error).
pub const MAX_FAILURES: i32 = 3;

/// A unit to be added to the queue.
#[derive(Debug, Clone, PartialEq)]
pub struct NewUnit {
    /// Its stage.
    pub stage: String,
    /// The stage's position in the workload.
    pub seq: i32,
    /// 0 split, 1 work, 2 finish.
    pub phase: i32,
    /// Whether later stages wait for it.
    pub waits: bool,
    /// Its scope (JSON of a `Scope`, or `{"kind":"split"}`).
    pub scope: String,
}

/// A unit a worker claimed.
#[derive(Debug, Clone, PartialEq)]
pub struct Claimed {
    /// Its id.
    pub id: i64,
    /// Its stage.
    pub stage: String,
    /// Its stage's position in the workload.
    pub seq: i32,
    /// Its scope (JSON).
    pub scope: String,
    /// This is the unit's `attempts`-th claim (2 and more: redone after a
    /// worker lost it).
    pub attempts: i32,
}

/// One unit as `status` and `report` see it.
#[derive(Debug, Clone, PartialEq)]
pub struct UnitRow {
    /// Its id.
    pub id: i64,
    /// Its stage.
    pub stage: String,
    /// The stage's position.
    pub seq: i32,
    /// Its phase.
    pub phase: i32,
    /// Its scope (JSON).
    pub scope: String,
    /// ready, running, done, failed.
    pub state: String,
    /// Who holds or did it.
    pub worker: Option<String>,
    /// Claims so far.
    pub attempts: i32,
    /// Failed attempts.
    pub failures: i32,
    /// The last failure.
    pub last_error: Option<String>,
    /// Its figures (JSON), once done.
    pub figures: Option<String>,
}

/// A worker as the queue knows it.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerRow {
    /// Its name.
    pub name: String,
    /// Its host.
    pub host: String,
    /// Its process id there.
    pub pid: i64,
    /// Its caseload version.
    pub caseload_version: String,
    /// working, finished, failed.
    pub state: String,
    /// Why it stopped, if it failed.
    pub message: Option<String>,
    /// Units it finished.
    pub units_done: i64,
    /// Its coordination figures (JSON).
    pub coordination: Option<String>,
    /// Seconds since it was last heard from.
    pub silent_seconds: f64,
}

/// The plan's row.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanRow {
    /// The caseload that planned it.
    pub caseload_version: String,
    /// When.
    pub planned_at: String,
    /// A digest of what every worker must run identically.
    pub fingerprint: String,
    /// The plan (JSON).
    pub spec: String,
    /// Lease length.
    pub lease_seconds: f64,
}

/// Coordination traffic: the statements a worker sends to claim, renew,
/// release and report, apart from the case database's own I/O.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Coordination {
    /// Statements.
    pub statements: u64,
    /// Time waiting for their answers, seconds.
    pub seconds: f64,
    /// Claims that found a unit.
    pub claims: u64,
    /// Claims that found none ready.
    pub empty_claims: u64,
    /// Lease renewals.
    pub renewals: u64,
}

impl Coordination {
    /// The sum of two workers' (or connections') traffic.
    pub fn plus(&self, other: &Coordination) -> Coordination {
        Coordination {
            statements: self.statements + other.statements,
            seconds: self.seconds + other.seconds,
            claims: self.claims + other.claims,
            empty_claims: self.empty_claims + other.empty_claims,
            renewals: self.renewals + other.renewals,
        }
    }
}

/// Whether a case database holds a plan.
pub(crate) fn has_plan(conn: &mut Conn) -> Result<bool, DbError> {
    let mut r = conn.query_one(
        "SELECT count(*) FROM information_schema.tables WHERE table_name = 'work_plan'",
        &[],
    )?;
    let n: i64 = r.get(0)?;
    Ok(n > 0)
}

/// Create the queue with its plan row and first units, in the writer's
/// transaction (refused when the case already has a plan).
pub(crate) fn create(conn: &mut Conn, plan: &PlanRow, units: &[NewUnit]) -> Result<(), DbError> {
    if has_plan(conn)? {
        return Err(DbError::Writer(
            "this case database already holds a plan: one case, one plan (plan into a new database)".into(),
        ));
    }
    conn.batch(SCHEMA)?;
    conn.execute(
        "INSERT INTO work_plan (id, caseload_version, planned_at, fingerprint, spec, lease_seconds)
         VALUES (1, ?1, ?2, ?3, ?4, ?5)",
        &[
            plan.caseload_version.clone().into(),
            plan.planned_at.clone().into(),
            plan.fingerprint.clone().into(),
            plan.spec.clone().into(),
            plan.lease_seconds.into(),
        ],
    )?;
    add_units(conn, units)
}

/// Add units (a split unit adds its stage's batches), in the caller's
/// transaction.
pub(crate) fn add_units(conn: &mut Conn, units: &[NewUnit]) -> Result<(), DbError> {
    for u in units {
        conn.execute(
            "INSERT INTO work_units (stage, seq, phase, waits, scope) VALUES (?1, ?2, ?3, ?4, ?5)",
            &[
                u.stage.clone().into(),
                i64::from(u.seq).into(),
                i64::from(u.phase).into(),
                i64::from(u.waits).into(),
                u.scope.clone().into(),
            ],
        )?;
    }
    Ok(())
}

/// Store part `part`'s ranges of `stage`, in the split unit's
/// transaction; several rows per statement, as a bulk load would.
pub(crate) fn add_ranges(
    conn: &mut Conn,
    stage: &str,
    part: u32,
    ranges: &[WorkRange],
) -> Result<(), DbError> {
    const ROWS: usize = 200;
    for (c, chunk) in ranges.chunks(ROWS).enumerate() {
        let mut sql = String::from(
            "INSERT INTO work_ranges (stage, part, idx, start_byte, end_byte, volume_offset, tag) VALUES ",
        );
        let mut params: Vec<super::Value> = Vec::with_capacity(chunk.len() * 5 + 2);
        params.push(stage.to_string().into());
        params.push(i64::from(part).into());
        for (i, r) in chunk.iter().enumerate() {
            let p = 3 + i * 5;
            if i > 0 {
                sql.push_str(", ");
            }
            sql.push_str(&format!(
                "(?1, ?2, ?{}, ?{}, ?{}, ?{}, ?{})",
                p,
                p + 1,
                p + 2,
                p + 3,
                p + 4
            ));
            params.push(((c * ROWS + i) as i64).into());
            params.push(r.start.into());
            params.push(r.end.into());
            params.push(r.volume_offset.into());
            params.push(r.tag.into());
        }
        conn.execute(&sql, &params)?;
    }
    Ok(())
}

/// Record what part `part` of `stage` found that the stage's finish needs
/// (a JSON text of the stage's own), in the part's transaction.
pub(crate) fn part_facts(
    conn: &mut Conn,
    stage: &str,
    part: u32,
    facts: &str,
) -> Result<(), DbError> {
    conn.execute(
        "INSERT INTO work_parts (stage, part, facts) VALUES (?1, ?2, ?3)",
        &[
            stage.to_string().into(),
            i64::from(part).into(),
            facts.to_string().into(),
        ],
    )?;
    Ok(())
}

/// Mark a unit done with its figures, if `token` still holds it.
pub(crate) fn unit_done(
    conn: &mut Conn,
    unit: i64,
    token: &str,
    figures: &str,
) -> Result<(), DbError> {
    let n = conn.execute(
        "UPDATE work_units SET state = 'done', finished_at = now(), lease_until = NULL, figures = ?3
         WHERE id = ?1 AND token = ?2 AND state = 'running'",
        &[unit.into(), token.to_string().into(), figures.to_string().into()],
    )?;
    if n == 1 {
        // Delivered when the unit's transaction commits, not before.
        conn.execute(&format!("NOTIFY {CHANGES}"), &[])?;
        Ok(())
    } else {
        Err(DbError::LeaseLost { unit })
    }
}

/// A worker's connection to the queue, counting its traffic.
pub struct Queue {
    client: postgres::Client,
    traffic: Coordination,
}

impl std::fmt::Debug for Queue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Queue")
            .field("traffic", &self.traffic)
            .finish_non_exhaustive()
    }
}

/// The SQL of a unit's readiness: nothing it waits for is undone.
const READY: &str = "NOT EXISTS (SELECT 1 FROM work_units v WHERE v.state <> 'done'
    AND ((v.waits AND v.seq < u.seq) OR (v.seq = u.seq AND v.phase < u.phase)))";

impl Queue {
    /// Connect to the server at `url`.
    pub fn connect(url: &str) -> Result<Self, DbError> {
        let mut client = super::postgres::connect_url(url)?;
        let listen = format!("LISTEN {CHANGES}");
        client
            .batch_execute(&listen)
            .map_err(|e| pg_error(&e, &listen))?;
        Ok(Queue {
            client,
            traffic: Coordination::default(),
        })
    }

    /// Wait until the queue changes (a unit done or given back anywhere)
    /// or `most` has passed, whichever is first; whether it changed.
    pub fn wait(&mut self, most: Duration) -> Result<bool, DbError> {
        use postgres::fallible_iterator::FallibleIterator;
        let mut notices = self.client.notifications();
        let woke = notices
            .timeout_iter(most)
            .next()
            .map_err(|e| pg_error(&e, "waiting for the queue"))?
            .is_some();
        // Changes announced meanwhile are all seen by the next claim.
        notices
            .iter()
            .count()
            .map_err(|e| pg_error(&e, "waiting for the queue"))?;
        Ok(woke)
    }

    /// Its traffic so far.
    pub fn traffic(&self) -> Coordination {
        self.traffic
    }

    fn timed<T>(
        &mut self,
        sql: &str,
        f: impl FnOnce(&mut postgres::Client) -> Result<T, postgres::Error>,
    ) -> Result<T, DbError> {
        let clock = Instant::now();
        let r = f(&mut self.client).map_err(|e| pg_error(&e, sql));
        self.traffic.statements += 1;
        self.traffic.seconds += clock.elapsed().as_secs_f64();
        r
    }

    /// The plan, if the database holds one.
    pub fn plan(&mut self) -> Result<Option<PlanRow>, DbError> {
        let sql = "SELECT to_regclass('work_plan') IS NOT NULL";
        let exists: bool = self.timed(sql, |c| c.query_one(sql, &[]).map(|r| r.get(0)))?;
        if !exists {
            return Ok(None);
        }
        let sql = "SELECT caseload_version, planned_at, fingerprint, spec, lease_seconds FROM work_plan WHERE id = 1";
        let row = self.timed(sql, |c| c.query_opt(sql, &[]))?;
        Ok(row.map(|r| PlanRow {
            caseload_version: r.get(0),
            planned_at: r.get(1),
            fingerprint: r.get(2),
            spec: r.get(3),
            lease_seconds: r.get(4),
        }))
    }

    /// Record this worker as working (a worker of the same name that
    /// stopped is replaced).
    pub fn register(&mut self, name: &str, host: &str, pid: u32) -> Result<(), DbError> {
        let sql = "INSERT INTO work_workers (name, host, pid, caseload_version, started_at, last_seen, state)
             VALUES ($1, $2, $3, $4, now(), now(), 'working')
             ON CONFLICT (name) DO UPDATE SET host = $2, pid = $3, caseload_version = $4,
                started_at = now(), last_seen = now(), state = 'working', message = NULL";
        let version = env!("CARGO_PKG_VERSION");
        self.timed(sql, |c| {
            c.execute(sql, &[&name, &host, &i64::from(pid), &version])
        })?;
        Ok(())
    }

    /// Record how this worker stopped, with its figures (`traffic`: all
    /// its connections' coordination, this statement included).
    pub fn unregister(
        &mut self,
        name: &str,
        state: &str,
        message: Option<&str>,
        units_done: i64,
        traffic: &Coordination,
    ) -> Result<(), DbError> {
        let sql =
            "UPDATE work_workers SET state = $2, message = $3, last_seen = now(), units_done = $4,
                coordination = $5 WHERE name = $1";
        let mut counted = *traffic;
        counted.statements += 1;
        let coordination = serde_json::to_string(&counted).unwrap_or_default();
        self.timed(sql, |c| {
            c.execute(sql, &[&name, &state, &message, &units_done, &coordination])
        })?;
        Ok(())
    }

    /// Claim the first ready unit for `worker` under a new lease `token`
    /// of `lease`; `None` when none is ready now.
    pub fn claim(
        &mut self,
        worker: &str,
        token: &str,
        lease: Duration,
    ) -> Result<Option<Claimed>, DbError> {
        let sql = format!(
            "UPDATE work_units SET state = 'running', worker = $1, token = $2,
                lease_until = clock_timestamp() + make_interval(secs => $3), attempts = attempts + 1
             WHERE id = (
                SELECT u.id FROM work_units u
                WHERE (u.state = 'ready' OR (u.state = 'running' AND u.lease_until < clock_timestamp()))
                  AND {READY}
                ORDER BY u.seq, u.phase, u.id
                LIMIT 1 FOR UPDATE SKIP LOCKED)
             RETURNING id, stage, seq, scope, attempts"
        );
        let secs = lease.as_secs_f64();
        let row = self.timed(&sql, |c| c.query_opt(&sql, &[&worker, &token, &secs]))?;
        let sql = "UPDATE work_workers SET last_seen = now() WHERE name = $1";
        self.timed(sql, |c| c.execute(sql, &[&worker]))?;
        match row {
            Some(r) => {
                self.traffic.claims += 1;
                Ok(Some(Claimed {
                    id: r.get(0),
                    stage: r.get(1),
                    seq: r.get(2),
                    scope: r.get(3),
                    attempts: r.get(4),
                }))
            }
            None => {
                self.traffic.empty_claims += 1;
                Ok(None)
            }
        }
    }

    /// Extend a lease; false when `token` no longer holds the unit (it
    /// ran out and another worker claimed it).
    pub fn renew(&mut self, unit: i64, token: &str, lease: Duration) -> Result<bool, DbError> {
        // The worker is seen alive with it (one statement, one answer: 1
        // when the lease was extended).
        let sql = "WITH renewed AS (
                UPDATE work_units SET lease_until = clock_timestamp() + make_interval(secs => $3)
                WHERE id = $1 AND token = $2 AND state = 'running' RETURNING worker)
             UPDATE work_workers SET last_seen = now() WHERE name IN (SELECT worker FROM renewed)";
        let secs = lease.as_secs_f64();
        let n = self.timed(sql, |c| c.execute(sql, &[&unit, &token, &secs]))?;
        self.traffic.renewals += 1;
        Ok(n == 1)
    }

    /// Give a unit back after a failed attempt, with the error: ready for
    /// another worker, or failed for good after [`MAX_FAILURES`].
    pub fn release(&mut self, unit: i64, token: &str, error: &str) -> Result<(), DbError> {
        let sql =
            "UPDATE work_units SET failures = failures + 1, last_error = $3, lease_until = NULL,
                state = CASE WHEN failures + 1 >= $4 THEN 'failed' ELSE 'ready' END
             WHERE id = $1 AND token = $2 AND state = 'running'";
        self.timed(sql, |c| {
            c.execute(sql, &[&unit, &token, &error, &MAX_FAILURES])
        })?;
        let notify = format!("NOTIFY {CHANGES}");
        self.timed(&notify, |c| c.batch_execute(&notify))?;
        Ok(())
    }

    /// Counts of units by state: (not done and not failed, failed,
    /// ready-but-blocked-by-a-failure).
    pub fn outstanding(&mut self) -> Result<Outstanding, DbError> {
        let sql = format!(
            "SELECT count(*) FILTER (WHERE state IN ('ready', 'running')),
                    count(*) FILTER (WHERE state = 'failed'),
                    count(*) FILTER (WHERE state IN ('ready', 'running') AND NOT {READY}
                        AND EXISTS (SELECT 1 FROM work_units f WHERE f.state = 'failed'
                            AND ((f.waits AND f.seq < u.seq) OR (f.seq = u.seq AND f.phase < u.phase))))
             FROM work_units u"
        );
        let r = self.timed(&sql, |c| c.query_one(&sql, &[]))?;
        Ok(Outstanding {
            open: r.get(0),
            failed: r.get(1),
            blocked: r.get(2),
        })
    }

    /// Every unit, in order.
    pub fn units(&mut self) -> Result<Vec<UnitRow>, DbError> {
        let sql = "SELECT id, stage, seq, phase, scope, state, worker, attempts, failures, last_error, figures
             FROM work_units ORDER BY seq, phase, id";
        let rows = self.timed(sql, |c| c.query(sql, &[]))?;
        Ok(rows
            .into_iter()
            .map(|r| UnitRow {
                id: r.get(0),
                stage: r.get(1),
                seq: r.get(2),
                phase: r.get(3),
                scope: r.get(4),
                state: r.get(5),
                worker: r.get(6),
                attempts: r.get(7),
                failures: r.get(8),
                last_error: r.get(9),
                figures: r.get(10),
            })
            .collect())
    }

    /// Every worker that registered.
    pub fn workers(&mut self) -> Result<Vec<WorkerRow>, DbError> {
        // Units done counted from the units themselves: a worker still
        // working has not reported its own count yet.
        let sql = "SELECT w.name, w.host, w.pid, w.caseload_version, w.state, w.message,
                (SELECT count(*) FROM work_units u WHERE u.worker = w.name AND u.state = 'done'),
                w.coordination, EXTRACT(EPOCH FROM now() - w.last_seen)::float8
             FROM work_workers w ORDER BY w.name";
        let rows = self.timed(sql, |c| c.query(sql, &[]))?;
        Ok(rows
            .into_iter()
            .map(|r| WorkerRow {
                name: r.get(0),
                host: r.get(1),
                pid: r.get(2),
                caseload_version: r.get(3),
                state: r.get(4),
                message: r.get(5),
                units_done: r.get(6),
                coordination: r.get(7),
                silent_seconds: r.get(8),
            })
            .collect())
    }
}

/// Units not yet finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outstanding {
    /// Ready or running.
    pub open: i64,
    /// Failed for good.
    pub failed: i64,
    /// Ready or running but waiting for a failed unit: never to run.
    pub blocked: i64,
}

impl Outstanding {
    /// Whether no unit can still be done.
    pub fn finished(&self) -> bool {
        self.open == self.blocked
    }
}
