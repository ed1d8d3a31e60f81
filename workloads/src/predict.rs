//! Predict a recorded run's stage times on other devices
//! (`caseload predict`), in the manner of relative fitness models: what a
//! stage did (per channel: operations, bytes, fsyncs, time blocked in
//! them; CPU time; wall time; the database writer's busy, commit and
//! waited time) is measured once, on devices whose figures are known, and
//! each part's device time is scaled by how much more or less the same
//! operations cost on the target device. The model is in
//! `docs/predict.md`; in short:
//!
//! * a stage is two lanes that run side by side: its own threads (the
//!   producers: reading evidence, computing, writing case and temp files,
//!   looking rows up) and the case database's single writer, whose busy
//!   time is recorded; the time the producers waited for the writer is
//!   recorded too, so the producers' own lane is the wall time less it;
//! * the writer's device time is its commit chain: each commit waits for
//!   the log's sync before the next transaction starts, so it scales with
//!   the devices' commit latency (a probe's write-then-fdatasync chain, or
//!   the device model's own mechanics simulated with the stage's gap
//!   between commits), not an empty fsync's median;
//! * the producers' device time per channel: reads `ops·t₀ + bytes/read_bw`
//!   with `t₀ = max(0, 1/IOPS − 4 KiB/read_bw)`, the transfer paid in full
//!   and the rest access time of a share of the operations (how
//!   sequential the reads were and what the page cache served carry
//!   over); syncs `fsyncs·fsync_latency + bytes/write_bw`. Of the blocked
//!   time the share `α = min(1, max(0, P − C/T) / B)` showed in the lane;
//!   a device that serves one request at a time (a rotating disk) makes
//!   threads wait on each other, one that serves several lets their waits
//!   overlap, so moving between the two divides or multiplies by `α`;
//! * the stage's wall time: `W' = max(P', L') + (W − max(P, L))`.

use caseload_engine::channel::{ChannelKind, ChannelSnapshot};
use caseload_engine::probe::ChannelProbe;
use caseload_engine::report::{RunReport, StageReport};
use caseload_lab::model::{Mechanism, Timing};
use serde::Serialize;
use std::collections::BTreeMap;

/// The error `predict` states on a run's total at most: the largest error
/// of a predicted total over every pair of the FTK 4 study's labs in
/// docs/predict.md's check (`benches/scripts/predict-check.sh`, with the
/// models' figures and with probes; -31.5%, from the unthrottled PCIe
/// database's floor figures down to a disk). `caseload advise` quotes it.
pub const TOTAL_ERROR: f64 = 0.32;

/// Each stage's error band as measured on the FTK 4 study's labs
/// (docs/predict.md's table, from `benches/scripts/predict-check.sh`):
/// the largest error of a stage of a second or more over every pair of
/// labs, upwards and downwards, DD and E01, with the models' figures and
/// with probes. A stage not listed gets [`TOTAL_ERROR`].
pub const STAGE_ERROR: &[(&str, f64)] = &[
    ("filesystem", 0.65),
    ("file-hash", 0.59),
    ("index", 0.41),
    ("carve", 0.21),
    ("kff", 0.65),
];

/// The error band `predict` states for a stage.
pub fn stage_error(name: &str) -> f64 {
    STAGE_ERROR
        .iter()
        .find(|(n, _)| *n == name)
        .map_or(TOTAL_ERROR, |(_, e)| *e)
}

/// The gap between two commits a device model's commit chain is
/// simulated with when a stage does not say (a writer's work between
/// commits: an insert or two and the round trips).
pub const DEFAULT_COMMIT_GAP_S: f64 = 0.0005;

