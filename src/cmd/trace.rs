//! `caseload trace import` (another tool's trace into caseload's) and
//! `caseload trace compare` (two traces side by side). The formats and the
//! figures are `caseload_traces`'s; this module opens files, measures the
//! tracer, and prints.

use anyhow::Context;
use caseload_engine::channel::ChannelKind;
use caseload_traces::analysis::{self, ChannelFigures, TraceFigures};
use caseload_traces::import::{self, ImportOptions, ImportReport, Importer, PathMap, SourceFormat};
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Arguments of `caseload trace`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Read a Process Monitor log (CSV or PML), strace output or a caseload
    /// trace into a caseload trace, mapping paths to channels.
    Import(ImportArgs),
    /// Two traces (or traced runs) side by side, per channel and phase:
    /// bytes, operations, request sizes, syncs, sequential share,
    /// concurrency, and the page-cache hit ratio each memory size gives.
    Compare(CompareArgs),
    /// (Internal) a loop of cheap system calls, timed with and without
    /// strace to measure the tracer's cost per call.
    #[command(hide = true)]
    SyscallLoop {
        /// Calls to make.
        calls: u64,
    },
}

/// Arguments of `caseload trace import`.
#[derive(Debug, clap::Args)]
pub struct ImportArgs {
    /// The trace to read.
    pub file: PathBuf,
    /// Its format: procmon-csv, procmon-pml, strace or caseload (guessed
    /// from its first bytes when left out).
    #[arg(long)]
    pub format: Option<String>,
    /// Paths under PREFIX belong to CHANNEL (evidence, database, case,
    /// temp): drive letters (`F:\=evidence`), UNC shares
    /// (`\\nas\cases=case`) or path prefixes (`/mnt/ev=evidence`);
    /// repeat for each. Windows paths compare without case.
    #[arg(long = "map", value_name = "PREFIX=CHANNEL")]
    pub maps: Vec<String>,
    /// Keep only this process's operations (repeat for several; without
    /// case).
    #[arg(long = "process", value_name = "NAME")]
    pub processes: Vec<String>,
    /// Leave out files with this name (`*` at the end: names starting
    /// so), e.g. a traced caseload run's own `trace.csv` and `run.json*`
    /// (repeat for several).
    #[arg(long = "exclude", value_name = "NAME")]
    pub exclude: Vec<String>,
    /// Keep Process Monitor's Paging I/O rows too (the cache manager's
    /// reads and writes; left out by default, since the replaying
    /// machine's cache makes its own).
    #[arg(long)]
    pub keep_paging: bool,
    /// The tracer's cost per call, which the replay takes out of the think
    /// time: `auto` measures strace's here (for strace traces), `none`, or
    /// nanoseconds.
    #[arg(long, default_value = "auto")]
    pub tracer_overhead: String,
    /// How long the traced command took without the tracer (timed once,
    /// on the same machine): the tracer's cost per stop is then the
    /// trace's extra time over this, divided by its stops, the best
    /// figure there is (strace traces; overrides --tracer-overhead).
    #[arg(long, value_name = "SECONDS")]
    pub plain_seconds: Option<f64>,
    /// Import what a damaged file holds up to the damage (said in the
    /// report and in the trace's header) instead of refusing it.
    #[arg(long)]
    pub partial: bool,
    /// The caseload trace to write.
    #[arg(long)]
    pub out: PathBuf,
    /// Print the import's report as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `caseload trace compare`.
#[derive(Debug, clap::Args)]
pub struct CompareArgs {
    /// The first trace (a trace file, or a case directory holding a
    /// traced run's trace.csv).
    pub a: PathBuf,
    /// The second.
    pub b: PathBuf,
    /// Workstation memory sizes to give the page-cache hit ratio for
    /// (`16GB,32GB`; each the page cache a workstation of that size leaves,
    /// as `run --ram` models it).
    #[arg(long, value_delimiter = ',', value_parser = caseload_engine::workstation::parse_memory_size)]
    pub ram: Vec<u64>,
    /// The size of the evidence being modelled: the memory sizes are
    /// scaled by the evidence each trace reads over this, as `--scale-from`
    /// does for a run.
    #[arg(long, value_parser = caseload_engine::units::parse_size)]
    pub scale_from: Option<u64>,
    /// Print the comparison as JSON (schema `caseload-trace-compare`,
    /// version 1: docs/trace-compare.schema.json).
    #[arg(long)]
    pub json: bool,
    /// Also write `trace-compare.json` and `trace-compare.html` here.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

/// Run `caseload trace`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args.command {
        Command::Import(a) => import_trace(a),
        Command::Compare(a) => compare(a),
        Command::SyscallLoop { calls } => {
            syscall_loop(calls);
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// `calls` cheap system calls (a zero-byte read of a file): what a
/// tracer stops on, with nothing else to time.
fn syscall_loop(calls: u64) {
    if let Ok(mut f) = std::fs::File::open(std::env::current_exe().unwrap_or_default()) {
        let mut buf = [0u8; 0];
        for _ in 0..calls {
            let _ = f.read(&mut buf);
        }
    }
}

/// strace's cost per call on this machine: the same loop of calls timed
/// plainly and under `strace -f -ttt -T -y`, best of three each.
fn measure_strace_overhead() -> anyhow::Result<u64> {
    const CALLS: u64 = 20_000;
    let exe = std::env::current_exe()?;
    let time = |traced: bool| -> anyhow::Result<f64> {
        let mut best = f64::MAX;
        for _ in 0..3 {
            let mut cmd = if traced {
                let mut c = std::process::Command::new("strace");
                c.args(["-f", "-ttt", "-T", "-y", "-o", "/dev/null", "--"])
                    .arg(&exe);
                c
            } else {
                std::process::Command::new(&exe)
            };
            cmd.args(["trace", "syscall-loop", &CALLS.to_string()]);
            let t = std::time::Instant::now();
            let status = cmd
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .status()
                .context("running strace to measure its cost per call")?;
            anyhow::ensure!(
                status.success(),
                "strace failed to trace a loop of system calls"
            );
            best = best.min(t.elapsed().as_secs_f64());
        }
        Ok(best)
    };
    let plain = time(false)?;
    let traced = time(true)?;
    Ok((((traced - plain).max(0.0) / CALLS as f64) * 1e9) as u64)
}

fn import_trace(a: ImportArgs) -> anyhow::Result<ExitCode> {
    let mut head = vec![0u8; 64 << 10];
    let n = std::fs::File::open(&a.file)
        .with_context(|| format!("opening {}", a.file.display()))?
        .read(&mut head)?;
    head.truncate(n);
    let format = match &a.format {
        Some(f) => SourceFormat::parse(f)
            .with_context(|| format!("--format {f}: one of procmon-csv, procmon-pml, strace, caseload"))?,
        None => SourceFormat::guess(&head).with_context(|| {
            format!(
                "{}: not a Process Monitor CSV or PML, strace output or caseload trace that I recognise; give --format",
                a.file.display()
            )
        })?,
    };
    let maps = a
        .maps
        .iter()
        .map(|m| PathMap::parse(m).map_err(anyhow::Error::msg))
        .collect::<anyhow::Result<Vec<_>>>()?;
    anyhow::ensure!(
        !maps.is_empty() || format == SourceFormat::Caseload,
        "give --map PREFIX=CHANNEL for the paths the trace uses (e.g. --map 'F:\\=evidence' --map 'G:\\=database'); a caseload trace needs none"
    );
    let mut notes: Vec<String> = Vec::new();
    // strace's own time inside each call's recorded duration: the
    // fastest calls' (a first pass over the trace).
    let strace_info = if format == SourceFormat::Strace {
        import::strace::read(
            BufReader::with_capacity(1 << 20, std::fs::File::open(&a.file)?),
            &mut |_| {},
        )
        .ok()
    } else {
        None
    };
    if let Some(info) = strace_info.as_ref().filter(|i| i.orphans > 0) {
        notes.push(format!(
            "{} processes or threads appeared without the clone, fork or vfork that made them (take the trace with `-e trace=desc,file,process,network,futex`): the positions of descriptors they inherited are not known (their reads and writes start at offset 0), nor their working folder",
            info.orphans
        ));
    }
    let in_call_ns = match (&strace_info, a.tracer_overhead.as_str()) {
        (Some(info), t) if t != "none" => info.in_call_ns(),
        _ => 0,
    };
    if in_call_ns > 0 {
        notes.push(format!(
            "strace's share of each call's recorded duration: {in_call_ns} ns (the fastest tenth of the calls), taken off every duration"
        ));
    }
    let from_plain = match (a.plain_seconds, format) {
        (Some(plain), SourceFormat::Strace) => {
            anyhow::ensure!(
                plain >= 0.0 && plain.is_finite(),
                "--plain-seconds must be 0 or more"
            );
            let info = strace_info
                .clone()
                .context("the trace could not be read for --plain-seconds")?;
            let extra = (info.span_ns as f64 - plain * 1e9).max(0.0);
            let ns = (extra / info.stops().max(1) as f64) as u64;
            notes.push(format!(
                "strace's cost per stop from the plain run: {ns} ns ({:.3} s traced against {plain:.3} s plain, {} stops)",
                info.span_ns as f64 / 1e9,
                info.stops()
            ));
            Some(Some(ns))
        }
        (Some(_), _) => anyhow::bail!("--plain-seconds is for strace traces (the tracer's cost)"),
        (None, _) => None,
    };
    let tracer_overhead_ns = match (a.tracer_overhead.as_str(), format) {
        _ if from_plain.is_some() => from_plain.flatten(),
        ("none", _) => None,
        ("auto", SourceFormat::Strace) => match measure_strace_overhead() {
            Ok(ns) => {
                notes.push(format!(
                    "strace's cost per call measured here: {ns} ns (taken out of the think time on replay)"
                ));
                Some(ns)
            }
            Err(e) => {
                notes.push(format!(
                    "strace's cost per call not measured ({e:#}): think times include it"
                ));
                None
            }
        },
        ("auto", _) => None,
        (ns, _) => Some(
            ns.parse()
                .with_context(|| format!("--tracer-overhead {ns}: auto, none or nanoseconds"))?,
        ),
    };
    let mut meta = vec![(
        "source".to_string(),
        format!("{} {}", format.name(), a.file.display()),
    )];
    // The plain run's length: a replay takes the tracer's time out of the
    // trace's clock until it ends there.
    if let Some(p) = a.plain_seconds {
        meta.push(("plain-ns".into(), format!("{}", (p * 1e9) as u64)));
    }
    let opts = ImportOptions {
        maps,
        processes: a.processes.clone(),
        keep_paging: a.keep_paging,
        tracer_overhead_ns,
        tracer_in_call_ns: in_call_ns,
        meta,
        exclude: a.exclude.clone(),
        tracer_stops: format == SourceFormat::Strace,
    };
    // Written beside its destination and renamed when complete, so a
    // refused import leaves nothing that looks like a trace.
    let partial_path = a.out.with_extension("importing");
    let out_file = std::fs::File::create(&partial_path)
        .with_context(|| format!("creating {}", partial_path.display()))?;
    let mut out = std::io::BufWriter::with_capacity(1 << 20, out_file);
    let result = (|| -> anyhow::Result<(ImportReport, Option<String>)> {
        let mut importer = Importer::new(&opts, &mut out)?;
        let source = std::fs::File::open(&a.file)?;
        let read = match format {
            SourceFormat::ProcmonCsv => {
                import::procmon_csv::read(BufReader::with_capacity(1 << 20, source), &mut |e| {
                    importer.push(e)
                })
                .map(|_| ())
            }
            SourceFormat::ProcmonPml => {
                import::pml::read(source, &mut |e| importer.push(e)).map(|_| ())
            }
            SourceFormat::Strace => {
                import::strace::read(BufReader::with_capacity(1 << 20, source), &mut |e| {
                    importer.push(e)
                })
                .map(|_| ())
            }
            SourceFormat::Caseload => {
                drop(importer);
                return copy_caseload_trace(&a.file, &mut out).map(|r| (r, None));
            }
        };
        let damage = match read {
            Ok(()) => None,
            Err(e) if a.partial => Some(e.to_string()),
            Err(e) => {
                return Err(anyhow::Error::new(e).context(format!(
                    "{} (nothing imported; --partial imports what comes before the damage)",
                    a.file.display()
                )));
            }
        };
        Ok((importer.finish()?, damage))
    })();
    drop(out);
    let (report, damage) = match result {
        Ok(r) => r,
        Err(e) => {
            let _ = std::fs::remove_file(&partial_path);
            return Err(e);
        }
    };
    std::fs::rename(&partial_path, &a.out)
        .with_context(|| format!("writing {}", a.out.display()))?;
    if let Some(d) = &damage {
        notes.push(format!(
            "PARTIAL: the source is damaged ({d}); only what came before is imported"
        ));
    }
    if a.json {
        let mut v = serde_json::to_value(&report)?;
        v["format"] = serde_json::json!(format.name());
        v["notes"] = serde_json::json!(notes);
        v["partial"] = serde_json::json!(damage);
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        print!("{}", render_import(&a, format, &report, &notes));
    }
    Ok(ExitCode::SUCCESS)
}

/// A caseload trace rewritten as version 2 (version 1's threads: one per
/// channel, as it is read).
fn copy_caseload_trace(path: &Path, out: &mut dyn std::io::Write) -> anyhow::Result<ImportReport> {
    use caseload_traces::format::{self, Op, TraceReader};
    let mut reader = TraceReader::new(BufReader::new(std::fs::File::open(path)?))?;
    let mut meta = reader.header().meta.clone();
    meta.push(("source".into(), format!("caseload {}", path.display())));
    format::write_header(out, &meta)?;
    let mut report = ImportReport::default();
    let mut threads = std::collections::BTreeSet::new();
    let mut line = Vec::new();
    let version = reader.header().version;
    while let Some(r) = reader.next_record() {
        let r = r?;
        report.events += 1;
        if r.op == Op::Thread {
            report.threads += 1;
        }
        if r.op == Op::Add
            && let Some(c) = r.channel
        {
            report.channels.entry(c).or_default().files += 1;
        }
        if version == 1 && threads.insert(r.thread) {
            report.threads += 1;
            line.clear();
            format::write_record(
                &format::Record {
                    t_ns: r.t_ns,
                    thread: r.thread,
                    op: Op::Thread,
                    path: Some(
                        format!("caseload:0:{}", r.channel.map_or("", |c| c.name())).into_bytes(),
                    ),
                    ..format::Record::default()
                },
                &mut line,
            );
            out.write_all(&line)?;
        }
        if let Some(c) = r.channel.filter(|_| !r.op.is_meta()) {
            let t = report.channels.entry(c).or_default();
            match r.op {
                Op::Read => {
                    t.read.events += 1;
                    t.read.bytes += r.len;
                }
                Op::Write => {
                    t.write.events += 1;
                    t.write.bytes += r.len;
                }
                Op::Sync => t.syncs += 1,
                _ => t.other_ops += 1,
            }
        }
        line.clear();
        format::write_record(&r, &mut line);
        out.write_all(&line)?;
        report.records += 1;
    }
    // An import's figures known at its end (the tracer's stops).
    for (k, v) in reader.trailer() {
        writeln!(out, "# {k} {v}")?;
    }
    out.flush()?;
    Ok(report)
}

fn render_import(
    a: &ImportArgs,
    format: SourceFormat,
    r: &ImportReport,
    notes: &[String],
) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "imported {} ({}): {} events, {} threads, {:.3} s",
        a.file.display(),
        format.name(),
        r.events,
        r.threads,
        r.seconds
    );
    let _ = writeln!(
        s,
        "{:<9} {:>9} {:>14} {:>9} {:>14} {:>7} {:>9} {:>7}",
        "channel", "reads", "bytes read", "writes", "bytes written", "syncs", "other ops", "files"
    );
    for (c, t) in &r.channels {
        let _ = writeln!(
            s,
            "{:<9} {:>9} {:>14} {:>9} {:>14} {:>7} {:>9} {:>7}",
            c.name(),
            t.read.events,
            t.read.bytes,
            t.write.events,
            t.write.bytes,
            t.syncs,
            t.other_ops,
            t.files
        );
    }
    let m = &r.messages;
    if m.streams > 0 {
        let _ = writeln!(
            s,
            "messages between threads: {} sends ({} bytes), {} receives ({} bytes), {} wake-ups, {} waits woken, on {} streams and keys (a receive waits in a replay for the send that supplied its last byte, a woken wait for the latest wake-up before it ended)",
            m.sent.events,
            m.sent.bytes,
            m.received.events,
            m.received.bytes,
            m.wakes,
            m.woken,
            m.streams
        );
    }
    if r.messages.timers > 0 {
        let _ = writeln!(
            s,
            "timers that ran out: {} (waits that timed out, after which the thread went on by itself: a replay waits them out as recorded, and with the plain run's length leaves out what followed one that would have run out after it)",
            r.messages.timers
        );
    }
    if !r.left_out.is_empty() {
        let _ = writeln!(s, "left out:");
        for (why, t) in &r.left_out {
            let _ = writeln!(s, "  {:>9} events {:>14} bytes  {why}", t.events, t.bytes);
        }
    }
    if !r.top_unmapped.is_empty() {
        let _ = writeln!(
            s,
            "unmapped folders with the most bytes (give --map to take them):"
        );
        for (folder, t) in &r.top_unmapped {
            let _ = writeln!(
                s,
                "  {:>9} events {:>14} bytes  {folder}",
                t.events, t.bytes
            );
        }
    }
    for n in notes {
        let _ = writeln!(s, "note: {n}");
    }
    let _ = writeln!(s, "trace: {}", a.out.display());
    s
}

/// A trace file, or a case directory's trace.csv.
fn trace_path(p: &Path) -> anyhow::Result<PathBuf> {
    if p.is_dir() {
        let t = p.join("trace.csv");
        anyhow::ensure!(
            t.exists(),
            "{} holds no trace.csv (run with --trace)",
            p.display()
        );
        Ok(t)
    } else {
        Ok(p.to_path_buf())
    }
}

/// One trace of a comparison: its file, figures, and each `--ram`'s
/// memory with the page cache it leaves.
type Side = (PathBuf, TraceFigures, Vec<(u64, u64)>);

/// The version of `trace-compare.json`.
const COMPARE_SCHEMA_VERSION: u32 = 1;

fn compare(a: CompareArgs) -> anyhow::Result<ExitCode> {
    let figures = |p: &Path| -> anyhow::Result<Side> {
        let path = trace_path(p)?;
        let open = || -> anyhow::Result<BufReader<std::fs::File>> {
            Ok(BufReader::with_capacity(
                1 << 20,
                std::fs::File::open(&path)
                    .with_context(|| format!("opening {}", path.display()))?,
            ))
        };
        let evidence = analysis::evidence_bytes(open()?)?;
        // Each memory size as the page cache a workstation of that size
        // leaves (the suite's and system's shares taken out), scaled.
        let mut sizes = Vec::new();
        for &ram in &a.ram {
            let spec = caseload_engine::workstation::WorkstationSpec {
                ram,
                scale_from: a.scale_from,
                processor_threads: None,
            };
            let plan = spec
                .plan(
                    evidence.max(1),
                    1,
                    caseload_engine::workstation::Suite::Ftk,
                    false,
                    &Default::default(),
                )
                .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
            sizes.push((ram, plan.cache_budget_bytes));
        }
        let budgets: Vec<u64> = sizes.iter().map(|s| s.1).collect();
        let rate = analysis::sample_rate(analysis::bytes_moved(open()?)?);
        let f = analysis::analyse(open()?, &budgets, rate)
            .with_context(|| format!("reading {}", path.display()))?;
        Ok((path, f, sizes))
    };
    let (pa, fa, sa) = figures(&a.a)?;
    let (pb, fb, sb) = figures(&a.b)?;
    let json = serde_json::json!({
        "schema": "caseload-trace-compare",
        "schema_version": COMPARE_SCHEMA_VERSION,
        "a": {"trace": pa, "figures": fa, "cache_sizes": sa.iter().map(|(r, b)| serde_json::json!({"ram_bytes": r, "cache_bytes": b})).collect::<Vec<_>>()},
        "b": {"trace": pb, "figures": fb, "cache_sizes": sb.iter().map(|(r, b)| serde_json::json!({"ram_bytes": r, "cache_bytes": b})).collect::<Vec<_>>()},
    });
    if let Some(dir) = &a.out {
        std::fs::create_dir_all(dir)?;
        std::fs::write(
            dir.join("trace-compare.json"),
            serde_json::to_vec_pretty(&json)?,
        )?;
        std::fs::write(
            dir.join("trace-compare.html"),
            render_html(&pa, &fa, &pb, &fb, &a.ram),
        )?;
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&json)?);
    } else {
        print!("{}", render_compare(&pa, &fa, &pb, &fb, &a.ram));
    }
    Ok(ExitCode::SUCCESS)
}

