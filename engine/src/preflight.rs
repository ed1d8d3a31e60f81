//! What a run needs, checked before the first run of a command starts
//! (`run`, `compare`, `study`, `cluster`), so that a problem is said once,
//! with every other problem beside it, instead of by each run in turn:
//! the channels have room for what the workload writes (estimated from
//! the evidence's size), the database server's account can reach its
//! directories, PostgreSQL's binaries are there when the case needs them,
//! the hash sets and libraries named exist.
//!
//! The space estimate is per stage and channel, in bytes per byte of
//! evidence (media size), measured on the default workstation corpus
//! (2 GiB, seed 42: run.json's bytes written per stage), plus what does
//! not grow with the evidence: the ftk4 profile's copy of the KFF library
//! in the case database (8 times the SQLite library's size: 632 MB of
//! server files for an 80 MB library of 2 million hashes), a private
//! PostgreSQL cluster's own files (39 MiB after `initdb`, 16 MiB of them
//! its first WAL segment) and its write-ahead log, which holds about what
//! the case writes until a checkpoint recycles it (at most
//! `max_wal_size`, 1 GiB). A corpus of more text or more carvable items writes more;
//! the estimate is a floor to refuse on, not a promise.

use crate::casedb::{DbEngine, DbOptions, Profile};
use crate::channel::ChannelKind;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Space a stage keeps on a channel, per byte of evidence.
const PER_STAGE: &[(&str, ChannelKind, f64)] = &[
    ("index", ChannelKind::Case, 0.125),
    ("index", ChannelKind::Temp, 0.063),
    ("carve", ChannelKind::Case, 0.028),
    ("filesystem", ChannelKind::Database, 0.011),
    ("file-hash", ChannelKind::Database, 0.015),
    ("index", ChannelKind::Database, 0.002),
    ("carve", ChannelKind::Database, 0.002),
    ("kff", ChannelKind::Database, 0.008),
];

/// ftk4's members staged through the temp channel (ADTemp), per byte of
/// evidence.
const FTK4_ADTEMP: f64 = 0.043;
/// The KFF library in PostgreSQL against the SQLite library's size.
const LIBRARY_IN_SERVER: u64 = 8;
/// PostgreSQL's `max_wal_size`: the most WAL kept between checkpoints.
const WAL: u64 = 1 << 30;
/// A private cluster just made by `initdb` (PostgreSQL 15: 39 MiB, its
/// first 16 MiB WAL segment included).
const CLUSTER: u64 = 39 << 20;

/// What a channel is expected to need.
#[derive(Debug, Clone, PartialEq)]
pub struct Estimate {
    /// The channel.
    pub channel: ChannelKind,
    /// Bytes.
    pub bytes: u64,
    /// How it was reckoned, for people.
    pub basis: String,
}

