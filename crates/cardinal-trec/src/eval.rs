//! Evaluation and trec_eval's output format.

use std::fmt::Write as _;

use crate::error::{Result, TrecError};
use crate::input::{parallel_map, relevant_ranks, threads_for, Qrels, QrelsQuery, RankWork, Run};
use crate::measure::{canonical, Measure};

/// Scores of one evaluated query, one value per measure of [`Evaluation::measures`].
#[derive(Debug, Clone, PartialEq)]
pub struct QueryScores {
    /// The query id.
    pub qid: String,
    /// Values in the order of [`Evaluation::measures`].
    pub values: Vec<f64>,
}

/// The result of [`evaluate`]: per-query values and the `all` averages.
#[derive(Debug, Clone, PartialEq)]
pub struct Evaluation {
    measures: Vec<Measure>,
    queries: Vec<QueryScores>,
    averages: Vec<f64>,
    num_averaged: usize,
}

impl Evaluation {
    /// The measures, in trec_eval's output order.
    pub fn measures(&self) -> &[Measure] {
        &self.measures
    }

    /// The evaluated queries, in trec_eval's order: those in both the run and the qrels, and
    /// with `complete` under trec_eval 10.0 (the default) also the qrels queries missing from
    /// the run (see [`EvalOptions::trec_eval_9`]).
    pub fn queries(&self) -> &[QueryScores] {
        &self.queries
    }

    /// The `all` values, in the order of [`Evaluation::measures`].
    pub fn averages(&self) -> &[f64] {
        &self.averages
    }

    /// The `all` value of one measure, if it was evaluated.
    pub fn average(&self, measure: Measure) -> Option<f64> {
        let i = self.measures.iter().position(|&m| m == measure)?;
        self.averages.get(i).copied()
    }

    /// The number of queries the averages divide by (trec_eval's `num_q`): the evaluated
    /// queries, or with `complete` every query of the qrels.
    pub fn num_averaged(&self) -> usize {
        self.num_averaged
    }

    /// trec_eval's output: with `per_query` (its `-q`), every evaluated query's lines first
    /// (queries in trec_eval's order, measures in its order), then the `all` lines. Each line is
    /// `printf("%-22s\t%s\t%6.4f\n", name, qid, value)`. Whether qrels queries missing from the
    /// run get per-query lines (10.0 with `-c`) or not (9.0.x) was decided by
    /// [`EvalOptions::trec_eval_9`] at evaluation.
    pub fn render(&self, per_query: bool) -> String {
        // `{:6.4}` rounds the exact binary value half-to-even, like glibc's printf.
        fn line(out: &mut String, name: &str, qid: &str, value: f64) {
            let _ = writeln!(out, "{name:<22}\t{qid}\t{value:6.4}");
        }
        let names: Vec<String> = self.measures.iter().map(|m| m.name()).collect();
        let mut out = String::new();
        if per_query {
            // Formatting is most of the cost: parts of the queries on parallel threads.
            let threads = threads_for(self.queries.len() * names.len() * 64);
            let parts = parallel_map(&self.queries, threads, |part| {
                let mut text = String::with_capacity(part.len() * names.len() * 40);
                for q in part {
                    for (name, &value) in names.iter().zip(&q.values) {
                        line(&mut text, name, &q.qid, value);
                    }
                }
                text
            });
            out.reserve(parts.iter().map(String::len).sum::<usize>() + names.len() * 40);
            for part in parts {
                out.push_str(&part);
            }
        }
        for (name, &value) in names.iter().zip(&self.averages) {
            line(&mut out, name, "all", value);
        }
        out
    }
}

/// How to evaluate: trec_eval's `-c`, and which trec_eval release to follow.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EvalOptions {
    /// trec_eval's `-c` ("average over complete set of queries"): `all` divides by the number
    /// of queries in the qrels, and a qrels query without results counts as scoring 0. With
    /// trec_eval 10.0 (the default) such a query is also evaluated and printed by `-q`; see
    /// [`EvalOptions::trec_eval_9`].
    pub complete: bool,
    /// Behave as trec_eval 9.0.x instead of trec_eval 10.0 (the CLI's `--trec-eval-9`). The
    /// two differ only in qrels queries that have no line in the run:
    ///
    /// - **10.0 (default, `false`)**: evaluation runs over the qrels queries. With `complete`,
    ///   a query missing from the run is scored on a stand-in ranking (10.0's one document
    ///   `ceci_nest_pas_un_docno` with score 1, i.e. 0 on every measure unless the qrels judge
    ///   that docid), gets per-query lines with `-q`, and counts as evaluated; so a run sharing
    ///   no query with the qrels prints zeros instead of failing. Without `complete`, such a
    ///   query is an error ([`TrecError::MissingRunQuery`]; 10.0 exits 4 with "result qid …
    ///   not found in qrels"), where 9.0.x exited 0.
    /// - **9.0.x (`true`)**: evaluation runs over the run queries that have qrels; a qrels
    ///   query missing from the run is skipped (with `complete` it still counts in the
    ///   divisor), gets no `-q` lines, and no query in common is [`TrecError::NoQueries`]
    ///   (trec_eval exit 7) with or without `complete`.
    pub trec_eval_9: bool,
}

