//! `report.html`: one self-contained page (inline CSS and SVG, no script, no
//! external resource) that a person can open, print or mail.

use super::chart::{self, StageSeries};
use super::table::{ratio_text, secs};
use super::{ChannelStats, CompareReport, RunRecord, StageStats};
use caseload_engine::channel::ChannelKind;
use caseload_engine::probe::ChannelProbe;
use caseload_engine::system::Placement;
use std::fmt::Write;

/// Escape text for HTML content and attribute values.
pub(crate) fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

fn opt_num(v: Option<f64>, precision: usize) -> String {
    v.map_or("-".into(), |v| format!("{v:.precision$}"))
}

fn mb(bytes: f64) -> String {
    let v = bytes / 1e6;
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

const STYLE: &str = r#"
body { font-family: sans-serif; margin: 24px; color: #222; max-width: 1200px; }
h1 { font-size: 22px; } h2 { font-size: 18px; margin-top: 32px; border-bottom: 1px solid #ccc; }
h3 { font-size: 15px; margin-top: 20px; }
table { border-collapse: collapse; margin: 8px 0 16px 0; font-size: 13px; }
th, td { border: 1px solid #ccc; padding: 3px 7px; text-align: right; vertical-align: top; }
th { background: #f2f2f2; }
td.l, th.l { text-align: left; }
tr.base td { background: #f7fbff; }
.bad { color: #b00020; font-weight: bold; }
.muted { color: #777; }
.swatch { display: inline-block; width: 11px; height: 11px; margin-right: 5px; vertical-align: middle; }
.chart svg { max-width: 100%; height: auto; border: 1px solid #ddd; }
code { font-size: 12px; }
"#;

/// Render the report page.
pub fn render_html(report: &CompareReport) -> String {
    let mut h = String::new();
    let title = match &report.workload.name {
        Some(n) => format!("caseload compare: {n}"),
        None => "caseload compare".to_string(),
    };
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>{}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<h1>{}</h1>\n",
        esc(&title),
        esc(&title)
    );
    let status_class = if report.status == "completed" {
        ""
    } else {
        " class=\"bad\""
    };
    let _ = writeln!(
        h,
        "<p>Status <span{status_class}>{}</span>; started {}{}; caseload {}; schema {} v{}.</p>",
        esc(&report.status),
        esc(&report.started_at),
        report
            .finished_at
            .as_deref()
            .map_or(String::new(), |f| format!(", finished {}", esc(f))),
        esc(&report.caseload_version),
        esc(&report.schema),
        report.schema_version
    );
    let _ = writeln!(
        h,
        "<p class=\"muted\"><code>{}</code></p>",
        esc(&report.command.join(" "))
    );

    setup(&mut h, report);
    stage_times(&mut h, report);
    channels(&mut h, report);
    machine(&mut h, report);
    probes(&mut h, report);
    runs(&mut h, report);
    h.push_str("</body>\n</html>\n");
    h
}

fn setup(h: &mut String, report: &CompareReport) {
    h.push_str("<h2>Set-up</h2>\n<table>\n");
    let row = |h: &mut String, k: &str, v: String| {
        let _ = writeln!(
            h,
            "<tr><th class=\"l\">{}</th><td class=\"l\">{v}</td></tr>",
            esc(k)
        );
    };
    row(
        h,
        "workload",
        match (&report.workload.name, &report.workload.origin) {
            (Some(n), Some(o)) => format!("{} <span class=\"muted\">({})</span>", esc(n), esc(o)),
            (Some(n), None) => esc(n),
            _ => "(stages given on the command line)".into(),
        },
    );
    row(h, "stages", esc(&report.workload.stages.join(", ")));
    if !report.workload.stage_options.is_empty() {
        row(
            h,
            "stage options",
            esc(&report.workload.stage_options.join("  ")),
        );
    }
    row(
        h,
        "runs",
        format!(
            "{} repeat(s) of {} configuration(s), interleaved (every configuration once per repeat); {} instance(s) per run; threads {}",
            report.repeat,
            report.configurations.len(),
            report.instances,
            report.threads.map_or("all cores".into(), |t| t.to_string())
        ),
    );
    row(
        h,
        "page cache",
        format!(
            "{}: each run drops the cache before every stage{}",
            esc(&report.cache),
            cache_note(report)
        ),
    );
    let db = &report.database_options;
    row(
        h,
        "case database",
        format!(
            "journal {}, synchronous {}, {} operations per transaction",
            db.journal_mode.as_str(),
            db.synchronous.as_str(),
            db.batch_size
        ),
    );
    let s = &report.system;
    row(
        h,
        "machine",
        esc(&format!(
            "{} — {} ({} logical CPUs), {:.1} GiB memory, kernel {}, {}",
            s.hostname,
            s.cpu_model,
            s.logical_cpus,
            s.memory_bytes as f64 / (1u64 << 30) as f64,
            s.kernel,
            s.os
        )),
    );
    h.push_str("</table>\n");

    h.push_str("<h3>Configurations</h3>\n<table>\n<tr><th>#</th><th class=\"l\">configuration</th><th class=\"l\">evidence</th><th class=\"l\">layout</th><th>runs completed</th></tr>\n");
    for c in &report.configurations {
        let ev = report.evidence.get(c.evidence);
        let layout = report.layouts.get(c.layout);
        let summary = report.summary.iter().find(|s| s.configuration == c.index);
        let done = summary.map_or((0, 0), |s| (s.runs_completed, s.runs));
        let _ = writeln!(
            h,
            "<tr{}><td>{}{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td><td{}>{}/{}</td></tr>",
            if c.index == report.baseline {
                " class=\"base\""
            } else {
                ""
            },
            c.index + 1,
            if c.index == report.baseline {
                " (baseline)"
            } else {
                ""
            },
            esc(&c.label),
            ev.map_or(String::new(), |e| esc(&e.path.display().to_string())),
            layout.map_or(String::new(), |l| {
                format!(
                    "{}{}",
                    esc(&l.label),
                    l.source.as_ref().map_or(String::new(), |s| format!(
                        " <span class=\"muted\">({})</span>",
                        esc(&s.display().to_string())
                    ))
                )
            }),
            if done.0 < done.1 {
                " class=\"bad\""
            } else {
                ""
            },
            done.0,
            done.1
        );
    }
    h.push_str("</table>\n");

    h.push_str("<h3>Where each channel sits</h3>\n<table>\n<tr><th class=\"l\">layout / evidence</th><th class=\"l\">channel</th><th class=\"l\">directory</th><th class=\"l\">file system</th><th class=\"l\">device</th><th class=\"l\">model</th><th>rotational</th><th class=\"l\">scheduler</th><th class=\"l\">notes</th><th class=\"l\">mount options</th></tr>\n");
    for e in &report.evidence {
        placement_row(
            h,
            &e.label,
            ChannelKind::Evidence,
            &e.path.display().to_string(),
            &e.placement,
        );
    }
    for l in &report.layouts {
        for (kind, place) in &l.channels {
            placement_row(
                h,
                &l.label,
                *kind,
                &place.dir.display().to_string(),
                &place.placement,
            );
        }
    }
    h.push_str("</table>\n");
}

fn cache_note(report: &CompareReport) -> String {
    let methods: std::collections::BTreeSet<String> = report
        .runs
        .iter()
        .filter_map(|r| r.cache.as_ref())
        .map(|c| {
            serde_json::to_value(c.method)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default()
        })
        .collect();
    let not_honoured = report
        .runs
        .iter()
        .filter(|r| r.cache.as_ref().is_some_and(|c| !c.honoured))
        .count();
    let mut s = String::new();
    if !methods.is_empty() {
        s.push_str(&format!(
            " (method: {})",
            esc(&methods.into_iter().collect::<Vec<_>>().join(", "))
        ));
    }
    if not_honoured > 0 {
        s.push_str(&format!(
            "; <span class=\"bad\">not fully honoured in {not_honoured} run(s)</span>"
        ));
    }
    s
}

fn placement_row(h: &mut String, owner: &str, kind: ChannelKind, dir: &str, p: &Placement) {
    let mut notes = Vec::new();
    if p.encrypted {
        notes.push(format!(
            "encrypted ({})",
            p.dm_name.clone().unwrap_or_default()
        ));
    } else if let Some(dm) = &p.dm_name {
        notes.push(format!("device-mapper {dm}"));
    }
    if p.network {
        notes.push("network".to_string());
    }
    if let Some(free) = p.free_bytes {
        notes.push(format!("{:.1} GB free", free as f64 / 1e9));
    }
    let _ = writeln!(
        h,
        "<tr><td class=\"l\">{}</td><td class=\"l\">{kind}</td><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td><td>{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\"><code>{}</code></td></tr>",
        esc(owner),
        esc(dir),
        esc(&format!("{} on {}", p.fs_type, p.mount_point)),
        esc(&format!(
            "{}{}",
            p.mount_source,
            p.device
                .as_deref()
                .map_or(String::new(), |d| format!(" ({d})"))
        )),
        esc(p.model.as_deref().unwrap_or("-")),
        p.rotational.map_or("-", |r| if r { "yes" } else { "no" }),
        esc(p.scheduler.as_deref().unwrap_or("-")),
        esc(&notes.join(", ")),
        esc(&p.mount_options)
    );
}

fn stage_times(h: &mut String, report: &CompareReport) {
    h.push_str("<h2>Stage times</h2>\n");
    match chart::stacked_stage_bars(report) {
        Ok(svg) => {
            let _ = writeln!(h, "<div class=\"chart\" id=\"stage-chart\">{svg}</div>");
        }
        Err(e) => {
            let _ = writeln!(
                h,
                "<p class=\"bad\">The chart could not be drawn: {}</p>",
                esc(&e)
            );
        }
    }
    h.push_str("<p>Median wall seconds over the runs that completed the stage, with the range (min-max) and the ratio of medians against the baseline configuration.</p>\n");
    h.push_str("<table>\n<tr><th class=\"l\">stage</th>");
    for c in &report.configurations {
        let _ = write!(
            h,
            "<th class=\"l\">{}{}</th>",
            esc(&c.label),
            if c.index == report.baseline {
                " (baseline)"
            } else {
                ""
            }
        );
    }
    h.push_str("</tr>\n");
    for (si, name) in report.workload.stages.iter().enumerate() {
        let _ = write!(
            h,
            "<tr><td class=\"l\"><span class=\"swatch\" style=\"background:{}\"></span>{}</td>",
            chart::css(chart::stage_colour(si)),
            esc(name)
        );
        for c in &report.configurations {
            match stage_of(report, c.index, name) {
                Some(st) => {
                    let _ = write!(
                        h,
                        "<td>{} s <span class=\"muted\">({}-{}, n={})</span> x{}</td>",
                        secs(st.wall_seconds.median),
                        secs(st.wall_seconds.min),
                        secs(st.wall_seconds.max),
                        st.runs,
                        ratio_text(st.wall_ratio)
                    );
                }
                None => h.push_str("<td class=\"bad\">no completed run</td>"),
            }
        }
        h.push_str("</tr>\n");
    }
    h.push_str("<tr><th class=\"l\">total</th>");
    for c in &report.configurations {
        let s = report.summary.iter().find(|s| s.configuration == c.index);
        match s.and_then(|s| s.total_seconds.map(|t| (t, s.total_ratio))) {
            Some((t, r)) => {
                let _ = write!(
                    h,
                    "<th>{} s <span class=\"muted\">({}-{})</span> x{}</th>",
                    secs(t.median),
                    secs(t.min),
                    secs(t.max),
                    ratio_text(r)
                );
            }
            None => h.push_str("<th class=\"bad\">no completed run</th>"),
        }
    }
    h.push_str("</tr>\n</table>\n");
}

fn stage_of<'a>(report: &'a CompareReport, config: usize, name: &str) -> Option<&'a StageStats> {
    report
        .summary
        .iter()
        .find(|s| s.configuration == config)
        .and_then(|s| s.stages.iter().find(|x| x.name == name))
}

/// The probe of `kind` in configuration `config`, if `--probe` ran.
fn probe_for(report: &CompareReport, config: usize, kind: ChannelKind) -> Option<&ChannelProbe> {
    let c = report.configurations.get(config)?;
    if kind == ChannelKind::Evidence {
        return report.evidence.get(c.evidence)?.probe.as_ref();
    }
    report
        .layouts
        .get(c.layout)?
        .probe
        .as_ref()?
        .iter()
        .find(|p| p.channel == Some(kind))
}

fn channel_has_io(c: &ChannelStats) -> bool {
    c.bytes_read.max > 0.0
        || c.bytes_written.max > 0.0
        || c.read_ops.max > 0.0
        || c.write_ops.max > 0.0
        || c.fsyncs.max > 0.0
}

fn channels(h: &mut String, report: &CompareReport) {
    h.push_str("<h2>Channels per stage</h2>\n<p>Medians over the runs. MB = 10<sup>6</sup> bytes; rates over the stage's wall time. Blocked: seconds spent inside the channel's I/O calls, summed over threads (with a cold cache, device time). The stage was bound by the channel with the largest share of time blocked; a stage with little blocked time was bound by CPU. With <code>--probe</code>, what the device can do is set beside.</p>\n");
    let any_probe = report.evidence.iter().any(|e| e.probe.is_some())
        || report.layouts.iter().any(|l| l.probe.is_some());
    for name in &report.workload.stages {
        let _ = writeln!(h, "<h3>{}</h3>", esc(name));
        h.push_str("<table>\n<tr><th class=\"l\">configuration</th><th class=\"l\">bound by</th><th class=\"l\">channel</th><th>read MB</th><th>write MB</th><th>read MB/s</th><th>write MB/s</th><th>read IOPS</th><th>write IOPS</th><th>fsyncs</th><th>blocked s</th><th>fsync s</th><th>blocked x base</th>");
        if any_probe {
            h.push_str(
                "<th>device seq R/W MB/s</th><th>device 4K IOPS</th><th>device fsync ms</th>",
            );
        }
        h.push_str("</tr>\n");
        for c in &report.configurations {
            let Some(st) = stage_of(report, c.index, name) else {
                let _ = writeln!(
                    h,
                    "<tr><td class=\"l\">{}</td><td class=\"l bad\" colspan=\"12\">no completed run</td></tr>",
                    esc(&c.label)
                );
                continue;
            };
            let shown: Vec<(&ChannelKind, &ChannelStats)> = st
                .channels
                .iter()
                .filter(|(_, ch)| channel_has_io(ch))
                .collect();
            let bound = match (st.bound_by, st.bound_share) {
                (Some(k), Some(s)) => format!("{k} ({:.0}% of wall)", s * 100.0),
                (Some(k), None) => k.to_string(),
                _ => "cpu (no I/O)".into(),
            };
            let rows = shown.len().max(1);
            let _ = write!(
                h,
                "<tr{}><td class=\"l\" rowspan=\"{rows}\">{}</td><td class=\"l\" rowspan=\"{rows}\">{}</td>",
                if c.index == report.baseline {
                    " class=\"base\""
                } else {
                    ""
                },
                esc(&c.label),
                esc(&bound)
            );
            if shown.is_empty() {
                h.push_str("<td class=\"l muted\" colspan=\"11\">no I/O</td></tr>\n");
                continue;
            }
            for (i, (kind, ch)) in shown.iter().enumerate() {
                if i > 0 {
                    let _ = write!(
                        h,
                        "<tr{}>",
                        if c.index == report.baseline {
                            " class=\"base\""
                        } else {
                            ""
                        }
                    );
                }
                let is_bound = st.bound_by == Some(**kind);
                let _ = write!(
                    h,
                    "<td class=\"l\">{}{kind}{}</td><td>{}</td><td>{}</td><td>{:.1}</td><td>{:.1}</td><td>{:.0}</td><td>{:.0}</td><td>{:.0}</td><td>{}</td><td>{}</td><td>{}</td>",
                    if is_bound { "<b>" } else { "" },
                    if is_bound { "</b>" } else { "" },
                    mb(ch.bytes_read.median),
                    mb(ch.bytes_written.median),
                    ch.read_mb_per_s.median,
                    ch.write_mb_per_s.median,
                    ch.read_iops.median,
                    ch.write_iops.median,
                    ch.fsyncs.median,
                    secs(ch.blocked_seconds.median),
                    secs(ch.sync_blocked_seconds.median),
                    ratio_text(ch.blocked_ratio)
                );
                if any_probe {
                    match probe_for(report, c.index, **kind) {
                        Some(p) => {
                            let _ = write!(
                                h,
                                "<td>{}/{}</td><td>{}</td><td>{}</td>",
                                opt_num(p.seq_read_mb_per_s, 0),
                                opt_num(p.seq_write_mb_per_s, 0),
                                opt_num(p.random_read_iops, 0),
                                opt_num(p.fsync_median_ms, 3)
                            );
                        }
                        None => h.push_str("<td>-</td><td>-</td><td>-</td>"),
                    }
                }
                h.push_str("</tr>\n");
            }
        }
        h.push_str("</table>\n");
    }
}

fn representative(report: &CompareReport, config: usize) -> Option<&RunRecord> {
    let seq = report
        .summary
        .iter()
        .find(|s| s.configuration == config)?
        .representative_run?;
    report.runs.iter().find(|r| r.sequence == seq)
}

fn machine(h: &mut String, report: &CompareReport) {
    h.push_str("<h2>CPU and load per stage</h2>\n<p>The whole machine while each stage ran (from <code>/proc/stat</code> and <code>/proc/loadavg</code>): user, system and I/O-wait shares of all CPUs, and the highest 1-minute load; medians over the runs. The charts follow the representative run of each configuration (the completed run whose total is nearest the median) through its stages.</p>\n");
    h.push_str("<table>\n<tr><th class=\"l\">stage</th><th class=\"l\">configuration</th><th>user %</th><th>system %</th><th>iowait %</th><th>load1 max</th><th>cpu user s</th><th>cpu system s</th><th>peak MB</th></tr>\n");
    for name in &report.workload.stages {
        for c in &report.configurations {
            let Some(st) = stage_of(report, c.index, name) else {
                continue;
            };
            let m = &st.machine;
            let _ = writeln!(
                h,
                "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td><td>{:.1}</td><td>{:.1}</td><td>{:.1}</td><td>{:.2}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(name),
                esc(&c.label),
                m.user_pct.median,
                m.system_pct.median,
                m.iowait_pct.median,
                m.load1_max.median,
                secs(st.cpu_user_seconds.median),
                secs(st.cpu_system_seconds.median),
                st.peak_rss_bytes
                    .map_or("-".into(), |r| format!("{:.0}", r.median / 1e6))
            );
        }
    }
    h.push_str("</table>\n");
    for c in &report.configurations {
        let Some(run) = representative(report, c.index) else {
            continue;
        };
        let summary = report.summary.iter().find(|s| s.configuration == c.index);
        let series: Vec<StageSeries<'_>> = run
            .stages
            .iter()
            .map(|s| StageSeries {
                name: &s.name,
                wall_seconds: s.wall_seconds,
                samples: summary
                    .and_then(|sum| sum.stages.iter().find(|x| x.name == s.name))
                    .map_or(&[][..], |x| &x.machine.samples[..]),
            })
            .collect();
        let _ = writeln!(
            h,
            "<h3>{} <span class=\"muted\">(run {}, repeat {})</span></h3>",
            esc(&c.label),
            run.sequence,
            run.repeat
        );
        match chart::cpu_lines(&series, report.system.logical_cpus) {
            Ok(svg) => {
                let _ = writeln!(h, "<div class=\"chart\">{svg}</div>");
            }
            Err(e) => {
                let _ = writeln!(
                    h,
                    "<p class=\"bad\">The chart could not be drawn: {}</p>",
                    esc(&e)
                );
            }
        }
    }
}

fn probes(h: &mut String, report: &CompareReport) {
    let mut rows: Vec<(String, &ChannelProbe)> = Vec::new();
    for e in &report.evidence {
        if let Some(p) = &e.probe {
            rows.push((e.label.clone(), p));
        }
    }
    for l in &report.layouts {
        for p in l.probe.iter().flatten() {
            rows.push((l.label.clone(), p));
        }
    }
    if rows.is_empty() {
        return;
    }
    h.push_str("<h2>Device probes</h2>\n<p>Measured before the runs (<code>--probe</code>): sequential 1 MiB reads and writes, 4 KiB random reads at queue depth 1, fsync latency of a 4 KiB write, the mean commit of a commit chain (8 KiB appended, then fdatasync, one after another). Without direct I/O (e.g. tmpfs) read figures are cache speed.</p>\n<table>\n<tr><th class=\"l\">layout / evidence</th><th class=\"l\">channel</th><th>seq write MB/s</th><th>seq read MB/s</th><th>4K random read IOPS</th><th>fsync median ms</th><th>fsync p99 ms</th><th>commit mean ms</th><th>direct</th><th class=\"l\">path</th><th class=\"l\">notes</th></tr>\n");
    for (owner, p) in rows {
        let _ = writeln!(
            h,
            "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td></tr>",
            esc(&owner),
            p.channel.map_or("-".into(), |c| c.to_string()),
            opt_num(p.seq_write_mb_per_s, 1),
            opt_num(p.seq_read_mb_per_s, 1),
            opt_num(p.random_read_iops, 0),
            opt_num(p.fsync_median_ms, 3),
            opt_num(p.fsync_p99_ms, 3),
            opt_num(p.commit_mean_ms, 3),
            if p.direct { "yes" } else { "no" },
            esc(&p.path.display().to_string()),
            esc(&p.notes.join("; "))
        );
    }
    h.push_str("</table>\n");
}

fn runs(h: &mut String, report: &CompareReport) {
    h.push_str("<h2>Runs</h2>\n<p>In the order they ran. Each run is a separate <code>caseload run</code> process with a cold cache; its own report is kept beside this page.</p>\n<table>\n<tr><th>run</th><th class=\"l\">configuration</th><th>repeat</th><th class=\"l\">status</th><th>stages s</th><th>process s</th><th class=\"l\">report</th><th class=\"l\">what went wrong</th></tr>\n");
    for r in &report.runs {
        let total: f64 = r.stages.iter().map(|s| s.wall_seconds).sum();
        let mut problems: Vec<String> = Vec::new();
        if let Some(e) = &r.error {
            problems.push(e.clone());
        }
        for s in r.stages.iter().filter(|s| s.status != "completed") {
            problems.push(format!(
                "stage {} {}{}",
                s.name,
                s.status,
                s.error
                    .as_deref()
                    .map_or(String::new(), |e| format!(": {e}"))
            ));
        }
        problems.extend(r.instance_failures.iter().cloned());
        let link = |p: &Option<String>, text: &str| {
            p.as_ref().map_or(String::new(), |p| {
                format!("<a href=\"{}\">{}</a>", esc(p), esc(text))
            })
        };
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td class=\"l\">{}</td><td>{}</td><td class=\"l{}\">{}</td><td>{}</td><td>{}</td><td class=\"l\">{} {}</td><td class=\"l\">{}</td></tr>",
            r.sequence,
            esc(&report.label(r.configuration)),
            r.repeat,
            if r.status == "completed" { "" } else { " bad" },
            esc(&r.status),
            secs(total),
            secs(r.wall_seconds),
            link(&r.report, "report"),
            link(&r.stderr, "stderr"),
            esc(&problems.join("; "))
        );
    }
    h.push_str("</table>\n");
}

#[cfg(test)]
mod tests {
    use super::esc;

    #[test]
    fn escaping_covers_markup_and_quotes() {
        assert_eq!(
            esc("<a href=\"x\">&'</a>"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;&lt;/a&gt;"
        );
    }
}