/// The space the stages named keep on each writable channel for evidence
/// of `media_bytes`, with the case database `db` and a KFF library of
/// `library_bytes` (its SQLite file), if any.
pub fn expected_space(
    stages: &[&str],
    db: &DbOptions,
    media_bytes: u64,
    library_bytes: Option<u64>,
) -> Vec<Estimate> {
    let mut bytes: BTreeMap<ChannelKind, f64> = BTreeMap::new();
    let mut basis: BTreeMap<ChannelKind, Vec<String>> = BTreeMap::new();
    let gib = media_bytes as f64 / (1u64 << 30) as f64;
    for (stage, channel, per) in PER_STAGE {
        if stages.contains(stage) {
            *bytes.entry(*channel).or_default() += per * media_bytes as f64;
            basis
                .entry(*channel)
                .or_default()
                .push(format!("{stage} {:.0} MiB", per * gib * 1024.0));
        }
    }
    if db.profile == Profile::Ftk4 && stages.contains(&"file-hash") {
        *bytes.entry(ChannelKind::Temp).or_default() += FTK4_ADTEMP * media_bytes as f64;
        basis
            .entry(ChannelKind::Temp)
            .or_default()
            .push(format!("ADTemp {:.0} MiB", FTK4_ADTEMP * gib * 1024.0));
    }
    let private_server = db.engine == DbEngine::Postgres && db.postgres.url.is_none();
    if private_server {
        if let (Profile::Ftk4, Some(lib), true) =
            (db.profile, library_bytes, stages.contains(&"kff"))
        {
            let b = lib * LIBRARY_IN_SERVER;
            *bytes.entry(ChannelKind::Database).or_default() += b as f64;
            basis
                .entry(ChannelKind::Database)
                .or_default()
                .push(format!(
                    "the KFF library in the case database {} MiB",
                    b >> 20
                ));
        }
        // The log holds what the case writes, up to max_wal_size.
        let written = bytes.get(&ChannelKind::Database).copied().unwrap_or(0.0);
        let wal = written.min(WAL as f64);
        *bytes.entry(ChannelKind::Database).or_default() += CLUSTER as f64 + wal;
        basis
            .entry(ChannelKind::Database)
            .or_default()
            .push(format!(
                "PostgreSQL's cluster {} MiB and write-ahead log {:.0} MiB",
                CLUSTER >> 20,
                wal / f64::from(1 << 20)
            ));
    }
    bytes
        .into_iter()
        .map(|(channel, b)| Estimate {
            channel,
            bytes: b as u64,
            basis: basis.remove(&channel).unwrap_or_default().join(" + "),
        })
        .collect()
}

/// Problems found before a command's first run; empty when none.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Problems(pub Vec<String>);

impl Problems {
    /// Note a problem.
    pub fn push(&mut self, p: impl Into<String>) {
        self.0.push(p.into())
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl std::fmt::Display for Problems {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "refused before the first run ({} problem{}):",
            self.0.len(),
            if self.0.len() == 1 { "" } else { "s" }
        )?;
        for p in &self.0 {
            write!(f, "\n  - {p}")?;
        }
        Ok(())
    }
}

/// Free bytes of the file system holding `dir`, and its device.
fn free_and_device(dir: &Path) -> Option<(u64, u64)> {
    let dev = crate::os::device_of(dir)?;
    Some((crate::system::placement(dir).free_bytes?, dev))
}

/// The channels (`dirs`) have room for `estimates`, `copies` times over
/// (a comparison that keeps its runs' directories): channels on one file
/// system share its free space.
pub fn check_room(
    dirs: &BTreeMap<ChannelKind, PathBuf>,
    estimates: &[Estimate],
    copies: u64,
    problems: &mut Problems,
) {
    let mut by_device: BTreeMap<u64, (u64, u64, Vec<String>)> = BTreeMap::new();
    for e in estimates {
        let Some(dir) = dirs.get(&e.channel) else {
            continue;
        };
        let Some((free, dev)) = free_and_device(dir) else {
            continue;
        };
        let entry = by_device.entry(dev).or_insert((free, 0, Vec::new()));
        entry.1 += e.bytes.saturating_mul(copies);
        entry.2.push(format!(
            "{} channel `{}`: about {} MiB ({})",
            e.channel,
            dir.display(),
            e.bytes.saturating_mul(copies) >> 20,
            e.basis
        ));
    }
    for (free, need, what) in by_device.into_values() {
        if need > free {
            problems.push(format!(
                "not enough room: {} MiB free, the workload is expected to need {} MiB: {}",
                free >> 20,
                need >> 20,
                what.join("; ")
            ));
        }
    }
}

