//! `caseload hashset import` on bad input: malformed lines are reported
//! with their line numbers and skipped (or stop a `--strict` import with
//! nothing imported); wrong lengths, non-hex characters and duplicates are
//! named; an empty file, a truncated or damaged RDS v3 SQLite file are
//! refused with a clear message; and no failed, interrupted or killed
//! import is ever presented as a complete set or used for lookups.

use crate::common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Output;

fn import(library: &Path, name: &str, extra: &[&str], files: &[&Path]) -> Output {
    common::caseload()
        .args(["hashset", "import", "--library"])
        .arg(library)
        .args(["--name", name, "--category", "notable"])
        .args(extra)
        .args(files)
        .output()
        .unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The library's sets as `hashset list --json` gives them.
fn sets(library: &Path) -> Vec<serde_json::Value> {
    let out = common::caseload()
        .args(["hashset", "list", "--json", "--library"])
        .arg(library)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    serde_json::from_slice::<serde_json::Value>(&out.stdout)
        .unwrap()
        .as_array()
        .unwrap()
        .clone()
}

/// `hashset lookup` of `hashes`: the answer column per line.
fn lookup(library: &Path, hashes: &[&str]) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let q = dir.path().join("q.txt");
    std::fs::write(&q, hashes.join("\n")).unwrap();
    let out = common::caseload()
        .args(["hashset", "lookup", "--library"])
        .arg(library)
        .arg(&q)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| l.split_once('\t').unwrap().1.to_string())
        .collect()
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

const A: &str = "d41d8cd98f00b204e9800998ecf8427e";
const B: &str = "0cc175b9c0f1b6a831c399e269772661";
const C: &str = "92eb5ffee6ae2fec3ad71c777531578f";

#[test]
fn malformed_lines_are_named_by_line_and_strict_mode_imports_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let lib = dir.path().join("kff.sqlite");
    let list = write(
        dir.path(),
        "bad.md5",
        format!(
            "# notable files\n{A}  empty.txt\n{}  short\n{}g  nonhex\n\n{B}  a.txt\n{}  again.txt\n{C}\n",
            &B[..31],
            &C[..31],
            A.to_uppercase()
        )
        .as_bytes(),
    );

    // Strict: refused at line 3, and nothing is in the library.
    let out = import(&lib, "bad", &["--strict"], &[&list]);
    assert!(!out.status.success());
    let t = text(&out);
    assert!(t.contains("line 3"), "{t}");
    assert!(t.contains("31 characters, expected 32 hex digits"), "{t}");
    assert!(t.contains("nothing was imported"), "{t}");
    assert!(sets(&lib).is_empty());
    assert_eq!(lookup(&lib, &[A]), ["-"]);

    // Lenient: every problem is named with its line, the rest imported.
    let out = import(&lib, "bad", &[], &[&list]);
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    assert!(
        t.contains("line 3: MD5 `0cc175b9c0f1b6a831c399e26977266` has 31 characters, expected 32 hex digits"),
        "{t}"
    );
    assert!(
        t.contains("line 4: MD5 `92eb5ffee6ae2fec3ad71c777531578g` has a non-hex character `g` at position 32"),
        "{t}"
    );
    assert!(
        t.contains(&format!(
            "line 7: duplicate MD5 {A} (first on line 2); merged"
        )),
        "{t}"
    );
    let s = sets(&lib);
    assert_eq!(s.len(), 1);
    assert_eq!(s[0]["status"], "complete");
    assert_eq!(s[0]["md5"], 3);
    assert_eq!(s[0]["records"], 4);
    assert_eq!(s[0]["malformed"], 2);
    assert_eq!(s[0]["duplicates"], 1);
    assert_eq!(
        lookup(&lib, &[A, B, C, &B[..31]]),
        ["bad:notable", "bad:notable", "bad:notable", "invalid"]
    );

    // The same name again is refused; --replace swaps it whole.
    let out = import(&lib, "bad", &[], &[&list]);
    assert!(!out.status.success());
    assert!(text(&out).contains("already holds a set named `bad`"));
    let one = write(dir.path(), "one.md5", format!("{B}  b\n").as_bytes());
    let out = import(&lib, "bad", &["--replace"], &[&one]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(lookup(&lib, &[A, B]), ["-", "bad:notable"]);

    // NSRL RDS 2.x: CRLF, a Latin-1 name, a wrong-length SHA-1, a
    // truncated last line; line numbers count the header.
    let mut nsrl = b"\"SHA-1\",\"MD5\",\"CRC32\",\"FileName\",\"FileSize\",\"ProductCode\",\"OpSystemCode\",\"SpecialCode\"\r\n".to_vec();
    nsrl.extend_from_slice(b"\"DA39A3EE5E6B4B0D3255BFEF95601890AFD80709\",\"D41D8CD98F00B204E9800998ECF8427E\",\"00000000\",\"caf\xE9.txt\",0,1,\"WIN\",\"\"\r\n");
    nsrl.extend_from_slice(b"\"86F7E437FAA5A7FCE15D1DDCB9EAEAEA377667B\",\"0CC175B9C0F1B6A831C399E269772661\",\"E8B7BE43\",\"a.txt\",1,1,\"WIN\",\"\"\r\n");
    nsrl.extend_from_slice(b"\"E9D71F5EE7C92D6DC9E92FFDAD17B8BD49418F98\",\"92EB5FFEE6AE2FEC3AD71C777531578F\",\"71BEEFF9\",\"b.txt\",1,1,\"WIN\",\"\"\r\n");
    nsrl.extend_from_slice(b"\"84A516841BA77A5B4648DE2CD0DFCB30EA46DBB4\",\"4A8A08F09D37B737956");
    let f = write(dir.path(), "NSRLFile.txt", &nsrl);
    let out = import(&lib, "nsrl", &[], &[&f]);
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    assert!(t.contains("nsrl-rds2"), "{t}");
    assert!(
        t.contains(
            "line 3: SHA-1 `86F7E437FAA5A7FCE15D1DDCB9EAEAEA377667B` has 39 characters, expected 40"
        ),
        "{t}"
    );
    assert!(
        t.contains("line 5: 2 fields, the header names 8 (truncated line?)"),
        "{t}"
    );
    let s = sets(&lib);
    let nsrl_set = s.iter().find(|s| s["name"] == "nsrl").unwrap();
    assert_eq!(nsrl_set["md5"], 2);
    assert_eq!(nsrl_set["sha1"], 2);
    assert_eq!(nsrl_set["malformed"], 2);
}