/// What a device does, as far as the model needs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeviceFigures {
    /// Where the figures come from (a model name, a probe).
    pub source: String,
    /// Sequential read MB/s.
    pub read_mb_s: f64,
    /// Sequential write MB/s.
    pub write_mb_s: f64,
    /// 4 KiB random reads per second at queue depth 1.
    pub random_read_iops: f64,
    /// Latency of an fsync of a small write, seconds.
    pub fsync_s: f64,
    /// Mean seconds of a commit in a commit chain (an 8 KiB write appended
    /// after the last, then synced): a probe's `commit_mean_ms`; for a
    /// model with mechanics simulated at the stage's own gap between
    /// commits ([`Self::commit_at`]); otherwise `fsync_s`.
    pub commit_s: f64,
    /// Whether the device serves one request at a time, in arrival order
    /// (a rotating disk, an array at queue depth 1, a network share as
    /// modelled; a probe whose random reads with four threads are not half
    /// again as fast as with one): threads waiting on it wait on each
    /// other.
    pub serial: bool,
    /// Whether the figures are only a floor (a model of an unthrottled
    /// device, as fast as the machine's memory-backed loop device): how
    /// much of a run's time on it was access time cannot be told from
    /// them.
    pub floor: bool,
    /// The model's mechanics, when the figures come from a model that has
    /// them: its commit chain is simulated.
    #[serde(skip)]
    pub mechanics: Option<Timing>,
}

impl DeviceFigures {
    /// Figures from a device model's expected figures (a model gives no
    /// fsync latency: one random access, `1/IOPS`; its mechanics, when it
    /// has them, give the commit chain).
    pub fn from_model(model: &caseload_lab::DeviceModel) -> Self {
        let e = &model.expect;
        let fsync = 1.0 / e.random_read_iops_qd1.max(1e-9);
        let mechanics = match model.mechanism {
            Mechanism::Model => model.timing.clone(),
            Mechanism::Throttle | Mechanism::None => None,
        };
        let serial = match &mechanics {
            Some(Timing::Flash(f)) => f.channels <= 1,
            Some(_) => true,
            None => false,
        };
        DeviceFigures {
            source: format!("model {}", model.name),
            read_mb_s: e.seq_read_mb_s,
            write_mb_s: e.seq_write_mb_s,
            random_read_iops: e.random_read_iops_qd1,
            fsync_s: fsync,
            commit_s: mechanics.as_ref().map_or(fsync, |t| {
                caseload_lab::timing::commit_chain_s(t, DEFAULT_COMMIT_GAP_S)
            }),
            serial,
            floor: model.mechanism == Mechanism::None,
            mechanics,
        }
    }

    /// Figures from a channel's probe, when it measured enough.
    pub fn from_probe(p: &ChannelProbe) -> Option<Self> {
        let read = p.seq_read_128k_mb_per_s.or(p.seq_read_mb_per_s)?;
        let iops = p.random_read_iops?;
        let fsync = p
            .fsync_median_ms
            .map_or(1.0 / iops.max(1e-9), |ms| ms / 1000.0);
        Some(DeviceFigures {
            source: format!("probe of {}", p.path.display()),
            read_mb_s: read,
            write_mb_s: p.seq_write_mb_per_s.unwrap_or(read),
            random_read_iops: iops,
            fsync_s: fsync,
            commit_s: p.commit_mean_ms.map_or(fsync, |ms| ms / 1000.0),
            serial: p.random_read_iops_qd4.is_some_and(|qd4| qd4 < 1.5 * iops),
            floor: false,
            mechanics: None,
        })
    }

    /// Figures given as numbers (a commit costs an fsync; served in
    /// parallel).
    pub fn from_numbers(
        source: String,
        read_mb_s: f64,
        write_mb_s: f64,
        random_read_iops: f64,
        fsync_s: f64,
    ) -> Self {
        DeviceFigures {
            source,
            read_mb_s,
            write_mb_s,
            random_read_iops,
            fsync_s,
            commit_s: fsync_s,
            serial: false,
            floor: false,
            mechanics: None,
        }
    }

    /// Whether every figure is positive and finite (fsync may be 0).
    pub fn is_valid(&self) -> bool {
        [self.read_mb_s, self.write_mb_s, self.random_read_iops]
            .iter()
            .all(|v| v.is_finite() && *v > 0.0)
            && [self.fsync_s, self.commit_s]
                .iter()
                .all(|v| v.is_finite() && *v >= 0.0)
    }

