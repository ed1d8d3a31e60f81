//! The index stage driven in-process over an evidence file of hand-built
//! items (files rows pointing at them): every supported format gives its
//! words to the index, and hostile items (zip bomb, recursive archive,
//! broken PDF stream, malformed MIME, invalid UTF-16, a huge single-line
//! file, random data) are recorded as processing errors or findings while
//! the stage completes and indexes the rest.

use caseload_engine::casedb::{
    CaseDb, DbOptions, Extents, NewEvidence, NewFile, NewRun, NewVolume, StoredContent,
    Write as DbWrite,
};
use caseload_engine::channel::{Channel, ChannelKind};
use caseload_engine::search::{SearchOptions, search};
use caseload_engine::source::{EvidenceSource, RawSource};
use caseload_engine::stage::{NoProgress, RecordCounts, StageContext, StageOptions};
use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

fn crc32(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// A ZIP archive with deflated members (a minimal writer: local headers,
/// central directory, end record).
fn zip(entries: &[(&str, &[u8])]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut central = Vec::new();
    for (name, data) in entries {
        let mut z = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::fast());
        z.write_all(data).unwrap();
        let packed = z.finish().unwrap();
        let offset = out.len() as u32;
        let crc = crc32(data);
        let common = |v: &mut Vec<u8>| {
            v.extend_from_slice(&20u16.to_le_bytes()); // version needed
            v.extend_from_slice(&0u16.to_le_bytes()); // flags
            v.extend_from_slice(&8u16.to_le_bytes()); // deflate
            v.extend_from_slice(&[0, 0, 0x21, 0]); // time, date
            v.extend_from_slice(&crc.to_le_bytes());
            v.extend_from_slice(&(packed.len() as u32).to_le_bytes());
            v.extend_from_slice(&(data.len() as u32).to_le_bytes());
            v.extend_from_slice(&(name.len() as u16).to_le_bytes());
            v.extend_from_slice(&0u16.to_le_bytes()); // extra
        };
        out.extend_from_slice(b"PK\x03\x04");
        common(&mut out);
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(&packed);
        central.extend_from_slice(b"PK\x01\x02");
        central.extend_from_slice(&20u16.to_le_bytes()); // made by
        common(&mut central);
        central.extend_from_slice(&[0; 6]); // comment length, disk, internal attrs
        central.extend_from_slice(&0u32.to_le_bytes()); // external attrs
        central.extend_from_slice(&offset.to_le_bytes());
        central.extend_from_slice(name.as_bytes());
    }
    let cd_offset = out.len() as u32;
    out.extend_from_slice(&central);
    out.extend_from_slice(b"PK\x05\x06\0\0\0\0");
    out.extend_from_slice(&(entries.len() as u16).to_le_bytes());
    out.extend_from_slice(&(entries.len() as u16).to_le_bytes());
    out.extend_from_slice(&(central.len() as u32).to_le_bytes());
    out.extend_from_slice(&cd_offset.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    out
}

fn docx(text: &str) -> Vec<u8> {
    let doc = format!(
        "<?xml version=\"1.0\"?><w:document><w:body><w:p><w:r><w:t>{text}</w:t></w:r></w:p></w:body></w:document>"
    );
    zip(&[
        ("[Content_Types].xml", b"<Types/>"),
        ("word/document.xml", doc.as_bytes()),
    ])
}

fn xlsx(text: &str) -> Vec<u8> {
    let ss = format!("<sst><si><t>{text}</t></si><si><t>other cell</t></si></sst>");
    zip(&[
        ("[Content_Types].xml", b"<Types/>"),
        ("xl/workbook.xml", b"<workbook/>"),
        ("xl/sharedStrings.xml", ss.as_bytes()),
    ])
}

fn pdf(text: &str, break_stream: bool) -> Vec<u8> {
    let content = format!("BT /F1 12 Tf 72 720 Td ({text}) Tj ET\n").repeat(50);
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    z.write_all(content.as_bytes()).unwrap();
    let mut body = z.finish().unwrap();
    if break_stream {
        let n = body.len();
        for b in &mut body[n / 2..n - 2] {
            *b = !*b;
        }
    }
    let mut out = format!(
        "%PDF-1.5\n1 0 obj\n<< /Length {} /Filter /FlateDecode >>\nstream\n",
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(&body);
    out.extend_from_slice(b"\nendstream\nendobj\ntrailer\n<< >>\n%%EOF\n");
    out
}

fn base64(data: &[u8]) -> String {
    const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut s = String::new();
    for (i, c) in data.chunks(3).enumerate() {
        if i > 0 && i % 19 == 0 {
            s.push_str("\r\n");
        }
        let n = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        s.push(A[(n >> 18) as usize & 63] as char);
        s.push(A[(n >> 12) as usize & 63] as char);
        s.push(if c.len() > 1 {
            A[(n >> 6) as usize & 63] as char
        } else {
            '='
        });
        s.push(if c.len() > 2 {
            A[n as usize & 63] as char
        } else {
            '='
        });
    }
    s
}

fn utf16(text: &str, big_endian: bool, bom: bool) -> Vec<u8> {
    let mut out = Vec::new();
    if bom {
        out.extend_from_slice(if big_endian {
            &[0xFE, 0xFF]
        } else {
            &[0xFF, 0xFE]
        });
    }
    for u in text.encode_utf16() {
        out.extend_from_slice(&if big_endian {
            u.to_be_bytes()
        } else {
            u.to_le_bytes()
        });
    }
    out
}

struct Item {
    name: &'static str,
    data: Vec<u8>,
    /// A word search must find in this item (None: nothing expected).
    token: Option<&'static str>,
    /// Text a recorded problem about this item must contain.
    problem: Option<&'static str>,
}

fn items() -> Vec<Item> {
    let mut rng = 0x1234_5678_9ABC_DEF0u64;
    let mut random = vec![0u8; 256 * 1024];
    for b in &mut random {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        *b = rng as u8;
    }
    let mut recursive = zip(&[("core.txt", b"qzrecursivecore words")]);
    for _ in 0..12 {
        recursive = zip(&[("again.zip", &recursive)]);
    }
    let mut huge = vec![b'x'; 12 << 20];
    huge.extend_from_slice(b" qzhugelineend");
    let mut bad16 = utf16("qzbadsixteen before", false, true);
    bad16.extend_from_slice(&0xDC00u16.to_le_bytes());
    bad16.extend_from_slice(&utf16(" after", false, false));
    let eml = format!(
        "From: Sender <sender@example.org>\r\nTo: someone@example.net\r\nSubject: qzmailsubject\r\n\
         MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=\"B\"\r\n\r\n--B\r\n\
         Content-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n\
         qzmailbody caf=C3=A9\r\n--B\r\nContent-Type: application/vnd.openxmlformats-officedocument.wordprocessingml.document; name=\"r.docx\"\r\n\
         Content-Transfer-Encoding: base64\r\n\r\n{}\r\n--B--\r\n",
        base64(&docx("qzattacheddocx"))
    );
    vec![
        Item { name: "plain.txt", data: b"plain qzplainutf text\n".to_vec(), token: Some("qzplainutf"), problem: None },
        Item { name: "latin1.txt", data: b"caf\xe9 qzlatinone na\xefve\n".to_vec(), token: Some("qzlatinone"), problem: None },
        Item { name: "le.txt", data: utf16("wide qzsixteenle text", false, false), token: Some("qzsixteenle"), problem: None },
        Item { name: "be.txt", data: utf16("wide qzsixteenbe text", true, true), token: Some("qzsixteenbe"), problem: None },
        Item { name: "page.html", data: b"<html><body><p>qzhtml<b>bold</b></p><script>qzscript</script></body></html>".to_vec(), token: Some("qzhtmlbold"), problem: None },
        Item { name: "mail.eml", data: eml.into_bytes(), token: Some("qzattacheddocx"), problem: None },
        Item { name: "doc.docx", data: docx("qzworddoc"), token: Some("qzworddoc"), problem: None },
        Item { name: "book.xlsx", data: xlsx("qzexcelcell"), token: Some("qzexcelcell"), problem: None },
        Item { name: "a.pdf", data: pdf("qzpdfflate", false), token: Some("qzpdfflate"), problem: None },
        Item { name: "nested.zip", data: zip(&[("in/inner.zip", &zip(&[("x.txt", b"qzzipmember")]))]), token: Some("qzzipmember"), problem: None },
        // Hostile items.
        Item { name: "bomb.zip", data: zip(&[("zeros.txt", &vec![b'0'; 24 << 20]), ("more.txt", &vec![b'1'; 24 << 20])]), token: None, problem: Some("bomb") },
        Item { name: "recursive.zip", data: recursive, token: None, problem: Some("nested deeper") },
        Item { name: "broken.pdf", data: pdf("qzbrokenpdf", true), token: None, problem: Some("broken Flate") },
        Item { name: "bad.eml", data: b"From: a@b.example\nTo: c@d.example\nContent-Type: multipart/mixed; boundary=zz\n\n--zz\nContent-Type: text/plain\n\nqzunclosedmime\n".to_vec(), token: Some("qzunclosedmime"), problem: Some("never closed") },
        Item { name: "bad16.txt", data: bad16, token: Some("qzbadsixteen"), problem: Some("invalid UTF-16") },
        Item { name: "huge.txt", data: huge, token: Some("qzhugelineend"), problem: None },
        Item { name: "truncated.zip", data: zip(&[("t.txt", b"qztruncatedzip words")])[..40].to_vec(), token: None, problem: Some("broken ZIP") },
        Item { name: "random.bin", data: random, token: None, problem: Some("entropy") },
    ]
}

/// Build the evidence and case, run the index stage with `options`.
fn index_items(items: &[Item], options: &str) -> (tempfile::TempDir, Vec<(String, String)>) {
    let dir = tempfile::tempdir().unwrap();
    let ev_path = dir.path().join("evidence.raw");
    let mut ev = Vec::new();
    let mut placed = Vec::new();
    for it in items {
        let at = ev.len().next_multiple_of(4096);
        ev.resize(at, 0);
        ev.extend_from_slice(&it.data);
        placed.push((at, it.data.len()));
    }
    ev.resize(ev.len().next_multiple_of(512), 0);
    std::fs::write(&ev_path, &ev).unwrap();
    let case_dir = dir.path().join("case");
    let temp_dir = dir.path().join("temp");
    std::fs::create_dir_all(&case_dir).unwrap();
    std::fs::create_dir_all(&temp_dir).unwrap();
    let evidence_ch = Channel::new(ChannelKind::Evidence, dir.path(), Vec::new());
    let source: Arc<dyn EvidenceSource> = Arc::new(
        RawSource::open(
            &ev_path,
            &evidence_ch,
            caseload_engine::source::ReadOptions::default(),
        )
        .unwrap(),
    );
    let db_ch = Channel::new(ChannelKind::Database, &case_dir, Vec::new());
    let case = Channel::new(ChannelKind::Case, &case_dir, Vec::new());
    let temp = Channel::new(ChannelKind::Temp, &temp_dir, Vec::new());
    let db = CaseDb::create(&db_ch, &DbOptions::default(), false).unwrap();
    let w = db.writer();
    w.call(DbWrite::Run(NewRun {
        started_at: "now".into(),
        workload: None,
        stages: vec!["index".into()],
        threads: 2,
        cache_mode: "warm".into(),
        db_engine: "sqlite".into(),
        journal_mode: "wal".into(),
        synchronous: "normal".into(),
        batch_size: 1000,
    }))
    .unwrap();
    w.call(DbWrite::Evidence(NewEvidence {
        path: "e".into(),
        format: "raw".into(),
        media_size: ev.len() as u64,
        container_bytes: ev.len() as u64,
        chunk_size: None,
        stored_md5: None,
        stored_sha1: None,
        files: Vec::new(),
        metadata: Vec::new(),
    }))
    .unwrap();
    let volume = w
        .call(DbWrite::Volume(NewVolume {
            evidence_id: 1,
            slot: 0,
            scheme: "none",
            offset: 0,
            length: 0,
            type_code: String::new(),
            description: String::new(),
        }))
        .unwrap()
        .id()
        .unwrap();
    for (it, (at, len)) in items.iter().zip(&placed) {
        w.exec(DbWrite::File {
            run_id: 1,
            stage: "filesystem",
            file: Box::new(NewFile {
                volume_id: volume,
                meta_addr: String::new(),
                path: it.name.to_string(),
                name: it.name.to_string(),
                raw_name: it.name.as_bytes().to_vec(),
                short_name: None,
                kind: "file",
                fs_type: caseload_fs::FsKind::Fat32,
                size: *len as u64,
                allocated: true,
                recovery: "allocated",
                recoverable: true,
                attributes: 0,
                owner: [0o644, 0, 0],
                times: [None; 4],
                fn_times: [None; 4],
                content: StoredContent::Runs(Extents::single(*at as u64, *len as u64)),
                slack: None,
                errors: Vec::new(),
            }),
        })
        .unwrap();
    }
    w.flush().unwrap();
    let options: StageOptions = toml::from_str(options).unwrap();
    let stage = caseload_engine::stages::build("index", &options).unwrap();
    let cancel = AtomicBool::new(false);
    let recorded = RecordCounts::default();
    let ctx = StageContext {
        evidence: &source,
        evidence_id: 1,
        run_id: 1,
        db: &db,
        case: &case,
        temp: &temp,
        threads: 2,
        progress: &NoProgress,
        cancel: &cancel,
        stage: "index",
        recorded: &recorded,
        scope: caseload_engine::stage::Scope::Whole,
    };
    let summary = stage
        .run(&ctx)
        .expect("the stage completes whatever the items hold");
    assert!(summary.items > 0);
    db.writer().flush().unwrap();
    db.close().unwrap();
    let conn = rusqlite::Connection::open(case_dir.join("case.sqlite")).unwrap();
    let problems: Vec<(String, String)> = conn
        .prepare("SELECT coalesce(path, ''), message FROM processing_errors")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    (dir, problems)
}

fn found(case: &std::path::Path, query: &str) -> Vec<String> {
    search(case, query, &SearchOptions::default())
        .unwrap()
        .into_iter()
        .map(|h| h.label)
        .collect()
}

#[test]
fn every_format_is_extracted_and_hostile_items_are_recorded() {
    let items = items();
    let (dir, problems) = index_items(&items, "max_expansion_mib = 16");
    let case = dir.path().join("case");
    for it in &items {
        if let Some(token) = it.token {
            assert_eq!(found(&case, token), [it.name], "{token} in {}", it.name);
        }
        if let Some(p) = it.problem {
            assert!(
                problems
                    .iter()
                    .any(|(path, m)| path == it.name && m.contains(p)),
                "{}: no problem mentioning {p:?} in {problems:?}",
                it.name
            );
        }
    }
    // Script bodies are not text; e-mail headers are.
    assert!(found(&case, "qzscript").is_empty());
    assert_eq!(found(&case, "qzmailsubject"), ["mail.eml"]);
    assert_eq!(found(&case, "\"qzmailbody café\""), ["mail.eml"]);
    assert_eq!(found(&case, "sender@example.org"), ["mail.eml"]);
    // Boolean and prefix queries.
    assert_eq!(found(&case, "qzword* OR qzexcel*").len(), 2);
    assert_eq!(found(&case, "qzplainutf AND NOT plain").len(), 0);
    assert_eq!(found(&case, "wide -qzsixteenbe"), ["le.txt"]);
    // Regex over extracted text.
    let hits = search(
        &case,
        r"[a-z]+@example\.(org|net)",
        &SearchOptions {
            regex: true,
            limit: None,
        },
    )
    .unwrap();
    assert_eq!(
        hits.len(),
        1,
        "only the message holds such addresses: {hits:?}"
    );
    let mail = &hits[0];
    assert_eq!((mail.label.as_str(), mail.hits), ("mail.eml", 2));
    assert_eq!(mail.matches, ["sender@example.org", "someone@example.net"]);
}

#[test]
fn entropy_test_can_be_switched_off() {
    let items: Vec<Item> = items()
        .into_iter()
        .filter(|i| i.name == "random.bin" || i.name == "plain.txt")
        .collect();
    let (_dir, problems) = index_items(&items, "skip_high_entropy = false");
    assert!(!problems.iter().any(|(_, m)| m.contains("entropy")));
    let (_dir, problems) = index_items(&items, "entropy_threshold = 7.9");
    assert!(
        problems
            .iter()
            .any(|(p, m)| p == "random.bin" && m.contains("entropy"))
    );
}
