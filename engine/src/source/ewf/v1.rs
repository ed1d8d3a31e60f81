//! EWF v1 (E01, and the SMART S01 and older EnCase layouts): each segment
//! is a 13-byte file header and a chain of sections, each opened by a
//! 76-byte descriptor (type, offset of the next, size, Adler-32) that is
//! checked before it is followed. The first segment's `volume` (or `disk`)
//! section gives the geometry; `header2`/`header` the case metadata;
//! `table` sections (mirrored by `table2`) place the chunks, which lie in
//! the `sectors` section before them (or, in the oldest layouts, in the
//! table section after its entries); `hash` and `digest` the acquisition's
//! MD5 and SHA-1. Layout as documented by libewf's "Expert Witness
//! Compression Format (EWF)"; our own parser so that every length and
//! offset is checked here (the `ewf` crate indexed past a hostile table).

use super::Layout;
use super::format::{
    MAX_METADATA_BYTES, SegmentRead, decode_text, inflate_bounded, le32, le64, nonzero,
    object_values, read_exact,
};
use super::table::{EntryFormat, MAX_TABLE_ENTRIES, TableCopy, TableRef};

const FILE_HEADER: u64 = 13;
const DESCRIPTOR: u64 = 76;
/// Sections one segment may hold before the chain is taken for a loop.
const MAX_SECTIONS: usize = 1 << 20;

/// Metadata tags of `header` and `header2` and the names caseload reports.
const TAGS: [(&str, &str); 9] = [
    ("c", "case_number"),
    ("n", "evidence_number"),
    ("a", "description"),
    ("e", "examiner"),
    ("t", "notes"),
    ("av", "acquiry_software"),
    ("ov", "os_version"),
    ("m", "acquiry_date"),
    ("u", "system_date"),
];

/// Open a v1 set: every segment's sections, in order.
pub(super) fn open<S: SegmentRead>(segments: &[S]) -> Result<Layout, String> {
    let mut layout = Layout::default();
    let mut geometry: Option<(u64, u64, u64)> = None; // chunk size, media size, chunks
    let mut header2: Option<Vec<(String, String)>> = None;
    let mut header: Option<Vec<(String, String)>> = None;
    let mut next_chunk = 0u64;
    for (index, seg) in segments.iter().enumerate() {
        let number = index + 1;
        let mut starts = Vec::new();
        let mut at = FILE_HEADER;
        let mut last_table: Option<usize> = None;
        // Set wherever the walk stops: at `next`/`done`, or with a note.
        let mut stopped = false;
        for _ in 0..MAX_SECTIONS {
            let d = match read_exact(seg, number, at, DESCRIPTOR, "section descriptor") {
                Ok(d) => d,
                Err(e) => {
                    layout
                        .notes
                        .push(format!("{e}; the rest of the segment is ignored"));
                    stopped = true;
                    break;
                }
            };
            let stored = le32(&d, 72);
            let computed = caseload_digests::adler32(&d[..72]);
            if stored != computed {
                layout.notes.push(format!(
                    "segment {number}: section descriptor at byte {at} fails its Adler-32 (stored {stored:08x}, computed {computed:08x}); the rest of the segment is ignored"
                ));
                stopped = true;
                break;
            }
            starts.push(at);
            let kind: String = d[..16]
                .iter()
                .take_while(|&&b| b != 0)
                .map(|&b| char::from(b))
                .collect();
            let next = le64(&d, 16);
            let size = le64(&d, 24);
            let body_at = at + DESCRIPTOR;
            // What the section says it holds, never past the file or the
            // next section.
            let body_len = size
                .saturating_sub(DESCRIPTOR)
                .min(seg.len().saturating_sub(body_at));
            match kind.as_str() {
                "header2" | "header" if body_len > 0 => {
                    let slot = if kind == "header2" {
                        &mut header2
                    } else {
                        &mut header
                    };
                    if slot.is_none() {
                        let raw = read_exact(
                            seg,
                            number,
                            body_at,
                            body_len.min(MAX_METADATA_BYTES),
                            "header section",
                        )?;
                        match inflate_bounded(&raw) {
                            Some(text) => *slot = Some(object_values(&decode_text(&text))),
                            None => layout.notes.push(format!(
                                "segment {number}: {kind} section at byte {at} does not inflate; its case metadata is not read"
                            )),
                        }
                    }
                }
                "volume" | "disk" if geometry.is_none() => {
                    geometry = Some(volume(seg, number, at, body_at, body_len)?);
                }
                "table" => {
                    let table = table(
                        seg,
                        number,
                        at,
                        body_at,
                        body_len,
                        next_chunk,
                        index,
                        &mut layout.notes,
                    )?;
                    next_chunk += u64::from(table.count);
                    layout.tables.push(table);
                    last_table = Some(layout.tables.len() - 1);
                }
                "table2" => {
                    // A mirror of the table before it in this segment.
                    if let Some(t) = last_table.take()
                        && let Ok(mirror) = table(
                            seg,
                            number,
                            at,
                            body_at,
                            body_len,
                            0,
                            index,
                            &mut Vec::new(),
                        )
                        && mirror.count == layout.tables[t].count
                    {
                        let copy = mirror.copies[0];
                        layout.tables[t].copies.push(copy);
                    }
                }
                "hash" if body_len >= 16 => {
                    let b = read_exact(seg, number, body_at, 16, "hash section")?;
                    layout.md5 = nonzero(&b).or(layout.md5.take());
                }
                "digest" if body_len >= 36 => {
                    let b = read_exact(seg, number, body_at, 36, "digest section")?;
                    if let Some(md5) = nonzero(&b[..16]) {
                        layout.md5 = Some(md5);
                    }
                    layout.sha1 = nonzero(&b[16..36]).or(layout.sha1.take());
                }
                "next" | "done" => {
                    stopped = true;
                    break;
                }
                _ => {}
            }
            // libewf's writers point a last section at itself.
            if next == at {
                stopped = true;
                break;
            }
            if next < at + DESCRIPTOR || next > seg.len() {
                layout.notes.push(format!(
                    "segment {number}: the {kind} section at byte {at} points to byte {next} for the next section, outside the file ({} bytes) or behind itself; the rest of the segment is ignored",
                    seg.len()
                ));
                stopped = true;
                break;
            }
            at = next;
        }
        if !stopped {
            layout.notes.push(format!(
                "segment {number}: more than {MAX_SECTIONS} sections without a `next` or `done` section; the rest of the segment is ignored"
            ));
        }
        starts.push(seg.len());
        layout.bounds.push(starts);
    }
    let (chunk_size, media_size, chunks) = geometry.ok_or(
        "no volume section in the first segment: not an EWF media image (or a truncated one)",
    )?;
    layout.chunk_size = chunk_size;
    layout.media_size = media_size;
    layout.declared_chunks = Some(chunks);
    let mut metadata = Vec::new();
    for (tag, name) in TAGS {
        let value = [&header2, &header]
            .into_iter()
            .flatten()
            .find_map(|pairs| pairs.iter().find(|(t, _)| t == tag).map(|(_, v)| v.clone()));
        if let Some(v) = value {
            metadata.push((name.to_string(), v));
        }
    }
    layout.metadata = metadata;
    Ok(layout)
}

