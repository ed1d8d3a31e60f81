//! The stages, and the one list that names them.
//!
//! Adding a stage: write its module (implementing [`Stage`], with its
//! `SPEC`) and add one line to [`REGISTRY`]. Nothing else changes: the
//! command line, workloads, order checks and the default stage list all
//! read the registry.

pub mod carve;
mod file_hash;
mod filesystem;
mod image_hash;
pub mod index;
mod kff;

use crate::stage::{Stage, StageError, StageOptions, Units};

/// Whether a run that names no stages includes a stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Inclusion {
    /// Always.
    Always,
    /// Only when something configures it (a stage option, or for `kff`
    /// a hash library): without that it has nothing to work with, and a
    /// default run should not fail for an option nobody had to think of.
    WhenConfigured,
}

/// A stage's [`StageSpec::preflight`] check: its options and the database
/// channel's directory; an error says what is missing.
pub type Preflight = fn(&StageOptions, &std::path::Path) -> Result<(), String>;

/// How to build a stage from its options.
pub struct StageSpec {
    /// Stable stage name.
    pub name: &'static str,
    /// One line for `--help` and reports.
    pub about: &'static str,
    /// Build the stage from its options.
    pub build: fn(&StageOptions) -> Result<Box<dyn Stage>, StageError>,
    /// What must run before it in the same run, and why: each entry is a
    /// set of stages any one of which will do (it reads what they write).
    pub needs: &'static [(&'static [&'static str], &'static str)],
    /// Whether the default stage list has it.
    pub default: Inclusion,
    /// Checks that need no evidence, made before a comparison starts a
    /// matrix of runs that could only fail (a hash library that is not
    /// there): given its options and the database channel's directory.
    pub preflight: Option<Preflight>,
    /// How `caseload plan` divides it into work units.
    pub units: Units,
}

/// Every stage this build has, in pipeline order.
pub const REGISTRY: &[StageSpec] = &[
    image_hash::SPEC,
    filesystem::SPEC,
    file_hash::SPEC,
    index::SPEC,
    carve::SPEC,
    kff::SPEC,
];

/// Build a stage by name, refusing unknown names (rather than skipping
/// them silently).
pub fn build(name: &str, options: &StageOptions) -> Result<Box<dyn Stage>, StageError> {
    match REGISTRY.iter().find(|s| s.name == name) {
        Some(spec) => (spec.build)(options),
        None => Err(StageError::Config {
            stage: name.to_string(),
            message: format!("unknown stage `{name}` (available: {})", available()),
        }),
    }
}

/// The stages of a run that names none: every registered stage in
/// pipeline order, those included only when configured only if
/// `configured(name)` says so.
pub fn default_list(configured: &dyn Fn(&str) -> bool) -> Vec<(String, StageOptions)> {
    REGISTRY
        .iter()
        .filter(|s| s.default == Inclusion::Always || configured(s.name))
        .map(|s| (s.name.to_string(), StageOptions::new()))
        .collect()
}

/// Run each stage's [`StageSpec::preflight`] check for a run whose
/// database channel is `database_dir`.
pub fn preflight(
    specs: &[(String, StageOptions)],
    database_dir: &std::path::Path,
) -> Result<(), StageError> {
    for (name, options) in specs {
        if let Some(check) = REGISTRY
            .iter()
            .find(|s| s.name == name)
            .and_then(|s| s.preflight)
        {
            check(options, database_dir).map_err(|message| StageError::Config {
                stage: name.clone(),
                message,
            })?;
        }
    }
    Ok(())
}

/// Stages by name, without options.
pub fn named_list(names: &[String]) -> Vec<(String, StageOptions)> {
    names
        .iter()
        .map(|n| (n.trim().to_string(), StageOptions::new()))
        .collect()
}

/// Refuse a stage list in which a stage runs without what it needs before
/// it (a run starts a new case, so nothing else could have written it).
pub fn check_order(names: &[&str]) -> Result<(), StageError> {
    for (i, name) in names.iter().enumerate() {
        let Some(spec) = REGISTRY.iter().find(|s| s.name == *name) else {
            continue;
        };
        for (any_of, why) in spec.needs {
            if !names[..i].iter().any(|n| any_of.contains(n)) {
                let wanted = any_of
                    .iter()
                    .map(|n| format!("`{n}`"))
                    .collect::<Vec<_>>()
                    .join(" or ");
                return Err(StageError::Config {
                    stage: name.to_string(),
                    message: format!("needs {wanted} earlier in the stage list: {why}"),
                });
            }
        }
    }
    Ok(())
}

