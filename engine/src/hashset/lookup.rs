//! Lookups in the hash library: point queries on the binary-hash tables,
//! one read-only connection per thread, results in input order whatever the
//! thread count.

use super::library::{Library, LookupParts, SetInfo};
use super::{HashKind, HashSetError, decode_hex};
use rusqlite::Connection;
use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::path::PathBuf;

/// Something hashes are looked up in: the hash library's own file
/// ([`Lookup`]), or a copy of its sets elsewhere (the case database of the
/// ftk4 profile). One per thread.
pub trait SetLookup: Send {
    /// Whether any chosen set holds hashes of this kind.
    fn has(&self, kind: HashKind) -> bool;

    /// Look `hash` up (its length is the kind's, and some set holds the
    /// kind): ids of the chosen sets holding it, appended to `out` in
    /// ascending order.
    fn query(
        &mut self,
        kind: HashKind,
        hash: &[u8],
        out: &mut Vec<i64>,
    ) -> Result<(), HashSetError>;

    /// Ids of the chosen sets holding `hash` (binary digest of `kind`),
    /// appended to `out` in ascending order; none for a digest of the
    /// wrong length or a kind no set holds (no read wasted on it).
    fn find(
        &mut self,
        kind: HashKind,
        hash: &[u8],
        out: &mut Vec<i64>,
    ) -> Result<(), HashSetError> {
        if !self.has(kind) || hash.len() != kind.digest_len() {
            return Ok(());
        }
        self.query(kind, hash, out)
    }
}

impl SetLookup for Lookup {
    fn has(&self, kind: HashKind) -> bool {
        Lookup::has(self, kind)
    }

    fn query(
        &mut self,
        kind: HashKind,
        hash: &[u8],
        out: &mut Vec<i64>,
    ) -> Result<(), HashSetError> {
        Lookup::find(self, kind, hash, out)
    }
}

/// A lookup connection with the chosen sets. Not shared between threads:
/// make one per thread with [`Library::lookup`].
pub struct Lookup {
    path: PathBuf,
    conn: Connection,
    sets: HashMap<i64, SetInfo>,
    has: [bool; 3],
}

impl std::fmt::Debug for Lookup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lookup")
            .field("path", &self.path)
            .field("sets", &self.sets.len())
            .finish_non_exhaustive()
    }
}

impl Library {
    /// A lookup handle on its own read-only connection (one per thread).
    /// `sets` selects complete sets by name; `None` uses every complete set.
    pub fn lookup(&self, sets: Option<&[String]>) -> Result<Lookup, HashSetError> {
        let LookupParts {
            path,
            conn,
            sets,
            has,
        } = self.lookup_parts(sets)?;
        Ok(Lookup {
            path,
            conn,
            sets,
            has,
        })
    }
}

impl Lookup {
    /// The chosen sets, by id.
    pub fn sets(&self) -> &HashMap<i64, SetInfo> {
        &self.sets
    }

    /// Whether any chosen set holds hashes of this kind (when none does,
    /// looking one up would be a wasted read).
    pub fn has(&self, kind: HashKind) -> bool {
        self.has[kind.index()]
    }

    /// Ids of the chosen sets holding `hash` (binary digest of `kind`),
    /// appended to `out` in ascending order.
    pub fn find(
        &self,
        kind: HashKind,
        hash: &[u8],
        out: &mut Vec<i64>,
    ) -> Result<(), HashSetError> {
        if !self.has(kind) || hash.len() != kind.digest_len() {
            return Ok(());
        }
        let sql = |source| HashSetError::Sqlite {
            path: self.path.clone(),
            source,
        };
        let mut st = self
            .conn
            .prepare_cached(match kind {
                HashKind::Md5 => "SELECT set_id FROM kff_md5 WHERE hash = ?1",
                HashKind::Sha1 => "SELECT set_id FROM kff_sha1 WHERE hash = ?1",
                HashKind::Sha256 => "SELECT set_id FROM kff_sha256 WHERE hash = ?1",
            })
            .map_err(sql)?;
        let mut rows = st.query([hash]).map_err(sql)?;
        while let Some(r) = rows.next().map_err(sql)? {
            let id: i64 = r.get(0).map_err(sql)?;
            // Rows of sets not chosen, still importing or being removed
            // are ignored.
            if self.sets.contains_key(&id) {
                out.push(id);
            }
        }
        Ok(())
    }

    /// Like [`find`](Self::find) with a hex digest (either case); `false`
    /// when the text is not a digest of `kind`.
    pub fn find_hex(
        &self,
        kind: HashKind,
        hex: &str,
        out: &mut Vec<i64>,
    ) -> Result<bool, HashSetError> {
        let mut buf = [0u8; 32];
        let b = &mut buf[..kind.digest_len()];
        if decode_hex(hex.as_bytes(), b).is_err() {
            return Ok(false);
        }
        self.find(kind, b, out)?;
        Ok(true)
    }
}

/// One hash to look up: its kind and digest (the first `kind.digest_len()` bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Query {
    /// The hash kind.
    pub kind: HashKind,
    /// The digest, zero-padded to 32 bytes.
    pub hash: [u8; 32],
}