/// The geometry of a `volume`/`disk` section: (chunk size, media size,
/// chunks). EnCase's is 1052 bytes (64-bit sector count); SMART's 94
/// (32-bit).
fn volume(
    seg: &dyn SegmentRead,
    number: usize,
    at: u64,
    body_at: u64,
    body_len: u64,
) -> Result<(u64, u64, u64), String> {
    if body_len < 24 {
        return Err(format!(
            "segment {number}: the volume section at byte {at} holds {body_len} bytes, too few for its geometry"
        ));
    }
    let b = read_exact(seg, number, body_at, body_len.min(1052), "volume section")?;
    let chunks = u64::from(le32(&b, 4));
    let sectors_per_chunk = u64::from(le32(&b, 8));
    let bytes_per_sector = u64::from(le32(&b, 12));
    let sectors = if body_len >= 1052 {
        le64(&b, 16)
    } else {
        u64::from(le32(&b, 16))
    };
    let chunk_size = sectors_per_chunk * bytes_per_sector;
    if !(512..=4096).contains(&bytes_per_sector) || !bytes_per_sector.is_power_of_two() {
        return Err(format!(
            "segment {number}: the volume section at byte {at} gives {bytes_per_sector} bytes per sector"
        ));
    }
    if chunk_size == 0 || chunk_size > 64 << 20 {
        return Err(format!(
            "segment {number}: the volume section at byte {at} gives an implausible chunk of {sectors_per_chunk} sectors"
        ));
    }
    let media = sectors
        .checked_mul(bytes_per_sector)
        .ok_or_else(|| format!("segment {number}: the volume section at byte {at} gives {sectors} sectors, more than 64 bits of bytes"))?;
    Ok((chunk_size, media, chunks))
}

/// A `table` or `table2` section's header: 24 bytes (entries, padding,
/// base offset, padding, Adler-32), then the entries and their Adler-32.
#[allow(clippy::too_many_arguments)]
fn table(
    seg: &dyn SegmentRead,
    number: usize,
    at: u64,
    body_at: u64,
    body_len: u64,
    first: u64,
    segment: usize,
    notes: &mut Vec<String>,
) -> Result<TableRef, String> {
    if body_len < 24 {
        return Err(format!(
            "segment {number}: the table section at byte {at} holds {body_len} bytes, too few for its header"
        ));
    }
    let h = read_exact(seg, number, body_at, 24, "table header")?;
    let mut count = le32(&h, 0);
    let base = le64(&h, 8);
    let stored = le32(&h, 20);
    if stored != 0 && stored != caseload_digests::adler32(&h[..20]) {
        notes.push(format!(
            "segment {number}: the table header at byte {body_at} fails its Adler-32; its count ({count}) is used as read"
        ));
    }
    let room = (body_len - 24) / 4;
    let fits = u64::from(count).min(room).min(u64::from(MAX_TABLE_ENTRIES));
    if fits < u64::from(count) {
        notes.push(format!(
            "segment {number}: the table at byte {at} declares {count} entries but its section holds {room}; {fits} are read"
        ));
        count = fits as u32;
    }
    Ok(TableRef {
        segment,
        first,
        count,
        copies: vec![TableCopy {
            entries_at: body_at + 24,
            base,
            checksummed: room > u64::from(count),
        }],
        format: EntryFormat::V1,
    })
}
