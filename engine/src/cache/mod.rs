//! Page-cache control, so that timings mean what they say.
//!
//! `cold`: before every stage, dirty data is synced and the cached pages of
//! the evidence and of the channel files are dropped, so each stage reads
//! from the devices as it would on evidence far larger than memory. As root
//! this writes `3` to `/proc/sys/vm/drop_caches` (everything); otherwise it
//! calls `posix_fadvise(POSIX_FADV_DONTNEED)` on each file, which drops that
//! file's clean pages. `warm`: nothing is dropped. The run records which
//! method was used and whether it worked.

pub mod model;
pub mod residency;
pub mod watch;

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// Cache policy of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum CacheMode {
    /// Drop caches before every stage.
    #[default]
    Cold,
    /// Leave the page cache alone.
    Warm,
}

impl CacheMode {
    /// Name as on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            CacheMode::Cold => "cold",
            CacheMode::Warm => "warm",
        }
    }
}

/// How a cold cache was obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CacheMethod {
    /// `/proc/sys/vm/drop_caches`.
    DropCaches,
    /// `posix_fadvise(DONTNEED)` per file.
    Fadvise,
    /// Windows: the modified page list flushed and the standby list (the
    /// file cache's clean pages) purged, as RAMMap's "Empty Standby List".
    StandbyPurge,
    /// Nothing (warm).
    None,
}

/// What cache control did during a run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CacheReport {
    /// The policy asked for.
    pub mode: CacheMode,
    /// The method used.
    pub method: CacheMethod,
    /// Whether every drop succeeded.
    pub honoured: bool,
    /// Explanation for a reader.
    pub note: String,
}

/// Drop cached pages for a cold start. `files` are the evidence files and
/// `dirs` the channel directories whose files should be dropped too.
pub fn make_cold(files: &[PathBuf], dirs: &[PathBuf]) -> CacheReport {
    #[cfg(windows)]
    {
        let _ = (files, dirs);
        let (honoured, note) = match crate::os::purge_standby_list() {
            Ok(()) => (
                true,
                "flushed the modified page list, then purged the standby list (every file's cached pages) before each stage".to_string(),
            ),
            Err(e) => (
                false,
                format!(
                    "not honoured: {e} (emptying the standby list needs an administrator: SeProfileSingleProcessPrivilege); reads may be served from the file cache"
                ),
            ),
        };
        CacheReport {
            mode: CacheMode::Cold,
            method: CacheMethod::StandbyPurge,
            honoured,
            note,
        }
    }
    #[cfg(not(windows))]
    make_cold_linux(files, dirs)
}

#[cfg(not(windows))]
fn make_cold_linux(files: &[PathBuf], dirs: &[PathBuf]) -> CacheReport {
    crate::os::sync_everything();
    if std::fs::write("/proc/sys/vm/drop_caches", b"3").is_ok() {
        return CacheReport {
            mode: CacheMode::Cold,
            method: CacheMethod::DropCaches,
            honoured: true,
            note: "synced, then dropped the page cache, dentries and inodes (drop_caches=3) before each stage".into(),
        };
    }
    let mut all_ok = true;
    let mut count = 0usize;
    for f in files {
        all_ok &= crate::os::drop_cached_path(f);
        count += 1;
    }
    for d in dirs {
        walk_files(d, &mut |p| {
            all_ok &= crate::os::drop_cached_path(p);
            count += 1;
        });
    }
    CacheReport {
        mode: CacheMode::Cold,
        method: CacheMethod::Fadvise,
        honoured: all_ok,
        note: format!(
            "not root: synced, then posix_fadvise(DONTNEED) on {count} evidence and channel files before each stage{}",
            if all_ok { "" } else { "; some files refused" }
        ),
    }
}

/// The report for a warm run.
pub fn warm() -> CacheReport {
    CacheReport {
        mode: CacheMode::Warm,
        method: CacheMethod::None,
        honoured: true,
        note: "page cache left as it was; repeated reads may be served from memory".into(),
    }
}

#[cfg(not(windows))]
fn walk_files(dir: &std::path::Path, f: &mut dyn FnMut(&std::path::Path)) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let Ok(ft) = entry.file_type() else { continue };
        if ft.is_dir() {
            walk_files(&entry.path(), f);
        } else if ft.is_file() {
            f(&entry.path());
        }
    }
}
