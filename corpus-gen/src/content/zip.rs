//! ZIP archives and OOXML documents (DOCX, XLSX), sized exactly.
//!
//! Text parts are deflated (as Office does), so their planted keywords are
//! not visible to a raw byte search; the manifest says so. The exact size
//! comes from a stored JPEG part (an embedded picture, padded by JPEG COM
//! segments) or, when little room is left, the archive comment.

use super::Pool;
use crate::CorpusError;
use crate::names::Stamp;
use crate::rng::Rng;
use crate::words;
use std::io::Write;

struct Entry {
    name: String,
    method: u16,
    crc: u32,
    usize: u32,
    data: Vec<u8>,
}

fn deflate(data: &[u8]) -> Result<Vec<u8>, CorpusError> {
    let mut e = flate2::write::DeflateEncoder::new(
        Vec::with_capacity(data.len() / 2),
        flate2::Compression::fast(),
    );
    e.write_all(data).map_err(|err| CorpusError::Encode {
        what: "deflate",
        detail: err.to_string(),
    })?;
    e.finish().map_err(|err| CorpusError::Encode {
        what: "deflate",
        detail: err.to_string(),
    })
}

fn entry(name: &str, data: &[u8], compress: bool) -> Result<Entry, CorpusError> {
    let crc = crc32fast::hash(data);
    let (method, stored) = if compress {
        (8, deflate(data)?)
    } else {
        (0, data.to_vec())
    };
    Ok(Entry {
        name: name.to_string(),
        method,
        crc,
        usize: data.len() as u32,
        data: stored,
    })
}

/// Archive size for these entries with an empty comment.
fn zip_len(entries: &[Entry]) -> usize {
    entries
        .iter()
        .map(|e| 30 + 46 + 2 * e.name.len() + e.data.len())
        .sum::<usize>()
        + 22
}

/// Bytes an extra stored entry named `name` adds besides its data.
fn entry_overhead(name: &str) -> usize {
    30 + 46 + 2 * name.len()
}

fn write_zip(entries: &[Entry], when: u64, comment: &[u8]) -> Vec<u8> {
    let s = Stamp {
        secs: when,
        centis: 0,
    };
    let (t, d) = (s.dos_time(), s.dos_date());
    let mut out = Vec::with_capacity(zip_len(entries) + comment.len());
    let mut offsets = Vec::with_capacity(entries.len());
    for e in entries {
        offsets.push(out.len() as u32);
        out.extend_from_slice(&0x0403_4b50u32.to_le_bytes());
        out.extend_from_slice(&20u16.to_le_bytes());
        out.extend_from_slice(&0u16.to_le_bytes());
        out.extend_from_slice(&e.method.to_le_bytes());
        out.extend_from_slice(&t.to_le_bytes());
        out.extend_from_slice(&d.to_le_bytes());
        out.extend_from_slice(&e.crc.to_le_bytes());
        out.extend_from_slice(&(e.data.len() as u32).to_le_bytes());
        out.extend_from_slice(&e.usize.to_le_bytes());
        out.extend_from_slice(&(e.name.len() as u16).to_le_bytes());
        out.extend_from_slice(&0u16.to_le_bytes());
        out.extend_from_slice(e.name.as_bytes());
        out.extend_from_slice(&e.data);
    }
    let cd = out.len() as u32;
    for (e, off) in entries.iter().zip(&offsets) {
        out.extend_from_slice(&0x0201_4b50u32.to_le_bytes());
        out.extend_from_slice(&20u16.to_le_bytes());
        out.extend_from_slice(&20u16.to_le_bytes());
        out.extend_from_slice(&0u16.to_le_bytes());
        out.extend_from_slice(&e.method.to_le_bytes());
        out.extend_from_slice(&t.to_le_bytes());
        out.extend_from_slice(&d.to_le_bytes());
        out.extend_from_slice(&e.crc.to_le_bytes());
        out.extend_from_slice(&(e.data.len() as u32).to_le_bytes());
        out.extend_from_slice(&e.usize.to_le_bytes());
        out.extend_from_slice(&(e.name.len() as u16).to_le_bytes());
        out.extend_from_slice(&[0; 6]); // extra, comment, disk
        out.extend_from_slice(&[0; 6]); // internal, external attributes
        out.extend_from_slice(&off.to_le_bytes());
        out.extend_from_slice(e.name.as_bytes());
    }
    let cd_len = out.len() as u32 - cd;
    out.extend_from_slice(&0x0605_4b50u32.to_le_bytes());
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(&(entries.len() as u16).to_le_bytes());
    out.extend_from_slice(&(entries.len() as u16).to_le_bytes());
    out.extend_from_slice(&cd_len.to_le_bytes());
    out.extend_from_slice(&cd.to_le_bytes());
    out.extend_from_slice(&(comment.len() as u16).to_le_bytes());
    out.extend_from_slice(comment);
    out
}

