//! How a case's processing scales over many workstations that share one
//! evidence store and one database server (`caseload model`): exact Mean
//! Value Analysis (MVA) of a closed queueing network, per stage. The model
//! and its assumptions are in `docs/model.md`; in short:
//!
//! * each of `N` workers loops over the stage's work units: it computes on
//!   its own (a delay, `Z`: its CPU and its own temp and case channels),
//!   then is served by each shared station `k` (the evidence store, the
//!   database, the link between them and the workers) for its service
//!   demand `D_k`;
//! * demands come from one recorded run: a station's demand is the device
//!   time the run saw on its channel (as `caseload predict` counts it: all
//!   sync time, and the share `α` of the other blocked time that showed in
//!   wall time), the link's is the bytes it would carry over its rate, and
//!   `Z` is the rest of the stage's wall time;
//! * MVA gives the throughput `X(N)` exactly for a product-form network
//!   (Reiser and Lavenberg, 1980): `R_k(n) = D_k·(1 + Q_k(n−1))`, `X(n) =
//!   n / (Z + Σ R_k(n))`, `Q_k(n) = X(n)·R_k(n)`;
//! * the stage's time on `N` workers is `1 / X(N)` with the whole stage as
//!   the job (splitting it into `U` units scales every demand by `1/U` and
//!   the throughput by `U`, so `U` cancels), except that a stage cannot
//!   use more workers than it has units to run at once: a run recorded by
//!   a distributed case (`cluster`, `report`) says how many (`batches`, or
//!   `work_units`), and the stage gets `min(N, U)` workers, while the time
//!   of its split and finish units (`serial_seconds`) stays serial; the
//!   asymptotic bounds are
//!   `X(N) ≤ min(N / (D + Z), 1 / D_max)` and the knee `N* = (D + Z) /
//!   D_max`, where the bottleneck starts to saturate.

use crate::predict::overlap;
use caseload_engine::channel::ChannelKind;
use caseload_engine::report::RunReport;
use serde::Serialize;

/// Version of the JSON `caseload model --json` prints.
pub const MODEL_SCHEMA_VERSION: u32 = 1;

/// Errors modelling.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ModelError {
    /// The run has no completed stage.
    #[error("the run has no completed stage to model")]
    NoStage,
    /// A worker count of zero or a list without one.
    #[error("worker counts must be at least 1, got {0:?}")]
    BadWorkers(Vec<u32>),
    /// A demand or link rate that is not a finite non-negative number.
    #[error("{0} must be a finite positive number, got {1}")]
    BadFigure(&'static str, f64),
}

/// A shared resource every worker queues at.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Station {
    /// What it is: `evidence`, `database` or `link`.
    pub name: String,
    /// Service demand of one job, seconds.
    pub demand_s: f64,
}

/// A closed network: stations shared by the workers and each worker's own
/// time between visits (a delay station: no queueing).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Network {
    /// Shared stations.
    pub stations: Vec<Station>,
    /// Each worker's own time per job, seconds.
    pub think_s: f64,
}

/// The network with `n` workers.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Point {
    /// Workers.
    pub workers: u32,
    /// Jobs per second.
    pub throughput: f64,
    /// Seconds a job spends at the shared stations (queueing included).
    pub response_s: f64,
    /// Utilisation of each station, in [`Network::stations`] order.
    pub utilization: Vec<f64>,
    /// Mean jobs at each station (queued or in service).
    pub queue: Vec<f64>,
}

/// The asymptotic bounds of a network.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Bounds {
    /// Sum of the stations' demands, seconds.
    pub total_demand_s: f64,
    /// The largest demand, seconds (0 without stations).
    pub max_demand_s: f64,
    /// The station with the largest demand.
    pub bottleneck: Option<String>,
    /// `N* = (D + Z) / D_max`: workers beyond which the bottleneck bounds
    /// the throughput (infinite without a shared demand).
    pub knee: f64,
}

impl Network {
    /// Check the figures before solving.
    pub fn check(&self) -> Result<(), ModelError> {
        if !(self.think_s.is_finite() && self.think_s >= 0.0) {
            return Err(ModelError::BadFigure("a worker's own time", self.think_s));
        }
        for s in &self.stations {
            if !(s.demand_s.is_finite() && s.demand_s >= 0.0) {
                return Err(ModelError::BadFigure("a station's demand", s.demand_s));
            }
        }
        Ok(())
    }