    /// Seconds of one commit of a chain whose commits are `gap_s` apart.
    pub fn commit_at(&self, gap_s: f64) -> f64 {
        self.mechanics.as_ref().map_or(self.commit_s, |t| {
            caseload_lab::timing::commit_chain_s(t, gap_s)
        })
    }

    /// Access time of a request beyond its transfer, seconds.
    fn access_s(&self) -> f64 {
        (1.0 / self.random_read_iops - 4096.0 / (self.read_mb_s * 1e6)).max(0.0)
    }

    /// Transfer seconds of `bytes` read.
    fn read_transfer_s(&self, bytes: u64) -> f64 {
        bytes as f64 / (self.read_mb_s * 1e6)
    }

    /// Device seconds of `fsyncs` syncs, each `per_sync` seconds, that
    /// flush `bytes` written.
    fn sync_s(&self, fsyncs: u64, per_sync: f64, bytes: u64) -> f64 {
        fsyncs as f64 * per_sync + bytes as f64 / (self.write_mb_s * 1e6)
    }
}

/// The device time `device_s` of a channel's reads on `from`, carried to
/// `to`: the transfer is paid in full (or, when the device time is less,
/// the page cache served that share of it), the rest is access time of a
/// share of the operations (sequential streams pay few), and what is left
/// over (queueing) scales with the devices' costs.
fn carry_reads(
    c: &ChannelSnapshot,
    device_s: f64,
    from: &DeviceFigures,
    to: &DeviceFigures,
) -> f64 {
    let (t_from, t_to) = (
        from.read_transfer_s(c.bytes_read),
        to.read_transfer_s(c.bytes_read),
    );
    if device_s <= t_from {
        return if t_from > 0.0 {
            device_s * t_to / t_from
        } else {
            device_s
        };
    }
    let (a_from, a_to) = (
        c.read_ops as f64 * from.access_s(),
        c.read_ops as f64 * to.access_s(),
    );
    let share = if a_from > 0.0 {
        ((device_s - t_from) / a_from).min(1.0)
    } else {
        0.0
    };
    let rest = device_s - t_from - share * a_from;
    // What is left beyond transfer and access: on a device slower than its
    // figures it is queueing, which shrinks with a faster device; on one
    // faster than the target it is software (the file system, the loop
    // device, the server's read path), kept as seconds (carry_cost's
    // reason: scaled by a disk's cost it grew a 0.25 s lookup stage on
    // flash to 35 s on a disk that measured 21 s).
    let rest_to = if t_to + a_to > t_from + a_from {
        rest
    } else if t_from + a_from > 0.0 {
        rest * (t_to + a_to) / (t_from + a_from)
    } else {
        rest
    };
    t_to + share * a_to + rest_to
}

/// Device seconds `device_s` of syncs whose modelled cost is `cost_from`
/// on the source devices, carried to a target where they cost `cost_to`:
/// scaled by the ratio, except that on the way to a slower device what
/// the source took beyond its modelled cost is kept as seconds, not
/// scaled. On a fast device that excess is software (the file system's
/// journal, the loop device, the server's own write path: about 0.1-0.3
/// ms a sync on the lab's unthrottled flash, whose model says 0.125 ms in
/// all), the same on any device, and scaling it by a disk's 60-fold cost
/// predicted 20 s for 11 s of commits; on a slow device the excess is
/// queueing behind other requests, which shrinks with the device.
fn carry_cost(device_s: f64, cost_from: f64, cost_to: f64) -> f64 {
    if cost_from <= 0.0 {
        return device_s;
    }
    if cost_to > cost_from && device_s > cost_from {
        device_s + cost_to - cost_from
    } else {
        device_s * cost_to / cost_from
    }
}

/// Devices by channel.
pub type Devices = BTreeMap<ChannelKind, DeviceFigures>;