/// A ZIP-form file and the members a suite expanding it lists (every
/// entry: a document's parts too).
#[derive(Debug, Clone, Default)]
pub struct Zipped {
    /// Exactly the size asked for.
    pub bytes: Vec<u8>,
    /// Entries in its central directory.
    pub members: u64,
}

/// Make the archive exactly `size` bytes: the fixed `entries` (built by
/// `make` from a text budget) plus a stored picture or a comment. Halves
/// the text budget until it fits.
fn fit<F>(
    rng: &mut Rng,
    size: usize,
    pool: &Pool,
    when: u64,
    media_name: &str,
    mut make: F,
) -> Result<Zipped, CorpusError>
where
    F: FnMut(&mut Rng, usize) -> Result<Vec<Entry>, CorpusError>,
{
    // Our text deflates about 2.5:1: the parts take roughly a third of the
    // file and an embedded picture the rest, as in a typical report.
    let mut budget = size * 3 / 4;
    let key = rng.next_u64();
    loop {
        let mut entries = make(rng, budget)?;
        let base = zip_len(&entries);
        if base <= size {
            let room = size - base;
            if room <= 65_535 {
                let mut c = Vec::new();
                words::fill_text(rng, &mut c, room);
                return Ok(Zipped {
                    bytes: write_zip(&entries, when, &c),
                    members: entries.len() as u64,
                });
            }
            let data_len = room - entry_overhead(media_name);
            if let Some(jpeg) = pool.jpeg_any(rng, data_len, key) {
                entries.push(entry(media_name, &jpeg, false)?);
                return Ok(Zipped {
                    bytes: write_zip(&entries, when, b""),
                    members: entries.len() as u64,
                });
            }
        }
        if budget == 0 {
            return Err(CorpusError::Encode {
                what: "zip",
                detail: format!("cannot fit an archive into {size} bytes"),
            });
        }
        budget /= 2;
    }
}

fn xml_escape_into(text: &[u8], out: &mut Vec<u8>) {
    for &c in text {
        match c {
            b'<' => out.extend_from_slice(b"&lt;"),
            b'>' => out.extend_from_slice(b"&gt;"),
            b'&' => out.extend_from_slice(b"&amp;"),
            _ => out.push(c),
        }
    }
}

/// Paragraphs of text of about `budget` bytes with the keywords spread in.
fn paragraphs(rng: &mut Rng, budget: usize, keywords: &[String]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut total = 0;
    let mut pending: Vec<&String> = keywords.iter().collect();
    while total < budget || !pending.is_empty() {
        let mut p = Vec::new();
        words::push_sentence(rng, &mut p);
        if let Some(k) = pending.pop() {
            p.push(b' ');
            p.extend_from_slice(k.as_bytes());
        }
        p.push(b' ');
        words::push_sentence(rng, &mut p);
        total += p.len();
        out.push(p);
    }
    out
}

fn core_xml(rng: &mut Rng, when: u64) -> Vec<u8> {
    let (f, l) = words::person(rng);
    let iso = Stamp {
        secs: when,
        centis: 0,
    }
    .iso();
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"yes\"?>\n<cp:coreProperties xmlns:cp=\"http://schemas.openxmlformats.org/package/2006/metadata/core-properties\" xmlns:dc=\"http://purl.org/dc/elements/1.1/\" xmlns:dcterms=\"http://purl.org/dc/terms/\" xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\"><dc:creator>{f} {l}</dc:creator><dcterms:created xsi:type=\"dcterms:W3CDTF\">{iso}Z</dcterms:created></cp:coreProperties>"
    )
    .into_bytes()
}