/// The phases to compare: every phase of either trace, in order, when
/// both have several; else the traces whole (`all`, true).
fn phase_pairs(fa: &TraceFigures, fb: &TraceFigures) -> Vec<(String, bool)> {
    if fa.phase_order.len() <= 1 || fb.phase_order.len() <= 1 {
        // Unlike phases cannot be matched: compare the traces whole.
        return vec![("all".into(), true)];
    }
    let mut names: Vec<String> = fa.phase_order.clone();
    for n in &fb.phase_order {
        if !names.contains(n) {
            names.push(n.clone());
        }
    }
    names.into_iter().map(|n| (n, false)).collect()
}

/// A channel's figures over a phase (or over all phases).
fn channel_of(f: &TraceFigures, phase: &str, whole: bool, c: ChannelKind) -> ChannelFigures {
    if whole {
        let mut sum = ChannelFigures::default();
        for p in f.phases.values() {
            if let Some(x) = p.get(&c) {
                sum.read_bytes += x.read_bytes;
                sum.read_ops += x.read_ops;
                sum.write_bytes += x.write_bytes;
                sum.write_ops += x.write_ops;
                sum.syncs += x.syncs;
                sum.meta_ops += x.meta_ops;
                sum.max_in_flight = sum.max_in_flight.max(x.max_in_flight);
            }
        }
        let gib = sum.write_bytes as f64 / (1u64 << 30) as f64;
        sum.syncs_per_gib_written = if gib > 0.0 {
            sum.syncs as f64 / gib
        } else {
            0.0
        };
        return sum;
    }
    f.phases
        .get(phase)
        .and_then(|p| p.get(&c))
        .cloned()
        .unwrap_or_default()
}

