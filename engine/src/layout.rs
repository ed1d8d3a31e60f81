//! Storage layouts: which directory (hence which device) each channel uses.
//!
//! A layout file is small TOML:
//!
//! ```toml
//! name = "three-channel"            # optional
//! description = "..."               # optional
//! [channels]
//! evidence = "/mnt/evidence"
//! database = "/mnt/nvme/caseload-db"
//! case     = "/mnt/raid5/cases"
//! temp     = "/tmp/caseload"
//! ```
//!
//! Paths may use `${VAR}` or `${VAR:-default}` so that presets can be
//! pointed at a machine's mounts without editing; relative paths are taken
//! relative to the layout file's directory. The `evidence` entry is where the
//! evidence lives (used to describe the device); the evidence files
//! themselves are given to `run`. The writable channels must already exist:
//! a typo must not silently create a directory on the system disk and skew a
//! benchmark.

use crate::channel::ChannelKind;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Errors loading or checking a layout.
#[derive(Debug, thiserror::Error)]
pub enum LayoutError {
    /// The file could not be read.
    #[error("cannot read layout `{}`: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The file is not valid layout TOML.
    #[error("layout `{}`: {message}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// Parser message, with line and column.
        message: String,
    },
    /// Neither a layout file nor a preset name.
    #[error("no layout file `{arg}` and no preset of that name (presets: {presets})")]
    NotFound {
        /// What was given.
        arg: String,
        /// The preset names.
        presets: String,
    },
    /// A channel is missing from the layout and the command line.
    #[error("the layout gives no directory for the {0} channel")]
    Missing(ChannelKind),
    /// A channel directory is unusable.
    #[error("{channel} channel `{}`: {reason}", path.display())]
    Unusable {
        /// The channel.
        channel: ChannelKind,
        /// Its directory.
        path: PathBuf,
        /// Why.
        reason: String,
    },
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct LayoutFile {
    name: Option<String>,
    description: Option<String>,
    channels: ChannelsFile,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ChannelsFile {
    evidence: Option<String>,
    database: Option<String>,
    case: Option<String>,
    temp: Option<String>,
}

/// A storage layout: a directory per channel.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Layout {
    /// Layout name (from the file, or its file stem).
    pub name: String,
    /// Free-text description.
    pub description: Option<String>,
    /// The file it came from, if any.
    pub source: Option<PathBuf>,
    /// Directory per channel.
    pub channels: BTreeMap<ChannelKind, PathBuf>,
}

impl Layout {
    /// Load a layout file.
    pub fn load(path: &Path) -> Result<Layout, LayoutError> {
        let text = std::fs::read_to_string(path).map_err(|source| LayoutError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Self::parse(&text, path)
    }

    /// Parse layout text; `path` is used for messages and relative paths.
    pub fn parse(text: &str, path: &Path) -> Result<Layout, LayoutError> {
        let parse_error = |message: String| LayoutError::Parse {
            path: path.to_path_buf(),
            message,
        };
        let file: LayoutFile =
            toml::from_str(text).map_err(|e| parse_error(e.to_string().trim_end().to_string()))?;
        let base = path.parent().unwrap_or(Path::new("."));
        let mut channels = BTreeMap::new();
        for (kind, value) in [
            (ChannelKind::Evidence, &file.channels.evidence),
            (ChannelKind::Database, &file.channels.database),
            (ChannelKind::Case, &file.channels.case),
            (ChannelKind::Temp, &file.channels.temp),
        ] {
            if let Some(v) = value {
                let expanded =
                    expand_vars(v).map_err(|m| parse_error(format!("channels.{kind}: {m}")))?;
                let p = PathBuf::from(expanded);
                channels.insert(kind, if p.is_absolute() { p } else { base.join(p) });
            }
        }
        let name = file.name.unwrap_or_else(|| {
            path.file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| "layout".into())
        });
        Ok(Layout {
            name,
            description: file.description,
            source: Some(path.to_path_buf()),
            channels,
        })
    }

    /// A layout with every channel given explicitly.
    pub fn from_dirs(
        name: &str,
        evidence: Option<PathBuf>,
        database: PathBuf,
        case: PathBuf,
        temp: PathBuf,
    ) -> Layout {
        let mut channels = BTreeMap::new();
        if let Some(e) = evidence {
            channels.insert(ChannelKind::Evidence, e);
        }
        channels.insert(ChannelKind::Database, database);
        channels.insert(ChannelKind::Case, case);
        channels.insert(ChannelKind::Temp, temp);
        Layout {
            name: name.to_string(),
            description: None,
            source: None,
            channels,
        }
    }

