//! Content generators. Each takes a [`Spec`] (kind, exact size, content
//! key, planted keywords) and returns exactly `size` bytes that the standard
//! tool for the type opens. Sizes are fixed at plan time, before any byte
//! exists, because directory entries and cluster chains are written first;
//! each generator therefore pads in a way its format allows (comment
//! segments and chunks, archive comments, PDF comment lines, ID3 padding).
//!
//! Encoded media come from a small per-run [`Pool`] encoded once with real
//! encoders; each file is a pool member varied validly and cheaply (a JPEG
//! COM segment, a PNG tEXt chunk, a GIF comment extension, SQLite
//! placeholder cells) so that every file's hash is its own.

mod binary;
pub mod deb;
pub mod gzip;
mod image;
pub(crate) mod mail;
mod pdf;
mod sqlite;
mod text;
mod zip;

pub use image::Pool;

use crate::rng::Rng;
use serde::{Deserialize, Serialize};

/// Content types the generator produces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// Plain text document.
    Text,
    /// Application log.
    Log,
    /// A rotated log compressed with gzip.
    Gzip,
    /// HTML page.
    Html,
    /// RFC 5322 message with MIME attachments.
    Eml,
    /// Mailbox of several messages (mboxrd).
    Mbox,
    /// JPEG image.
    Jpeg,
    /// PNG image.
    Png,
    /// GIF image.
    Gif,
    /// PDF document with extractable text.
    Pdf,
    /// ZIP archive.
    Zip,
    /// Word document (OOXML).
    Docx,
    /// Excel workbook (OOXML).
    Xlsx,
    /// SQLite database shaped like browser history.
    Sqlite,
    /// MPEG audio (compressed media: incompressible payload).
    Mp3,
    /// Encrypted container (random bytes).
    Container,
    /// Windows executable.
    Exe,
    /// Debian package (`ar` of gzipped tars).
    Deb,
}

impl Kind {
    /// Every kind, for tables and tests.
    pub const ALL: [Kind; 18] = [
        Kind::Text,
        Kind::Log,
        Kind::Gzip,
        Kind::Html,
        Kind::Eml,
        Kind::Mbox,
        Kind::Jpeg,
        Kind::Png,
        Kind::Gif,
        Kind::Pdf,
        Kind::Zip,
        Kind::Docx,
        Kind::Xlsx,
        Kind::Sqlite,
        Kind::Mp3,
        Kind::Container,
        Kind::Exe,
        Kind::Deb,
    ];

