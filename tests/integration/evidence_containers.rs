//! Evidence inside virtual-disk containers: a corpus image converted by
//! `qemu-img` to VMDK, VHD, VHDX and QCOW2 gives, through the whole
//! pre-processing chain, the raw image's media hash and the raw image's
//! bodyfile (MD5s included), with the container's own reads counted on
//! the evidence channel. A differencing disk is refused, naming its parent.
//! Skipped, with a notice, where `qemu-img` is not installed.

use crate::common;

use serde_json::Value;
use std::path::Path;

/// `run --stages image-hash,filesystem,file-hash --json` over `evidence`;
/// (run.json, bodyfile).
fn preprocess(evidence: &Path, case: &Path) -> (Value, String) {
    std::fs::create_dir_all(case).unwrap();
    let out = common::run_ok(
        common::stage_run("image-hash,filesystem,file-hash", evidence, case, &[]).arg("--json"),
    );
    let run: Value = serde_json::from_slice(&out.stdout).unwrap();
    let body = String::from_utf8(common::export(case, "bodyfile", &[])).unwrap();
    (run, body)
}

fn md5_of(run: &Value) -> String {
    run["stages"][0]["summary"]["details"]["md5"]
        .as_str()
        .unwrap_or_else(|| panic!("no image MD5: {}", run["stages"][0]))
        .to_string()
}

fn qemu_img(args: &[&str], from: &Path, to: &Path) {
    let out = std::process::Command::new("qemu-img")
        .args(args)
        .arg(from)
        .arg(to)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "qemu-img {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn containers_give_the_raw_image_s_hash_and_bodyfile() {
    let test = "containers_give_the_raw_image_s_hash_and_bodyfile";
    if !common::have_tool(test, "qemu-img") {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let (image, _) = common::corpus(
        &work.path().join("corpus"),
        &["--size", "48MiB", "--seed", "7"],
    );
    let (raw_run, raw_body) = preprocess(&image, &work.path().join("raw-case"));
    let raw_md5 = md5_of(&raw_run);
    assert_eq!(raw_md5, common::md5_hex(&std::fs::read(&image).unwrap()));
    assert!(raw_body.lines().count() > 100, "{raw_body}");
    let variants: &[(&str, &[&str], &str)] = &[
        (
            "sparse.vmdk",
            &["convert", "-O", "vmdk", "-o", "subformat=monolithicSparse"],
            "vmdk",
        ),
        (
            "stream.vmdk",
            &["convert", "-O", "vmdk", "-o", "subformat=streamOptimized"],
            "vmdk",
        ),
        (
            "flat.vmdk",
            &["convert", "-O", "vmdk", "-o", "subformat=monolithicFlat"],
            "vmdk",
        ),
        (
            "dynamic.vhd",
            &[
                "convert",
                "-O",
                "vpc",
                "-o",
                "subformat=dynamic,force_size=on",
            ],
            "vhd",
        ),
        (
            "fixed.vhd",
            &[
                "convert",
                "-O",
                "vpc",
                "-o",
                "subformat=fixed,force_size=on",
            ],
            "vhd",
        ),
        ("disk.vhdx", &["convert", "-O", "vhdx"], "vhdx"),
        ("disk.qcow2", &["convert", "-O", "qcow2"], "qcow2"),
        (
            "compressed.qcow2",
            &["convert", "-c", "-O", "qcow2"],
            "qcow2",
        ),
    ];
    for (name, args, format) in variants {
        let container = work.path().join(name);
        qemu_img(args, &image, &container);
        let case = work.path().join(format!("{name}-case"));
        let (run, body) = preprocess(&container, &case);
        assert_eq!(
            run["evidence"]["format"], *format,
            "{name}: {}",
            run["evidence"]
        );
        assert_eq!(md5_of(&run), raw_md5, "{name}: media MD5");
        assert_eq!(body, raw_body, "{name}: bodyfile against the raw image's");
        // The container's own tables are read on the evidence channel too.
        let read = run["totals"]["channels"]["evidence"]["bytes_read"]
            .as_u64()
            .unwrap();
        assert!(read > 0, "{name}: nothing read on the evidence channel");
    }
}

#[test]
fn a_differencing_disk_is_refused_naming_its_parent() {
    let test = "a_differencing_disk_is_refused_naming_its_parent";
    if !common::have_tool(test, "qemu-img") {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let base = work.path().join("base.qcow2");
    let out = std::process::Command::new("qemu-img")
        .args(["create", "-f", "qcow2"])
        .arg(&base)
        .arg("16M")
        .output()
        .unwrap();
    assert!(out.status.success());
    let child = work.path().join("child.qcow2");
    let out = std::process::Command::new("qemu-img")
        .args(["create", "-f", "qcow2", "-F", "qcow2", "-b"])
        .arg(&base)
        .arg(&child)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let case = work.path().join("case");
    std::fs::create_dir_all(&case).unwrap();
    let out = common::stage_run("image-hash", &child, &case, &[])
        .output()
        .unwrap();
    assert!(!out.status.success(), "a differencing disk was read");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("base.qcow2"), "the parent is not named: {err}");
}