/// The stand-in ranking trec_eval 10.0 evaluates for a `-c` query missing from the run.
const BOGUS_DOCNO: &[u8] = b"ceci_nest_pas_un_docno";

/// [`evaluate_with`] with `complete` and the default (trec_eval 10.0) behaviour.
pub fn evaluate(
    qrels: &Qrels,
    run: &Run,
    measures: &[Measure],
    complete: bool,
) -> Result<Evaluation> {
    evaluate_with(
        qrels,
        run,
        measures,
        &EvalOptions {
            complete,
            ..EvalOptions::default()
        },
    )
}

/// Evaluates `run` against `qrels` as trec_eval does:
///
/// - the evaluated queries: see [`EvalOptions::trec_eval_9`] (in both files, plus with
///   `complete` and 10.0 the qrels queries missing from the run); run queries without qrels
///   are ignored;
/// - each query's documents are ranked by score descending, ties by docid descending;
/// - relevant means rel >= 1; unjudged documents are non-relevant;
/// - `all` is the mean over the evaluated queries, or with `complete` (trec_eval's `-c`) the
///   sum over them divided by the number of queries in the qrels.
///
/// `measures` may be in any order and hold duplicates; the output follows trec_eval's order.
/// Queries are scored in parallel; the sums are added in trec_eval's order, so the averages
/// are the same to the bit. Errors: no measure; no query in common (9.0.x); a qrels query
/// missing from the run without `complete` (10.0).
pub fn evaluate_with(
    qrels: &Qrels,
    run: &Run,
    measures: &[Measure],
    options: &EvalOptions,
) -> Result<Evaluation> {
    let measures = canonical(measures);
    if measures.is_empty() {
        return Err(TrecError::NoMeasures);
    }
    let depth = measures.iter().map(|m| m.cutoff()).max().unwrap_or(0);
    // (qrels query, run query or None for 10.0's stand-in ranking), in qid order.
    let mut pairs: Vec<(usize, Option<usize>)> = Vec::new();
    if options.trec_eval_9 {
        for (ri, rq) in run.queries().enumerate() {
            if let Some(qi) = qrels.index_of(rq.qid()) {
                pairs.push((qi, Some(ri)));
            }
        }
    } else {
        for (qi, qid) in qrels.qids().enumerate() {
            match run.index_of(qid) {
                Some(ri) => pairs.push((qi, Some(ri))),
                None if options.complete => pairs.push((qi, None)),
                None => {
                    return Err(TrecError::MissingRunQuery {
                        qid: qid.to_string(),
                    })
                }
            }
        }
    }
    if pairs.is_empty() {
        return Err(TrecError::NoQueries);
    }
    let work: usize = pairs
        .iter()
        .filter_map(|&(_, ri)| ri.and_then(|ri| run.query_at(ri)))
        .map(|rq| rq.len())
        .sum();
    let parts = parallel_map(&pairs, threads_for(work * 16), |part| {
        let mut scratch = Scratch::default();
        let mut values = Vec::with_capacity(part.len() * measures.len());
        for &(qi, ri) in part {
            let Some(qq) = qrels.query_at(qi) else {
                continue;
            };
            let num_ret = match ri.and_then(|ri| run.query_at(ri)) {
                Some(rq) => {
                    let gain = |docid: &[u8]| qq.rel_bytes(docid).unwrap_or(-1);
                    relevant_ranks(
                        rq.bytes(),
                        rq.docs(),
                        gain,
                        &mut scratch.work,
                        &mut scratch.relevant,
                    );
                    rq.len()
                }
                None => {
                    scratch.relevant.clear();
                    let rel = qq.rel_bytes(BOGUS_DOCNO).unwrap_or(-1);
                    if rel > 0 {
                        scratch.relevant.push((0, rel));
                    }
                    1
                }
            };
            scratch.fill(num_ret, &qq, depth);
            values.extend(measures.iter().map(|&m| scratch.value(m, &qq)));
        }
        values
    });
    let mut queries = Vec::with_capacity(pairs.len());
    let mut sums = vec![0.0_f64; measures.len()];
    let all_values = parts.into_iter().flatten().collect::<Vec<f64>>();
    for (&(qi, _), values) in pairs.iter().zip(all_values.chunks(measures.len())) {
        for (sum, v) in sums.iter_mut().zip(values) {
            *sum += v;
        }
        queries.push(QueryScores {
            qid: qrels
                .query_at(qi)
                .map(|q| q.qid().to_string())
                .unwrap_or_default(),
            values: values.to_vec(),
        });
    }
    let num_averaged = if options.complete {
        qrels.num_queries()
    } else {
        queries.len()
    };
    let averages = sums.iter().map(|s| s / num_averaged as f64).collect();
    Ok(Evaluation {
        measures,
        queries,
        averages,
        num_averaged,
    })
}