/// Errors predicting.
#[derive(Debug, thiserror::Error)]
pub enum PredictError {
    /// A channel the run used has no figures.
    #[error("no figures for the {0} channel's device in {1}")]
    MissingChannel(ChannelKind, &'static str),
    /// Figures that cannot be used.
    #[error("the {0} channel's figures in {1} are not positive and finite")]
    BadFigures(ChannelKind, &'static str),
    /// The run has no completed stage.
    #[error("the run has no completed stage to predict")]
    NoStage,
}

/// One channel of one stage: recorded and predicted blocked seconds.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ChannelPrediction {
    /// Blocked seconds recorded (reads + writes + syncs, over threads).
    pub recorded_blocked_s: f64,
    /// Blocked seconds predicted on the target.
    pub predicted_blocked_s: f64,
}

/// The database writer's lane of one stage.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct WriterPrediction {
    /// The writer's busy seconds recorded.
    pub recorded_busy_s: f64,
    /// Its busy seconds predicted.
    pub predicted_busy_s: f64,
    /// Transactions committed.
    pub commits: u64,
    /// Seconds between two commits (the writer's other work per
    /// transaction), as recorded.
    pub gap_s: f64,
    /// Seconds a commit costs on the source devices and on the target.
    pub commit_from_s: f64,
    /// See `commit_from_s`.
    pub commit_to_s: f64,
}

/// One stage.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct StagePrediction {
    /// Stage name.
    pub name: String,
    /// Wall seconds recorded.
    pub recorded_s: f64,
    /// Wall seconds predicted.
    pub predicted_s: f64,
    /// The stage's error band as measured on the lab (a share:
    /// [`stage_error`]).
    pub error_band: f64,
    /// The producers' own lane: the wall time less the time its threads
    /// waited for the database writer, recorded and predicted.
    pub producers_recorded_s: f64,
    /// See `producers_recorded_s`.
    pub producers_predicted_s: f64,
    /// Share of the producers' blocked time that showed in their lane (α).
    pub overlap: f64,
    /// The database writer's lane, when the run recorded it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub writer: Option<WriterPrediction>,
    /// Per channel.
    pub channels: BTreeMap<ChannelKind, ChannelPrediction>,
}

/// A run's prediction.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Prediction {
    /// Stages in order (completed ones).
    pub stages: Vec<StagePrediction>,
    /// Sum of recorded stage wall seconds.
    pub recorded_total_s: f64,
    /// Sum of predicted stage wall seconds.
    pub predicted_total_s: f64,
    /// The total's error band: the stages' bands weighted by their
    /// predicted seconds, at most [`TOTAL_ERROR`], the worst measured.
    pub error_band: f64,
    /// What makes this prediction less sure than its band says.
    pub warnings: Vec<String>,
}

fn secs(ns: u64) -> f64 {
    ns as f64 / 1e9
}

/// Predict `run`'s stage times on `target`, the run having been recorded
/// on `source`.
pub fn predict(
    run: &RunReport,
    source: &Devices,
    target: &Devices,
) -> Result<Prediction, PredictError> {
    let threads = run.threads.max(1) as f64;
    let mut stages = Vec::new();
    for s in run.stages.iter().filter(|s| s.status == "completed") {
        stages.push(predict_stage(s, threads, source, target)?);
    }
    if stages.is_empty() {
        return Err(PredictError::NoStage);
    }
    let mut warnings = Vec::new();
    for (kind, f) in source {
        let read = stages.iter().any(|s| {
            s.channels
                .get(kind)
                .is_some_and(|c| c.recorded_blocked_s > 0.0)
        });
        let slower = target
            .get(kind)
            .is_some_and(|t| t.random_read_iops < f.random_read_iops);
        if f.floor && read && slower {
            warnings.push(format!(
                "the {kind} channel's source figures ({}) are a floor, not what the device did: how much of its time was access time cannot be told from them, and a prediction to a slower device errs low (the FTK 4 study's KFF stage from the unthrottled PCIe database to a 7200 rpm disk: -55%); probe the devices (`caseload probe --json`) for their figures",
                f.source
            ));
        }
    }
    let recorded_total_s = stages.iter().map(|s| s.recorded_s).sum();
    let predicted_total_s: f64 = stages.iter().map(|s| s.predicted_s).sum();
    let weighted = if predicted_total_s > 0.0 {
        stages
            .iter()
            .map(|s| s.predicted_s * s.error_band)
            .sum::<f64>()
            / predicted_total_s
    } else {
        TOTAL_ERROR
    };
    Ok(Prediction {
        recorded_total_s,
        predicted_total_s,
        error_band: weighted.min(TOTAL_ERROR),
        stages,
        warnings,
    })
}

