//! A planned case's figures summed up into the run report a single run
//! writes (`run.json`), with what only a distributed case has: per-worker
//! figures, the units, the coordination traffic, and the shared channels'
//! throughput over time.

use super::plan::PlanSpec;
use crate::cache::{CacheMethod, CacheMode, CacheReport};
use crate::casedb::queue::{Coordination, UnitRow, WorkerRow};
use crate::casedb::{DatabaseInfo, DbWork};
use crate::channel::{ChannelKind, ChannelSnapshot};
use crate::metrics::PeakScope;
use crate::report::{
    self, ChannelFigures, ChannelInfo, DistributedReport, Recorded, RunReport, StageReport,
    ThroughputBin, Totals, UnitFigures, UnitScope, WorkerFigures,
};
use crate::stage::StageSummary;
use std::collections::BTreeMap;

/// What [`aggregate_report`] sums up.
#[derive(Debug)]
pub struct AggregateInput<'a> {
    /// The plan.
    pub spec: &'a PlanSpec,
    /// Every unit.
    pub units: &'a [UnitRow],
    /// Every worker.
    pub workers: &'a [WorkerRow],
    /// The case database.
    pub database: DatabaseInfo,
    /// Cumulative samples of the database server's I/O, with their
    /// times (seconds since the epoch); empty when it was not measured
    /// (an external server).
    pub server_io: &'a [(f64, ChannelSnapshot)],
    /// Where the channels were.
    pub channels: BTreeMap<ChannelKind, ChannelInfo>,
    /// When the case finished.
    pub finished_at: String,
    /// Threads per worker.
    pub threads: usize,
}

/// The run report of a planned case.
pub fn aggregate_report(input: &AggregateInput<'_>) -> RunReport {
    let figures: Vec<UnitFigures> = input
        .units
        .iter()
        .filter(|u| u.state == "done")
        .filter_map(|u| u.figures.as_deref())
        .filter_map(|f| serde_json::from_str(f).ok())
        .collect();
    let database_series = database_by_stage(&figures, input.server_io);
    let mut stages = Vec::new();
    for (seq, (name, _)) in input.spec.stages.iter().enumerate() {
        let units: Vec<&UnitRow> = input
            .units
            .iter()
            .filter(|u| usize::try_from(u.seq).ok() == Some(seq))
            .collect();
        let mine: Vec<&UnitFigures> = figures
            .iter()
            .filter(|f| units.iter().any(|u| u.id == f.unit))
            .collect();
        stages.push(stage_report(
            name,
            &units,
            &mine,
            database_series.get(name.as_str()).copied(),
        ));
    }
    let mut totals = Totals::default();
    for s in &stages {
        totals.wall_seconds += s.wall_seconds;
        totals.recorded = totals.recorded.plus(&s.recorded);
        for (k, f) in &s.channels {
            let e = totals.channels.entry(*k).or_default();
            *e = e.plus(&f.counters);
        }
    }
    // The case took from the first unit's start to the last one's end.
    if let (Some(first), Some(last)) = (
        figures.iter().map(|f| f.started).reduce(f64::min),
        figures.iter().map(UnitFigures::ended).reduce(f64::max),
    ) {
        totals.wall_seconds = last - first;
    }
    let done = input.units.iter().filter(|u| u.state == "done").count() as u64;
    let failed = input.units.iter().filter(|u| u.state == "failed").count() as u64;
    let status = if failed > 0 {
        "failed"
    } else if done < input.units.len() as u64 {
        "incomplete"
    } else if totals.recorded.errors > 0 {
        "completed-with-errors"
    } else {
        "completed"
    };
    let distributed = DistributedReport {
        units: input.units.len() as u64,
        units_done: done,
        units_failed: failed,
        units_redone: input
            .units
            .iter()
            .filter(|u| u.state == "done" && u.attempts > 1)
            .count() as u64,
        workers: worker_figures(input.workers, &figures),
        coordination: input
            .workers
            .iter()
            .filter_map(|w| w.coordination.as_deref())
            .filter_map(|c| serde_json::from_str::<Coordination>(c).ok())
            .fold(Coordination::default(), |a, c| a.plus(&c)),
        throughput: throughput(&figures, input.server_io),
        database_io: if input.server_io.is_empty() {
            "not measured: the server is not on this machine; stages show what workers sent it (database_work)".into()
        } else {
            "the server's I/O sampled every 250 ms where it ran, each interval charged to the stage with the most units running in it".into()
        },
    };
    RunReport {
        schema: report::RUN_SCHEMA.into(),
        schema_version: report::RUN_SCHEMA_VERSION,
        caseload_version: env!("CARGO_PKG_VERSION").into(),
        started_at: input.spec.started_at.clone(),
        finished_at: input.finished_at.clone(),
        status: status.into(),
        workload: input.spec.workload.clone(),
        instance: None,
        threads: input.threads,
        evidence: input.spec.evidence_info.clone(),
        layout: input.spec.layout.clone(),
        channels: input.channels.clone(),
        database: input.database.clone(),
        cache: CacheReport {
            mode: CacheMode::Warm,
            method: CacheMethod::None,
            honoured: true,
            note: "a distributed case leaves each worker's page cache alone".into(),
        },
        system: crate::system::SystemContext::current(),
        stages,
        totals,
        trace: None,
        preparation: input.spec.preparation.clone(),
        channel_fault: None,
        resumed: None,
        distributed: Some(distributed),
        workstation: None,
    }
}

