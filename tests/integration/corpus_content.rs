//! corpus-gen content against standard tools: `file` names every type,
//! JPEG/PNG/GIF decode with independent decoders, `pdftotext` extracts the
//! planted keywords, `unzip -t` passes for ZIP/DOCX/XLSX, `sqlite3` says
//! the history databases are intact, python's `email` parses every message
//! and mailbox with attachments decoding to the manifest's MD5. Also:
//! planted keywords sit where the manifest says and never occur by chance,
//! duplicates match, slack is non-zero, and the hash sets hold exactly the
//! planted entries among the decoys.

use crate::corpus_support;

use caseload_corpus::content::Kind;
use caseload_corpus::manifest::{EntryKind, FileEntry};
use corpus_support::{Corpus, have_tools, make, write_tmp};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::process::Command;
use std::sync::OnceLock;

const DECOYS: u64 = 5000;

/// One corpus shared by every test in this file.
fn corpus() -> &'static Corpus {
    static C: OnceLock<Corpus> = OnceLock::new();
    C.get_or_init(|| {
        make(&[
            "--size",
            "96MiB",
            "--seed",
            "21",
            "--decoys",
            "5000",
            "--threads",
            "2",
        ])
    })
}

/// Files whose content can be read back exactly (live, or deleted intact).
fn readable(c: &Corpus) -> impl Iterator<Item = &FileEntry> {
    c.manifest
        .files
        .iter()
        .filter(|f| f.kind == EntryKind::File && f.intact && f.size > 0)
}

fn of_kind(c: &Corpus, k: Kind) -> Vec<&FileEntry> {
    readable(c).filter(|f| f.content_type == Some(k)).collect()
}

#[test]
fn file_names_every_type() {
    if !have_tools("file_names_every_type", &["file"]) {
        return;
    }
    let c = corpus();
    let dir = tempfile::tempdir().expect("tempdir");
    let mut per_kind: BTreeMap<String, usize> = BTreeMap::new();
    let mut paths = Vec::new();
    for f in readable(c) {
        let Some(k) = f.content_type else { continue };
        let n = per_kind.entry(format!("{k:?}")).or_default();
        if *n >= 4 {
            continue;
        }
        *n += 1;
        let p = write_tmp(dir.path(), &format!("{k:?}_{n}"), &c.content(f));
        paths.push((k, p));
    }
    assert!(
        per_kind.len() >= 14,
        "too few kinds in the corpus: {per_kind:?}"
    );
    for (k, p) in paths {
        let out = Command::new("file")
            .arg("-b")
            .arg(&p)
            .output()
            .expect("run file");
        let said = String::from_utf8_lossy(&out.stdout).to_string();
        let want: &[&str] = match k {
            Kind::Text | Kind::Log => &["text"],
            Kind::Gzip => &["gzip compressed data"],
            Kind::Html => &["HTML document"],
            Kind::Eml => &["mail"],
            // file(1) 5.44 has no mbox magic: it names it text; the
            // python mailbox test below is the real check.
            Kind::Mbox => &["text"],
            Kind::Jpeg => &["JPEG image data"],
            Kind::Png => &["PNG image data"],
            Kind::Gif => &["GIF image data"],
            Kind::Pdf => &["PDF document"],
            Kind::Zip => &["Zip archive data"],
            Kind::Docx => &["Microsoft Word 2007+"],
            Kind::Xlsx => &["Microsoft Excel 2007+"],
            Kind::Sqlite => &["SQLite 3.x database"],
            Kind::Mp3 => &["Audio file with ID3", "MPEG ADTS, layer III"],
            Kind::Container => &["data"],
            Kind::Exe => &["PE32+ executable"],
            Kind::Deb => &["Debian binary package"],
        };
        assert!(
            want.iter().all(|w| said.contains(w)),
            "{k:?}: file says {said:?}"
        );
    }
}