/// The writer's lane, when the stage recorded it: its busy seconds, its
/// commits and the recorded gap between two of them.
struct WriterLane {
    busy_s: f64,
    commits: u64,
    gap_s: f64,
}

fn predict_stage(
    s: &StageReport,
    threads: f64,
    source: &Devices,
    target: &Devices,
) -> Result<StagePrediction, PredictError> {
    let w = s.wall_seconds;
    let cpu_wall = (s.cpu_user_seconds + s.cpu_system_seconds) / threads;
    let work = &s.database_work;
    let writer = (work.busy_ns > 0).then(|| WriterLane {
        busy_s: secs(work.busy_ns),
        commits: work.transactions,
        gap_s: (secs(work.busy_ns.saturating_sub(work.commit_ns))
            / work.transactions.max(1) as f64)
            .max(0.0),
    });
    // The producers' own lane: what the stage's threads spent waiting for
    // the writer is the writer's lane showing, not theirs.
    let producers = if writer.is_some() {
        (w - secs(work.waited_ns).min(w)).max(0.0)
    } else {
        w
    };
    // The database channel's writes and syncs are the writer's when its
    // lane is known (it is the one thread writing the database).
    let writer_owns = |kind: ChannelKind| writer.is_some() && kind == ChannelKind::Database;
    let producer_blocked: f64 = s
        .channels
        .iter()
        .map(|(k, f)| {
            let c = &f.counters;
            if writer_owns(*k) {
                secs(c.read_blocked_ns)
            } else {
                secs(c.blocked_ns())
            }
        })
        .sum();
    let overlap = shown_share(producers, cpu_wall, producer_blocked);
    let mut channels = BTreeMap::new();
    let mut producers_delta = 0.0;
    let mut writer_delta = 0.0;
    let mut writer_commit = (0.0, 0.0);
    for (kind, f) in &s.channels {
        let c = &f.counters;
        let total = secs(c.blocked_ns());
        if total == 0.0 {
            continue;
        }
        let from = figures(source, *kind, "the source devices")?;
        let to = figures(target, *kind, "the target devices")?;
        // Reads: the device time that showed in the producers' lane.
        let reads = overlap * secs(c.read_blocked_ns);
        let mut reads_to = carry_reads(c, reads, from, to);
        if overlap > 0.0 {
            // A device serving one request at a time made the threads
            // wait on each other (α is about one over their number); one
            // serving several lets their waits overlap instead.
            if from.serial && !to.serial {
                reads_to *= overlap;
            } else if to.serial && !from.serial {
                reads_to /= overlap;
            }
        }
        // What changes in the producers' lane, and in the writer's own.
        let mut shown = reads_to - reads;
        let mut own = 0.0;
        if let Some(lane) = writer.as_ref().filter(|_| writer_owns(*kind)) {
            // The writer's commit chain: every commit waits for its sync.
            let (per_from, per_to) = (from.commit_at(lane.gap_s), to.commit_at(lane.gap_s));
            let device = secs(c.write_blocked_ns + c.sync_blocked_ns).min(lane.busy_s);
            own = carry_cost(
                device,
                from.sync_s(c.fsyncs, per_from, c.bytes_written),
                to.sync_s(c.fsyncs, per_to, c.bytes_written),
            ) - device;
            writer_commit = (per_from, per_to);
        } else {
            let syncs = overlap * secs(c.sync_blocked_ns + c.write_blocked_ns);
            let syncs_to = carry_cost(
                syncs,
                from.sync_s(c.fsyncs, from.fsync_s, c.bytes_written),
                to.sync_s(c.fsyncs, to.fsync_s, c.bytes_written),
            );
            shown += syncs_to - syncs;
        }
        producers_delta += shown;
        writer_delta += own;
        channels.insert(
            *kind,
            ChannelPrediction {
                recorded_blocked_s: total,
                // Back over the threads: what showed, unshown (the
                // writer's share is its own: one thread).
                predicted_blocked_s: (total
                    + if overlap > 0.0 { shown / overlap } else { 0.0 }
                    + own)
                    .max(0.0),
            },
        );
    }
    let producers_to = (producers + producers_delta).max(cpu_wall.min(producers));
    let (predicted, writer_prediction) = match writer {
        Some(lane) => {
            let busy_to = (lane.busy_s + writer_delta).max(0.0);
            // What neither lane explains (the writer's idle start, the
            // stage's own opening and closing) is carried as it was.
            let rest = (w - producers.max(lane.busy_s)).max(0.0);
            (
                producers_to.max(busy_to) + rest,
                Some(WriterPrediction {
                    recorded_busy_s: lane.busy_s,
                    predicted_busy_s: busy_to,
                    commits: lane.commits,
                    gap_s: lane.gap_s,
                    commit_from_s: writer_commit.0,
                    commit_to_s: writer_commit.1,
                }),
            )
        }
        None => (producers_to, None),
    };
    Ok(StagePrediction {
        name: s.name.clone(),
        recorded_s: w,
        predicted_s: predicted,
        error_band: stage_error(&s.name),
        producers_recorded_s: producers,
        producers_predicted_s: producers_to,
        overlap,
        writer: writer_prediction,
        channels,
    })
}