/// One stage's report from its units.
fn stage_report(
    name: &str,
    units: &[&UnitRow],
    figures: &[&UnitFigures],
    database: Option<ChannelSnapshot>,
) -> StageReport {
    let first = figures.iter().map(|f| f.started).reduce(f64::min);
    let last = figures.iter().map(|f| f.ended()).reduce(f64::max);
    let wall = match (first, last) {
        (Some(a), Some(b)) => b - a,
        _ => 0.0,
    };
    let mut summary = StageSummary::default();
    let mut recorded = Recorded::default();
    let mut sums: BTreeMap<ChannelKind, ChannelSnapshot> = BTreeMap::new();
    let mut work = DbWork::default();
    let (mut user, mut system) = (0.0, 0.0);
    // Batches first, the finish last: details that only the finish knows
    // (duplicate groups) are taken from it.
    for f in figures {
        summary.items += f.summary.items;
        summary.bytes += f.summary.bytes;
        for (k, v) in &f.summary.details {
            merge_detail(&mut summary.details, k, v);
        }
        recorded = recorded.plus(&f.recorded);
        for (k, c) in &f.channels {
            let e = sums.entry(*k).or_default();
            *e = e.plus(c);
        }
        work = work.plus(&f.database_work);
        user += f.cpu_user_seconds;
        system += f.cpu_system_seconds;
    }
    if let Some(d) = database {
        let e = sums.entry(ChannelKind::Database).or_default();
        *e = e.plus(&d);
    }
    let channels: BTreeMap<ChannelKind, ChannelFigures> = sums
        .into_iter()
        .map(|(k, c)| (k, ChannelFigures::from_counters(c, wall)))
        .collect();
    let failed = units.iter().find(|u| u.state == "failed");
    let (status, error) = match failed {
        Some(u) => ("failed", u.last_error.clone()),
        None if units.iter().all(|u| u.state == "done") && !units.is_empty() => ("completed", None),
        None => (
            "incomplete",
            Some("not every unit of the stage is done".to_string()),
        ),
    };
    // Units of a stage reported with the number of units, for reading;
    // the time of its split and finish units, which no other unit of the
    // stage runs beside (`caseload model` keeps it serial).
    summary
        .details
        .insert("work_units".into(), (units.len() as u64).into());
    let serial: f64 = figures
        .iter()
        .filter(|f| matches!(f.scope, UnitScope::Split | UnitScope::Finish))
        .map(|f| f.wall_seconds)
        .sum();
    if figures.iter().any(|f| !matches!(f.scope, UnitScope::Whole)) {
        summary.details.insert(
            "serial_seconds".into(),
            serde_json::json!((serial * 1000.0).round() / 1000.0),
        );
        // The units that run beside each other, in the order workers take
        // them: `caseload model` schedules them on N workers (a stage
        // ends with its longest units, not at its average).
        let mut parts: Vec<&&UnitFigures> = figures
            .iter()
            .filter(|f| !matches!(f.scope, UnitScope::Split | UnitScope::Finish))
            .collect();
        parts.sort_by_key(|f| f.unit);
        let seconds: Vec<f64> = parts
            .iter()
            .map(|f| (f.wall_seconds * 1000.0).round() / 1000.0)
            .collect();
        summary
            .details
            .insert("unit_seconds".into(), serde_json::json!(seconds));
    }
    StageReport {
        name: name.to_string(),
        status: status.into(),
        error,
        wall_seconds: wall,
        cpu_user_seconds: user,
        cpu_system_seconds: system,
        peak_rss_bytes: None,
        peak_rss_scope: PeakScope::Process,
        // Each worker's process counts its own I/O; none is kept.
        process_io: None,
        mb_per_s: if wall > 0.0 {
            summary.bytes as f64 / 1e6 / wall
        } else {
            0.0
        },
        summary,
        recorded,
        bound_by: report::bound_by(&channels),
        channels,
        machine: Default::default(),
        memory: Default::default(),
        database_work: work,
    }
}

