//! File listings from a case database in the formats examiners exchange:
//! The Sleuth Kit's bodyfile (mactime input, MD5 in the first column), DFXML
//! in fiwalk's shape, and CSV. Rows are streamed from the database, so memory
//! does not grow with the number of files.

use crate::casedb::{CaseReader, DbError, Extents, ListedFile, format_utc};
use std::io::Write;

/// Output formats of `caseload export`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExportFormat {
    /// TSK bodyfile 3.x: `MD5|name|inode|mode|UID|GID|size|atime|mtime|ctime|crtime`.
    Bodyfile,
    /// Digital Forensics XML, as fiwalk writes it.
    Dfxml,
    /// Comma-separated values with a header row.
    Csv,
}

/// Errors exporting.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// Reading the case database failed.
    #[error("reading the case database: {0}")]
    Db(#[from] DbError),
    /// Writing the output failed.
    #[error("writing the export: {0}")]
    Io(#[from] std::io::Error),
}

type Row = ListedFile;

fn for_each_row(
    reader: &mut CaseReader,
    mut f: impl FnMut(Row) -> Result<(), ExportError>,
) -> Result<u64, ExportError> {
    let mut n = 0;
    reader.list_files(&mut |r| {
        n += 1;
        f(r)
    })?;
    Ok(n)
}

/// Write every file row of the case database in `format`; returns the
/// number of rows.
pub fn export(
    reader: &mut CaseReader,
    format: ExportFormat,
    out: &mut dyn Write,
) -> Result<u64, ExportError> {
    match format {
        ExportFormat::Bodyfile => for_each_row(reader, |r| bodyfile_line(&r, out)),
        ExportFormat::Csv => {
            writeln!(
                out,
                "id,volume,meta_addr,path,name,short_name,kind,size,allocated,recovery,atime,mtime,ctime,crtime,md5,sha1,sha256,signature,extension_mismatch,entropy,duplicate_group,kff"
            )?;
            for_each_row(reader, |r| csv_line(&r, out))
        }
        ExportFormat::Dfxml => dfxml(reader, out),
    }
}

/// TSK's mode string: name type / meta type and permission bits.
/// The bodyfile's mode column as TSK prints it: the type (twice: the
/// name's and the metadata's) and `rwx` triplets with set-user-ID,
/// set-group-ID and sticky bits. Cases before schema version 4 have no
/// stored mode: it comes from the read-only attribute bit, as FAT's.
fn mode_string(kind: &str, attributes: Option<i64>, owner: Option<[i64; 3]>) -> String {
    let t = match kind {
        "directory" => 'd',
        "virtual" => 'v',
        "virtual-directory" => 'V',
        "symlink" => 'l',
        "fifo" => 'p',
        "char-device" => 'c',
        "block-device" => 'b',
        "socket" => 's',
        _ => 'r',
    };
    // The file type a Unix file system stores with the mode wins (the
    // record's kind says file for links, FIFOs, devices and sockets).
    let t = match owner.map_or(0, |o| o[0] & 0o170000) {
        0o040000 => 'd',
        0o120000 => 'l',
        0o010000 => 'p',
        0o020000 => 'c',
        0o060000 => 'b',
        0o140000 => 's',
        _ => t,
    };
    let mode = match owner {
        Some([m, ..]) => m & 0o7777,
        None if matches!(t, 'v' | 'V') => 0,
        None if attributes.is_some_and(|a| a & 1 != 0) => 0o555,
        None => 0o777,
    };
    let mut out = format!("{t}/{t}");
    // (read, write, execute, special bit, its letter) per class.
    for (shift, special, letter) in [(6, 0o4000, 's'), (3, 0o2000, 's'), (0, 0o1000, 't')] {
        let bits = (mode >> shift) & 7;
        out.push(if bits & 4 != 0 { 'r' } else { '-' });
        out.push(if bits & 2 != 0 { 'w' } else { '-' });
        out.push(match (bits & 1 != 0, mode & special != 0) {
            (true, true) => letter,
            (false, true) => letter.to_ascii_uppercase(),
            (true, false) => 'x',
            (false, false) => '-',
        });
    }
    out
}

/// `\xNN` for each character `escaped` picks, and for `\` itself, so that
/// the escape is lossless: the name is read back by undoing `\xNN`.
fn escape_hex(s: &str, escaped: impl Fn(char) -> bool) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if c == '\\' || escaped(c) {
            for b in c.to_string().bytes() {
                out.push_str(&format!("\\x{b:02x}"));
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Keep a bodyfile line one line of 11 fields: `|` would split a field,
/// a line break or other control character would split or garble the line
/// (names come from the evidence and may hold anything).
fn bodyfile_field(s: &str) -> String {
    escape_hex(s, |c| c == '|' || c.is_control())
}

fn bodyfile_line(r: &Row, out: &mut dyn Write) -> Result<(), ExportError> {
    let t = |v: Option<i64>| v.unwrap_or(0);
    writeln!(
        out,
        "{}|/{}{}|{}|{}|{}|{}|{}|{}|{}|{}|{}",
        r.md5.as_deref().unwrap_or("0"),
        bodyfile_field(&r.path),
        if r.allocated { "" } else { " (deleted)" },
        bodyfile_field(r.meta_addr.as_deref().unwrap_or("0")),
        mode_string(&r.kind, r.attributes, r.owner),
        r.owner.map_or(0, |o| o[1]),
        r.owner.map_or(0, |o| o[2]),
        r.size,
        t(r.times[0]),
        t(r.times[1]),
        t(r.times[2]),
        t(r.times[3]),
    )?;
    Ok(())
}

/// A CSV field. A field a spreadsheet would run as a formula (starting
/// with `=`, `+`, `-`, `@`, a tab or a carriage return: a hostile file
/// name) gets a leading `'`, which spreadsheets show as text (OWASP's CSV
/// injection advice); strip one leading `'` before such a character to
/// get the name back.
fn csv_field(s: &str) -> String {
    let s = if s.starts_with(['=', '+', '-', '@', '\t', '\r']) {
        format!("'{s}")
    } else {
        s.to_string()
    };
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s
    }
}

fn opt<T: ToString>(v: &Option<T>) -> String {
    v.as_ref().map(ToString::to_string).unwrap_or_default()
}

fn csv_line(r: &Row, out: &mut dyn Write) -> Result<(), ExportError> {
    let fields = [
        r.id.to_string(),
        r.volume_slot.to_string(),
        csv_field(r.meta_addr.as_deref().unwrap_or("")),
        csv_field(&r.path),
        csv_field(&r.name),
        csv_field(r.short_name.as_deref().unwrap_or("")),
        r.kind.clone(),
        r.size.to_string(),
        u8::from(r.allocated).to_string(),
        r.recovery.clone(),
        opt(&r.times[0]),
        opt(&r.times[1]),
        opt(&r.times[2]),
        opt(&r.times[3]),
        opt(&r.md5),
        opt(&r.sha1),
        opt(&r.sha256),
        opt(&r.signature),
        opt(&r.extension_mismatch.map(u8::from)),
        opt(&r.entropy.map(|e| format!("{e:.4}"))),
        opt(&r.duplicate_group),
        opt(&r.kff),
    ];
    writeln!(out, "{}", fields.join(","))?;
    Ok(())
}

fn xml(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '\'' => out.push_str("&apos;"),
            '"' => out.push_str("&quot;"),
            // XML 1.0 cannot carry most control characters even escaped;
            // `\` is escaped too so that the `\xNN` form is lossless.
            c if c == '\\' || ((c as u32) < 0x20 && !matches!(c, '\t' | '\n' | '\r')) => {
                out.push_str(&format!("\\x{:02x}", c as u32))
            }
            c => out.push(c),
        }
    }
    out
}