/// Prefix sums of one query's ranking, up to the deepest cut-off.
#[derive(Default)]
struct Scratch {
    /// `dcg[i]`: DCG of the first i documents (`dcg[0] = 0`).
    dcg: Vec<f64>,
    /// `ideal[i]`: DCG of the first i documents of the ideal ranking.
    ideal: Vec<f64>,
    /// `rel_count[i]`: relevant documents among the first i.
    rel_count: Vec<usize>,
    /// `(rank, gain)` of the query's relevant retrieved documents, best first.
    relevant: Vec<(usize, i64)>,
    work: RankWork,
}

/// trec_eval's discount for 0-based position i: log2(i + 2), computed as it computes it.
fn discount(i: usize) -> f64 {
    ((i + 2) as f64).log2()
}

impl Scratch {
    /// Fills the prefix sums from `self.relevant` for a ranking of `num_ret` documents.
    fn fill(&mut self, num_ret: usize, qq: &QrelsQuery<'_>, depth: usize) {
        let len = num_ret.min(depth);
        self.dcg.clear();
        self.ideal.clear();
        self.rel_count.clear();
        self.dcg.push(0.0);
        self.ideal.push(0.0);
        self.rel_count.push(0);
        let (mut dcg, mut count) = (0.0_f64, 0_usize);
        let mut relevant = self.relevant.iter().peekable();
        for i in 0..len {
            if let Some(&(_, gain)) = relevant.next_if(|&&(rank, _)| rank == i) {
                // Same expression and order as m_ndcg_cut.c: sum += gain / log2(i + 2), over
                // the relevant documents in rank order (the others add nothing).
                dcg += gain as f64 / discount(i);
                count += 1;
            }
            self.dcg.push(dcg);
            self.rel_count.push(count);
        }
        let mut ideal = 0.0_f64;
        for (i, &gain) in qq.ideal_gains().iter().take(depth).enumerate() {
            ideal += gain as f64 / discount(i);
            self.ideal.push(ideal);
        }
    }

    /// Value at cut-off k: a cut-off deeper than the ranking takes the whole ranking
    /// ("nonrelevant docs fill in the rest").
    fn at<T: Copy + Default>(prefix: &[T], k: usize) -> T {
        let i = k.min(prefix.len().saturating_sub(1));
        prefix.get(i).copied().unwrap_or_default()
    }