/// Numbers add up over units; anything else is taken from the first unit
/// that has it.
fn merge_detail(
    into: &mut BTreeMap<String, serde_json::Value>,
    key: &str,
    value: &serde_json::Value,
) {
    use serde_json::Value;
    match (into.get(key), value) {
        (None, v) => {
            into.insert(key.to_string(), v.clone());
        }
        (Some(Value::Number(a)), Value::Number(b)) => {
            let sum = match (a.as_u64(), b.as_u64()) {
                (Some(a), Some(b)) => Value::from(a.saturating_add(b)),
                _ => Value::from(a.as_f64().unwrap_or(0.0) + b.as_f64().unwrap_or(0.0)),
            };
            into.insert(key.to_string(), sum);
        }
        _ => {}
    }
}

/// The database server's I/O per stage: each sampled interval goes to
/// the stage with the most unit-seconds running in it.
fn database_by_stage<'a>(
    figures: &'a [UnitFigures],
    series: &[(f64, ChannelSnapshot)],
) -> BTreeMap<&'a str, ChannelSnapshot> {
    let mut out: BTreeMap<&str, ChannelSnapshot> = BTreeMap::new();
    for pair in series.windows(2) {
        let ((t0, s0), (t1, s1)) = (&pair[0], &pair[1]);
        let delta = s1.since(s0);
        let mut best: Option<(&str, f64)> = None;
        let mut load: BTreeMap<&str, f64> = BTreeMap::new();
        for f in figures {
            let overlap = f.ended().min(*t1) - f.started.max(*t0);
            if overlap > 0.0 {
                *load.entry(f.stage.as_str()).or_default() += overlap;
            }
        }
        for (stage, l) in load {
            if best.is_none_or(|(_, b)| l > b) {
                best = Some((stage, l));
            }
        }
        if let Some((stage, _)) = best {
            let e = out.entry(stage).or_default();
            *e = e.plus(&delta);
        }
    }
    out
}

/// Per-worker sums.
fn worker_figures(workers: &[WorkerRow], figures: &[UnitFigures]) -> Vec<WorkerFigures> {
    workers
        .iter()
        .map(|w| {
            let mut out = WorkerFigures {
                name: w.name.clone(),
                host: w.host.clone(),
                state: w.state.clone(),
                message: w.message.clone(),
                coordination: w
                    .coordination
                    .as_deref()
                    .and_then(|c| serde_json::from_str(c).ok())
                    .unwrap_or_default(),
                ..WorkerFigures::default()
            };
            for f in figures.iter().filter(|f| f.worker == w.name) {
                out.units += 1;
                out.busy_seconds += f.wall_seconds;
                out.cpu_seconds += f.cpu_user_seconds + f.cpu_system_seconds;
                for (k, c) in &f.channels {
                    let e = out.channels.entry(*k).or_default();
                    *e = e.plus(c);
                }
                out.database_work = out.database_work.plus(&f.database_work);
            }
            out
        })
        .collect()
}

/// Bins at most this many; a longer case gets wider bins.
const MAX_BINS: usize = 600;

