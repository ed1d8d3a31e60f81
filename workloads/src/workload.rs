//! Workload files.
//!
//! ```toml
//! name = "triage"                 # optional; defaults to the file stem
//! description = "..."             # optional
//! instances = 3                   # optional: concurrent pipelines by default
//! profile = "autopsy"             # optional: the suite profile (docs/profiles.md)
//!
//! [[stage]]
//! name = "file-hash"              # a stage name
//! algorithms = ["md5"]            # that stage's options
//! ```
//!
//! Everything is checked when the file is loaded: an unknown key, an
//! unknown stage, a stage this build does not have, or an option a stage
//! does not take is an error naming the file and line.

use caseload_engine::stage::StageOptions;
use caseload_engine::stages;
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// Workloads built into the binary, by name.
pub const BUILTIN: &[(&str, &str)] = &[
    ("ftk4-default", include_str!("../ftk4-default.toml")),
    ("encase-verify", include_str!("../encase-verify.toml")),
    ("triage", include_str!("../triage.toml")),
    ("full", include_str!("../full.toml")),
    ("autopsy-default", include_str!("../autopsy-default.toml")),
];

/// Errors loading a workload.
#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    /// The file could not be read.
    #[error("cannot read workload `{}`: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// Neither a file nor a built-in workload.
    #[error("no workload file `{0}` and no built-in workload of that name (built in: {1})")]
    NotFound(String, String),
    /// Invalid content, with the position.
    #[error("{origin}:{line}: {message}")]
    Invalid {
        /// File name (or `builtin:NAME`).
        origin: String,
        /// 1-based line.
        line: usize,
        /// What is wrong.
        message: String,
    },
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct WorkloadFile {
    name: Option<String>,
    description: Option<String>,
    instances: Option<usize>,
    profile: Option<String>,
    #[serde(default)]
    stage: Vec<toml::Spanned<toml::Table>>,
}

/// A loaded, checked workload.
#[derive(Debug, Clone, PartialEq)]
pub struct Workload {
    /// Name.
    pub name: String,
    /// Description.
    pub description: Option<String>,
    /// Where it came from (`builtin:NAME` or a path).
    pub origin: String,
    /// Default number of concurrent pipelines.
    pub instances: Option<usize>,
    /// The suite profile its runs use unless `--profile` says otherwise.
    pub profile: Option<caseload_engine::casedb::Profile>,
    /// Stages in order with their options.
    pub stages: Vec<(String, StageOptions)>,
}

fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())]
        .bytes()
        .filter(|&b| b == b'\n')
        .count()
        + 1
}

/// The line of `key = ` in the table starting at `span.start` (up to the
/// next table header), or the table's first line.
fn key_line(text: &str, span: std::ops::Range<usize>, key: &str) -> usize {
    let body = &text[span.start.min(text.len())..];
    let mut offset = 0;
    for (i, l) in body.split_inclusive('\n').enumerate() {
        let t = l.trim_start();
        if i > 0 && t.starts_with('[') {
            break;
        }
        if t.starts_with(key) && t[key.len()..].trim_start().starts_with('=') {
            return line_of(text, span.start + offset);
        }
        offset += l.len();
    }
    line_of(text, span.start)
}

impl Workload {
    /// Load `arg` as a path if such a file exists, else as a built-in name.
    pub fn resolve(arg: &str) -> Result<Workload, WorkloadError> {
        let path = Path::new(arg);
        if path.is_file() {
            return Self::load(path);
        }
        match BUILTIN.iter().find(|(name, _)| *name == arg) {
            Some((name, text)) => Self::parse(text, &format!("builtin:{name}"), name),
            None => Err(WorkloadError::NotFound(
                arg.to_string(),
                BUILTIN
                    .iter()
                    .map(|(n, _)| *n)
                    .collect::<Vec<_>>()
                    .join(", "),
            )),
        }
    }

