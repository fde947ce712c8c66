use std::fmt;
use std::path::{Path, PathBuf};

/// One problem in a data file: `file:line: field: what is wrong`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Diagnostic {
    pub path: PathBuf,
    /// 1-based line number; 0 when the problem concerns the whole file.
    pub line: usize,
    pub field: String,
    pub message: String,
}

impl Diagnostic {
    pub fn new(
        path: impl AsRef<Path>,
        line: usize,
        field: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Diagnostic {
            path: path.as_ref().to_path_buf(),
            line,
            field: field.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}: {}: {}",
            self.path.display(),
            self.line,
            self.field,
            self.message
        )
    }
}

/// A non-empty list of problems, printed one per line.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Diagnostics(pub Vec<Diagnostic>);

impl Diagnostics {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn push(&mut self, d: Diagnostic) {
        self.0.push(d);
    }

    pub fn extend(&mut self, other: Diagnostics) {
        self.0.extend(other.0);
    }

    /// Sorted by file, then line, so reports are stable.
    pub fn sorted(mut self) -> Self {
        self.0.sort();
        self
    }

    pub fn iter(&self) -> impl Iterator<Item = &Diagnostic> {
        self.0.iter()
    }
}

impl fmt::Display for Diagnostics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, d) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{d}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Diagnostics {}

/// 1-based line number of a byte offset in `text`.
pub fn line_of(text: &str, offset: usize) -> usize {
    let end = offset.min(text.len());
    text.as_bytes()[..end]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

/// At most this many invalid-UTF-8 positions are listed per file (the rest are counted).
const MAX_UTF8_DIAGNOSTICS: usize = 20;

/// Read a data file (card, cases, labels) as text, the same way for every loader: a leading UTF-8
/// byte-order mark is dropped, and invalid UTF-8 is not an I/O error but a diagnostic per bad
/// sequence (`invalid UTF-8 at byte N`, with its line). The text returned then has each bad
/// sequence replaced by U+FFFD, so the caller can go on and list the file's other problems.
pub fn read_data_file(path: &Path) -> std::io::Result<(String, Diagnostics)> {
    let bytes = std::fs::read(path)?;
    Ok(decode_data(path, &bytes))
}

/// The pure part of [`read_data_file`]: decode `bytes` read from `path`.
pub fn decode_data(path: &Path, bytes: &[u8]) -> (String, Diagnostics) {
    const BOM: &[u8] = b"\xEF\xBB\xBF";
    let (skip, body) = match bytes.strip_prefix(BOM) {
        Some(rest) => (BOM.len(), rest),
        None => (0, bytes),
    };
    let mut diags = Diagnostics::default();
    let mut text = String::with_capacity(body.len());
    let mut rest = body;
    let mut offset = 0usize; // of `rest` within `body`
    let mut line = 1usize;
    let mut bad = 0usize;
    loop {
        match std::str::from_utf8(rest) {
            Ok(s) => {
                text.push_str(s);
                break;
            }
            Err(e) => {
                let good = e.valid_up_to();
                // Valid by construction: `valid_up_to` bytes are UTF-8.
                let valid = String::from_utf8_lossy(&rest[..good]);
                line += valid.bytes().filter(|&b| b == b'\n').count();
                text.push_str(&valid);
                text.push('\u{fffd}');
                let at = skip + offset + good;
                bad += 1;
                if bad <= MAX_UTF8_DIAGNOSTICS {
                    diags.push(Diagnostic::new(
                        path,
                        line,
                        "encoding",
                        format!("invalid UTF-8 at byte {at}; data files must be UTF-8 text"),
                    ));
                }
                let skip_len = e.error_len().unwrap_or(rest.len() - good).max(1);
                let consumed = (good + skip_len).min(rest.len());
                offset += consumed;
                rest = &rest[consumed..];
                if rest.is_empty() {
                    break;
                }
            }
        }
    }
    if bad > MAX_UTF8_DIAGNOSTICS {
        diags.push(Diagnostic::new(
            path,
            0,
            "encoding",
            format!(
                "{} more invalid UTF-8 sequences not listed",
                bad - MAX_UTF8_DIAGNOSTICS
            ),
        ));
    }
    (text, diags)
}

#[cfg(test)]
mod decode_tests {
    use super::*;

    #[test]
    fn a_bom_is_dropped_and_valid_text_passes_through() {
        let (t, d) = decode_data(Path::new("f"), b"\xEF\xBB\xBFhello\nworld");
        assert_eq!(t, "hello\nworld");
        assert!(d.is_empty());
    }

    #[test]
    fn invalid_utf8_is_listed_with_byte_offset_and_line_and_the_rest_is_kept() {
        let bytes = b"ok line\nbad \xff here\nalso \xc3 bad\nfine \xc3\xa9\n";
        let (t, d) = decode_data(Path::new("cases.jsonl"), bytes);
        let msgs: Vec<String> = d.iter().map(|x| x.to_string()).collect();
        assert_eq!(
            msgs,
            vec![
                "cases.jsonl:2: encoding: invalid UTF-8 at byte 12; data files must be UTF-8 text",
                "cases.jsonl:3: encoding: invalid UTF-8 at byte 24; data files must be UTF-8 text",
            ]
        );
        assert_eq!(t, "ok line\nbad \u{fffd} here\nalso \u{fffd} bad\nfine é\n");
    }

    #[test]
    fn offsets_count_the_bom_and_a_truncated_tail_is_reported() {
        let (t, d) = decode_data(Path::new("f"), b"\xEF\xBB\xBFab\xe2\x82");
        assert_eq!(t, "ab\u{fffd}");
        assert_eq!(d.len(), 1);
        assert!(d.0[0].message.contains("byte 5"), "{}", d.0[0].message);
    }

    #[test]
    fn many_bad_bytes_are_capped_with_a_count() {
        let bytes = vec![0xffu8; 50];
        let (t, d) = decode_data(Path::new("f"), &bytes);
        assert_eq!(t.chars().count(), 50);
        assert_eq!(d.len(), MAX_UTF8_DIAGNOSTICS + 1);
        assert!(d.0[MAX_UTF8_DIAGNOSTICS].message.starts_with("30 more"));
    }
}
