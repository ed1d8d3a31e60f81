//! User signature files (scalpel.conf / foremost.conf syntax) on an image
//! built here with items planted at known places in random bytes, so the
//! expected items are known exactly: forward, REVERSE and NEXT footers,
//! no footer (maximum size), case-insensitive and wildcard headers, `\x`
//! escapes, a header and a footer straddling read blocks, a nested header,
//! a header without footer, and a terabyte maximum size running off the
//! end of the image. Aligned mode finds only sector-aligned headers. An
//! invalid signature file fails the run with its file and line named.

use crate::common;

use md5::Digest;
use std::collections::BTreeSet;
use std::path::Path;

const SECTOR: usize = 512;
const BLOCK: usize = 64 << 10;
const IMAGE: usize = 4 << 20;

const CONF: &str = "# test signatures, scalpel syntax
abc   y   4096            CASEHDR\\x01\\x02   \\xEE\\xFFEND
low   n   4096            lowerhdr           </low>
nof   y   1000            NOFOOT\\x00\\x11
rev   y   8192            REVHDR\\x7f         REVEND     REVERSE
nxt   y   8192            NXTHDR\\x7e         NXTSTOP    NEXT
wld   y   2048            WI??HDR\\x55        WEND
big   y   10000000000000  HUGEHDR\\x33
";

/// An item the carver must report: offset, length, extension, validation,
/// line of the signature.
type Expected = (u64, u64, &'static str, &'static str, usize);

struct Image {
    bytes: Vec<u8>,
    aligned: Vec<Expected>,
    unaligned: Vec<Expected>,
}

fn random(len: usize, seed: &mut u64) -> Vec<u8> {
    (0..len)
        .map(|_| {
            *seed ^= *seed << 13;
            *seed ^= *seed >> 7;
            *seed ^= *seed << 17;
            (*seed >> 24) as u8
        })
        .collect()
}

fn build() -> Image {
    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    let mut b = random(IMAGE, &mut seed);
    let mut aligned = Vec::new();
    let mut unaligned = Vec::new();
    let put = |b: &mut Vec<u8>, at: usize, bytes: &[u8]| {
        b[at..at + bytes.len()].copy_from_slice(bytes);
    };
    // Forward footer, with the same header nested inside (part of it).
    let at = 10 * SECTOR;
    put(&mut b, at, b"CASEHDR\x01\x02");
    put(&mut b, at + 100, b"CASEHDR\x01\x02");
    put(&mut b, at + 9 + 3000, b"\xEE\xFFEND");
    aligned.push((at as u64, 3014, "abc", "unchecked", 2));
    // Case-insensitive header and footer; the header straddles two read
    // blocks and is not sector-aligned.
    let at = BLOCK - 4;
    put(&mut b, at, b"LoWeRhDr");
    put(&mut b, at + 8 + 1000, b"</LOW>");
    unaligned.push((at as u64, 1014, "low", "unchecked", 3));
    // No footer: the maximum size.
    let at = 300 * SECTOR;
    put(&mut b, at, b"NOFOOT\x00\x11");
    aligned.push((at as u64, 1000, "nof", "unchecked", 4));
    // REVERSE: the last footer within the maximum size.
    let at = 400 * SECTOR;
    put(&mut b, at, b"REVHDR\x7f");
    put(&mut b, at + 2000, b"REVEND");
    put(&mut b, at + 5000, b"REVEND");
    put(&mut b, at + 9000, b"REVEND");
    aligned.push((at as u64, 5006, "rev", "unchecked", 5));
    // NEXT: up to the footer, excluded.
    let at = 600 * SECTOR;
    put(&mut b, at, b"NXTHDR\x7e");
    put(&mut b, at + 7 + 2000, b"NXTSTOP");
    aligned.push((at as u64, 2007, "nxt", "unchecked", 6));
    // Wildcards in the header; the footer straddles two read blocks.
    let at = 3 * BLOCK - 1024;
    put(&mut b, at, b"WIqzHDR\x55");
    put(&mut b, 3 * BLOCK - 2, b"WEND");
    aligned.push((at as u64, 1026, "wld", "unchecked", 7));
    // A header without its footer: cut at the maximum size.
    let at = 1000 * SECTOR;
    put(&mut b, at, b"CASEHDR\x01\x02");
    aligned.push((at as u64, 4096, "abc", "truncated", 2));
    // 10 TB maximum, 5 KiB before the end of the image.
    let at = IMAGE - 10 * SECTOR;
    put(&mut b, at, b"HUGEHDR\x33");
    aligned.push((at as u64, 5120, "big", "truncated", 8));
    unaligned.extend(aligned.iter().copied());
    Image {
        bytes: b,
        aligned,
        unaligned,
    }
}

fn run(image: &Path, conf: &Path, options: &[&str], case: &Path) -> std::process::Output {
    let signatures = format!("carve.signatures={:?}", conf.display().to_string());
    let mut all = vec![signatures.as_str()];
    all.extend_from_slice(options);
    common::stage_run("carve", image, case, &all)
        .args(["--threads", "2"])
        .output()
        .unwrap()
}

