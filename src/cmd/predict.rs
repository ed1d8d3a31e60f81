//! `caseload predict`: a recorded run's stage times on other devices
//! (`caseload_workloads::predict`, model in docs/predict.md).

use anyhow::Context;
use caseload_engine::channel::ChannelKind;
use caseload_engine::probe::ChannelProbe;
use caseload_engine::report::RunReport;
use caseload_workloads::predict::{DeviceFigures, Devices, Prediction, predict};
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `caseload predict`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The recorded run: its run.json (or a case directory holding one).
    #[arg(long)]
    pub run: PathBuf,
    /// The devices the run was recorded on: a lab (name or lab file: its
    /// models' figures) or a probe (`caseload probe --json` output).
    #[arg(long = "from", value_name = "LAB-or-probe.json")]
    pub from: String,
    /// The devices to predict for: a lab or a probe, as --from.
    #[arg(long, value_name = "LAB-or-probe.json")]
    pub devices: String,
    /// Print the prediction as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Device figures per channel from a probe's JSON (`caseload probe
/// --json`): each channel it measured, and those sharing its directory.
pub fn probe_devices(path: &std::path::Path) -> anyhow::Result<Devices> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading `{}`", path.display()))?;
    let probes: Vec<ChannelProbe> = serde_json::from_str(&text)
        .with_context(|| format!("`{}` is not `caseload probe --json` output", path.display()))?;
    let mut out = Devices::new();
    for p in &probes {
        let Some(f) = DeviceFigures::from_probe(p) else {
            continue;
        };
        // A probe measured once for channels sharing a directory.
        for k in p.channel.into_iter().chain(p.shared_with.iter().copied()) {
            out.insert(k, f.clone());
        }
    }
    anyhow::ensure!(
        !out.is_empty(),
        "`{}` holds no channel with read rate and IOPS measured",
        path.display()
    );
    Ok(out)
}

/// Device figures per channel from a lab or a probe's JSON.
pub fn devices(arg: &str) -> anyhow::Result<Devices> {
    let path = std::path::Path::new(arg);
    if path.is_file() && path.extension().is_some_and(|e| e == "json") {
        return probe_devices(path);
    }
    let lab = caseload_workloads::devices::lab(arg)?;
    let mut out = Devices::new();
    for (channel, device) in &lab.channels {
        let kind = ChannelKind::parse(channel)
            .with_context(|| format!("lab `{}` names an unknown channel `{channel}`", lab.name))?;
        let spec = lab
            .devices
            .get(device)
            .with_context(|| format!("lab `{}` has no device `{device}`", lab.name))?;
        out.insert(kind, DeviceFigures::from_model(&spec.model));
    }
    Ok(out)
}

fn print(p: &Prediction, args: &Args) {
    println!(
        "prediction for {} (recorded on {}, predicted for {}):",
        args.run.display(),
        args.from,
        args.devices
    );
    println!(
        "{:<11} {:>10} {:>11} {:>6} {:>8}   blocked s recorded -> predicted",
        "stage", "recorded s", "predicted s", "ratio", "overlap"
    );
    for s in &p.stages {
        let channels: Vec<String> = s
            .channels
            .iter()
            .map(|(k, c)| {
                format!(
                    "{k} {:.2}->{:.2}",
                    c.recorded_blocked_s, c.predicted_blocked_s
                )
            })
            .collect();
        println!(
            "{:<11} {:>10.2} {:>11.2} {:>6.2} {:>8.2}   {}",
            s.name,
            s.recorded_s,
            s.predicted_s,
            ratio(s.predicted_s, s.recorded_s),
            s.overlap,
            channels.join(", ")
        );
    }
    println!(
        "{:<11} {:>10.2} {:>11.2} {:>6.2}",
        "total",
        p.recorded_total_s,
        p.predicted_total_s,
        ratio(p.predicted_total_s, p.recorded_total_s)
    );
}

/// Predicted over recorded (1 when nothing was recorded).
fn ratio(predicted: f64, recorded: f64) -> f64 {
    if recorded > 0.0 {
        predicted / recorded
    } else {
        1.0
    }
}

/// A recorded run: a run.json, or a case directory holding one.
pub fn load_report(path: &std::path::Path) -> anyhow::Result<RunReport> {
    if path.is_dir() {
        return Ok(caseload_engine::run::load_run_json(path)?);
    }
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading `{}`", path.display()))?;
    caseload_engine::report::parse_run_json(text.as_bytes()).with_context(|| {
        format!(
            "`{}`: not a caseload run.json that this version reads",
            path.display()
        )
    })
}

/// Predict.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let report = load_report(&args.run)?;
    let source = devices(&args.from).context("--from")?;
    let target = devices(&args.devices).context("--devices")?;
    let p = predict(&report, &source, &target)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&p)?);
    } else {
        print(&p, &args);
    }
    Ok(ExitCode::SUCCESS)
}