fn ratio(a: f64, b: f64) -> String {
    if a == 0.0 && b == 0.0 {
        "-".into()
    } else if a == 0.0 {
        "inf".into()
    } else {
        format!("{:.2}", b / a)
    }
}

fn render_compare(
    pa: &Path,
    fa: &TraceFigures,
    pb: &Path,
    fb: &TraceFigures,
    ram: &[u64],
) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "A: {} ({} threads, {:.3} s)",
        pa.display(),
        fa.threads,
        fa.seconds
    );
    let _ = writeln!(
        s,
        "B: {} ({} threads, {:.3} s)",
        pb.display(),
        fb.threads,
        fb.seconds
    );
    for (phase, whole) in phase_pairs(fa, fb) {
        let _ = writeln!(s, "\nphase {phase}:");
        let _ = writeln!(
            s,
            "{:<9} {:<22} {:>14} {:>14} {:>8}",
            "channel", "figure", "A", "B", "B/A"
        );
        for c in ChannelKind::ALL {
            let (x, y) = (
                channel_of(fa, &phase, whole, c),
                channel_of(fb, &phase, whole, c),
            );
            if x == ChannelFigures::default() && y == ChannelFigures::default() {
                continue;
            }
            let rows: [(&str, f64, f64); 8] = [
                ("bytes read", x.read_bytes as f64, y.read_bytes as f64),
                ("reads", x.read_ops as f64, y.read_ops as f64),
                ("bytes written", x.write_bytes as f64, y.write_bytes as f64),
                ("writes", x.write_ops as f64, y.write_ops as f64),
                ("syncs", x.syncs as f64, y.syncs as f64),
                (
                    "syncs per GiB written",
                    x.syncs_per_gib_written,
                    y.syncs_per_gib_written,
                ),
                ("other operations", x.meta_ops as f64, y.meta_ops as f64),
                (
                    "most in flight",
                    x.max_in_flight as f64,
                    y.max_in_flight as f64,
                ),
            ];
            for (name, va, vb) in rows {
                let _ = writeln!(
                    s,
                    "{:<9} {:<22} {:>14.0} {:>14.0} {:>8}",
                    c.name(),
                    name,
                    va,
                    vb,
                    ratio(va, vb)
                );
            }
            if !whole {
                let _ = writeln!(
                    s,
                    "{:<9} {:<22} {:>14.2} {:>14.2}",
                    c.name(),
                    "sequential share",
                    x.sequential_share,
                    y.sequential_share
                );
                let _ = writeln!(
                    s,
                    "{:<9} {:<22} {:>14.2} {:>14.2}",
                    c.name(),
                    "mean in flight",
                    x.mean_in_flight,
                    y.mean_in_flight
                );
            }
        }
    }
    let _ = writeln!(
        s,
        "\nre-use (all channels): distinct pages A {} B {}; reads first touching a page A {:.1}% B {:.1}%",
        fa.reuse.distinct_pages,
        fb.reuse.distinct_pages,
        pct(fa.reuse.read_first_touches, fa.reuse.read_accesses),
        pct(fb.reuse.read_first_touches, fb.reuse.read_accesses)
    );
    for (i, r) in ram.iter().enumerate() {
        let ha = fa.reuse.hit_ratios.get(i).map_or(0.0, |h| h.1);
        let hb = fb.reuse.hit_ratios.get(i).map_or(0.0, |h| h.1);
        let _ = writeln!(
            s,
            "  --ram {}: LRU read hit ratio A {:.1}% (cache {}) B {:.1}% (cache {})",
            caseload_engine::workstation::human(*r),
            ha * 100.0,
            caseload_engine::workstation::human(fa.reuse.hit_ratios.get(i).map_or(0, |h| h.0)),
            hb * 100.0,
            caseload_engine::workstation::human(fb.reuse.hit_ratios.get(i).map_or(0, |h| h.0)),
        );
    }
    s
}

