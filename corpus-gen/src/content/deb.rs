//! A Debian package as apt leaves it in `/var/cache/apt/archives`: an `ar`
//! archive of `debian-binary`, `control.tar.gz` and `data.tar.gz`
//! (dpkg-deb's `-Zgzip` form), exactly the size asked for.
//!
//! The data member is a gzip of a ustar archive holding one program
//! (`./usr/bin/NAME`: an ELF header and incompressible bytes, as a
//! compiled binary nearly is). Its compressed stream is stored blocks, as
//! deflate leaves incompressible input, and the bytes a whole number of
//! tar blocks cannot fill go to the gzip header's extra field (RFC 1952
//! FEXTRA), which every reader skips: so the member, and the package, come
//! out exact.

use super::gzip::{STORED_HEAD, push_stored, push_trailer, stored_blocks};
use crate::rng::Rng;
use flate2::Compression;
use flate2::write::GzEncoder;
use std::io::Write;

/// A tar block.
const BLOCK: usize = 512;
/// An `ar` member header.
const AR_HEADER: usize = 60;
/// gzip's fixed header and trailer, and FEXTRA's length field with one
/// subfield's own header.
const GZ_FIXED: usize = 10 + 8;
const GZ_EXTRA: usize = 2 + 4;
/// Smallest package generated (the data member needs a tar of a header,
/// one block and the end marker).
pub const MIN_SIZE: u64 = 8192;

/// The package name and version content `key` makes: the planner names
/// the file `NAME_VERSION_amd64.deb` from the same two.
pub fn identity(key: u64) -> (String, String) {
    let mut r = Rng::derive(key, &[0x0044_4542]);
    let name = crate::words::zipf_word(&mut r).to_ascii_lowercase();
    let version = format!(
        "{}.{}.{}-{}",
        r.range(0, 9),
        r.range(0, 30),
        r.range(0, 20),
        r.range(1, 5)
    );
    (name, version)
}

/// The package content `key` makes, of exactly `size` bytes (at least
/// [`MIN_SIZE`], and even: `ar` pads every member to two bytes, so an
/// archive's length is even; an odd size gives one byte less).
pub fn package(rng: &mut Rng, size: usize, key: u64, when: u64) -> Vec<u8> {
    let size = size.max(MIN_SIZE as usize) & !1;
    let (name, version) = identity(key);
    let name = name.as_str();
    let control = format!(
        "Package: {name}\nVersion: {version}\nArchitecture: amd64\nMaintainer: Caseload Packagers <packages@caseload.example>\nInstalled-Size: {}\nSection: utils\nPriority: optional\nDescription: {name} service and tools\n",
        size / 256
    );
    let mtime = when + crate::ext4::TO_1980;
    let control_tar = tar(&[("./control", control.as_bytes(), 0o644)], mtime);
    let mut gz = GzEncoder::new(Vec::new(), Compression::best());
    // Writing to a Vec cannot fail.
    let _ = gz.write_all(&control_tar);
    let control_gz = gz.finish().unwrap_or_default();

    let mut out = Vec::with_capacity(size);
    out.extend_from_slice(b"!<arch>\n");
    member(&mut out, "debian-binary", b"2.0\n", mtime);
    member(&mut out, "control.tar.gz", &control_gz, mtime);
    // The last member fills the rest (even: every part before it is).
    let data = data_member(rng, size - out.len() - AR_HEADER, name, mtime);
    member(&mut out, "data.tar.gz", &data, mtime);
    out
}

/// Append an `ar` member (common format: name ending `/`-less, padded to
/// an even offset with `\n`).
fn member(out: &mut Vec<u8>, name: &str, data: &[u8], mtime: u64) {
    let header = format!(
        "{name:<16}{mtime:<12}{:<6}{:<6}{:<8}{:<10}`\n",
        0,
        0,
        100_644,
        data.len()
    );
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(data);
    if data.len() % 2 == 1 {
        out.push(b'\n');
    }
}

