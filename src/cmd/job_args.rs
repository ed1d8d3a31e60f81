//! Flags several commands share (flattened into each): what a case runs
//! and on what (`JobArgs`: `run`, `compare`, `study`, `plan`, `cluster`),
//! the layout and its channel overrides (`run`, `probe`, `plan`,
//! `worker`), and how a command line's workload or stage names become a
//! stage list.

use caseload_engine::channel::ChannelKind;
use caseload_engine::layout::Layout;
use caseload_engine::stage::StageOptions;
use caseload_engine::stages;
use std::path::PathBuf;

/// What a case runs and where its database and hash library are: the
/// workload or stages with their options, the case database, the KFF
/// library and sets, and the check before the first run. One struct for
/// the commands that start cases (`run`, `compare`, `study`, `plan`,
/// `cluster`), so a flag means the same in each.
#[derive(Debug, Clone, clap::Args)]
pub struct JobArgs {
    /// Workload: a workload file, or the name of a built-in one
    /// (ftk4-default, encase-verify, triage, full, autopsy-default).
    #[arg(long, conflicts_with = "stages")]
    pub workload: Option<String>,
    /// Stages to run instead of a workload, in order (default: every
    /// stage this build has; `kff` only with --hashset, --kff-library or a
    /// kff stage option).
    #[arg(long, value_delimiter = ',')]
    pub stages: Vec<String>,
    /// A stage option, `STAGE.KEY=VALUE` (VALUE in TOML syntax, or a bare
    /// string), e.g. `image-hash.algorithms=["md5","sha256"]`. Repeatable.
    #[arg(long = "stage-option", value_name = "STAGE.KEY=VALUE")]
    pub stage_options: Vec<String>,
    /// The case database.
    #[command(flatten)]
    pub db: super::db_args::DbArgs,
    /// The KFF stage's hash library and sets.
    #[command(flatten)]
    pub kff: KffArgs,
    /// The check before the first run.
    #[command(flatten)]
    pub preflight: PreflightArgs,
}

impl JobArgs {
    /// The stages these flags name.
    pub fn resolve(&self) -> anyhow::Result<ResolvedStages> {
        resolve_stages(
            self.workload.as_deref(),
            &self.stages,
            &self.kff,
            &self.stage_options,
        )
    }
}

/// A layout and per-channel overrides.
#[derive(Debug, Clone, clap::Args)]
pub struct LayoutArgs {
    /// Layout: a layout file, or a preset (five-channel, three-channel,
    /// single-disk).
    #[arg(long, conflicts_with = "lab")]
    pub layout: Option<String>,
    /// Run inside a lab (`caseload lab up`): its layout, on its modelled
    /// devices, in its cgroups.
    #[arg(long)]
    pub lab: Option<String>,
    /// Override the layout's database channel directory.
    #[arg(long, value_name = "DIR")]
    pub database: Option<PathBuf>,
    /// Override the layout's case channel directory.
    #[arg(long, value_name = "DIR")]
    pub case: Option<PathBuf>,
    /// Override the layout's temp channel directory.
    #[arg(long, value_name = "DIR")]
    pub temp: Option<PathBuf>,
}

impl LayoutArgs {
    /// The layout these flags describe.
    pub fn layout(&self) -> anyhow::Result<Layout> {
        let from_lab = match &self.lab {
            Some(name) => Some(super::lab::layout_of(name)?.to_string_lossy().into_owned()),
            None => None,
        };
        let mut layout = match from_lab.as_ref().or(self.layout.as_ref()) {
            Some(arg) => caseload_workloads::layouts::resolve(arg)?,
            None => Layout {
                name: "command-line".into(),
                ..Layout::default()
            },
        };
        for (kind, dir) in [
            (ChannelKind::Database, &self.database),
            (ChannelKind::Case, &self.case),
            (ChannelKind::Temp, &self.temp),
        ] {
            if let Some(d) = dir {
                layout.set(kind, d.clone());
            }
        }
        Ok(layout)
    }
}

