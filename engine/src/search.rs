//! Search over a case's full-text index (built by the `index` stage):
//! terms, "quoted phrases", `prefix*`, `AND`/`OR`/`NOT` (also `+`/`-`) and
//! parentheses, or a regular expression over the extracted text. Results
//! are items (a file's path, a carved item, slack, unallocated space) with
//! their hit counts, sorted by hits then item, so the output is the same
//! whatever thread count built the index.
//!
//! Query words go through the index's own analyzer (split at
//! non-alphanumerics, lower-cased), so matching is case-insensitive and a
//! word with punctuation inside (`a?b`) is searched as the phrase of its
//! parts. Juxtaposed words must all match (implicit `AND`).

use crate::channel::{Channel, ChannelKind};
use crate::textindex::{ChannelDirectory, Fields, INDEX_DIR, fields_of};
use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::Path;
use tantivy::collector::DocSetCollector;
use tantivy::index::InvertedIndexReader;
use tantivy::postings::{Postings, SegmentPostings};
use tantivy::query::{AllQuery, BooleanQuery, Occur, PhraseQuery, Query, RegexQuery, TermQuery};
use tantivy::schema::{Field, IndexRecordOption, OwnedValue};
use tantivy::tokenizer::TextAnalyzer;
use tantivy::{DocId, DocSet, Index, TantivyDocument, Term};

/// Errors searching.
#[derive(Debug, thiserror::Error)]
pub enum SearchError {
    /// The case has no index.
    #[error("`{0}` has no full-text index: run the `index` stage first")]
    NoIndex(std::path::PathBuf),
    /// The query cannot be parsed.
    #[error("query: {0}")]
    Query(String),
    /// The regular expression is invalid.
    #[error("regular expression: {0}")]
    Regex(#[from] regex::Error),
    /// The index could not be read.
    #[error("reading the index: {0}")]
    Index(#[from] tantivy::TantivyError),
    /// I/O on the index directory.
    #[error("reading the index: {0}")]
    Io(#[from] std::io::Error),
    /// A regular expression over an index that keeps no text.
    #[error(
        "`{0}`: its index keeps no copy of the text (profile ftk4, as dtSearch's), so a regular \
         expression has nothing to match; index with --profile native or autopsy to use --regex"
    )]
    NoStoredText(std::path::PathBuf),
}

/// How to search.
#[derive(Debug, Clone, Default)]
pub struct SearchOptions {
    /// The query is a regular expression over the extracted text.
    pub regex: bool,
    /// At most this many items (the ones with the most hits).
    pub limit: Option<usize>,
}

/// One item that matched.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SearchHit {
    /// `file`, `carved`, `slack` or `unallocated`.
    pub kind: String,
    /// Row id in `files` / `carved_items`, or the media offset.
    pub id: i64,
    /// Path or description.
    pub label: String,
    /// Occurrences of the query's terms (or of the pattern).
    pub hits: u64,
    /// For `--regex`: up to [`MAX_SAMPLES`] distinct matched strings (the
    /// first ones of each chunk of text, smallest first).
    pub matches: Vec<String>,
}

/// Distinct matched strings kept per item for `--regex`.
pub const MAX_SAMPLES: usize = 20;

/// A parsed query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QueryNode {
    /// One token.
    Term(String),
    /// Tokens starting so.
    Prefix(String),
    /// Tokens in sequence.
    Phrase(Vec<String>),
    /// All must match.
    And(Vec<QueryNode>),
    /// Any may match.
    Or(Vec<QueryNode>),
    /// Must not match.
    Not(Box<QueryNode>),
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Word(String),
    Quoted(String),
    LParen,
    RParen,
    And,
    Or,
    Not,
}

