//! The signature table: built-in formats and user signature-file entries,
//! each with its header pattern and how its items are delimited.

use super::conf::{FooterMode, UserSignature};
use super::formats::{Context, Delimiter, Format, user::UserDelimiter};
use super::pattern::Pattern;
use std::path::Path;

/// How a signature's items are parsed.
#[derive(Debug, Clone)]
pub enum SigKind {
    /// A built-in format parser.
    Builtin(Format),
    /// A user signature: footer search.
    User {
        /// Footer, if any.
        footer: Option<Pattern>,
        /// How the footer ends items.
        mode: FooterMode,
    },
}

/// One header to search for.
#[derive(Debug, Clone)]
pub struct Sig {
    /// Parser.
    pub kind: SigKind,
    /// Header pattern.
    pub header: Pattern,
    /// Type recorded.
    pub type_name: String,
    /// Extension of carved files.
    pub ext: String,
    /// Maximum item size.
    pub max_size: u64,
    /// Items of one family do not nest: a header inside an open item of
    /// its family is part of that item.
    pub family: usize,
    /// For the `signature` column.
    pub label: String,
    /// Context check.
    pub context: Context,
}

impl Sig {
    /// Whether its header inside an open item of the same format cuts that
    /// item short (built-ins that say so; never user signatures).
    pub fn ends_at_own_header(&self) -> bool {
        match &self.kind {
            SigKind::Builtin(f) => f.ends_at_own_header(),
            SigKind::User { .. } => false,
        }
    }

    /// A delimiter for a new item.
    pub fn delimiter(&self) -> Box<dyn Delimiter> {
        match &self.kind {
            SigKind::Builtin(f) => f.delimiter(),
            SigKind::User { footer, mode } => {
                Box::new(UserDelimiter::new(self.header.len(), footer.clone(), *mode))
            }
        }
    }

    /// The built-in format, if it is one.
    pub fn builtin(&self) -> Option<Format> {
        match &self.kind {
            SigKind::Builtin(f) => Some(*f),
            SigKind::User { .. } => None,
        }
    }
}

/// The built-in signatures of `formats`.
pub fn builtin(formats: &[Format]) -> Vec<Sig> {
    let mut out = Vec::new();
    for (family, f) in Format::all().into_iter().enumerate() {
        if !formats.contains(&f) {
            continue;
        }
        for h in f.headers() {
            out.push(Sig {
                kind: SigKind::Builtin(f),
                header: Pattern::literal(h.bytes, h.fold),
                type_name: f.name().to_string(),
                ext: f.extension().to_string(),
                max_size: f.max_size(),
                family,
                label: f.name().to_string(),
                context: h.context,
            });
        }
    }
    out
}

/// Signatures from a user file; each line is its own family.
pub fn user(sigs: Vec<UserSignature>, path: &Path) -> Vec<Sig> {
    let file = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string());
    sigs.into_iter()
        .enumerate()
        .map(|(i, s)| {
            let type_name = if s.extension.is_empty() {
                "none".to_string()
            } else {
                s.extension.to_ascii_lowercase()
            };
            Sig {
                kind: SigKind::User {
                    footer: s.footer,
                    mode: s.mode,
                },
                header: s.header,
                type_name,
                ext: s.extension,
                max_size: s.max_size,
                family: super::formats::FORMATS.len() + i,
                label: format!("{file}:{}", s.line),
                context: Context::Any,
            }
        })
        .collect()
}
