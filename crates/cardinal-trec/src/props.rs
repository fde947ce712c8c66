//! Property tests of the parsers: they never panic on arbitrary bytes, and on TREC-like input
//! (valid or not) they agree with a plain line-by-line reference parser, whatever the number of
//! chunks the run is split into.

use std::collections::{BTreeMap, HashMap};

use proptest::prelude::*;

use crate::error::TrecError;
use crate::input::{build_run_in, parse_qrels_bytes, Run};
use crate::store::{is_c_space, Bytes};
use crate::{evaluate_with, EvalOptions, Measure};

/// The reference: lines split on '\n', fields on C spaces, std's number parsers; errors in the
/// documented order (first malformed line; no data; the last tag; the first line that repeats
/// an earlier docid of its query).
type RefRun = (BTreeMap<String, Vec<(String, f64)>>, String);

fn fields(line: &[u8]) -> Vec<&[u8]> {
    line.split(|&b| is_c_space(b))
        .filter(|f| !f.is_empty())
        .collect()
}

fn lines(data: &[u8]) -> Vec<&[u8]> {
    if data.is_empty() {
        return Vec::new();
    }
    let body = data.strip_suffix(b"\n").unwrap_or(data);
    body.split(|&b| b == b'\n').collect()
}

fn reference_run(data: &[u8]) -> Result<RefRun, String> {
    let name = "r".to_string();
    let mut rows = Vec::new();
    let mut last_tag: Option<(&[u8], usize)> = None;
    for (i, line) in lines(data).into_iter().enumerate() {
        let line_no = i + 1;
        let f = fields(line);
        if f.is_empty() {
            continue;
        }
        if f.len() < 6 {
            return Err(TrecError::Columns {
                source_name: name,
                line: line_no,
                expected: "6 (or more)",
                found: f.len(),
            }
            .to_string());
        }
        let utf8 = |b: &[u8]| std::str::from_utf8(b).map(str::to_string);
        let (Ok(qid), Ok(docid), Ok(score)) = (utf8(f[0]), utf8(f[2]), utf8(f[4])) else {
            return Err(TrecError::NotUtf8 {
                source_name: name,
                line: line_no,
            }
            .to_string());
        };
        let score = match score.parse::<f64>() {
            Ok(s) if !s.is_nan() => s,
            _ => {
                return Err(TrecError::BadScore {
                    source_name: name,
                    line: line_no,
                    value: score,
                }
                .to_string())
            }
        };
        last_tag = Some((f[5], line_no));
        rows.push((line_no, qid, docid, score));
    }
    let Some((tag, tag_line)) = last_tag else {
        return Err(TrecError::Empty {
            source_name: name,
            what: "run",
        }
        .to_string());
    };
    let Ok(run_id) = std::str::from_utf8(tag) else {
        return Err(TrecError::NotUtf8 {
            source_name: name,
            line: tag_line,
        }
        .to_string());
    };
    let mut seen: HashMap<(String, String), usize> = HashMap::new();
    let mut queries: BTreeMap<String, Vec<(String, f64)>> = BTreeMap::new();
    for (line, qid, docid, score) in rows {
        if let Some(&first_line) = seen.get(&(qid.clone(), docid.clone())) {
            return Err(TrecError::DuplicateDoc {
                source_name: name,
                line,
                first_line,
                qid,
                docid,
            }
            .to_string());
        }
        seen.insert((qid.clone(), docid.clone()), line);
        queries.entry(qid).or_default().push((docid, score));
    }
    for docs in queries.values_mut() {
        // trec_eval's order; -0.0 == 0.0.
        docs.sort_by(|a, b| {
            b.1.partial_cmp(&a.1)
                .unwrap_or(std::cmp::Ordering::Equal)
                .then_with(|| b.0.cmp(&a.0))
        });
    }
    Ok((queries, run_id.to_string()))
}

fn ours_run(data: &[u8], chunks: usize) -> Result<RefRun, String> {
    let run: Run =
        build_run_in(Bytes::Owned(data.to_vec()), "r", chunks).map_err(|e| e.to_string())?;
    let queries = run
        .queries()
        .map(|q| {
            let docs = q
                .ranked()
                .iter()
                .map(|d| (d.docid.to_string(), d.score))
                .collect();
            (q.qid().to_string(), docs)
        })
        .collect();
    Ok((queries, run.run_id().unwrap_or_default().to_string()))
}