fn dfxml(reader: &mut CaseReader, out: &mut dyn Write) -> Result<u64, ExportError> {
    writeln!(out, "<?xml version='1.0' encoding='UTF-8'?>")?;
    writeln!(
        out,
        "<dfxml xmlns='http://www.forensicswiki.org/wiki/Category:Digital_Forensics_XML' xmlns:dc='http://purl.org/dc/elements/1.1/' version='1.1.0'>"
    )?;
    writeln!(
        out,
        "  <metadata>\n    <dc:type>Disk Image</dc:type>\n  </metadata>"
    )?;
    writeln!(
        out,
        "  <creator version='1.0'>\n    <program>caseload</program>\n    <version>{}</version>\n  </creator>",
        env!("CARGO_PKG_VERSION")
    )?;
    let source = reader.first_evidence().ok().flatten();
    if let Some((path, size)) = source {
        writeln!(
            out,
            "  <source>\n    <image_filename>{}</image_filename>\n    <imagesize>{size}</imagesize>\n  </source>",
            xml(&path)
        )?;
    }
    let mut current: Option<i64> = None;
    let mut object_id = 0u64;
    let n = for_each_row(reader, |r| {
        if current != Some(r.volume_offset) {
            if current.is_some() {
                writeln!(out, "  </volume>")?;
            }
            writeln!(out, "  <volume offset='{}'>", r.volume_offset)?;
            writeln!(
                out,
                "    <partition_offset>{}</partition_offset>",
                r.volume_offset
            )?;
            writeln!(out, "    <sector_size>512</sector_size>")?;
            if let Some(t) = &r.fs_type {
                writeln!(
                    out,
                    "    <ftype_str>{}</ftype_str>",
                    xml(&t.to_ascii_lowercase())
                )?;
            }
            current = Some(r.volume_offset);
        }
        object_id += 1;
        let name_type = match r.kind.as_str() {
            "directory" => "d",
            "virtual" => "v",
            "virtual-directory" => "V",
            _ => "r",
        };
        let meta_type = if r.kind == "directory" { 2 } else { 1 };
        let alloc = u8::from(r.allocated);
        writeln!(out, "    <fileobject>")?;
        writeln!(out, "      <filename>{}</filename>", xml(&r.path))?;
        writeln!(out, "      <partition>{}</partition>", r.volume_slot + 1)?;
        writeln!(out, "      <id>{object_id}</id>")?;
        writeln!(out, "      <name_type>{name_type}</name_type>")?;
        writeln!(out, "      <filesize>{}</filesize>", r.size)?;
        writeln!(
            out,
            "      <alloc_inode>{alloc}</alloc_inode>\n      <alloc_name>{alloc}</alloc_name>"
        )?;
        writeln!(out, "      <used>1</used>")?;
        if let Some(m) = &r.meta_addr {
            writeln!(out, "      <inode>{}</inode>", xml(m))?;
        }
        writeln!(out, "      <meta_type>{meta_type}</meta_type>")?;
        for (tag, v) in [
            ("atime", r.times[0]),
            ("mtime", r.times[1]),
            ("ctime", r.times[2]),
            ("crtime", r.times[3]),
        ] {
            if let Some(secs) = v {
                let mut t = format_utc(secs, 0);
                // fiwalk prints whole seconds.
                t.truncate(19);
                writeln!(out, "      <{tag}>{t}Z</{tag}>")?;
            }
        }
        if let Some(ext) = &r.extents
            && let Ok(runs) = Extents::decode(ext).map(|e| e.pairs())
        {
            writeln!(out, "      <byte_runs facet='data'>")?;
            let mut file_offset = 0u64;
            for (offset, len) in runs {
                match offset {
                    Some(o) => writeln!(
                        out,
                        "       <byte_run file_offset='{file_offset}' fs_offset='{}' img_offset='{o}' len='{len}'/>",
                        o.saturating_sub(u64::try_from(r.volume_offset).unwrap_or(0))
                    )?,
                    None => writeln!(
                        out,
                        "       <byte_run file_offset='{file_offset}' fill='0' len='{len}'/>"
                    )?,
                }
                file_offset += len;
            }
            writeln!(out, "      </byte_runs>")?;
        }
        for (t, v) in [("md5", &r.md5), ("sha1", &r.sha1), ("sha256", &r.sha256)] {
            if let Some(h) = v {
                writeln!(out, "      <hashdigest type='{t}'>{h}</hashdigest>")?;
            }
        }
        if let Some(s) = &r.signature {
            writeln!(out, "      <libmagic>{}</libmagic>", xml(s))?;
        }
        writeln!(out, "    </fileobject>")?;
        Ok(())
    })?;
    if current.is_some() {
        writeln!(out, "  </volume>")?;
    }
    writeln!(out, "</dfxml>")?;
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_that_would_break_a_format_are_escaped() {
        assert_eq!(bodyfile_field("a|b"), "a\\x7cb");
        assert_eq!(csv_field("a,\"b\""), "\"a,\"\"b\"\"\"");
        assert_eq!(xml("<a&'\u{1}>"), "&lt;a&amp;&apos;\\x01&gt;");
        // Hostile names: a line break, a pipe, a backslash (escaped so the
        // \xNN form stays lossless), formulas.
        assert_eq!(
            bodyfile_field("a\nb|c\\x7c\u{7f}"),
            "a\\x0ab\\x7cc\\x5cx7c\\x7f"
        );
        assert_eq!(xml("a\\x01"), "a\\x5cx01");
        assert_eq!(
            csv_field("=HYPERLINK(\"http://x\")"),
            "\"'=HYPERLINK(\"\"http://x\"\")\""
        );
        for f in ["+1", "-1", "@SUM(A1)", "\tx"] {
            assert_eq!(csv_field(f), format!("'{f}"));
        }
        assert_eq!(csv_field("a-b=c"), "a-b=c");
        // Older cases: from the read-only bit.
        assert_eq!(mode_string("directory", Some(0x10), None), "d/drwxrwxrwx");
        assert_eq!(mode_string("file", Some(0x21), None), "r/rr-xr-xr-x");
        assert_eq!(mode_string("virtual", Some(0), None), "v/v---------");
        // Stored modes, as TSK prints them (ls's letters for the special
        // bits: lower case over execute, upper case without).
        assert_eq!(
            mode_string("file", None, Some([0o644, 0, 0])),
            "r/rrw-r--r--"
        );
        assert_eq!(
            mode_string("symlink", None, Some([0o777, 0, 0])),
            "l/lrwxrwxrwx"
        );
        assert_eq!(
            mode_string("file", None, Some([0o4755, 0, 0])),
            "r/rrwsr-xr-x"
        );
        assert_eq!(
            mode_string("file", None, Some([0o2644, 0, 0])),
            "r/rrw-r-Sr--"
        );
        assert_eq!(
            mode_string("directory", None, Some([0o1777, 0, 0])),
            "d/drwxrwxrwt"
        );
        assert_eq!(
            mode_string("file", None, Some([0o1776, 0, 0])),
            "r/rrwxrwxrwT"
        );
        assert_eq!(
            mode_string("file", None, Some([0o111, 0, 0])),
            "r/r--x--x--x"
        );
        // ext's type bits.
        assert_eq!(
            mode_string("file", None, Some([0o120777, 0, 0])),
            "l/lrwxrwxrwx"
        );
        assert_eq!(
            mode_string("file", None, Some([0o010644, 0, 0])),
            "p/prw-r--r--"
        );
        assert_eq!(
            mode_string("file", None, Some([0o100600, 0, 0])),
            "r/rrw-------"
        );
    }
}
