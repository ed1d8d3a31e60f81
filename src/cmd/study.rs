//! `caseload study ftk4` and `caseload study encryption`: a study's
//! configurations (the FTK 4 study's; the base system with each device
//! encrypted or on a NAS), each a lab
//! brought up with the evidence on its evidence device, compared on (the
//! ftk4 workload, DD and E01, cold cache), and taken down again; the labs'
//! comparisons merged into one report with ratios to the base system
//! (`caseload_workloads::study`).

use super::compare;
use super::util::interrupt_flag;
use super::workstation_args::WorkstationArgs;
use anyhow::Context;
use caseload_lab::lab::{self, LabState, UpOptions};
use caseload_workloads::Baseline;
use caseload_workloads::report::{files, render_table, write_reports};
use caseload_workloads::study::{ENCRYPTION_LABS, FTK4_LABS, LabPart, merge};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::Ordering;

/// Arguments of `caseload study`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    study: Study,
}

#[derive(Debug, clap::Subcommand)]
enum Study {
    /// The FTK 4 study (root: builds each configuration as a lab of
    /// modelled devices): base system, SSD database, PCIe database, RAID-5
    /// evidence+case, SSD O/S+temp, high-end, five channels. Every run
    /// runs the ftk4-default workload unless --workload or --stages name
    /// another.
    Ftk4(Ftk4Args),
    /// What encryption and network storage cost each stage (root): the
    /// FTK 4 base system, then its database, evidence+case and O/S+temp
    /// drives each behind the LUKS-like layer, each a self-encrypting
    /// drive, and evidence+case on a 1 GbE NAS (docs/lab.md).
    Encryption(Ftk4Args),
}

/// Arguments of `caseload study ftk4` and `caseload study encryption`.
#[derive(Debug, clap::Args)]
pub struct Ftk4Args {
    /// Evidence image(s), e.g. the same disk as DD and as E01. Copied onto
    /// each lab's evidence device.
    #[arg(long, required = true)]
    pub evidence: Vec<PathBuf>,
    /// Output directory: the merged compare.json, CSV and report.html, and
    /// each lab's comparison under labs/.
    #[arg(long)]
    pub out: PathBuf,
    /// Only these labs (default: all of the study's, base first).
    #[arg(long, value_delimiter = ',')]
    pub labs: Vec<String>,
    /// Runs per configuration.
    #[arg(long, default_value_t = 1)]
    pub repeat: usize,
    /// Worker threads per run (default: all cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Every run's modelled workstation (over each lab's own).
    #[command(flatten)]
    pub workstation: WorkstationArgs,
    /// The study's final tables instead of its labs: economy, mid-range
    /// and high-end, DD and E01, each with its drives, processor and RAM
    /// (docs/lab.md), scaled to the study's 240 GB image (or
    /// --scale-from); needs one DD and one E01 of the same disk.
    #[arg(long, conflicts_with_all = ["labs", "ram"])]
    pub tiers: bool,
    /// Step 3's memory matrix: 16, 32 and 64 GB on the base configuration
    /// (every drive a 7200 rpm disk), DD and E01 (with --tiers: after the
    /// tiers).
    #[arg(long, conflicts_with_all = ["labs", "ram"])]
    pub memory: bool,
    /// With --tiers or --memory: a directory of lab files of one's own
    /// for the tables' labs (`ftk4-tier-economy.toml`, ...: other device
    /// sizes, other models); a lab it lacks is the built-in one.
    #[arg(long, value_name = "DIR", conflicts_with = "labs")]
    pub labs_from: Option<PathBuf>,
    /// What the case runs, its database and hash library, the check
    /// before the first run.
    #[command(flatten)]
    pub job: super::job_args::JobArgs,
}

/// A lab taken down when dropped, so also on an error or Ctrl-C.
struct LabUp(Option<LabState>);

impl Drop for LabUp {
    fn drop(&mut self) {
        if let Some(state) = self.0.take()
            && let Err(e) = lab::down(&state)
        {
            eprintln!(
                "caseload study: taking lab `{}` down failed: {e}; run `caseload lab down {}`",
                state.spec.name, state.spec.name
            );
        }
    }
}