/// A ustar archive of `files` (path, bytes, mode), with its end marker.
fn tar(files: &[(&str, &[u8], u32)], mtime: u64) -> Vec<u8> {
    let mut out = Vec::new();
    for (path, data, mode) in files {
        let mut h = [0u8; BLOCK];
        let put = |h: &mut [u8; BLOCK], at: usize, s: &[u8]| h[at..at + s.len()].copy_from_slice(s);
        put(&mut h, 0, path.as_bytes());
        put(&mut h, 100, format!("{mode:07o}\0").as_bytes());
        put(&mut h, 108, b"0000000\0");
        put(&mut h, 116, b"0000000\0");
        put(&mut h, 124, format!("{:011o}\0", data.len()).as_bytes());
        put(&mut h, 136, format!("{mtime:011o}\0").as_bytes());
        put(&mut h, 148, b"        ");
        h[156] = b'0';
        put(&mut h, 257, b"ustar\x0000");
        put(&mut h, 265, b"root");
        put(&mut h, 297, b"root");
        let sum: u32 = h.iter().map(|&b| b as u32).sum();
        put(&mut h, 148, format!("{sum:06o}\0 ").as_bytes());
        out.extend_from_slice(&h);
        out.extend_from_slice(data);
        out.resize(out.len().next_multiple_of(BLOCK), 0);
    }
    out.resize(out.len() + 2 * BLOCK, 0);
    out
}

/// `data.tar.gz` of exactly `len` bytes: the tar as large as stored
/// blocks allow, the rest in the header's extra field.
fn data_member(rng: &mut Rng, len: usize, name: &str, mtime: u64) -> Vec<u8> {
    let avail = len.saturating_sub(GZ_FIXED + GZ_EXTRA);
    let mut tar_len = avail / BLOCK * BLOCK;
    while tar_len > 3 * BLOCK && tar_len + STORED_HEAD * stored_blocks(tar_len) > avail {
        tar_len -= BLOCK;
    }
    let program_len = tar_len.saturating_sub(3 * BLOCK);
    let mut program = vec![0u8; program_len];
    rng.fill(&mut program);
    let elf = b"\x7fELF\x02\x01\x01\0";
    let head = elf.len().min(program.len());
    program[..head].copy_from_slice(&elf[..head]);
    let path = format!("./usr/bin/{name}");
    let tar = tar(&[(&path, &program, 0o755)], mtime);

    let blocks = stored_blocks(tar.len());
    let extra = len.saturating_sub(GZ_FIXED + GZ_EXTRA + tar.len() + STORED_HEAD * blocks);
    let mut out = Vec::with_capacity(len);
    // ID1 ID2, deflate, FEXTRA, mtime, best, Unix.
    out.extend_from_slice(&[0x1f, 0x8b, 8, 4]);
    out.extend_from_slice(&(mtime as u32).to_le_bytes());
    out.extend_from_slice(&[2, 3]);
    out.extend_from_slice(&((extra + 4) as u16).to_le_bytes());
    // One subfield ("cl", padding) of `extra` zero bytes.
    out.extend_from_slice(b"cl");
    out.extend_from_slice(&(extra as u16).to_le_bytes());
    out.resize(out.len() + extra, 0);
    push_stored(&mut out, &tar, blocks);
    push_trailer(&mut out, crc32fast::hash(&tar), tar.len());
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use flate2::read::GzDecoder;
    use std::io::Read;

    /// The members of an `ar` archive.
    fn members(a: &[u8]) -> Vec<(String, Vec<u8>)> {
        assert_eq!(&a[..8], b"!<arch>\n");
        let mut at = 8;
        let mut out = Vec::new();
        while at + AR_HEADER <= a.len() {
            let h = &a[at..at + AR_HEADER];
            assert_eq!(&h[58..60], b"`\n");
            let name = String::from_utf8_lossy(&h[..16]).trim_end().to_string();
            let n: usize = String::from_utf8_lossy(&h[48..58]).trim().parse().unwrap();
            out.push((name, a[at + AR_HEADER..at + AR_HEADER + n].to_vec()));
            at += AR_HEADER + n + n % 2;
        }
        assert_eq!(at, a.len(), "trailing bytes");
        out
    }

    #[test]
    fn packages_are_exact_ar_archives_of_gzipped_tars() {
        for (i, size) in [MIN_SIZE as usize, 9_002, 70_000, 200_004, 3 << 20]
            .into_iter()
            .enumerate()
        {
            let deb = package(&mut Rng::new(i as u64), size, i as u64, 1_000_000);
            assert_eq!(deb.len(), size);
            let m = members(&deb);
            let names: Vec<&str> = m.iter().map(|(n, _)| n.as_str()).collect();
            assert_eq!(names, ["debian-binary", "control.tar.gz", "data.tar.gz"]);
            assert_eq!(m[0].1, b"2.0\n");
            for (_, gz) in &m[1..] {
                let mut tar = Vec::new();
                GzDecoder::new(&gz[..]).read_to_end(&mut tar).unwrap();
                assert_eq!(tar.len() % BLOCK, 0);
                assert_eq!(&tar[257..262], b"ustar");
            }
        }
    }
}
