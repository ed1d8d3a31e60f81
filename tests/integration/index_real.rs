//! The index stage and `caseload search` on real images with published
//! answer keys (`../shared/real-images`):
//!
//! - DFTT #2 (`fat-img-kw.dd`): every keyword of the published key that
//!   lies inside one item is found in that item: in a file's content
//!   (including the two keywords split across fragments of a file, which
//!   only a logical search finds, and the deleted file's), in the slack of
//!   the named file, in unallocated space; the key's case-insensitive and
//!   regular-expression variations find what the key says. Keywords that
//!   cross from one item into another (two files, a file into its slack,
//!   slack into the next file) are not whole in any item's text, so a
//!   logical index does not find them (the key says some tools will not);
//!   the test checks that they are not reported anywhere as whole words.
//! - `nps-2010-emails.E01`: every e-mail address that external tools find in
//!   a document (TSK `icat` for the content; `pdftotext`, `unzip -p`,
//!   `gzip -dc`, `strings` for the text; `grep -oE` for the addresses) is
//!   found in the same document by `caseload search --regex`.

use crate::common;
use crate::index_support;

use index_support::{Hit, run_into, search};
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

/// The filesystem and index stages with `--stage-option`s.
fn run(evidence: &Path, case: &Path, options: &[&str]) {
    let extra: Vec<&str> = options.iter().flat_map(|o| ["--stage-option", o]).collect();
    run_into(case, evidence, "filesystem,index", "2", &extra);
}

/// Labels of the hits of `kind`.
fn labels(hits: &[Hit], kind: &str) -> BTreeSet<String> {
    hits.iter()
        .filter(|h| h.kind == kind)
        .map(|h| h.label.clone())
        .collect()
}

/// A path as the key names it: FAT short names are upper-case, and a
/// deleted one shows `_` for its first letter (as TSK prints it).
fn same_name(path: &str, key_name: &str) -> bool {
    let (p, k) = (path.to_ascii_lowercase(), key_name.to_ascii_lowercase());
    p == k || (p.starts_with('_') && p.get(1..) == k.get(1..))
}

