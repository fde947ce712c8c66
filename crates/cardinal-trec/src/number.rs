//! Numbers of the input files: run scores (with a fast exact path for plain decimals) and
//! qrels relevance values.

/// Exact powers of ten representable in an f64 (10^0 ..= 10^22).
const POW10: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
    1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
];

/// A run score, as Rust's `f64::from_str` reads it (so `1e-3`, `inf` and `+2` are numbers),
/// or `None`. NaN is returned as NaN; the caller rejects it.
#[inline]
pub(crate) fn parse_score(text: &[u8]) -> Option<f64> {
    if let Some(v) = plain_decimal(text) {
        return Some(v);
    }
    std::str::from_utf8(text).ok()?.parse::<f64>().ok()
}

/// `[+-]digits[.digits]` with at most 19 digits whose integer value is below 2^53 and with at
/// most 22 decimals: then `digits / 10^decimals` is a division of two exactly represented
/// numbers, which IEEE 754 rounds correctly, i.e. to the same value as a correct decimal
/// parser (Clinger's fast path). Anything else is left to the general parser.
#[inline]
fn plain_decimal(text: &[u8]) -> Option<f64> {
    let (negative, digits) = match text.split_first() {
        Some((b'-', rest)) => (true, rest),
        Some((b'+', rest)) => (false, rest),
        _ => (false, text),
    };
    let mut mantissa: u64 = 0;
    let mut count = 0_u32;
    let mut decimals = 0_usize;
    let mut dot = false;
    for &b in digits {
        match b {
            b'0'..=b'9' => {
                if count == 19 {
                    return None;
                }
                mantissa = mantissa * 10 + u64::from(b - b'0');
                count += 1;
                decimals += usize::from(dot);
            }
            b'.' if !dot => dot = true,
            _ => return None,
        }
    }
    if count == 0 || mantissa >= 1 << 53 {
        return None;
    }
    let value = mantissa as f64 / *POW10.get(decimals)?;
    Some(if negative { -value } else { value })
}

/// A qrels relevance value: an integer as Rust's `i64::from_str` reads it.
#[inline]
pub(crate) fn parse_rel(text: &[u8]) -> Option<i64> {
    match *text {
        [d @ b'0'..=b'9'] => Some(i64::from(d - b'0')),
        [b'-', d @ b'0'..=b'9'] => Some(-i64::from(d - b'0')),
        _ => std::str::from_utf8(text).ok()?.parse().ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fast_path_agrees_with_the_standard_parser() {
        for s in [
            "0",
            "-0",
            "+0",
            "1",
            "12.34",
            "-3.5",
            "0.1",
            "0.30000000000000004",
            ".5",
            "5.",
            "+.5",
            "9007199254740991",
            "9007199254740992",
            "1234567890123456789",
            "0.0000001",
            "123.4567",
            "99.99",
            "1e-3",
            "inf",
            "-inf",
            "1E5",
            "00012.5000",
        ] {
            let want: f64 = s.parse().expect("valid");
            let got = parse_score(s.as_bytes()).expect("parses");
            assert_eq!(got.to_bits(), want.to_bits(), "{s}");
        }
        for s in [
            "", "-", "+", ".", "1.2.3", "x1", "1x", "1 ", "--1", "0x10", "1e",
        ] {
            assert!(s.parse::<f64>().is_err(), "{s}");
            assert_eq!(parse_score(s.as_bytes()), None, "{s}");
        }
        assert!(parse_score(b"NaN").is_some_and(f64::is_nan));
        assert_eq!(parse_rel(b"-1"), Some(-1));
        assert_eq!(parse_rel(b"7"), Some(7));
        assert_eq!(parse_rel(b"-0"), Some(0));
        assert_eq!(parse_rel(b"12"), Some(12));
        assert_eq!(parse_rel(b"-"), None);
        assert_eq!(parse_rel(b"+2"), Some(2));
        assert_eq!(parse_rel(b"1.5"), None);
        assert_eq!(parse_rel(b"\xff"), None);
    }
}