    /// Exact MVA for 1..=`max` workers (one point each).
    pub fn solve(&self, max: u32) -> Result<Vec<Point>, ModelError> {
        self.check()?;
        let mut queue = vec![0.0f64; self.stations.len()];
        let mut points = Vec::with_capacity(max as usize);
        for n in 1..=max {
            let residence: Vec<f64> = self
                .stations
                .iter()
                .zip(&queue)
                .map(|(s, q)| s.demand_s * (1.0 + q))
                .collect();
            let response: f64 = residence.iter().sum();
            let cycle = self.think_s + response;
            let x = if cycle > 0.0 {
                n as f64 / cycle
            } else {
                f64::INFINITY
            };
            queue = residence.iter().map(|r| x * r).collect();
            points.push(Point {
                workers: n,
                throughput: x,
                response_s: response,
                utilization: self.stations.iter().map(|s| x * s.demand_s).collect(),
                queue: queue.clone(),
            });
        }
        Ok(points)
    }

    /// The asymptotic bounds and the knee.
    pub fn bounds(&self) -> Bounds {
        let total: f64 = self.stations.iter().map(|s| s.demand_s).sum();
        let top = self
            .stations
            .iter()
            .filter(|s| s.demand_s > 0.0)
            .max_by(|a, b| a.demand_s.total_cmp(&b.demand_s));
        let max = top.map_or(0.0, |s| s.demand_s);
        Bounds {
            total_demand_s: total,
            max_demand_s: max,
            bottleneck: top.map(|s| s.name.clone()),
            knee: if max > 0.0 {
                (total + self.think_s) / max
            } else {
                f64::INFINITY
            },
        }
    }

    /// The bound on the throughput with `n` workers: `min(n / (D + Z),
    /// 1 / D_max)`.
    pub fn throughput_bound(&self, n: u32) -> f64 {
        let b = self.bounds();
        let cycle = b.total_demand_s + self.think_s;
        let by_workers = if cycle > 0.0 {
            n as f64 / cycle
        } else {
            f64::INFINITY
        };
        let by_bottleneck = if b.max_demand_s > 0.0 {
            1.0 / b.max_demand_s
        } else {
            f64::INFINITY
        };
        by_workers.min(by_bottleneck)
    }
}

/// One stage's network, taken from a recorded run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StageModel {
    /// Stage name.
    pub name: String,
    /// Wall seconds recorded (one worker).
    pub recorded_s: f64,
    /// The network, the whole stage being one job.
    pub network: Network,
    /// Its bounds.
    pub bounds: Bounds,
    /// Predicted wall seconds per worker count (in the order asked for).
    pub predicted_s: Vec<f64>,
    /// Lower bound on the wall seconds per worker count: `1 / bound`.
    pub bound_s: Vec<f64>,
    /// Units the stage can run at once, when the run says (a distributed
    /// case's): no more workers than this serve it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parallel_units: Option<u32>,
    /// Seconds of the stage no other of its units runs beside (a
    /// distributed case's split and finish units), kept whatever N.
    pub serial_s: f64,
}

/// A run's model over worker counts.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelReport {
    /// Always `caseload-model`.
    pub schema: &'static str,
    /// [`MODEL_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// Worker counts, ascending.
    pub workers: Vec<u32>,
    /// Evidence bytes (for throughput figures).
    pub evidence_bytes: u64,
    /// Where the workers run (its fields at the top level of the JSON).
    #[serde(flatten)]
    pub setting: Setting,
    /// Per stage.
    pub stages: Vec<StageModel>,
    /// Sum of the stages' predicted seconds per worker count.
    pub total_s: Vec<f64>,
    /// Sum of the stages' bound seconds per worker count.
    pub total_bound_s: Vec<f64>,
    /// Evidence MB/s over the whole case per worker count.
    pub throughput_mb_s: Vec<f64>,
}

/// Where the workers run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Default)]
pub struct Setting {
    /// Rate, bytes per second, of the link that carries the evidence and
    /// database traffic between the workers and the shared stations
    /// (`None`: local, no link station).
    pub link_bytes_per_s: Option<f64>,
    /// The workers share one machine's processors, this many (`None`:
    /// each worker is its own machine). The processors become a station
    /// whose demand is the stage's CPU seconds over their number: a
    /// pipeline runs as many threads as there are cores, so one job can
    /// use them all, and several jobs share them.
    pub shared_cpus: Option<u32>,
    /// The workers share one temp device (one machine): its time becomes
    /// a station too. Without it each worker's temp directory is its own
    /// (a lab's local disk), part of the worker's own time.
    pub shared_temp: bool,
}

