//! The building blocks of the zero-copy parsers: the bytes of a file (memory-mapped or owned),
//! spans into them, a fast byte-string hash and an open-addressing index keyed by spans.

use std::fs::File;
use std::io::Read;
use std::ops::Deref;
use std::path::Path;

use crate::error::{Result, TrecError};

/// The contents of one input: a read-only memory map of the file, or owned bytes (for
/// pipes, empty files, in-memory input and rows).
pub(crate) enum Bytes {
    Mapped(memmap2::Mmap),
    Owned(Vec<u8>),
}

impl Deref for Bytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            Bytes::Mapped(m) => m,
            Bytes::Owned(v) => v,
        }
    }
}

impl std::fmt::Debug for Bytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self {
            Bytes::Mapped(_) => "mapped",
            Bytes::Owned(_) => "owned",
        };
        write!(f, "Bytes({kind}, {} bytes)", self.len())
    }
}

/// Maps a regular file read-only (falling back to reading it into memory when it cannot be
/// mapped: pipes, `/dev/stdin`, empty files).
pub(crate) fn load(path: &Path) -> Result<Bytes> {
    let io = |source| TrecError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut file = File::open(path).map_err(io)?;
    let meta = file.metadata().map_err(io)?;
    if meta.is_file() && meta.len() > 0 {
        // SAFETY: the map is read-only and private to this process, and nothing in this crate
        // writes to the file. As with any reader, a file that another process truncates or
        // rewrites while it is being evaluated gives undefined contents (a truncation can raise
        // SIGBUS); trec_eval maps its run file the same way.
        let mapped = unsafe { memmap2::MmapOptions::new().map(&file) };
        if let Ok(map) = mapped {
            #[cfg(unix)]
            let _ = map.advise(memmap2::Advice::Sequential);
            return Ok(Bytes::Mapped(map));
        }
    }
    let mut data = Vec::new();
    file.read_to_end(&mut data).map_err(io)?;
    Ok(Bytes::Owned(data))
}

/// A byte range of the input, packed in 8 bytes: offset in the high 40 bits (1 TiB), length in
/// the low 24 (16 MiB per field).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Span(u64);

const LEN_BITS: u32 = 24;
const MAX_LEN: usize = (1 << LEN_BITS) - 1;
const MAX_OFFSET: usize = (1 << (64 - LEN_BITS)) - 1;

impl Span {
    /// `None` when the field or the file is too large to pack.
    #[inline]
    pub(crate) fn new(start: usize, end: usize) -> Option<Span> {
        let len = end.checked_sub(start)?;
        if len > MAX_LEN || start > MAX_OFFSET {
            return None;
        }
        Some(Span(((start as u64) << LEN_BITS) | len as u64))
    }

    #[inline]
    pub(crate) fn start(self) -> usize {
        (self.0 >> LEN_BITS) as usize
    }

    #[inline]
    pub(crate) fn len(self) -> usize {
        (self.0 & MAX_LEN as u64) as usize
    }

    /// The bytes of the span (empty if it does not lie in `bytes`, which cannot happen for
    /// spans made from `bytes`).
    #[inline]
    pub(crate) fn of(self, bytes: &[u8]) -> &[u8] {
        let start = self.start();
        bytes.get(start..start + self.len()).unwrap_or_default()
    }

    /// The span as text (validated as UTF-8 when parsed).
    pub(crate) fn str_of(self, bytes: &[u8]) -> &str {
        std::str::from_utf8(self.of(bytes)).unwrap_or_default()
    }
}

/// C's `isspace` in the "C" locale (trec_eval splits fields with it): note `\v`, which Rust's
/// `is_ascii_whitespace` does not include.
#[inline]
pub(crate) fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// 1-based number of the line that holds byte `offset`.
pub(crate) fn line_of(bytes: &[u8], offset: usize) -> usize {
    let end = offset.min(bytes.len());
    1 + bytes
        .get(..end)
        .unwrap_or_default()
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
}

#[inline(always)]
fn read8(bytes: &[u8], at: usize) -> u64 {
    bytes.get(at..at + 8).map_or(0, |s| {
        let mut w = [0_u8; 8];
        w.copy_from_slice(s);
        u64::from_le_bytes(w)
    })
}