const RELS: &str = "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"yes\"?>\n<Relationships xmlns=\"http://schemas.openxmlformats.org/package/2006/relationships\"><Relationship Id=\"rId1\" Type=\"http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument\" Target=\"MAIN\"/><Relationship Id=\"rId2\" Type=\"http://schemas.openxmlformats.org/package/2006/relationships/metadata/core-properties\" Target=\"docProps/core.xml\"/></Relationships>";

/// A Word document of exactly `size` bytes.
pub fn docx(
    rng: &mut Rng,
    size: usize,
    keywords: &[String],
    pool: &Pool,
    when: u64,
) -> Result<Zipped, CorpusError> {
    fit(
        rng,
        size,
        pool,
        when,
        "word/media/image1.jpeg",
        |rng, budget| {
            let ct = "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"yes\"?>\n<Types xmlns=\"http://schemas.openxmlformats.org/package/2006/content-types\"><Default Extension=\"rels\" ContentType=\"application/vnd.openxmlformats-package.relationships+xml\"/><Default Extension=\"xml\" ContentType=\"application/xml\"/><Default Extension=\"jpeg\" ContentType=\"image/jpeg\"/><Override PartName=\"/word/document.xml\" ContentType=\"application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml\"/><Override PartName=\"/docProps/core.xml\" ContentType=\"application/vnd.openxmlformats-package.core-properties+xml\"/></Types>";
            let mut doc = b"<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"yes\"?>\n<w:document xmlns:w=\"http://schemas.openxmlformats.org/wordprocessingml/2006/main\"><w:body>".to_vec();
            for p in paragraphs(rng, budget, keywords) {
                doc.extend_from_slice(b"<w:p><w:r><w:t xml:space=\"preserve\">");
                xml_escape_into(&p, &mut doc);
                doc.extend_from_slice(b"</w:t></w:r></w:p>");
            }
            doc.extend_from_slice(b"<w:sectPr/></w:body></w:document>");
            Ok(vec![
                entry("[Content_Types].xml", ct.as_bytes(), true)?,
                entry(
                    "_rels/.rels",
                    RELS.replace("MAIN", "word/document.xml").as_bytes(),
                    true,
                )?,
                entry("word/document.xml", &doc, true)?,
                entry("docProps/core.xml", &core_xml(rng, when), true)?,
            ])
        },
    )
}