/// Run it.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args.study {
        Study::Ftk4(a) => lab_study(a, "ftk4", FTK4_LABS),
        Study::Encryption(a) => {
            anyhow::ensure!(
                !a.tiers && !a.memory,
                "--tiers and --memory are the FTK 4 study's tables (`study ftk4`)"
            );
            lab_study(a, "encryption", ENCRYPTION_LABS)
        }
    }
}

/// What every lab of a study needs: checked once, before the first lab.
struct Prepared {
    db: caseload_engine::casedb::DbOptions,
    stage_specs: Vec<(String, caseload_engine::stage::StageOptions)>,
    exe: PathBuf,
}

/// The study's workload unless the flags name one or its stages
/// (`ftk4-default`: the study's own).
const STUDY_WORKLOAD: &str = "ftk4-default";

/// The job every comparison of the study runs: the flags' own, with the
/// study's workload where they name neither a workload nor stages.
fn study_job(job: &super::job_args::JobArgs) -> super::job_args::JobArgs {
    let mut job = job.clone();
    if job.workload.is_none() && job.stages.is_empty() {
        job.workload = Some(STUDY_WORKLOAD.into());
    }
    job
}

/// Check everything the study's labs and runs need, once, before the
/// first lab is built: root, loop devices, FUSE and cgroups, the evidence, room on
/// every lab's devices, the database server, the hash sets.
fn prepare(args: &Ftk4Args, labs: &[caseload_lab::LabSpec]) -> anyhow::Result<Prepared> {
    anyhow::ensure!(args.repeat >= 1, "--repeat must be at least 1");
    let mut problems = caseload_engine::preflight::Problems::default();
    if !cfg!(target_os = "linux") {
        anyhow::bail!(
            "a study builds labs of modelled devices (loop devices, FUSE, cgroups), which needs Linux; on {} compare layouts of real drives with `caseload compare`",
            std::env::consts::OS
        );
    }
    if !caseload_lab::host::is_root() {
        problems.push(
            "a study builds labs of modelled devices, which needs root (loop devices, mounts, cgroups)",
        );
    }
    for (dev, what) in [
        ("/dev/loop-control", "loop devices"),
        ("/dev/fuse", "FUSE (the rotating disks' device server)"),
    ] {
        if !std::path::Path::new(dev).exists() {
            problems.push(format!("a lab needs {what}: no {dev}"));
        }
    }
    // The cgroup controllers the labs' throttles and workstations need
    // (and --cpu-scale's quota), each said once.
    let mut controllers: Vec<&str> = labs.iter().flat_map(|l| l.cgroup_controllers()).collect();
    if args.workstation.cpu_scale.is_some() {
        controllers.push("cpu");
    }
    controllers.sort_unstable();
    controllers.dedup();
    for c in controllers {
        if let Err(e) = caseload_lab::host::cgroup_parent(c) {
            problems.push(format!("a lab needs cgroups: {e}"));
        }
    }
    for f in &args.evidence {
        if !f.is_file() {
            problems.push(format!("evidence `{}` is not a file", f.display()));
        }
    }
    let resolved = study_job(&args.job).resolve()?;
    let db = args.job.db.options_with(resolved.profile)?;
    let evidence: Vec<PathBuf> = args
        .evidence
        .iter()
        .filter(|f| f.is_file())
        .cloned()
        .collect();
    super::job_args::preflight(
        &super::job_args::Planned {
            layouts: &[],
            labs,
            evidence: &evidence,
            stages: &resolved.stages,
            job: &args.job,
            db: &db,
            copies: 1,
        },
        problems,
    )?;
    Ok(Prepared {
        db,
        stage_specs: resolved.stages,
        exe: std::env::current_exe().context("locating the caseload executable")?,
    })
}

/// One comparison to run on a lab: its evidence, its output directory
/// (relative to the study's), its workstation.
struct LabRun {
    evidence: Vec<PathBuf>,
    dir: String,
    workstation: WorkstationArgs,
}

