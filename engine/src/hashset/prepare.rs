//! Hash sets named for one run (`caseload run --hashset known=FILE ...`):
//! group the files into sets, import into the library those it does not
//! already hold from the same files, and say which library and sets the
//! `kff` stage is to use.

use super::library::{ImportProgress, ImportReport, ImportRequest, Library};
use super::{Category, HashSetError, LIBRARY_FILE_NAME};
use crate::casedb;
use crate::channel::{Channel, ChannelKind};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

/// A set a run asks for: files with the same stem and category make one
/// set (`notable.md5` and `notable.sha1` are the MD5 and SHA-1 forms of one
/// list).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WantedSet {
    /// Set name: the files' stem.
    pub name: String,
    /// `known` or `notable`.
    pub category: Category,
    /// Its source files.
    pub files: Vec<PathBuf>,
}

/// What became of a wanted set.
#[derive(Debug)]
pub enum Prepared {
    /// The library already held a complete set of that name and category
    /// made from the same files (path, size, modification time).
    Reused(String, Category),
    /// Imported now.
    Imported(Box<ImportReport>),
}

fn bad(spec: &str, why: impl Into<String>) -> HashSetError {
    HashSetError::Invalid(format!("--hashset `{spec}`: {}", why.into()))
}

/// Group `CATEGORY=FILE` specifications into sets.
pub fn wanted_sets(specs: &[String]) -> Result<Vec<WantedSet>, HashSetError> {
    let mut wanted: Vec<WantedSet> = Vec::new();
    for spec in specs {
        let (cat, file) = spec
            .split_once('=')
            .ok_or_else(|| bad(spec, "expected known=FILE or notable=FILE"))?;
        let category = Category::parse(cat)
            .ok_or_else(|| bad(spec, "the category must be `known` or `notable`"))?;
        let file = PathBuf::from(file);
        let name = file
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .filter(|s| !s.is_empty())
            .ok_or_else(|| bad(spec, "no file name"))?;
        match wanted.iter_mut().find(|w| w.name == name) {
            Some(w) if w.category == category => w.files.push(file),
            Some(w) => {
                return Err(HashSetError::Invalid(format!(
                    "--hashset: `{}` would make the set `{name}` {category}, but another file of that name makes it {} (set names are file stems)",
                    file.display(),
                    w.category
                )));
            }
            None => wanted.push(WantedSet {
                name,
                category,
                files: vec![file],
            }),
        }
    }
    Ok(wanted)
}

/// The library a run uses: `kff_library` (a file, or a directory for its
/// `kff.sqlite`), else `kff.sqlite` in the database directory; made
/// absolute, so every instance of a run finds the same one.
pub fn library_path(kff_library: Option<&Path>, database_dir: &Path) -> PathBuf {
    let path = match kff_library {
        Some(p) if p.is_dir() => p.join(LIBRARY_FILE_NAME),
        Some(p) => p.to_path_buf(),
        None => database_dir.join(LIBRARY_FILE_NAME),
    };
    match (path.parent(), path.file_name()) {
        (Some(d), Some(n)) if d.is_dir() => std::fs::canonicalize(d)
            .map(|d| d.join(n))
            .unwrap_or(path.clone()),
        _ => path,
    }
}

/// Open (creating) the library at `path` with its I/O counted on a
/// database channel for its directory; returns the channel too.
pub fn open_counted(path: &Path) -> Result<(Library, Channel), HashSetError> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
        .to_path_buf();
    let channel = Channel::new(ChannelKind::Database, &dir, Vec::new());
    let vfs = casedb::counting_vfs(&channel)?;
    Ok((Library::open_or_create(path, Some(&vfs))?, channel))
}

/// (canonical path, size, modification time) of a source file.
fn fingerprint(file: &Path) -> Result<(PathBuf, u64, Option<i64>), HashSetError> {
    let meta = std::fs::metadata(file).map_err(|source| HashSetError::Io {
        path: file.to_path_buf(),
        source,
    })?;
    let modified = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| d.as_secs() as i64);
    let canonical = std::fs::canonicalize(file).unwrap_or_else(|_| file.to_path_buf());
    Ok((canonical, meta.len(), modified))
}

/// Import each wanted set into the library unless it already holds it
/// from the same files; sort spills go to `temp_dir`.
pub fn prepare_sets(
    library: &Path,
    wanted: &[WantedSet],
    temp_dir: &Path,
    progress: &dyn ImportProgress,
    cancel: &AtomicBool,
) -> Result<Vec<Prepared>, HashSetError> {
    let (lib, _) = open_counted(library)?;
    let temp = Channel::new(ChannelKind::Temp, temp_dir, Vec::new());
    let mut out = Vec::with_capacity(wanted.len());
    for w in wanted {
        let sources = w
            .files
            .iter()
            .map(|f| fingerprint(f))
            .collect::<Result<Vec<_>, _>>()?;
        if let Some(existing) = lib.complete_set(&w.name)?
            && existing.category == w.category
        {
            let stored = lib.sources(existing.id)?;
            let same = stored.len() == sources.len()
                && stored
                    .iter()
                    .zip(&sources)
                    .all(|((s, m), (p, len, modified))| {
                        s.path == *p && s.bytes == *len && m == modified
                    });
            if same {
                out.push(Prepared::Reused(w.name.clone(), w.category));
                continue;
            }
        }
        let request = ImportRequest {
            name: w.name.clone(),
            category: w.category,
            sources: sources.into_iter().map(|(p, _, _)| p).collect(),
            format: None,
            strict: false,
            replace: true,
            kinds: Vec::new(),
            memory: 256 << 20,
        };
        let report = lib.import(&request, &temp, progress, cancel)?;
        out.push(Prepared::Imported(Box::new(report)));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_group_into_sets_by_stem_and_category() {
        let w = wanted_sets(&[
            "known=/h/NSRLFile.txt".into(),
            "notable=/h/bad.md5".into(),
            "notable=/x/bad.sha1".into(),
        ])
        .unwrap();
        assert_eq!(w.len(), 2);
        assert_eq!(w[1].name, "bad");
        assert_eq!(w[1].files.len(), 2);
        for spec in ["x", "maybe=/a", "known=", "notable=/h/NSRLFile.txt"] {
            let mut specs = vec!["known=/h/NSRLFile.txt".to_string()];
            specs.push(spec.into());
            assert!(wanted_sets(&specs).is_err(), "{spec}");
        }
    }
}
