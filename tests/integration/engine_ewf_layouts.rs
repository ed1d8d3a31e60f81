//! E01 layouts that stress how a chunk's stored size is found: a short,
//! uncompressed final chunk (libewf `-c none` on a source that is not a
//! whole number of chunks; the `ewf` crate's table overstates its size,
//! which the engine once took for a truncated segment) and a segment
//! holding more than one table group (more than 65534 chunks). The engine
//! must hash both to the source's MD5.

use crate::common;

use md5::{Digest, Md5};
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

/// Deterministic, incompressible bytes.
fn noise(len: usize, mut state: u64) -> Vec<u8> {
    (0..len)
        .map(|_| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (state >> 56) as u8
        })
        .collect()
}

/// `caseload run --stages image-hash` on `evidence`; returns the MD5 hex.
fn engine_md5(evidence: &Path) -> String {
    let dir = tempfile::tempdir().expect("tempdir");
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
        .expect("run caseload");
    assert!(
        out.status.success(),
        "{}: {}",
        evidence.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let run: serde_json::Value = serde_json::from_slice(&out.stdout).expect("run json");
    run["stages"][0]["summary"]["details"]["md5"]
        .as_str()
        .unwrap_or_else(|| panic!("no md5 in {run}"))
        .to_string()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn libewf_uncompressed_short_final_chunk() {
    if !common::have_tool("libewf_uncompressed_short_final_chunk", "ewfacquirestream") {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    // 3 whole 32 KiB chunks and a 2 KiB tail: the last chunk is short.
    let data = noise(100_352, 7);
    let target = dir.path().join("short");
    let mut child = Command::new("ewfacquirestream")
        .args(["-q", "-c", "none", "-t"])
        .arg(&target)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start ewfacquirestream");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(&data)
        .expect("feed ewfacquirestream");
    let out = child.wait_with_output().expect("ewfacquirestream");
    assert!(
        out.status.success(),
        "ewfacquirestream: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        engine_md5(&dir.path().join("short.E01")),
        hex(&Md5::digest(&data))
    );
}

#[test]
fn table_groups_beyond_65534_chunks_in_one_segment() {
    let dir = tempfile::tempdir().expect("tempdir");
    // 4 KiB chunks: 66 000 of them force a second sectors/table group in
    // the one segment. Zeros with a noisy tail, so the last chunks of the
    // second group are compressed and the very last one is not.
    let zeros = 66_000u64 * 4096;
    let tail = noise(4096 + 1536, 11);
    let raw = dir.path().join("groups.dd");
    {
        let mut f = std::fs::File::create(&raw).expect("create raw");
        f.set_len(zeros).expect("sparse zeros");
        std::io::Seek::seek(&mut f, std::io::SeekFrom::End(0)).expect("seek");
        f.write_all(&tail).expect("tail");
    }
    let mut md5 = Md5::new();
    let block = vec![0u8; 1 << 20];
    let mut left = zeros;
    while left > 0 {
        let n = left.min(block.len() as u64) as usize;
        md5.update(&block[..n]);
        left -= n as u64;
    }
    md5.update(&tail);
    let want = hex(&md5.finalize());

    let prefix = dir.path().join("groups");
    let out = common::caseload()
        .args(["convert", "--to", "e01", "--compression", "fast"])
        .args(["--chunk-sectors", "8", "--segment-size", "2GiB"])
        .arg("--out")
        .arg(&prefix)
        .arg(&raw)
        .output()
        .expect("run caseload convert");
    assert!(
        out.status.success(),
        "convert: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let e01 = dir.path().join("groups.E01");
    assert!(
        !dir.path().join("groups.E02").exists(),
        "expected one segment"
    );
    assert_eq!(engine_md5(&e01), want);
}