type RefQrels = BTreeMap<String, BTreeMap<String, i64>>;

fn reference_qrels(data: &[u8]) -> Result<RefQrels, String> {
    let name = "q".to_string();
    let mut out: RefQrels = BTreeMap::new();
    let mut lines_of: HashMap<(String, String), usize> = HashMap::new();
    let all = lines(data);
    if all.is_empty() {
        return Err(TrecError::Empty {
            source_name: name,
            what: "qrels",
        }
        .to_string());
    }
    for (i, line) in all.into_iter().enumerate() {
        let line_no = i + 1;
        let f = fields(line);
        if f.len() != 4 {
            return Err(TrecError::Columns {
                source_name: name,
                line: line_no,
                expected: "4",
                found: f.len(),
            }
            .to_string());
        }
        let utf8 = |b: &[u8]| std::str::from_utf8(b).map(str::to_string);
        let (Ok(qid), Ok(docid), Ok(rel)) = (utf8(f[0]), utf8(f[2]), utf8(f[3])) else {
            return Err(TrecError::NotUtf8 {
                source_name: name,
                line: line_no,
            }
            .to_string());
        };
        let Ok(rel_value) = rel.parse::<i64>() else {
            return Err(TrecError::BadRelevance {
                source_name: name,
                line: line_no,
                value: rel,
            }
            .to_string());
        };
        if let Some(&first_line) = lines_of.get(&(qid.clone(), docid.clone())) {
            return Err(TrecError::DuplicateDoc {
                source_name: name,
                line: line_no,
                first_line,
                qid,
                docid,
            }
            .to_string());
        }
        lines_of.insert((qid.clone(), docid.clone()), line_no);
        out.entry(qid).or_default().insert(docid, rel_value);
    }
    Ok(out)
}

fn ours_qrels(data: &[u8]) -> Result<RefQrels, String> {
    let qrels = parse_qrels_bytes(data, "q").map_err(|e| e.to_string())?;
    let mut out: RefQrels = BTreeMap::new();
    let (_, reference) = (0, reference_qrels(data)?);
    // Look every reference judgement up in ours, and check the counts match.
    for (qid, docs) in &reference {
        let q = qrels.query(qid).ok_or("query missing")?;
        if q.num_judged() != docs.len() {
            return Err(format!(
                "{qid}: {} judged, want {}",
                q.num_judged(),
                docs.len()
            ));
        }
        let entry = out.entry(qid.clone()).or_default();
        for docid in docs.keys() {
            entry.insert(docid.clone(), q.rel(docid).ok_or("judgement missing")?);
        }
    }
    if qrels.qids().collect::<Vec<_>>() != reference.keys().collect::<Vec<_>>() {
        return Err("qids differ".to_string());
    }
    Ok(out)
}

/// Bytes that make TREC-like lines interesting: separators, digits, signs, dots, exponents,
/// invalid and multi-byte UTF-8, NUL.
fn trec_byte() -> impl Strategy<Value = u8> {
    prop_oneof![
        4 => Just(b' '),
        2 => Just(b'\t'),
        3 => Just(b'\n'),
        1 => Just(b'\r'),
        1 => Just(0x0b),
        1 => Just(0x0c),
        4 => proptest::sample::select(b"0123456789".to_vec()),
        1 => proptest::sample::select(b".-+eEQqadinf".to_vec()),
        1 => proptest::sample::select(vec![0xff, 0xc3, 0xa9, 0x00, 0x1f, 0x80]),
    ]
}

fn score_text() -> impl Strategy<Value = String> {
    prop_oneof![
        20 => (0_u32..100).prop_map(|n| n.to_string()),
        60 => (0_u32..10_000, 0_u32..4).prop_map(|(n, d)| {
            let s = format!("{n:0>width$}", width = d as usize + 1);
            let (a, b) = s.split_at(s.len() - d as usize);
            if d == 0 {
                a.to_string()
            } else {
                format!("{a}.{b}")
            }
        }),
        1 => proptest::sample::select(vec![
            "-0", "0.0", "-1.5", "1e-3", "+2", ".5", "12345678901234567890.5", "inf",
            "0.30000000000000004", "9007199254740993",
        ])
        .prop_map(str::to_string),
        // Not numbers: an error on the line.
        1 => proptest::sample::select(vec!["NaN", "x", "1.2.3", "-"]).prop_map(str::to_string),
    ]
}

