//! Qrels and run files: parsing (trec_eval's rules) and the in-memory forms.
//!
//! Both parsers keep the file's bytes (a read-only memory map, or one owned buffer) and refer
//! to ids by [`Span`]s into them: no allocation per line. UTF-8 is checked once per file (or
//! per range of lines, and for runs only when a non-ASCII byte was seen); only input that fails
//! that check is checked field by field, so that bytes in columns trec_eval ignores stay
//! allowed. Duplicate documents are found with a hash index per query. Runs are parsed in
//! parallel (ranges of lines handed out to one thread per core), and their queries checked for
//! duplicates in parallel.

use std::cmp::Ordering;
use std::collections::HashMap;
use std::ops::Range;
use std::path::Path;

use crate::error::{Result, TrecError};
use crate::number::{parse_rel, parse_score};
use crate::store::{self, hash_bytes, is_c_space, line_of, Bytes, IdTable, Span};

/// Up to `N` fields of `line` (as ranges of the line) and the total count of fields.
#[inline]
fn split_fields<const N: usize>(line: &[u8]) -> ([Range<usize>; N], usize) {
    let mut out: [Range<usize>; N] = std::array::from_fn(|_| 0..0);
    let mut count = 0;
    let mut i = 0;
    loop {
        while i < line.len() && is_c_space(line[i]) {
            i += 1;
        }
        if i >= line.len() {
            break;
        }
        let start = i;
        while i < line.len() && !is_c_space(line[i]) {
            i += 1;
        }
        if let Some(slot) = out.get_mut(count) {
            *slot = start..i;
        }
        count += 1;
    }
    (out, count)
}

/// The lines of `data[range]` as `(offset of the line, line without its '\n')`. A final line
/// without `\n` is a line; the empty remainder after a final `\n` is not.
fn lines(data: &[u8], range: Range<usize>) -> impl Iterator<Item = (usize, &[u8])> {
    let end = range.end.min(data.len());
    let mut pos = range.start.min(end);
    std::iter::from_fn(move || {
        if pos >= end {
            return None;
        }
        let rest = data.get(pos..end)?;
        let len = memchr::memchr(b'\n', rest).unwrap_or(rest.len());
        let start = pos;
        pos += len + 1;
        Some((start, rest.get(..len)?))
    })
}

/// How many threads the parsers and the evaluation use: the machine's parallelism, at most 8,
/// and 1 for inputs below `MIN_PARALLEL_BYTES`.
pub(crate) fn threads_for(bytes: usize) -> usize {
    const MIN_PARALLEL_BYTES: usize = 1 << 20;
    if bytes < MIN_PARALLEL_BYTES {
        return 1;
    }
    std::thread::available_parallelism().map_or(1, |n| n.get().clamp(1, 8))
}

fn too_large(source_name: &str, line: usize) -> TrecError {
    TrecError::TooLarge {
        source_name: source_name.to_string(),
        line,
    }
}

// ------------------------------------------------------------------------------------------
// Qrels

#[derive(Debug, Clone, Copy)]
struct Judgment {
    docid: Span,
    rel: i64,
}

#[derive(Debug)]
pub(crate) struct QrelsData {
    qid: Box<str>,
    judgments: Vec<Judgment>,
    index: IdTable,
    num_rel: usize,
    ideal_gains: Vec<i64>,
}

/// Relevance judgements of one query (a view into [`Qrels`]).
#[derive(Debug, Clone, Copy)]
pub struct QrelsQuery<'a> {
    bytes: &'a [u8],
    data: &'a QrelsData,
}

impl<'a> QrelsQuery<'a> {
    /// The query id.
    pub fn qid(&self) -> &'a str {
        &self.data.qid
    }

    /// The judgement of `docid`, if it was judged.
    pub fn rel(&self, docid: &str) -> Option<i64> {
        self.rel_bytes(docid.as_bytes())
    }

    #[inline]
    pub(crate) fn rel_bytes(&self, docid: &[u8]) -> Option<i64> {
        let judgments = &self.data.judgments;
        let bytes = self.bytes;
        self.data
            .index
            .find(hash_bytes(docid), |e| {
                judgments
                    .get(e as usize)
                    .is_some_and(|j| store::same_bytes(j.docid.of(bytes), docid))
            })
            .and_then(|e| judgments.get(e as usize))
            .map(|j| j.rel)
    }

    /// Number of judged documents (any value, negative included).
    pub fn num_judged(&self) -> usize {
        self.data.judgments.len()
    }

    /// Number of relevant documents (rel >= 1).
    pub fn num_rel(&self) -> usize {
        self.data.num_rel
    }

    /// The positive relevance values, largest first: the ideal ranking's gains.
    pub(crate) fn ideal_gains(&self) -> &'a [i64] {
        &self.data.ideal_gains
    }
}

/// TREC relevance judgements: `qid iter docid rel` per line.
#[derive(Debug)]
pub struct Qrels {
    bytes: Bytes,
    /// Sorted by qid, byte-wise.
    queries: Vec<QrelsData>,
}

impl Qrels {
    /// Builds qrels from `(qid, docid, rel)` rows, with the same checks as [`parse_qrels`]
    /// (errors name the source `<rows>` and the 1-based row).
    pub fn from_rows<I, Q, D>(rows: I) -> Result<Qrels>
    where
        I: IntoIterator<Item = (Q, D, i64)>,
        Q: AsRef<str>,
        D: AsRef<str>,
    {
        let mut buf = Vec::new();
        let mut spans = Vec::new();
        for (i, (qid, docid, rel)) in rows.into_iter().enumerate() {
            let (qid, docid) = (qid.as_ref(), docid.as_ref());
            check_field(i + 1, "qid", qid)?;
            check_field(i + 1, "docid", docid)?;
            let (q, d) = push_row(&mut buf, qid, docid, i + 1)?;
            spans.push((q, d, rel));
        }
        let mut builder = QrelsBuilder::new("<rows>");
        for (i, &(q, d, rel)) in spans.iter().enumerate() {
            builder.push(&buf, q, d, rel, i + 1)?;
        }
        let queries = builder.finish();
        Ok(Qrels {
            bytes: Bytes::Owned(buf),
            queries,
        })
    }

