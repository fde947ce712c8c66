//! The measures and trec_eval's `-m name[.cutoffs]` syntax.

use std::fmt;

use crate::error::{Result, TrecError};

/// One value trec_eval prints: a measure at one cut-off K (K >= 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Measure {
    /// `ndcg_cut_K`: nDCG at K with gain = the qrels value (graded), discount log2(rank + 1),
    /// ideal ranking from all of the query's qrels.
    NdcgCut(usize),
    /// `recall_K`: relevant (rel >= 1) retrieved in the top K / relevant judged; 0 when the
    /// query has no relevant document.
    Recall(usize),
    /// `success_K`: 1 if any relevant document is in the top K, else 0.
    Success(usize),
}

/// The three measure families, in trec_eval's printing order (its `te_trec_measures` table:
/// `recall` before `ndcg_cut` before `success`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Family {
    Recall,
    NdcgCut,
    Success,
}

impl Family {
    fn from_name(name: &str) -> Option<Family> {
        match name {
            "recall" => Some(Family::Recall),
            "ndcg_cut" => Some(Family::NdcgCut),
            "success" => Some(Family::Success),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Family::Recall => "recall",
            Family::NdcgCut => "ndcg_cut",
            Family::Success => "success",
        }
    }

    /// trec_eval's default cut-offs when `-m name` has no parameters.
    fn default_cutoffs(self) -> &'static [usize] {
        match self {
            Family::Recall | Family::NdcgCut => &[5, 10, 15, 20, 30, 100, 200, 500, 1000],
            Family::Success => &[1, 5, 10],
        }
    }

    fn at(self, k: usize) -> Measure {
        match self {
            Family::Recall => Measure::Recall(k),
            Family::NdcgCut => Measure::NdcgCut(k),
            Family::Success => Measure::Success(k),
        }
    }
}

impl Measure {
    fn family(self) -> Family {
        match self {
            Measure::NdcgCut(_) => Family::NdcgCut,
            Measure::Recall(_) => Family::Recall,
            Measure::Success(_) => Family::Success,
        }
    }

    /// The cut-off K.
    pub fn cutoff(self) -> usize {
        match self {
            Measure::NdcgCut(k) | Measure::Recall(k) | Measure::Success(k) => k,
        }
    }

    /// The name trec_eval prints, e.g. `ndcg_cut_10`.
    pub fn name(self) -> String {
        format!("{}_{}", self.family().name(), self.cutoff())
    }

    /// Sort key of trec_eval's output order: measure family (table order), then cut-off
    /// ascending.
    pub(crate) fn order_key(self) -> (u8, usize) {
        (self.family() as u8, self.cutoff())
    }
}

impl fmt::Display for Measure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}_{}", self.family().name(), self.cutoff())
    }
}

fn measure_error(spec: &str, reason: impl Into<String>) -> TrecError {
    TrecError::Measure {
        spec: spec.to_string(),
        reason: reason.into(),
    }
}

/// Splits `name[.params]`; `None` params when there is no `.`.
fn split_spec(spec: &str) -> Result<(Family, Option<&str>)> {
    let (name, params) = match spec.split_once('.') {
        Some((name, params)) => (name, Some(params)),
        None => (spec, None),
    };
    let family = Family::from_name(name).ok_or_else(|| {
        measure_error(
            spec,
            format!(
                "unknown or unsupported measure `{name}` (supported: ndcg_cut, recall, success)"
            ),
        )
    })?;
    if params == Some("") {
        return Err(measure_error(spec, "empty parameter list after `.`"));
    }
    Ok((family, params))
}

/// trec_eval's `get_long_cutoffs`: comma-separated, sorted ascending, each > 0, no duplicates.
/// (trec_eval reads each with `atol`, so it would take `5x` as 5; this is strict.)
fn parse_cutoffs(spec: &str, params: &str) -> Result<Vec<usize>> {
    let mut cutoffs = Vec::new();
    for p in params.split(',') {
        let k: i64 = p
            .parse()
            .map_err(|_| measure_error(spec, format!("cut-off `{p}` is not an integer")))?;
        if k <= 0 {
            return Err(measure_error(spec, "cut-offs must be positive"));
        }
        let k = usize::try_from(k).map_err(|_| measure_error(spec, "cut-off too large"))?;
        cutoffs.push(k);
    }
    cutoffs.sort_unstable();
    if cutoffs.windows(2).any(|w| w[0] == w[1]) {
        return Err(measure_error(spec, "duplicate cut-offs"));
    }
    Ok(cutoffs)
}