/// The network of each completed stage of `run` in `setting`.
pub fn stage_networks(
    run: &RunReport,
    setting: Setting,
) -> Result<Vec<(String, f64, Network)>, ModelError> {
    let link = setting.link_bytes_per_s;
    if let Some(r) = link
        && !(r.is_finite() && r > 0.0)
    {
        return Err(ModelError::BadFigure("the link rate", r));
    }
    if setting.shared_cpus == Some(0) {
        return Err(ModelError::BadFigure(
            "the number of shared processors",
            0.0,
        ));
    }
    let threads = run.threads.max(1) as f64;
    let mut out = Vec::new();
    for s in run.stages.iter().filter(|s| s.status == "completed") {
        let alpha = overlap(s, threads);
        let device = |kind: ChannelKind| {
            s.channels.get(&kind).map_or(0.0, |c| {
                let c = &c.counters;
                alpha * (c.read_blocked_ns + c.write_blocked_ns) as f64 / 1e9
                    + c.sync_blocked_ns as f64 / 1e9
            })
        };
        let bytes = |kind: ChannelKind| {
            s.channels
                .get(&kind)
                .map_or(0, |c| c.counters.bytes_read + c.counters.bytes_written)
        };
        // The shared store holds the evidence and the case directory;
        // the database is the server's storage.
        let mut stations = vec![
            Station {
                name: "evidence".into(),
                demand_s: device(ChannelKind::Evidence),
            },
            Station {
                name: "database".into(),
                demand_s: device(ChannelKind::Database),
            },
            Station {
                name: "case".into(),
                demand_s: device(ChannelKind::Case),
            },
        ];
        if setting.shared_temp {
            stations.push(Station {
                name: "temp".into(),
                demand_s: device(ChannelKind::Temp),
            });
        }
        let mut shared: f64 = stations.iter().map(|st| st.demand_s).sum();
        if let Some(rate) = link {
            let carried = bytes(ChannelKind::Evidence)
                + bytes(ChannelKind::Database)
                + bytes(ChannelKind::Case);
            stations.push(Station {
                name: "link".into(),
                demand_s: carried as f64 / rate,
            });
        }
        // The worker's own time: what the shared devices (and processors)
        // did not take. The link's time is added to the stage (the
        // recorded run had none).
        if let Some(m) = setting.shared_cpus {
            let cpu = (s.cpu_user_seconds + s.cpu_system_seconds) / m as f64;
            shared += cpu;
            stations.push(Station {
                name: "cpu".into(),
                demand_s: cpu,
            });
        }
        let think = (s.wall_seconds - shared).max(0.0);
        out.push((
            s.name.clone(),
            s.wall_seconds,
            Network {
                stations,
                think_s: think,
            },
        ));
    }
    if out.is_empty() {
        return Err(ModelError::NoStage);
    }
    Ok(out)
}

/// The units stage `name` of `run` can run at once, when the run was a
/// distributed case's: its batches, else its units.
fn parallel_units(run: &RunReport, name: &str) -> Option<u32> {
    let details = &run.stages.iter().find(|s| s.name == name)?.summary.details;
    details
        .get("batches")
        .or_else(|| details.get("work_units"))
        .and_then(serde_json::Value::as_u64)
        .map(|u| u32::try_from(u).unwrap_or(u32::MAX))
}

/// The seconds of stage `name` of `run` that ran alone (a distributed
/// case's split and finish units), 0 when the run does not say.
fn serial_seconds(run: &RunReport, name: &str) -> f64 {
    run.stages
        .iter()
        .find(|s| s.name == name)
        .and_then(|s| s.summary.details.get("serial_seconds"))
        .and_then(serde_json::Value::as_f64)
        .unwrap_or(0.0)
}

/// Wall seconds of the units that run beside each other in stage `name`
/// of `run` (a distributed case's batches and parts, in the order workers
/// take them), when the run says.
fn unit_seconds(run: &RunReport, name: &str) -> Option<Vec<f64>> {
    let units: Vec<f64> = run
        .stages
        .iter()
        .find(|s| s.name == name)?
        .summary
        .details
        .get("unit_seconds")?
        .as_array()?
        .iter()
        .filter_map(serde_json::Value::as_f64)
        .filter(|s| s.is_finite() && *s >= 0.0)
        .collect();
    (units.iter().sum::<f64>() > 0.0).then_some(units)
}