fn lex(q: &str) -> Result<Vec<Tok>, SearchError> {
    let mut out = Vec::new();
    let mut chars = q.chars().peekable();
    while let Some(&c) = chars.peek() {
        match c {
            c if c.is_whitespace() => {
                chars.next();
            }
            '(' => {
                chars.next();
                out.push(Tok::LParen);
            }
            ')' => {
                chars.next();
                out.push(Tok::RParen);
            }
            '"' => {
                chars.next();
                let mut s = String::new();
                let mut closed = false;
                for c in chars.by_ref() {
                    if c == '"' {
                        closed = true;
                        break;
                    }
                    s.push(c);
                }
                if !closed {
                    return Err(SearchError::Query("unclosed quote".into()));
                }
                out.push(Tok::Quoted(s));
            }
            // A leading `-`/`+` is an operator; inside a word it is text.
            '-' | '+' => {
                chars.next();
                if c == '-' {
                    out.push(Tok::Not);
                }
            }
            _ => {
                let mut s = String::new();
                while let Some(&c) = chars.peek() {
                    if c.is_whitespace() || c == '(' || c == ')' || c == '"' {
                        break;
                    }
                    s.push(c);
                    chars.next();
                }
                out.push(match s.as_str() {
                    "AND" | "&&" => Tok::And,
                    "OR" | "||" => Tok::Or,
                    "NOT" => Tok::Not,
                    _ => Tok::Word(s),
                });
            }
        }
    }
    Ok(out)
}

/// Split text into the index's tokens.
pub fn tokens(analyzer: &mut TextAnalyzer, text: &str) -> Vec<String> {
    let mut stream = analyzer.token_stream(text);
    let mut out = Vec::new();
    while let Some(t) = stream.next() {
        out.push(t.text.clone());
    }
    out
}

struct Parser<'a> {
    toks: Vec<Tok>,
    pos: usize,
    analyzer: &'a mut TextAnalyzer,
}

impl Parser<'_> {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos)
    }

    fn or(&mut self) -> Result<QueryNode, SearchError> {
        let mut parts = vec![self.and()?];
        while self.peek() == Some(&Tok::Or) {
            self.pos += 1;
            parts.push(self.and()?);
        }
        Ok(if parts.len() == 1 {
            parts.remove(0)
        } else {
            QueryNode::Or(parts)
        })
    }

    fn and(&mut self) -> Result<QueryNode, SearchError> {
        let mut parts = vec![self.unary()?];
        loop {
            match self.peek() {
                Some(Tok::And) => {
                    self.pos += 1;
                    parts.push(self.unary()?);
                }
                Some(Tok::Or) | Some(Tok::RParen) | None => break,
                Some(_) => parts.push(self.unary()?),
            }
        }
        Ok(if parts.len() == 1 {
            parts.remove(0)
        } else {
            QueryNode::And(parts)
        })
    }

    fn unary(&mut self) -> Result<QueryNode, SearchError> {
        if self.peek() == Some(&Tok::Not) {
            self.pos += 1;
            return Ok(QueryNode::Not(Box::new(self.unary()?)));
        }
        self.primary()
    }

    fn primary(&mut self) -> Result<QueryNode, SearchError> {
        let tok = self
            .toks
            .get(self.pos)
            .cloned()
            .ok_or_else(|| SearchError::Query("a term is missing".into()))?;
        self.pos += 1;
        match tok {
            Tok::LParen => {
                let inner = self.or()?;
                if self.peek() != Some(&Tok::RParen) {
                    return Err(SearchError::Query("unbalanced parentheses".into()));
                }
                self.pos += 1;
                Ok(inner)
            }
            Tok::Quoted(s) => self.phrase(&s),
            Tok::Word(w) => {
                if let Some(stem) = w.strip_suffix('*') {
                    let t = tokens(self.analyzer, stem);
                    match t.as_slice() {
                        [one] => Ok(QueryNode::Prefix(one.clone())),
                        _ => Err(SearchError::Query(format!(
                            "`{w}`: a prefix must be one word followed by `*`"
                        ))),
                    }
                } else {
                    self.phrase(&w)
                }
            }
            other => Err(SearchError::Query(format!("unexpected {other:?}"))),
        }
    }

    fn phrase(&mut self, text: &str) -> Result<QueryNode, SearchError> {
        let mut t = tokens(self.analyzer, text);
        match t.len() {
            0 => Err(SearchError::Query(format!(
                "`{text}` has nothing searchable (words are letters and digits)"
            ))),
            1 => Ok(QueryNode::Term(t.remove(0))),
            _ => Ok(QueryNode::Phrase(t)),
        }
    }
}

/// Parse a query with the index's analyzer.
pub fn parse_query(q: &str, analyzer: &mut TextAnalyzer) -> Result<QueryNode, SearchError> {
    let toks = lex(q)?;
    if toks.is_empty() {
        return Err(SearchError::Query("empty query".into()));
    }
    let mut p = Parser {
        toks,
        pos: 0,
        analyzer,
    };
    let node = p.or()?;
    if p.pos != p.toks.len() {
        return Err(SearchError::Query("unbalanced parentheses".into()));
    }
    Ok(node)
}