/// The KFF flags `run` and `compare` share.
#[derive(Debug, Clone, clap::Args)]
pub struct KffArgs {
    /// Import a hash set into the KFF library before the stages run,
    /// `known=FILE` or `notable=FILE` (set name = file stem; files sharing a
    /// stem make one set; a set already imported from the same files is
    /// reused). Repeatable.
    #[arg(long = "hashset", value_name = "CATEGORY=FILE")]
    pub hashsets: Vec<String>,
    /// KFF hash library (default: kff.sqlite in the database directory).
    #[arg(long, value_name = "PATH")]
    pub kff_library: Option<PathBuf>,
}

impl KffArgs {
    /// Whether these flags, or a `kff.` stage option, give the kff stage a
    /// library (so a default stage list includes it).
    pub fn configures_kff(&self, stage_options: &[String]) -> bool {
        !self.hashsets.is_empty()
            || self.kff_library.is_some()
            || stage_options.iter().any(|o| o.starts_with("kff."))
    }
}

/// A run's stages with their options, and what its workload (if any)
/// says besides: its name, instance count and suite profile.
pub struct ResolvedStages {
    /// The stages in order, with their options.
    pub stages: Vec<(String, StageOptions)>,
    /// The workload's name.
    pub workload: Option<String>,
    /// The workload's default number of instances.
    pub instances: Option<usize>,
    /// The workload's suite profile.
    pub profile: Option<caseload_engine::casedb::Profile>,
}

/// The stages of a run: a workload's, the named stages, or the default
/// list.
pub fn resolve_stages(
    workload: Option<&str>,
    names: &[String],
    kff: &KffArgs,
    stage_options: &[String],
) -> anyhow::Result<ResolvedStages> {
    let stages_only = |stages| ResolvedStages {
        stages,
        workload: None,
        instances: None,
        profile: None,
    };
    Ok(match workload {
        Some(w) => {
            let w = caseload_workloads::Workload::resolve(w)?;
            ResolvedStages {
                stages: w.stages,
                workload: Some(w.name),
                instances: w.instances,
                profile: w.profile,
            }
        }
        None if names.is_empty() => {
            let configured = kff.configures_kff(stage_options);
            stages_only(stages::default_list(&|name| name == "kff" && configured))
        }
        None => stages_only(stages::named_list(names)),
    })
}

/// The flags of the check made before a command's first run.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct PreflightArgs {
    /// Start even where a channel looks too small for the workload's
    /// expected writes (the estimate is a floor from the default corpus;
    /// a run that is meant to fill its channel, as a fault test, needs
    /// this). The other checks still hold.
    #[arg(long)]
    pub no_room_check: bool,
}

/// What a command's runs will be given, for [`preflight`].
pub struct Planned<'a> {
    /// The layouts (each run's directories), with their channel
    /// directories' checks; a lab not yet up is checked by its devices.
    pub layouts: &'a [Layout],
    /// Labs that are not up yet (a study), checked by device size.
    pub labs: &'a [caseload_lab::LabSpec],
    /// Evidence files.
    pub evidence: &'a [PathBuf],
    /// The stages, with their options.
    pub stages: &'a [(String, StageOptions)],
    /// The flags: the KFF library and sets, and whether the channels'
    /// room is checked (not with --no-room-check).
    pub job: &'a JobArgs,
    /// The case database.
    pub db: &'a caseload_engine::casedb::DbOptions,
    /// Runs whose directories are kept side by side (compare
    /// --keep-runs); 1 when each run's directories go before the next.
    pub copies: u64,
}