impl Query {
    /// A query from a binary digest; `None` when its length is not the
    /// kind's.
    pub fn new(kind: HashKind, digest: &[u8]) -> Option<Query> {
        if digest.len() != kind.digest_len() {
            return None;
        }
        let mut hash = [0u8; 32];
        hash[..digest.len()].copy_from_slice(digest);
        Some(Query { kind, hash })
    }

    /// A query from hex text (either case); the kind follows from its
    /// length.
    pub fn from_hex(text: &str) -> Option<Query> {
        let kind = HashKind::from_hex_len(text.len())?;
        let mut hash = [0u8; 32];
        decode_hex(text.as_bytes(), &mut hash[..kind.digest_len()]).ok()?;
        Some(Query { kind, hash })
    }

    /// The digest.
    pub fn digest(&self) -> &[u8] {
        &self.hash[..self.kind.digest_len()]
    }
}

/// Look up `queries` on all `lookups` at once (one thread each, contiguous
/// slices), returning the set ids found for each query in query order.
pub fn find_parallel<L: SetLookup>(
    lookups: &mut [L],
    queries: &[Query],
) -> Result<Vec<Vec<i64>>, HashSetError> {
    let mut results: Vec<Vec<i64>> = vec![Vec::new(); queries.len()];
    if lookups.is_empty() || queries.is_empty() {
        return Ok(results);
    }
    let per = queries.len().div_ceil(lookups.len());
    if lookups.len() == 1 || queries.len() < 64 {
        let l = &mut lookups[0];
        for (q, out) in queries.iter().zip(results.iter_mut()) {
            l.find(q.kind, q.digest(), out)?;
        }
        return Ok(results);
    }
    std::thread::scope(|scope| {
        let mut handles = Vec::new();
        for ((l, qs), outs) in lookups
            .iter_mut()
            .zip(queries.chunks(per))
            .zip(results.chunks_mut(per))
        {
            handles.push(scope.spawn(move || -> Result<(), HashSetError> {
                for (q, out) in qs.iter().zip(outs.iter_mut()) {
                    l.find(q.kind, q.digest(), out)?;
                }
                Ok(())
            }));
        }
        for h in handles {
            match h.join() {
                Ok(r) => r?,
                Err(_) => {
                    return Err(HashSetError::Invalid("a lookup thread panicked".into()));
                }
            }
        }
        Ok(())
    })?;
    Ok(results)
}

/// Figures of [`lookup_stream`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StreamStats {
    /// Hashes looked up.
    pub looked_up: u64,
    /// Of which found in at least one chosen set.
    pub found: u64,
    /// Lines that were not a hex MD5, SHA-1 or SHA-256 (skipped).
    pub invalid: u64,
}

/// Hashes per parallel batch of [`lookup_stream`].
const STREAM_BATCH: usize = 16_384;

/// Look up every hash of `input` (one per line, the first whitespace-
/// separated token; blank and `#` lines skipped) and write one line per
/// hash to `output`: `HASH<TAB>set:category[,set:category...]` when found,
/// `HASH<TAB>-` when not, `TOKEN<TAB>invalid` for what is not a hash. The
/// command-line counterpart of `hfind -f`.
pub fn lookup_stream(
    library: &Library,
    sets: Option<&[String]>,
    threads: usize,
    input: &mut dyn BufRead,
    output: &mut dyn Write,
) -> Result<StreamStats, HashSetError> {
    let mut lookups = Vec::with_capacity(threads.max(1));
    for _ in 0..threads.max(1) {
        lookups.push(library.lookup(sets)?);
    }
    let names: HashMap<i64, String> = lookups[0]
        .sets()
        .iter()
        .map(|(id, s)| (*id, format!("{}:{}", s.name, s.category)))
        .collect();
    let io = |source: std::io::Error| HashSetError::Io {
        path: PathBuf::from("-"),
        source,
    };
    let mut stats = StreamStats::default();
    let mut line = String::new();
    let mut tokens: Vec<(String, Option<usize>)> = Vec::with_capacity(STREAM_BATCH);
    let mut queries: Vec<Query> = Vec::with_capacity(STREAM_BATCH);
    let mut eof = false;
    while !eof {
        tokens.clear();
        queries.clear();
        while queries.len() < STREAM_BATCH {
            line.clear();
            if input.read_line(&mut line).map_err(io)? == 0 {
                eof = true;
                break;
            }
            let token = line.split_whitespace().next().unwrap_or("");
            if token.is_empty() || token.starts_with('#') {
                continue;
            }
            match Query::from_hex(token) {
                Some(q) => {
                    tokens.push((token.to_string(), Some(queries.len())));
                    queries.push(q);
                }
                None => tokens.push((token.to_string(), None)),
            }
        }
        let found = find_parallel(&mut lookups, &queries)?;
        for (token, at) in &tokens {
            match at.and_then(|i| found.get(i)) {
                None => {
                    stats.invalid += 1;
                    writeln!(output, "{token}\tinvalid").map_err(io)?;
                }
                Some(ids) => {
                    stats.looked_up += 1;
                    if ids.is_empty() {
                        writeln!(output, "{token}\t-").map_err(io)?;
                    } else {
                        stats.found += 1;
                        let list: Vec<&str> = ids
                            .iter()
                            .filter_map(|id| names.get(id).map(String::as_str))
                            .collect();
                        writeln!(output, "{token}\t{}", list.join(",")).map_err(io)?;
                    }
                }
            }
        }
    }
    output.flush().map_err(io)?;
    Ok(stats)
}
