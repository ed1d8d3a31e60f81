//! Browser-history SQLite files. A few templates are built per run with
//! SQLite itself (through `rusqlite`); each file is a template whose
//! placeholder cells (an id and keyword slots, all in unindexed TEXT
//! columns of fixed length) are overwritten in place. SQLite pages carry
//! no checksums, so the result passes `pragma integrity_check` while every
//! file hashes differently.

use crate::CorpusError;
use crate::rng::Rng;
use crate::words;

const ID_SLOT: &[u8; 32] = b"#CASELOAD-CORPUS-ID-PLACEHOLDER#";
const KW_SLOTS: usize = 4;
const FILLERS: &[&str] = &[
    "conference",
    "department",
    "university",
    "investment",
    "background",
    "restaurant",
    "television",
    "foundation",
    "technology",
    "collection",
];

fn kw_slot(i: usize) -> String {
    format!("#KWSLOT{i:02}#")
}

/// A template: the file bytes and where its placeholder cells sit.
#[derive(Debug, Clone)]
pub struct Template {
    /// The database file.
    pub bytes: Vec<u8>,
    id_at: Vec<usize>,
    kw_at: Vec<Vec<usize>>,
}

fn find_all(hay: &[u8], needle: &[u8]) -> Vec<usize> {
    let mut v = Vec::new();
    let mut i = 0;
    while let Some(p) = hay[i..].windows(needle.len()).position(|w| w == needle) {
        v.push(i + p);
        i += p + 1;
    }
    v
}

fn build(
    dir: &std::path::Path,
    idx: usize,
    rows: u64,
    rng: &mut Rng,
) -> Result<Template, CorpusError> {
    let path = dir.join(format!("t{idx}.sqlite"));
    {
        let mut conn = rusqlite::Connection::open(&path)?;
        conn.execute_batch(
            "PRAGMA page_size=4096;
             PRAGMA journal_mode=DELETE;
             CREATE TABLE meta(key LONGVARCHAR NOT NULL UNIQUE PRIMARY KEY, value LONGVARCHAR);
             CREATE TABLE urls(id INTEGER PRIMARY KEY AUTOINCREMENT, url LONGVARCHAR, title LONGVARCHAR,
                visit_count INTEGER DEFAULT 0 NOT NULL, typed_count INTEGER DEFAULT 0 NOT NULL,
                last_visit_time INTEGER NOT NULL, hidden INTEGER DEFAULT 0 NOT NULL);
             CREATE TABLE visits(id INTEGER PRIMARY KEY, url INTEGER NOT NULL, visit_time INTEGER NOT NULL,
                from_visit INTEGER, transition INTEGER DEFAULT 0 NOT NULL, segment_id INTEGER,
                visit_duration INTEGER DEFAULT 0 NOT NULL);
             CREATE TABLE keyword_search_terms(keyword_id INTEGER NOT NULL, url_id INTEGER NOT NULL,
                term LONGVARCHAR NOT NULL, normalized_term LONGVARCHAR NOT NULL);",
        )?;
        let tx = conn.transaction()?;
        tx.execute(
            "INSERT INTO meta(key, value) VALUES ('version', '46'), ('corpus-id', ?1)",
            [std::str::from_utf8(ID_SLOT).unwrap_or_default()],
        )?;
        // Chrome time: microseconds since 1601-01-01.
        let mut t: i64 = 13_200_000_000_000_000 + rng.below(1 << 40) as i64;
        let mut visit_id = 0i64;
        for id in 1..=rows as i64 {
            let mut url = Vec::new();
            words::push_url(rng, &mut url);
            let mut title = Vec::new();
            words::push_sentence(rng, &mut title);
            title.truncate(70);
            let visits = rng.range(1, 6) as i64;
            t += rng.range(1_000_000, 3_600_000_000) as i64;
            tx.execute(
                "INSERT INTO urls(id, url, title, visit_count, typed_count, last_visit_time, hidden) VALUES (?1, ?2, ?3, ?4, ?5, ?6, 0)",
                rusqlite::params![id, String::from_utf8_lossy(&url), String::from_utf8_lossy(&title), visits, rng.below(3) as i64, t],
            )?;
            for v in 0..visits {
                visit_id += 1;
                tx.execute(
                    "INSERT INTO visits(id, url, visit_time, from_visit, transition, segment_id, visit_duration) VALUES (?1, ?2, ?3, ?4, ?5, 0, ?6)",
                    rusqlite::params![visit_id, id, t - v * 60_000_000, 0, 805_306_368i64 + rng.below(10) as i64, rng.below(600_000_000) as i64],
                )?;
            }
        }
        for i in 0..KW_SLOTS {
            let slot = kw_slot(i);
            let url_id = rng.range(1, rows.max(1)) as i64;
            tx.execute(
                "INSERT INTO keyword_search_terms(keyword_id, url_id, term, normalized_term) VALUES (2, ?1, ?2, ?2)",
                rusqlite::params![url_id, slot],
            )?;
        }
        tx.commit()?;
    }
    let bytes = std::fs::read(&path).map_err(|e| CorpusError::Encode {
        what: "sqlite",
        detail: e.to_string(),
    })?;
    let id_at = find_all(&bytes, ID_SLOT);
    let kw_at: Vec<Vec<usize>> = (0..KW_SLOTS)
        .map(|i| find_all(&bytes, kw_slot(i).as_bytes()))
        .collect();
    if id_at.is_empty() || kw_at.iter().any(|v| v.is_empty()) {
        return Err(CorpusError::Encode {
            what: "sqlite",
            detail: "placeholder cells not found in template".into(),
        });
    }
    Ok(Template {
        bytes,
        id_at,
        kw_at,
    })
}

/// Build the run's templates (sizes from tens of KiB to about a MiB).
pub fn templates(rng: &mut Rng) -> Result<Vec<Template>, CorpusError> {
    let dir = tempfile::tempdir().map_err(|e| CorpusError::Encode {
        what: "sqlite",
        detail: format!("temporary directory: {e}"),
    })?;
    let mut out = Vec::new();
    for (i, rows) in [40u64, 300, 1500, 5000].into_iter().enumerate() {
        out.push(build(dir.path(), i, rows, rng)?);
    }
    out.sort_by_key(|t| t.bytes.len());
    Ok(out)
}

impl Template {
    /// A copy with the id cell set from `key` and keyword slots filled with
    /// `keywords` (all 10 bytes, as planted tokens are) or filler words.
    pub fn instantiate(&self, key: u64, keywords: &[String]) -> Vec<u8> {
        let mut b = self.bytes.clone();
        let mut r = Rng::new(key);
        let id = format!("{:016x}{:016x}", key, r.next_u64());
        for &at in &self.id_at {
            b[at..at + 32].copy_from_slice(id.as_bytes());
        }
        for (i, offs) in self.kw_at.iter().enumerate() {
            let word = match keywords.get(i) {
                Some(k) if k.len() == 10 => k.as_str(),
                _ => r.pick(FILLERS),
            };
            for &at in offs {
                b[at..at + 10].copy_from_slice(word.as_bytes());
            }
        }
        b
    }
}
