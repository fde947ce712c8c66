use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// The languages Cardinal serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Lang {
    #[serde(rename = "en")]
    En,
    #[serde(rename = "es-419")]
    Es419,
    #[serde(rename = "pt-BR")]
    PtBr,
}

impl Lang {
    pub const ALL: [Lang; 3] = [Lang::En, Lang::Es419, Lang::PtBr];

    /// The BCP-47 tag used in ids, directory names and case files.
    pub fn tag(self) -> &'static str {
        match self {
            Lang::En => "en",
            Lang::Es419 => "es-419",
            Lang::PtBr => "pt-BR",
        }
    }

    /// The heading that opens the rules section (the card's tail) in this language.
    pub fn rules_heading(self) -> &'static str {
        match self {
            Lang::En => "## Rules",
            Lang::Es419 => "## Reglas",
            Lang::PtBr => "## Regras",
        }
    }
}

impl fmt::Display for Lang {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.tag())
    }
}

/// An unknown language tag.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown language `{0}` (expected one of: en, es-419, pt-BR)")]
pub struct UnknownLang(pub String);

impl FromStr for Lang {
    type Err = UnknownLang;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Lang::ALL
            .into_iter()
            .find(|l| l.tag() == s)
            .ok_or_else(|| UnknownLang(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_round_trip() {
        for l in Lang::ALL {
            assert_eq!(l.tag().parse::<Lang>(), Ok(l));
        }
        assert!("es".parse::<Lang>().is_err());
        assert!("pt-br".parse::<Lang>().is_err());
    }
}