    /// Load a workload file.
    pub fn load(path: &Path) -> Result<Workload, WorkloadError> {
        let text = std::fs::read_to_string(path).map_err(|source| WorkloadError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let stem = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        Self::parse(&text, &path.display().to_string(), &stem)
    }

    /// Parse and check workload text.
    pub fn parse(text: &str, origin: &str, default_name: &str) -> Result<Workload, WorkloadError> {
        let invalid = |line: usize, message: String| WorkloadError::Invalid {
            origin: origin.to_string(),
            line,
            message,
        };
        let file: WorkloadFile = toml::from_str(text).map_err(|e| {
            let line = e.span().map_or(1, |s| line_of(text, s.start));
            invalid(line, e.message().trim_end().to_string())
        })?;
        if file.stage.is_empty() {
            return Err(invalid(1, "a workload needs at least one [[stage]]".into()));
        }
        let profile = match &file.profile {
            None => None,
            Some(p) => Some(
                p.parse::<caseload_engine::casedb::Profile>()
                    .map_err(|e| invalid(key_line(text, 0..text.len(), "profile"), e))?,
            ),
        };
        if file.instances == Some(0) {
            return Err(invalid(
                key_line(text, 0..text.len(), "instances"),
                "`instances` must be at least 1".into(),
            ));
        }
        let mut out = Vec::new();
        for spanned in file.stage {
            let span = spanned.span();
            let mut table = spanned.into_inner();
            let name = match table.remove("name") {
                Some(toml::Value::String(s)) => s,
                Some(_) => {
                    return Err(invalid(
                        key_line(text, span, "name"),
                        "stage `name` must be a string".into(),
                    ));
                }
                None => {
                    return Err(invalid(
                        line_of(text, span.start),
                        "a [[stage]] needs a `name`".into(),
                    ));
                }
            };
            if let Err(e) = stages::build(&name, &table) {
                let message = e.to_string();
                // Point at the offending option when the message names one.
                let line = message
                    .split('`')
                    .skip(1)
                    .step_by(2)
                    .find(|field| table.contains_key(*field))
                    .map_or_else(
                        || key_line(text, span.clone(), "name"),
                        |field| key_line(text, span.clone(), field),
                    );
                return Err(invalid(line, message));
            }
            out.push((name, table));
        }
        Ok(Workload {
            name: file.name.unwrap_or_else(|| default_name.to_string()),
            description: file.description,
            origin: origin.to_string(),
            instances: file.instances,
            profile,
            stages: out,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_workload_names_its_profile_and_a_bad_one_is_refused_with_its_line() {
        let w = Workload::resolve("autopsy-default").unwrap();
        assert_eq!(w.profile, Some(caseload_engine::casedb::Profile::Autopsy));
        assert_eq!(
            Workload::resolve("ftk4-default").unwrap().profile,
            Some(caseload_engine::casedb::Profile::Ftk4)
        );
        assert_eq!(Workload::resolve("triage").unwrap().profile, None);
        let e = Workload::parse(
            "name = \"t\"\nprofile = \"encase\"\n[[stage]]\nname = \"filesystem\"\n",
            "t.toml",
            "t",
        )
        .unwrap_err();
        assert!(e.to_string().starts_with("t.toml:2:"), "{e}");
        assert!(e.to_string().contains("encase"), "{e}");
    }

    #[test]
    fn workload_files_parse_with_stage_options() {
        let w = Workload::parse(
            "name = \"t\"\n[[stage]]\nname = \"image-hash\"\nalgorithms = [\"md5\"]\n[[stage]]\nname = \"filesystem\"\n",
            "t.toml",
            "t",
        )
        .unwrap();
        assert_eq!(w.stages.len(), 2);
        assert_eq!(w.stages[0].0, "image-hash");
        assert!(w.stages[0].1.contains_key("algorithms"));
        assert!(!w.stages[0].1.contains_key("name"));
    }

    #[test]
    fn errors_name_the_file_and_line() {
        let err = Workload::parse(
            "[[stage]]\nname = \"image-hash\"\n\n[[stage]]\nname = \"no-such-stage\"\n",
            "w.toml",
            "w",
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.starts_with("w.toml:5:") && err.contains("unknown stage"),
            "{err}"
        );
        let err = Workload::parse(
            "[[stage]]\nname = \"image-hash\"\nalgoritms = [\"md5\"]\n",
            "w.toml",
            "w",
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.starts_with("w.toml:3:") && err.contains("algoritms"),
            "{err}"
        );
        let err = Workload::parse(
            "nmae = \"x\"\n[[stage]]\nname = \"image-hash\"\n",
            "w.toml",
            "w",
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.starts_with("w.toml:1:") && err.contains("nmae"),
            "{err}"
        );
        let err = Workload::parse("name = \"x\"\n", "w.toml", "w")
            .unwrap_err()
            .to_string();
        assert!(err.contains("at least one"), "{err}");
    }

    #[test]
    fn the_built_in_workloads_build_in_their_order() {
        for (name, _) in BUILTIN {
            let w = Workload::resolve(name).unwrap();
            for (stage, _) in &w.stages {
                assert!(
                    stages::REGISTRY.iter().any(|s| s.name == stage),
                    "{name}: {stage}"
                );
            }
            caseload_engine::run::build_stages(&w.stages).unwrap();
        }
    }
}
