//! ZIP archives and the OOXML documents built on them (DOCX, XLSX, PPTX).
//!
//! The `zip` crate reads the central directory and inflates members; what
//! is read from each member is capped by what is left of the item's
//! expansion budget and by the member buffer cap, whatever its header
//! claims, so a zip bomb (a small archive that inflates enormously, or
//! many entries overlapping the same data) stops at the cap and is
//! recorded. Members recurse through [`Extraction::extract`], whose depth
//! cap stops a recursive archive.

use super::markup;
use super::{Extraction, Format};

/// OOXML parts that hold a document's text (others are styles, rels...).
fn ooxml_text_part(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    if !n.ends_with(".xml") {
        return false;
    }
    n == "word/document.xml"
        || n.starts_with("word/header")
        || n.starts_with("word/footer")
        || n == "word/footnotes.xml"
        || n == "word/endnotes.xml"
        || n == "word/comments.xml"
        || n == "xl/sharedstrings.xml"
        || n.starts_with("xl/worksheets/sheet")
        || n.starts_with("ppt/slides/slide")
        || n.starts_with("ppt/notesslides/")
        || n == "docprops/core.xml"
        || n == "docprops/app.xml"
}

fn is_ooxml(names: &[String]) -> bool {
    names.iter().any(|n| n == "[Content_Types].xml")
        && names.iter().any(|n| {
            n == "word/document.xml" || n == "xl/workbook.xml" || n == "ppt/presentation.xml"
        })
}

/// Extract an archive; returns [`Format::Ooxml`] or [`Format::Zip`].
pub fn extract(x: &mut Extraction<'_>, data: &[u8], depth: u32) -> Format {
    let mut archive = match zip::ZipArchive::new(std::io::Cursor::new(data)) {
        Ok(a) => a,
        Err(e) => {
            x.problem(format!(
                "broken ZIP archive ({e}); its strings are indexed instead"
            ));
            let limits = super::Limits {
                binary_strings: true,
                ..x.limits().clone()
            };
            let mut d = super::StreamDecoder::new(None, &limits);
            d.feed(x, data);
            d.finish(x);
            return Format::Zip;
        }
    };
    let names: Vec<String> = archive
        .file_names()
        .map(|n| n.map(|c| c.into_owned()).unwrap_or_default())
        .collect();
    let ooxml = is_ooxml(&names);
    // Central-directory order is the archive's own; sort for a stable text
    // order whatever the writer did.
    let mut order: Vec<usize> = (0..archive.len()).collect();
    order.sort_by(|&a, &b| names.get(a).cmp(&names.get(b)));
    for i in order {
        if x.expansion_left() == 0 {
            break;
        }
        let mut member = match archive.by_index(i) {
            Ok(m) => m,
            Err(e) => {
                x.problem(format!("ZIP member {i} unreadable: {e}"));
                continue;
            }
        };
        if member.is_dir() {
            continue;
        }
        let name = member
            .name()
            .map(|c| c.into_owned())
            .unwrap_or_else(|_| format!("member {i}"));
        let text_part =
            !ooxml || ooxml_text_part(&name) || name.to_ascii_lowercase().starts_with("word/media");
        // Expansion lists every part of a document; text comes from some.
        if !text_part && !x.lists_members() {
            continue;
        }
        if !ooxml {
            x.emit(&name);
            x.separate();
        }
        let what = format!("ZIP member `{name}`");
        let Some(buf) = x.read_member(&mut member, depth + 1, &what) else {
            break;
        };
        drop(member);
        let complete = !x.last_member_cut();
        x.enter_member(if ooxml { "ooxml" } else { "zip" }, &name, &buf, complete);
        if text_part {
            if ooxml && name.to_ascii_lowercase().ends_with(".xml") {
                markup::xml_to_text(x, &buf);
            } else {
                x.extract(&buf, depth + 1);
            }
        }
        x.leave_member();
        x.separate();
    }
    if ooxml { Format::Ooxml } else { Format::Zip }
}

#[cfg(test)]
mod tests {
    use super::super::{Extraction, Limits};
    use std::io::Write;

    fn build(entries: &[(&str, &[u8])]) -> Vec<u8> {
        let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
        for (name, data) in entries {
            w.start_file(
                *name,
                zip::write::SimpleFileOptions::default()
                    .compression_method(zip::CompressionMethod::Deflated),
            )
            .unwrap();
            w.write_all(data).unwrap();
        }
        w.finish().unwrap().into_inner()
    }

    fn run(data: &[u8], limits: &Limits) -> (String, Vec<String>) {
        let mut out = String::new();
        let mut x = Extraction::new(limits, &mut out);
        x.extract(data, 0);
        let p = x.problems.clone();
        (out, p)
    }

    #[test]
    fn members_nested_archives_and_docx() {
        let inner = build(&[("deep.txt", b"innermost words")]);
        let outer = build(&[("a/notes.txt", b"hello archive"), ("inner.zip", &inner)]);
        let (text, problems) = run(&outer, &Limits::default());
        assert!(problems.is_empty(), "{problems:?}");
        assert!(text.contains("hello archive") && text.contains("innermost words"));
        let docx = build(&[
            ("[Content_Types].xml", b"<Types/>"),
            ("word/styles.xml", b"<w:styles>stylename</w:styles>"),
            (
                "word/document.xml",
                b"<w:document><w:p><w:r><w:t>docx body</w:t></w:r></w:p></w:document>",
            ),
        ]);
        let (text, _) = run(&docx, &Limits::default());
        assert!(text.contains("docx body"));
        assert!(!text.contains("stylename"));
    }

    #[test]
    fn zip_bombs_and_recursion_are_capped_and_recorded() {
        let zeros = vec![b'a'; 4 << 20];
        let bomb = build(&[("big.txt", &zeros), ("big2.txt", &zeros)]);
        assert!(bomb.len() < 100_000);
        let limits = Limits {
            max_expansion: 5 << 20,
            ..Limits::default()
        };
        let (_, problems) = run(&bomb, &limits);
        assert!(problems.iter().any(|p| p.contains("bomb")), "{problems:?}");
        // An archive nested 12 deep stops at the depth cap.
        let mut z = build(&[("core.txt", b"core text")]);
        for _ in 0..12 {
            z = build(&[("next.zip", &z)]);
        }
        let (text, problems) = run(&z, &Limits::default());
        assert!(!text.contains("core text"));
        assert!(
            problems.iter().any(|p| p.contains("nested")),
            "{problems:?}"
        );
        // Broken archives: truncated central directory.
        let good = build(&[("x.txt", b"some words here")]);
        for cut in [10, good.len() / 2, good.len() - 5] {
            let _ = run(&good[..cut], &Limits::default());
        }
    }
}
