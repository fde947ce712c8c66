//! Qrels and run files: parsing (trec_eval's rules) and the in-memory forms.

use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap};
use std::hash::BuildHasherDefault;
use std::path::Path;

use crate::error::{Result, TrecError};

/// C's `isspace` in the "C" locale (trec_eval splits fields with it): note `\v`, which Rust's
/// `is_ascii_whitespace` does not include.
fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// Up to `N` fields of a line and the total count of fields.
fn split_fields<const N: usize>(line: &[u8]) -> ([&[u8]; N], usize) {
    let mut out: [&[u8]; N] = [&[]; N];
    let mut count = 0;
    for field in line.split(|&b| is_c_space(b)).filter(|f| !f.is_empty()) {
        if count < N {
            out[count] = field;
        }
        count += 1;
    }
    (out, count)
}

/// A fast non-cryptographic hasher (the rustc "Fx" mixing step) for the string-keyed maps:
/// the inputs are local files, not adversarial, and SipHash dominated lookups on large runs.
#[derive(Default, Clone, Copy)]
pub(crate) struct FxHasher(u64);

impl std::hash::Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        const K: u64 = 0x517c_c1b7_2722_0a95;
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.0 = (self.0.rotate_left(5) ^ u64::from_le_bytes(w)).wrapping_mul(K);
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            self.0 = (self.0.rotate_left(5) ^ u64::from_le_bytes(w)).wrapping_mul(K);
        }
    }

    fn write_u8(&mut self, i: u8) {
        self.0 = (self.0.rotate_left(5) ^ u64::from(i)).wrapping_mul(0x517c_c1b7_2722_0a95);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

pub(crate) type FxMap<K, V> = HashMap<K, V, BuildHasherDefault<FxHasher>>;

fn read_file(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|source| TrecError::Io {
        path: path.to_path_buf(),
        source,
    })
}

fn utf8<'a>(bytes: &'a [u8], source_name: &str, line: usize) -> Result<&'a str> {
    std::str::from_utf8(bytes).map_err(|_| TrecError::NotUtf8 {
        source_name: source_name.to_string(),
        line,
    })
}

/// Lines of a file with their 1-based numbers. A final line without `\n` is a line; the empty
/// remainder after a final `\n` is not.
fn numbered_lines(data: &[u8]) -> impl Iterator<Item = (usize, &[u8])> {
    let body = data.strip_suffix(b"\n").unwrap_or(data);
    let empty = data.is_empty();
    body.split(|&b| b == b'\n')
        .enumerate()
        .filter(move |_| !empty)
        .map(|(i, l)| (i + 1, l))
}

/// Relevance judgements of one query.
#[derive(Debug, Clone, Default)]
pub struct QrelsQuery {
    judgments: FxMap<Box<str>, i64>,
    num_rel: usize,
    ideal_gains: Vec<i64>,
}

impl QrelsQuery {
    /// The judgement of `docid`, if it was judged.
    pub fn rel(&self, docid: &str) -> Option<i64> {
        self.judgments.get(docid).copied()
    }

    /// Number of judged documents (any value, negative included).
    pub fn num_judged(&self) -> usize {
        self.judgments.len()
    }

    /// Number of relevant documents (rel >= 1).
    pub fn num_rel(&self) -> usize {
        self.num_rel
    }

    /// The positive relevance values, largest first: the ideal ranking's gains.
    pub(crate) fn ideal_gains(&self) -> &[i64] {
        &self.ideal_gains
    }

    fn finish(&mut self) {
        let mut gains: Vec<i64> = self
            .judgments
            .values()
            .copied()
            .filter(|&r| r > 0)
            .collect();
        gains.sort_unstable_by(|a, b| b.cmp(a));
        self.num_rel = gains.len();
        self.ideal_gains = gains;
    }
}

