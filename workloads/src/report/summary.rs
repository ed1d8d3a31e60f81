//! From runs to the summary: each run's report reduced to per-stage
//! figures, and per configuration the median, minimum and maximum of every
//! figure with ratios against the baseline configuration.

use super::{
    ChannelStats, ConfigSummary, Configuration, InstanceFigures, MachineFigures, MachineStats,
    RunRecord, StageFigures, StageStats, Stat,
};
use caseload_engine::channel::ChannelKind;
use caseload_engine::report::{ChannelFigures, InstancesReport, RunReport, StageReport};
use caseload_engine::sampler::CpuSample;
use std::collections::BTreeMap;

/// Samples kept per stage in memory and in the summary: enough for a small
/// line chart, and bounded however long a stage ran.
const MAX_CHART_SAMPLES: usize = 200;

impl Stat {
    /// The median, minimum and maximum of `values` (non-finite values are
    /// ignored); `None` when there is no value.
    pub fn of(values: &[f64]) -> Option<Stat> {
        let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        Some(Stat {
            median,
            min: v[0],
            max: v[n - 1],
        })
    }
}

/// `a / b` when both are meaningful.
fn ratio(a: f64, b: f64) -> Option<f64> {
    (b > 0.0 && a.is_finite() && b.is_finite()).then(|| a / b)
}

fn thin(samples: &[CpuSample]) -> Vec<CpuSample> {
    if samples.len() <= MAX_CHART_SAMPLES {
        return samples.to_vec();
    }
    let step = samples.len().div_ceil(MAX_CHART_SAMPLES);
    samples.iter().step_by(step).copied().collect()
}

fn stage_figures(s: &StageReport) -> StageFigures {
    StageFigures {
        name: s.name.clone(),
        status: s.status.clone(),
        error: s.error.clone(),
        wall_seconds: s.wall_seconds,
        cpu_user_seconds: s.cpu_user_seconds,
        cpu_system_seconds: s.cpu_system_seconds,
        peak_rss_bytes: s.peak_rss_bytes,
        items: s.summary.items,
        bytes: s.summary.bytes,
        mb_per_s: s.mb_per_s,
        channels: s.channels.clone(),
        bound_by: s.bound_by,
        machine: MachineFigures {
            user_pct: s.machine.user_pct,
            system_pct: s.machine.system_pct,
            iowait_pct: s.machine.iowait_pct,
            load1_max: s.machine.load1_max,
        },
        samples: thin(&s.machine.samples),
    }
}

/// A single run's per-stage figures.
pub fn figures_from_run(report: &RunReport) -> Vec<StageFigures> {
    report.stages.iter().map(stage_figures).collect()
}

/// An `--instances` run: per stage the aggregate over instances (wall of the
/// longest instance, summed CPU, items, bytes and channel counters, rates
/// over the longest wall), and each instance's own figures.
pub fn figures_from_instances(
    report: &InstancesReport,
) -> (Vec<StageFigures>, Vec<InstanceFigures>) {
    let instances: Vec<InstanceFigures> = report
        .runs
        .iter()
        .enumerate()
        .map(|(i, r)| InstanceFigures {
            instance: r.instance.unwrap_or(i),
            status: r.status.clone(),
            stages: figures_from_run(r),
        })
        .collect();
    let mut stages = Vec::new();
    for (i, agg) in report.aggregate.iter().enumerate() {
        let present: Vec<&StageFigures> = instances
            .iter()
            .filter_map(|inst| inst.stages.get(i))
            .collect();
        let all_completed = agg.instances == report.instances
            && present.len() == report.instances
            && present.iter().all(|s| s.status == "completed");
        let status = if all_completed {
            "completed".to_string()
        } else if present.iter().any(|s| s.status == "interrupted") {
            "interrupted".to_string()
        } else {
            "failed".to_string()
        };
        let error = if all_completed {
            None
        } else {
            Some(
                present
                    .iter()
                    .find_map(|s| s.error.clone())
                    .unwrap_or_else(|| {
                        format!(
                            "{} of {} instances ran this stage",
                            agg.instances, report.instances
                        )
                    }),
            )
        };
        // The sampler measures the whole machine, so every instance saw the
        // same thing; the first instance's series stands for all.
        let first = present.first();
        stages.push(StageFigures {
            name: agg.name.clone(),
            status,
            error,
            wall_seconds: agg.wall_seconds_max,
            cpu_user_seconds: agg.cpu_user_seconds,
            cpu_system_seconds: agg.cpu_system_seconds,
            peak_rss_bytes: present.iter().filter_map(|s| s.peak_rss_bytes).max(),
            items: agg.items,
            bytes: agg.bytes,
            mb_per_s: agg.mb_per_s,
            channels: agg.channels.clone(),
            bound_by: agg.bound_by,
            machine: first.map(|s| s.machine).unwrap_or_default(),
            samples: first.map(|s| s.samples.clone()).unwrap_or_default(),
        });
    }
    (stages, instances)
}