    /// Usual file-name extension.
    pub fn ext(self) -> &'static str {
        match self {
            Kind::Text => "txt",
            Kind::Log => "log",
            Kind::Gzip => "gz",
            Kind::Html => "html",
            Kind::Eml => "eml",
            Kind::Mbox => "",
            Kind::Jpeg => "jpg",
            Kind::Png => "png",
            Kind::Gif => "gif",
            Kind::Pdf => "pdf",
            Kind::Zip => "zip",
            Kind::Docx => "docx",
            Kind::Xlsx => "xlsx",
            Kind::Sqlite => "",
            Kind::Mp3 => "mp3",
            Kind::Container => "tc",
            Kind::Exe => "exe",
            Kind::Deb => "deb",
        }
    }

    /// MIME type.
    pub fn mime(self) -> &'static str {
        match self {
            Kind::Text => "text/plain",
            Kind::Log => "text/plain",
            Kind::Gzip => "application/gzip",
            Kind::Html => "text/html",
            Kind::Eml => "message/rfc822",
            Kind::Mbox => "application/mbox",
            Kind::Jpeg => "image/jpeg",
            Kind::Png => "image/png",
            Kind::Gif => "image/gif",
            Kind::Pdf => "application/pdf",
            Kind::Zip => "application/zip",
            Kind::Docx => "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
            Kind::Xlsx => "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
            Kind::Sqlite => "application/vnd.sqlite3",
            Kind::Mp3 => "audio/mpeg",
            Kind::Container => "application/octet-stream",
            Kind::Exe => "application/vnd.microsoft.portable-executable",
            Kind::Deb => "application/vnd.debian.binary-package",
        }
    }

    /// Whether a carver can find this type by header (and footer or
    /// length): the types listed as carvable items when intact.
    pub fn carvable(self) -> bool {
        matches!(
            self,
            Kind::Jpeg
                | Kind::Png
                | Kind::Gif
                | Kind::Pdf
                | Kind::Zip
                | Kind::Docx
                | Kind::Xlsx
                | Kind::Sqlite
                | Kind::Eml
                | Kind::Html
        )
    }

    /// Whether the bytes are essentially incompressible (they set the E01
    /// compression ratio together with random free space).
    pub fn incompressible(self) -> bool {
        matches!(self, Kind::Jpeg | Kind::Mp3 | Kind::Container | Kind::Deb)
    }

    /// Stored size of this kind's content as a share of its bytes when
    /// compressed in 32 KiB chunks at E01's fast level (what an acquisition
    /// tool stores). Measured on the generators' output (a 1 GiB NTFS
    /// workstation corpus, seed 42, deflate level 1 per 32 KiB); the unit
    /// test `deflate_shares_match_the_generators` keeps the table honest.
    /// The planner predicts a corpus's E01 ratio from it.
    pub fn deflate_share(self) -> f64 {
        match self {
            Kind::Text => 0.48,
            Kind::Log => 0.43,
            Kind::Gzip => 1.0,
            Kind::Html => 0.42,
            Kind::Eml => 0.53,
            Kind::Mbox => 0.57,
            Kind::Jpeg => 0.96,
            Kind::Png => 0.77,
            Kind::Gif => 0.73,
            Kind::Pdf => 0.45,
            Kind::Zip => 0.96,
            Kind::Docx => 0.94,
            Kind::Xlsx => 0.91,
            Kind::Sqlite => 0.33,
            Kind::Mp3 => 1.0,
            Kind::Container => 1.0,
            Kind::Exe => 0.67,
            Kind::Deb => 1.0,
        }
    }

    /// Smallest size this kind can be generated at for the given pool.
    pub fn min_size(self, pool: &Pool) -> u64 {
        match self {
            Kind::Text | Kind::Log | Kind::Container => 0,
            Kind::Gzip => gzip::MIN_SIZE,
            Kind::Html => 256,
            Kind::Eml => 1024,
            Kind::Mbox => 2048,
            Kind::Jpeg => pool.jpeg_min() + 64,
            Kind::Png => pool.png_min() + 64,
            Kind::Gif => pool.gif_min() + 64,
            Kind::Pdf => 2048,
            Kind::Zip | Kind::Docx | Kind::Xlsx => 4096,
            Kind::Sqlite => pool.sqlite_min(),
            Kind::Mp3 => 4096,
            Kind::Exe => 4096,
            Kind::Deb => deb::MIN_SIZE,
        }
    }
}

/// What to generate.
#[derive(Debug, Clone)]
pub struct Spec {
    /// Content type.
    pub kind: Kind,
    /// Exact size in bytes.
    pub size: u64,
    /// Key of this content's random stream (equal keys and specs give
    /// equal bytes: that is how planted duplicates are made).
    pub key: u64,
    /// Planted keywords to embed.
    pub keywords: Vec<String>,
    /// File offsets at which a keyword must straddle (text and log only):
    /// the generator centres keyword `i` on `straddle[i]` when given.
    pub straddle: Vec<u64>,
    /// Pool member to vary (images, SQLite) or other variant selector.
    pub variant: u32,
    /// A time the content speaks of (mail dates, log times), seconds since
    /// 1980-01-01.
    pub when: u64,
}

/// One decoded attachment of a message, for the manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attachment {
    /// Index of the message within the file (0 for .eml).
    pub message: u32,
    /// The attachment's file name.
    pub name: String,
    /// Its MIME type.
    pub mime: String,
    /// Decoded size in bytes.
    pub size: u64,
    /// MD5 of the decoded bytes.
    pub md5: String,
    /// SHA-1 of the decoded bytes.
    pub sha1: String,
    /// SHA-256 of the decoded bytes.
    pub sha256: String,
    /// Members of a ZIP-form attachment (a document's parts).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub members: u64,
}

/// Generated bytes plus facts only generation knows.
#[derive(Debug, Clone, Default)]
pub struct Generated {
    /// Exactly `Spec::size` bytes.
    pub bytes: Vec<u8>,
    /// Attachments of e-mail content.
    pub attachments: Vec<Attachment>,
    /// Members of ZIP-form content (an archive's entries, a document's
    /// parts), the attachments' not counted.
    pub members: u64,
}