/// Bring lab `spec` up with the evidence its runs need (models off while
/// copying), import the hash sets into its database device (models off:
/// setting up is not measured), run each comparison, and take the lab
/// down again (also on an error or Ctrl-C). The reports, in order, up to
/// the first failure, and that failure.
fn on_lab(
    args: &Ftk4Args,
    p: &Prepared,
    spec: &caseload_lab::LabSpec,
    runs: &[LabRun],
) -> (
    Vec<caseload_workloads::report::CompareReport>,
    Option<anyhow::Error>,
) {
    let name = spec.name.clone();
    eprintln!("caseload study: lab {name}: {}", spec.description);
    let mut reports = Vec::new();
    let result = (|| -> anyhow::Result<()> {
        let up = LabUp(Some(lab::up(spec, &UpOptions { exe: p.exe.clone() })?));
        let state = up.0.as_ref().context("lab state")?;
        let mut wanted: Vec<PathBuf> = Vec::new();
        for r in runs {
            for e in &r.evidence {
                if !wanted.contains(e) {
                    wanted.push(e.clone());
                }
            }
        }
        let copies = lab::load_evidence(state, &wanted)?;
        if !args.job.kff.hashsets.is_empty() {
            state.set_modelled(false)?;
            let layout = super::lab::lab_layout(&name)?;
            let imported = super::hashset::prepare_run(
                &args.job.kff.hashsets,
                args.job.kff.kff_library.as_deref(),
                &layout,
                &p.stage_specs,
            );
            state.set_modelled(true)?;
            imported?;
        }
        for r in runs {
            let evidence = r
                .evidence
                .iter()
                .map(|e| {
                    let i = wanted.iter().position(|w| w == e).unwrap_or(0);
                    copies[i].clone()
                })
                .collect();
            let compare_args = compare::Args {
                evidence,
                layout: Vec::new(),
                lab: vec![name.clone()],
                job: study_job(&args.job),
                repeat: args.repeat,
                out: args.out.join(&r.dir),
                baseline: Baseline::Number(1),
                instances: None,
                probe: false,
                probe_size: 256 << 20,
                probe_seconds: 3.0,
                keep_runs: false,
                threads: args.threads,
                workstation: r.workstation.clone(),
            };
            let report = compare::execute(&compare_args)?;
            print!("{}", render_table(&report));
            reports.push(report);
        }
        drop(up);
        Ok(())
    })();
    (
        reports,
        result.err().map(|e| e.context(format!("lab `{name}`"))),
    )
}

/// A study of the labs `default_labs` (or the flags' `--labs`), the first
/// the baseline.
fn lab_study(args: Ftk4Args, study: &str, default_labs: &[&str]) -> anyhow::Result<ExitCode> {
    if args.tiers || args.memory {
        return tables(args);
    }
    let labs: Vec<String> = if args.labs.is_empty() {
        default_labs.iter().map(|s| s.to_string()).collect()
    } else {
        args.labs.clone()
    };
    // Everything is checked before the first lab is built.
    let specs = labs
        .iter()
        .map(|name| caseload_workloads::devices::lab(name))
        .collect::<Result<Vec<_>, _>>()?;
    let p = prepare(&args, &specs)?;
    anyhow::ensure!(
        !args.out.join(files::COMPARE_JSON).exists(),
        "`{}` already holds a study (compare.json); choose another --out",
        args.out.display()
    );
    for spec in &specs {
        args.workstation
            .preflight(Some(&spec.workstation), &args.evidence, args.threads, &p.db)
            .with_context(|| format!("lab `{}`", spec.name))?;
    }
    let cancel = interrupt_flag();
    let command: Vec<String> = std::env::args().collect();
    let mut parts: Vec<LabPart> = Vec::new();
    let mut failure: Option<anyhow::Error> = None;
    for spec in &specs {
        if cancel.load(Ordering::Relaxed) {
            break;
        }
        let dir = format!("labs/{}", spec.name);
        let run = LabRun {
            evidence: args.evidence.clone(),
            dir: dir.clone(),
            workstation: args.workstation.clone(),
        };
        let (mut reports, err) = on_lab(&args, &p, spec, std::slice::from_ref(&run));
        if let Some(report) = reports.pop() {
            parts.push(LabPart {
                lab: spec.name.clone(),
                dir,
                report,
            });
        }
        if let Some(e) = err {
            failure = Some(e);
            break;
        }
    }
    if parts.is_empty() {
        return Err(failure.unwrap_or_else(|| anyhow::anyhow!("interrupted before any lab ran")));
    }
    let mut report = merge(&parts, default_labs[0], command)?;
    if failure.is_some() && report.status == "completed" {
        report.status = "completed-with-failures".into();
    }
    write_reports(&args.out, &report)
        .with_context(|| format!("writing the study's reports in `{}`", args.out.display()))?;
    println!(
        "study {study}: every configuration, ratios to {}:",
        report.label(report.baseline)
    );
    compare::print_report(&report, &args.out, "; each lab's comparison in labs/");
    if let Some(e) = failure {
        eprintln!("caseload study: stopped: {e:#}");
        return Ok(ExitCode::FAILURE);
    }
    Ok(compare::exit_code(&report.status, "study"))
}