/// TREC relevance judgements: `qid iter docid rel` per line.
#[derive(Debug, Clone, Default)]
pub struct Qrels {
    queries: BTreeMap<String, QrelsQuery>,
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
        let mut builder = QrelsBuilder::new("<rows>");
        for (i, (qid, docid, rel)) in rows.into_iter().enumerate() {
            let (qid, docid) = (qid.as_ref(), docid.as_ref());
            check_field(i + 1, "qid", qid)?;
            check_field(i + 1, "docid", docid)?;
            builder.push(i + 1, qid, docid, rel)?;
        }
        Ok(builder.finish())
    }

    /// The judgements of one query.
    pub fn query(&self, qid: &str) -> Option<&QrelsQuery> {
        self.queries.get(qid)
    }

    /// Number of queries with at least one judgement line.
    pub fn num_queries(&self) -> usize {
        self.queries.len()
    }

    /// The query ids, in trec_eval's order (byte-wise, like `strcmp`).
    pub fn qids(&self) -> impl Iterator<Item = &str> {
        self.queries.keys().map(String::as_str)
    }
}

struct QrelsBuilder {
    source_name: String,
    /// qid -> docid -> (rel, line of the judgement).
    queries: BTreeMap<String, FxMap<Box<str>, (i64, usize)>>,
}

impl QrelsBuilder {
    fn new(source_name: &str) -> Self {
        QrelsBuilder {
            source_name: source_name.to_string(),
            queries: BTreeMap::new(),
        }
    }

    fn push(&mut self, line: usize, qid: &str, docid: &str, rel: i64) -> Result<()> {
        let query = match self.queries.get_mut(qid) {
            Some(q) => q,
            None => self.queries.entry(qid.to_string()).or_default(),
        };
        if let Some(&(_, first_line)) = query.get(docid) {
            return Err(TrecError::DuplicateDoc {
                source_name: self.source_name.clone(),
                line,
                first_line,
                qid: qid.to_string(),
                docid: docid.to_string(),
            });
        }
        query.insert(docid.into(), (rel, line));
        Ok(())
    }

    fn finish(self) -> Qrels {
        let queries = self
            .queries
            .into_iter()
            .map(|(qid, docs)| {
                let mut q = QrelsQuery {
                    judgments: docs.into_iter().map(|(d, (rel, _))| (d, rel)).collect(),
                    ..QrelsQuery::default()
                };
                q.finish();
                (qid, q)
            })
            .collect();
        Qrels { queries }
    }
}

/// Reads a qrels file: exactly four whitespace-separated columns `qid iter docid rel` per line
/// (trec_eval rejects blank lines and extra columns in qrels, and so does this), `rel` an
/// integer; negative values mean judged-but-unjudged (never relevant, no gain). A document
/// judged twice for one query is an error.
pub fn parse_qrels(path: impl AsRef<Path>) -> Result<Qrels> {
    let path = path.as_ref();
    let data = read_file(path)?;
    parse_qrels_bytes(&data, &path.display().to_string())
}

/// [`parse_qrels`] on file contents; `source_name` names the input in errors.
pub fn parse_qrels_bytes(data: &[u8], source_name: &str) -> Result<Qrels> {
    let mut builder = QrelsBuilder::new(source_name);
    let mut any = false;
    for (line_no, line) in numbered_lines(data) {
        let ([qid, _iter, docid, rel], count) = split_fields::<4>(line);
        if count != 4 {
            return Err(TrecError::Columns {
                source_name: source_name.to_string(),
                line: line_no,
                expected: "4",
                found: count,
            });
        }
        let qid = utf8(qid, source_name, line_no)?;
        let docid = utf8(docid, source_name, line_no)?;
        let rel_text = utf8(rel, source_name, line_no)?;
        let rel: i64 = rel_text.parse().map_err(|_| TrecError::BadRelevance {
            source_name: source_name.to_string(),
            line: line_no,
            value: rel_text.to_string(),
        })?;
        builder.push(line_no, qid, docid, rel)?;
        any = true;
    }
    if !any {
        return Err(TrecError::Empty {
            source_name: source_name.to_string(),
            what: "qrels",
        });
    }
    Ok(builder.finish())
}