fn pct(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 * 100.0 / b as f64
    }
}

/// The comparison as a page: request-size histograms per channel and the
/// cache curve, as inline SVG.
fn render_html(pa: &Path, fa: &TraceFigures, pb: &Path, fb: &TraceFigures, ram: &[u64]) -> String {
    use std::fmt::Write as _;
    let esc = |t: &str| {
        t.replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
    };
    let mut h = String::new();
    let _ = write!(
        h,
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>trace compare</title><style>body{{font-family:sans-serif}} td,th{{padding:2px 8px;text-align:right}}</style></head><body>"
    );
    let _ = write!(
        h,
        "<h1>trace compare</h1><p>A: {} &mdash; B: {}</p>",
        esc(&pa.display().to_string()),
        esc(&pb.display().to_string())
    );
    let _ = write!(
        h,
        "<pre>{}</pre>",
        esc(&render_compare(pa, fa, pb, fb, ram))
    );
    for c in ChannelKind::ALL {
        let (x, y) = (channel_of(fa, "", true, c), channel_of(fb, "", true, c));
        if x.read_ops + x.write_ops + y.read_ops + y.write_ops == 0 {
            continue;
        }
        let hist = |f: &TraceFigures| -> Vec<u64> {
            let mut v = vec![0u64; analysis::SIZE_BUCKETS.len()];
            for p in f.phases.values() {
                if let Some(ch) = p.get(&c) {
                    for (i, n) in ch
                        .read_sizes
                        .iter()
                        .zip(&ch.write_sizes)
                        .map(|(r, w)| r + w)
                        .enumerate()
                    {
                        v[i] += n;
                    }
                }
            }
            v
        };
        let (ha, hb) = (hist(fa), hist(fb));
        let max = ha.iter().chain(&hb).copied().max().unwrap_or(1).max(1) as f64;
        let _ = write!(
            h,
            "<h2>{} request sizes</h2><svg width=\"820\" height=\"160\">",
            c.name()
        );
        for (i, (a, b)) in ha.iter().zip(&hb).enumerate() {
            let x0 = 10 + i * 50;
            let ya = (*a as f64 / max * 120.0) as usize;
            let yb = (*b as f64 / max * 120.0) as usize;
            let _ = write!(
                h,
                "<rect x=\"{x0}\" y=\"{}\" width=\"20\" height=\"{ya}\" fill=\"#4472c4\"/>",
                130 - ya
            );
            let _ = write!(
                h,
                "<rect x=\"{}\" y=\"{}\" width=\"20\" height=\"{yb}\" fill=\"#ed7d31\"/>",
                x0 + 21,
                130 - yb
            );
            let label = caseload_engine::workstation::human(analysis::SIZE_BUCKETS[i]);
            let _ = write!(
                h,
                "<text x=\"{x0}\" y=\"150\" font-size=\"9\">{}</text>",
                esc(&label)
            );
        }
        let _ = write!(h, "</svg>");
    }
    if !ram.is_empty() {
        let _ = write!(
            h,
            "<h2>page-cache read hit ratio by memory</h2><table><tr><th>RAM</th><th>A</th><th>B</th></tr>"
        );
        for (i, r) in ram.iter().enumerate() {
            let ha = fa.reuse.hit_ratios.get(i).map_or(0.0, |x| x.1);
            let hb = fb.reuse.hit_ratios.get(i).map_or(0.0, |x| x.1);
            let _ = write!(
                h,
                "<tr><td>{}</td><td>{:.1}%</td><td>{:.1}%</td></tr>",
                caseload_engine::workstation::human(*r),
                ha * 100.0,
                hb * 100.0
            );
        }
        let _ = write!(h, "</table>");
    }
    let _ = write!(h, "<p>A in blue, B in orange.</p></body></html>");
    h
}