/// `--tiers`, `--memory`: the study's tables, each configuration a
/// comparison of its own, labs brought up once for all their
/// configurations.
fn tables(args: Ftk4Args) -> anyhow::Result<ExitCode> {
    use caseload_workloads::study_tables::{
        FTK4_MEMORY, FTK4_TIERS, ImageKind, MODELLED_IMAGE_BYTES, TableConfig, TablePart,
        render_table_text, table_report,
    };
    anyhow::ensure!(
        args.labs_from.as_ref().is_none_or(|d| d.is_dir()),
        "--labs-from: no directory `{}`",
        args.labs_from
            .as_deref()
            .unwrap_or(std::path::Path::new(""))
            .display()
    );
    let lab_of = |name: &str| -> anyhow::Result<caseload_lab::LabSpec> {
        let own = args
            .labs_from
            .as_ref()
            .map(|d| d.join(format!("{name}.toml")));
        Ok(match own {
            Some(f) if f.is_file() => caseload_workloads::devices::lab(&f.to_string_lossy())?,
            _ => caseload_workloads::devices::lab(name)?,
        })
    };
    let mut tables: Vec<(&str, &[TableConfig])> = Vec::new();
    if args.tiers {
        tables.push(("tiers", FTK4_TIERS));
    }
    if args.memory {
        tables.push(("memory", FTK4_MEMORY));
    }
    let mut lab_specs: Vec<caseload_lab::LabSpec> = Vec::new();
    for (_, configs) in &tables {
        for c in configs.iter() {
            let spec = lab_of(c.lab)?;
            if !lab_specs.iter().any(|l| l.name == spec.name) {
                lab_specs.push(spec);
            }
        }
    }
    let p = prepare(&args, &lab_specs)?;
    // One DD and one E01 of the same disk.
    let mut by_kind: Vec<(ImageKind, PathBuf, u64)> = Vec::new();
    for e in &args.evidence {
        let channel = caseload_engine::channel::Channel::new(
            caseload_engine::channel::ChannelKind::Evidence,
            e.parent().unwrap_or(std::path::Path::new(".")),
            Vec::new(),
        );
        let source = caseload_engine::source::open_evidence(e, &channel, Default::default())
            .with_context(|| format!("evidence `{}`", e.display()))?;
        let kind = match source.info().format {
            caseload_engine::source::SourceFormat::Ewf => ImageKind::E01,
            caseload_engine::source::SourceFormat::Raw
            | caseload_engine::source::SourceFormat::SplitRaw => ImageKind::Dd,
            other => anyhow::bail!(
                "evidence `{}` is {other:?}; the study's tables compare a DD and an E01",
                e.display()
            ),
        };
        by_kind.push((kind, e.clone(), source.size()));
    }
    let find = |k: ImageKind| by_kind.iter().find(|(kind, _, _)| *kind == k);
    let (Some(dd), Some(e01), 2) = (find(ImageKind::Dd), find(ImageKind::E01), by_kind.len())
    else {
        anyhow::bail!(
            "--tiers and --memory need exactly two --evidence files: a DD and an E01 of the same disk"
        );
    };
    anyhow::ensure!(
        dd.2 == e01.2,
        "the DD ({} bytes) and the E01 ({} bytes of media) are not the same disk",
        dd.2,
        e01.2
    );
    let evidence_bytes = dd.2;
    let scale_from = args.workstation.scale_from.unwrap_or(MODELLED_IMAGE_BYTES);
    for (table, _) in &tables {
        anyhow::ensure!(
            !args.out.join(format!("{table}.json")).exists(),
            "`{}` already holds the study's {table} ({table}.json); choose another --out",
            args.out.display()
        );
    }
    // Every configuration's run, checked before the first lab.
    struct Planned {
        table: usize,
        config: TableConfig,
        run: LabRun,
    }
    let mut planned: Vec<Planned> = Vec::new();
    for (t, (table, configs)) in tables.iter().enumerate() {
        for c in configs.iter() {
            let evidence = if c.kind == ImageKind::Dd {
                &dd.1
            } else {
                &e01.1
            };
            let mut workstation = args.workstation.clone();
            workstation.ram = Some(c.ram_gib << 30);
            workstation.scale_from = Some(scale_from);
            let spec = lab_of(c.lab)?;
            workstation
                .preflight(
                    Some(&spec.workstation),
                    std::slice::from_ref(evidence),
                    args.threads,
                    &p.db,
                )
                .with_context(|| format!("{table}: {} {}", c.row, c.kind.label()))?;
            planned.push(Planned {
                table: t,
                config: *c,
                run: LabRun {
                    evidence: vec![evidence.clone()],
                    dir: format!(
                        "{table}/{}-{}",
                        c.row.replace(' ', ""),
                        c.kind.label().to_lowercase()
                    ),
                    workstation,
                },
            });
        }
    }
    let cancel = interrupt_flag();
    let mut parts: Vec<Vec<TablePart>> = vec![Vec::new(); tables.len()];
    let mut failure: Option<anyhow::Error> = None;
    let mut labs: Vec<&str> = Vec::new();
    for pl in &planned {
        if !labs.contains(&pl.config.lab) {
            labs.push(pl.config.lab);
        }
    }
    for name in labs {
        if cancel.load(Ordering::Relaxed) || failure.is_some() {
            break;
        }
        let spec = lab_of(name)?;
        let mine: Vec<&Planned> = planned.iter().filter(|pl| pl.config.lab == name).collect();
        let runs: Vec<LabRun> = mine
            .iter()
            .map(|pl| LabRun {
                evidence: pl.run.evidence.clone(),
                dir: pl.run.dir.clone(),
                workstation: pl.run.workstation.clone(),
            })
            .collect();
        let (reports, err) = on_lab(&args, &p, &spec, &runs);
        for (pl, report) in mine.iter().zip(reports) {
            parts[pl.table].push(TablePart {
                config: pl.config,
                dir: pl.run.dir.clone(),
                report,
            });
        }
        failure = err;
    }
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating `{}`", args.out.display()))?;
    for ((table, configs), mut got) in tables.iter().zip(parts) {
        // The study's order, whatever order the labs ran in.
        got.sort_by_key(|part| configs.iter().position(|c| *c == part.config));
        let report = table_report(table, &got, evidence_bytes);
        let text = render_table_text(&report);
        let html =
            caseload_workloads::report::render_tables_html(&report).map_err(anyhow::Error::msg)?;
        for (file, bytes) in [
            (format!("{table}.json"), serde_json::to_vec_pretty(&report)?),
            (format!("{table}.txt"), text.clone().into_bytes()),
            (format!("{table}.html"), html.into_bytes()),
        ] {
            std::fs::write(args.out.join(&file), bytes)
                .with_context(|| format!("writing `{}`", args.out.join(&file).display()))?;
        }
        println!(
            "study ftk4 --{table} ({} of {} configurations):",
            got.len(),
            configs.len()
        );
        print!("{text}");
        println!(
            "reports: {} ({table}.json, {table}.txt, {table}.html; each configuration's comparison in {table}/)",
            args.out.display()
        );
    }
    if let Some(e) = failure {
        eprintln!("caseload study: stopped: {e:#}");
        return Ok(ExitCode::FAILURE);
    }
    if cancel.load(Ordering::Relaxed) {
        return Ok(ExitCode::from(130));
    }
    Ok(ExitCode::SUCCESS)
}