#[test]
fn empty_unknown_and_all_bad_files_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let lib = dir.path().join("kff.sqlite");
    let empty = write(dir.path(), "empty.md5", b"");
    let out = import(&lib, "e", &[], &[&empty]);
    assert!(!out.status.success());
    assert!(
        text(&out).contains("empty.md5` is empty: a hash set needs at least one entry"),
        "{}",
        text(&out)
    );
    let prose = write(dir.path(), "notes.txt", b"these are not hashes\n");
    let out = import(&lib, "p", &[], &[&prose]);
    assert!(!out.status.success());
    let t = text(&out);
    assert!(t.contains("cannot tell the format"), "{t}");
    assert!(t.contains("--format"), "{t}");
    let bad = write(
        dir.path(),
        "bad.md5",
        format!("{}  x\nxyz  y\n", &A[..30]).as_bytes(),
    );
    let out = import(&lib, "b", &["--format", "md5sum"], &[&bad]);
    assert!(!out.status.success());
    let t = text(&out);
    assert!(
        t.contains("holds no valid hash entry (all 2 data lines are malformed)"),
        "{t}"
    );
    // A good file with an empty one: the whole set is refused, the good
    // file's hashes are not left behind.
    let good = write(dir.path(), "good.md5", format!("{A}  a\n").as_bytes());
    let out = import(&lib, "g", &[], &[&good, &empty]);
    assert!(!out.status.success());
    assert!(sets(&lib).is_empty());
    assert_eq!(lookup(&lib, &[A]), ["-"]);
}

/// An RDS v3-style database of `rows` rows.
fn rds3(path: &Path, rows: u32) {
    let c = rusqlite::Connection::open(path).unwrap();
    c.execute_batch(
        "PRAGMA page_size = 4096; PRAGMA journal_mode = DELETE;
         CREATE TABLE FILE (sha256 VARCHAR NOT NULL, sha1 VARCHAR NOT NULL, md5 VARCHAR NOT NULL,
            crc32 VARCHAR NOT NULL, file_name VARCHAR NOT NULL, file_size INTEGER NOT NULL,
            package_id INTEGER NOT NULL);
         BEGIN;",
    )
    .unwrap();
    let mut st = c
        .prepare("INSERT INTO FILE VALUES (?1, ?2, ?3, '00000000', 'name.bin', 1, 1)")
        .unwrap();
    for i in 0..rows {
        st.execute(rusqlite::params![
            format!("{i:064X}"),
            format!("{i:040X}"),
            format!("{i:032X}")
        ])
        .unwrap();
    }
    drop(st);
    c.execute_batch("COMMIT;").unwrap();
}

