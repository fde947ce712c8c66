//! Rendering an [`Aggregate`]: Markdown for `report.md` and a plain terminal table.
//!
//! Every mean is printed with its n and its confidence interval; every slice with its number of
//! cases; the ADR-0023 caveat ([`RECALL_CAVEAT`]) is always included. Means and intervals have 3
//! decimals, p-values 4. An interval shows as `—` when n < 2.

use std::fmt::Write as _;

use crate::aggregate::{Aggregate, Interval, LangDelta, Slice, SliceDim};

/// The ADR-0023 caveat printed with every report.
pub const RECALL_CAVEAT: &str =
    "recall@k is a conservative lower bound under disjunctive gold; hit@k is the primary success figure";

/// The interval as `[low, high]`, or `—` when there is none.
pub fn format_ci(ci: Option<Interval>) -> String {
    ci.map_or("—".to_string(), |c| {
        format!("[{:.3}, {:.3}]", c.low, c.high)
    })
}

/// A plain text table: columns left-aligned, separated by two spaces, a dashed rule under the
/// header, no trailing spaces. Widths count characters, not bytes.
pub fn text_table(header: &[&str], rows: &[Vec<String>]) -> String {
    let width = |s: &str| s.chars().count();
    let mut widths: Vec<usize> = header.iter().map(|h| width(h)).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            if let Some(w) = widths.get_mut(i) {
                *w = (*w).max(width(cell));
            }
        }
    }
    let line = |cells: &mut dyn Iterator<Item = &str>| {
        let mut out = String::new();
        for (i, (cell, w)) in cells.zip(&widths).enumerate() {
            if i > 0 {
                out.push_str("  ");
            }
            out.push_str(cell);
            out.extend(std::iter::repeat_n(' ', w - width(cell)));
        }
        let trimmed = out.trim_end().len();
        out.truncate(trimmed);
        out.push('\n');
        out
    };
    let mut out = line(&mut header.iter().copied());
    let rule: Vec<String> = widths.iter().map(|&w| "-".repeat(w)).collect();
    out.push_str(&line(&mut rule.iter().map(String::as_str)));
    for row in rows {
        out.push_str(&line(&mut row.iter().map(String::as_str)));
    }
    out
}

fn has_errors(agg: &Aggregate) -> bool {
    agg.slices.iter().any(|s| !s.errors.is_empty())
}

/// Rows (key, mean, ci, n[, errors]) of one slice, keys in order, including keys that only
/// have errors.
fn metric_rows(slice: &Slice, with_errors: bool) -> Vec<Vec<String>> {
    let keys: std::collections::BTreeSet<&String> =
        slice.metrics.keys().chain(slice.errors.keys()).collect();
    keys.into_iter()
        .map(|key| {
            let mut row = match slice.metrics.get(key) {
                Some(m) => vec![
                    key.clone(),
                    format!("{:.3}", m.mean),
                    format_ci(m.ci),
                    m.n.to_string(),
                ],
                None => vec![key.clone(), "—".into(), "—".into(), "0".into()],
            };
            if with_errors {
                row.push(slice.errors.get(key).copied().unwrap_or(0).to_string());
            }
            row
        })
        .collect()
}

fn slice_label(slice: &Slice) -> String {
    slice.value.clone().unwrap_or_else(|| slice.name.clone())
}

fn delta_row(d: &LangDelta) -> Vec<String> {
    vec![
        d.key.clone(),
        format!("{} vs {}", d.lang_a, d.lang_b),
        format!("{:+.3}", d.delta),
        format!("{:.3} (n={})", d.mean_a, d.n_a),
        format!("{:.3} (n={})", d.mean_b, d.n_b),
        format!("{:.4}", d.p_value),
        // ADR-0023 (C) presents language deltas as indicative; even past both thresholds the
        // label states the facts (uncorrected test) rather than claiming significance.
        if d.indicative {
            "indicative".to_string()
        } else {
            "p < alpha, n >= min".to_string()
        },
    ]
}

const DELTA_HEADER: [&str; 7] = [
    "key",
    "languages",
    "Δ mean",
    "mean a",
    "mean b",
    "p",
    "reading",
];

fn conf_pct(agg: &Aggregate) -> String {
    format!("{}%", agg.config.confidence * 100.0)
}

fn md_escape(s: &str) -> String {
    s.replace('|', "\\|")
}