/// When `units` (their times alone, in the order they are taken) end on
/// `workers` workers that each take the next unit as soon as they are
/// free, while `r` units running at once each run `slowdown(r)` times
/// slower than alone (they share the stations: processor sharing).
fn makespan(units: &[f64], workers: usize, slowdown: &dyn Fn(usize) -> f64) -> f64 {
    let mut next = units.iter().copied();
    let mut running: Vec<f64> = Vec::new();
    let mut clock = 0.0;
    loop {
        while running.len() < workers.max(1) {
            match next.next() {
                Some(u) => running.push(u),
                None => break,
            }
        }
        let Some(least) = running.iter().copied().reduce(f64::min) else {
            return clock;
        };
        clock += least * slowdown(running.len());
        for r in &mut running {
            *r -= least;
        }
        running.retain(|r| *r > 1e-12);
    }
}

/// Model `run` on each of `workers` workstations.
pub fn model(
    run: &RunReport,
    workers: &[u32],
    setting: Setting,
) -> Result<ModelReport, ModelError> {
    if workers.is_empty() || workers.contains(&0) {
        return Err(ModelError::BadWorkers(workers.to_vec()));
    }
    let mut ns = workers.to_vec();
    ns.sort_unstable();
    ns.dedup();
    let max = *ns.last().unwrap_or(&1);
    let mut stages = Vec::new();
    for (name, recorded, network) in stage_networks(run, setting)? {
        let points = network.solve(max)?;
        let parallel_units = parallel_units(run, &name);
        let cap = |n: u32| parallel_units.map_or(n, |u| n.min(u.max(1)));
        let at = |n: u32| &points[(cap(n) - 1) as usize];
        // The split and finish of a batched stage run alone: that share of
        // its time stays whatever N (Amdahl), the rest is the network's.
        let serial_s = serial_seconds(run, &name).clamp(0.0, recorded.max(0.0));
        let share = if recorded > 0.0 {
            1.0 - serial_s / recorded
        } else {
            1.0
        };
        // With the units' own times, they are scheduled on the workers:
        // each runs as much slower than alone as the network says for as
        // many customers as units run at once, and the stage ends when
        // its last unit does. Without them, the work divides evenly.
        let units = unit_seconds(run, &name);
        let predicted_s = ns
            .iter()
            .map(|&n| match &units {
                Some(u) => {
                    let residence = |k: usize| k as f64 / points[k - 1].throughput;
                    let slowdown = |k: usize| residence(k) / residence(1);
                    let alone = makespan(u, 1, &|_| 1.0);
                    let span = makespan(u, cap(n) as usize, &slowdown);
                    serial_s + (recorded - serial_s).max(0.0) * span / alone
                }
                None => serial_s + share / at(n).throughput,
            })
            .collect();
        stages.push(StageModel {
            name,
            recorded_s: recorded,
            bounds: network.bounds(),
            predicted_s,
            bound_s: ns
                .iter()
                .map(|&n| serial_s + share / network.throughput_bound(cap(n)))
                .collect(),
            parallel_units,
            serial_s,
            network,
        });
    }
    let sum = |f: &dyn Fn(&StageModel, usize) -> f64| -> Vec<f64> {
        (0..ns.len())
            .map(|i| stages.iter().map(|s| f(s, i)).sum())
            .collect()
    };
    let total_s = sum(&|s, i| s.predicted_s[i]);
    let total_bound_s = sum(&|s, i| s.bound_s[i]);
    let bytes = run.evidence.media_size;
    Ok(ModelReport {
        schema: "caseload-model",
        schema_version: MODEL_SCHEMA_VERSION,
        throughput_mb_s: total_s
            .iter()
            .map(|t| {
                if *t > 0.0 {
                    bytes as f64 / t / 1e6
                } else {
                    0.0
                }
            })
            .collect(),
        workers: ns,
        evidence_bytes: bytes,
        setting,
        stages,
        total_s,
        total_bound_s,
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn units_are_scheduled_in_order_and_a_stage_ends_with_its_last_unit() {
        let none = |_: usize| 1.0;
        // Two workers take 4, 1, 1, 1 in order: the first is busy until 4
        // while the second does the rest by 3.
        assert!((makespan(&[4.0, 1.0, 1.0, 1.0], 2, &none) - 4.0).abs() < 1e-9);
        // One worker: the sum; more workers than units: the longest.
        assert!((makespan(&[4.0, 1.0, 1.0, 1.0], 1, &none) - 7.0).abs() < 1e-9);
        assert!((makespan(&[2.0, 3.0], 8, &none) - 3.0).abs() < 1e-9);
        // Sharing: two units at once each run twice as slow (one
        // processor): the pair takes as long as one after the other.
        let shared = |r: usize| r as f64;
        assert!((makespan(&[1.0, 1.0], 2, &shared) - 2.0).abs() < 1e-9);
        // 3 then alone: the long unit speeds up once the short one ends.
        assert!((makespan(&[3.0, 1.0], 2, &shared) - 4.0).abs() < 1e-9);
        assert_eq!(makespan(&[], 4, &none), 0.0);
    }

    use super::*;

    fn net(demands: &[f64], think: f64) -> Network {
        Network {
            stations: demands
                .iter()
                .enumerate()
                .map(|(i, d)| Station {
                    name: format!("s{i}"),
                    demand_s: *d,
                })
                .collect(),
            think_s: think,
        }
    }

    /// The recurrence written out by hand for three populations of a
    /// network with three stations and a think time (the shape of the
    /// interactive-system examples in Lazowska et al., *Quantitative System
    /// Performance*, 1984, ch. 6), against the solver.
    #[test]
    fn mva_follows_the_recurrence_step_by_step() {
        let n = net(&[0.605, 2.1, 1.35], 15.0);
        let got = n.solve(3).expect("solve");
        // n = 1: R = D, X = 1 / (Z + ΣD).
        let d = [0.605, 2.1, 1.35];
        let sum: f64 = d.iter().sum();
        let x1 = 1.0 / (15.0 + sum);
        assert!((got[0].throughput - x1).abs() < 1e-12);
        // n = 2: R_k = D_k (1 + X1·D_k).
        let r2: Vec<f64> = d.iter().map(|dk| dk * (1.0 + x1 * dk)).collect();
        let x2 = 2.0 / (15.0 + r2.iter().sum::<f64>());
        assert!((got[1].throughput - x2).abs() < 1e-12);
        // n = 3: Q_k(2) = X2·R_k(2).
        let r3: Vec<f64> = d
            .iter()
            .zip(&r2)
            .map(|(dk, rk)| dk * (1.0 + x2 * rk))
            .collect();
        let x3 = 3.0 / (15.0 + r3.iter().sum::<f64>());
        assert!((got[2].throughput - x3).abs() < 1e-12);
        // By hand: 1 / 19.055, then 2 / 19.4012...
        assert!((x1 - 0.05248).abs() < 1e-5 && (x2 - 0.10309).abs() < 1e-5);
        // Little's law holds at every station and population.
        for p in &got {
            let at_stations: f64 = p.queue.iter().sum();
            assert!((p.throughput * p.response_s - at_stations).abs() < 1e-9);
        }
    }

    /// The bounds hold at every population, MVA approaches the bottleneck
    /// bound from below, and the knee is where the two bounds cross.
    #[test]
    fn throughput_stays_within_the_asymptotic_bounds() {
        let n = net(&[0.2, 0.05, 0.1], 0.6);
        let b = n.bounds();
        assert_eq!(b.bottleneck.as_deref(), Some("s0"));
        assert!((b.knee - (0.35 + 0.6) / 0.2).abs() < 1e-12);
        let points = n.solve(64).expect("solve");
        let mut last = 0.0;
        for p in &points {
            assert!(p.throughput <= n.throughput_bound(p.workers) + 1e-12);
            assert!(p.throughput >= last - 1e-12, "throughput never falls");
            last = p.throughput;
            assert!(p.utilization[0] <= 1.0 + 1e-12);
        }
        assert!(
            (points[63].throughput - 5.0).abs() < 0.01,
            "saturates at 1/D_max"
        );
        // One worker alone: no queueing, the sum of its times.
        assert!((points[0].throughput - 1.0 / 0.95).abs() < 1e-12);
    }

    /// A network of only the worker's own time scales perfectly; no
    /// station means no knee.
    #[test]
    fn private_work_alone_scales_linearly() {
        let n = net(&[], 2.0);
        let p = n.solve(8).expect("solve");
        assert!((p[7].throughput - 4.0).abs() < 1e-12);
        assert!(n.bounds().knee.is_infinite());
        assert_eq!(n.bounds().bottleneck, None);
    }

    #[test]
    fn bad_figures_are_refused() {
        for bad in [
            net(&[f64::NAN], 1.0),
            net(&[-1.0], 1.0),
            net(&[1.0], f64::INFINITY),
        ] {
            assert!(
                matches!(bad.solve(2), Err(ModelError::BadFigure(..))),
                "{bad:?}"
            );
        }
    }
}