#[test]
fn images_decode() {
    let c = corpus();
    let mut n = 0;
    for f in of_kind(c, Kind::Jpeg) {
        let data = c.content(f);
        let mut d = jpeg_decoder::Decoder::new(&data[..]);
        let px = d.decode().unwrap_or_else(|e| panic!("{}: {e}", f.path));
        assert!(!px.is_empty());
        n += 1;
    }
    for f in of_kind(c, Kind::Png) {
        let data = c.content(f);
        let dec = png::Decoder::new(std::io::Cursor::new(&data));
        let mut rd = dec
            .read_info()
            .unwrap_or_else(|e| panic!("{}: {e}", f.path));
        let mut buf = vec![0; rd.output_buffer_size().expect("png size")];
        rd.next_frame(&mut buf)
            .unwrap_or_else(|e| panic!("{}: {e}", f.path));
        n += 1;
    }
    for f in of_kind(c, Kind::Gif) {
        let data = c.content(f);
        let mut opts = gif::DecodeOptions::new();
        opts.set_color_output(gif::ColorOutput::Indexed);
        let mut dec = opts
            .read_info(&data[..])
            .unwrap_or_else(|e| panic!("{}: {e}", f.path));
        assert!(
            dec.read_next_frame()
                .unwrap_or_else(|e| panic!("{}: {e}", f.path))
                .is_some()
        );
        n += 1;
    }
    assert!(n >= 10, "only {n} images decoded");
}

#[test]
fn pdftotext_extracts_planted_keywords() {
    if !have_tools("pdftotext_extracts_planted_keywords", &["pdftotext"]) {
        return;
    }
    let c = corpus();
    let dir = tempfile::tempdir().expect("tempdir");
    let mut with_kw = 0;
    for (i, f) in of_kind(c, Kind::Pdf).into_iter().enumerate().take(12) {
        let p = write_tmp(dir.path(), &format!("{i}.pdf"), &c.content(f));
        let out = Command::new("pdftotext")
            .arg(&p)
            .arg("-")
            .output()
            .expect("run pdftotext");
        assert!(
            out.status.success(),
            "{}: {}",
            f.path,
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.split_whitespace().count() > 10,
            "{}: no text extracted",
            f.path
        );
        for k in &f.keywords {
            assert!(
                text.contains(&k.token),
                "{}: pdftotext lacks {}",
                f.path,
                k.token
            );
            with_kw += 1;
        }
    }
    assert!(with_kw > 0, "no PDF with planted keywords checked");
}

#[test]
fn archives_pass_unzip_and_carry_keywords() {
    if !have_tools("archives_pass_unzip_and_carry_keywords", &["unzip"]) {
        return;
    }
    let c = corpus();
    let dir = tempfile::tempdir().expect("tempdir");
    let mut n = 0;
    for k in [Kind::Zip, Kind::Docx, Kind::Xlsx] {
        for (i, f) in of_kind(c, k).into_iter().enumerate().take(8) {
            let p = write_tmp(dir.path(), &format!("{k:?}{i}.zip"), &c.content(f));
            let t = Command::new("unzip")
                .arg("-tq")
                .arg(&p)
                .output()
                .expect("run unzip");
            assert!(
                t.status.success(),
                "unzip -t {}: {}",
                f.path,
                String::from_utf8_lossy(&t.stdout)
            );
            if !f.keywords.is_empty() {
                let all = Command::new("unzip")
                    .arg("-p")
                    .arg(&p)
                    .output()
                    .expect("unzip -p");
                let text = String::from_utf8_lossy(&all.stdout);
                for kw in &f.keywords {
                    assert!(
                        text.contains(&kw.token),
                        "{}: {} not inside",
                        f.path,
                        kw.token
                    );
                    // Deflated parts hide the token from a raw search.
                    assert!(
                        kw.raw.is_empty(),
                        "{}: {} found raw in deflated data",
                        f.path,
                        kw.token
                    );
                }
            }
            n += 1;
        }
    }
    assert!(n >= 6, "only {n} archives");
}