    /// The judgements of one query.
    pub fn query(&self, qid: &str) -> Option<QrelsQuery<'_>> {
        self.index_of(qid).and_then(|i| self.query_at(i))
    }

    pub(crate) fn index_of(&self, qid: &str) -> Option<usize> {
        self.queries
            .binary_search_by(|q| q.qid.as_bytes().cmp(qid.as_bytes()))
            .ok()
    }

    pub(crate) fn query_at(&self, i: usize) -> Option<QrelsQuery<'_>> {
        self.queries.get(i).map(|data| QrelsQuery {
            bytes: &self.bytes,
            data,
        })
    }

    /// Number of queries with at least one judgement line.
    pub fn num_queries(&self) -> usize {
        self.queries.len()
    }

    /// The query ids, in trec_eval's order (byte-wise, like `strcmp`).
    pub fn qids(&self) -> impl Iterator<Item = &str> {
        self.queries.iter().map(|q| &*q.qid)
    }
}

/// Appends `qid docid\n` to `buf` (one row per line, so that offsets map to rows) and returns
/// the spans of both.
fn push_row(buf: &mut Vec<u8>, qid: &str, docid: &str, row: usize) -> Result<(Span, Span)> {
    let start = buf.len();
    buf.extend_from_slice(qid.as_bytes());
    let q = Span::new(start, buf.len()).ok_or_else(|| too_large("<rows>", row))?;
    buf.push(b' ');
    let start = buf.len();
    buf.extend_from_slice(docid.as_bytes());
    let d = Span::new(start, buf.len()).ok_or_else(|| too_large("<rows>", row))?;
    buf.push(b'\n');
    Ok((q, d))
}

struct QrelsBuilder<'s> {
    source_name: &'s str,
    queries: Vec<QrelsData>,
    by_qid: HashMap<Box<[u8]>, usize>,
    last: usize,
}

impl<'s> QrelsBuilder<'s> {
    fn new(source_name: &'s str) -> Self {
        QrelsBuilder {
            source_name,
            queries: Vec::new(),
            by_qid: HashMap::new(),
            last: usize::MAX,
        }
    }

    /// Adds one judgement; `line` is its 1-based line (or row).
    fn push(&mut self, data: &[u8], qid: Span, docid: Span, rel: i64, line: usize) -> Result<()> {
        let qid_bytes = qid.of(data);
        let slot = match self.queries.get(self.last) {
            Some(q) if store::same_bytes(q.qid.as_bytes(), qid_bytes) => self.last,
            _ => match self.by_qid.get(qid_bytes) {
                Some(&i) => i,
                None => {
                    // Sized like the previous query (qrels have similar depths).
                    let hint = self.queries.last().map_or(16, |q| q.judgments.len());
                    let i = self.queries.len();
                    self.by_qid.insert(qid_bytes.into(), i);
                    self.queries.push(QrelsData {
                        qid: qid.str_of(data).into(),
                        judgments: Vec::with_capacity(hint),
                        index: IdTable::with_capacity(hint),
                        num_rel: 0,
                        ideal_gains: Vec::new(),
                    });
                    i
                }
            },
        };
        self.last = slot;
        let Some(query) = self.queries.get_mut(slot) else {
            return Ok(());
        };
        let entry = u32::try_from(query.judgments.len())
            .ok()
            .filter(|&e| e < u32::MAX - 1)
            .ok_or_else(|| too_large(self.source_name, line))?;
        let doc = docid.of(data);
        let judgments = &query.judgments;
        let first = query.index.insert(hash_bytes(doc), entry, |e| {
            judgments
                .get(e as usize)
                .is_some_and(|j| store::same_bytes(j.docid.of(data), doc))
        });
        if let Some(first) = first {
            let first_line = judgments
                .get(first as usize)
                .map_or(0, |j| line_of(data, j.docid.start()));
            return Err(TrecError::DuplicateDoc {
                source_name: self.source_name.to_string(),
                line,
                first_line,
                qid: query.qid.to_string(),
                docid: docid.str_of(data).to_string(),
            });
        }
        query.judgments.push(Judgment { docid, rel });
        Ok(())
    }

    fn finish(mut self) -> Vec<QrelsData> {
        for q in &mut self.queries {
            let mut gains: Vec<i64> = q
                .judgments
                .iter()
                .map(|j| j.rel)
                .filter(|&r| r > 0)
                .collect();
            gains.sort_unstable_by(|a, b| b.cmp(a));
            q.num_rel = gains.len();
            q.ideal_gains = gains;
        }
        self.queries
            .sort_unstable_by(|a, b| a.qid.as_bytes().cmp(b.qid.as_bytes()));
        self.queries
    }
}

/// Reads a qrels file: exactly four whitespace-separated columns `qid iter docid rel` per line
/// (trec_eval rejects blank lines and extra columns in qrels, and so does this), `rel` an
/// integer; negative values mean judged-but-unjudged (never relevant, no gain). A document
/// judged twice for one query is an error.
pub fn parse_qrels(path: impl AsRef<Path>) -> Result<Qrels> {
    let path = path.as_ref();
    let bytes = store::load(path)?;
    build_qrels(bytes, &path.display().to_string())
}

/// [`parse_qrels`] on file contents; `source_name` names the input in errors.
pub fn parse_qrels_bytes(data: &[u8], source_name: &str) -> Result<Qrels> {
    build_qrels(Bytes::Owned(data.to_vec()), source_name)
}

fn build_qrels(bytes: Bytes, source_name: &str) -> Result<Qrels> {
    let data: &[u8] = &bytes;
    let all_utf8 = std::str::from_utf8(data).is_ok();
    let mut builder = QrelsBuilder::new(source_name);
    let mut line_no = 0;
    for (start, line) in lines(data, 0..data.len()) {
        line_no += 1;
        let ([qid, _iter, docid, rel], count) = split_fields::<4>(line);
        if count != 4 {
            return Err(TrecError::Columns {
                source_name: source_name.to_string(),
                line: line_no,
                expected: "4",
                found: count,
            });
        }
        let field = |r: Range<usize>| line.get(r).unwrap_or_default();
        if !all_utf8
            && [&qid, &docid, &rel]
                .into_iter()
                .any(|r| std::str::from_utf8(field(r.clone())).is_err())
        {
            return Err(TrecError::NotUtf8 {
                source_name: source_name.to_string(),
                line: line_no,
            });
        }
        let rel_text = field(rel);
        let rel = parse_rel(rel_text).ok_or_else(|| TrecError::BadRelevance {
            source_name: source_name.to_string(),
            line: line_no,
            value: String::from_utf8_lossy(rel_text).into_owned(),
        })?;
        let span = |r: Range<usize>| {
            Span::new(start + r.start, start + r.end).ok_or_else(|| too_large(source_name, line_no))
        };
        builder.push(data, span(qid)?, span(docid)?, rel, line_no)?;
    }
    if line_no == 0 {
        return Err(TrecError::Empty {
            source_name: source_name.to_string(),
            what: "qrels",
        });
    }
    let queries = builder.finish();
    Ok(Qrels { bytes, queries })
}

