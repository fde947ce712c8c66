//! Evaluation and trec_eval's output format.

use std::fmt::Write as _;

use crate::error::{Result, TrecError};
use crate::input::{Qrels, QrelsQuery, Run, RunQuery};
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

    /// The evaluated queries (in both the run and the qrels), in trec_eval's order.
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
    /// `printf("%-22s\t%s\t%6.4f\n", name, qid, value)`. Queries that only `complete` brought in
    /// get no per-query lines, as in trec_eval 9.0.x.
    pub fn render(&self, per_query: bool) -> String {
        let mut out = String::new();
        let mut line = |name: &str, qid: &str, value: f64| {
            // `{:6.4}` rounds the exact binary value half-to-even, like glibc's printf.
            let _ = writeln!(out, "{name:<22}\t{qid}\t{value:6.4}");
        };
        let names: Vec<String> = self.measures.iter().map(|m| m.name()).collect();
        if per_query {
            for q in &self.queries {
                for (name, &value) in names.iter().zip(&q.values) {
                    line(name, &q.qid, value);
                }
            }
        }
        for (name, &value) in names.iter().zip(&self.averages) {
            line(name, "all", value);
        }
        out
    }
}

/// Evaluates `run` against `qrels` as trec_eval does:
///
/// - a query is evaluated when it is in the run and has at least one qrels line (relevant or
///   not); run queries without qrels are ignored;
/// - each query's documents are ranked by score descending, ties by docid descending;
/// - relevant means rel >= 1; unjudged documents are non-relevant;
/// - `all` is the mean over the evaluated queries, or with `complete` (trec_eval's `-c`) the
///   sum over them divided by the number of queries in the qrels (a query without results
///   scores 0 on every measure here).
///
/// `measures` may be in any order and hold duplicates; the output follows trec_eval's order.
/// Errors: no measure, or no query in both files (trec_eval exits 7 then, even with `-c`).
pub fn evaluate(
    qrels: &Qrels,
    run: &Run,
    measures: &[Measure],
    complete: bool,
) -> Result<Evaluation> {
    let measures = canonical(measures);
    if measures.is_empty() {
        return Err(TrecError::NoMeasures);
    }
    let depth = measures.iter().map(|m| m.cutoff()).max().unwrap_or(0);
    let mut scratch = Scratch::default();
    let mut queries = Vec::new();
    let mut sums = vec![0.0_f64; measures.len()];
    for rq in run.queries() {
        let Some(qq) = qrels.query(rq.qid()) else {
            continue;
        };
        scratch.fill(rq, qq, depth);
        let values: Vec<f64> = measures.iter().map(|&m| scratch.value(m, qq)).collect();
        for (sum, v) in sums.iter_mut().zip(&values) {
            *sum += v;
        }
        queries.push(QueryScores {
            qid: rq.qid().to_string(),
            values,
        });
    }
    if queries.is_empty() {
        return Err(TrecError::NoQueries);
    }
    let num_averaged = if complete {
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
}

/// trec_eval's discount for 0-based position i: log2(i + 2), computed as it computes it.
fn discount(i: usize) -> f64 {
    ((i + 2) as f64).log2()
}

impl Scratch {
    fn fill(&mut self, rq: &RunQuery, qq: &QrelsQuery, depth: usize) {
        self.dcg.clear();
        self.ideal.clear();
        self.rel_count.clear();
        self.dcg.push(0.0);
        self.ideal.push(0.0);
        self.rel_count.push(0);
        let (mut dcg, mut count) = (0.0_f64, 0_usize);
        for (i, doc) in rq.docs().iter().take(depth).enumerate() {
            let rel = qq.rel(&doc.docid).unwrap_or(-1);
            if rel > 0 {
                // Same expression and order as m_ndcg_cut.c: sum += gain / log2(i + 2).
                dcg += rel as f64 / discount(i);
            }
            if rel >= 1 {
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

    fn value(&self, measure: Measure, qq: &QrelsQuery) -> f64 {
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

    #[test]
    fn averaging_rules() {
        let qrels = "1 0 a 1\n2 0 a 0\n3 0 a 1\n";
        let run = "1 Q0 a 1 1 t\n2 Q0 a 1 1 t\n4 Q0 a 1 1 t\n";
        let m = [Measure::Success(1)];
        // Default: queries 1 and 2 (4 has no qrels, 3 no results).
        let e = eval(qrels, run, &m, false);
        assert_eq!(e.num_averaged(), 2);
        assert_eq!(e.averages(), [0.5]);
        // -c: divide by the 3 qrels queries.
        let e = eval(qrels, run, &m, true);
        assert_eq!(e.num_averaged(), 3);
        assert_eq!(e.averages(), [1.0 / 3.0]);
        assert_eq!(e.queries().len(), 2);
    }

    #[test]
    fn no_overlap_is_an_error() {
        let q = parse_qrels_bytes(b"1 0 a 1\n", "q").expect("qrels");
        let r = parse_run_bytes(b"2 Q0 a 1 1 t\n", "r").expect("run");
        assert!(matches!(
            evaluate(&q, &r, &[Measure::Success(1)], true),
            Err(TrecError::NoQueries)
        ));
        assert!(matches!(
            evaluate(&q, &r, &[], false),
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
    fn rounding_is_half_even_on_exact_ties_like_printf() {
        // 1/32 = 0.03125 exactly: glibc prints 0.0312; 3/32 = 0.09375 prints 0.0938.
        assert_eq!(format!("{:6.4}", 0.03125), "0.0312");
        assert_eq!(format!("{:6.4}", 0.09375), "0.0938");
        assert_eq!(format!("{:6.4}", 1.0), "1.0000");
    }
}