#[test]
fn sqlite_history_is_intact() {
    if !have_tools("sqlite_history_is_intact", &["sqlite3"]) {
        return;
    }
    let c = corpus();
    let dir = tempfile::tempdir().expect("tempdir");
    let dbs = of_kind(c, Kind::Sqlite);
    assert!(!dbs.is_empty(), "no SQLite file");
    for (i, f) in dbs.into_iter().enumerate() {
        let p = write_tmp(dir.path(), &format!("{i}.sqlite"), &c.content(f));
        let out = Command::new("sqlite3")
            .arg(&p)
            .arg("pragma integrity_check; select count(*) > 0 from urls; select group_concat(term, ' ') from keyword_search_terms;")
            .output()
            .expect("run sqlite3");
        let text = String::from_utf8_lossy(&out.stdout);
        let mut lines = text.lines();
        assert_eq!(lines.next(), Some("ok"), "{}: {text}", f.path);
        assert_eq!(lines.next(), Some("1"), "{}: {text}", f.path);
        let terms = lines.next().unwrap_or("");
        for k in &f.keywords {
            assert!(
                terms.contains(&k.token),
                "{}: {} not a search term",
                f.path,
                k.token
            );
        }
    }
}

const PY_MAIL: &str = r#"
import sys, email, mailbox, hashlib, json
from email import policy
out = []
for path, kind in zip(sys.argv[1::2], sys.argv[2::2]):
    if kind == 'mbox':
        msgs = list(mailbox.mbox(path))
    else:
        with open(path, 'rb') as f:
            msgs = [email.message_from_binary_file(f, policy=policy.default)]
    for i, m in enumerate(msgs):
        if not m.get('Message-ID') or not m.get('From'):
            raise SystemExit(f'{path}: message {i} lacks headers')
        for part in m.walk():
            if part.get_content_disposition() == 'attachment':
                data = part.get_payload(decode=True)
                out.append([path, i, part.get_filename(), hashlib.md5(data).hexdigest()])
print(json.dumps(out))
"#;

#[test]
fn email_parses_and_attachments_match() {
    if !have_tools("email_parses_and_attachments_match", &["python3"]) {
        return;
    }
    let c = corpus();
    let dir = tempfile::tempdir().expect("tempdir");
    let mut args = Vec::new();
    let mut expected: HashSet<(String, u32, String, String)> = HashSet::new();
    for k in [Kind::Eml, Kind::Mbox] {
        for (i, f) in of_kind(c, k).into_iter().enumerate().take(10) {
            let p = write_tmp(dir.path(), &format!("{k:?}{i}"), &c.content(f));
            let ps = p.display().to_string();
            for a in &f.attachments {
                expected.insert((ps.clone(), a.message, a.name.clone(), a.md5.clone()));
            }
            args.push(ps);
            args.push(if k == Kind::Mbox {
                "mbox".into()
            } else {
                "eml".into()
            });
        }
    }
    assert!(!expected.is_empty(), "no attachments in the corpus's mail");
    let out = Command::new("python3")
        .arg("-c")
        .arg(PY_MAIL)
        .args(&args)
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got: Vec<(String, u32, String, String)> =
        serde_json::from_slice(&out.stdout).expect("python output");
    let got: HashSet<_> = got.into_iter().collect();
    assert_eq!(got, expected);
}

