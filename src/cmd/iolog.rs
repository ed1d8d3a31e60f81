//! `caseload export --format fio-iolog`: a traced run's channel operations
//! as fio iologs (`caseload_engine::iolog`), the replay files filled, a job
//! file, and the iologs' bytes checked against run.json.

use super::export::Args;
use anyhow::Context;
use caseload_engine::channel::ChannelKind;
use caseload_engine::iolog::{self, IologSink};
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

struct Sink {
    dir: PathBuf,
    writers: BTreeMap<ChannelKind, BufWriter<File>>,
}

impl Sink {
    fn path(dir: &Path, k: ChannelKind) -> PathBuf {
        dir.join(format!("{}.iolog", k.name()))
    }
}

impl IologSink for Sink {
    fn writer(&mut self, channel: ChannelKind) -> std::io::Result<&mut dyn Write> {
        use std::collections::btree_map::Entry;
        match self.writers.entry(channel) {
            Entry::Occupied(e) => Ok(e.into_mut()),
            Entry::Vacant(e) => {
                let mut w = BufWriter::new(File::create(Self::path(&self.dir, channel))?);
                iolog::write_header(&mut w)?;
                Ok(e.insert(w))
            }
        }
    }
}

/// Fill `path` with `bytes` of pseudo-random data (incompressible, so a
/// replay's reads cost what the run's did on any file system).
fn fill(path: &Path, bytes: u64) -> std::io::Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let mut f = BufWriter::with_capacity(1 << 20, File::create(path)?);
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15 ^ bytes;
    let mut block = vec![0u8; 1 << 20];
    let mut left = bytes;
    while left > 0 {
        for chunk in block.chunks_exact_mut(8) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            chunk.copy_from_slice(&x.to_le_bytes());
        }
        let n = left.min(block.len() as u64) as usize;
        f.write_all(&block[..n])?;
        left -= n as u64;
    }
    f.flush()
}

/// Export it.
pub fn export(args: &Args) -> anyhow::Result<ExitCode> {
    let out = args
        .out
        .clone()
        .context("--format fio-iolog writes a directory: give --out DIR")?;
    let report = caseload_engine::run::load_run_json(&args.case)
        .with_context(|| format!("`{}` does not hold a caseload case", args.case.display()))?;
    let trace_meta = report.trace.as_ref().with_context(|| {
        format!(
            "the run in `{}` was not traced: run it again with --trace",
            args.case.display()
        )
    })?;
    let trace_path = args.case.join(&trace_meta.file);
    let replay_dir = match &args.replay_dir {
        Some(d) => d.clone(),
        None => out.join("files"),
    };
    std::fs::create_dir_all(&out).with_context(|| format!("creating `{}`", out.display()))?;
    let replay_dir = std::path::absolute(&replay_dir)
        .with_context(|| format!("resolving `{}`", replay_dir.display()))?;
    for (k, info) in &report.channels {
        if *k != ChannelKind::Evidence
            && replay_dir.starts_with(&info.dir)
            && info.dir != Path::new("")
        {
            anyhow::bail!(
                "--replay-dir `{}` is inside the {k} channel of the case; a replay must not write into it",
                replay_dir.display()
            );
        }
    }
    let trace = File::open(&trace_path)
        .with_context(|| format!("opening the trace `{}`", trace_path.display()))?;
    let mut sink = Sink {
        dir: out.clone(),
        writers: BTreeMap::new(),
    };
    let summary = iolog::trace_to_iologs(
        BufReader::with_capacity(1 << 20, trace),
        &mut sink,
        &replay_dir,
    )
    .with_context(|| format!("converting `{}`", trace_path.display()))?;
    for (k, mut w) in std::mem::take(&mut sink.writers) {
        w.flush()
            .with_context(|| format!("writing the {k} iolog in `{}`", out.display()))?;
    }
    let mut filled = 0u64;
    for f in &summary.files {
        if f.in_place {
            continue;
        }
        fill(&f.replay, f.fill_bytes)
            .with_context(|| format!("filling the replay file `{}`", f.replay.display()))?;
        filled += f.fill_bytes;
    }
    let iologs: BTreeMap<ChannelKind, PathBuf> = summary
        .channels
        .keys()
        .map(|k| (*k, Sink::path(&out, *k)))
        .collect();
    let job = out.join("replay.fio");
    std::fs::write(&job, iolog::job_file(&iologs))
        .with_context(|| format!("writing `{}`", job.display()))?;

    println!(
        "{} trace records -> {} iologs in {} ({} replay files, {:.1} MB filled in {})",
        summary.records,
        iologs.len(),
        out.display(),
        summary.files.len(),
        filled as f64 / 1e6,
        replay_dir.display()
    );
    println!("channel    reads  MB read   writes  MB written  syncs   run.json MB read/written");
    for (k, c) in &summary.channels {
        let run = report.totals.channels.get(k).copied().unwrap_or_default();
        println!(
            "{:<9} {:>6} {:>8.1} {:>8} {:>11.1} {:>6}   {:.1}/{:.1}{}",
            k.name(),
            c.reads,
            c.bytes_read as f64 / 1e6,
            c.writes,
            c.bytes_written as f64 / 1e6,
            c.syncs,
            run.bytes_read as f64 / 1e6,
            run.bytes_written as f64 / 1e6,
            if run.bytes_read == c.bytes_read && run.bytes_written == c.bytes_written {
                ""
            } else {
                "  (differs: I/O a server or library did on its own handles is not traced)"
            }
        );
    }
    if !summary.skipped.is_empty() {
        let skipped: Vec<String> = summary
            .skipped
            .iter()
            .map(|(k, n)| format!("{n} {k}"))
            .collect();
        println!("not replayable by fio: {}", skipped.join(", "));
    }
    if let Some(e) = &trace_meta.error {
        println!(
            "warning: the trace is incomplete ({} operations lost): {e}",
            trace_meta.dropped
        );
    }
    println!("replay: fio --output-format=json {}", job.display());
    Ok(ExitCode::SUCCESS)
}