// ------------------------------------------------------------------------------------------
// Runs

/// One retrieved document as stored: its docid in the file and its score.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Doc {
    pub(crate) docid: Span,
    pub(crate) score: f64,
}

#[derive(Debug)]
pub(crate) struct RunData {
    qid: Box<str>,
    /// In file order.
    docs: Vec<Doc>,
}

/// One retrieved document of a ranked query.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RankedDoc<'a> {
    /// The document id.
    pub docid: &'a str,
    /// The run's score (trec_eval ignores the rank column and ranks by this).
    pub score: f64,
}

/// The retrieved documents of one query (a view into [`Run`]).
#[derive(Debug, Clone, Copy)]
pub struct RunQuery<'a> {
    bytes: &'a [u8],
    data: &'a RunData,
}

impl<'a> RunQuery<'a> {
    /// The query id.
    pub fn qid(&self) -> &'a str {
        &self.data.qid
    }

    /// Number of retrieved documents.
    pub fn len(&self) -> usize {
        self.data.docs.len()
    }

    /// Whether the query retrieved nothing (never true for a parsed run).
    pub fn is_empty(&self) -> bool {
        self.data.docs.is_empty()
    }

    /// The documents in trec_eval's order: score descending, ties broken by docid descending
    /// (byte-wise).
    pub fn ranked(&self) -> Vec<RankedDoc<'a>> {
        let mut order = Vec::new();
        rank_top(self.bytes, &self.data.docs, usize::MAX, &mut order);
        order
            .iter()
            .map(|e| RankedDoc {
                docid: e.docid.str_of(self.bytes),
                score: e.score,
            })
            .collect()
    }

    pub(crate) fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    pub(crate) fn docs(&self) -> &'a [Doc] {
        &self.data.docs
    }
}

/// A document with its sort key: ascending `key` is descending score (`-0.0` equal to `0.0`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ranked {
    key: u64,
    pub(crate) docid: Span,
    pub(crate) score: f64,
}

#[inline]
fn score_key(score: f64) -> u64 {
    // `+ 0.0` turns -0.0 into 0.0: trec_eval compares scores with `<`/`>`, so they tie.
    let bits = (score + 0.0).to_bits();
    let ascending = if bits >> 63 == 1 {
        !bits
    } else {
        bits | 1 << 63
    };
    !ascending
}

/// Fills `out` with the best `depth` documents of `docs` in trec_eval's order (its
/// `comp_sim_docno`: score descending, then `strcmp(docno2, docno1)`): a selection of the
/// top `depth`, then a sort of those only.
pub(crate) fn rank_top(bytes: &[u8], docs: &[Doc], depth: usize, out: &mut Vec<Ranked>) {
    out.clear();
    out.extend(docs.iter().map(|d| Ranked {
        key: score_key(d.score),
        docid: d.docid,
        score: d.score,
    }));
    let cmp = |a: &Ranked, b: &Ranked| -> Ordering {
        a.key
            .cmp(&b.key)
            .then_with(|| b.docid.of(bytes).cmp(a.docid.of(bytes)))
    };
    if depth == 0 {
        out.clear();
        return;
    }
    if depth < out.len() {
        out.select_nth_unstable_by(depth - 1, cmp);
        out.truncate(depth);
    }
    out.sort_unstable_by(cmp);
}

/// Reusable buffers of [`relevant_ranks`].
#[derive(Debug, Default)]
pub(crate) struct RankWork {
    relevant: Vec<(Ranked, i64)>,
    keys: Vec<u64>,
    is_relevant: Vec<bool>,
    beaten_by: Vec<usize>,
}

/// The 0-based rank (in trec_eval's order, see [`rank_top`]) and gain of every document of
/// `docs` with a positive `gain`, best first, without ranking the others: the relevant
/// documents are sorted, and each other document only counts how many of them it precedes
/// (a binary search). `gain` is called once per document, in file order (sequential memory
/// access).
pub(crate) fn relevant_ranks(
    bytes: &[u8],
    docs: &[Doc],
    mut gain: impl FnMut(&[u8]) -> i64,
    work: &mut RankWork,
    out: &mut Vec<(usize, i64)>,
) {
    out.clear();
    work.relevant.clear();
    work.is_relevant.clear();
    for d in docs {
        let g = gain(d.docid.of(bytes));
        work.is_relevant.push(g > 0);
        if g > 0 {
            let r = Ranked {
                key: score_key(d.score),
                docid: d.docid,
                score: d.score,
            };
            work.relevant.push((r, g));
        }
    }
    if work.relevant.is_empty() {
        return;
    }
    work.relevant.sort_unstable_by(|(a, _), (b, _)| {
        a.key
            .cmp(&b.key)
            .then_with(|| b.docid.of(bytes).cmp(a.docid.of(bytes)))
    });
    work.keys.clear();
    work.keys.extend(work.relevant.iter().map(|(r, _)| r.key));
    // beaten_by[p]: other documents preceded by exactly the first p relevant ones.
    work.beaten_by.clear();
    work.beaten_by.resize(work.relevant.len() + 1, 0);
    let keys = &work.keys;
    for (d, &rel) in docs.iter().zip(&work.is_relevant) {
        if rel {
            continue;
        }
        let key = score_key(d.score);
        // Relevant documents with a better score (a branch-free binary search on the keys),
        // then those with the same score and a larger docid (they rank first on a tie).
        let mut p = keys.partition_point(|&k| k < key);
        while let Some((r, _)) = work.relevant.get(p).filter(|(r, _)| r.key == key) {
            if r.docid.of(bytes) > d.docid.of(bytes) {
                p += 1;
            } else {
                break;
            }
        }
        if let Some(c) = work.beaten_by.get_mut(p) {
            *c += 1;
        }
    }
    let mut others_before = 0;
    for (i, ((_, g), c)) in work.relevant.iter().zip(&work.beaten_by).enumerate() {
        others_before += c;
        out.push((i + others_before, *g));
    }
}

