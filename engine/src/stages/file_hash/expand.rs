//! Compound-file expansion, as FTK's pre-processing option "Expand
//! compound files" does it: a ZIP archive's members, an OOXML document's
//! parts, a mailbox's messages and an e-mail's attachments each become an
//! item of their own, hashed like a file and recorded in
//! `extracted_items` (and, in the ftk4 profile, as FTK items with their
//! properties).
//!
//! Members are found by the extraction code the index stage uses too (one parser per
//! format, with its caps on size, expansion and nesting, so a zip bomb
//! costs a bounded amount here too). Each member is written to the temp
//! channel (FTK's ADTemp, where it extracts a compound file's children to
//! process them), read back from there to be hashed and typed, and removed:
//! the temp device sees the extraction traffic a suite's would.

use crate::casedb::NewExtracted;
use crate::extract::{Extraction, Format, Limits, Member, Sink, sniff};
use crate::signature;
use crate::source::hex;
use caseload_digests::Digest;

/// What expanding one compound file gave.
#[derive(Debug, Default)]
pub(super) struct Expansion {
    /// One record per member (file id filled in), in the order met.
    pub members: Vec<NewExtracted>,
    /// Bytes of all members.
    pub bytes: u64,
    /// Problems met (broken members, caps hit, temp-channel failures).
    pub problems: Vec<String>,
    /// Whether members were left out (too many).
    pub truncated: bool,
}

/// Whether content starting with `head` is a compound file FTK expands.
pub(super) fn is_compound(head: &[u8]) -> bool {
    matches!(sniff(head), Format::Zip | Format::Ooxml | Format::Mail)
}

/// Text goes nowhere: expansion wants members, not words.
struct Discard;

impl Sink for Discard {
    fn push(&mut self, _text: &str) {}
}

/// Hashes wanted of each member.
#[derive(Debug, Clone, Copy)]
pub(super) struct Wanted {
    pub md5: bool,
    pub sha1: bool,
    pub sha256: bool,
}

/// Expand the compound file `data` (file row `file_id`), staging each
/// member through `temp` as `scratch` (a name private to the worker).
pub(super) fn expand(
    data: &[u8],
    file_id: i64,
    wanted: Wanted,
    temp: &crate::channel::Channel,
    scratch: &str,
) -> Expansion {
    let limits = Limits {
        binary_strings: false,
        ..Limits::default()
    };
    let mut out = Expansion::default();
    let mut staging = Vec::new();
    let mut parse_problems;
    // Ids of the members enclosing the current one, outermost first.
    let mut enclosing: Vec<i64> = Vec::new();
    let mut staging_failed = false;
    {
        let mut on_member = |m: Member<'_>| {
            let Some(id) = NewExtracted::id_of(file_id, out.members.len()) else {
                if !out.truncated {
                    out.truncated = true;
                    out.problems.push(format!(
                        "more than {} members: the rest are not listed",
                        NewExtracted::MAX_PER_FILE
                    ));
                }
                return;
            };
            enclosing.truncate(m.depth.saturating_sub(1));
            let parent_id = enclosing.last().copied();
            enclosing.push(id);
            let bytes: &[u8] = if staging_failed {
                m.data
            } else {
                match stage_through_temp(temp, scratch, m.data, &mut staging) {
                    Ok(()) => &staging,
                    Err(e) => {
                        staging_failed = true;
                        out.problems.push(format!(
                            "member `{}` could not be staged on the temp channel: {e}; it and the rest are hashed from memory",
                            m.path
                        ));
                        m.data
                    }
                }
            };
            out.bytes += bytes.len() as u64;
            // A member cut at a cap is listed; its hashes would be of a
            // part, so it has none.
            let whole = m.complete.then_some(bytes);
            if !m.complete {
                out.problems.push(format!(
                    "member `{}` is not whole (cut at a cap or broken off): listed with {} bytes, not hashed",
                    m.path,
                    bytes.len()
                ));
            }
            out.members.push(NewExtracted {
                id,
                file_id,
                parent_id,
                member: m.path.to_string(),
                name: m.name.to_string(),
                container: m.container,
                size: bytes.len() as u64,
                md5: whole
                    .filter(|_| wanted.md5)
                    .map(|b| hex(&caseload_digests::Md5::digest(b))),
                sha1: whole
                    .filter(|_| wanted.sha1)
                    .map(|b| hex(&caseload_digests::Sha1::digest(b))),
                sha256: whole
                    .filter(|_| wanted.sha256)
                    .map(|b| hex(&caseload_digests::Sha256::digest(b))),
                signature: signature::identify(&bytes[..bytes.len().min(signature::HEAD_LEN)]),
            });
        };
        let mut discard = Discard;
        let mut x = Extraction::with_members(&limits, &mut discard, &mut on_member);
        x.extract(data, 0);
        parse_problems = std::mem::take(&mut x.problems);
    }
    out.problems.append(&mut parse_problems);
    let _ = temp.remove_file(scratch);
    out
}

