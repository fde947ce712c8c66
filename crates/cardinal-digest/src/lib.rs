//! The one digest helper of Cardinal. Every content address in the project — model checksums,
//! the response-cache key, prompt hashes, the labels anchor of judge scores, the KB and case
//! digests of a run manifest — is a lower-case hex sha256 made here.
//!
//! [`Digest`] frames its parts: each part is followed by a NUL byte, so `("ab", "c")` and
//! `("a", "bc")` never collide.

use std::io::Read;
use std::path::Path;

pub use sha2::Sha256;
use sha2::{Digest as _, Sha256 as Hasher};

/// Lower-case hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(HEX[(b >> 4) as usize] as char);
        s.push(HEX[(b & 15) as usize] as char);
    }
    s
}

/// sha256 of `data`, as lower-case hex.
pub fn sha256_hex(data: impl AsRef<[u8]>) -> String {
    hex(&Hasher::digest(data.as_ref()))
}

/// sha256 of a file's bytes, streamed, as lower-case hex.
pub fn file_sha256(path: &Path) -> std::io::Result<String> {
    let mut f = std::fs::File::open(path)?;
    let mut h = Hasher::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(hex(&h.finalize()))
}

/// A digest over framed parts (each part followed by a NUL byte).
#[derive(Clone, Default)]
pub struct Digest(Hasher);

impl Digest {
    pub fn new() -> Self {
        Digest(Hasher::new())
    }

    /// Add one framed part.
    pub fn part(mut self, data: impl AsRef<[u8]>) -> Self {
        self.push(data);
        self
    }

    /// Add one framed part in place.
    pub fn push(&mut self, data: impl AsRef<[u8]>) {
        self.0.update(data.as_ref());
        self.0.update([0u8]);
    }

    /// The hex digest.
    pub fn hex(self) -> String {
        hex(&self.0.finalize())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_vectors() {
        assert_eq!(
            sha256_hex(b""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(
            sha256_hex("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn parts_are_framed() {
        let a = Digest::new().part("ab").part("c").hex();
        let b = Digest::new().part("a").part("bc").hex();
        assert_ne!(a, b);
        assert_eq!(a, sha256_hex(b"ab\0c\0"));
    }

    #[test]
    fn file_digest_matches_bytes() {
        let dir = std::env::temp_dir().join(format!("cardinal-digest-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("f");
        let data: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(&p, &data).unwrap();
        assert_eq!(file_sha256(&p).unwrap(), sha256_hex(&data));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