fn carved(image: &Path, conf: &Path, options: &[&str], bytes: &[u8]) -> BTreeSet<Expected> {
    let dir = tempfile::tempdir().unwrap();
    let case = dir.path();
    let out = run(image, conf, options, case);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let conn = rusqlite::Connection::open(case.join("case.sqlite")).unwrap();
    let mut st = conn
        .prepare(
            "SELECT offset, length, type, validation, signature, md5, case_path
             FROM carved_items WHERE method = 'data'",
        )
        .unwrap();
    let mut got = BTreeSet::new();
    let mut rows = st.query([]).unwrap();
    while let Some(r) = rows.next().unwrap() {
        let offset = r.get::<_, i64>(0).unwrap() as u64;
        let length = r.get::<_, i64>(1).unwrap() as u64;
        let ext: String = r.get(2).unwrap();
        let validation: String = r.get(3).unwrap();
        let signature: String = r.get(4).unwrap();
        let md5: String = r.get(5).unwrap();
        let path: String = r.get(6).unwrap();
        let (file, line) = signature.rsplit_once(':').unwrap();
        assert_eq!(file, "test.conf");
        let slice = &bytes[offset as usize..(offset + length) as usize];
        let want: String = md5::Md5::digest(slice)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(md5, want, "MD5 of the item at {offset}");
        assert_eq!(std::fs::read(case.join(&path)).unwrap(), slice, "{path}");
        let ext: &'static str = ["abc", "low", "nof", "rev", "nxt", "wld", "big"]
            .into_iter()
            .find(|e| *e == ext)
            .unwrap_or_else(|| panic!("unexpected type {ext}"));
        let validation: &'static str = ["unchecked", "truncated", "valid", "invalid"]
            .into_iter()
            .find(|v| *v == validation)
            .unwrap();
        got.insert((offset, length, ext, validation, line.parse().unwrap()));
    }
    got
}

#[test]
fn user_signatures_carve_exactly_the_planted_items() {
    let dir = tempfile::tempdir().unwrap();
    let img = build();
    let image = dir.path().join("planted.dd");
    std::fs::write(&image, &img.bytes).unwrap();
    let conf = dir.path().join("test.conf");
    std::fs::write(&conf, CONF).unwrap();
    let common_opts = [
        "carve.types=[]",
        "carve.meta=false",
        "carve.keep_broken=true",
        "carve.block_kib=64",
    ];
    let aligned = carved(&image, &conf, &common_opts, &img.bytes);
    let want: BTreeSet<Expected> = img.aligned.iter().copied().collect();
    assert_eq!(aligned, want, "aligned mode");
    let mut opts = common_opts.to_vec();
    opts.push("carve.aligned=false");
    let unaligned = carved(&image, &conf, &opts, &img.bytes);
    let want: BTreeSet<Expected> = img.unaligned.iter().copied().collect();
    assert_eq!(unaligned, want, "unaligned mode");
    // Without keep_broken, the truncated items are not kept.
    let mut opts = common_opts.to_vec();
    opts.retain(|o| !o.starts_with("carve.keep_broken"));
    let kept = carved(&image, &conf, &opts, &img.bytes);
    let want: BTreeSet<Expected> = img
        .aligned
        .iter()
        .copied()
        .filter(|e| e.3 != "truncated")
        .collect();
    assert_eq!(kept, want, "default: broken items dropped");
}

#[test]
fn invalid_signature_files_name_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let image = dir.path().join("small.dd");
    std::fs::write(&image, vec![0u8; 1 << 20]).unwrap();
    let cases: [(&str, &str); 6] = [
        ("jpg y 200000 \\xff\\xd8\\xff \\xff\\xd9\n", ""),
        ("# ok\njpg y 200000\n", "line 2"),
        ("jpg y 200000 \\xff\\xd8\n\npng y lots \\x89PNG\n", "line 3"),
        ("jpg y 200000 \\xff\\xzz\n", "line 1"),
        ("jpg maybe 200000 \\xff\\xd8\n", "line 1"),
        ("jpg y 200000 \\xff\\xd8 \\xff\\xd9 SIDEWAYS\n", "line 1"),
    ];
    for (i, (text, want)) in cases.iter().enumerate() {
        let conf = dir.path().join(format!("bad{i}.conf"));
        std::fs::write(&conf, text).unwrap();
        let case = tempfile::tempdir().unwrap();
        let out = run(&image, &conf, &["carve.meta=false"], case.path());
        if want.is_empty() {
            assert!(
                out.status.success(),
                "a valid file was refused: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            continue;
        }
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "bad{i}.conf accepted");
        assert!(
            err.contains(&format!("bad{i}.conf")) && err.contains(want),
            "bad{i}.conf: error does not name the file and {want}: {err}"
        );
    }
    let missing = dir.path().join("missing.conf");
    let case = tempfile::tempdir().unwrap();
    let out = run(&image, &missing, &[], case.path());
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("missing.conf"));
}
