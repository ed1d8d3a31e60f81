//! SQLite databases (browser histories, chat and app stores): the text
//! values of every record on every table and index leaf page, each on a
//! line of its own. Reading printable strings instead would glue adjacent
//! text columns into one word (a record stores its values back to back).
//!
//! Pages are walked in file order rather than through the b-trees, so
//! records on pages no tree reaches any more (freed, but not wiped) are
//! indexed too, as a forensic reader wants. Every offset and length comes
//! from the file and is checked before use; a damaged page is skipped and
//! recorded.

use super::Extraction;
use super::text::push_latin1;

/// Whether the bytes start with the SQLite 3 header.
pub fn is_sqlite(head: &[u8]) -> bool {
    head.starts_with(b"SQLite format 3\0")
}

/// A SQLite varint at `data[at..]`: (value, bytes used).
fn varint(data: &[u8], at: usize) -> Option<(u64, usize)> {
    let mut v = 0u64;
    for i in 0..9 {
        let b = *data.get(at + i)?;
        if i == 8 {
            return Some(((v << 8) | u64::from(b), 9));
        }
        v = (v << 7) | u64::from(b & 0x7F);
        if b & 0x80 == 0 {
            return Some((v, i + 1));
        }
    }
    None
}

/// Extract the text values of a database held in memory.
pub fn extract(x: &mut Extraction<'_>, data: &[u8]) {
    if data.len() < 100 {
        return;
    }
    let page_size = match u16::from_be_bytes([data[16], data[17]]) {
        1 => 65_536usize,
        n if n >= 512 && n.is_power_of_two() => usize::from(n),
        n => {
            x.problem(format!("SQLite: invalid page size {n}"));
            return;
        }
    };
    let usable = page_size - usize::from(data[20]);
    if usable < 480 {
        x.problem("SQLite: usable page size too small");
        return;
    }
    let mut out = String::new();
    let mut damaged = 0u64;
    for (i, page) in data.chunks(page_size).enumerate() {
        let header = if i == 0 { 100 } else { 0 };
        if page_cells(page, header, usable, data, page_size, &mut out).is_none() {
            damaged += 1;
        }
        if out.len() >= 64 * 1024 {
            x.emit(&out);
            out.clear();
        }
    }
    x.emit(&out);
    if damaged > 0 {
        x.problem(format!(
            "SQLite: {damaged} b-tree pages could not be read whole"
        ));
    }
}

/// The text of one page's cells; `None` when the page is damaged (what was
/// read before the damage is kept).
fn page_cells(
    page: &[u8],
    header: usize,
    usable: usize,
    file: &[u8],
    page_size: usize,
    out: &mut String,
) -> Option<()> {
    let kind = *page.get(header)?;
    // Leaf pages hold the records; interior pages hold keys that repeat
    // leaf content; other pages are overflow or free.
    let table = match kind {
        0x0D => true,
        0x0A => false,
        _ => return Some(()),
    };
    let cells = usize::from(u16::from_be_bytes([
        *page.get(header + 3)?,
        *page.get(header + 4)?,
    ]));
    let pointers = header + 8;
    for c in 0..cells {
        let p = pointers + 2 * c;
        let cell = usize::from(u16::from_be_bytes([*page.get(p)?, *page.get(p + 1)?]));
        if cell >= page.len().min(usable) {
            return None;
        }
        let (payload, mut at) = varint(page, cell)?;
        at += cell;
        if table {
            let (_, n) = varint(page, at)?;
            at += n;
        }
        let payload = usize::try_from(payload).ok()?;
        let max_local = if table {
            usable - 35
        } else {
            (usable - 12) * 64 / 255 - 23
        };
        let local = if payload <= max_local {
            payload
        } else {
            let min_local = (usable - 12) * 32 / 255 - 23;
            let k = min_local + (payload - min_local) % (usable - 4);
            if k <= max_local { k } else { min_local }
        };
        let local_end = at.checked_add(local)?;
        let mut bytes = page.get(at..local_end)?.to_vec();
        if local < payload {
            // Follow the overflow chain, at most as many pages as the
            // payload can need (a loop in the chain ends there).
            let mut next = u32::from_be_bytes(page.get(local_end..local_end + 4)?.try_into().ok()?);
            let mut budget = payload.div_ceil(usable - 4) + 1;
            while next != 0 && bytes.len() < payload && budget > 0 {
                budget -= 1;
                let start = (usize::try_from(next).ok()?.checked_sub(1)?).checked_mul(page_size)?;
                let ov = file.get(start..start.checked_add(usable)?)?;
                next = u32::from_be_bytes(ov.get(..4)?.try_into().ok()?);
                let take = (payload - bytes.len()).min(usable - 4);
                bytes.extend_from_slice(ov.get(4..4 + take)?);
            }
        }
        record_text(&bytes, out);
    }
    Some(())
}

/// The text values of one record.
fn record_text(rec: &[u8], out: &mut String) {
    let Some((header_len, mut at)) = varint(rec, 0) else {
        return;
    };
    let Ok(header_len) = usize::try_from(header_len) else {
        return;
    };
    if header_len > rec.len() {
        return;
    }
    let mut body = header_len;
    while at < header_len {
        let Some((serial, n)) = varint(rec, at) else {
            return;
        };
        at += n;
        let len = match serial {
            0 | 8 | 9 => 0,
            1..=4 => serial as usize,
            5 => 6,
            6 | 7 => 8,
            10 | 11 => return,
            s if s % 2 == 0 => ((s - 12) / 2) as usize,
            s => ((s - 13) / 2) as usize,
        };
        let Some(end) = body.checked_add(len).filter(|&e| e <= rec.len()) else {
            return;
        };
        if serial >= 13 && serial % 2 == 1 && len > 0 {
            let value = &rec[body..end];
            match std::str::from_utf8(value) {
                Ok(s) => out.push_str(s),
                Err(_) => push_latin1(value, out),
            }
            out.push('\n');
        }
        body = end;
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Extraction, Limits};
    use super::*;

    #[test]
    fn text_columns_of_a_real_database_come_out_separately() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("h.sqlite");
        let c = rusqlite::Connection::open(&path).unwrap();
        c.execute_batch(
            "CREATE TABLE t(a INTEGER, term TEXT, norm TEXT, big TEXT);
             INSERT INTO t VALUES (1, 'qzfirstword', 'qzsecondword', NULL);",
        )
        .unwrap();
        // A value larger than a page goes to overflow pages.
        let long = format!("{} qztailword", "filler ".repeat(2000));
        c.execute("INSERT INTO t VALUES (2, 'x', 'y', ?1)", [&long])
            .unwrap();
        drop(c);
        let data = std::fs::read(&path).unwrap();
        assert!(is_sqlite(&data));
        let limits = Limits::default();
        let mut out = String::new();
        let mut x = Extraction::new(&limits, &mut out);
        extract(&mut x, &data);
        assert!(x.problems.is_empty(), "{:?}", x.problems);
        let lines: Vec<&str> = out.lines().collect();
        assert!(lines.contains(&"qzfirstword") && lines.contains(&"qzsecondword"));
        assert!(out.contains("qztailword"));
        // Damaged copies never panic.
        for cut in [100, 500, 4096, data.len() - 1] {
            let mut o = String::new();
            let mut x = Extraction::new(&limits, &mut o);
            extract(&mut x, &data[..cut.min(data.len())]);
        }
        let mut bad = data.clone();
        for b in bad.iter_mut().skip(4096).step_by(7) {
            *b = 0xFF;
        }
        let mut o = String::new();
        let mut x = Extraction::new(&limits, &mut o);
        extract(&mut x, &bad);
    }
}
