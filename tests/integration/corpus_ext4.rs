//! `caseload corpus --fs ext4` through the command line: a Linux server
//! image (and its E01) whose every allocated file the pipeline hashes to
//! the manifest's MD5, and whose E01 reads as the raw image. The writer's
//! own checks against e2fsck, TSK, debugfs and caseload-fs are in
//! `corpus-gen/tests/ext4.rs`.

use crate::common;

use std::collections::BTreeMap;

#[test]
fn an_ext4_linux_server_corpus_is_read_back_as_its_manifest_says() {
    let test = "an_ext4_linux_server_corpus_is_read_back_as_its_manifest_says";
    let work = tempfile::tempdir().unwrap();
    let out = work.path().join("server");
    let (image, manifest) = common::corpus(
        &out,
        &[
            "--size",
            "64MiB",
            "--seed",
            "11",
            "--profile",
            "linux-server",
            "--fs",
            "ext4",
            "--format",
            "dd,e01",
        ],
    );
    let fs_type = serde_json::to_value(&manifest).unwrap()["filesystem"]["type"].clone();
    assert_eq!(fs_type, "ext4", "{fs_type}");
    // The linux-server profile is ext4 unless told otherwise.
    let default = work.path().join("default");
    common::run_ok(
        common::caseload()
            .args([
                "corpus",
                "--size",
                "40MiB",
                "--seed",
                "2",
                "--profile",
                "linux-server",
            ])
            .args(["--decoys", "0", "--out"])
            .arg(&default),
    );
    let m: serde_json::Value =
        serde_json::from_slice(&std::fs::read(default.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(m["filesystem"]["type"], "ext4");
    // The pipeline over the raw image and over the E01.
    let e01 = out.join("image.E01");
    let mut bodies = Vec::new();
    for (name, evidence) in [("dd", &image), ("e01", &e01)] {
        let case = work.path().join(format!("case-{name}"));
        std::fs::create_dir_all(&case).unwrap();
        common::run_ok(&mut common::stage_run(
            "filesystem,file-hash",
            evidence,
            &case,
            &[],
        ));
        bodies.push(String::from_utf8(common::export(&case, "bodyfile", &[])).unwrap());
    }
    assert_eq!(bodies[0], bodies[1], "the E01 reads as the raw image");
    let ours: BTreeMap<String, String> = bodies[0]
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split('|').collect();
            (f.len() == 11 && !f[1].ends_with(" (deleted)"))
                .then(|| (f[1].to_string(), f[0].to_string()))
        })
        .collect();
    let mut checked = 0;
    for f in manifest.files.iter().filter(|f| f.allocated) {
        let Some(md5) = &f.md5 else { continue };
        let path = format!("/{}", f.path.trim_start_matches('/'));
        let got = ours
            .get(&path)
            .unwrap_or_else(|| panic!("{path} is not in the case's bodyfile"));
        assert_eq!(got, md5, "{path}");
        checked += 1;
    }
    assert!(checked > 50, "only {checked} files checked");
    eprintln!("{test}: {checked} files hashed to the manifest's MD5");
}