    /// Override one channel (command-line flags win over the file).
    pub fn set(&mut self, kind: ChannelKind, dir: PathBuf) {
        self.channels.insert(kind, dir);
    }

    /// The directory of a channel.
    pub fn dir(&self, kind: ChannelKind) -> Result<&Path, LayoutError> {
        self.channels
            .get(&kind)
            .map(PathBuf::as_path)
            .ok_or(LayoutError::Missing(kind))
    }

    /// Check that every writable channel is an existing, writable directory
    /// that is not one of the evidence files, and return canonical paths.
    pub fn check_writable(
        &self,
        evidence_files: &[PathBuf],
    ) -> Result<BTreeMap<ChannelKind, PathBuf>, LayoutError> {
        let mut out = BTreeMap::new();
        for kind in [ChannelKind::Database, ChannelKind::Case, ChannelKind::Temp] {
            let dir = self.dir(kind)?;
            let unusable = |reason: String| LayoutError::Unusable {
                channel: kind,
                path: dir.to_path_buf(),
                reason,
            };
            let canonical = crate::os::resolve(dir)
                .map_err(|e| unusable(format!("does not exist or cannot be resolved ({e})")))?;
            if evidence_files.contains(&canonical) {
                return Err(unusable(
                    "is the evidence file itself; evidence is read-only".into(),
                ));
            }
            if !canonical.is_dir() {
                return Err(unusable("is not a directory".into()));
            }
            // A throwaway channel: the check is counted nowhere.
            let channel = crate::channel::Channel::new(kind, &canonical, Vec::new());
            let probe = format!(".caseload-probe-{}", std::process::id());
            channel
                .create(&probe)
                .and_then(|mut f| {
                    use std::io::Write;
                    f.write_all(b"probe")
                        .map_err(|e| crate::channel::ChannelError::Io {
                            channel: kind,
                            op: "write",
                            path: canonical.join(&probe),
                            source: e,
                        })
                })
                .map_err(|e| unusable(format!("is not writable ({e})")))?;
            let _ = channel.remove_file(&probe);
            out.insert(kind, canonical);
        }
        Ok(out)
    }
}

/// Expand `${VAR}` and `${VAR:-default}`.
fn expand_vars(s: &str) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = s;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after
            .find('}')
            .ok_or_else(|| format!("unterminated `${{` in `{s}`"))?;
        let inner = &after[..end];
        let (name, default) = match inner.split_once(":-") {
            Some((n, d)) => (n, Some(d)),
            None => (inner, None),
        };
        match (std::env::var(name), default) {
            (Ok(v), _) if !v.is_empty() => out.push_str(&v),
            (_, Some(d)) => out.push_str(d),
            _ => {
                return Err(format!(
                    "environment variable `{name}` is not set and has no default"
                ));
            }
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_files_parse_with_variables_and_relative_paths() {
        let text = r#"
            name = "t"
            [channels]
            evidence = "/ev"
            database = "${CASELOAD_TEST_UNSET_VAR:-/db}"
            case = "cases"
            temp = "/tmp/x"
        "#;
        let l = Layout::parse(text, Path::new("/etc/layouts/t.toml")).unwrap();
        assert_eq!(l.dir(ChannelKind::Database).unwrap(), Path::new("/db"));
        assert_eq!(
            l.dir(ChannelKind::Case).unwrap(),
            Path::new("/etc/layouts/cases")
        );
        assert_eq!(l.name, "t");
    }

    #[test]
    fn unknown_keys_are_errors_with_a_line() {
        let err = Layout::parse("[channels]\ndatabse = \"/x\"\n", Path::new("l.toml")).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("databse") && msg.contains("line 2"), "{msg}");
    }

    #[test]
    fn missing_and_evidence_channels_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let evidence = dir.path().join("image.dd");
        std::fs::write(&evidence, b"x").unwrap();
        let ev = std::fs::canonicalize(&evidence).unwrap();
        let layout = Layout::from_dirs(
            "t",
            None,
            dir.path().join("nope"),
            dir.path().into(),
            dir.path().into(),
        );
        let err = layout
            .check_writable(std::slice::from_ref(&ev))
            .unwrap_err();
        assert!(err.to_string().contains("does not exist"), "{err}");
        let layout = Layout::from_dirs(
            "t",
            None,
            evidence.clone(),
            dir.path().into(),
            dir.path().into(),
        );
        let err = layout
            .check_writable(std::slice::from_ref(&ev))
            .unwrap_err();
        assert!(err.to_string().contains("evidence file itself"), "{err}");
        let layout = Layout::from_dirs(
            "t",
            None,
            dir.path().into(),
            dir.path().into(),
            dir.path().into(),
        );
        assert_eq!(layout.check_writable(&[ev]).unwrap().len(), 3);
    }
}
