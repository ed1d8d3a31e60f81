//! Predict a recorded run's stage times on other devices
//! (`caseload predict`), in the manner of relative fitness models: what a
//! stage did (per channel: operations, bytes, fsyncs, time blocked in
//! them; CPU time; wall time) is measured once, on devices whose figures
//! are known, and each channel's blocked time is scaled by how much more
//! or less the same operations cost on the target device. The model is in
//! `docs/predict.md`; in short:
//!
//! * a device's cost of a stage's operations on one channel: reads
//!   `ops·t₀ + bytes/read_bw` with `t₀ = max(0, 1/IOPS − 4 KiB/read_bw)`
//!   (the access time a random 4 KiB read pays beyond its transfer);
//!   writes land in the page cache (their calls cost the same anywhere)
//!   and are paid at syncs: `fsyncs·fsync_latency + bytes/write_bw`;
//! * reads: the transfer is paid in full, the rest of the device time is
//!   access time of a share of the operations, so how sequential the reads
//!   were and what the page cache served, as the recorded run saw them,
//!   carry over; syncs scale with the target's cost over the source's;
//! * the stage's wall time: `W' = max(C/T, W + Σ(D' − D))` over the
//!   channels' device times `D`: of the blocked time (reads, writes and
//!   syncs, summed over threads) the share `α` that showed in wall time,
//!   `α = min(1, max(0, W − C/T) / B)` (threads overlap their waits with
//!   each other and with computing).

use caseload_engine::channel::{ChannelKind, ChannelSnapshot};
use caseload_engine::probe::ChannelProbe;
use caseload_engine::report::{RunReport, StageReport};
use serde::Serialize;
use std::collections::BTreeMap;

/// The error `predict` states on a run's total: the largest error of a
/// predicted total over the FTK 4 study's labs in docs/predict.md's check
/// (the high-end lab on DD, +22.9%: its RAID-5 array serves two threads'
/// reads at once; every lab without RAID-5 within 3%). `caseload advise`
/// quotes it beside every configuration.
pub const TOTAL_ERROR: f64 = 0.23;

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
}

impl DeviceFigures {
    /// Figures from a device model's expected figures (a model gives no
    /// fsync latency: one random access, `1/IOPS`).
    pub fn from_model(model: &caseload_lab::DeviceModel) -> Self {
        let e = &model.expect;
        DeviceFigures {
            source: format!("model {}", model.name),
            read_mb_s: e.seq_read_mb_s,
            write_mb_s: e.seq_write_mb_s,
            random_read_iops: e.random_read_iops_qd1,
            fsync_s: 1.0 / e.random_read_iops_qd1.max(1e-9),
        }
    }

    /// Figures from a channel's probe, when it measured enough.
    pub fn from_probe(p: &ChannelProbe) -> Option<Self> {
        let read = p.seq_read_128k_mb_per_s.or(p.seq_read_mb_per_s)?;
        let iops = p.random_read_iops?;
        Some(DeviceFigures {
            source: format!("probe of {}", p.path.display()),
            read_mb_s: read,
            write_mb_s: p.seq_write_mb_per_s.unwrap_or(read),
            random_read_iops: iops,
            fsync_s: p
                .fsync_median_ms
                .map_or(1.0 / iops.max(1e-9), |ms| ms / 1000.0),
        })
    }

    /// Whether every figure is positive and finite (fsync may be 0).
    pub fn is_valid(&self) -> bool {
        [self.read_mb_s, self.write_mb_s, self.random_read_iops]
            .iter()
            .all(|v| v.is_finite() && *v > 0.0)
            && self.fsync_s.is_finite()
            && self.fsync_s >= 0.0
    }

    /// Access time of a request beyond its transfer, seconds.
    fn access_s(&self) -> f64 {
        (1.0 / self.random_read_iops - 4096.0 / (self.read_mb_s * 1e6)).max(0.0)
    }

    /// Transfer seconds of `bytes` read.
    fn read_transfer_s(&self, bytes: u64) -> f64 {
        bytes as f64 / (self.read_mb_s * 1e6)
    }