#[test]
fn truncated_and_damaged_rds3_files_import_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let lib = dir.path().join("kff.sqlite");
    let db = dir.path().join("RDSv3.db");
    rds3(&db, 20_000);
    let bytes = std::fs::read(&db).unwrap();
    assert!(bytes.len() > 100 * 4096);

    // Cut mid-page and at a page boundary: the header's page count tells.
    for (name, len) in [
        ("cut-mid.db", bytes.len() / 2 + 1000),
        ("cut-page.db", bytes.len() / 2 / 4096 * 4096),
        ("cut-header.db", 60),
    ] {
        let p = write(dir.path(), name, &bytes[..len]);
        let out = import(&lib, "rds", &[], &[&p]);
        assert!(!out.status.success());
        let t = text(&out);
        assert!(
            t.contains(&format!("{name}` is a damaged or truncated SQLite file")),
            "{t}"
        );
        assert!(t.contains("truncated") || t.contains("shorter"), "{t}");
    }
    // Whole length, but the table's later pages overwritten: the failure
    // comes mid-read, after thousands of rows were taken.
    let mut damaged = bytes.clone();
    let from = bytes.len() * 3 / 4 / 4096 * 4096;
    for b in &mut damaged[from..] {
        *b = 0xA5;
    }
    let p = write(dir.path(), "damaged.db", &damaged);
    let out = import(&lib, "rds", &[], &[&p]);
    assert!(!out.status.success());
    let t = text(&out);
    assert!(
        t.contains("damaged.db` is a damaged or truncated SQLite file: reading row "),
        "{t}"
    );
    assert!(sets(&lib).is_empty(), "nothing of a failed import remains");
    assert_eq!(lookup(&lib, &[&format!("{:032X}", 7)]), ["-"]);

    // The intact file imports whole.
    let out = import(&lib, "rds", &[], &[&db]);
    assert!(out.status.success(), "{}", text(&out));
    let s = sets(&lib);
    assert_eq!(s[0]["md5"], 20_000);
    assert_eq!(s[0]["sha256"], 20_000);
    assert_eq!(lookup(&lib, &[&format!("{:032X}", 7)]), ["rds:notable"]);
}

#[test]
fn a_killed_import_is_never_presented_as_complete() {
    let dir = tempfile::tempdir().unwrap();
    let lib = dir.path().join("kff.sqlite");
    // 5 million MD5s: the import commits its first rows (every 2 million)
    // well before it finishes.
    let src = dir.path().join("big.md5");
    {
        let mut w = std::io::BufWriter::new(std::fs::File::create(&src).unwrap());
        for i in 0..5_000_000u64 {
            writeln!(
                w,
                "{:016x}{:016x}",
                i.wrapping_mul(0x9E37_79B9_7F4A_7C15),
                i
            )
            .unwrap();
        }
    }
    let mut child = common::caseload()
        .args(["hashset", "import", "--library"])
        .arg(&lib)
        .args(["--name", "big", "--category", "known", "--memory", "64MiB"])
        .arg(&src)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Wait until hashes of the set are committed to the library, then kill.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(300);
    let mut committed = false;
    while std::time::Instant::now() < deadline {
        if let Some(status) = child.try_wait().unwrap() {
            panic!("the import ended ({status}) before it could be killed");
        }
        if let Ok(c) =
            rusqlite::Connection::open_with_flags(&lib, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            && let Ok(n) = c.query_row(
                "SELECT count(*) FROM (SELECT 1 FROM kff_md5 LIMIT 1)",
                [],
                |r| r.get::<_, i64>(0),
            )
            && n > 0
        {
            committed = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(committed, "no rows committed in time");
    child.kill().unwrap();
    child.wait().unwrap();

    // The set is listed as importing, never used.
    let s = sets(&lib);
    assert_eq!(s.len(), 1);
    assert_eq!(s[0]["status"], "importing");
    let first = format!("{:016x}{:016x}", 0, 0);
    assert_eq!(lookup(&lib, &[&first]), ["-"]);
    let out = common::caseload()
        .args(["hashset", "list", "--library"])
        .arg(&lib)
        .output()
        .unwrap();
    assert!(text(&out).contains("importing?"), "{}", text(&out));

    // A new import of the same name completes and is the only one used;
    // removing the name clears both.
    let small = write(dir.path(), "small.md5", format!("{first}  x\n").as_bytes());
    let out = import(&lib, "big", &[], &[&small]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(lookup(&lib, &[&first]), ["big:notable"]);
    let out = common::caseload()
        .args(["hashset", "remove", "--library"])
        .arg(&lib)
        .arg("big")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("removed 2 set(s)"), "{}", text(&out));
    assert!(sets(&lib).is_empty());
    let c = rusqlite::Connection::open(&lib).unwrap();
    let n: i64 = c
        .query_row("SELECT count(*) FROM kff_md5", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n, 0, "the killed import's rows are gone");
}
