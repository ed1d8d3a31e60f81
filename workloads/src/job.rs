//! A run fully described, fio style: everything a `caseload run` child
//! process is told, and the one place that turns it into a command line.
//! `run --instances` (one child per instance) and `compare` (one child per
//! run of the matrix) both describe their children with a [`JobSpec`].

use caseload_engine::cache::CacheMode;
use caseload_engine::casedb::DbOptions;
use std::ffi::OsString;
use std::path::PathBuf;

/// Which stages a job runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobStages {
    /// The run's default stages.
    Default,
    /// A workload: a file path or a built-in name.
    Workload(String),
    /// Stages by name, in order.
    Stages(Vec<String>),
}

/// The modelled workstation's flags of a run (`--ram`, `--scale-from`,
/// `--cpus`, `--cpu-scale`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WorkstationFlags {
    /// Its memory, bytes.
    pub ram: Option<u64>,
    /// The size of the evidence being modelled, bytes.
    pub scale_from: Option<u64>,
    /// CPUs the run may use.
    pub cpus: Option<usize>,
    /// Its processor's speed as a share of the run's CPUs.
    pub cpu_scale: Option<f64>,
}

impl WorkstationFlags {
    /// The flags on a command line.
    pub fn command_line(&self) -> Vec<OsString> {
        let mut a: Vec<OsString> = Vec::new();
        if let Some(r) = self.ram {
            // In bytes: `B` keeps the memory parser from reading it as
            // anything but bytes.
            a.extend(["--ram".into(), format!("{r}B").into()]);
        }
        if let Some(s) = self.scale_from {
            a.extend(["--scale-from".into(), s.to_string().into()]);
        }
        if let Some(c) = self.cpus {
            a.extend(["--cpus".into(), c.to_string().into()]);
        }
        if let Some(f) = self.cpu_scale {
            a.extend(["--cpu-scale".into(), f.to_string().into()]);
        }
        a
    }
}

/// One `caseload run`.
#[derive(Debug, Clone, PartialEq)]
pub struct JobSpec {
    /// Evidence (first file of a set).
    pub evidence: PathBuf,
    /// A layout file or preset name.
    pub layout: Option<String>,
    /// Database channel directory (overrides the layout's).
    pub database: Option<PathBuf>,
    /// Case channel directory.
    pub case: Option<PathBuf>,
    /// Temp channel directory.
    pub temp: Option<PathBuf>,
    /// The stages.
    pub stages: JobStages,
    /// `STAGE.KEY=VALUE` options.
    pub stage_options: Vec<String>,
    /// Worker threads (`None`: every core).
    pub threads: Option<usize>,
    /// Page-cache policy.
    pub cache: CacheMode,
    /// Concurrent pipelines (`None`: the workload's, else 1).
    pub instances: Option<usize>,
    /// This job is instance K of an `--instances` run.
    pub instance: Option<usize>,
    /// Case database options.
    pub db: DbOptions,
    /// Replace a case already in the directories.
    pub force: bool,
    /// Print run.json (or instances.json) to stdout.
    pub json: bool,
    /// Largest evidence read for small requests (`None`: the run's default).
    pub read_run: Option<u64>,
    /// Record every channel operation (`--trace`).
    pub trace: bool,
    /// Run on the modelled devices of this lab (`--lab`, `caseload lab`).
    pub lab: Option<String>,
    /// The modelled workstation's memory and processors.
    pub workstation: WorkstationFlags,
}

impl JobSpec {
    /// A job on `evidence` with everything else at its default.
    pub fn new(evidence: PathBuf) -> Self {
        JobSpec {
            evidence,
            layout: None,
            database: None,
            case: None,
            temp: None,
            stages: JobStages::Default,
            stage_options: Vec::new(),
            threads: None,
            cache: CacheMode::Cold,
            instances: None,
            instance: None,
            db: DbOptions::default(),
            force: false,
            json: false,
            read_run: None,
            trace: false,
            lab: None,
            workstation: WorkstationFlags::default(),
        }
    }