/// One retrieved document of a ranked query.
#[derive(Debug, Clone, PartialEq)]
pub struct RankedDoc {
    /// The document id.
    pub docid: Box<str>,
    /// The run's score (trec_eval ignores the rank column and ranks by this).
    pub score: f64,
}

/// The ranking of one query: documents in trec_eval's order (score descending, ties broken by
/// docid descending, byte-wise).
#[derive(Debug, Clone)]
pub struct RunQuery {
    qid: String,
    docs: Vec<RankedDoc>,
}

impl RunQuery {
    /// The query id.
    pub fn qid(&self) -> &str {
        &self.qid
    }

    /// The documents, best first.
    pub fn docs(&self) -> &[RankedDoc] {
        &self.docs
    }
}

/// A TREC run: `qid Q0 docid rank score tag` per line.
#[derive(Debug, Clone, Default)]
pub struct Run {
    queries: Vec<RunQuery>,
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
        let mut builder = RunBuilder::new("<rows>");
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
            builder.push(i + 1, qid, docid, score);
        }
        builder.finish(None)
    }

    /// The ranking of one query.
    pub fn query(&self, qid: &str) -> Option<&RunQuery> {
        self.queries
            .binary_search_by(|q| q.qid.as_str().cmp(qid))
            .ok()
            .and_then(|i| self.queries.get(i))
    }

    /// All queries, in trec_eval's order (qid byte-wise).
    pub fn queries(&self) -> &[RunQuery] {
        &self.queries
    }

    /// Number of queries.
    pub fn num_queries(&self) -> usize {
        self.queries.len()
    }

    /// The run tag of the file's last line (what trec_eval reports as `runid`).
    pub fn run_id(&self) -> Option<&str> {
        self.run_id.as_deref()
    }
}

/// A document as read: (docid, score, line).
type PendingDoc = (Box<str>, f64, usize);

struct RunBuilder {
    source_name: String,
    index: FxMap<Box<str>, usize>,
    queries: Vec<(Box<str>, Vec<PendingDoc>)>,
    last: usize,
}

impl RunBuilder {
    fn new(source_name: &str) -> Self {
        RunBuilder {
            source_name: source_name.to_string(),
            index: FxMap::default(),
            queries: Vec::new(),
            last: usize::MAX,
        }
    }

    fn push(&mut self, line: usize, qid: &str, docid: &str, score: f64) {
        // Runs are usually grouped by query: try the previous query first.
        let slot = match self.queries.get(self.last) {
            Some((q, _)) if &**q == qid => self.last,
            _ => match self.index.get(qid) {
                Some(&i) => i,
                None => {
                    let i = self.queries.len();
                    self.index.insert(qid.into(), i);
                    self.queries.push((qid.into(), Vec::new()));
                    i
                }
            },
        };
        self.last = slot;
        if let Some((_, docs)) = self.queries.get_mut(slot) {
            docs.push((docid.into(), score, line));
        }
    }

    fn finish(self, run_id: Option<String>) -> Result<Run> {
        let mut queries = Vec::with_capacity(self.queries.len());
        for (qid, mut docs) in self.queries {
            // Duplicates first (reported by line), as trec_eval does after sorting by docno.
            docs.sort_unstable_by(|a, b| a.0.cmp(&b.0).then(a.2.cmp(&b.2)));
            if let Some(pair) = docs.windows(2).find(|w| w[0].0 == w[1].0) {
                return Err(TrecError::DuplicateDoc {
                    source_name: self.source_name,
                    line: pair[1].2,
                    first_line: pair[0].2,
                    qid: qid.to_string(),
                    docid: pair[1].0.to_string(),
                });
            }
            // trec_eval's comp_sim_docno: sim descending, then strcmp(docno2, docno1).
            docs.sort_unstable_by(|a, b| {
                b.1.partial_cmp(&a.1)
                    .unwrap_or(Ordering::Equal)
                    .then_with(|| b.0.cmp(&a.0))
            });
            queries.push(RunQuery {
                qid: qid.into(),
                docs: docs
                    .into_iter()
                    .map(|(docid, score, _)| RankedDoc { docid, score })
                    .collect(),
            });
        }
        queries.sort_unstable_by(|a, b| a.qid.cmp(&b.qid));
        Ok(Run { queries, run_id })
    }
}

