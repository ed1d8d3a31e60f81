//! `caseload run --instances N`: N pipelines at once on the same evidence,
//! each a child `caseload run` (so each instance's CPU, memory and I/O
//! figures are its own) into its own `instance-K` directories, started
//! together; their reports gathered into `instances.json`.

use crate::job::JobSpec;
use caseload_engine::cache::{self, CacheMode};
use caseload_engine::report::{
    INSTANCES_SCHEMA, InstancesReport, RUN_SCHEMA_VERSION, RunReport, aggregate,
};
use std::path::{Path, PathBuf};

/// Name of the instances report in the case directory.
pub const INSTANCES_JSON: &str = "instances.json";

/// Errors that keep the instances from starting or their report from being
/// written (an instance that fails is recorded in the report instead).
#[derive(Debug, thiserror::Error)]
pub enum InstancesError {
    /// The job cannot be run as instances.
    #[error("{0}")]
    Invalid(String),
    /// A directory or the report could not be written.
    #[error("{what} `{}`: {source}", path.display())]
    Io {
        /// What was being done.
        what: &'static str,
        /// Where.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// An instance could not be started.
    #[error("starting instance {instance} (`{}`): {source}", exe.display())]
    Spawn {
        /// Which.
        instance: usize,
        /// The executable.
        exe: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

/// Run `n` instances of `job` (whose channel directories must be given)
/// from executable `exe`. A cold cache is made once, before they start (an
/// instance dropping caches mid-run would disturb the others); the
/// instances then run warm. Returns the report, also written to
/// `instances.json` in the case directory.
pub fn run_instances(
    exe: &Path,
    job: &JobSpec,
    n: usize,
) -> Result<(InstancesReport, PathBuf), InstancesError> {
    let (Some(db), Some(case), Some(temp)) = (&job.database, &job.case, &job.temp) else {
        return Err(InstancesError::Invalid(
            "--instances needs the database, case and temp directories".into(),
        ));
    };
    if job.db.postgres.url.is_some() {
        return Err(InstancesError::Invalid(
            "--instances with --db-url would put every instance's case in one database; give each instance a private cluster (--db-engine postgres without --db-url)".into(),
        ));
    }
    let report_path = case.join(INSTANCES_JSON);
    if !job.force && report_path.exists() {
        return Err(InstancesError::Invalid(format!(
            "`{}` already holds an instances run; use --force to replace it",
            case.display()
        )));
    }
    let mut jobs = Vec::with_capacity(n);
    for k in 0..n {
        let dir = |d: &PathBuf| -> Result<PathBuf, InstancesError> {
            let p = d.join(format!("instance-{k}"));
            std::fs::create_dir_all(&p).map_err(|source| InstancesError::Io {
                what: "creating",
                path: p.clone(),
                source,
            })?;
            Ok(p)
        };
        let mut child = job.clone();
        child.database = Some(dir(db)?);
        child.case = Some(dir(case)?);
        child.temp = Some(dir(temp)?);
        child.cache = CacheMode::Warm;
        child.json = true;
        child.instances = Some(1);
        child.instance = Some(k);
        jobs.push(child);
    }
    let cache = match job.cache {
        CacheMode::Cold => {
            let evidence =
                std::fs::canonicalize(&job.evidence).unwrap_or_else(|_| job.evidence.clone());
            cache::make_cold(&[evidence], &[db.clone(), case.clone(), temp.clone()])
        }
        CacheMode::Warm => cache::warm(),
    };
    let started = std::time::Instant::now();
    let mut children = Vec::new();
    for (k, child) in jobs.iter().enumerate() {
        let spawned = std::process::Command::new(exe)
            .args(child.command_line())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .map_err(|source| InstancesError::Spawn {
                instance: k,
                exe: exe.to_path_buf(),
                source,
            })?;
        children.push((k, spawned));
    }
    let mut runs = Vec::new();
    let mut failures = Vec::new();
    for (k, child) in children {
        match child.wait_with_output() {
            Ok(out) => match serde_json::from_slice::<RunReport>(&out.stdout) {
                Ok(r) => runs.push(r),
                Err(e) => failures.push(format!("instance {k}: no report ({}; {e})", out.status)),
            },
            Err(e) => failures.push(format!("instance {k}: {e}")),
        }
    }
    let report = InstancesReport {
        schema: INSTANCES_SCHEMA.into(),
        schema_version: RUN_SCHEMA_VERSION,
        instances: n,
        wall_seconds: started.elapsed().as_secs_f64(),
        cache,
        aggregate: aggregate(&runs),
        runs,
        failures,
    };
    let io = |what, path: &Path| {
        let path = path.to_path_buf();
        move |source| InstancesError::Io { what, path, source }
    };
    let tmp = case.join(format!("{INSTANCES_JSON}.partial"));
    let json = serde_json::to_vec_pretty(&report).map_err(|e| InstancesError::Io {
        what: "encoding",
        path: tmp.clone(),
        source: std::io::Error::other(e),
    })?;
    std::fs::write(&tmp, json).map_err(io("writing", &tmp))?;
    std::fs::rename(&tmp, &report_path).map_err(io("writing", &report_path))?;
    Ok((report, report_path))
}
