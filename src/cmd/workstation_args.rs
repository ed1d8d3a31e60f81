//! The workstation flags `run`, `compare` and `study` share (flattened
//! into each): its memory (`--ram`, `--scale-from`) and processors
//! (`--cpus`, `--cpu-scale`), and how a run puts the processors into
//! effect (its affinity; a CPU quota in a cgroup made for the run).

use anyhow::Context;
use caseload_engine::workstation::{WorkstationSpec, parse_memory_size};
use std::process::ExitCode;

/// The modelled workstation's memory and processors.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct WorkstationArgs {
    /// The workstation's memory (`32GB` is 32 GiB, as memory is sold): the
    /// page cache is held to what the operating system, the suite and the
    /// database server leave of it, and PostgreSQL's memory settings follow
    /// it (docs/lab.md, "The workstation"). Default: a lab's `ram`, else
    /// none (this machine's memory, unmodelled).
    #[arg(long, value_parser = parse_memory_size)]
    pub ram: Option<u64>,
    /// The size of the evidence being modelled (`240GB`, decimal as drives
    /// are labelled): the workstation's memory is scaled by the evidence's
    /// size over this, so a small corpus stands in for a large disk on a
    /// proportionally smaller machine.
    #[arg(long, value_parser = caseload_engine::units::parse_size)]
    pub scale_from: Option<u64>,
    /// CPUs the run may use, its threads and its database server's
    /// processes (the first N of those this process may use; the default
    /// thread count follows). Default: a lab's `cpus`, else all.
    #[arg(long)]
    pub cpus: Option<usize>,
    /// A slower processor: the run's CPU time is limited to F of its CPUs
    /// (0 < F <= 1) by a CPU quota in a cgroup made for the run, its
    /// database server included (root; Linux).
    #[arg(long)]
    pub cpu_scale: Option<f64>,
}

/// Set by the parent of a run it put into a CPU-quota cgroup.
const INSIDE_QUOTA: &str = "CASELOAD_CPU_QUOTA_INSIDE";

impl WorkstationArgs {
    /// Check what can be checked without the evidence.
    pub fn check(&self) -> anyhow::Result<()> {
        anyhow::ensure!(
            self.ram.is_none() || !cfg!(windows),
            "--ram models the workstation's page cache by dropping a file's cached pages past its budget, which Windows cannot do for one file; on Windows a run uses the machine's own memory"
        );
        if let Some(n) = self.cpus {
            let have = caseload_engine::system::cpus_allowed().len().max(1);
            anyhow::ensure!(
                (1..=have).contains(&n),
                "--cpus {n}: this process may use {have} CPU(s) ({:?}); give 1 to {have}",
                caseload_engine::system::cpus_allowed()
            );
        }
        if let Some(f) = self.cpu_scale {
            anyhow::ensure!(
                f > 0.0 && f <= 1.0,
                "--cpu-scale {f}: a share of the run's CPUs, above 0 and at most 1"
            );
        }
        Ok(())
    }

    /// The workstation spec of a run: these flags over a lab's
    /// `[workstation]` (`lab`), if any; `None` without a RAM to model.
    pub fn spec(
        &self,
        lab: Option<&caseload_lab::lab::Workstation>,
    ) -> anyhow::Result<Option<WorkstationSpec>> {
        let Some(ram) = self.ram.or(lab.and_then(|l| l.ram)) else {
            anyhow::ensure!(
                self.scale_from.is_none(),
                "--scale-from scales the workstation's memory: give --ram (or a lab with `ram`)"
            );
            return Ok(None);
        };
        Ok(Some(WorkstationSpec {
            ram,
            scale_from: self.scale_from,
            processor_threads: lab.and_then(|l| l.processor_threads),
        }))
    }

