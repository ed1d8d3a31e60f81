//! `caseload probe`: what each channel's device can do (sequential MB/s,
//! 4 KiB random-read IOPS, fsync latency), to set stage figures beside.

use super::job_args::LayoutArgs;
use super::util::parse_size;
use caseload_engine::probe::{ProbeOptions, probe_layout};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// Arguments of `caseload probe`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Layout and channel directories.
    #[command(flatten)]
    pub layout: LayoutArgs,
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

fn cell(v: Option<f64>, precision: usize) -> String {
    v.map_or("-".into(), |v| format!("{v:.precision$}"))
}

/// Run it.
pub fn run(mut args: Args) -> anyhow::Result<ExitCode> {
    if let Some(lab) = args.layout.lab.clone() {
        if let Some(code) = super::lab::enter(&lab)? {
            return Ok(code);
        }
        args.evidence = args.evidence.map(|e| super::lab::evidence_in(&lab, e));
    }
    let layout = args.layout.layout()?;
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
            "{:<9} {:>10} {:>10} {:>11} {:>10} {:>12} {:>12} {:>14} {:>7}  path",
            "channel",
            "seq W MB/s",
            "seq R MB/s",
            "128K R MB/s",
            "4K rnd IOPS",
            "fsync med ms",
            "fsync p99 ms",
            "commit mean ms",
            "direct"
        );
        for p in &probes {
            println!(
                "{:<9} {:>10} {:>10} {:>11} {:>10} {:>12} {:>12} {:>14} {:>7}  {}",
                p.channel.map_or("-".into(), |c| c.to_string()),
                cell(p.seq_write_mb_per_s, 1),
                cell(p.seq_read_mb_per_s, 1),
                cell(p.seq_read_128k_mb_per_s, 1),
                cell(p.random_read_iops, 0),
                cell(p.fsync_median_ms, 3),
                cell(p.fsync_p99_ms, 3),
                cell(p.commit_mean_ms, 3),
                p.direct,
                p.path.display()
            );
            if !p.shared_with.is_empty() {
                let others: Vec<String> = p.shared_with.iter().map(|c| c.to_string()).collect();
                println!(
                    "          shared with: {} (same directory, measured once)",
                    others.join(", ")
                );
            }
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