    /// The arguments of `caseload` (after the program name) that run this
    /// job: `run`, or `replay` for a trace workload (`trace:FILE`).
    pub fn command_line(&self) -> Vec<OsString> {
        if let JobStages::Workload(w) = &self.stages
            && let Some(trace) = trace_workload(w)
        {
            return self.replay_command_line(trace);
        }
        let mut a: Vec<OsString> = vec!["run".into(), "--evidence".into()];
        a.push(self.evidence.clone().into());
        // A lab brings its own layout.
        match (&self.lab, &self.layout) {
            (Some(l), _) => a.extend(["--lab".into(), l.into()]),
            (None, Some(l)) => a.extend(["--layout".into(), l.into()]),
            (None, None) => {}
        }
        for (flag, dir) in [
            ("--database", &self.database),
            ("--case", &self.case),
            ("--temp", &self.temp),
        ] {
            if let Some(d) = dir {
                a.push(flag.into());
                a.push(d.clone().into());
            }
        }
        match &self.stages {
            JobStages::Default => {}
            JobStages::Workload(w) => a.extend(["--workload".into(), w.into()]),
            JobStages::Stages(s) => a.extend(["--stages".into(), s.join(",").into()]),
        }
        for o in &self.stage_options {
            a.extend(["--stage-option".into(), o.into()]);
        }
        if let Some(t) = self.threads {
            a.extend(["--threads".into(), t.to_string().into()]);
        }
        a.extend(["--cache".into(), self.cache.as_str().into()]);
        if let Some(n) = self.instances {
            a.extend(["--instances".into(), n.to_string().into()]);
        }
        if let Some(k) = self.instance {
            a.extend(["--instance".into(), k.to_string().into()]);
        }
        if let Some(r) = self.read_run {
            a.extend(["--read-run".into(), r.to_string().into()]);
        }
        a.extend(self.db.command_line().into_iter().map(OsString::from));
        a.extend(self.workstation.command_line());
        if self.trace {
            a.push("--trace".into());
        }
        if self.force {
            a.push("--force".into());
        }
        if self.json {
            a.push("--json".into());
        }
        a
    }
}

impl JobSpec {
    /// A trace workload's job: the trace replayed on the job's layout or
    /// lab, its evidence standing for the trace's. Stage options, threads,
    /// instances and database options are a run's and do not apply.
    fn replay_command_line(&self, trace: &str) -> Vec<OsString> {
        let mut a: Vec<OsString> = vec!["replay".into(), trace.into(), "--evidence".into()];
        a.push(self.evidence.clone().into());
        match (&self.lab, &self.layout) {
            (Some(l), _) => a.extend(["--lab".into(), l.into()]),
            (None, Some(l)) => a.extend(["--layout".into(), l.into()]),
            (None, None) => {}
        }
        for (flag, dir) in [
            ("--database", &self.database),
            ("--case", &self.case),
            ("--temp", &self.temp),
        ] {
            if let Some(d) = dir {
                a.push(flag.into());
                a.push(d.clone().into());
            }
        }
        a.extend(["--cache".into(), self.cache.as_str().into()]);
        let w = WorkstationFlags {
            cpu_scale: None,
            ..self.workstation.clone()
        };
        a.extend(w.command_line());
        if self.force {
            a.push("--force".into());
        }
        if self.json {
            a.push("--json".into());
        }
        a
    }
}

/// The trace of a trace workload (`trace:FILE`), if `workload` is one.
pub fn trace_workload(workload: &str) -> Option<&str> {
    workload.strip_prefix("trace:").filter(|t| !t.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_becomes_the_command_line_that_runs_it() {
        let mut job = JobSpec::new("/ev/a.E01".into());
        job.layout = Some("three-channel".into());
        job.case = Some("/c".into());
        job.stages = JobStages::Stages(vec!["filesystem".into(), "file-hash".into()]);
        job.stage_options = vec!["file-hash.entropy=false".into()];
        job.instance = Some(2);
        job.json = true;
        job.workstation.ram = Some(32 << 30);
        job.workstation.scale_from = Some(240_000_000_000);
        let args: Vec<String> = job
            .command_line()
            .into_iter()
            .map(|a| a.into_string().unwrap())
            .collect();
        let line = args.join(" ");
        assert!(line.starts_with("run --evidence /ev/a.E01 --layout three-channel --case /c --stages filesystem,file-hash"), "{line}");
        assert!(line.contains("--stage-option file-hash.entropy=false"));
        assert!(line.contains("--cache cold --instance 2 --db-engine sqlite"));
        assert!(line.ends_with("--json"));
        assert!(
            line.contains("--ram 34359738368B --scale-from 240000000000"),
            "{line}"
        );
        assert!(!line.contains("--database") && !line.contains("--force"));
    }

    #[test]
    fn a_trace_workload_is_replayed() {
        let mut job = JobSpec::new("/ev/a.dd".into());
        job.lab = Some("ftk4-base".into());
        job.case = Some("/c".into());
        job.stages = JobStages::Workload("trace:/t/ftk.trace".into());
        job.threads = Some(4);
        job.json = true;
        job.workstation.ram = Some(32 << 30);
        job.workstation.cpu_scale = Some(0.5);
        let line: Vec<String> = job
            .command_line()
            .into_iter()
            .map(|a| a.into_string().unwrap())
            .collect();
        assert_eq!(
            line.join(" "),
            "replay /t/ftk.trace --evidence /ev/a.dd --lab ftk4-base --case /c --cache cold --ram 34359738368B --json"
        );
    }
}
