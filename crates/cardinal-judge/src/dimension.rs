//! The judged dimensions and their stable names.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// A dimension the LLM judge scores. The string names are stable: they are metric keys in
/// artifacts, reports and baselines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Dimension {
    /// Is every claim supported by the cited cards' headers (facts)?
    Groundedness,
    /// Does the answer contradict the cited cards or violate any of their rules (ADR-0029)?
    Faithfulness,
    /// Does the answer make claims that no retrieved card supports?
    Hallucination,
}

impl Dimension {
    pub const ALL: [Dimension; 3] = [
        Dimension::Groundedness,
        Dimension::Faithfulness,
        Dimension::Hallucination,
    ];

    /// The stable name: `groundedness`, `faithfulness`, `hallucination`.
    pub fn name(self) -> &'static str {
        match self {
            Dimension::Groundedness => "groundedness",
            Dimension::Faithfulness => "faithfulness",
            Dimension::Hallucination => "hallucination",
        }
    }

    /// Whether the dimension is framed with the **cited** cards (and so is not applicable when
    /// no real card was cited). Hallucination is framed with the retrieved cards instead.
    pub fn framed_by_cited_cards(self) -> bool {
        match self {
            Dimension::Groundedness | Dimension::Faithfulness => true,
            Dimension::Hallucination => false,
        }
    }
}

impl fmt::Display for Dimension {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An unknown dimension name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown judge dimension `{0}` (expected one of: groundedness, faithfulness, hallucination)"
)]
pub struct UnknownDimension(pub String);

impl FromStr for Dimension {
    type Err = UnknownDimension;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Dimension::ALL
            .into_iter()
            .find(|d| d.name() == s)
            .ok_or_else(|| UnknownDimension(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_stable_and_round_trip() {
        let names: Vec<_> = Dimension::ALL.iter().map(|d| d.name()).collect();
        assert_eq!(names, ["groundedness", "faithfulness", "hallucination"]);
        for d in Dimension::ALL {
            assert_eq!(d.name().parse::<Dimension>(), Ok(d));
            assert_eq!(d.to_string(), d.name());
            assert_eq!(
                serde_json::to_string(&d).unwrap(),
                format!("\"{}\"", d.name())
            );
        }
        assert!("Faithfulness".parse::<Dimension>().is_err());
    }
}
