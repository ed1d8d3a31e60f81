//! The kernels a run used: recorded in run.json, forced by
//! `CASELOAD_KERNEL_*` with the same digests, and a forced name the CPU
//! lacks refused before anything is written.

use crate::common;

/// A 3 MiB + 5 byte raw image of patternless bytes, and its MD5, SHA-1
/// and SHA-256 by independent crates.
fn image(dir: &std::path::Path) -> (std::path::PathBuf, [String; 3]) {
    use sha1::Digest as _;
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let data: Vec<u8> = (0..(3 << 20) + 5)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    let path = dir.join("noise.dd");
    std::fs::write(&path, &data).unwrap();
    let hex = |d: &[u8]| d.iter().map(|b| format!("{b:02x}")).collect::<String>();
    (
        path,
        [
            common::md5_hex(&data),
            hex(&sha1::Sha1::digest(&data)),
            hex(&sha2::Sha256::digest(&data)),
        ],
    )
}

fn image_hash(
    image: &std::path::Path,
    case: &std::path::Path,
    env: &[(&str, &str)],
) -> std::process::Output {
    let mut cmd = common::stage_run(
        "image-hash",
        image,
        case,
        &[r#"image-hash.algorithms=["md5","sha1","sha256"]"#],
    );
    cmd.arg("--json");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

#[test]
fn every_md5_implementation_gives_the_same_image_hash_and_is_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let (image, [md5, sha1, sha256]) = image(dir.path());
    // The measured choice first, which also lists what runs here.
    let case = dir.path().join("measured");
    std::fs::create_dir(&case).unwrap();
    let out = image_hash(&image, &case, &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let kernels = run["system"]["kernels"].as_array().unwrap().clone();
    let md5_kernel = kernels.iter().find(|k| k["kernel"] == "md5").unwrap();
    assert!(
        ["measured", "only"].contains(&md5_kernel["how"].as_str().unwrap()),
        "{md5_kernel}"
    );
    let available: Vec<String> = md5_kernel["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["available"] == true)
        .map(|c| c["name"].as_str().unwrap().to_string())
        .collect();
    assert!(available.contains(&"rust".to_string()), "{available:?}");
    for name in &available {
        let case = dir.path().join(format!("forced-{name}"));
        std::fs::create_dir(&case).unwrap();
        let out = image_hash(&image, &case, &[("CASELOAD_KERNEL_MD5", name)]);
        assert!(
            out.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let run: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let details = &run["stages"][0]["summary"]["details"];
        assert_eq!(details["md5"], md5.as_str(), "{name}");
        assert_eq!(details["sha1"], sha1.as_str(), "{name}");
        assert_eq!(details["sha256"], sha256.as_str(), "{name}");
        let k = run["system"]["kernels"]
            .as_array()
            .unwrap()
            .iter()
            .find(|k| k["kernel"] == "md5")
            .unwrap()
            .clone();
        assert_eq!(k["chosen"], name.as_str());
        assert_eq!(k["how"], "forced");
    }
}

#[test]
fn a_forced_kernel_this_cpu_cannot_run_is_refused_before_anything_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let (image, _) = image(dir.path());
    let case = dir.path().join("case");
    std::fs::create_dir(&case).unwrap();
    for (var, value) in [
        ("CASELOAD_KERNEL_MD5", "sse9"),
        ("CASELOAD_KERNEL_SHA1_LANES", "neon-64"),
    ] {
        let out = image_hash(&image, &case, &[(var, value)]);
        assert!(!out.status.success(), "{var}={value} was accepted");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(&format!("{var}={value}: no such implementation"))
                && err.contains("available here:"),
            "{err}"
        );
        assert_eq!(
            std::fs::read_dir(&case).unwrap().count(),
            0,
            "something was written"
        );
    }
    // A known implementation that this CPU lacks is named as such. Which one
    // that is depends on the CPU: AVX-512 where absent, else nothing to try.
    let doctor = common::run_ok(common::caseload().args(["doctor", "--json"]));
    let system: serde_json::Value = serde_json::from_slice(&doctor.stdout).unwrap();
    let lacking = system["kernels"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|k| k["env"].is_string())
        .find_map(|k| {
            let c = k["candidates"]
                .as_array()?
                .iter()
                .find(|c| c["available"] == false)?;
            Some((
                k["env"].as_str()?.to_string(),
                c["name"].as_str()?.to_string(),
            ))
        });
    match lacking {
        Some((var, name)) => {
            let out = image_hash(&image, &case, &[(&var, &name)]);
            assert!(!out.status.success(), "{var}={name} was accepted");
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(
                err.contains(&format!("{var}={name}: not available here (")),
                "{err}"
            );
            assert_eq!(std::fs::read_dir(&case).unwrap().count(), 0);
        }
        None => eprintln!(
            "NOTICE: this CPU and build run every kernel candidate; the refusal of a lacking one is checked by the digests unit test"
        ),
    }
}
