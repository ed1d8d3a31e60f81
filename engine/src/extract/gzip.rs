//! gzip (RFC 1952): the decompressed content is extracted in turn, as a
//! member one level deeper (a `.tar.gz`'s tar gives its strings, a
//! `.txt.gz` its text, a gzip of a gzip recurses). Concatenated gzip
//! members are read as one stream, as `gunzip` does.

use super::Extraction;

/// Magic, and deflate as the only method RFC 1952 defines.
pub fn is_gzip(head: &[u8]) -> bool {
    head.starts_with(b"\x1f\x8b\x08")
}

/// Decompress (capped by the member cap and the expansion budget) and
/// extract what came out.
pub fn extract(x: &mut Extraction<'_>, data: &[u8], depth: u32) {
    let mut z = flate2::read::MultiGzDecoder::new(data);
    if let Some(content) = x.read_member(&mut z, depth + 1, "gzip content") {
        x.extract(&content, depth + 1);
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Extraction, Format, Limits};
    use std::io::Write;

    fn gz(data: &[u8]) -> Vec<u8> {
        let mut z = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        z.write_all(data).unwrap();
        z.finish().unwrap()
    }

    fn run(data: &[u8], limits: &Limits) -> (String, Vec<String>, Format) {
        let mut out = String::new();
        let mut x = Extraction::new(limits, &mut out);
        let f = x.extract(data, 0);
        let p = x.problems.clone();
        (out, p, f)
    }

    #[test]
    fn gzip_of_gzip_of_text() {
        let inner = gz(b"email_in_gzip_gzip@gzipfile.example and more words");
        let (text, problems, format) = run(&gz(&inner), &Limits::default());
        assert_eq!(format, Format::Gzip);
        assert!(problems.is_empty(), "{problems:?}");
        assert!(text.contains("email_in_gzip_gzip@gzipfile.example and more words"));
    }

    #[test]
    fn bombs_truncation_and_garbage_are_recorded() {
        let bomb = gz(&vec![b'a'; 8 << 20]);
        let limits = Limits {
            max_expansion: 1 << 20,
            ..Limits::default()
        };
        let (_, problems, _) = run(&bomb, &limits);
        assert!(problems.iter().any(|p| p.contains("bomb")), "{problems:?}");
        let good = gz(b"some text that is long enough to matter here");
        let (text, problems, _) = run(&good[..good.len() - 12], &Limits::default());
        assert!(
            problems.iter().any(|p| p.contains("gzip content")),
            "{problems:?}"
        );
        assert!(text.contains("some text"), "{text:?}");
        let (_, problems, _) = run(
            b"\x1f\x8b\x08garbage that is not deflate",
            &Limits::default(),
        );
        assert!(!problems.is_empty());
    }
}