/// Write `data` to the temp channel's `scratch` file and read it back into
/// `into`, as a suite processes an extracted child from its temp folder.
fn stage_through_temp(
    temp: &crate::channel::Channel,
    scratch: &str,
    data: &[u8],
    into: &mut Vec<u8>,
) -> std::io::Result<()> {
    let file = temp.create(scratch).map_err(std::io::Error::other)?;
    file.write_all_at(data, 0)?;
    into.clear();
    into.resize(data.len(), 0);
    let mut done = 0;
    while done < into.len() {
        let n = file.read_at(&mut into[done..], done as u64)?;
        if n == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "the staged member is shorter than written",
            ));
        }
        done += n;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::channel::{Channel, ChannelKind};
    use std::io::Write;

    fn zip(entries: &[(&str, &[u8])]) -> Vec<u8> {
        let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
        for (name, data) in entries {
            w.start_file(*name, zip::write::SimpleFileOptions::default())
                .unwrap();
            w.write_all(data).unwrap();
        }
        w.finish().unwrap().into_inner()
    }

    #[test]
    fn archives_in_archives_and_mail_attachments_become_members() {
        let dir = tempfile::tempdir().unwrap();
        let temp = Channel::new(ChannelKind::Temp, dir.path(), Vec::new());
        let inner = zip(&[("deep.txt", b"deep text")]);
        let outer = zip(&[("a.txt", b"hello"), ("inner.zip", &inner)]);
        let want = Wanted {
            md5: true,
            sha1: true,
            sha256: false,
        };
        let x = expand(&outer, 7, want, &temp, "w0");
        let paths: Vec<&str> = x.members.iter().map(|m| m.member.as_str()).collect();
        assert_eq!(paths, ["a.txt", "inner.zip", "inner.zip/deep.txt"]);
        // The nested member's parent is the archive it came out of.
        let parents: Vec<Option<i64>> = x.members.iter().map(|m| m.parent_id).collect();
        assert_eq!(parents, [None, None, Some(x.members[1].id)]);
        assert_eq!(
            x.members[0].md5.as_deref(),
            Some("5d41402abc4b2a76b9719d911017c592")
        );
        assert!(
            x.members
                .iter()
                .all(|m| m.file_id == 7 && m.sha256.is_none())
        );
        assert_eq!(x.bytes, 5 + inner.len() as u64 + 9);
        assert!(!temp.exists("w0"), "the staging file is removed");

        let mail = b"From: a@example.com\r\nSubject: s\r\nMIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=\"b\"\r\n\r\n--b\r\nContent-Type: text/plain\r\n\r\nbody\r\n--b\r\nContent-Type: application/octet-stream; name=\"x.bin\"\r\nContent-Transfer-Encoding: base64\r\n\r\naGVsbG8=\r\n--b--\r\n";
        assert!(is_compound(mail));
        let x = expand(mail, 1, want, &temp, "w0");
        assert_eq!(x.members.len(), 1, "{:?}", x.members);
        assert_eq!(x.members[0].name, "x.bin");
        assert_eq!(x.members[0].container, "mail");
        assert_eq!(
            x.members[0].md5.as_deref(),
            Some("5d41402abc4b2a76b9719d911017c592")
        );
        assert!(!is_compound(b"just some plain text, nothing compound here"));
    }

    #[test]
    fn broken_archives_and_hostile_names_are_recorded_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let temp = Channel::new(ChannelKind::Temp, dir.path().join("t"), Vec::new());
        std::fs::create_dir_all(dir.path().join("t")).unwrap();
        let want = Wanted {
            md5: true,
            sha1: false,
            sha256: false,
        };
        // A member named to climb out of any directory is only a name.
        let archive = zip(&[("../../evil.txt", b"x"), ("/abs.txt", b"y")]);
        let x = expand(&archive, 1, want, &temp, "w0");
        let names: Vec<&str> = x.members.iter().map(|m| m.member.as_str()).collect();
        assert_eq!(names, ["../../evil.txt", "/abs.txt"]);
        assert!(!dir.path().join("evil.txt").exists());
        assert_eq!(std::fs::read_dir(dir.path().join("t")).unwrap().count(), 0);
        // A truncated archive: what is readable, and a recorded problem.
        let x = expand(&archive[..archive.len() / 2], 1, want, &temp, "w0");
        assert!(!x.problems.is_empty(), "{:?}", x.members);
    }
}