fn stat_of<'a>(figures: &[&'a StageFigures], f: impl Fn(&'a StageFigures) -> f64) -> Stat {
    let values: Vec<f64> = figures.iter().map(|s| f(s)).collect();
    Stat::of(&values).unwrap_or_default()
}

fn channel_stats(figures: &[&StageFigures], kind: ChannelKind) -> ChannelStats {
    let get = |s: &StageFigures| s.channels.get(&kind).copied().unwrap_or_default();
    let stat = |f: &dyn Fn(&ChannelFigures) -> f64| {
        let values: Vec<f64> = figures.iter().map(|s| f(&get(s))).collect();
        Stat::of(&values).unwrap_or_default()
    };
    ChannelStats {
        bytes_read: stat(&|c| c.counters.bytes_read as f64),
        bytes_written: stat(&|c| c.counters.bytes_written as f64),
        read_ops: stat(&|c| c.counters.read_ops as f64),
        write_ops: stat(&|c| c.counters.write_ops as f64),
        fsyncs: stat(&|c| c.counters.fsyncs as f64),
        blocked_seconds: stat(&|c| c.blocked_seconds),
        sync_blocked_seconds: stat(&|c| c.counters.sync_blocked_ns as f64 / 1e9),
        read_mb_per_s: stat(&|c| c.read_mb_per_s),
        write_mb_per_s: stat(&|c| c.write_mb_per_s),
        read_iops: stat(&|c| c.read_iops),
        write_iops: stat(&|c| c.write_iops),
        blocked_ratio: None,
    }
}

fn stage_stats(
    name: &str,
    figures: &[&StageFigures],
    representative: Option<&StageFigures>,
) -> StageStats {
    let kinds: std::collections::BTreeSet<ChannelKind> = figures
        .iter()
        .flat_map(|s| s.channels.keys().copied())
        .collect();
    let channels: BTreeMap<ChannelKind, ChannelStats> = kinds
        .into_iter()
        .map(|k| (k, channel_stats(figures, k)))
        .collect();
    let wall = stat_of(figures, |s| s.wall_seconds);
    // The channel waited on most in a typical run: the largest median
    // blocked time (ties go to the first channel in report order).
    let mut bound: Option<(ChannelKind, f64)> = None;
    for (k, c) in &channels {
        let b = c.blocked_seconds.median;
        if b > 0.0 && bound.is_none_or(|(_, best)| b > best) {
            bound = Some((*k, b));
        }
    }
    let rss: Vec<f64> = figures
        .iter()
        .filter_map(|s| s.peak_rss_bytes.map(|b| b as f64))
        .collect();
    StageStats {
        name: name.to_string(),
        runs: figures.len(),
        wall_seconds: wall,
        wall_ratio: None,
        cpu_user_seconds: stat_of(figures, |s| s.cpu_user_seconds),
        cpu_system_seconds: stat_of(figures, |s| s.cpu_system_seconds),
        peak_rss_bytes: Stat::of(&rss),
        mb_per_s: stat_of(figures, |s| s.mb_per_s),
        items: stat_of(figures, |s| s.items as f64),
        bytes: stat_of(figures, |s| s.bytes as f64),
        channels,
        bound_by: bound.map(|(k, _)| k),
        bound_share: bound.and_then(|(_, b)| ratio(b, wall.median)),
        machine: MachineStats {
            user_pct: stat_of(figures, |s| s.machine.user_pct),
            system_pct: stat_of(figures, |s| s.machine.system_pct),
            iowait_pct: stat_of(figures, |s| s.machine.iowait_pct),
            load1_max: stat_of(figures, |s| s.machine.load1_max),
            samples: representative
                .map(|s| s.samples.clone())
                .unwrap_or_default(),
        },
    }
}

