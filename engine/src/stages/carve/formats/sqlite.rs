//! SQLite 3 databases: the 100-byte header gives the page size and, when
//! its "version-valid-for" number matches the change counter, the page
//! count, hence the length. The verifier reads every page's b-tree header
//! and checks that each child pointer of each interior page points at a
//! b-tree page of the same kind: pages from elsewhere after a fragment
//! boundary are not b-tree pages of the right kind.

use super::{Cut, Delimiter, Gather, Step, Validation, Verdict, Verifier, be16, be32};

/// The format's row in [`super::FORMATS`].
pub const SPEC: super::FormatSpec = super::FormatSpec {
    name: "sqlite",
    extension: "sqlite",
    headers: &[super::Header::exact(b"SQLite format 3\0")],
    max_size: 1 << 30,
    ends_at_own_header: false,
    identified_as: &["sqlite"],
    delimiter: || Box::new(SqliteDelimiter::new()),
    verifier: Some(|| Box::new(SqliteVerifier::new())),
};

/// The database header fields used here.
#[derive(Debug, Clone, Copy)]
struct Header {
    page_size: u32,
    /// Pages, when the header's count is valid.
    pages: Option<u32>,
}

fn parse_header(h: &[u8]) -> Result<Header, String> {
    if !h.starts_with(b"SQLite format 3\0") || h.len() < 100 {
        return Err("not an SQLite 3 header".into());
    }
    let raw = be16(h, 16);
    let page_size = if raw == 1 { 65_536 } else { u32::from(raw) };
    if !page_size.is_power_of_two() || !(512..=65_536).contains(&page_size) {
        return Err(format!("page size {page_size}"));
    }
    if !matches!(h[18], 1 | 2) || !matches!(h[19], 1 | 2) {
        return Err("file format version numbers".into());
    }
    if u32::from(h[20]) >= page_size / 2 {
        return Err("reserved space per page".into());
    }
    if h[21] != 64 || h[22] != 32 || h[23] != 32 {
        return Err("payload fractions".into());
    }
    let change = be32(h, 24);
    let count = be32(h, 28);
    let valid_for = be32(h, 92);
    let pages = (count > 0 && valid_for == change).then_some(count);
    Ok(Header { page_size, pages })
}

/// The SQLite delimiter.
#[derive(Debug)]
pub struct SqliteDelimiter {
    gather: Gather,
    len: Option<u64>,
    header_ok: bool,
    fed: u64,
}

impl SqliteDelimiter {
    /// A delimiter for an item starting at `SQLite format 3\0`.
    pub fn new() -> Self {
        let mut gather = Gather::default();
        gather.start(100);
        SqliteDelimiter {
            gather,
            len: None,
            header_ok: false,
            fed: 0,
        }
    }
}

impl Default for SqliteDelimiter {
    fn default() -> Self {
        Self::new()
    }
}

impl Delimiter for SqliteDelimiter {
    fn feed(&mut self, data: &[u8]) -> Step {
        let before = self.fed;
        self.fed += data.len() as u64;
        if !self.header_ok {
            let mut at = 0;
            let Some(h) = self.gather.fill(data, &mut at) else {
                return Step::More;
            };
            match parse_header(h) {
                Ok(h) => {
                    self.header_ok = true;
                    self.len = h.pages.map(|p| u64::from(p) * u64::from(h.page_size));
                }
                Err(_) => return Step::Reject,
            }
        }
        match self.len {
            Some(len) if len <= self.fed => Step::End {
                len: len.max(before),
                verdict: Verdict::valid(),
            },
            _ => Step::More,
        }
    }

    fn finish(&mut self, cut: Cut, fed: u64) -> Step {
        let why = match (self.len, cut) {
            (None, _) => "the header does not record the database size",
            (Some(_), Cut::RangeEnd | Cut::NextHeader) => {
                "the scanned range ends before the last page"
            }
            (Some(_), Cut::MaxSize) => "database larger than the maximum size",
        };
        Step::cut_short(self.header_ok, fed, why)
    }

    fn accepted(&self) -> bool {
        self.header_ok
    }
}

/// Page kinds: interior/leaf index (2/10), interior/leaf table (5/13).
fn is_btree(t: u8) -> bool {
    matches!(t, 2 | 5 | 10 | 13)
}

fn same_tree(parent: u8, child: u8) -> bool {
    match parent {
        5 => matches!(child, 5 | 13),
        2 => matches!(child, 2 | 10),
        _ => false,
    }
}

/// Most pages tracked; larger databases get no opinion.
const MAX_PAGES: usize = 4 << 20;

/// The SQLite verifier.
pub struct SqliteVerifier {
    header: Option<Header>,
    page: Vec<u8>,
    /// B-tree page type of each page seen (0 for other pages).
    types: Vec<u8>,
    /// (parent page, child page, parent type) for every child pointer.
    children: Vec<(u32, u32, u8)>,
    problem: Option<String>,
    overflow: bool,
}

impl SqliteVerifier {
    /// A verifier for one item.
    pub fn new() -> Self {
        SqliteVerifier {
            header: None,
            page: Vec::new(),
            types: Vec::new(),
            children: Vec::new(),
            problem: None,
            overflow: false,
        }
    }