#[test]
fn keywords_are_where_the_manifest_says_and_nowhere_else() {
    let c = corpus();
    let image = std::fs::read(c.image()).expect("read image");
    let mut planted: HashSet<String> = HashSet::new();
    let (mut straddling, mut in_deleted, mut located) = (0, 0, 0);
    for f in &c.manifest.files {
        for k in &f.keywords {
            planted.insert(k.token.clone());
            for o in &k.raw {
                if o.crosses_cluster_boundary {
                    straddling += 1;
                }
                if f.deleted {
                    in_deleted += 1;
                }
                if let Some(d) = o.disk_offset
                    && !o.overwritten
                {
                    let at = d as usize;
                    assert_eq!(
                        &image[at..at + k.token.len()],
                        k.token.as_bytes(),
                        "{}",
                        f.path
                    );
                    located += 1;
                }
            }
        }
    }
    for item in &c.manifest.carvable {
        for k in &item.keywords {
            planted.insert(k.token.clone());
            for o in k.raw.iter().filter(|o| !o.overwritten) {
                if let Some(d) = o.disk_offset {
                    let at = d as usize;
                    assert_eq!(
                        &image[at..at + k.token.len()],
                        k.token.as_bytes(),
                        "carvable at {}",
                        item.offset
                    );
                    located += 1;
                }
            }
        }
    }
    assert!(
        located > 5 && straddling > 0 && in_deleted > 0,
        "{located} {straddling} {in_deleted}"
    );
    // Every `qz` token on the disk is a planted one.
    let mut found = HashSet::new();
    for at in memchr_all(&image, b"qz") {
        if at + 10 <= image.len() && image[at..at + 10].iter().all(|b| b.is_ascii_lowercase()) {
            found.insert(String::from_utf8_lossy(&image[at..at + 10]).to_string());
        }
    }
    let stray: Vec<_> = found.difference(&planted).collect();
    assert!(
        stray.is_empty(),
        "tokens on disk that were never planted: {stray:?}"
    );
}

fn memchr_all(hay: &[u8], needle: &[u8]) -> Vec<usize> {
    hay.windows(needle.len())
        .enumerate()
        .filter(|(_, w)| *w == needle)
        .map(|(i, _)| i)
        .collect()
}

#[test]
fn duplicates_slack_and_carvables() {
    let c = corpus();
    let mut groups: HashMap<u64, Vec<&FileEntry>> = HashMap::new();
    for f in &c.manifest.files {
        if let Some(g) = f.duplicate_group {
            groups.entry(g).or_default().push(f);
        }
    }
    assert!(!groups.is_empty(), "no planted duplicates");
    for members in groups.values() {
        assert!(members.len() >= 2);
        let paths: HashSet<_> = members.iter().map(|f| &f.path).collect();
        assert_eq!(paths.len(), members.len());
        assert!(
            members
                .iter()
                .all(|f| f.md5 == members[0].md5 && f.sha256 == members[0].sha256)
        );
    }
    let cs = c.manifest.filesystem.cluster_size;
    let mut slack_checked = 0;
    for f in c.live_files().filter(|f| f.slack_bytes > 0).take(50) {
        let last = f.extents.last().expect("extents");
        let used = f.size % cs;
        let tail = c.read(last.offset + last.length - cs + used, cs - used);
        assert_eq!(tail.len() as u64, f.slack_bytes);
        assert!(tail.iter().any(|&b| b != 0), "{}: zero slack", f.path);
        slack_checked += 1;
    }
    assert!(slack_checked > 10);
    let carv = &c.manifest.carvable;
    assert!(
        carv.iter()
            .any(|i| i.source == caseload_corpus::manifest::CarveSource::Residue)
    );
    assert!(
        carv.iter()
            .any(|i| i.source == caseload_corpus::manifest::CarveSource::Deleted)
    );
    for i in carv {
        assert!(i.content_type.carvable());
        if !i.contiguous {
            assert!(i.extents.len() > 1);
        }
    }
    assert!(
        !c.manifest.unallocated.iter().all(|a| a.fill == "zero"),
        "no random free area"
    );
}

