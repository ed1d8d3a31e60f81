//! A deleted PDF whose tail was overwritten, followed by an intact PDF:
//! the broken one must not swallow the intact one up to its `%%EOF`. Seen
//! on a 2 GiB corpus, where a 4 KiB deleted PDF went uncarved because it
//! lay inside such an item (formats whose files never hold their own
//! header cut an open item at the next header).

use crate::common;

/// A minimal valid PDF: catalog, empty page tree, cross-reference table.
fn pdf() -> Vec<u8> {
    let mut b = b"%PDF-1.4\n".to_vec();
    let one = b.len();
    b.extend_from_slice(b"1 0 obj\n<< /Type /Catalog /Pages 2 0 R >>\nendobj\n");
    let two = b.len();
    b.extend_from_slice(b"2 0 obj\n<< /Type /Pages /Kids [] /Count 0 >>\nendobj\n");
    let xref = b.len();
    b.extend_from_slice(
        format!(
            "xref\n0 3\n0000000000 65535 f \n{one:010} 00000 n \n{two:010} 00000 n \ntrailer\n<< /Size 3 /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n"
        )
        .as_bytes(),
    );
    b
}

/// The head of a PDF with many objects and no end: long enough to be
/// accepted as a PDF item before the next header comes.
fn broken_pdf() -> Vec<u8> {
    let mut b = b"%PDF-1.4\n".to_vec();
    let mut n = 1;
    while b.len() < 200 << 10 {
        b.extend_from_slice(
            format!("{n} 0 obj\n<< /Length 44 >>\nstream\nBT /F1 12 Tf 72 720 Td (line {n:06}) Tj ET\nendstream\nendobj\n")
                .as_bytes(),
        );
        n += 1;
    }
    b
}

#[test]
fn an_overwritten_pdf_does_not_swallow_the_next_one() {
    let dir = tempfile::tempdir().unwrap();
    let mut image = vec![0u8; 1 << 20];
    let broken = broken_pdf();
    let whole = pdf();
    let at = 64 * 1024 + broken.len();
    image[64 * 1024..at].copy_from_slice(&broken);
    image[at..at + whole.len()].copy_from_slice(&whole);
    let path = dir.path().join("image.dd");
    std::fs::write(&path, &image).unwrap();
    let case = dir.path().join("case");
    std::fs::create_dir(&case).unwrap();
    common::run_ok(
        common::stage_run(
            "carve",
            &path,
            &case,
            &[
                "carve.scope=image",
                "carve.meta=false",
                "carve.aligned=false",
            ],
        )
        .args(["--threads", "2"]),
    );
    let conn = rusqlite::Connection::open(case.join("case.sqlite")).unwrap();
    let rows: Vec<(i64, i64, String, String)> = conn
        .prepare("SELECT offset, length, validation, md5 FROM carved_items WHERE type = 'pdf'")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let md5 = common::md5_hex(&whole);
    assert!(
        rows.contains(&(at as i64, whole.len() as i64, "valid".into(), md5)),
        "the intact PDF at {at} is not carved whole and valid: {rows:?}"
    );
}
