//! `caseload corpus --fs exfat` through the command line: a USB stick
//! image (and its E01) whose every allocated file the pipeline hashes to
//! the manifest's MD5, and whose E01 reads as the raw image. The writer's
//! own checks against fsck.exfat, TSK, exfat-fuse and mkfs.exfat are in
//! `corpus-gen/tests/exfat.rs`.

use crate::common;

use std::collections::BTreeMap;

#[test]
fn an_exfat_usb_stick_corpus_is_read_back_as_its_manifest_says() {
    read_back(
        "an_exfat_usb_stick_corpus_is_read_back_as_its_manifest_says",
        "usb-stick",
        ("exfat", "exFAT"),
        "48MiB",
    );
}

/// A `profile` corpus of `size` on file system `fs` (its `--fs` value and
/// the manifest's name), with its E01, hashed by the pipeline to the
/// manifest's MD5s; the profile's default file system is `fs` too.
pub(crate) fn read_back(test: &str, profile: &str, fs: (&str, &str), size: &str) {
    let work = tempfile::tempdir().unwrap();
    let out = work.path().join("corpus");
    let (image, manifest) = common::corpus(
        &out,
        &[
            "--size",
            size,
            "--seed",
            "11",
            "--profile",
            profile,
            "--fs",
            fs.0,
            "--format",
            "dd,e01",
        ],
    );
    let fs_type = serde_json::to_value(&manifest).unwrap()["filesystem"]["type"].clone();
    assert_eq!(fs_type, fs.1, "{fs_type}");
    // The profile has this file system unless told otherwise.
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
                profile,
            ])
            .args(["--decoys", "0", "--out"])
            .arg(&default),
    );
    let m: serde_json::Value =
        serde_json::from_slice(&std::fs::read(default.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(m["filesystem"]["type"], fs.1);
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