/// The shared channels' throughput over the case.
fn throughput(figures: &[UnitFigures], series: &[(f64, ChannelSnapshot)]) -> Vec<ThroughputBin> {
    let (Some(first), Some(last)) = (
        figures.iter().map(|f| f.started).reduce(f64::min),
        figures.iter().map(UnitFigures::ended).reduce(f64::max),
    ) else {
        return Vec::new();
    };
    let span = (last - first).max(1e-3);
    let width = (span / MAX_BINS as f64).max(1.0);
    let n = ((span / width).ceil() as usize).clamp(1, MAX_BINS);
    let mut bins: Vec<ThroughputBin> = (0..n)
        .map(|i| ThroughputBin {
            at_seconds: i as f64 * width,
            seconds: width,
            ..ThroughputBin::default()
        })
        .collect();
    // Spread `amount` over [a, b] (seconds after `first`) into the bins.
    let spread = |bins: &mut Vec<ThroughputBin>,
                  a: f64,
                  b: f64,
                  amount: f64,
                  pick: fn(&mut ThroughputBin) -> &mut f64| {
        let len = (b - a).max(1e-9);
        for bin in bins.iter_mut() {
            let overlap = (bin.at_seconds + width).min(b) - bin.at_seconds.max(a);
            if overlap > 0.0 {
                *pick(bin) += amount * overlap / len;
            }
        }
        // An instant unit lands whole in its bin.
        if b - a <= 1e-9
            && let Some(bin) = bins
                .iter_mut()
                .find(|x| x.at_seconds <= a && a < x.at_seconds + width)
        {
            *pick(bin) += amount;
        }
    };
    for f in figures {
        let (a, b) = (f.started - first, f.ended() - first);
        let ev = f
            .channels
            .get(&ChannelKind::Evidence)
            .copied()
            .unwrap_or_default();
        let case = f
            .channels
            .get(&ChannelKind::Case)
            .copied()
            .unwrap_or_default();
        spread(&mut bins, a, b, ev.bytes_read as f64, |x| {
            &mut x.evidence_mb_per_s
        });
        spread(
            &mut bins,
            a,
            b,
            (case.bytes_read + case.bytes_written) as f64,
            |x| &mut x.case_mb_per_s,
        );
        spread(&mut bins, a, b, (b - a).max(0.0), |x| &mut x.units_running);
    }
    for pair in series.windows(2) {
        let ((t0, s0), (t1, s1)) = (&pair[0], &pair[1]);
        let d = s1.since(s0);
        spread(
            &mut bins,
            t0 - first,
            t1 - first,
            (d.bytes_read + d.bytes_written) as f64,
            |x| &mut x.database_mb_per_s,
        );
    }
    for bin in &mut bins {
        bin.evidence_mb_per_s /= 1e6 * width;
        bin.case_mb_per_s /= 1e6 * width;
        bin.database_mb_per_s /= 1e6 * width;
        bin.units_running /= width;
    }
    bins
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(stage: &str, started: f64, wall: f64, ev: u64) -> UnitFigures {
        let mut channels = BTreeMap::new();
        channels.insert(
            ChannelKind::Evidence,
            ChannelSnapshot {
                bytes_read: ev,
                ..ChannelSnapshot::default()
            },
        );
        UnitFigures {
            unit: 1,
            stage: stage.into(),
            scope: UnitScope::Whole,
            worker: "w".into(),
            attempt: 1,
            started,
            wall_seconds: wall,
            cpu_user_seconds: 0.0,
            cpu_system_seconds: 0.0,
            summary: StageSummary::default(),
            recorded: Recorded::default(),
            channels,
            database_work: DbWork::default(),
        }
    }

    #[test]
    fn throughput_keeps_every_byte_and_counts_running_units() {
        let f = vec![
            unit("a", 100.0, 4.0, 8_000_000),
            unit("b", 102.0, 2.0, 2_000_000),
        ];
        let bins = throughput(&f, &[]);
        assert_eq!(bins.len(), 4);
        let total: f64 = bins.iter().map(|b| b.evidence_mb_per_s * b.seconds).sum();
        assert!((total - 10.0).abs() < 1e-9, "{total}");
        assert!((bins[0].units_running - 1.0).abs() < 1e-9);
        assert!((bins[3].units_running - 2.0).abs() < 1e-9);
        assert!((bins[3].evidence_mb_per_s - 3.0).abs() < 1e-9);
    }

    #[test]
    fn server_io_goes_to_the_busiest_stage_of_each_interval() {
        let f = vec![unit("a", 0.0, 1.0, 0), unit("b", 1.0, 3.0, 0)];
        let at = |t: f64, w: u64| {
            (
                t,
                ChannelSnapshot {
                    bytes_written: w,
                    ..ChannelSnapshot::default()
                },
            )
        };
        let series = vec![at(0.0, 0), at(1.0, 10), at(2.0, 30), at(4.0, 100)];
        let by = database_by_stage(&f, &series);
        assert_eq!(by["a"].bytes_written, 10);
        assert_eq!(by["b"].bytes_written, 90);
    }

    #[test]
    fn numeric_details_add_up_and_others_keep_the_first() {
        let mut d = BTreeMap::new();
        merge_detail(&mut d, "n", &serde_json::json!(2));
        merge_detail(&mut d, "n", &serde_json::json!(3));
        merge_detail(&mut d, "md5", &serde_json::json!("ab"));
        merge_detail(&mut d, "md5", &serde_json::json!("cd"));
        assert_eq!(d["n"], serde_json::json!(5));
        assert_eq!(d["md5"], serde_json::json!("ab"));
    }
}