#[inline(always)]
fn read4(bytes: &[u8], at: usize) -> u64 {
    bytes.get(at..at + 4).map_or(0, |s| {
        let mut w = [0_u8; 4];
        w.copy_from_slice(s);
        u64::from(u32::from_le_bytes(w))
    })
}

/// `a == b`, inline for the short ids of TREC files (the general comparison is a call).
#[inline(always)]
pub(crate) fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    let len = a.len();
    if len != b.len() {
        return false;
    }
    if (8..=16).contains(&len) {
        read8(a, 0) == read8(b, 0) && read8(a, len - 8) == read8(b, len - 8)
    } else if (4..8).contains(&len) {
        read4(a, 0) == read4(b, 0) && read4(a, len - 4) == read4(b, len - 4)
    } else {
        a == b
    }
}

/// A fast non-cryptographic hash of a byte string: the rustc "Fx" step over 8-byte words
/// (the last word overlapping the one before, short strings read in two overlapping halves,
/// no copy of a variable length), seeded with the length. Only the high 32 bits are well mixed:
/// [`IdTable`] uses those. The inputs are local files, not adversarial, and the index below
/// compares the bytes on every hash match.
#[inline]
pub(crate) fn hash_bytes(bytes: &[u8]) -> u64 {
    const K: u64 = 0x517c_c1b7_2722_0a95;
    let step = |h: u64, w: u64| (h.rotate_left(5) ^ w).wrapping_mul(K);
    let len = bytes.len();
    let mut h = (len as u64).wrapping_mul(K);
    if len >= 8 {
        let mut at = 0;
        while at + 8 <= len {
            h = step(h, read8(bytes, at));
            at += 8;
        }
        if at < len {
            h = step(h, read8(bytes, len - 8));
        }
    } else if len >= 4 {
        h = step(h, read4(bytes, 0) | read4(bytes, len - 4) << 32);
    } else if let (Some(&a), Some(&b), Some(&c)) = (bytes.first(), bytes.get(len / 2), bytes.last())
    {
        h = step(h, u64::from(a) | u64::from(b) << 8 | u64::from(c) << 16);
    }
    // The last step is a multiplication: its high 32 bits, which the index uses, depend on
    // every input bit.
    h
}

/// An open-addressing hash index of entries `0..n` of some list, keyed by byte strings the
/// caller resolves: it stores each entry's number and 32 bits of its hash (which also place it),
/// and asks the caller to compare keys on a hash match.
#[derive(Debug, Clone, Default)]
pub(crate) struct IdTable {
    /// `(entry + 1, 32 hash bits)`; entry 0 marks an empty slot.
    slots: Vec<(u32, u32)>,
    len: usize,
}

impl IdTable {
    /// An empty index sized for `n` entries without growing.
    pub(crate) fn with_capacity(n: usize) -> IdTable {
        let mut t = IdTable::default();
        t.reset(n);
        t
    }

    /// Empties the index and sizes it for `n` entries (reusing the allocation).
    pub(crate) fn reset(&mut self, n: usize) {
        let size = (n.max(4) * 2).next_power_of_two();
        self.slots.clear();
        self.slots.resize(size, (0, 0));
        self.len = 0;
    }

    #[inline]
    fn mask(&self) -> usize {
        self.slots.len().wrapping_sub(1)
    }

    #[inline]
    fn bits(hash: u64) -> u32 {
        (hash >> 32) as u32
    }

    /// The entry whose key equals the one hashed to `hash` (`same(entry)` compares keys).
    #[inline]
    pub(crate) fn find(&self, hash: u64, mut same: impl FnMut(u32) -> bool) -> Option<u32> {
        let mask = self.mask();
        let fp = Self::bits(hash);
        let mut i = fp as usize & mask;
        loop {
            let &(id, f) = self.slots.get(i)?;
            if id == 0 {
                return None;
            }
            if f == fp && same(id - 1) {
                return Some(id - 1);
            }
            i = (i + 1) & mask;
        }
    }