    /// Device seconds of `fsyncs` syncs that flush `bytes` written.
    fn sync_s(&self, fsyncs: u64, bytes: u64) -> f64 {
        fsyncs as f64 * self.fsync_s + bytes as f64 / (self.write_mb_s * 1e6)
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
    let scale = if t_from + a_from > 0.0 {
        (t_to + a_to) / (t_from + a_from)
    } else {
        1.0
    };
    t_to + share * a_to + rest * scale
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

/// One stage.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct StagePrediction {
    /// Stage name.
    pub name: String,
    /// Wall seconds recorded.
    pub recorded_s: f64,
    /// Wall seconds predicted.
    pub predicted_s: f64,
    /// Share of blocked time that showed in wall time (α).
    pub overlap: f64,
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
        let w = s.wall_seconds;
        let cpu_wall = (s.cpu_user_seconds + s.cpu_system_seconds) / threads;
        let overlap = overlap(s, threads);
        let mut channels = BTreeMap::new();
        let mut delta = 0.0;
        for (kind, f) in &s.channels {
            let c = &f.counters;
            let total = c.blocked_ns() as f64 / 1e9;
            if total == 0.0 {
                continue;
            }
            let from = figures(source, *kind, "the source devices")?;
            let to = figures(target, *kind, "the target devices")?;
            // The device time each showed in the stage's wall time.
            let reads = overlap * c.read_blocked_ns as f64 / 1e9;
            let syncs = overlap * c.sync_blocked_ns as f64 / 1e9;
            let reads_to = carry_reads(c, reads, from, to);
            // Writes land in the page cache (their calls cost the same on
            // any device); the device pays for them when they are synced.
            let sync_cost = from.sync_s(c.fsyncs, c.bytes_written);
            let syncs_to = if sync_cost > 0.0 {
                syncs * to.sync_s(c.fsyncs, c.bytes_written) / sync_cost
            } else {
                syncs
            };
            let change = (reads_to - reads) + (syncs_to - syncs);
            delta += change;
            channels.insert(
                *kind,
                ChannelPrediction {
                    recorded_blocked_s: total,
                    // Back over the threads: what showed, unshown.
                    predicted_blocked_s: if overlap > 0.0 {
                        (total + change / overlap).max(0.0)
                    } else {
                        total
                    },
                },
            );
        }
        let predicted = (w + delta).max(cpu_wall.min(w));
        stages.push(StagePrediction {
            name: s.name.clone(),
            recorded_s: w,
            predicted_s: predicted,
            overlap,
            channels,
        });
    }
    if stages.is_empty() {
        return Err(PredictError::NoStage);
    }
    Ok(Prediction {
        recorded_total_s: stages.iter().map(|s| s.recorded_s).sum(),
        predicted_total_s: stages.iter().map(|s| s.predicted_s).sum(),
        stages,
    })
}

/// The share `α` of a stage's blocked time (reads, writes and syncs,
/// summed over threads and channels) that showed in its wall time: the
/// devices' busy time as the stage saw it, `α = min(1, max(0, W − C/T) /
/// B)`. Syncs are not set apart: a thread that syncs waits alone while
/// the others read or compute (the index stage's segments, each synced by
/// the thread that wrote it), and where every thread does wait on one (a
/// single committing writer) the stage's wall time shows it and `α` is
/// near 1. Measured on the FTK 4 study's labs (docs/predict.md), this
/// predicts a faster temp device's totals within 1% (its index stage
/// within 3%), where counting every sync as a barrier over-predicted the
/// index stage's gain by 9-11%.
pub fn overlap(s: &StageReport, threads: f64) -> f64 {
    let blocked: f64 = s
        .channels
        .values()
        .map(|c| c.counters.blocked_ns() as f64 / 1e9)
        .sum();
    let cpu_wall = (s.cpu_user_seconds + s.cpu_system_seconds) / threads.max(1.0);
    if blocked > 0.0 {
        ((s.wall_seconds - cpu_wall).max(0.0) / blocked).min(1.0)
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
        DeviceFigures {
            source: "test".into(),
            read_mb_s: read,
            write_mb_s: read,
            random_read_iops: iops,
            fsync_s: 1.0 / iops,
        }
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