pub(crate) fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// [`Spec::variant`] of a text or log written as a Linux server writes it:
/// a log as rsyslog's lines (`\n`-ended; a gzip member holds the same), a
/// text as a configuration file's settings. Variant 0 is a Windows
/// application's log (`\r\n`) and a prose document.
pub const SERVER_VARIANT: u32 = 1;

/// [`Spec::variant`] of a text written as a PHP session file (a Linux
/// server's web application).
pub const SESSION_VARIANT: u32 = 2;

/// The content of a `spec` whose kind needs no pool (text, logs, HTML,
/// PDF), or `None` for other kinds: the planner uses it to lay out
/// compressed files before the content workers run.
pub fn generate_without_pool(spec: &Spec) -> Option<Vec<u8>> {
    let mut rng = Rng::new(spec.key);
    let size = spec.size as usize;
    match spec.kind {
        Kind::Text if spec.variant == SERVER_VARIANT => {
            Some(text::config(&mut rng, size, &spec.keywords))
        }
        Kind::Text if spec.variant == SESSION_VARIANT => Some(text::php_session(&mut rng, size)),
        Kind::Text => Some(text::plain(&mut rng, size, &spec.keywords, &spec.straddle)),
        Kind::Log if spec.variant == SERVER_VARIANT => Some(text::syslog(
            &mut rng,
            size,
            &spec.keywords,
            &spec.straddle,
            spec.when,
        )),
        Kind::Log => Some(text::log(
            &mut rng,
            size,
            &spec.keywords,
            &spec.straddle,
            spec.when,
        )),
        Kind::Html => Some(text::html(&mut rng, size, &spec.keywords)),
        Kind::Pdf => Some(pdf::pdf(&mut rng, size, &spec.keywords, spec.when)),
        _ => None,
    }
}

/// Produce the content for `spec`.
pub fn generate(spec: &Spec, pool: &Pool) -> Result<Generated, crate::CorpusError> {
    let mut rng = Rng::new(spec.key);
    let size = spec.size as usize;
    let mut out = Generated::default();
    out.bytes = match spec.kind {
        Kind::Text | Kind::Log | Kind::Html | Kind::Pdf => {
            generate_without_pool(spec).unwrap_or_default()
        }
        Kind::Gzip => gzip::rotated_log(&mut rng, size, &spec.keywords, spec.when),
        Kind::Jpeg => pool.jpeg(&mut rng, spec.variant, size, &spec.keywords, spec.key)?,
        Kind::Png => pool.png(&mut rng, spec.variant, size, &spec.keywords, spec.key)?,
        Kind::Gif => pool.gif(&mut rng, spec.variant, size, &spec.keywords, spec.key)?,
        Kind::Sqlite => pool.sqlite(spec.variant, size, &spec.keywords, spec.key)?,
        Kind::Zip | Kind::Docx | Kind::Xlsx => {
            let z = match spec.kind {
                Kind::Zip => zip::archive(&mut rng, size, &spec.keywords, pool, spec.when)?,
                Kind::Docx => zip::docx(&mut rng, size, &spec.keywords, pool, spec.when)?,
                _ => zip::xlsx(&mut rng, size, &spec.keywords, pool, spec.when)?,
            };
            out.members = z.members;
            z.bytes
        }
        Kind::Eml => {
            let (b, a) = mail::eml(&mut rng, size, &spec.keywords, pool, spec.when)?;
            out.attachments = a;
            b
        }
        Kind::Mbox => {
            let (b, a) = mail::mbox(&mut rng, size, &spec.keywords, pool, spec.when)?;
            out.attachments = a;
            b
        }
        Kind::Mp3 => binary::mp3(&mut rng, size),
        Kind::Container => binary::container(&mut rng, size),
        Kind::Exe => binary::exe(&mut rng, size, spec.when),
        Kind::Deb => deb::package(&mut rng, size, spec.key, spec.when),
    };
    if out.bytes.len() != size {
        return Err(crate::CorpusError::Encode {
            what: "content",
            detail: format!(
                "{:?} generator produced {} bytes instead of {size}",
                spec.kind,
                out.bytes.len()
            ),
        });
    }
    Ok(out)
}

/// Lower-case hex of bytes.
pub fn hex(bytes: &[u8]) -> String {
    const H: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(H[(b >> 4) as usize] as char);
        s.push(H[(b & 15) as usize] as char);
    }
    s
}