/// An Excel workbook of exactly `size` bytes.
pub fn xlsx(
    rng: &mut Rng,
    size: usize,
    keywords: &[String],
    pool: &Pool,
    when: u64,
) -> Result<Zipped, CorpusError> {
    fit(
        rng,
        size,
        pool,
        when,
        "xl/media/image1.jpeg",
        |rng, budget| {
            let ct = "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"yes\"?>\n<Types xmlns=\"http://schemas.openxmlformats.org/package/2006/content-types\"><Default Extension=\"rels\" ContentType=\"application/vnd.openxmlformats-package.relationships+xml\"/><Default Extension=\"xml\" ContentType=\"application/xml\"/><Default Extension=\"jpeg\" ContentType=\"image/jpeg\"/><Override PartName=\"/xl/workbook.xml\" ContentType=\"application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml\"/><Override PartName=\"/xl/worksheets/sheet1.xml\" ContentType=\"application/vnd.openxmlformats-officedocument.spreadsheetml.worksheet+xml\"/><Override PartName=\"/xl/sharedStrings.xml\" ContentType=\"application/vnd.openxmlformats-officedocument.spreadsheetml.sharedStrings+xml\"/><Override PartName=\"/docProps/core.xml\" ContentType=\"application/vnd.openxmlformats-package.core-properties+xml\"/></Types>";
            let wb = "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"yes\"?>\n<workbook xmlns=\"http://schemas.openxmlformats.org/spreadsheetml/2006/main\" xmlns:r=\"http://schemas.openxmlformats.org/officeDocument/2006/relationships\"><sheets><sheet name=\"Sheet1\" sheetId=\"1\" r:id=\"rId1\"/></sheets></workbook>";
            let wbrels = "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"yes\"?>\n<Relationships xmlns=\"http://schemas.openxmlformats.org/package/2006/relationships\"><Relationship Id=\"rId1\" Type=\"http://schemas.openxmlformats.org/officeDocument/2006/relationships/worksheet\" Target=\"worksheets/sheet1.xml\"/><Relationship Id=\"rId2\" Type=\"http://schemas.openxmlformats.org/officeDocument/2006/relationships/sharedStrings\" Target=\"sharedStrings.xml\"/></Relationships>";
            let strings = paragraphs(rng, budget / 2, keywords);
            let mut ss = format!("<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"yes\"?>\n<sst xmlns=\"http://schemas.openxmlformats.org/spreadsheetml/2006/main\" count=\"{0}\" uniqueCount=\"{0}\">", strings.len()).into_bytes();
            for s in &strings {
                ss.extend_from_slice(b"<si><t>");
                xml_escape_into(s, &mut ss);
                ss.extend_from_slice(b"</t></si>");
            }
            ss.extend_from_slice(b"</sst>");
            let mut sheet = b"<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"yes\"?>\n<worksheet xmlns=\"http://schemas.openxmlformats.org/spreadsheetml/2006/main\"><sheetData>".to_vec();
            for (i, _) in strings.iter().enumerate() {
                let r = i + 1;
                sheet.extend_from_slice(
                format!(
                    "<row r=\"{r}\"><c r=\"A{r}\" t=\"s\"><v>{i}</v></c><c r=\"B{r}\"><v>{}</v></c><c r=\"C{r}\"><v>{}.{:02}</v></c></row>",
                    rng.range(1, 99_999),
                    rng.range(0, 9_999),
                    rng.below(100)
                )
                .as_bytes(),
            );
            }
            sheet.extend_from_slice(b"</sheetData></worksheet>");
            Ok(vec![
                entry("[Content_Types].xml", ct.as_bytes(), true)?,
                entry(
                    "_rels/.rels",
                    RELS.replace("MAIN", "xl/workbook.xml").as_bytes(),
                    true,
                )?,
                entry("xl/workbook.xml", wb.as_bytes(), true)?,
                entry("xl/_rels/workbook.xml.rels", wbrels.as_bytes(), true)?,
                entry("xl/worksheets/sheet1.xml", &sheet, true)?,
                entry("xl/sharedStrings.xml", &ss, true)?,
                entry("docProps/core.xml", &core_xml(rng, when), true)?,
            ])
        },
    )
}

/// A ZIP archive of exactly `size` bytes: deflated text files and a
/// stored photo.
pub fn archive(
    rng: &mut Rng,
    size: usize,
    keywords: &[String],
    pool: &Pool,
    when: u64,
) -> Result<Zipped, CorpusError> {
    let folder = words::zipf_word(rng).to_string();
    fit(
        rng,
        size,
        pool,
        when,
        &format!("{folder}/photo.jpg"),
        |rng, budget| {
            let n = rng.range(1, 4) as usize;
            let mut entries = Vec::new();
            for i in 0..n {
                let mut t = Vec::new();
                let kws: Vec<String> = if i == 0 {
                    keywords.to_vec()
                } else {
                    Vec::new()
                };
                for p in paragraphs(rng, budget / n, &kws) {
                    t.extend_from_slice(&p);
                    t.extend_from_slice(b"\r\n\r\n");
                }
                entries.push(entry(&format!("{folder}/notes{}.txt", i + 1), &t, true)?);
            }
            Ok(entries)
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn archives_are_exact() {
        let pool = Pool::build(3).unwrap();
        let kw = vec!["qzbcdfghjk".to_string()];
        for size in [4096usize, 5000, 70_000, 150_001, 2_000_000] {
            let mut r = Rng::new(size as u64);
            let d = docx(&mut r, size, &kw, &pool, 1 << 30).unwrap();
            let x = xlsx(&mut r, size, &kw, &pool, 1 << 30).unwrap();
            let a = archive(&mut r, size, &kw, &pool, 1 << 30).unwrap();
            for z in [&d, &x, &a] {
                assert_eq!(z.bytes.len(), size);
                // The central directory's own count (end record, offset
                // 10) is the count reported.
                let eocd = z
                    .bytes
                    .windows(4)
                    .rposition(|w| w == b"PK\x05\x06")
                    .unwrap();
                let n = u16::from_le_bytes([z.bytes[eocd + 10], z.bytes[eocd + 11]]);
                assert_eq!(z.members, n as u64, "size {size}");
            }
            assert!(d.members >= 4 && x.members >= 7 && a.members >= 1);
        }
    }
}