/// The share `α` of a stage's blocked time (reads, writes and syncs,
/// summed over threads and channels) that showed in its wall time: the
/// devices' busy time as the stage saw it, `α = min(1, max(0, W − C/T) /
/// B)`. `caseload model` uses it for a stage as a whole; `predict` takes
/// the same share over the producers' own lane (the wall time less their
/// waits for the database writer).
pub fn overlap(s: &StageReport, threads: f64) -> f64 {
    let blocked: f64 = s
        .channels
        .values()
        .map(|c| c.counters.blocked_ns() as f64 / 1e9)
        .sum();
    let cpu_wall = (s.cpu_user_seconds + s.cpu_system_seconds) / threads.max(1.0);
    shown_share(s.wall_seconds, cpu_wall, blocked)
}

/// Of `blocked` seconds (summed over threads), the share that showed in
/// a lane of `lane_s` seconds whose computing took `cpu_wall`: `min(1,
/// max(0, lane − cpu_wall) / blocked)`, 0 without blocked time.
fn shown_share(lane_s: f64, cpu_wall: f64, blocked: f64) -> f64 {
    if blocked > 0.0 {
        ((lane_s - cpu_wall).max(0.0) / blocked).min(1.0)
    } else {
        0.0
    }
}

fn figures<'a>(
    devices: &'a Devices,
    kind: ChannelKind,
    which: &'static str,
) -> Result<&'a DeviceFigures, PredictError> {
    let f = devices
        .get(&kind)
        .ok_or(PredictError::MissingChannel(kind, which))?;
    if !f.is_valid() {
        return Err(PredictError::BadFigures(kind, which));
    }
    Ok(f)
}

#[cfg(test)]
mod tests {
    use super::*;
    use caseload_engine::report::{ChannelFigures, StageReport};

    fn device(read: f64, iops: f64) -> DeviceFigures {
        DeviceFigures::from_numbers("test".into(), read, read, iops, 1.0 / iops)
    }

