//! Subcommands. Each lives in its own module and owns its arguments.

pub mod advise;
pub mod bench_storage;
pub mod compare;
pub mod convert;
pub mod corpus;
pub mod db_args;
pub mod distributed;
pub mod doctor;
pub mod export;
pub mod hashset;
pub mod iolog;
pub mod job_args;
pub mod lab;
pub mod model;
pub mod netns;
pub mod predict;
pub mod probe;
pub mod quickstart;
pub mod replay;
pub mod run;
pub mod search;
pub mod study;
pub mod trace;
pub mod util;
pub mod workstation_args;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// Reproduce and time the storage workload of a forensic suite.
#[derive(Debug, Parser)]
#[command(name = "caseload", version, about)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Generate a small corpus in a scratch directory, run the default
    /// stages on a temp-dir layout and print the per-stage table.
    Quickstart(quickstart::Args),
    /// Generate a synthetic evidence corpus with exact ground truth.
    Corpus(corpus::Args),
    /// Convert a raw image (single or split .001) to E01.
    Convert(convert::Args),
    /// Run forensic stages over evidence on a storage layout, timing each
    /// stage and I/O channel.
    Run(run::Args),
    /// Compare layouts and evidence formats: one workload over evidence ×
    /// layouts, repeated and interleaved, with medians, ratios and an HTML
    /// report.
    Compare(compare::Args),
    /// Export a case's file listing as a TSK bodyfile, DFXML or CSV.
    Export(export::Args),
    /// Import, list, look up and remove hash sets of the KFF library.
    Hashset(hashset::Args),
    /// Measure each channel's device: sequential MB/s, 4 KiB random-read
    /// IOPS, fsync latency.
    Probe(probe::Args),
    /// The seeds' storage micro-benchmarks through caseload's channel
    /// door: bonnie++-like, PostMark-like and an iozone-like matrix, as a
    /// table, JSON and an HTML heat map.
    BenchStorage(bench_storage::Args),
    /// Search a case's full-text index (terms, phrases, prefix*, AND/OR/NOT,
    /// or --regex over the extracted text).
    Search(search::Args),
    /// Modelled storage devices on this machine (root): `up`, `down`,
    /// `status`, `list`.
    Lab(lab::Args),
    /// A published study's configurations as labs, each compared on and
    /// merged into one report (`study ftk4`; root).
    Study(study::Args),
    /// Predict a recorded run's stage times on other devices (a lab's
    /// models or a probe), from its per-channel figures.
    Predict(predict::Args),
    /// Predict a recorded run's stage times and throughput on N
    /// workstations sharing its evidence store and database (Mean Value
    /// Analysis, docs/model.md).
    Model(model::Args),
    /// Which upgrade buys the most time per unit of money: every
    /// combination of candidate devices (and recorded workstation
    /// changes) a budget allows, predicted from a recorded run and ranked,
    /// with the Pareto front (docs/advise.md).
    Advise(advise::Args),
    /// Plan a case for several workers on a PostgreSQL server: the case,
    /// its preparation and its work units (docs/distributed.md).
    Plan(distributed::PlanArgs),
    /// Work on a planned case: claim units, run them, commit each with its
    /// figures, until none is left.
    Worker(distributed::WorkerArgs),
    /// A planned case's progress per stage and worker.
    Status(distributed::StatusArgs),
    /// A planned case's figures as run.json (per stage, per worker,
    /// throughput over time).
    Report(distributed::ReportArgs),
    /// Plan a case and run it with N workers on this machine, on a private
    /// PostgreSQL server; leaves a case `export` and `search` read like a
    /// single run's.
    Cluster(distributed::ClusterArgs),
    /// Read other tools' I/O traces (Process Monitor CSV and PML, strace)
    /// into caseload's (`trace import`), and compare two traces side by
    /// side (`trace compare`).
    Trace(trace::Args),
    /// Play a trace on a layout or lab, thread by thread with its think
    /// time, into a run.json like any run's.
    Replay(replay::Args),
    /// This machine as caseload sees it: the CPU and which implementation
    /// of each hot kernel (MD5, SHA-1, lanes, inflate, ...) runs, chosen
    /// by measurement or rule (run.json's `system.kernels`).
    Doctor(doctor::Args),
}

/// Run the chosen subcommand.
pub fn dispatch(cli: Cli) -> anyhow::Result<ExitCode> {
    // A forced kernel this CPU cannot run is refused before any work
    // (an illegal instruction later would lose what was written).
    // (`doctor` shows the table first, then refuses the same way.)
    if !matches!(cli.command, Command::Doctor(_))
        && std::env::vars().any(|(k, _)| k.starts_with("CASELOAD_KERNEL_"))
    {
        caseload_engine::kernels::check_environment().map_err(anyhow::Error::msg)?;
    }
    match cli.command {
        Command::Doctor(args) => doctor::run(args),
        Command::Trace(args) => trace::run(args),
        Command::Replay(args) => replay::run(args),
        Command::Quickstart(args) => quickstart::run(args),
        Command::Corpus(args) => corpus::run(args),
        Command::Convert(args) => convert::run(args),
        Command::Run(args) => run::run(args),
        Command::Plan(args) => distributed::plan(args),
        Command::Worker(args) => distributed::worker(args),
        Command::Status(args) => distributed::status(args),
        Command::Report(args) => distributed::report(args),
        Command::Cluster(args) => distributed::cluster(args),
        Command::Compare(args) => compare::run(args),
        Command::Export(args) => export::run(args),
        Command::Hashset(args) => hashset::run(args),
        Command::Search(args) => search::run(args),
        Command::Probe(args) => probe::run(args),
        Command::BenchStorage(args) => bench_storage::run(args),
        Command::Lab(args) => lab::run(args),
        Command::Model(args) => model::run(args),
        Command::Study(args) => study::run(args),
        Command::Predict(args) => predict::run(args),
        Command::Advise(args) => advise::run(args),
    }
}