/// The profile can use the engine, and a private PostgreSQL server (when
/// `db` asks for one) can be started:
/// its binaries are there, and the account it runs as when caseload is
/// root can reach the database directory and (ftk4's dbTemp) the temp
/// directory.
pub fn check_server(
    db: &DbOptions,
    dirs: &BTreeMap<ChannelKind, PathBuf>,
    problems: &mut Problems,
) {
    if let Some(why) = db.effective().engine_mismatch() {
        // Said once, however many layouts share the database options.
        if !problems.0.iter().any(|p| p == why) {
            problems.push(why);
        }
        return;
    }
    if db.engine != DbEngine::Postgres || db.postgres.url.is_some() {
        return;
    }
    if let Err(e) = crate::casedb::postgres::cluster::find_binaries() {
        problems.push(format!("the case database needs PostgreSQL: {e}"));
        return;
    }
    match crate::casedb::postgres::cluster::server_user(db.postgres.user.as_deref()) {
        Ok(Some(user)) => {
            let mut wanted = vec![ChannelKind::Database];
            if db.profile.server_temp_on_temp_channel() {
                wanted.push(ChannelKind::Temp);
            }
            for k in wanted {
                if let Some(dir) = dirs.get(&k)
                    && let Err(e) = crate::casedb::postgres::cluster::check_reachable(dir, &user)
                {
                    problems.push(format!("{k} channel: {e}"));
                }
            }
        }
        Ok(None) => {}
        Err(e) => problems.push(e.to_string()),
    }
}

/// Each file exists and can be read.
pub fn check_files(files: &[PathBuf], what: &str, problems: &mut Problems) {
    for f in files {
        if let Err(e) = std::fs::File::open(f) {
            problems.push(format!("{what} `{}`: {e}", f.display()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_estimate_grows_with_the_evidence_and_the_profile() {
        let native = DbOptions::default();
        let e = expected_space(&["filesystem", "index", "carve"], &native, 1 << 30, None);
        let case = e.iter().find(|e| e.channel == ChannelKind::Case).unwrap();
        assert_eq!(case.bytes, ((0.125 + 0.028) * (1u64 << 30) as f64) as u64);
        assert!(
            case.basis.contains("index") && case.basis.contains("carve"),
            "{}",
            case.basis
        );
        let double = expected_space(&["index", "carve"], &native, 2 << 30, None);
        let double_case = double
            .iter()
            .find(|e| e.channel == ChannelKind::Case)
            .unwrap();
        assert_eq!(double_case.bytes / 2, case.bytes);
        let ftk4 = DbOptions {
            engine: DbEngine::Postgres,
            profile: Profile::Ftk4,
            ..DbOptions::default()
        };
        let e = expected_space(&["file-hash", "kff"], &ftk4, 1 << 30, Some(80 << 20));
        let db = e
            .iter()
            .find(|e| e.channel == ChannelKind::Database)
            .unwrap();
        // The library's copy, its log and the cluster.
        assert!(db.bytes > 2 * (640 << 20) + CLUSTER, "{db:?}");
        assert!(db.basis.contains("write-ahead log"), "{}", db.basis);
        assert!(db.basis.contains("KFF library"), "{}", db.basis);
        assert!(e.iter().any(|e| e.channel == ChannelKind::Temp));
    }

    #[test]
    fn room_is_shared_by_channels_on_one_file_system() {
        let dir = tempfile::tempdir().unwrap();
        let dirs: BTreeMap<ChannelKind, PathBuf> = [
            (ChannelKind::Case, dir.path().to_path_buf()),
            (ChannelKind::Temp, dir.path().to_path_buf()),
        ]
        .into();
        let huge = |c| Estimate {
            channel: c,
            bytes: u64::MAX / 4,
            basis: "test".into(),
        };
        let mut p = Problems::default();
        check_room(
            &dirs,
            &[huge(ChannelKind::Case), huge(ChannelKind::Temp)],
            1,
            &mut p,
        );
        assert_eq!(p.0.len(), 1, "{p}");
        assert!(
            p.0[0].contains("case channel") && p.0[0].contains("temp channel"),
            "{p}"
        );
        let mut p = Problems::default();
        let small = Estimate {
            channel: ChannelKind::Case,
            bytes: 1,
            basis: "x".into(),
        };
        check_room(&dirs, &[small], 1, &mut p);
        assert!(p.is_empty());
        let mut p = Problems::default();
        check_files(&[dir.path().join("absent")], "hash set", &mut p);
        assert!(p.to_string().contains("hash set"), "{p}");
    }
}