/// A TREC run: `qid Q0 docid rank score tag` per line.
#[derive(Debug)]
pub struct Run {
    bytes: Bytes,
    /// Sorted by qid, byte-wise.
    queries: Vec<RunData>,
    run_id: Option<String>,
}

impl Run {
    /// Builds a run from `(qid, docid, score)` rows with the same checks as [`parse_run`]
    /// (errors name the source `<rows>` and the 1-based row). Documents are ranked as
    /// trec_eval ranks them, whatever the row order.
    pub fn from_rows<I, Q, D>(rows: I) -> Result<Run>
    where
        I: IntoIterator<Item = (Q, D, f64)>,
        Q: AsRef<str>,
        D: AsRef<str>,
    {
        let mut buf = Vec::new();
        let mut rows_out = Vec::new();
        for (i, (qid, docid, score)) in rows.into_iter().enumerate() {
            let (qid, docid) = (qid.as_ref(), docid.as_ref());
            check_field(i + 1, "qid", qid)?;
            check_field(i + 1, "docid", docid)?;
            if score.is_nan() {
                return Err(TrecError::BadScore {
                    source_name: "<rows>".to_string(),
                    line: i + 1,
                    value: score.to_string(),
                });
            }
            let (q, d) = push_row(&mut buf, qid, docid, i + 1)?;
            rows_out.push((q, d, score));
        }
        let mut chunk = Chunk::default();
        let mut segments = Segments::default();
        for &(q, d, score) in &rows_out {
            segments.push(&buf, &mut chunk, q, Doc { docid: d, score });
        }
        let queries = assemble(&buf, vec![chunk], "<rows>")?;
        Ok(Run {
            bytes: Bytes::Owned(buf),
            queries,
            run_id: None,
        })
    }

    /// The documents of one query.
    pub fn query(&self, qid: &str) -> Option<RunQuery<'_>> {
        self.index_of(qid).and_then(|i| self.query_at(i))
    }

    pub(crate) fn index_of(&self, qid: &str) -> Option<usize> {
        self.queries
            .binary_search_by(|q| q.qid.as_bytes().cmp(qid.as_bytes()))
            .ok()
    }

    pub(crate) fn query_at(&self, i: usize) -> Option<RunQuery<'_>> {
        self.queries.get(i).map(|data| RunQuery {
            bytes: &self.bytes,
            data,
        })
    }

    /// All queries, in trec_eval's order (qid byte-wise).
    pub fn queries(&self) -> impl ExactSizeIterator<Item = RunQuery<'_>> {
        self.queries.iter().map(|data| RunQuery {
            bytes: &self.bytes,
            data,
        })
    }

    /// Number of queries.
    pub fn num_queries(&self) -> usize {
        self.queries.len()
    }

    /// Number of retrieved documents over all queries.
    pub fn num_docs(&self) -> usize {
        self.queries.iter().map(|q| q.docs.len()).sum()
    }

    /// The run tag of the file's last line (what trec_eval reports as `runid`).
    pub fn run_id(&self) -> Option<&str> {
        self.run_id.as_deref()
    }
}

/// The documents of consecutive lines with one qid, as one thread read them.
#[derive(Debug)]
struct Segment {
    qid: Span,
    docs: Vec<Doc>,
}

/// What one thread read from its lines.
#[derive(Debug, Default)]
struct Chunk {
    /// One per qid (a qid seen again later in the chunk appends to its segment), in order of
    /// first appearance.
    segments: Vec<Segment>,
    /// The tag of the chunk's last data line and that line's offset.
    last_tag: Option<(Span, usize)>,
}

/// The qid → segment index of one chunk, with the current segment cached.
#[derive(Default)]
struct Segments<'a> {
    by_qid: HashMap<&'a [u8], usize>,
    current: Option<(&'a [u8], usize)>,
    /// Capacity for a new segment: the size of the previous one (runs have similar depths).
    hint: usize,
}

impl<'a> Segments<'a> {
    #[inline]
    fn push(&mut self, data: &'a [u8], chunk: &mut Chunk, qid: Span, doc: Doc) {
        let qid_bytes = qid.of(data);
        let slot = match self.current {
            Some((q, slot)) if store::same_bytes(q, qid_bytes) => slot,
            _ => {
                if let Some(seg) = self.current.and_then(|(_, s)| chunk.segments.get(s)) {
                    self.hint = seg.docs.len();
                }
                let hint = self.hint;
                let slot = *self.by_qid.entry(qid_bytes).or_insert_with(|| {
                    chunk.segments.push(Segment {
                        qid,
                        docs: Vec::with_capacity(hint),
                    });
                    chunk.segments.len() - 1
                });
                self.current = Some((qid_bytes, slot));
                slot
            }
        };
        if let Some(seg) = chunk.segments.get_mut(slot) {
            seg.docs.push(doc);
        }
    }
}

/// A malformed line found by a chunk parser, located by its offset.
#[derive(Debug)]
struct LineError {
    offset: usize,
    kind: LineErrorKind,
}

#[derive(Debug)]
enum LineErrorKind {
    Columns(usize),
    NotUtf8,
    BadScore(Range<usize>),
    TooLarge,
}

impl LineError {
    fn into_trec(self, data: &[u8], source_name: &str) -> TrecError {
        let line = line_of(data, self.offset);
        let source_name = source_name.to_string();
        match self.kind {
            LineErrorKind::Columns(found) => TrecError::Columns {
                source_name,
                line,
                expected: "6 (or more)",
                found,
            },
            LineErrorKind::NotUtf8 => TrecError::NotUtf8 { source_name, line },
            LineErrorKind::BadScore(r) => TrecError::BadScore {
                source_name,
                line,
                value: String::from_utf8_lossy(data.get(r).unwrap_or_default()).into_owned(),
            },
            LineErrorKind::TooLarge => TrecError::TooLarge { source_name, line },
        }
    }
}