fn to_tantivy(node: &QueryNode, fields: &Fields) -> Result<Box<dyn Query>, SearchError> {
    let term = |t: &str| Term::from_field_text(fields.text, t);
    Ok(match node {
        QueryNode::Term(t) => Box::new(TermQuery::new(
            term(t),
            IndexRecordOption::WithFreqsAndPositions,
        )),
        QueryNode::Prefix(p) => Box::new(RegexQuery::from_pattern(
            &format!("{}.*", regex::escape(p)),
            fields.text,
        )?),
        QueryNode::Phrase(ts) => Box::new(PhraseQuery::new(ts.iter().map(|t| term(t)).collect())),
        QueryNode::And(parts) => {
            let mut clauses = Vec::new();
            let mut positive = false;
            for p in parts {
                match p {
                    QueryNode::Not(inner) => {
                        clauses.push((Occur::MustNot, to_tantivy(inner, fields)?))
                    }
                    other => {
                        positive = true;
                        clauses.push((Occur::Must, to_tantivy(other, fields)?));
                    }
                }
            }
            if !positive {
                clauses.push((Occur::Must, Box::new(AllQuery)));
            }
            Box::new(BooleanQuery::new(clauses))
        }
        QueryNode::Or(parts) => Box::new(BooleanQuery::new(
            parts
                .iter()
                .map(|p| Ok((Occur::Should, to_tantivy(p, fields)?)))
                .collect::<Result<Vec<_>, SearchError>>()?,
        )),
        QueryNode::Not(inner) => Box::new(BooleanQuery::new(vec![
            (Occur::Must, Box::new(AllQuery) as Box<dyn Query>),
            (Occur::MustNot, to_tantivy(inner, fields)?),
        ])),
    })
}

/// Occurrences of the query's positive parts in a document's tokens (what
/// [`search`] counts from the postings).
pub fn count_hits(node: &QueryNode, toks: &[String]) -> u64 {
    match node {
        QueryNode::Term(t) => toks.iter().filter(|x| *x == t).count() as u64,
        QueryNode::Prefix(p) => toks.iter().filter(|x| x.starts_with(p.as_str())).count() as u64,
        QueryNode::Phrase(ts) => toks
            .windows(ts.len())
            .filter(|w| w.iter().zip(ts).all(|(a, b)| a == b))
            .count() as u64,
        QueryNode::And(parts) | QueryNode::Or(parts) => {
            parts.iter().map(|p| count_hits(p, toks)).sum()
        }
        QueryNode::Not(_) => 0,
    }
}

/// The index of a case directory, its fields, and whether it keeps the
/// text.
pub fn open_index(case_dir: &Path) -> Result<(Index, Fields, bool), SearchError> {
    if !case_dir.join(INDEX_DIR).join("meta.json").is_file() {
        return Err(SearchError::NoIndex(case_dir.to_path_buf()));
    }
    // Searching is outside any run: the counts go nowhere.
    let channel = Channel::new(ChannelKind::Case, case_dir, Vec::new());
    let dir = ChannelDirectory::new(channel, INDEX_DIR)?;
    let index = Index::open(dir)?;
    let (fields, stored) = fields_of(&index.schema())?;
    Ok((index, fields, stored))
}

/// One term's postings in a segment, moved forward as the documents
/// asked for rise (each list is read once per search), with the positions
/// of the last document asked for.
struct TermCursor {
    postings: Option<SegmentPostings>,
    at: Option<(DocId, Vec<u32>)>,
}

impl TermCursor {
    /// Positions of the term in `doc` (empty: absent). Documents are asked
    /// for in rising order.
    fn positions(&mut self, doc: DocId) -> &[u32] {
        if self.at.as_ref().is_none_or(|(d, _)| *d != doc) {
            let mut v = Vec::new();
            if let Some(p) = self.postings.as_mut() {
                // Only forward: a fresh list already on a later document
                // stays there.
                if p.doc() < doc {
                    p.seek(doc);
                }
                if p.doc() == doc {
                    p.positions(&mut v);
                }
            }
            self.at = Some((doc, v));
        }
        self.at.as_ref().map_or(&[], |(_, v)| v.as_slice())
    }
}