    /// Inserts `entry` under `hash` unless an entry with an equal key is there: then returns
    /// that entry and inserts nothing. `entry` must be below `u32::MAX`.
    #[inline]
    pub(crate) fn insert(
        &mut self,
        hash: u64,
        entry: u32,
        mut same: impl FnMut(u32) -> bool,
    ) -> Option<u32> {
        if (self.len + 1) * 2 > self.slots.len() {
            self.grow();
        }
        let mask = self.mask();
        let fp = Self::bits(hash);
        let mut i = fp as usize & mask;
        loop {
            let slot = self.slots.get_mut(i)?;
            if slot.0 == 0 {
                *slot = (entry + 1, fp);
                self.len += 1;
                return None;
            }
            if slot.1 == fp && same(slot.0 - 1) {
                return Some(slot.0 - 1);
            }
            i = (i + 1) & mask;
        }
    }

    /// Doubles the table, re-placing every entry by its stored hash bits.
    fn grow(&mut self) {
        let old = std::mem::take(&mut self.slots);
        self.slots = vec![(0, 0); (old.len() * 2).max(8)];
        let mask = self.mask();
        for (id, fp) in old.into_iter().filter(|s| s.0 != 0) {
            let mut i = fp as usize & mask;
            while let Some(slot) = self.slots.get_mut(i) {
                if slot.0 == 0 {
                    *slot = (id, fp);
                    break;
                }
                i = (i + 1) & mask;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn id_table_finds_inserts_and_grows() {
        let keys: Vec<String> = (0..1000).map(|i| format!("doc{i}")).collect();
        let mut t = IdTable::with_capacity(2);
        for (i, k) in keys.iter().enumerate() {
            let h = hash_bytes(k.as_bytes());
            assert_eq!(t.insert(h, i as u32, |e| keys[e as usize] == *k), None);
        }
        for (i, k) in keys.iter().enumerate() {
            let h = hash_bytes(k.as_bytes());
            assert_eq!(t.find(h, |e| keys[e as usize] == *k), Some(i as u32));
            assert_eq!(
                t.insert(h, 5000, |e| keys[e as usize] == *k),
                Some(i as u32)
            );
        }
        let h = hash_bytes(b"nope");
        assert_eq!(t.find(h, |e| keys[e as usize] == "nope"), None);
        assert_eq!(IdTable::default().find(h, |_| true), None);
    }

    #[test]
    fn hash_tells_short_and_long_strings_apart() {
        let keys = [
            "",
            "a",
            "b",
            "ab",
            "ba",
            "abc",
            "abcd",
            "abce",
            "abcdefg",
            "abcdefgh",
            "abcdefgi",
            "abcdefghi",
            "bbcdefghi",
            "doc1234-567",
            "doc1234-568",
            "doc1235-567",
        ];
        let mut hashes: Vec<u64> = keys.iter().map(|k| hash_bytes(k.as_bytes())).collect();
        hashes.sort_unstable();
        hashes.dedup();
        assert_eq!(hashes.len(), keys.len());
    }

    #[test]
    fn same_bytes_is_equality() {
        let words = [
            "",
            "a",
            "ab",
            "abc",
            "abcd",
            "abce",
            "abcdefg",
            "abcdefgh",
            "abcdefgX",
            "Xbcdefgh",
            "abcdefghijklmnop",
            "abcdefghijklmnoP",
            "abcdefghijklmnopq",
        ];
        for a in words {
            for b in words {
                assert_eq!(same_bytes(a.as_bytes(), b.as_bytes()), a == b, "{a} {b}");
            }
        }
    }

    #[test]
    fn spans_pack_and_reject_what_does_not_fit() {
        let s = Span::new(10, 15).expect("fits");
        assert_eq!((s.start(), s.len()), (10, 5));
        assert_eq!(s.of(b"0123456789abcdefgh"), b"abcde");
        assert_eq!(s.of(b"short"), b"");
        assert!(Span::new(0, MAX_LEN + 1).is_none());
        assert!(Span::new(MAX_OFFSET + 1, MAX_OFFSET + 2).is_none());
        assert!(Span::new(5, 4).is_none());
    }

    #[test]
    fn lines_are_counted_from_offsets() {
        let b = b"a\nbb\n\nc";
        assert_eq!(line_of(b, 0), 1);
        assert_eq!(line_of(b, 2), 2);
        assert_eq!(line_of(b, 5), 3);
        assert_eq!(line_of(b, 6), 4);
        assert_eq!(line_of(b, 100), 4);
    }
}