/// Parses one `-m` argument: `ndcg_cut.5,10` gives `[NdcgCut(5), NdcgCut(10)]`; a bare
/// `ndcg_cut` gives trec_eval's default cut-offs (5,10,15,20,30,100,200,500,1000 for
/// `ndcg_cut` and `recall`; 1,5,10 for `success`).
pub fn parse_measure(spec: &str) -> Result<Vec<Measure>> {
    let (family, params) = split_spec(spec)?;
    let cutoffs = match params {
        Some(p) => parse_cutoffs(spec, p)?,
        None => family.default_cutoffs().to_vec(),
    };
    Ok(cutoffs.into_iter().map(|k| family.at(k)).collect())
}

/// Parses all `-m` arguments of one command line the way trec_eval combines them: for each
/// measure, the cut-offs of its *first* `-m name.params` are used (trec_eval ignores later
/// parameter lists for the same measure, so `-m success.1 -m success.5` prints only
/// `success_1`); a measure named only without parameters gets its default cut-offs. Every
/// argument is validated. The result is in trec_eval's output order.
pub fn parse_measure_args<S: AsRef<str>>(specs: &[S]) -> Result<Vec<Measure>> {
    let mut chosen: Vec<(Family, Option<Vec<usize>>)> = Vec::new();
    for spec in specs {
        let spec = spec.as_ref();
        let (family, params) = split_spec(spec)?;
        let cutoffs = match params {
            Some(p) => Some(parse_cutoffs(spec, p)?),
            None => None,
        };
        match chosen.iter_mut().find(|(f, _)| *f == family) {
            Some(slot) => {
                if slot.1.is_none() {
                    slot.1 = cutoffs;
                }
            }
            None => chosen.push((family, cutoffs)),
        }
    }
    chosen.sort_by_key(|(f, _)| *f);
    Ok(chosen
        .into_iter()
        .flat_map(|(family, cutoffs)| {
            cutoffs
                .unwrap_or_else(|| family.default_cutoffs().to_vec())
                .into_iter()
                .map(move |k| family.at(k))
        })
        .collect())
}

/// The measures in trec_eval's output order, duplicates removed.
pub(crate) fn canonical(measures: &[Measure]) -> Vec<Measure> {
    let mut out = measures.to_vec();
    out.sort_by_key(|m| m.order_key());
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_lists_sorted() {
        assert_eq!(
            parse_measure("ndcg_cut.10,5").expect("ok"),
            [Measure::NdcgCut(5), Measure::NdcgCut(10)]
        );
        assert_eq!(
            parse_measure("success").expect("ok"),
            [
                Measure::Success(1),
                Measure::Success(5),
                Measure::Success(10)
            ]
        );
        assert_eq!(parse_measure("recall").expect("ok").len(), 9);
        assert_eq!(Measure::NdcgCut(10).name(), "ndcg_cut_10");
        assert_eq!(Measure::Recall(3).to_string(), "recall_3");
    }

    #[test]
    fn rejects_what_trec_eval_rejects() {
        for bad in [
            "ndcg_cut.",
            "ndcg_cut.0",
            "ndcg_cut.-1",
            "ndcg_cut.5,5",
            "ndcg_cut.5,,10",
            "ndcg_cut.x",
            "map",
            "ndcg",
            "",
        ] {
            assert!(parse_measure(bad).is_err(), "{bad} should be rejected");
        }
    }

    #[test]
    fn first_parameter_list_wins_and_order_is_trec_evals() {
        let m =
            parse_measure_args(&["success.5", "ndcg_cut.10", "success.1", "recall.2"]).expect("ok");
        assert_eq!(
            m,
            [
                Measure::Recall(2),
                Measure::NdcgCut(10),
                Measure::Success(5)
            ]
        );
        let m = parse_measure_args(&["success", "success.5"]).expect("ok");
        assert_eq!(m, [Measure::Success(5)]);
        let m = parse_measure_args(&["success"]).expect("ok");
        assert_eq!(m.len(), 3);
    }

    #[test]
    fn canonical_orders_and_dedups() {
        let m = canonical(&[
            Measure::Success(1),
            Measure::NdcgCut(10),
            Measure::NdcgCut(5),
            Measure::Recall(100),
            Measure::NdcgCut(5),
        ]);
        assert_eq!(
            m,
            [
                Measure::Recall(100),
                Measure::NdcgCut(5),
                Measure::NdcgCut(10),
                Measure::Success(1)
            ]
        );
    }
}