    fn all(d: DeviceFigures) -> Devices {
        ChannelKind::ALL
            .into_iter()
            .map(|k| (k, d.clone()))
            .collect()
    }

    fn base_run() -> RunReport {
        serde_json::from_str(include_str!("../tests/data/run.json")).unwrap()
    }

    fn run_with(stage: StageReport) -> RunReport {
        let mut r = base_run();
        r.threads = 2;
        r.stages = vec![stage];
        r
    }

    fn stage(wall: f64, cpu: f64, db_reads: u64, db_bytes: u64, db_blocked: f64) -> StageReport {
        let mut s = base_run().stages[0].clone();
        s.wall_seconds = wall;
        s.cpu_user_seconds = cpu;
        s.cpu_system_seconds = 0.0;
        s.status = "completed".into();
        let counters = ChannelSnapshot {
            read_ops: db_reads,
            bytes_read: db_bytes,
            read_blocked_ns: (db_blocked * 1e9) as u64,
            ..ChannelSnapshot::default()
        };
        s.channels = [(
            ChannelKind::Database,
            ChannelFigures::from_counters(counters, wall),
        )]
        .into_iter()
        .collect();
        s
    }

    #[test]
    fn an_io_bound_stage_follows_its_device_and_a_cpu_bound_one_does_not() {
        // 10,000 random 4 KiB database reads, 20 s blocked over 2 threads,
        // wall 10.5 s, 1 s of CPU: I/O bound.
        let slow = all(device(150.0, 200.0));
        let fast = all(device(500.0, 20_000.0));
        let run = run_with(stage(10.5, 1.0, 10_000, 10_000 * 4096, 20.0));
        let p = predict(&run, &slow, &fast).unwrap();
        let s = &p.stages[0];
        assert!((s.overlap - 0.5).abs() < 1e-9, "{}", s.overlap);
        // Blocked time scales with the cost ratio (about 1/77 here).
        let db = &s.channels[&ChannelKind::Database];
        assert!(db.predicted_blocked_s < 0.5, "{db:?}");
        assert!(
            s.predicted_s < 1.0 && s.predicted_s >= 0.5,
            "{}",
            s.predicted_s
        );
        // The same devices predict the recorded time.
        let same = predict(&run, &slow, &slow).unwrap();
        assert!((same.predicted_total_s - 10.5).abs() < 1e-9);
        // A CPU-bound stage hardly moves.
        let cpu = run_with(stage(10.0, 19.0, 100, 100 * 4096, 0.2));
        let p = predict(&cpu, &slow, &fast).unwrap();
        assert!(p.predicted_total_s > 9.4, "{}", p.predicted_total_s);
    }

    fn model(name: &str) -> DeviceFigures {
        DeviceFigures::from_model(&crate::devices::device(name).unwrap())
    }

    /// The file-hash stage on the FTK 4 base system's database disk (from
    /// a run of the study): the writer's 1,360 commits are the stage.
    fn commit_bound() -> RunReport {
        let mut s = stage(11.6, 1.3, 70, 400_000, 0.07);
        s.database_work = caseload_engine::casedb::DbWork {
            writes: 2719,
            transactions: 1360,
            rows: 10621,
            busy_ns: 11_530_000_000,
            commit_ns: 10_720_000_000,
            waited_ns: 9_000_000_000,
            drain_ns: 0,
        };
        let db = s.channels.get_mut(&ChannelKind::Database).unwrap();
        db.counters.fsyncs = 1361;
        db.counters.bytes_written = 20_000_000;
        db.counters.write_ops = 1683;
        db.counters.sync_blocked_ns = 10_560_000_000;
        db.counters.write_blocked_ns = 20_000_000;
        run_with(s)
    }

