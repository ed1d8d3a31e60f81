//! `caseload probe`: what each channel's device can do (sequential MB/s,
//! 4 KiB random-read IOPS, fsync latency), to set stage figures beside.

use super::util::parse_size;
use caseload_engine::channel::ChannelKind;
use caseload_engine::layout::Layout;
use caseload_engine::probe::{ChannelProbe, ProbeOptions, probe_dir, probe_evidence};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// Arguments of `caseload probe`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Layout file.
    #[arg(long)]
    pub layout: Option<PathBuf>,
    /// Override the database channel directory.
    #[arg(long, value_name = "DIR")]
    pub database: Option<PathBuf>,
    /// Override the case channel directory.
    #[arg(long, value_name = "DIR")]
    pub case: Option<PathBuf>,
    /// Override the temp channel directory.
    #[arg(long, value_name = "DIR")]
    pub temp: Option<PathBuf>,
    /// Evidence file to probe the evidence channel with (read only; the
    /// evidence channel is never written).
    #[arg(long)]
    pub evidence: Option<PathBuf>,
    /// Scratch file size for the sequential tests.
    #[arg(long, default_value = "256MiB", value_parser = parse_size)]
    pub size: u64,
    /// Seconds of 4 KiB random reads per channel.
    #[arg(long, default_value_t = 3.0)]
    pub seconds: f64,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// The probes of a layout's channels (and of the evidence, when given).
pub fn probe_layout(
    layout: &Layout,
    evidence: Option<&std::path::Path>,
    options: &ProbeOptions,
) -> Vec<ChannelProbe> {
    let mut out = Vec::new();
    if let Some(file) = evidence {
        out.push(probe_evidence(file, options));
    }
    for kind in [ChannelKind::Database, ChannelKind::Case, ChannelKind::Temp] {
        if let Ok(dir) = layout.dir(kind) {
            out.push(probe_dir(kind, dir, options));
        }
    }
    out
}

fn cell(v: Option<f64>, precision: usize) -> String {
    v.map_or("-".into(), |v| format!("{v:.precision$}"))
}

/// Run it.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let mut layout = match &args.layout {
        Some(p) => Layout::load(p)?,
        None => Layout::default(),
    };
    for (kind, dir) in [
        (ChannelKind::Database, &args.database),
        (ChannelKind::Case, &args.case),
        (ChannelKind::Temp, &args.temp),
    ] {
        if let Some(d) = dir {
            layout.set(kind, d.clone());
        }
    }
    anyhow::ensure!(
        !layout.channels.is_empty() || args.evidence.is_some(),
        "nothing to probe: give --layout, channel directories or --evidence"
    );
    anyhow::ensure!(
        args.seconds > 0.0 && args.seconds.is_finite(),
        "--seconds must be positive"
    );
    let options = ProbeOptions {
        file_size: args.size.max(1 << 20),
        random_duration: Duration::from_secs_f64(args.seconds),
        ..ProbeOptions::default()
    };
    let probes = probe_layout(&layout, args.evidence.as_deref(), &options);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&probes)?);
    } else {
        println!(
            "{:<9} {:>10} {:>10} {:>10} {:>12} {:>12} {:>7}  path",
            "channel",
            "seq W MB/s",
            "seq R MB/s",
            "4K rnd IOPS",
            "fsync med ms",
            "fsync p99 ms",
            "direct"
        );
        for p in &probes {
            println!(
                "{:<9} {:>10} {:>10} {:>10} {:>12} {:>12} {:>7}  {}",
                p.channel.map_or("-".into(), |c| c.to_string()),
                cell(p.seq_write_mb_per_s, 1),
                cell(p.seq_read_mb_per_s, 1),
                cell(p.random_read_iops, 0),
                cell(p.fsync_median_ms, 3),
                cell(p.fsync_p99_ms, 3),
                p.direct,
                p.path.display()
            );
            for note in &p.notes {
                println!("          note: {note}");
            }
        }
    }
    Ok(
        if probes
            .iter()
            .any(|p| p.notes.iter().any(|n| n.starts_with("probe failed")))
        {
            ExitCode::FAILURE
        } else {
            ExitCode::SUCCESS
        },
    )
}
