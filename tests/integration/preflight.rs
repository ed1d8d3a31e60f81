//! The check before the first run (`run`, `compare`): a database
//! directory the server's account cannot enter and a channel without room
//! for the workload are refused once, up front, with every problem listed,
//! and nothing is run or written.

use crate::common;
use crate::compare_support;

use compare_support::{compare_cmd, output};
use std::path::Path;

/// Names under `dir`, sorted (the channel a refused command never used).
fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|r| {
            r.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

#[test]
fn compare_refuses_a_database_directory_the_server_account_cannot_enter_before_any_run() {
    let test =
        "compare_refuses_a_database_directory_the_server_account_cannot_enter_before_any_run";
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("SKIPPED {test}: as an unprivileged user the server runs as that user");
        return;
    }
    if !common::have_postgres(test) {
        return;
    }
    let work = common::pg_tempdir();
    let evidence = work.path().join("image.dd");
    std::fs::write(&evidence, vec![0u8; 1 << 20]).unwrap();
    // Root's own corner: the server's account may not pass through it.
    let locked = work.path().join("locked");
    std::fs::create_dir(&locked).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o700)).unwrap();
    let fine_dir = work.path().join("fine");
    let fine = compare_support::layout(work.path(), "fine", &fine_dir, &fine_dir, &fine_dir);
    let shut = compare_support::layout(
        work.path(),
        "shut",
        &locked.join("db"),
        &fine_dir,
        &fine_dir,
    );
    let out_dir = work.path().join("out");
    let out = output(
        compare_cmd(&[&evidence], &[&fine, &shut], &out_dir)
            .args(["--stages", "filesystem,file-hash", "--repeat", "4"])
            .args(["--db-engine", "postgres"]),
    );
    assert!(!out.status.success());
    assert_ne!(out.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("refused before the first run (1 problem)"),
        "{stderr}"
    );
    let named = format!("`{}`", locked.display());
    assert_eq!(stderr.matches(&named).count(), 1, "said once: {stderr}");
    assert!(stderr.contains("database channel"), "{stderr}");
    // No run began: no comparison, no run directory, no server files.
    assert!(!out_dir.join("compare.json").exists());
    assert!(names(&out_dir).is_empty(), "{:?}", names(&out_dir));
    assert!(!locked.join("db").exists() || names(&locked.join("db")).is_empty());
    assert!(names(&fine_dir).is_empty(), "{:?}", names(&fine_dir));
    common::assert_no_server_left(work.path());
}

#[test]
fn a_channel_on_a_one_mib_tmpfs_is_refused_up_front_with_the_estimate_and_the_free_space() {
    let work = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let root = work.path().join("dirs");
    let case = root.join("case");
    let Some(_mounted) = common::small_tmpfs("one-MiB case channel", &case, "1m") else {
        return;
    };
    let (image, _) = common::corpus(
        &work.path().join("corpus"),
        &["--size", "32MiB", "--seed", "3"],
    );
    // run: the index and carve keep about 15% of the evidence on case.
    let out = common::channels_run("filesystem,file-hash,index,carve", &image, &root)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("refused before the first run"), "{stderr}");
    assert!(stderr.contains("not enough room: 1 MiB free"), "{stderr}");
    assert!(
        stderr.contains(&format!("case channel `{}`", case.display())),
        "{stderr}"
    );
    // The estimate, stage by stage: index 4 MiB + carve 1 MiB of 32 MiB.
    assert!(stderr.contains("expected to need 4 MiB"), "{stderr}");
    assert!(
        stderr.contains("index 4 MiB") && stderr.contains("carve 1 MiB"),
        "{stderr}"
    );
    assert!(
        names(&case).is_empty(),
        "nothing written: {:?}",
        names(&case)
    );

    // compare says the same once, beside any other problem: a hash set
    // that is not there.
    let roomy = work.path().join("roomy");
    let small = compare_support::layout(work.path(), "small", &roomy, &case, &roomy);
    let out_dir = work.path().join("out");
    let missing = work.path().join("no-such-set.txt");
    let out = output(
        compare_cmd(&[&image], &[&small], &out_dir)
            .args(["--stages", "filesystem,index,carve,kff", "--repeat", "3"])
            .arg("--hashset")
            .arg(format!("known={}", missing.display())),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("refused before the first run (2 problems)"),
        "{stderr}"
    );
    assert_eq!(stderr.matches("not enough room").count(), 1, "{stderr}");
    assert!(
        stderr.contains(&format!("--hashset `{}`", missing.display())),
        "{stderr}"
    );
    assert!(!out_dir.join("compare.json").exists());
    assert!(names(&case).is_empty(), "{:?}", names(&case));
}
