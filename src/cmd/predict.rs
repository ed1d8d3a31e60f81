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
        "{:<11} {:>10} {:>11} {:>6} {:>7} {:>8}   lanes (s) and blocked s recorded -> predicted",
        "stage", "recorded s", "predicted s", "ratio", "band", "overlap"
    );
    for s in &p.stages {
        let mut parts = vec![format!(
            "producers {:.2}->{:.2}",
            s.producers_recorded_s, s.producers_predicted_s
        )];
        if let Some(w) = &s.writer {
            parts.push(format!(
                "db writer {:.2}->{:.2} ({} commits, {:.2}->{:.2} ms each)",
                w.recorded_busy_s,
                w.predicted_busy_s,
                w.commits,
                w.commit_from_s * 1e3,
                w.commit_to_s * 1e3
            ));
        }
        parts.extend(s.channels.iter().map(|(k, c)| {
            format!(
                "{k} {:.2}->{:.2}",
                c.recorded_blocked_s, c.predicted_blocked_s
            )
        }));
        println!(
            "{:<11} {:>10.2} {:>11.2} {:>6.2} {:>6.0}% {:>8.2}   {}",
            s.name,
            s.recorded_s,
            s.predicted_s,
            ratio(s.predicted_s, s.recorded_s),
            s.error_band * 100.0,
            s.overlap,
            parts.join(", ")
        );
    }
    println!(
        "{:<11} {:>10.2} {:>11.2} {:>6.2} {:>6.0}%",
        "total",
        p.recorded_total_s,
        p.predicted_total_s,
        ratio(p.predicted_total_s, p.recorded_total_s),
        p.error_band * 100.0
    );
    println!(
        "band: each stage's largest error measured on the FTK 4 study's labs (docs/predict.md); a stage under a second errs more"
    );
    for w in &p.warnings {
        println!("warning: {w}");
    }
}

/// Predicted over recorded (1 when nothing was recorded).
fn ratio(predicted: f64, recorded: f64) -> f64 {
    if recorded > 0.0 {
        predicted / recorded
    } else {
        1.0
    }
}

/// The entries of a probe's JSON, when `arg` names one.
fn probe_entries(arg: &str) -> Option<Vec<ChannelProbe>> {
    let path = std::path::Path::new(arg);
    if !(path.is_file() && path.extension().is_some_and(|e| e == "json")) {
        return None;
    }
    serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()
}

/// Whether an evidence file reads as EWF (E01, Ex01) by its signature;
/// `None` when it cannot be read (a probe's file gone with its lab).
fn reads_as_ewf(path: &std::path::Path) -> Option<bool> {
    use std::io::Read;
    let mut head = [0u8; 8];
    std::fs::File::open(path).ok()?.read_exact(&mut head).ok()?;
    Some(caseload_engine::source::is_ewf_signature(&head))
}

/// Probes checked against the run: the --from probe should be of the
/// run's own directories (a warning where a channel's directory is not
/// under the one probed), and evidence is only compared with evidence
/// read the same way (an E01 is read as compressed chunks, a raw image
/// as the media's bytes: a probe of one does not describe the other's
/// reads, refused).
fn check_probes(report: &RunReport, args: &Args) -> anyhow::Result<()> {
    use caseload_engine::source::SourceFormat;
    let from = probe_entries(&args.from);
    if let Some(entries) = &from {
        for p in entries {
            for kind in p.channel.into_iter().chain(p.shared_with.iter().copied()) {
                if kind == ChannelKind::Evidence {
                    continue;
                }
                let Some(dir) = report.layout.channels.get(&kind) else {
                    continue;
                };
                if !dir.starts_with(&p.path) {
                    eprintln!(
                        "caseload predict: warning: --from probed the {kind} channel at `{}`, but the run's {kind} channel was `{}`: the probe may be of another layout's devices",
                        p.path.display(),
                        dir.display()
                    );
                }
            }
        }
    }
    let evidence_ewf = |entries: &Option<Vec<ChannelProbe>>| {
        entries.as_ref().and_then(|e| {
            e.iter()
                .find(|p| p.channel == Some(ChannelKind::Evidence))
                .and_then(|p| reads_as_ewf(&p.path).map(|ewf| (ewf, p.path.clone())))
        })
    };
    let run_ewf = matches!(
        report.evidence.format,
        SourceFormat::Ewf | SourceFormat::Ewf2
    );
    let name = |ewf: bool| if ewf { "E01" } else { "raw (DD)" };
    let (from_ewf, to_ewf) = (
        evidence_ewf(&from),
        evidence_ewf(&probe_entries(&args.devices)),
    );
    for (which, probed) in [("--from", &from_ewf), ("--devices", &to_ewf)] {
        if let Some((ewf, path)) = probed
            && *ewf != run_ewf
        {
            anyhow::bail!(
                "{which} probed the evidence channel with `{}`, {} evidence, but the run read {} evidence: E01 and DD are read differently (compressed chunks against the media's bytes), so one's evidence figures do not carry the other's reads; probe evidence of the run's format",
                path.display(),
                name(*ewf),
                name(run_ewf)
            );
        }
    }
    Ok(())
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
    check_probes(&report, &args)?;
    let p = predict(&report, &source, &target)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&p)?);
    } else {
        print(&p, &args);
    }
    Ok(ExitCode::SUCCESS)
}