fn total_seconds(run: &RunRecord) -> f64 {
    run.stages.iter().map(|s| s.wall_seconds).sum()
}

/// Summarise `runs` per configuration. `stages` is the workload's stage
/// order; `baseline` the configuration ratios are taken against.
pub fn summarize(
    configurations: &[Configuration],
    runs: &[RunRecord],
    stages: &[String],
    baseline: usize,
) -> Vec<ConfigSummary> {
    let mut out: Vec<ConfigSummary> = configurations
        .iter()
        .map(|c| {
            let mine: Vec<&RunRecord> =
                runs.iter().filter(|r| r.configuration == c.index).collect();
            let completed: Vec<&RunRecord> = mine
                .iter()
                .copied()
                .filter(|r| r.status == "completed")
                .collect();
            let totals: Vec<f64> = completed.iter().map(|r| total_seconds(r)).collect();
            let total = Stat::of(&totals);
            let representative = total.and_then(|t| {
                completed
                    .iter()
                    .min_by(|a, b| {
                        (total_seconds(a) - t.median)
                            .abs()
                            .total_cmp(&(total_seconds(b) - t.median).abs())
                            .then(a.sequence.cmp(&b.sequence))
                    })
                    .copied()
            });
            let stage_stats: Vec<StageStats> = stages
                .iter()
                .filter_map(|name| {
                    let figures: Vec<&StageFigures> = mine
                        .iter()
                        .filter_map(|r| {
                            r.stages
                                .iter()
                                .find(|s| &s.name == name && s.status == "completed")
                        })
                        .collect();
                    if figures.is_empty() {
                        return None;
                    }
                    let rep =
                        representative.and_then(|r| r.stages.iter().find(|s| &s.name == name));
                    Some(stage_stats(name, &figures, rep))
                })
                .collect();
            ConfigSummary {
                configuration: c.index,
                runs: mine.len(),
                runs_completed: completed.len(),
                total_seconds: total,
                total_ratio: None,
                representative_run: representative.map(|r| r.sequence),
                stages: stage_stats,
            }
        })
        .collect();
    let Some(base) = out.iter().find(|s| s.configuration == baseline).cloned() else {
        return out;
    };
    for summary in &mut out {
        summary.total_ratio = match (summary.total_seconds, base.total_seconds) {
            (Some(a), Some(b)) => ratio(a.median, b.median),
            _ => None,
        };
        for stage in &mut summary.stages {
            let Some(b) = base.stages.iter().find(|s| s.name == stage.name) else {
                continue;
            };
            stage.wall_ratio = ratio(stage.wall_seconds.median, b.wall_seconds.median);
            for (kind, ch) in &mut stage.channels {
                ch.blocked_ratio = b
                    .channels
                    .get(kind)
                    .and_then(|bc| ratio(ch.blocked_seconds.median, bc.blocked_seconds.median));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use caseload_engine::channel::ChannelSnapshot;

    #[test]
    fn medians_of_odd_and_even_counts() {
        let s = Stat::of(&[3.0, 1.0, 2.0]).unwrap();
        assert_eq!((s.median, s.min, s.max), (2.0, 1.0, 3.0));
        let s = Stat::of(&[4.0, 1.0, 2.0, 10.0]).unwrap();
        assert_eq!((s.median, s.min, s.max), (3.0, 1.0, 10.0));
        assert!(Stat::of(&[]).is_none());
        assert!(Stat::of(&[f64::NAN]).is_none());
        let s = Stat::of(&[f64::NAN, 5.0]).unwrap();
        assert_eq!(s.median, 5.0);
    }

    fn figures(name: &str, wall: f64, db_blocked_ns: u64, status: &str) -> StageFigures {
        let mut channels = BTreeMap::new();
        channels.insert(
            ChannelKind::Database,
            ChannelFigures::from_counters(
                ChannelSnapshot {
                    fsyncs: 10,
                    sync_blocked_ns: db_blocked_ns,
                    ..Default::default()
                },
                wall,
            ),
        );
        channels.insert(
            ChannelKind::Evidence,
            ChannelFigures::from_counters(
                ChannelSnapshot {
                    bytes_read: 1000,
                    read_ops: 1,
                    read_blocked_ns: 1_000_000,
                    ..Default::default()
                },
                wall,
            ),
        );
        StageFigures {
            name: name.into(),
            status: status.into(),
            error: None,
            wall_seconds: wall,
            cpu_user_seconds: 0.0,
            cpu_system_seconds: 0.0,
            peak_rss_bytes: Some(1),
            items: 1,
            bytes: 1000,
            mb_per_s: 0.0,
            bound_by: caseload_engine::report::bound_by(&channels),
            channels,
            machine: MachineFigures::default(),
            samples: Vec::new(),
        }
    }

    fn run(seq: usize, config: usize, status: &str, stages: Vec<StageFigures>) -> RunRecord {
        RunRecord {
            sequence: seq,
            configuration: config,
            repeat: 1,
            status: status.into(),
            error: None,
            exit_code: Some(0),
            started_at: String::new(),
            wall_seconds: 0.0,
            report: None,
            stderr: None,
            dirs: Vec::new(),
            kept: false,
            cache: None,
            stages,
            instances: Vec::new(),
            instance_failures: Vec::new(),
        }
    }

    #[test]
    fn ratios_are_against_the_baseline_and_failed_stages_are_left_out() {
        let configs: Vec<Configuration> = (0..2)
            .map(|i| Configuration {
                index: i,
                label: format!("c{i}"),
                evidence: 0,
                layout: i,
            })
            .collect();
        let runs = vec![
            run(
                1,
                0,
                "completed",
                vec![
                    figures("a", 1.0, 0, "completed"),
                    figures("b", 2.0, 100_000_000, "completed"),
                ],
            ),
            run(
                2,
                1,
                "completed",
                vec![
                    figures("a", 1.0, 0, "completed"),
                    figures("b", 6.0, 3_000_000_000, "completed"),
                ],
            ),
            run(
                3,
                0,
                "completed",
                vec![
                    figures("a", 3.0, 0, "completed"),
                    figures("b", 4.0, 300_000_000, "completed"),
                ],
            ),
            run(
                4,
                1,
                "completed-with-errors",
                vec![
                    figures("a", 5.0, 0, "completed"),
                    figures("b", 0.5, 0, "failed"),
                ],
            ),
        ];
        let names = vec!["a".to_string(), "b".to_string()];
        let s = summarize(&configs, &runs, &names, 1);
        // Baseline is configuration 1.
        let b1 = &s[1];
        assert_eq!(b1.runs, 2);
        assert_eq!(b1.runs_completed, 1);
        assert_eq!(b1.stages[1].runs, 1, "the failed stage is not a sample");
        assert_eq!(b1.stages[0].runs, 2, "a completed stage of a failed run is");
        assert_eq!(b1.stages[0].wall_seconds.median, 3.0);
        assert_eq!(b1.total_seconds.unwrap().median, 7.0);
        assert_eq!(b1.total_ratio, Some(1.0));
        let c0 = &s[0];
        assert_eq!(
            c0.stages[0].wall_seconds,
            Stat {
                median: 2.0,
                min: 1.0,
                max: 3.0
            }
        );
        assert_eq!(c0.stages[0].wall_ratio, Some(2.0 / 3.0));
        assert_eq!(c0.stages[1].wall_ratio, Some(3.0 / 6.0));
        let db = &c0.stages[1].channels[&ChannelKind::Database];
        assert!((db.blocked_seconds.median - 0.2).abs() < 1e-9);
        assert!((db.blocked_ratio.unwrap() - 0.2 / 3.0).abs() < 1e-9);
        assert_eq!(c0.stages[1].bound_by, Some(ChannelKind::Database));
        assert_eq!(c0.stages[0].bound_by, Some(ChannelKind::Evidence));
        // Totals 3.0 and 7.0: median 5, both equally near; the earlier wins.
        assert_eq!(c0.representative_run, Some(1));
    }
}