/// How a stage divides into work units ([`Units::Whole`] for a name this
/// build does not have).
pub fn units_of(name: &str) -> Units {
    REGISTRY
        .iter()
        .find(|s| s.name == name)
        .map_or(Units::Whole, |s| s.units)
}

/// Whether a stage runs beside the others in a planned case instead of
/// after the earlier ones: it reads nothing another stage writes (no
/// [`StageSpec::needs`]) and no stage reads what it writes (image-hash).
pub fn runs_beside(name: &str) -> bool {
    let needed = REGISTRY
        .iter()
        .any(|s| s.needs.iter().any(|(any_of, _)| any_of.contains(&name)));
    let needs = REGISTRY
        .iter()
        .find(|s| s.name == name)
        .is_none_or(|s| !s.needs.is_empty());
    !needed && !needs
}

/// Names of the stages this build has, comma-separated.
pub fn available() -> String {
    REGISTRY
        .iter()
        .map(|s| s.name)
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::{Path, PathBuf};

    /// The stage modules: each top-level file or directory under `stages/`.
    const STAGE_MODULES: &[&str] = &[
        "carve",
        "file_hash",
        "filesystem",
        "image_hash",
        "index",
        "kff",
    ];

    use crate::noise::{product_code, rust_sources};

    fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
        out.extend(rust_sources(dir));
    }

    fn src() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
    }

    #[test]
    fn no_stage_reaches_into_another() {
        let root = src().join("stages");
        let mut bad = Vec::new();
        for module in STAGE_MODULES {
            let mut files = Vec::new();
            let dir = root.join(module);
            if dir.is_dir() {
                sources(&dir, &mut files);
            } else {
                files.push(root.join(format!("{module}.rs")));
            }
            for f in &files {
                let code = product_code(f);
                for other in STAGE_MODULES.iter().filter(|o| *o != module) {
                    // A top-level stage file names siblings as `super::x`;
                    // files inside a stage directory as `super::super::x`;
                    // anyone as `crate::stages::x`.
                    let nested = f.parent() != Some(root.as_path());
                    let sibling = if nested {
                        format!("super::super::{other}")
                    } else {
                        format!("super::{other}")
                    };
                    for pat in [sibling, format!("crate::stages::{other}")] {
                        if code.contains(&pat) {
                            bad.push(format!("{} uses {pat}", f.display()));
                        }
                    }
                }
            }
        }
        for f in ["search.rs", "export.rs"] {
            if product_code(&src().join(f)).contains("crate::stages") {
                bad.push(format!("{f} reaches into a stage"));
            }
        }
        assert!(bad.is_empty(), "{bad:#?}");
    }

    #[test]
    fn stages_export_search_and_kff_write_no_sql() {
        let mut files = Vec::new();
        sources(&src().join("stages"), &mut files);
        files.push(src().join("search.rs"));
        files.push(src().join("export.rs"));
        files.push(src().join("stage.rs"));
        files.push(src().join("run.rs"));
        let sql = regex::Regex::new(
            r"(?i)\b(SELECT\s+\S.*\bFROM|INSERT\s+INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM|CREATE\s+(TEMP\s+)?(TABLE|INDEX))\b|rusqlite",
        )
        .unwrap();
        let mut bad = Vec::new();
        for f in &files {
            for (n, line) in product_code(f).lines().enumerate() {
                let code = line.trim_start();
                if code.starts_with("//") {
                    continue;
                }
                if sql.is_match(line) {
                    bad.push(format!("{}:{}: {}", f.display(), n + 1, line.trim()));
                }
            }
        }
        assert!(bad.is_empty(), "SQL outside casedb:\n{}", bad.join("\n"));
    }

    #[test]
    fn every_stage_is_documented() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
        let run_json = std::fs::read_to_string(root.join("docs/run-json.md")).unwrap();
        for s in REGISTRY {
            assert!(
                readme.contains(&format!("`{}`", s.name)),
                "README.md does not name stage `{}`",
                s.name
            );
            assert!(
                run_json.contains(&format!("### `{}`", s.name)),
                "docs/run-json.md has no details section for stage `{}`",
                s.name
            );
            assert!(!s.about.is_empty());
        }
    }

    #[test]
    fn a_stage_without_what_it_needs_is_refused() {
        assert!(check_order(&["filesystem", "file-hash", "index", "carve", "kff"]).is_ok());
        assert!(check_order(&["carve", "kff"]).is_ok());
        assert!(check_order(&["image-hash", "carve"]).is_ok());
        let e = check_order(&["file-hash", "filesystem"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("needs `filesystem` earlier"), "{e}");
        let e = check_order(&["filesystem", "kff"]).unwrap_err().to_string();
        assert!(e.contains("`file-hash` or `carve`"), "{e}");
        assert!(check_order(&["index"]).is_err());
    }
}