#[test]
fn hash_sets_hold_planted_entries_among_decoys() {
    let c = corpus();
    let m = &c.manifest;
    let known: HashSet<(String, String)> = m
        .files
        .iter()
        .filter(|f| f.known)
        .map(|f| {
            (
                f.sha1.clone().unwrap_or_default(),
                f.md5.clone().unwrap_or_default(),
            )
        })
        .collect();
    let notable: HashSet<String> = m
        .files
        .iter()
        .filter(|f| f.notable)
        .filter_map(|f| f.md5.clone())
        .collect();
    assert!(!known.is_empty() && !notable.is_empty());
    assert_eq!(known.len() as u64, m.hash_sets.known_planted);
    assert_eq!(notable.len() as u64, m.hash_sets.notable_planted);

    let nsrl = std::fs::read(c.path(&m.hash_sets.nsrl_rds2)).expect("NSRLFile.txt");
    let text = String::from_utf8(nsrl).expect("ascii");
    assert!(text.starts_with(
        "\"SHA-1\",\"MD5\",\"CRC32\",\"FileName\",\"FileSize\",\"ProductCode\",\"OpSystemCode\",\"SpecialCode\"\r\n"
    ));
    let lines: Vec<&str> = text.split_terminator("\r\n").collect();
    assert!(
        !text.replace("\r\n", "").contains('\n'),
        "bare LF in NSRLFile.txt"
    );
    assert_eq!(lines.len() as u64, 1 + DECOYS + m.hash_sets.known_planted);
    let mut in_set = HashSet::new();
    for l in &lines[1..] {
        let cols: Vec<&str> = l.split(',').collect();
        assert!(cols[0].len() == 42 && cols[0].starts_with('"'), "{l}");
        assert_eq!(cols[0], cols[0].to_ascii_uppercase(), "{l}");
        in_set.insert((
            cols[0].trim_matches('"').to_ascii_lowercase(),
            cols[1].trim_matches('"').to_ascii_lowercase(),
        ));
    }
    assert!(
        known.is_subset(&in_set),
        "planted known hashes missing from NSRLFile.txt"
    );

    let md5s = std::fs::read_to_string(c.path(&m.hash_sets.notable_md5)).expect("notable.md5");
    let listed: HashSet<&str> = md5s
        .lines()
        .map(|l| l.split("  ").next().unwrap_or(""))
        .collect();
    assert_eq!(
        md5s.lines().count() as u64,
        DECOYS + m.hash_sets.notable_planted
    );
    assert!(notable.iter().all(|h| listed.contains(h.as_str())));
    let sha1s = std::fs::read_to_string(c.path(&m.hash_sets.notable_sha1)).expect("notable.sha1");
    assert!(sha1s.lines().all(|l| l.len() > 42 && &l[40..42] == "  "));
    // Decoys never collide with a corpus file's hash.
    let all_md5: HashSet<String> = m.files.iter().filter_map(|f| f.md5.clone()).collect();
    let hits = listed.iter().filter(|h| all_md5.contains(**h)).count();
    assert_eq!(hits, notable.len());

    if have_tools("hash_sets_hold_planted_entries_among_decoys", &["sqlite3"]) {
        let db = c.path(&m.hash_sets.rds3_sqlite);
        let out = Command::new("sqlite3")
            .arg(&db)
            .arg("select count(*) from FILE; select count(*) from FILE where sha256 = upper(sha256) and length(sha1) = 40;")
            .output()
            .expect("sqlite3");
        let t = String::from_utf8_lossy(&out.stdout);
        let counts: Vec<u64> = t.lines().filter_map(|l| l.trim().parse().ok()).collect();
        assert_eq!(counts, vec![DECOYS + m.hash_sets.known_planted; 2], "{t}");
        let (sha1, _) = known.iter().next().expect("a known file");
        let q = format!(
            "select count(*) from FILE where sha1 = '{}';",
            sha1.to_ascii_uppercase()
        );
        let out = Command::new("sqlite3")
            .arg(&db)
            .arg(q)
            .output()
            .expect("sqlite3");
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "1");
    }
}
