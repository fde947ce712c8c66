//! Writing qrels and run files from in-memory rows (for exporting a harness sweep).

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use crate::error::{Result, TrecError};
use crate::input::check_field;

fn io_error(path: &Path) -> impl Fn(std::io::Error) -> TrecError + '_ {
    move |source| TrecError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Writes `(qid, docid, rel)` rows as a qrels file, one `qid 0 docid rel` line each, in the
/// given order. Ids must be non-empty and free of whitespace. Rows are not checked for
/// duplicates ([`crate::Qrels::from_rows`] does that).
pub fn write_qrels<I, Q, D>(path: impl AsRef<Path>, rows: I) -> Result<()>
where
    I: IntoIterator<Item = (Q, D, i64)>,
    Q: AsRef<str>,
    D: AsRef<str>,
{
    let path = path.as_ref();
    let file = File::create(path).map_err(io_error(path))?;
    let mut out = BufWriter::new(file);
    write_qrels_to(&mut out, rows).map_err(|e| attach_path(e, path))?;
    out.flush().map_err(io_error(path))
}

/// [`write_qrels`] to any writer (I/O errors are reported with the path `<writer>`).
pub fn write_qrels_to<W, I, Q, D>(mut out: W, rows: I) -> Result<()>
where
    W: Write,
    I: IntoIterator<Item = (Q, D, i64)>,
    Q: AsRef<str>,
    D: AsRef<str>,
{
    let writer = Path::new("<writer>");
    for (i, (qid, docid, rel)) in rows.into_iter().enumerate() {
        let (qid, docid) = (qid.as_ref(), docid.as_ref());
        check_field(i + 1, "qid", qid)?;
        check_field(i + 1, "docid", docid)?;
        writeln!(out, "{qid} 0 {docid} {rel}").map_err(io_error(writer))?;
    }
    Ok(())
}

/// Writes `(qid, docid, rank, score, tag)` rows as a run file, one `qid Q0 docid rank score
/// tag` line each, in the given order. Scores are written in Rust's shortest round-trip form,
/// so parsing the file back ranks exactly as the scores did. Ids and tag must be non-empty and
/// free of whitespace; scores must be finite.
pub fn write_run<I, Q, D, T>(path: impl AsRef<Path>, rows: I) -> Result<()>
where
    I: IntoIterator<Item = (Q, D, usize, f64, T)>,
    Q: AsRef<str>,
    D: AsRef<str>,
    T: AsRef<str>,
{
    let path = path.as_ref();
    let file = File::create(path).map_err(io_error(path))?;
    let mut out = BufWriter::new(file);
    write_run_to(&mut out, rows).map_err(|e| attach_path(e, path))?;
    out.flush().map_err(io_error(path))
}

/// [`write_run`] to any writer (I/O errors are reported with the path `<writer>`).
pub fn write_run_to<W, I, Q, D, T>(mut out: W, rows: I) -> Result<()>
where
    W: Write,
    I: IntoIterator<Item = (Q, D, usize, f64, T)>,
    Q: AsRef<str>,
    D: AsRef<str>,
    T: AsRef<str>,
{
    let writer = Path::new("<writer>");
    for (i, (qid, docid, rank, score, tag)) in rows.into_iter().enumerate() {
        let (qid, docid, tag) = (qid.as_ref(), docid.as_ref(), tag.as_ref());
        check_field(i + 1, "qid", qid)?;
        check_field(i + 1, "docid", docid)?;
        check_field(i + 1, "tag", tag)?;
        if !score.is_finite() {
            return Err(TrecError::NonFiniteScore {
                row: i + 1,
                value: score,
            });
        }
        writeln!(out, "{qid} Q0 {docid} {rank} {score} {tag}").map_err(io_error(writer))?;
    }
    Ok(())
}

/// Replaces the `<writer>` placeholder of an I/O error with the real path.
fn attach_path(err: TrecError, path: &Path) -> TrecError {
    match err {
        TrecError::Io { source, .. } => TrecError::Io {
            path: path.to_path_buf(),
            source,
        },
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::{parse_qrels_bytes, parse_run_bytes};

    #[test]
    fn round_trips() {
        let mut q = Vec::new();
        write_qrels_to(&mut q, [("q1", "d1", 2), ("q1", "d2", 0), ("q2", "d1", -1)])
            .expect("writes");
        assert_eq!(q, b"q1 0 d1 2\nq1 0 d2 0\nq2 0 d1 -1\n");
        let qrels = parse_qrels_bytes(&q, "q").expect("parses");
        assert_eq!(qrels.query("q2").and_then(|x| x.rel("d1")), Some(-1));

        let scores = [0.1 + 0.2, 1e-300, -3.5, 12345678.9];
        let rows: Vec<_> = scores
            .iter()
            .enumerate()
            .map(|(i, &s)| ("q1", format!("d{i}"), i + 1, s, "sweep"))
            .collect();
        let mut r = Vec::new();
        write_run_to(&mut r, rows).expect("writes");
        let run = parse_run_bytes(&r, "r").expect("parses");
        let mut back: Vec<f64> = run
            .query("q1")
            .map(|q| q.docs().iter().map(|d| d.score).collect())
            .unwrap_or_default();
        back.sort_by(f64::total_cmp);
        let mut want = scores.to_vec();
        want.sort_by(f64::total_cmp);
        assert_eq!(back, want);
        assert_eq!(run.run_id(), Some("sweep"));
    }

    #[test]
    fn rejects_unwritable_rows() {
        let mut sink = Vec::new();
        let err = write_run_to(&mut sink, [("q", "d", 1, f64::INFINITY, "t")]).unwrap_err();
        assert!(matches!(err, TrecError::NonFiniteScore { row: 1, .. }));
        let err = write_run_to(&mut sink, [("q", "d", 1, 1.0, "")]).unwrap_err();
        assert!(matches!(err, TrecError::BadField { field: "tag", .. }));
        let err = write_qrels_to(&mut sink, [("q\t", "d", 1)]).unwrap_err();
        assert!(matches!(err, TrecError::BadField { field: "qid", .. }));
    }
}