/// A regular expression matching `s` literally.
fn escape(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        if "\\.+*?()|[]{}^$#&-~ ".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[test]
fn dftt_keyword_search_key() {
    let Some(real) = common::real_images("dftt_keyword_search_key") else {
        return;
    };
    let image = real.join("dftt/2-kwsrch-fat/fat-img-kw.dd");
    let truth: serde_json::Value =
        serde_json::from_slice(&std::fs::read(real.join("dftt/dftt_ground_truth.json")).unwrap())
            .unwrap();
    let key = &truth["images"]["fat-img-kw.dd"];
    let case = tempfile::tempdir().unwrap();
    run(
        &image,
        case.path(),
        &["index.slack=true", "index.unallocated=true"],
    );
    let case = case.path();

    let mut checked = 0;
    for k in key["keywords_case_sensitive"].as_array().unwrap() {
        let word = k["string"].as_str().unwrap();
        let note = k["note"].as_str().unwrap();
        let file = k["file"].as_str();
        let byte = k["byte_offset"].as_u64().unwrap();
        // Case-sensitive and exact: a regular expression of the literal.
        let exact = search(case, &escape(word), true);
        // The index's own query: the word's tokens as a phrase.
        let indexed = search(case, &format!("\"{word}\""), false);
        let (kind, want): (&str, Option<String>) = match (file, note) {
            (None, n) if n.contains("dentry") => {
                // A name in a directory entry is metadata, not content.
                continue;
            }
            (None, n) if n.contains("unalloc") => ("unallocated", None),
            (Some(f), n) if n.starts_with("crosses") && f.contains(" and ") => {
                // Split between two items: whole in none.
                let all: Vec<_> = exact.iter().map(|h| &h.label).collect();
                assert!(
                    exact.is_empty(),
                    "{word} ({note}) crosses items but was found whole in {all:?}"
                );
                checked += 1;
                continue;
            }
            (Some(f), n) if f.ends_with(" slack") && !n.starts_with("crosses") => {
                let name = f.trim_end_matches(" slack");
                ("slack", Some(format!("{name} (slack)")))
            }
            (Some(f), _) => {
                let name = f.split(' ').next().unwrap();
                ("file", Some(name.to_string()))
            }
            (None, _) => panic!("unexpected key entry {k}"),
        };
        for (how, hits) in [("exact", &exact), ("indexed", &indexed)] {
            let got = labels(hits, kind);
            match &want {
                Some(label) => assert!(
                    got.len() == 1 && got.iter().all(|g| same_name(g, label)),
                    "{word} ({note}) {how}: want {label}, got {hits:?}"
                ),
                None => assert!(
                    hits.iter().any(|h| h.kind == kind
                        && (h.id as u64) <= byte
                        && h.label.contains("unallocated")),
                    "{word} ({note}) {how}: not in unallocated space: {hits:?}"
                ),
            }
        }
        // Content words are in no other file.
        if kind == "file" {
            assert_eq!(labels(&exact, "file").len(), 1, "{word}: {exact:?}");
        }
        checked += 1;
    }
    assert_eq!(checked, 12, "every key entry but the directory-entry name");

    // Variations: case-insensitive, and regular expressions (POSIX classes
    // as the key writes them; the engine is case-sensitive for --regex).
    for v in key["variations"].as_array().unwrap() {
        let pattern = v["string"].as_str().unwrap();
        let mode = v["mode"].as_str().unwrap();
        let hits = search(case, pattern, mode == "regex");
        for want in v["should_find"].as_array().unwrap() {
            let want = want.as_str().unwrap();
            let found = hits.iter().any(|h| {
                if mode == "regex" {
                    h.matches.iter().any(|m| {
                        let m = m.trim();
                        m.contains(want) || (m.len() >= 5 && want.contains(m))
                    })
                } else {
                    true
                }
            });
            // `1slack1` and `2slack2` cross item boundaries: their whole
            // form is in no item, only their in-item part is.
            let crossing = ["1slack1", "2slack2"].contains(&want);
            assert!(
                found || crossing,
                "{pattern} ({mode}) should find {want}: {hits:?}"
            );
        }
        assert!(!hits.is_empty(), "{pattern} ({mode}) finds nothing");
    }
}

/// Run an external tool with `input` on stdin; its stdout (empty on failure).
fn tool(cmd: &mut Command, input: &[u8]) -> Vec<u8> {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let data = input.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&data);
    });
    let out = child.wait_with_output().unwrap();
    let _ = writer.join();
    out.stdout
}

/// Markup tags become spaces so words of two elements do not join.
fn strip_tags(raw: &[u8], text: &mut Vec<u8>) {
    let mut in_tag = false;
    for &b in raw {
        match b {
            b'<' => in_tag = true,
            b'>' if in_tag => {
                in_tag = false;
                text.push(b' ');
            }
            _ if !in_tag => text.push(b),
            _ => {}
        }
    }
}

/// Text of a file as the external tools give it: strings (ASCII and
/// UTF-16LE), `pdftotext` of a PDF, the members of a ZIP (`unzip`, each
/// member in turn), the content of a gzip (`gzip -dc`), recursively.
fn oracle_text(content: &[u8], scratch: &Path, depth: u32) -> Vec<u8> {
    let mut text = Vec::new();
    text.extend(tool(
        Command::new("strings").args(["-a", "-n", "6"]),
        content,
    ));
    text.extend(tool(
        Command::new("strings").args(["-a", "-n", "6", "-e", "l"]),
        content,
    ));
    if depth > 4 {
        return text;
    }
    let here = scratch.join(format!("d{depth}"));
    let _ = std::fs::remove_dir_all(&here);
    std::fs::create_dir_all(&here).unwrap();
    if content.starts_with(b"%PDF") {
        let f = here.join("doc.pdf");
        std::fs::write(&f, content).unwrap();
        text.extend(tool(Command::new("pdftotext").arg(&f).arg("-"), b""));
    }
    if content.starts_with(b"PK\x03\x04") {
        let f = here.join("doc.zip");
        std::fs::write(&f, content).unwrap();
        let members = here.join("members");
        tool(
            Command::new("unzip")
                .args(["-qq", "-o"])
                .arg(&f)
                .arg("-d")
                .arg(&members),
            b"",
        );
        let mut stack = vec![members];
        let mut files = Vec::new();
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
                let p = e.path();
                if p.is_dir() {
                    stack.push(p);
                } else {
                    files.push(p);
                }
            }
        }
        files.sort();
        for m in files {
            let bytes = std::fs::read(&m).unwrap();
            strip_tags(&bytes, &mut text);
            let inner = oracle_text(&bytes, scratch, depth + 1);
            text.extend(inner);
        }
    }
    if content.starts_with(b"\x1f\x8b") {
        let inner = tool(Command::new("gzip").arg("-dc"), content);
        strip_tags(&inner, &mut text);
        text.extend(oracle_text(&inner, scratch, depth + 1));
    }
    text
}