    fn value(&self, measure: Measure, qq: &QrelsQuery<'_>) -> f64 {
        match measure {
            Measure::NdcgCut(k) => {
                let dcg = Self::at(&self.dcg, k);
                let ideal = Self::at(&self.ideal, k);
                if ideal > 0.0 {
                    dcg / ideal
                } else {
                    dcg
                }
            }
            Measure::Recall(k) => {
                if qq.num_rel() == 0 {
                    0.0
                } else {
                    Self::at(&self.rel_count, k) as f64 / qq.num_rel() as f64
                }
            }
            Measure::Success(k) => {
                if Self::at(&self.rel_count, k) > 0 {
                    1.0
                } else {
                    0.0
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::{parse_qrels_bytes, parse_run_bytes};

    fn eval(qrels: &str, run: &str, m: &[Measure], complete: bool) -> Evaluation {
        let q = parse_qrels_bytes(qrels.as_bytes(), "q").expect("qrels");
        let r = parse_run_bytes(run.as_bytes(), "r").expect("run");
        evaluate(&q, &r, m, complete).expect("evaluates")
    }

    #[test]
    fn graded_ndcg_matches_hand_computation() {
        // Ranking: d1 (rel 2), d2 (rel 0), d3 (rel 3); ideal: 3, 2.
        let e = eval(
            "1 0 d1 2\n1 0 d2 0\n1 0 d3 3\n",
            "1 Q0 d1 1 3 t\n1 Q0 d2 2 2 t\n1 Q0 d3 3 1 t\n",
            &[Measure::NdcgCut(1), Measure::NdcgCut(3)],
            false,
        );
        let dcg3 = 2.0 + 3.0 / 4f64.log2();
        let idcg3 = 3.0 + 2.0 / 3f64.log2();
        assert_eq!(e.average(Measure::NdcgCut(1)), Some(2.0 / 3.0));
        assert_eq!(e.average(Measure::NdcgCut(3)), Some(dcg3 / idcg3));
    }

    #[test]
    fn recall_success_and_deep_cutoffs() {
        let e = eval(
            "1 0 a 1\n1 0 b 1\n1 0 c 1\n1 0 z 1\n",
            "1 Q0 x 1 5 t\n1 Q0 a 2 4 t\n1 Q0 b 3 3 t\n",
            &[
                Measure::Recall(1),
                Measure::Recall(2),
                Measure::Recall(100),
                Measure::Success(1),
                Measure::Success(2),
                Measure::Success(100),
            ],
            false,
        );
        assert_eq!(e.averages(), [0.0, 0.25, 0.5, 0.0, 1.0, 1.0]);
    }

    fn eval_with(qrels: &str, run: &str, m: &[Measure], o: EvalOptions) -> Result<Evaluation> {
        let q = parse_qrels_bytes(qrels.as_bytes(), "q").expect("qrels");
        let r = parse_run_bytes(run.as_bytes(), "r").expect("run");
        evaluate_with(&q, &r, m, &o)
    }

    const V9: EvalOptions = EvalOptions {
        complete: false,
        trec_eval_9: true,
    };
    const V9_C: EvalOptions = EvalOptions {
        complete: true,
        trec_eval_9: true,
    };
    const V10: EvalOptions = EvalOptions {
        complete: false,
        trec_eval_9: false,
    };
    const V10_C: EvalOptions = EvalOptions {
        complete: true,
        trec_eval_9: false,
    };

    #[test]
    fn averaging_rules_of_trec_eval_9() {
        let qrels = "1 0 a 1\n2 0 a 0\n3 0 a 1\n";
        let run = "1 Q0 a 1 1 t\n2 Q0 a 1 1 t\n4 Q0 a 1 1 t\n";
        let m = [Measure::Success(1)];
        // Default: queries 1 and 2 (4 has no qrels, 3 no results).
        let e = eval_with(qrels, run, &m, V9).expect("evaluates");
        assert_eq!(e.num_averaged(), 2);
        assert_eq!(e.averages(), [0.5]);
        // -c: divide by the 3 qrels queries; query 3 gets no per-query values.
        let e = eval_with(qrels, run, &m, V9_C).expect("evaluates");
        assert_eq!(e.num_averaged(), 3);
        assert_eq!(e.averages(), [1.0 / 3.0]);
        assert_eq!(e.queries().len(), 2);
        assert!(!e.render(true).contains("\t3\t"));
    }

    #[test]
    fn missing_queries_under_trec_eval_10() {
        let qrels = "1 0 a 1\n2 0 a 0\n3 0 a 1\n";
        let run = "1 Q0 a 1 1 t\n2 Q0 a 1 1 t\n4 Q0 a 1 1 t\n";
        let m = [Measure::Success(1)];
        // Without -c, qrels query 3 missing from the run is an error (10.0 exits 4).
        let err = eval_with(qrels, run, &m, V10).unwrap_err();
        assert!(matches!(err, TrecError::MissingRunQuery { ref qid } if qid == "3"));
        // The default of `evaluate` is 10.0.
        let q = parse_qrels_bytes(qrels.as_bytes(), "q").expect("qrels");
        let r = parse_run_bytes(run.as_bytes(), "r").expect("run");
        assert!(matches!(
            evaluate(&q, &r, &m, false),
            Err(TrecError::MissingRunQuery { .. })
        ));
        // -c: query 3 is evaluated (zeros) and printed; the averages are 9.0.x's.
        let e = eval_with(qrels, run, &m, V10_C).expect("evaluates");
        assert_eq!(e.num_averaged(), 3);
        assert_eq!(e.averages(), [1.0 / 3.0]);
        let qids: Vec<&str> = e.queries().iter().map(|q| q.qid.as_str()).collect();
        assert_eq!(qids, ["1", "2", "3"]);
        assert_eq!(e.queries()[2].values, [0.0]);
        assert!(e
            .render(true)
            .contains("success_1             \t3\t0.0000\n"));
        // Everything present: both releases agree.
        let full = "1 Q0 a 1 1 t\n2 Q0 a 1 1 t\n3 Q0 b 1 1 t\n";
        for o in [V9, V10, V9_C, V10_C] {
            let e = eval_with(qrels, full, &m, o).expect("evaluates");
            assert_eq!(e.averages(), [1.0 / 3.0], "{o:?}");
        }
    }

    #[test]
    fn the_stand_in_ranking_is_trec_eval_10s() {
        // 10.0 scores a -c query missing from the run on the one document
        // `ceci_nest_pas_un_docno`: judged relevant, it counts.
        let qrels = "1 0 a 1\n2 0 ceci_nest_pas_un_docno 2\n";
        let run = "1 Q0 a 1 1 t\n";
        let m = [Measure::Success(1), Measure::NdcgCut(1)];
        let e = eval_with(qrels, run, &m, V10_C).expect("evaluates");
        assert_eq!(e.queries()[1].values, [1.0, 1.0]);
        let e = eval_with(qrels, run, &m, V9_C).expect("evaluates");
        assert_eq!(e.queries().len(), 1);
        assert_eq!(e.averages(), [0.5, 0.5]);
    }

    #[test]
    fn no_overlap() {
        let m = [Measure::Success(1)];
        let (qrels, run) = ("1 0 a 1\n", "2 Q0 a 1 1 t\n");
        for o in [V9, V9_C] {
            let err = eval_with(qrels, run, &m, o).unwrap_err();
            assert!(matches!(err, TrecError::NoQueries), "{o:?}");
        }
        let err = eval_with(qrels, run, &m, V10).unwrap_err();
        assert!(matches!(err, TrecError::MissingRunQuery { .. }));
        let e = eval_with(qrels, run, &m, V10_C).expect("10.0 -c prints zeros");
        assert_eq!(
            e.render(true),
            "success_1             \t1\t0.0000\nsuccess_1             \tall\t0.0000\n"
        );
        assert!(matches!(
            eval_with(qrels, run, &[], V9),
            Err(TrecError::NoMeasures)
        ));
    }

    #[test]
    fn render_format() {
        let e = eval(
            "1 0 a 1\n1 0 b 1\n",
            "1 Q0 a 1 1 t\n",
            &[Measure::Success(1), Measure::Recall(5)],
            false,
        );
        assert_eq!(
            e.render(true),
            "recall_5              \t1\t0.5000\nsuccess_1             \t1\t1.0000\n\
             recall_5              \tall\t0.5000\nsuccess_1             \tall\t1.0000\n"
        );
    }

    #[test]
    fn parallel_render_is_the_sequential_text() {
        let measures = canonical(&[
            Measure::NdcgCut(5),
            Measure::Recall(10),
            Measure::Success(1),
        ]);
        let queries: Vec<QueryScores> = (0..20_000)
            .map(|i| QueryScores {
                qid: format!("q{i:05}"),
                values: vec![i as f64 / 20_000.0, 0.03125, 1.0],
            })
            .collect();
        let e = Evaluation {
            measures: measures.clone(),
            queries: queries.clone(),
            averages: vec![0.5, 0.25, 0.125],
            num_averaged: queries.len(),
        };
        let mut want = String::new();
        for q in &queries {
            for (m, v) in measures.iter().zip(&q.values) {
                want.push_str(&format!("{:<22}\t{}\t{:6.4}\n", m.name(), q.qid, v));
            }
        }
        for (m, v) in measures.iter().zip(e.averages()) {
            want.push_str(&format!("{:<22}\tall\t{:6.4}\n", m.name(), v));
        }
        assert_eq!(e.render(true), want);
        assert!(e
            .render(false)
            .starts_with("recall_10             \tall\t0.5000\n"));
    }

    #[test]
    fn rounding_is_half_even_on_exact_ties_like_printf() {
        // 1/32 = 0.03125 exactly: glibc prints 0.0312; 3/32 = 0.09375 prints 0.0938.
        assert_eq!(format!("{:6.4}", 0.03125), "0.0312");
        assert_eq!(format!("{:6.4}", 0.09375), "0.0938");
        assert_eq!(format!("{:6.4}", 1.0), "1.0000");
    }
}