/// Hit counts from one segment's postings ([`count_hits`] without the
/// text): term frequencies, every term under a prefix, a phrase's starts
/// where each word follows at the next position. A term's or prefix's
/// lists are opened once and move forward through the segment's matched
/// documents, so each is read once per search.
struct SegmentCounter {
    inv: std::sync::Arc<InvertedIndexReader>,
    field: Field,
    terms: HashMap<String, TermCursor>,
    prefixes: HashMap<String, Vec<SegmentPostings>>,
}

impl SegmentCounter {
    fn term(&mut self, t: &str) -> Result<&mut TermCursor, SearchError> {
        Ok(match self.terms.entry(t.to_string()) {
            Entry::Occupied(e) => e.into_mut(),
            Entry::Vacant(e) => {
                let term = Term::from_field_text(self.field, t);
                let postings = self
                    .inv
                    .read_postings(&term, IndexRecordOption::WithFreqsAndPositions)?;
                e.insert(TermCursor { postings, at: None })
            }
        })
    }

    fn prefix(&mut self, p: &str) -> Result<&mut Vec<SegmentPostings>, SearchError> {
        Ok(match self.prefixes.entry(p.to_string()) {
            Entry::Occupied(e) => e.into_mut(),
            Entry::Vacant(e) => {
                let mut lists = Vec::new();
                let mut stream = self.inv.terms().range().ge(p.as_bytes()).into_stream()?;
                while stream.advance() {
                    if !stream.key().starts_with(p.as_bytes()) {
                        break;
                    }
                    lists.push(self.inv.read_postings_from_terminfo(
                        stream.value(),
                        IndexRecordOption::WithFreqs,
                    )?);
                }
                e.insert(lists)
            }
        })
    }

    /// Hits of `node`'s positive parts in `doc` (rising from call to call).
    fn hits(&mut self, node: &QueryNode, doc: DocId) -> Result<u64, SearchError> {
        Ok(match node {
            QueryNode::Term(t) => self.term(t)?.positions(doc).len() as u64,
            QueryNode::Prefix(p) => {
                let mut n = 0u64;
                for list in self.prefix(p)? {
                    if list.doc() < doc {
                        list.seek(doc);
                    }
                    if list.doc() == doc {
                        n += list.term_freq() as u64;
                    }
                }
                n
            }
            QueryNode::Phrase(ts) => {
                let mut first: Vec<u32> = Vec::new();
                let mut rest: Vec<HashSet<u32>> = Vec::with_capacity(ts.len());
                for (i, t) in ts.iter().enumerate() {
                    let p = self.term(t)?.positions(doc);
                    if p.is_empty() {
                        return Ok(0);
                    }
                    if i == 0 {
                        first = p.to_vec();
                    } else {
                        rest.push(p.iter().copied().collect());
                    }
                }
                first
                    .iter()
                    .filter(|&&s| {
                        rest.iter()
                            .enumerate()
                            .all(|(i, set)| set.contains(&(s + i as u32 + 1)))
                    })
                    .count() as u64
            }
            QueryNode::And(parts) | QueryNode::Or(parts) => {
                let mut n = 0;
                for p in parts {
                    n += self.hits(p, doc)?;
                }
                n
            }
            QueryNode::Not(_) => 0,
        })
    }
}

fn stored_str(doc: &TantivyDocument, field: tantivy::schema::Field) -> String {
    match doc.get_first(field).map(OwnedValue::from) {
        Some(OwnedValue::Str(s)) => s,
        _ => String::new(),
    }
}

fn stored_i64(doc: &TantivyDocument, field: tantivy::schema::Field) -> i64 {
    match doc.get_first(field).map(OwnedValue::from) {
        Some(OwnedValue::I64(v)) => v,
        _ => 0,
    }
}

#[derive(Default)]
struct Acc {
    label: String,
    hits: u64,
    matches: BTreeSet<String>,
}

fn finish(acc: BTreeMap<(String, i64), Acc>, limit: Option<usize>) -> Vec<SearchHit> {
    let mut hits: Vec<SearchHit> = acc
        .into_iter()
        .map(|((kind, id), a)| SearchHit {
            kind,
            id,
            label: a.label,
            hits: a.hits,
            matches: a.matches.into_iter().collect(),
        })
        .collect();
    hits.sort_by(|a, b| {
        b.hits
            .cmp(&a.hits)
            .then_with(|| a.kind.cmp(&b.kind))
            .then_with(|| a.id.cmp(&b.id))
    });
    if let Some(n) = limit {
        hits.truncate(n);
    }
    hits
}

