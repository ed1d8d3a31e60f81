//! Flags several commands share (flattened into each): the layout and its
//! channel overrides (`run`, `probe`), the KFF library (`run`, `compare`),
//! and how a command line's workload or stage names become a stage list.

use caseload_engine::channel::ChannelKind;
use caseload_engine::layout::Layout;
use caseload_engine::stage::StageOptions;
use caseload_engine::stages;
use std::path::PathBuf;

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