    #[test]
    fn a_commit_bound_stage_follows_its_commit_chain_down_to_its_producers() {
        let run = commit_bound();
        let (hdd, ssd) = (all(model("hdd-7200")), all(model("sata-ssd")));
        // The same devices give the recorded time.
        let same = predict(&run, &hdd, &hdd).unwrap();
        assert!((same.predicted_total_s - 11.6).abs() < 1e-9, "{same:?}");
        let p = predict(&run, &hdd, &ssd).unwrap();
        let s = &p.stages[0];
        let writer = s.writer.as_ref().unwrap();
        // A commit on the disk's model is about a revolution less the
        // writer's other work between two commits (0.6 ms here).
        assert!(
            (0.0070..0.0085).contains(&writer.commit_from_s),
            "{writer:?}"
        );
        // Commits on flash cost next to nothing: the writer's lane is its
        // other work, and the producers' 2.6 s end the stage.
        assert!(writer.predicted_busy_s < 1.2, "{writer:?}");
        assert!((s.producers_recorded_s - 2.6).abs() < 1e-9, "{s:?}");
        assert!((2.4..2.8).contains(&s.predicted_s), "{}", s.predicted_s);
        // And back: from flash to the disk, the commit chain returns.
        let mut fast = commit_bound();
        let st = &mut fast.stages[0];
        st.wall_seconds = 1.43;
        st.database_work.busy_ns = 1_090_000_000;
        st.database_work.commit_ns = 250_000_000;
        st.database_work.waited_ns = 30_000_000;
        let db = st.channels.get_mut(&ChannelKind::Database).unwrap();
        db.counters.sync_blocked_ns = 160_000_000;
        db.counters.write_blocked_ns = 10_000_000;
        // (The base lab measured 11.6 s: within 15%.)
        let back = predict(&fast, &all(model("pcie-ssd")), &hdd).unwrap();
        let b = back.stages[0].predicted_s;
        assert!((9.9..13.3).contains(&b), "{b}");
    }

    #[test]
    fn threads_queue_on_a_disk_and_overlap_on_flash() {
        // Two threads' 3,718 random lookups on a 7200 rpm disk: 40 s
        // blocked in 21 s of wall time (each waits for the other's).
        let run = run_with(stage(21.0, 0.5, 3718, 3718 * 8192, 40.0));
        let (hdd, ssd) = (all(model("hdd-7200")), all(model("sata-ssd")));
        assert!(hdd[&ChannelKind::Database].serial && !ssd[&ChannelKind::Database].serial);
        let p = predict(&run, &hdd, &ssd).unwrap();
        // On flash both threads' lookups are served at once: about half
        // of the 0.4 s they cost one after another.
        let s = &p.stages[0];
        assert!((0.2..0.6).contains(&s.predicted_s), "{s:?}");
    }

    #[test]
    fn syncs_slower_than_modelled_keep_their_excess_as_seconds_on_a_slower_device() {
        // 1 s of syncs modelled at 0.5 s: to a device where they cost 2 s,
        // 2.5 s (the 0.5 s of overhead kept); to a faster one, scaled.
        assert!((carry_cost(1.0, 0.5, 2.0) - 2.5).abs() < 1e-12);
        assert!((carry_cost(1.0, 0.5, 0.25) - 0.5).abs() < 1e-12);
        // Faster than modelled: scaled either way.
        assert!((carry_cost(0.25, 0.5, 2.0) - 1.0).abs() < 1e-12);
        assert_eq!(carry_cost(0.3, 0.0, 1.0), 0.3);
    }

    #[test]
    fn missing_or_impossible_figures_are_refused() {
        let run = run_with(stage(1.0, 0.1, 10, 40960, 0.5));
        let mut partial = all(device(150.0, 200.0));
        partial.remove(&ChannelKind::Database);
        assert!(matches!(
            predict(&run, &partial, &all(device(1.0, 1.0))),
            Err(PredictError::MissingChannel(ChannelKind::Database, _))
        ));
        assert!(matches!(
            predict(&run, &all(device(150.0, 200.0)), &all(device(0.0, 1.0))),
            Err(PredictError::BadFigures(ChannelKind::Database, _))
        ));
    }
}