/// Reads the run lines of `data[range]` (which starts at a line start and ends after a `\n` or
/// at the end of the data). The fast scan skips UTF-8 checks and notes whether it saw a
/// non-ASCII byte; only then is the chunk validated, and only a chunk that is not valid UTF-8
/// is scanned again with a check of every field read (the error is then on the first bad line,
/// whatever its kind).
fn parse_run_chunk(data: &[u8], range: Range<usize>) -> Result<Chunk, LineError> {
    match scan_run_chunk(data, range.clone(), false) {
        Ok((chunk, false)) => Ok(chunk),
        first => {
            let valid = data
                .get(range.clone())
                .is_some_and(|c| std::str::from_utf8(c).is_ok());
            if valid {
                first.map(|(chunk, _)| chunk)
            } else {
                scan_run_chunk(data, range, true).map(|(chunk, _)| chunk)
            }
        }
    }
}

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGH: u64 = 0x8080_8080_8080_8080;

/// Bit 7 of each byte of `word` set iff that byte is below 0x21 (the C spaces, and control
/// characters, which are checked one by one). Exact: no carry crosses a byte.
#[inline(always)]
fn below_0x21(word: u64) -> u64 {
    let t = ((word & !HIGH).wrapping_add((0x80 - 0x21) * ONES)) | word;
    !t & HIGH
}

/// The state of [`scan_run_chunk`] within the current line.
struct LineFields {
    start: usize,
    /// Where the next field may start (just after the last separator).
    next: usize,
    fields: [Range<usize>; 6],
    count: usize,
}

impl LineFields {
    #[inline(always)]
    fn separator(&mut self, at: usize) {
        if at > self.next {
            if let Some(f) = self.fields.get_mut(self.count) {
                *f = self.next..at;
            }
            self.count += 1;
        }
        self.next = at + 1;
    }
}

/// The scan of [`parse_run_chunk`]: finds field separators eight bytes at a time (a SWAR
/// test for bytes below 0x21, then `isspace` on those), and reads each line from its first six
/// fields. Returns the chunk and whether a non-ASCII byte was seen.
fn scan_run_chunk(
    data: &[u8],
    range: Range<usize>,
    check_utf8: bool,
) -> Result<(Chunk, bool), LineError> {
    let end = range.end.min(data.len());
    let mut chunk = Chunk::default();
    let mut segments = Segments::default();
    let mut line = LineFields {
        start: range.start,
        next: range.start,
        fields: std::array::from_fn(|_| 0..0),
        count: 0,
    };
    let mut high = 0_u64;
    let mut at = range.start;
    // Whole words.
    while at + 8 <= end {
        let Some(bytes) = data.get(at..at + 8) else {
            break;
        };
        let mut w = [0_u8; 8];
        w.copy_from_slice(bytes);
        let word = u64::from_le_bytes(w);
        high |= word;
        let mut mask = below_0x21(word);
        while mask != 0 {
            let i = (mask.trailing_zeros() / 8) as usize;
            mask &= mask - 1;
            let b = w.get(i).copied().unwrap_or(0);
            if is_c_space(b) {
                line.separator(at + i);
                if b == b'\n' {
                    end_line(data, &mut line, &mut chunk, &mut segments, check_utf8)?;
                    line.start = at + i + 1;
                    line.next = line.start;
                    line.count = 0;
                }
            }
        }
        at += 8;
    }
    // The tail, byte by byte.
    while at < end {
        let b = data.get(at).copied().unwrap_or(0);
        high |= u64::from(b);
        if is_c_space(b) {
            line.separator(at);
            if b == b'\n' {
                end_line(data, &mut line, &mut chunk, &mut segments, check_utf8)?;
                line.start = at + 1;
                line.next = line.start;
                line.count = 0;
            }
        }
        at += 1;
    }
    // A last line without '\n'.
    line.separator(end);
    end_line(data, &mut line, &mut chunk, &mut segments, check_utf8)?;
    Ok((chunk, high & HIGH != 0))
}

/// Reads one complete line of a run (its fields are in `line`).
#[inline]
fn end_line<'a>(
    data: &'a [u8],
    line: &mut LineFields,
    chunk: &mut Chunk,
    segments: &mut Segments<'a>,
    check_utf8: bool,
) -> Result<(), LineError> {
    let start = line.start;
    let err = |kind| LineError {
        offset: start,
        kind,
    };
    if line.count == 0 {
        return Ok(());
    }
    if line.count < 6 {
        return Err(err(LineErrorKind::Columns(line.count)));
    }
    let [qid, _iter, docid, _rank, score, tag] = &line.fields;
    let field = |r: &Range<usize>| data.get(r.clone()).unwrap_or_default();
    if check_utf8
        && [qid, docid, score]
            .into_iter()
            .any(|r| std::str::from_utf8(field(r)).is_err())
    {
        return Err(err(LineErrorKind::NotUtf8));
    }
    let value = match parse_score(field(score)) {
        Some(s) if !s.is_nan() => s,
        _ => return Err(err(LineErrorKind::BadScore(score.clone()))),
    };
    let span = |r: &Range<usize>| Span::new(r.start, r.end).ok_or(err(LineErrorKind::TooLarge));
    let (qid, docid, tag) = (span(qid)?, span(docid)?, span(tag)?);
    segments.push(
        data,
        chunk,
        qid,
        Doc {
            docid,
            score: value,
        },
    );
    chunk.last_tag = Some((tag, start));
    Ok(())
}

/// Splits `data` into `n` ranges of whole lines.
fn line_chunks(data: &[u8], n: usize) -> Vec<Range<usize>> {
    let mut out = Vec::with_capacity(n);
    let mut start = 0;
    for i in 1..=n {
        if start >= data.len() {
            break;
        }
        let end = if i == n {
            data.len()
        } else {
            let target = (data.len() / n * i).max(start);
            match data.get(target..).and_then(|r| memchr::memchr(b'\n', r)) {
                Some(p) => target + p + 1,
                None => data.len(),
            }
        };
        out.push(start..end);
        start = end;
    }
    out
}