    /// Read one whole page (1-based number `n`).
    fn page_done(&mut self, n: u32) {
        let p = std::mem::take(&mut self.page);
        let off = if n == 1 { 100 } else { 0 };
        let t = p.get(off).copied().unwrap_or(0);
        if !is_btree(t) {
            if n == 1 {
                self.problem = Some("page 1 is not a table b-tree page".into());
            }
            self.types.push(0);
            self.page = p;
            self.page.clear();
            return;
        }
        let size = p.len();
        let cells = usize::from(be16(&p, off + 3));
        let content = usize::from(be16(&p, off + 5));
        let content = if content == 0 { 65_536 } else { content };
        let interior = matches!(t, 2 | 5);
        let hdr = if interior { 12 } else { 8 };
        let fits = off + hdr + 2 * cells <= size && content <= size;
        // A non-b-tree page whose first byte happens to be a b-tree type
        // (free or overflow pages) is not an error unless something points
        // at it as a child: record it as "other" when its header is absurd.
        if !fits {
            self.types.push(0);
            self.page = p;
            self.page.clear();
            return;
        }
        self.types.push(t);
        if interior && self.children.len() < MAX_PAGES * 4 {
            let right = be32(&p, off + 8);
            self.children.push((n, right, t));
            for c in 0..cells {
                let ptr = usize::from(be16(&p, off + hdr + 2 * c));
                if ptr + 4 <= size {
                    self.children.push((n, be32(&p, ptr), t));
                }
            }
        }
        self.page = p;
        self.page.clear();
    }
}

impl Default for SqliteVerifier {
    fn default() -> Self {
        Self::new()
    }
}

impl Verifier for SqliteVerifier {
    fn update(&mut self, mut data: &[u8]) {
        if self.problem.is_some() || self.overflow {
            return;
        }
        while !data.is_empty() {
            let Some(h) = self.header else {
                let want = 100usize.saturating_sub(self.page.len());
                let take = want.min(data.len());
                self.page.extend_from_slice(&data[..take]);
                if self.page.len() < 100 {
                    return;
                }
                match parse_header(&self.page) {
                    Ok(h) => self.header = Some(h),
                    Err(e) => {
                        self.problem = Some(e);
                        return;
                    }
                }
                data = &data[take..];
                continue;
            };
            let ps = h.page_size as usize;
            let want = ps - self.page.len();
            let take = want.min(data.len());
            self.page.extend_from_slice(&data[..take]);
            data = &data[take..];
            if self.page.len() == ps {
                if self.types.len() >= MAX_PAGES {
                    self.overflow = true;
                    return;
                }
                let n = self.types.len() as u32 + 1;
                self.page_done(n);
            }
        }
    }

    fn finish(self: Box<Self>, len: u64) -> Option<Verdict> {
        if let Some(p) = self.problem {
            return Some(Verdict::new(Validation::Invalid, p));
        }
        let h = self.header?;
        if self.overflow || h.pages.is_none() {
            return None;
        }
        let pages = (len / u64::from(h.page_size)).min(self.types.len() as u64);
        for &(parent, child, t) in &self.children {
            if u64::from(parent) > pages {
                continue;
            }
            let ct =
                (child >= 1 && u64::from(child) <= pages).then(|| self.types[child as usize - 1]);
            match ct {
                Some(c) if same_tree(t, c) => {}
                _ => {
                    return Some(Verdict::new(
                        Validation::Invalid,
                        format!(
                            "b-tree page {parent} points at page {child}, which is not a page of its tree"
                        ),
                    ));
                }
            }
        }
        Some(Verdict::valid())
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_util::{end_of, verify};
    use super::*;

    /// A real database made by SQLite, with enough rows for interior pages.
    fn database() -> Vec<u8> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.sqlite");
        let c = rusqlite::Connection::open(&path).unwrap();
        c.execute_batch(
            "PRAGMA page_size=1024; CREATE TABLE t(a INTEGER PRIMARY KEY, b TEXT); CREATE INDEX tb ON t(b);",
        )
        .unwrap();
        for i in 0..600 {
            c.execute(
                "INSERT INTO t(b) VALUES (?1)",
                [format!("row {i} {}", "x".repeat(i % 50))],
            )
            .unwrap();
        }
        drop(c);
        std::fs::read(&path).unwrap()
    }

    #[test]
    fn length_from_the_header_and_pages_verify() {
        let db = database();
        let mut data = db.clone();
        data.extend_from_slice(&[7u8; 3000]);
        for chunk in [1, 100, 1024, 1 << 20] {
            let (len, v) = end_of(&mut SqliteDelimiter::new(), &data, chunk);
            assert_eq!(
                (len, v),
                (db.len() as u64, Validation::Valid),
                "chunk {chunk}"
            );
        }
        assert_eq!(
            verify(Box::new(SqliteVerifier::new()), &db, 333),
            Some(Verdict::valid())
        );
    }

    #[test]
    fn foreign_pages_fail_verification() {
        let db = database();
        assert!(db.len() >= 8 * 1024);
        // Replace pages 3.. with noise, as a fragment boundary would.
        let mut broken = db.clone();
        for (i, b) in broken[2048..].iter_mut().enumerate() {
            *b = (i * 31 % 251) as u8;
        }
        let v = verify(Box::new(SqliteVerifier::new()), &broken, 4096).unwrap();
        assert_eq!(v.validation, Validation::Invalid, "{v:?}");
        let mut bad = db.clone();
        bad[21] = 0;
        assert_eq!(SqliteDelimiter::new().feed(&bad), Step::Reject);
    }
}