    /// Before the first of several runs (`compare`, `study`): refuse once
    /// what every run would refuse (RAM below what the workstation needs,
    /// a modelled disk smaller than the evidence, an external server).
    pub fn preflight(
        &self,
        lab: Option<&caseload_lab::lab::Workstation>,
        evidence: &[std::path::PathBuf],
        threads: Option<usize>,
        db: &caseload_engine::casedb::DbOptions,
    ) -> anyhow::Result<()> {
        self.check()?;
        let Some(spec) = self.spec(lab)? else {
            return Ok(());
        };
        let threads = threads
            .or(self.cpus)
            .unwrap_or_else(super::util::default_threads);
        for e in evidence {
            caseload_engine::run::check_workstation(&spec, threads, db, e)
                .with_context(|| format!("the workstation for `{}`", e.display()))?;
        }
        Ok(())
    }

    /// These flags for a child run (`compare`'s, `--instances`').
    pub fn job(&self) -> caseload_workloads::job::WorkstationFlags {
        caseload_workloads::job::WorkstationFlags {
            ram: self.ram,
            scale_from: self.scale_from,
            cpus: self.cpus,
            cpu_scale: self.cpu_scale,
        }
    }

    /// Put the processors into effect for this process (and the threads
    /// and server processes it starts after): `--cpus` (else the lab's
    /// `cpus`) as its affinity. Returns the CPUs it may use.
    pub fn apply_cpus(
        &self,
        lab: Option<&caseload_lab::lab::Workstation>,
    ) -> anyhow::Result<usize> {
        let Some(n) = self.cpus.or(lab.and_then(|l| l.cpus)) else {
            return Ok(caseload_engine::system::cpus_allowed().len().max(1));
        };
        caseload_engine::system::restrict_cpus(n).context("setting the run's CPUs")?;
        Ok(n)
    }

    /// `--cpu-scale F`: unless this process already runs under its quota,
    /// make a cgroup with a CPU quota of F times the run's CPUs, run the
    /// same command line again as a child that joins it, remove the
    /// cgroup, and return the child's exit code. `None`: go on here.
    pub fn enter_cpu_quota(&self, cpus: usize) -> anyhow::Result<Option<ExitCode>> {
        let Some(scale) = self.cpu_scale else {
            return Ok(None);
        };
        if std::env::var_os(INSIDE_QUOTA).is_some() {
            return Ok(None);
        }
        anyhow::ensure!(
            cfg!(target_os = "linux"),
            "--cpu-scale limits the run's CPU time with a cgroup quota, which needs Linux"
        );
        anyhow::ensure!(
            caseload_lab::host::is_root(),
            "--cpu-scale limits the run's CPU time with a cgroup it makes, which needs root"
        );
        let name = format!("caseload-cpu-{}", std::process::id());
        let (version, cg) = caseload_lab::host::cgroup_create("cpu", &name)
            .context("--cpu-scale needs the cgroup `cpu` controller")?;
        let result = (|| -> anyhow::Result<ExitCode> {
            caseload_lab::host::cpu_quota(version, &cg, scale * cpus as f64)?;
            let exe = std::env::current_exe().context("locating the caseload executable")?;
            let mut cmd = std::process::Command::new(exe);
            cmd.args(std::env::args_os().skip(1)).env(INSIDE_QUOTA, "1");
            caseload_lab::host::join_on_exec(&mut cmd, &[cg.path.join("cgroup.procs")])?;
            eprintln!(
                "caseload: --cpu-scale {scale}: the run may use {:.2} CPU(s) of its {cpus} (cgroup {})",
                scale * cpus as f64,
                cg.path.display()
            );
            let status = cmd
                .status()
                .context("starting the run under its CPU quota")?;
            Ok(match status.code() {
                Some(0) => ExitCode::SUCCESS,
                Some(c) => ExitCode::from(u8::try_from(c).unwrap_or(1)),
                None => ExitCode::FAILURE,
            })
        })();
        // The cgroup goes whatever happened; the child has exited.
        if let Err(e) = caseload_lab::host::cgroup_remove(&cg) {
            eprintln!("caseload: removing {}: {e}", cg.path.display());
        }
        result.map(Some)
    }
}