/// Runs `f` on parts of `items` on up to `threads` threads (this one and scoped helpers) and
/// returns the results in the order of the parts. The items are cut into about four parts per
/// thread, handed out one at a time: on a machine shared with other work, a thread that is
/// descheduled holds up only its current part while the others take the rest.
pub(crate) fn parallel_map<T: Sync, R: Send>(
    items: &[T],
    threads: usize,
    f: impl Fn(&[T]) -> R + Sync,
) -> Vec<R> {
    let threads = threads.clamp(1, items.len().max(1));
    if threads == 1 {
        return vec![f(items)];
    }
    let parts: Vec<&[T]> = items
        .chunks(items.len().div_ceil(threads * 4).max(1))
        .collect();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let work = || {
        let mut done = Vec::new();
        loop {
            let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let Some(part) = parts.get(i) else {
                break;
            };
            done.push((i, f(part)));
        }
        done
    };
    let mut results: Vec<(usize, R)> = std::thread::scope(|s| {
        let helpers: Vec<_> = (1..threads).map(|_| s.spawn(work)).collect();
        let mut all = work();
        for h in helpers {
            all.extend(h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)));
        }
        all
    });
    results.sort_unstable_by_key(|(i, _)| *i);
    results.into_iter().map(|(_, r)| r).collect()
}

/// Merges the chunks' segments into queries (file order within each query), checks every
/// query for duplicate documents, and sorts the queries by qid.
fn assemble(data: &[u8], chunks: Vec<Chunk>, source_name: &str) -> Result<Vec<RunData>> {
    let mut by_qid: HashMap<&[u8], usize> = HashMap::new();
    let mut queries: Vec<(Span, Vec<Doc>)> = Vec::new();
    for chunk in chunks {
        for seg in chunk.segments {
            match by_qid.get(seg.qid.of(data)) {
                Some(&i) => {
                    if let Some((_, docs)) = queries.get_mut(i) {
                        docs.extend_from_slice(&seg.docs);
                    }
                }
                None => {
                    by_qid.insert(seg.qid.of(data), queries.len());
                    queries.push((seg.qid, seg.docs));
                }
            }
        }
    }
    drop(by_qid);
    queries.sort_unstable_by(|a, b| a.0.of(data).cmp(b.0.of(data)));

    // Duplicates: of all queries, the one whose repeated line comes first in the file.
    let total: usize = queries.iter().map(|q| q.1.len()).sum();
    let threads = threads_for(total * 16);
    let found = parallel_map(&queries, threads, |part| {
        let mut table = IdTable::default();
        let mut best: Option<(Span, Doc, Doc)> = None;
        for (qid, docs) in part {
            if let Some((first, later)) = first_duplicate(data, docs, &mut table) {
                if best.is_none_or(|(_, _, b)| later.docid.start() < b.docid.start()) {
                    best = Some((*qid, first, later));
                }
            }
        }
        best
    });
    let dup = found
        .into_iter()
        .flatten()
        .min_by_key(|(_, _, later)| later.docid.start());
    if let Some((qid, first, later)) = dup {
        return Err(TrecError::DuplicateDoc {
            source_name: source_name.to_string(),
            line: line_of(data, later.docid.start()),
            first_line: line_of(data, first.docid.start()),
            qid: qid.str_of(data).to_string(),
            docid: later.docid.str_of(data).to_string(),
        });
    }
    Ok(queries
        .into_iter()
        .map(|(qid, docs)| RunData {
            qid: qid.str_of(data).into(),
            docs,
        })
        .collect())
}

/// The first document (in file order) that repeats an earlier one of the same query, with
/// that earlier one.
fn first_duplicate(data: &[u8], docs: &[Doc], table: &mut IdTable) -> Option<(Doc, Doc)> {
    table.reset(docs.len());
    for (i, doc) in docs.iter().enumerate() {
        let bytes = doc.docid.of(data);
        // Past u32::MAX - 1 documents in one query the index cannot number them; such a query
        // (over 40 GB of lines) is not checked beyond that point.
        let entry = u32::try_from(i).ok().filter(|&e| e < u32::MAX - 1)?;
        let seen = table.insert(hash_bytes(bytes), entry, |e| {
            docs.get(e as usize)
                .is_some_and(|d| store::same_bytes(d.docid.of(data), bytes))
        });
        if let Some(first) = seen.and_then(|e| docs.get(e as usize)) {
            return Some((*first, *doc));
        }
    }
    None
}

/// Reads a run file: at least six whitespace-separated columns `qid iter docid rank score tag`
/// (trec_eval ignores the iter and rank columns and anything after the tag; blank lines are
/// skipped, as trec_eval skips them in runs). `score` must be a number. A document retrieved
/// twice for one query is an error.
///
/// The file is memory-mapped and parsed in parallel (one range of lines per thread).
pub fn parse_run(path: impl AsRef<Path>) -> Result<Run> {
    let path = path.as_ref();
    let bytes = store::load(path)?;
    build_run(bytes, &path.display().to_string())
}

/// [`parse_run`] on file contents; `source_name` names the input in errors.
pub fn parse_run_bytes(data: &[u8], source_name: &str) -> Result<Run> {
    build_run(Bytes::Owned(data.to_vec()), source_name)
}

fn build_run(bytes: Bytes, source_name: &str) -> Result<Run> {
    let threads = threads_for(bytes.len());
    // Several ranges per thread, for `parallel_map`'s load balancing.
    let chunks = if threads > 1 { threads * 4 } else { 1 };
    build_run_in(bytes, source_name, chunks)
}

/// [`build_run`] with the input split into `chunks` ranges of lines (one thread each).
pub(crate) fn build_run_in(bytes: Bytes, source_name: &str, chunks: usize) -> Result<Run> {
    let data: &[u8] = &bytes;
    let ranges = line_chunks(data, chunks.max(1));
    let threads = threads_for(data.len()).min(ranges.len());
    let results = parallel_map(&ranges, threads.max(1), |part| {
        part.iter()
            .map(|r| parse_run_chunk(data, r.clone()))
            .collect::<Vec<_>>()
    });
    let mut chunks = Vec::with_capacity(ranges.len());
    for result in results.into_iter().flatten() {
        chunks.push(result.map_err(|e| e.into_trec(data, source_name))?);
    }
    let Some((tag, tag_line)) = chunks.iter().rev().find_map(|c| c.last_tag) else {
        return Err(TrecError::Empty {
            source_name: source_name.to_string(),
            what: "run",
        });
    };
    let run_id = std::str::from_utf8(tag.of(data))
        .map_err(|_| TrecError::NotUtf8 {
            source_name: source_name.to_string(),
            line: line_of(data, tag_line),
        })?
        .to_string();
    let queries = assemble(data, chunks, source_name)?;
    Ok(Run {
        bytes,
        queries,
        run_id: Some(run_id),
    })
}