/// Check, before the first run, what every run needs (caseload_engine::
/// preflight): room on every channel for the workload's expected writes,
/// the database server's account, PostgreSQL's binaries, the hash sets
/// and library; refuse once, listing every problem with `extra` (the
/// command's own: root, labs, namespaces).
pub fn preflight(
    p: &Planned<'_>,
    mut extra: caseload_engine::preflight::Problems,
) -> anyhow::Result<()> {
    use caseload_engine::preflight::{check_files, check_room, check_server, expected_space};
    let kff = &p.job.kff;
    let room_check = !p.job.preflight.no_room_check;
    // The hash sets named, and a library given alone, exist.
    let mut files = Vec::new();
    for h in &kff.hashsets {
        if let Some((_, f)) = h.split_once('=') {
            files.push(PathBuf::from(f));
        }
    }
    check_files(&files, "--hashset", &mut extra);
    if kff.hashsets.is_empty()
        && let Some(lib) = &kff.kff_library
        && !lib.is_dir()
    {
        check_files(std::slice::from_ref(lib), "--kff-library", &mut extra);
    }
    // The largest evidence decides (runs come one after another).
    let mut media = 0u64;
    let mut evidence_bytes = 0u64;
    for e in p.evidence {
        let dir = e.parent().unwrap_or(std::path::Path::new("."));
        let channel =
            caseload_engine::channel::Channel::new(ChannelKind::Evidence, dir, Vec::new());
        match caseload_engine::source::open_evidence(e, &channel, Default::default()) {
            Ok(s) => {
                media = media.max(s.size());
                evidence_bytes += s.info().container_bytes;
            }
            Err(err) => extra.push(format!("evidence `{}`: {err}", e.display())),
        }
    }
    let names: Vec<&str> = p.stages.iter().map(|(n, _)| n.as_str()).collect();
    // The library as a SQLite file: the one there, else about half the
    // hash-set files (80 MB for 170 MB of NSRL and MD5 lists).
    let library = |layout: Option<&Layout>| -> Option<u64> {
        let dir = layout.and_then(|l| l.dir(ChannelKind::Database).ok());
        let path =
            dir.map(|d| caseload_engine::hashset::library_path(kff.kff_library.as_deref(), d));
        let existing = path
            .and_then(|f| std::fs::metadata(f).ok())
            .map(|m| m.len());
        let sets: u64 = files
            .iter()
            .filter_map(|f| std::fs::metadata(f).ok())
            .map(|m| m.len() / 2)
            .sum();
        existing.map(|e| e + sets).or((sets > 0).then_some(sets))
    };
    for layout in p.layouts {
        let estimates = expected_space(&names, p.db, media, library(Some(layout)));
        let dirs: std::collections::BTreeMap<ChannelKind, PathBuf> =
            [ChannelKind::Database, ChannelKind::Case, ChannelKind::Temp]
                .into_iter()
                .filter_map(|k| Some((k, layout.dir(k).ok()?.to_path_buf())))
                .collect();
        for (k, d) in &dirs {
            if !d.is_dir() {
                extra.push(format!("{k} channel `{}`: not a directory", d.display()));
            }
        }
        if room_check {
            check_room(&dirs, &estimates, p.copies, &mut extra);
        }
        check_server(p.db, &dirs, &mut extra);
    }
    for lab in p.labs {
        let estimates = expected_space(&names, p.db, media, library(None));
        // Per device: what its channels need, and the evidence on its
        // evidence device; a file system keeps about 5% for itself.
        let mut need: std::collections::BTreeMap<&str, u64> = Default::default();
        for e in &estimates {
            if let Some(dev) = lab.channels.get(e.channel.name()) {
                *need.entry(dev.as_str()).or_default() += e.bytes;
            }
        }
        if let Some(dev) = lab.channels.get("evidence") {
            *need.entry(dev.as_str()).or_default() += evidence_bytes;
        }
        for (dev, bytes) in need {
            let size = lab.devices.get(dev).map_or(0, |d| d.size);
            if room_check && bytes > size / 20 * 19 {
                extra.push(format!(
                    "lab `{}`: device `{dev}` ({} MiB) is too small: the evidence and the workload are expected to need about {} MiB of it",
                    lab.name,
                    size >> 20,
                    bytes >> 20
                ));
            }
        }
        // The lab's directories do not exist yet: the engine, the
        // profile and the server's binaries only.
        check_server(p.db, &Default::default(), &mut extra);
    }
    anyhow::ensure!(extra.is_empty(), "{extra}");
    Ok(())
}