const EMAIL: &str = r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,3}";

/// Addresses agree when the domains are equal and one local part ends the
/// other: where a local part starts depends on what text precedes it (a
/// tag stripped to nothing, a string's first printable byte).
fn same_address(a: &str, b: &str) -> bool {
    let (Some((la, da)), Some((lb, db))) = (a.split_once('@'), b.split_once('@')) else {
        return false;
    };
    da.eq_ignore_ascii_case(db)
        && (la.ends_with(lb) || lb.ends_with(la))
        && la.len().min(lb.len()) >= 3
}

#[test]
fn nps_emails_found_by_regex() {
    let Some(real) = common::real_images("nps_emails_found_by_regex") else {
        return;
    };
    for t in ["icat", "strings", "pdftotext", "unzip", "gzip", "grep"] {
        if !common::have_tool("nps_emails_found_by_regex", t) {
            return;
        }
    }
    let image = real.join("ewf/nps-2010-emails.E01");
    let dir = tempfile::tempdir().unwrap();
    let case = dir.path().join("case");
    std::fs::create_dir_all(&case).unwrap();
    run(&image, &case, &[]);

    // Documents with their TSK address and volume sector.
    let conn = rusqlite::Connection::open(case.join("case.sqlite")).unwrap();
    let docs: Vec<(i64, String, String, i64)> = conn
        .prepare(
            "SELECT f.id, f.path, f.meta_addr, v.offset / 512 FROM files f JOIN volumes v ON v.id = f.volume_id
             WHERE f.kind = 'file' AND f.allocated = 1 AND f.size > 0 ORDER BY f.id",
        )
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert!(docs.len() >= 25, "{docs:?}");

    let mut expected: BTreeMap<i64, (String, BTreeSet<String>)> = BTreeMap::new();
    for (id, path, addr, sector) in &docs {
        let content = tool(
            Command::new("icat")
                .args(["-o", &sector.to_string()])
                .arg(&image)
                .arg(addr),
            b"",
        );
        let text = oracle_text(&content, dir.path(), 0);
        let found = tool(Command::new("grep").args(["-aoE", EMAIL]), &text);
        let set: BTreeSet<String> = String::from_utf8_lossy(&found)
            .lines()
            .map(str::to_string)
            .collect();
        if !set.is_empty() {
            expected.insert(*id, (path.clone(), set));
        }
    }
    let total: usize = expected.values().map(|(_, s)| s.len()).sum();
    eprintln!("oracle: {total} addresses in {} documents", expected.len());
    assert!(
        expected.len() >= 15,
        "the oracle finds the image's addresses: {expected:?}"
    );

    let hits = search(&case, EMAIL, true);
    let ours: BTreeMap<i64, &Hit> = hits
        .iter()
        .filter(|h| h.kind == "file")
        .map(|h| (h.id, h))
        .collect();
    let mut missing = Vec::new();
    for (id, (path, want)) in &expected {
        for address in want {
            let found = ours
                .get(id)
                .is_some_and(|h| h.matches.iter().any(|m| same_address(m, address)));
            if !found {
                missing.push(format!(
                    "{path}: {address} (ours: {:?})",
                    ours.get(id).map(|h| &h.matches)
                ));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "addresses not found by --regex:\n{}",
        missing.join("\n")
    );
    // And nothing found in the wrong document: an address we report is one
    // the oracle found in that same document.
    for h in ours.values() {
        let want = expected.get(&h.id).map(|(_, s)| s);
        for m in &h.matches {
            assert!(
                want.is_some_and(|w| w.iter().any(|a| same_address(m, a))),
                "{}: {m} is not an address the oracle finds there ({want:?})",
                h.label
            );
        }
    }
}