fn md_table(header: &[&str], align_right: &[bool], rows: &[Vec<String>]) -> String {
    let mut out = format!("| {} |\n|", header.join(" | "));
    for &right in align_right {
        out.push_str(if right { " ---: |" } else { " --- |" });
    }
    out.push('\n');
    for row in rows {
        let cells: Vec<String> = row.iter().map(|c| md_escape(c)).collect();
        let _ = writeln!(out, "| {} |", cells.join(" | "));
    }
    out
}

/// The Markdown report section of an aggregate (for `report.md`).
pub fn render_markdown(agg: &Aggregate) -> String {
    let with_errors = has_errors(agg);
    let mut out = String::new();
    let _ = writeln!(out, "## Evaluation results\n");
    let _ = writeln!(
        out,
        "{} cases. Each mean is over the cases that carry the key (n); a case without a key is \
         not counted as 0. {} CI: percentile bootstrap, {} resamples, seed {}; `—` when n < 2.\n",
        agg.n_cases,
        conf_pct(agg),
        agg.config.bootstrap_resamples,
        agg.config.seed
    );
    let _ = writeln!(out, "> **Note:** {RECALL_CAVEAT}.\n");

    let mut header = vec!["key", "mean", "CI", "n"];
    let mut align = vec![false, true, false, true];
    if with_errors {
        header.push("errors");
        align.push(true);
    }
    let dims = [
        SliceDim::Overall,
        SliceDim::Lang,
        SliceDim::CaseType,
        SliceDim::GoldLabelled,
    ];
    for dim in dims {
        let slices: Vec<&Slice> = agg.slices.iter().filter(|s| s.dim == dim).collect();
        if slices.is_empty() {
            continue;
        }
        let _ = writeln!(out, "### {}\n", dim.title());
        for slice in slices {
            if dim != SliceDim::Overall {
                let _ = writeln!(
                    out,
                    "#### {} ({} cases)\n",
                    md_escape(&slice_label(slice)),
                    slice.n_cases
                );
            } else {
                let _ = writeln!(out, "{} cases.\n", slice.n_cases);
            }
            let rows = metric_rows(slice, with_errors);
            if rows.is_empty() {
                let _ = writeln!(out, "_No scores in this slice._\n");
            } else {
                let _ = writeln!(out, "{}", md_table(&header, &align, &rows));
            }
        }
    }

    let _ = writeln!(out, "### Language differences\n");
    let _ = writeln!(
        out,
        "Δ = mean a − mean b; two-sided permutation test ({} permutations, seed {}). A difference \
         is **indicative** (a hint, not a tested result) when either side has n < {} or p ≥ {}; \
         no correction for multiple comparisons is applied.\n",
        agg.config.permutations, agg.config.seed, agg.config.indicative_min_n, agg.config.alpha
    );
    if agg.lang_deltas.is_empty() {
        let _ = writeln!(out, "_No key is carried by two languages._\n");
    } else {
        let rows: Vec<Vec<String>> = agg.lang_deltas.iter().map(delta_row).collect();
        let align = [false, false, true, true, true, true, false];
        let _ = writeln!(out, "{}", md_table(&DELTA_HEADER, &align, &rows));
    }
    out
}