/// Reads a run file: at least six whitespace-separated columns `qid iter docid rank score tag`
/// (trec_eval ignores the iter and rank columns and anything after the tag; blank lines are
/// skipped, as trec_eval skips them in runs). `score` must be a number. A document retrieved
/// twice for one query is an error.
pub fn parse_run(path: impl AsRef<Path>) -> Result<Run> {
    let path = path.as_ref();
    let data = read_file(path)?;
    parse_run_bytes(&data, &path.display().to_string())
}

/// [`parse_run`] on file contents; `source_name` names the input in errors.
pub fn parse_run_bytes(data: &[u8], source_name: &str) -> Result<Run> {
    let mut builder = RunBuilder::new(source_name);
    let mut run_id = None;
    let mut last_tag: &[u8] = &[];
    let mut last_tag_line = 0;
    for (line_no, line) in numbered_lines(data) {
        let ([qid, _iter, docid, _rank, score, tag], count) = split_fields::<6>(line);
        if count == 0 {
            continue;
        }
        if count < 6 {
            return Err(TrecError::Columns {
                source_name: source_name.to_string(),
                line: line_no,
                expected: "6 (or more)",
                found: count,
            });
        }
        let qid = utf8(qid, source_name, line_no)?;
        let docid = utf8(docid, source_name, line_no)?;
        let score_text = utf8(score, source_name, line_no)?;
        let score: f64 = match score_text.parse::<f64>() {
            Ok(s) if !s.is_nan() => s,
            _ => {
                return Err(TrecError::BadScore {
                    source_name: source_name.to_string(),
                    line: line_no,
                    value: score_text.to_string(),
                })
            }
        };
        last_tag = tag;
        last_tag_line = line_no;
        builder.push(line_no, qid, docid, score);
    }
    if last_tag_line == 0 {
        return Err(TrecError::Empty {
            source_name: source_name.to_string(),
            what: "run",
        });
    }
    if !last_tag.is_empty() {
        run_id = Some(utf8(last_tag, source_name, last_tag_line)?.to_string());
    }
    builder.finish(run_id)
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

    #[test]
    fn run_is_ranked_by_score_then_docid_descending() {
        let run = parse_run_bytes(
            b"1 Q0 a 1 1.0 t\n1 Q0 c 2 2.0 t\n1 Q0 b 3 2.0 t\n1 Q0 B 4 2 t\n",
            "r",
        )
        .expect("parses");
        let q = run.query("1").expect("query 1");
        let order: Vec<&str> = q.docs().iter().map(|d| &*d.docid).collect();
        // 2.0 ties: "c" > "b" > "B" byte-wise, so c, b, B; then a.
        assert_eq!(order, ["c", "b", "B", "a"]);
        assert_eq!(run.run_id(), Some("t"));
    }

    #[test]
    fn queries_sort_bytewise_like_strcmp() {
        let run = parse_run_bytes(
            b"9 Q0 a 1 1 t\n10 Q0 a 1 1 t\nb Q0 a 1 1 t\nB Q0 a 1 1 t\n",
            "r",
        )
        .expect("parses");
        let qids: Vec<&str> = run.queries().iter().map(RunQuery::qid).collect();
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
    }

    #[test]
    fn run_accepts_blank_lines_extra_columns_crlf_and_no_final_newline() {
        let run = parse_run_bytes(b"\n1 Q0 a 1 1 t extra more\r\n  \n1\tQ0\tb\t2\t0.5\tt", "r")
            .expect("parses");
        assert_eq!(run.query("1").map(|q| q.docs().len()), Some(2));
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
        let err = Qrels::from_rows([("1", "a b", 1)]).unwrap_err();
        assert!(matches!(err, TrecError::BadField { field: "docid", .. }));
        let err = Run::from_rows([("1", "a", f64::NAN)]).unwrap_err();
        assert!(matches!(err, TrecError::BadScore { .. }));
    }
}