/// Search a case directory's index.
pub fn search(
    case_dir: &Path,
    query: &str,
    options: &SearchOptions,
) -> Result<Vec<SearchHit>, SearchError> {
    let (index, fields, stored) = open_index(case_dir)?;
    let reader = index.reader()?;
    let searcher = reader.searcher();
    let mut acc: BTreeMap<(String, i64), Acc> = BTreeMap::new();
    if options.regex {
        if !stored {
            return Err(SearchError::NoStoredText(case_dir.to_path_buf()));
        }
        let re = regex::Regex::new(query)?;
        for segment in searcher.segment_readers() {
            let store = segment.get_store_reader(16)?;
            let alive = segment.alive_bitset();
            for doc_id in 0..segment.max_doc() {
                if alive.is_some_and(|a| a.is_deleted(doc_id)) {
                    continue;
                }
                let doc: TantivyDocument = store.get(doc_id)?;
                let text = stored_str(&doc, fields.text);
                let mut n = 0u64;
                let mut found = Vec::new();
                for m in re.find_iter(&text) {
                    n += 1;
                    if found.len() < MAX_SAMPLES {
                        found.push(m.as_str().to_string());
                    }
                }
                if n == 0 {
                    continue;
                }
                let key = (stored_str(&doc, fields.kind), stored_i64(&doc, fields.id));
                let a = acc.entry(key).or_default();
                a.label = stored_str(&doc, fields.label);
                a.hits += n;
                // The smallest distinct matches, so the samples do not depend
                // on the order documents are visited in.
                a.matches.extend(found);
                while a.matches.len() > MAX_SAMPLES {
                    a.matches.pop_last();
                }
            }
        }
        return Ok(finish(acc, options.limit));
    }
    let mut analyzer = index.tokenizer_for_field(fields.text)?;
    let node = parse_query(query, &mut analyzer)?;
    let q = to_tantivy(&node, &fields)?;
    let docs = searcher.search(&*q, &DocSetCollector)?;
    // Sorted so documents are read in index order (and the result does not
    // depend on hash order).
    let mut docs: Vec<_> = docs.into_iter().collect();
    docs.sort();
    // Per segment (documents come sorted, so each segment's in rising
    // order): its stored fields and its hit counter.
    let mut segment: Option<(u32, tantivy::store::StoreReader, SegmentCounter)> = None;
    for addr in docs {
        if segment
            .as_ref()
            .is_none_or(|(ord, _, _)| *ord != addr.segment_ord)
        {
            let reader = searcher.segment_reader(addr.segment_ord);
            segment = Some((
                addr.segment_ord,
                reader.get_store_reader(16)?,
                SegmentCounter {
                    inv: reader.inverted_index(fields.text)?,
                    field: fields.text,
                    terms: HashMap::new(),
                    prefixes: HashMap::new(),
                },
            ));
        }
        let Some((_, store, counter)) = segment.as_mut() else {
            continue;
        };
        let doc: TantivyDocument = store.get(addr.doc_id)?;
        let key = (stored_str(&doc, fields.kind), stored_i64(&doc, fields.id));
        let a = acc.entry(key).or_default();
        a.label = stored_str(&doc, fields.label);
        a.hits += counter.hits(&node, addr.doc_id)?;
    }
    Ok(finish(acc, options.limit))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(q: &str) -> Result<QueryNode, SearchError> {
        let mut a = TextAnalyzer::builder(tantivy::tokenizer::SimpleTokenizer::default())
            .filter(tantivy::tokenizer::LowerCaser)
            .build();
        parse_query(q, &mut a)
    }

    #[test]
    fn queries_parse_into_the_expected_shape() {
        use QueryNode::*;
        assert_eq!(parse("First").unwrap(), Term("first".into()));
        assert_eq!(
            parse("\"2fragment sentence2\"").unwrap(),
            Phrase(vec!["2fragment".into(), "sentence2".into()])
        );
        assert_eq!(
            parse("a?b\\c").unwrap(),
            Phrase(vec!["a".into(), "b".into(), "c".into()])
        );
        assert_eq!(
            parse("alpha beta OR gamma -delta").unwrap(),
            Or(vec![
                And(vec![Term("alpha".into()), Term("beta".into())]),
                And(vec![
                    Term("gamma".into()),
                    Not(Box::new(Term("delta".into())))
                ]),
            ])
        );
        assert_eq!(
            parse("(qz* AND NOT x)").unwrap(),
            And(vec![Prefix("qz".into()), Not(Box::new(Term("x".into())))])
        );
        for bad in ["", "\"open", "(a", "a)", "???", "a b*c*"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn hit_counts_follow_the_query() {
        let toks: Vec<String> = "a b a c a b".split(' ').map(str::to_string).collect();
        let n = |q: &str| count_hits(&parse(q).unwrap(), &toks);
        assert_eq!(n("a"), 3);
        assert_eq!(n("\"a b\""), 2);
        assert_eq!(n("a OR c"), 4);
        assert_eq!(n("c -z"), 1);
    }

    /// Whether a document of `toks` matches (the query's meaning, for the
    /// test's expectation).
    fn matches(node: &QueryNode, toks: &[String]) -> bool {
        match node {
            QueryNode::Not(inner) => !matches(inner, toks),
            QueryNode::And(parts) => parts.iter().all(|p| matches(p, toks)),
            QueryNode::Or(parts) => parts.iter().any(|p| matches(p, toks)),
            other => count_hits(other, toks) > 0,
        }
    }

    /// Counts from the postings equal counts over the tokens, with and
    /// without the stored text; `--regex` needs the text.
    #[test]
    fn postings_give_the_token_counts_with_or_without_stored_text() {
        let texts = [
            "Alpha beta alpha, gamma alpha-beta. qzone qzar qz",
            "beta gamma beta gamma beta delta; alpha",
            "nothing to see here",
            "qzar qzar alpha beta alpha beta alpha",
        ];
        let queries = [
            "alpha",
            "\"alpha beta\"",
            "\"beta gamma beta\"",
            "qz*",
            "alpha OR gamma",
            "beta -delta",
            "(alpha AND beta) OR qzar",
            // A term first seen in a later document than the one asked for.
            "nothing OR alpha",
            "delta OR qz* OR \"gamma beta\"",
        ];
        for stored in [true, false] {
            let case = tempfile::tempdir().unwrap();
            let channel = Channel::new(ChannelKind::Case, case.path(), Vec::new());
            let dir = ChannelDirectory::new(channel, INDEX_DIR).unwrap();
            let (schema, fields) = crate::textindex::schema(stored);
            let index = Index::create(dir, schema, tantivy::IndexSettings::default()).unwrap();
            let mut w: tantivy::IndexWriter = index.writer(15_000_000).unwrap();
            for (i, t) in texts.iter().enumerate() {
                let mut d = TantivyDocument::default();
                d.add_text(fields.kind, "file");
                d.add_i64(fields.id, i as i64);
                d.add_u64(fields.part, 0);
                d.add_text(fields.label, format!("doc{i}"));
                d.add_text(fields.text, t);
                w.add_document(d).unwrap();
            }
            w.commit().unwrap();
            let mut analyzer = index.tokenizer_for_field(fields.text).unwrap();
            for q in queries {
                let node = parse_query(q, &mut analyzer).unwrap();
                let mut want: Vec<(i64, u64)> = texts
                    .iter()
                    .enumerate()
                    .map(|(i, t)| (i, tokens(&mut analyzer, t)))
                    .filter(|(_, toks)| matches(&node, toks))
                    .map(|(i, toks)| (i as i64, count_hits(&node, &toks)))
                    .collect();
                want.sort();
                let mut got: Vec<(i64, u64)> = search(case.path(), q, &SearchOptions::default())
                    .unwrap()
                    .into_iter()
                    .map(|h| (h.id, h.hits))
                    .collect();
                got.sort();
                assert_eq!(got, want, "{q} (stored text: {stored})");
            }
            let regex = SearchOptions {
                regex: true,
                limit: None,
            };
            let found = search(case.path(), "qz[a-z]+", &regex);
            if stored {
                assert_eq!(found.unwrap().len(), 2);
            } else {
                assert!(matches!(found, Err(SearchError::NoStoredText(_))));
            }
        }
    }
}
