//! `caseload corpus --format dd,e01`: the E01 is written from the same byte
//! stream as the raw image, verifies with libewf, reads back through the
//! engine to the manifest's image hashes, and is byte-identical run to run.

use crate::common;

use std::path::Path;

fn corpus(out: &Path, formats: &str, threads: &str) {
    let o = common::caseload()
        .args([
            "corpus",
            "--size",
            "40MiB",
            "--seed",
            "31",
            "--decoys",
            "10",
            "--format",
            formats,
            "--threads",
            threads,
        ])
        .arg("--out")
        .arg(out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn corpus_e01_matches_the_raw_image_and_repeats() {
    let work = tempfile::tempdir().unwrap();
    let a = work.path().join("a");
    corpus(&a, "dd,e01", "2");
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(a.join("manifest.json")).unwrap()).unwrap();
    let md5 = manifest["image"]["md5"].as_str().unwrap().to_string();

    // The engine reads the E01 to the manifest's hashes, and checks them
    // against the hashes stored in it.
    let case = work.path().join("case");
    std::fs::create_dir(&case).unwrap();
    let o = common::caseload()
        .args([
            "run",
            "--stages",
            "image-hash",
            "--cache",
            "warm",
            "--json",
            "--evidence",
        ])
        .arg(a.join("image.E01"))
        .args(
            ["--database", "--case", "--temp"]
                .iter()
                .flat_map(|f| [f.to_string(), case.display().to_string()]),
        )
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let run: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let d = &run["stages"][0]["summary"]["details"];
    assert_eq!(d["md5"].as_str(), Some(md5.as_str()));
    assert_eq!(d["sha1"], manifest["image"]["sha1"]);
    assert_eq!(d["verified"], "match");

    if common::have_tool("corpus_e01_matches_the_raw_image_and_repeats", "ewfverify") {
        let v = std::process::Command::new("ewfverify")
            .arg("-q")
            .arg(a.join("image.E01"))
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&v.stdout);
        assert!(v.status.success() && text.contains("SUCCESS"), "{text}");
        assert!(text.contains(&md5), "{text}");
    }

    // E01 only: no raw image, same E01 bytes, whatever the thread count.
    let b = work.path().join("b");
    corpus(&b, "e01", "1");
    assert!(!b.join("image.dd").exists());
    assert_eq!(
        std::fs::read(a.join("image.E01")).unwrap(),
        std::fs::read(b.join("image.E01")).unwrap()
    );
}