/// A field written to a TREC file must be non-empty and free of whitespace.
pub(crate) fn check_field(row: usize, field: &'static str, value: &str) -> Result<()> {
    if value.is_empty() || value.bytes().any(is_c_space) {
        return Err(TrecError::BadField {
            row,
            field,
            value: value.to_string(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn order(run: &Run, qid: &str) -> Vec<String> {
        run.query(qid)
            .map(|q| q.ranked().iter().map(|d| d.docid.to_string()).collect())
            .unwrap_or_default()
    }

    #[test]
    fn run_is_ranked_by_score_then_docid_descending() {
        let run = parse_run_bytes(
            b"1 Q0 a 1 1.0 t\n1 Q0 c 2 2.0 t\n1 Q0 b 3 2.0 t\n1 Q0 B 4 2 t\n",
            "r",
        )
        .expect("parses");
        // 2.0 ties: "c" > "b" > "B" byte-wise, so c, b, B; then a.
        assert_eq!(order(&run, "1"), ["c", "b", "B", "a"]);
        assert_eq!(run.run_id(), Some("t"));
    }

    #[test]
    fn negative_zero_ties_with_zero_and_top_depth_is_a_prefix() {
        let run = parse_run_bytes(
            b"1 Q0 a 1 -0 t\n1 Q0 b 2 0 t\n1 Q0 c 3 -1 t\n1 Q0 d 4 5 t\n1 Q0 e 5 0.0 t\n",
            "r",
        )
        .expect("parses");
        assert_eq!(order(&run, "1"), ["d", "e", "b", "a", "c"]);
        let q = run.query("1").expect("query");
        let mut top = Vec::new();
        for depth in 0..=6 {
            rank_top(q.bytes(), q.docs(), depth, &mut top);
            let got: Vec<&str> = top.iter().map(|r| r.docid.str_of(q.bytes())).collect();
            let want = ["d", "e", "b", "a", "c"];
            assert_eq!(got, want[..depth.min(5)], "depth {depth}");
        }
    }

    #[test]
    fn relevant_ranks_agree_with_the_full_ranking() {
        let mut text = String::new();
        let mut rng = 7_u64;
        for d in 0..300 {
            rng = rng.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            // Few distinct scores: many ties broken by docid.
            text.push_str(&format!("1 Q0 d{d} 0 {} t\n", (rng >> 33) % 7));
        }
        let run = parse_run_bytes(text.as_bytes(), "r").expect("parses");
        let q = run.query("1").expect("query");
        let gain = |id: &[u8]| -> i64 {
            let n: i64 = std::str::from_utf8(&id[1..]).unwrap().parse().unwrap();
            [0, 2, -1, 1, 0][n as usize % 5]
        };
        let mut full = Vec::new();
        rank_top(q.bytes(), q.docs(), usize::MAX, &mut full);
        let want: Vec<(usize, i64)> = full
            .iter()
            .enumerate()
            .map(|(i, r)| (i, gain(r.docid.of(q.bytes()))))
            .filter(|&(_, g)| g > 0)
            .collect();
        let (mut work, mut got) = (RankWork::default(), Vec::new());
        relevant_ranks(q.bytes(), q.docs(), gain, &mut work, &mut got);
        assert_eq!(got, want);
        relevant_ranks(q.bytes(), q.docs(), |_| 0, &mut work, &mut got);
        assert!(got.is_empty());
    }

    #[test]
    fn queries_sort_bytewise_like_strcmp() {
        let run = parse_run_bytes(
            b"9 Q0 a 1 1 t\n10 Q0 a 1 1 t\nb Q0 a 1 1 t\nB Q0 a 1 1 t\n",
            "r",
        )
        .expect("parses");
        let qids: Vec<&str> = run.queries().map(|q| q.qid()).collect();
        assert_eq!(qids, ["10", "9", "B", "b"]);
    }

    #[test]
    fn run_errors_carry_file_and_line() {
        let err = parse_run_bytes(b"1 Q0 a 1 1 t\n1 Q0 b 2 1\n", "run.txt").unwrap_err();
        assert_eq!(
            err.to_string(),
            "run.txt:2: expected 6 (or more) columns, found 5"
        );
        let err = parse_run_bytes(b"1 Q0 a 1 x1 t\n", "run.txt").unwrap_err();
        assert_eq!(err.to_string(), "run.txt:1: score: `x1` is not a number");
        let err = parse_run_bytes(b"1 Q0 a 1 NaN t\n", "run.txt").unwrap_err();
        assert!(matches!(err, TrecError::BadScore { line: 1, .. }));
        let err = parse_run_bytes(b"1 Q0 a 1 1 t\n2 Q0 a 1 1 t\n1 Q0 a 2 0.5 t\n", "run.txt")
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "run.txt:3: docid: `a` appears twice for query `1` (first at line 1)"
        );
        let err = parse_run_bytes(b"\n \n", "run.txt").unwrap_err();
        assert!(matches!(err, TrecError::Empty { .. }));
        let err = parse_run_bytes(b"1 Q0 \xff 1 1 t\n", "run.txt").unwrap_err();
        assert_eq!(err.to_string(), "run.txt:1: not valid UTF-8");
        // Bytes trec_eval ignores (iter, rank, extra columns) need not be UTF-8.
        let run = parse_run_bytes(b"1 \xff a \xfe 1 t \xfd\n", "run.txt").expect("parses");
        assert_eq!(run.num_docs(), 1);
        let err = parse_run_bytes(b"1 Q0 a 1 1 \xff\n", "run.txt").unwrap_err();
        assert_eq!(err.to_string(), "run.txt:1: not valid UTF-8");
    }

    #[test]
    fn the_earliest_repeated_line_is_reported() {
        let err = parse_run_bytes(
            b"2 Q0 x 1 1 t\n1 Q0 a 1 1 t\n2 Q0 y 1 1 t\n1 Q0 a 1 1 t\n2 Q0 x 1 1 t\n",
            "r",
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "r:4: docid: `a` appears twice for query `1` (first at line 2)"
        );
    }

    #[test]
    fn run_accepts_blank_lines_extra_columns_crlf_and_no_final_newline() {
        let run = parse_run_bytes(b"\n1 Q0 a 1 1 t extra more\r\n  \n1\tQ0\tb\t2\t0.5\tt", "r")
            .expect("parses");
        assert_eq!(run.query("1").map(|q| q.len()), Some(2));
    }

    #[test]
    fn qrels_errors_carry_file_and_line() {
        let err = parse_qrels_bytes(b"1 0 a 1\n1 0 b 1 x\n", "q").unwrap_err();
        assert_eq!(err.to_string(), "q:2: expected 4 columns, found 5");
        let err = parse_qrels_bytes(b"1 0 a 1\n\n", "q").unwrap_err();
        assert_eq!(err.to_string(), "q:2: expected 4 columns, found 0");
        let err = parse_qrels_bytes(b"1 0 a 1.5\n", "q").unwrap_err();
        assert_eq!(err.to_string(), "q:1: rel: `1.5` is not an integer");
        let err = parse_qrels_bytes(b"1 0 a 1\n1 0 a 0\n", "q").unwrap_err();
        assert_eq!(
            err.to_string(),
            "q:2: docid: `a` appears twice for query `1` (first at line 1)"
        );
        let err = parse_qrels_bytes(b"", "q").unwrap_err();
        assert!(matches!(err, TrecError::Empty { .. }));
        let err = parse_qrels_bytes(b"\n", "q").unwrap_err();
        assert_eq!(err.to_string(), "q:1: expected 4 columns, found 0");
        let err = parse_qrels_bytes(b"1 0 \xff 1\n", "q").unwrap_err();
        assert_eq!(err.to_string(), "q:1: not valid UTF-8");
    }

    #[test]
    fn qrels_counts_relevant_and_ideal_gains() {
        let q = parse_qrels_bytes(b"1 0 a 2\n1 0 b 0\n1 0 c -1\n1 0 d 3\n1 0 e 1\n", "q")
            .expect("parses");
        let one = q.query("1").expect("query");
        assert_eq!(one.num_rel(), 3);
        assert_eq!(one.num_judged(), 5);
        assert_eq!(one.ideal_gains(), [3, 2, 1]);
        assert_eq!(one.rel("c"), Some(-1));
        assert_eq!(one.rel("zz"), None);
    }

    #[test]
    fn rows_are_checked_like_files() {
        let err = Run::from_rows([("1", "a", 1.0), ("1", "a", 2.0)]).unwrap_err();
        assert!(matches!(
            err,
            TrecError::DuplicateDoc {
                line: 2,
                first_line: 1,
                ..
            }
        ));
        let err = Qrels::from_rows([("1", "a", 1), ("2", "a", 1), ("1", "a", 0)]).unwrap_err();
        assert!(matches!(
            err,
            TrecError::DuplicateDoc {
                line: 3,
                first_line: 1,
                ..
            }
        ));
        let err = Qrels::from_rows([("1", "a b", 1)]).unwrap_err();
        assert!(matches!(err, TrecError::BadField { field: "docid", .. }));
        let err = Run::from_rows([("1", "a", f64::NAN)]).unwrap_err();
        assert!(matches!(err, TrecError::BadScore { .. }));
        let run =
            Run::from_rows([("2", "a", 1.0), ("1", "b", 1.0), ("1", "c", 3.0)]).expect("rows");
        assert_eq!(order(&run, "1"), ["c", "b"]);
        assert_eq!(run.num_queries(), 2);
    }

    #[test]
    fn parallel_map_keeps_the_order_of_the_parts() {
        let items: Vec<u64> = (0..1003).collect();
        for threads in 1..=5 {
            let parts = parallel_map(&items, threads, |part| part.to_vec());
            assert_eq!(parts.concat(), items, "{threads} threads");
            if threads > 1 {
                assert!(parts.len() > threads, "several parts per thread");
            }
        }
        let none: Vec<Vec<u64>> = parallel_map(&[], 4, |part: &[u64]| part.to_vec());
        assert_eq!(none, [Vec::<u64>::new()]);
    }

    #[test]
    fn large_runs_split_over_threads_parse_like_one_chunk() {
        // Over 1 MiB, interleaved queries, one duplicate at the end.
        let mut text = String::new();
        for d in 0..40_000 {
            text.push_str(&format!("q{} Q0 doc{d} 0 {}.25 tag\n", d % 7, d % 13));
        }
        let one = build_run_in(Bytes::Owned(text.clone().into_bytes()), "r", 1).expect("parses");
        let many = parse_run_bytes(text.as_bytes(), "r").expect("parses");
        assert_eq!(one.num_queries(), many.num_queries());
        for (a, b) in one.queries().zip(many.queries()) {
            assert_eq!(a.qid(), b.qid());
            assert_eq!(a.ranked(), b.ranked());
        }
        text.push_str("q3 Q0 doc10 0 1 tag\n");
        let err = parse_run_bytes(text.as_bytes(), "r").unwrap_err();
        assert_eq!(
            err.to_string(),
            "r:40001: docid: `doc10` appears twice for query `q3` (first at line 11)"
        );
    }

    #[test]
    fn chunks_split_at_line_starts_and_agree_with_one_chunk() {
        let mut text = String::new();
        for q in 0..7 {
            for d in 0..13 {
                // Queries interleave, so they span chunks.
                text.push_str(&format!(
                    "q{} Q0 d{d} 0 {}.5 t{q}\n",
                    (q * 3 + d) % 7,
                    d % 4
                ));
            }
        }
        let data = text.as_bytes();
        for n in 1..=9 {
            let ranges = line_chunks(data, n);
            assert_eq!(ranges.first().map(|r| r.start), Some(0));
            assert_eq!(ranges.last().map(|r| r.end), Some(data.len()));
            for w in ranges.windows(2) {
                assert_eq!(w[0].end, w[1].start);
                assert_eq!(data[w[1].start - 1], b'\n');
            }
            let chunks: Vec<Chunk> = ranges
                .iter()
                .map(|r| parse_run_chunk(data, r.clone()).expect("parses"))
                .collect();
            let queries = assemble(data, chunks, "r").expect("assembles");
            let whole = assemble(
                data,
                vec![parse_run_chunk(data, 0..data.len()).expect("parses")],
                "r",
            )
            .expect("assembles");
            assert_eq!(queries.len(), whole.len());
            for (a, b) in queries.iter().zip(&whole) {
                assert_eq!(a.qid, b.qid);
                let ids = |q: &RunData| -> Vec<&[u8]> {
                    q.docs.iter().map(|d| d.docid.of(data)).collect()
                };
                assert_eq!(ids(a), ids(b));
            }
        }
    }
}
