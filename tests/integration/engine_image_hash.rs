//! `caseload run --stages image-hash` against real images with published
//! hashes: raw and E01, single and multi-segment. Skipped (with a notice)
//! when `../shared/real-images` is absent.

use crate::common;

use std::path::Path;

/// Run image-hash on `evidence` into a fresh temp layout; returns run.json.
fn image_hash(evidence: &Path) -> serde_json::Value {
    let dir = tempfile::tempdir().unwrap();
    let out = common::caseload()
        .args(["run", "--stages", "image-hash", "--cache", "warm", "--json"])
        .arg("--evidence")
        .arg(evidence)
        .arg("--database")
        .arg(dir.path())
        .arg("--case")
        .arg(dir.path())
        .arg("--temp")
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}: {}",
        evidence.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn details(run: &serde_json::Value) -> &serde_json::Value {
    &run["stages"][0]["summary"]["details"]
}

/// `md5(container file)` of a raw image's oracle summary.
fn oracle_md5(root: &Path, name: &str) -> String {
    let text =
        std::fs::read_to_string(root.join("oracles").join(name).join("summary.txt")).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix("md5(container file): "))
        .unwrap()
        .trim()
        .to_string()
}

/// The MD5 ewfverify calculated over an E01's data.
fn ewfverify_md5(root: &Path, name: &str) -> String {
    let text =
        std::fs::read_to_string(root.join("oracles").join(name).join("ewfverify.txt")).unwrap();
    text.lines()
        .find_map(|l| l.trim().strip_prefix("MD5 hash calculated over data:"))
        .unwrap()
        .trim()
        .to_string()
}

#[test]
fn raw_images_hash_to_their_published_md5() {
    let Some(root) = common::real_images("raw_images_hash_to_their_published_md5") else {
        return;
    };
    let truth: serde_json::Value =
        serde_json::from_slice(&std::fs::read(root.join("dftt/dftt_ground_truth.json")).unwrap())
            .unwrap();
    let raws: &[(&str, &str)] = &[
        ("dftt/6-undel-fat/6-fat-undel.dd", "6-fat-undel.dd"),
        ("dftt/7-undel-ntfs/7-ntfs-undel.dd", "7-ntfs-undel.dd"),
        ("dftt/8-jpeg-search/8-jpeg-search.dd", "8-jpeg-search.dd"),
        ("dftt/2-kwsrch-fat/fat-img-kw.dd", "fat-img-kw.dd"),
        ("dftt/9-fat-label/9-fat-label.dd", "9-fat-label.dd"),
        ("dftt/5-fat-daylight/daylight.dd", "daylight.dd"),
        ("ewf/image.dd", "image.dd"),
        ("fat/fat12.img", "fat12.img"),
        ("ntfs/testfs1", "testfs1"),
    ];
    for (path, oracle) in raws {
        let run = image_hash(&root.join(path));
        let md5 = details(&run)["md5"].as_str().unwrap().to_string();
        assert_eq!(md5, oracle_md5(&root, oracle), "{path}");
        if let Some(published) = truth["images"][oracle]["md5_published"].as_str() {
            assert_eq!(md5, published, "{path} against the DFTT published MD5");
        }
        assert_eq!(details(&run)["verified"], "not-stored", "{path}");
        assert_eq!(run["evidence"]["format"], "raw");
    }
}

#[test]
fn e01_images_hash_to_their_stored_and_verified_md5() {
    let Some(root) = common::real_images("e01_images_hash_to_their_stored_and_verified_md5") else {
        return;
    };
    let e01s: &[(&str, Option<&str>)] = &[
        ("ewf/imageformat_mmls_1.E01", Some("imageformat_mmls_1.E01")),
        ("ewf/image.E01", None),
        ("ewf/nps-2010-emails.E01", Some("nps-2010-emails.E01")),
        ("ewf/ntfs_sample.E01", Some("ntfs_sample.E01")),
        ("ewf/exfat1.E01", Some("exfat1.E01")),
        ("ewf/multiseg_v1.E01", None),
        ("dftt-e01/6-fat-undel.E01", None),
        ("dftt-e01/7-ntfs-undel.E01", None),
        ("dftt-e01/8-jpeg-search.E01", None),
        ("dftt-e01/9-fat-label.E01", None),
        ("dftt-e01/fat-img-kw.E01", None),
    ];
    for (path, oracle) in e01s {
        let run = image_hash(&root.join(path));
        let d = details(&run);
        assert_eq!(d["verified"], "match", "{path}: {d}");
        assert_eq!(d["md5"], d["stored_md5"], "{path}");
        if let Some(o) = oracle {
            assert_eq!(
                d["md5"].as_str().unwrap(),
                ewfverify_md5(&root, o),
                "{path} against ewfverify"
            );
        }
        if d.get("stored_sha1").is_some() {
            assert_eq!(d["sha1"], d["stored_sha1"], "{path}");
        }
        assert_eq!(run["evidence"]["format"], "ewf");
    }
    // The multi-segment set is read whole, with the author's published MD5.
    let multi = image_hash(&root.join("ewf/multiseg_v1.E01"));
    assert_eq!(multi["evidence"]["files"].as_array().unwrap().len(), 8);
    assert_eq!(details(&multi)["md5"], "2692f3177a389e58906b5c9080aa1add");
    // E01 and raw twins hash alike.
    for (e01, raw) in [
        ("ewf/image.E01", "ewf/image.dd"),
        ("ewf/ntfs_sample.E01", "ntfs/ntfs_sample_partition.dd"),
        (
            "dftt-e01/6-fat-undel.E01",
            "dftt/6-undel-fat/6-fat-undel.dd",
        ),
    ] {
        let a = image_hash(&root.join(e01));
        let b = image_hash(&root.join(raw));
        assert_eq!(details(&a)["md5"], details(&b)["md5"], "{e01} vs {raw}");
        assert_eq!(details(&a)["sha1"], details(&b)["sha1"], "{e01} vs {raw}");
    }
}