fn sep() -> impl Strategy<Value = &'static str> {
    proptest::sample::select(vec![" ", " ", " ", "\t", "  ", " \t", "\x0b"])
}

/// One run line: mostly valid, sometimes short, blank, with extra columns or CRLF.
fn run_line() -> impl Strategy<Value = String> {
    (
        proptest::sample::select(vec!["1", "2", "10", "q1", "Q1", "\u{e9}"]),
        0_u32..400,
        score_text(),
        proptest::collection::vec(sep(), 6),
        0_u32..200,
    )
        .prop_map(|(qid, doc, score, s, shape)| match shape {
            0..=4 => String::new(),
            5 => format!("{qid}{}Q0{}d{doc}{}1{}{score}", s[0], s[1], s[2], s[3]),
            6..=20 => format!(
                "{qid}{}Q0{}d{doc}{}1{}{score}{}t{}extra",
                s[0], s[1], s[2], s[3], s[4], s[5]
            ),
            21..=30 => format!("{qid} Q0 d{doc} 1 {score} t\r"),
            31..=40 => format!("{}{qid} Q0 d{doc} 1 {score} t{}", s[0], s[1]),
            _ => format!(
                "{qid}{}Q0{}d{doc}{}1{}{score}{}t{shape}",
                s[0], s[1], s[2], s[3], s[4]
            ),
        })
}

fn qrels_line() -> impl Strategy<Value = String> {
    (
        proptest::sample::select(vec!["1", "2", "10", "q1"]),
        0_u32..400,
        prop_oneof![
            40 => proptest::sample::select(vec!["0", "1", "2", "3", "-1", "+1"]),
            1 => proptest::sample::select(vec!["1.5", "x", ""]),
        ],
        0_u32..200,
    )
        .prop_map(|(qid, doc, rel, shape)| match shape {
            0 => String::new(),
            1 => format!("{qid} 0 d{doc}"),
            2 => format!("{qid} 0 d{doc} {rel} extra"),
            3..=20 => format!("{qid}\t0\td{doc}\t{rel}\r"),
            _ => format!("{qid} 0 d{doc} {rel}"),
        })
}

fn join(lines: Vec<String>, final_newline: bool) -> Vec<u8> {
    let mut text = lines.join("\n");
    if final_newline && !text.is_empty() {
        text.push('\n');
    }
    text.into_bytes()
}

const MEASURES: [Measure; 4] = [
    Measure::NdcgCut(3),
    Measure::Recall(2),
    Measure::Success(1),
    Measure::NdcgCut(1000),
];

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn never_panics_on_arbitrary_bytes(
        bytes in prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..300),
            proptest::collection::vec(trec_byte(), 0..300),
        ],
        chunks in 1_usize..5,
    ) {
        let run = build_run_in(Bytes::Owned(bytes.clone()), "r", chunks);
        let qrels = parse_qrels_bytes(&bytes, "q");
        if let (Ok(run), Ok(qrels)) = (run, qrels) {
            for complete in [false, true] {
                for trec_eval_9 in [false, true] {
                    let o = EvalOptions { complete, trec_eval_9 };
                    if let Ok(e) = evaluate_with(&qrels, &run, &MEASURES, &o) {
                        let _ = e.render(true);
                    }
                }
            }
        }
    }

    #[test]
    fn run_parser_agrees_with_the_reference(
        lines in proptest::collection::vec(run_line(), 0..40),
        final_newline in any::<bool>(),
        chunks in 1_usize..6,
    ) {
        let data = join(lines, final_newline);
        prop_assert_eq!(ours_run(&data, chunks), reference_run(&data));
    }

    #[test]
    fn qrels_parser_agrees_with_the_reference(
        lines in proptest::collection::vec(qrels_line(), 0..40),
        final_newline in any::<bool>(),
    ) {
        let data = join(lines, final_newline);
        prop_assert_eq!(ours_qrels(&data), reference_qrels(&data));
    }

    #[test]
    fn arbitrary_bytes_agree_with_the_reference(
        bytes in proptest::collection::vec(trec_byte(), 0..200),
        chunks in 1_usize..4,
    ) {
        prop_assert_eq!(ours_run(&bytes, chunks), reference_run(&bytes));
        prop_assert_eq!(ours_qrels(&bytes), reference_qrels(&bytes));
    }
}
