//! `caseload compare` of two layouts that differ in one channel: the case
//! database on tmpfs (`/dev/shm`) against the database on a disk directory,
//! with every row its own fsynced transaction so database syncs matter.
//! The change shows in the database channel of the stages that write the
//! database, and not in the channels and stages that do not.
//!
//! Checked on blocked and fsync time per channel (what the engine measured
//! inside the I/O calls), with generous margins, not on wall time alone: the
//! machine is shared and noisy.

use crate::compare_support;

use compare_support::{
    STAGES, compare_cmd, compare_json, entries, f, fs_type, output, stage, summary,
};

#[test]
fn database_on_tmpfs_against_disk_changes_only_the_database_channel() {
    let test = "database_on_tmpfs_against_disk_changes_only_the_database_channel";
    if fs_type(std::path::Path::new("/dev/shm")).as_deref() != Some("tmpfs") {
        eprintln!("SKIPPED {test}: /dev/shm is not a tmpfs");
        return;
    }
    let work = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let disk_fs = fs_type(work.path()).unwrap_or_default();
    if disk_fs == "tmpfs" || disk_fs == "ramfs" {
        eprintln!(
            "SKIPPED {test}: {} is not on a disk ({disk_fs})",
            work.path().display()
        );
        return;
    }
    // The test's premise is that an fsync costs something on the disk. On
    // a disk whose write cache makes it nearly free there is no difference
    // to find, so say so instead of failing.
    let fsync = fsync_seconds(work.path());
    if fsync < 100e-6 {
        eprintln!(
            "SKIPPED {test}: fsync on {} takes {:.1} us (write cache?), nothing to compare",
            work.path().display(),
            fsync * 1e6
        );
        return;
    }
    let shm = tempfile::tempdir_in("/dev/shm").unwrap();
    let (dd, _e01) = compare_support::corpus(&work.path().join("corpus"), "32MiB", 17);
    // Case and temp are the same disk directory in both layouts; only the
    // database moves.
    let case = work.path().join("case");
    let shm_layout =
        compare_support::layout(work.path(), "db-shm", &shm.path().join("db"), &case, &case);
    let disk_layout = compare_support::layout(
        work.path(),
        "db-disk",
        &work.path().join("db"),
        &case,
        &case,
    );
    let out = work.path().join("out");
    let result = output(
        compare_cmd(&[&dd], &[&shm_layout, &disk_layout], &out).args([
            "--stages",
            STAGES,
            "--repeat",
            "2",
            "--threads",
            "1",
            "--synchronous",
            "full",
            "--batch-size",
            "1",
        ]),
    );
    assert!(result.status.success(), "compare failed");
    let doc = compare_json(&out);
    assert_eq!(doc["status"], "completed");
    // Interleaved: every configuration once per repeat.
    let order: Vec<u64> = doc["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["configuration"].as_u64().unwrap())
        .collect();
    assert_eq!(order, [0, 1, 0, 1]);
    assert_eq!(
        doc["layouts"][0]["channels"]["database"]["placement"]["fs_type"],
        "tmpfs"
    );
    assert_ne!(
        doc["layouts"][1]["channels"]["database"]["placement"]["fs_type"],
        "tmpfs"
    );

    let (base, disk) = (summary(&doc, 0), summary(&doc, 1));
    let mut db_stages = 0;
    for name in STAGES.split(',') {
        let (b, d) = (stage(base, name), stage(disk, name));
        assert_eq!(b["runs"], 2, "{name}");
        assert_eq!(d["runs"], 2, "{name}");
        let bdb = &b["channels"]["database"];
        let ddb = &d["channels"]["database"];
        // Same work on both layouts: the same syncs and the same evidence
        // bytes, stage by stage.
        assert_eq!(bdb["fsyncs"]["median"], ddb["fsyncs"]["median"], "{name}");
        assert_eq!(
            b["channels"]["evidence"]["bytes_read"]["median"],
            d["channels"]["evidence"]["bytes_read"]["median"],
            "{name}"
        );
        let fsyncs = f(&bdb["fsyncs"]["median"]);
        let (b_sync, d_sync) = (
            f(&bdb["sync_blocked_seconds"]["median"]),
            f(&ddb["sync_blocked_seconds"]["median"]),
        );
        eprintln!(
            "{name}: {fsyncs} db fsyncs; fsync seconds shm {b_sync:.4} disk {d_sync:.4}; wall ratio {}",
            d["wall_ratio"]
        );
        if fsyncs >= 20.0 {
            // A stage that writes the database: its syncs cost far more on
            // the disk than on tmpfs (where fsync has nothing to do).
            db_stages += 1;
            assert!(
                d_sync >= 3.0 * b_sync && d_sync - b_sync >= 0.01,
                "{name}: database fsync seconds shm {b_sync} disk {d_sync}"
            );
            assert!(
                f(&ddb["blocked_ratio"]) >= 3.0,
                "{name}: database blocked ratio {}",
                ddb["blocked_ratio"]
            );
        } else {
            // A stage that barely touches the database: no change beyond
            // noise in its time.
            let ratio = f(&d["wall_ratio"]);
            assert!(
                (1.0 / 3.0..=3.0).contains(&ratio),
                "{name}: wall ratio {ratio} for a stage that does not use the database"
            );
            assert!(d_sync < 0.5, "{name}: {d_sync} s of database fsync");
        }
        // The evidence channel's blocked time is not compared: with a cold
        // cache it follows whatever else the machine's disk is doing (7x
        // apart between the layouts once, with the rest of the suite running
        // beside this test). That both layouts read the same evidence is
        // checked above on the bytes read.
    }
    assert!(
        db_stages >= 2,
        "filesystem and file-hash write the database"
    );

    // Every run's scratch directories are gone from both layouts.
    assert!(entries(&shm.path().join("db")).is_empty());
    assert!(entries(&work.path().join("db")).is_empty());
    assert!(entries(&case).is_empty(), "{:?}", entries(&case));
    // Each run's own report is kept in the output directory.
    for r in doc["runs"].as_array().unwrap() {
        let report = compare_support::run_report(&out, r);
        assert_eq!(report["schema"], "caseload-run");
        assert_eq!(report["cache"]["mode"], "cold");
    }
}

/// Median seconds of a 4 KiB write plus fsync in `dir`.
fn fsync_seconds(dir: &std::path::Path) -> f64 {
    use std::io::Write;
    let path = dir.join("fsync-probe");
    let mut file = std::fs::File::create(&path).unwrap();
    let mut times: Vec<f64> = (0..15)
        .map(|_| {
            let t = std::time::Instant::now();
            file.write_all(&[0u8; 4096]).unwrap();
            file.sync_all().unwrap();
            t.elapsed().as_secs_f64()
        })
        .collect();
    std::fs::remove_file(&path).unwrap();
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}