/// A plain terminal rendering: one table of every slice and key, the language differences, and
/// the caveat.
pub fn render_terminal(agg: &Aggregate) -> String {
    let with_errors = has_errors(agg);
    let mut header = vec!["slice", "cases", "key", "mean", "CI", "n"];
    if with_errors {
        header.push("errors");
    }
    let mut rows = Vec::new();
    for slice in &agg.slices {
        for row in metric_rows(slice, with_errors) {
            let mut full = vec![slice.name.clone(), slice.n_cases.to_string()];
            full.extend(row);
            rows.push(full);
        }
    }
    let mut out = format!(
        "{} cases; {} CI by percentile bootstrap ({} resamples, seed {})\n",
        agg.n_cases,
        conf_pct(agg),
        agg.config.bootstrap_resamples,
        agg.config.seed
    );
    out.push_str(&text_table(&header, &rows));
    if !agg.lang_deltas.is_empty() {
        let _ = writeln!(
            out,
            "\nlanguage differences (indicative when n < {} or p >= {})",
            agg.config.indicative_min_n, agg.config.alpha
        );
        let rows: Vec<Vec<String>> = agg.lang_deltas.iter().map(delta_row).collect();
        out.push_str(&text_table(&DELTA_HEADER, &rows));
    }
    let _ = writeln!(out, "\nnote: {RECALL_CAVEAT}");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aggregate::{aggregate, AggregateConfig, CaseScores};

    fn cfg() -> AggregateConfig {
        AggregateConfig {
            bootstrap_resamples: 200,
            permutations: 200,
            ..AggregateConfig::default()
        }
    }

    fn sample() -> Aggregate {
        let cases = [
            CaseScores::new("1", "en", "golden", true)
                .with_score("retrieval_hit_at_k", 1.0)
                .with_score("refusal_correctness", 1.0),
            CaseScores::new("2", "en", "adversarial", true)
                .with_score("retrieval_hit_at_k", 0.0)
                .with_score("refusal_correctness", 1.0),
            CaseScores::new("3", "es-419", "capability", false)
                .with_score("refusal_correctness", 0.0),
        ];
        aggregate(&cases, &cfg()).unwrap()
    }

    #[test]
    fn text_table_aligns_by_characters() {
        let t = text_table(
            &["a", "bb"],
            &[vec!["—".into(), "x".into()], vec!["long".into(), "".into()]],
        );
        assert_eq!(t, "a     bb\n----  --\n—     x\nlong\n");
    }

    #[test]
    fn markdown_has_caveat_n_and_ci() {
        let md = render_markdown(&sample());
        assert!(md.contains(RECALL_CAVEAT), "{md}");
        assert!(md.contains("| key | mean | CI | n |"), "{md}");
        // Overall hit: mean 0.5 over n = 2 (the gold-less case does not count).
        assert!(md.contains("| retrieval_hit_at_k | 0.500 | ["), "{md}");
        assert!(md.contains("#### es-419 (1 cases)"), "{md}");
        // A one-case slice has no interval.
        assert!(
            md.contains("| refusal_correctness | 0.000 | — | 1 |"),
            "{md}"
        );
        assert!(
            md.contains("### Gold-labelled: golden vs adversarial"),
            "{md}"
        );
        assert!(
            md.contains("| refusal_correctness | en vs es-419 | +1.000 |"),
            "{md}"
        );
        assert!(md.contains("indicative"), "{md}");
        assert!(
            !md.contains("errors"),
            "no error column without errors: {md}"
        );
    }

    #[test]
    fn terminal_table_lists_every_slice_and_key() {
        let t = render_terminal(&sample());
        let expected_head =
            "slice             cases  key                  mean   CI              n\n";
        assert!(t.contains(expected_head), "{t}");
        assert!(
            t.contains("gold:adversarial  1      retrieval_hit_at_k   0.000  —               1\n"),
            "{t}"
        );
        assert!(t.ends_with(&format!("note: {RECALL_CAVEAT}\n")), "{t}");
        assert!(t.lines().all(|l| l == l.trim_end()), "no trailing spaces");
    }

    #[test]
    fn errors_get_a_column_when_present() {
        let cases = [
            CaseScores::new("1", "en", "golden", true).with_score("faithfulness", 4.0),
            CaseScores::new("2", "en", "golden", true).with_error("faithfulness"),
            CaseScores::new("3", "en", "golden", true).with_error("groundedness"),
        ];
        let a = aggregate(&cases, &cfg()).unwrap();
        let md = render_markdown(&a);
        assert!(md.contains("| key | mean | CI | n | errors |"), "{md}");
        assert!(md.contains("| faithfulness | 4.000 | — | 1 | 1 |"), "{md}");
        assert!(md.contains("| groundedness | — | — | 0 | 1 |"), "{md}");
        let t = render_terminal(&a);
        assert!(t.contains("errors"), "{t}");
    }

    #[test]
    fn empty_aggregate_renders() {
        let a = aggregate(&[], &cfg()).unwrap();
        let md = render_markdown(&a);
        assert!(md.contains("_No scores in this slice._"));
        assert!(md.contains(RECALL_CAVEAT));
        let t = render_terminal(&a);
        assert!(t.contains(RECALL_CAVEAT));
    }

    #[test]
    fn deltas_past_both_thresholds_are_not_called_significant() {
        let cases: Vec<CaseScores> = (0..80)
            .map(|i| {
                let (lang, v) = if i < 40 { ("en", 1.0) } else { ("pt-BR", 0.0) };
                CaseScores::new(i.to_string(), lang, "golden", true).with_score("h", v)
            })
            .collect();
        let a = aggregate(&cases, &cfg()).unwrap();
        assert!(!a.lang_deltas[0].indicative);
        let md = render_markdown(&a);
        assert!(md.contains("| p < alpha, n >= min |"), "{md}");
        assert!(!md.contains("significant |"), "{md}");
    }

    #[test]
    fn format_ci_shapes() {
        assert_eq!(format_ci(None), "—");
        assert_eq!(
            format_ci(Some(Interval {
                low: 0.25,
                high: 0.7504
            })),
            "[0.250, 0.750]"
        );
    }
}
