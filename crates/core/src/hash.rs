//! The one stable hash of the workspace, and the one fast in-process hasher.
//!
//! - [`fnv1a64`] and [`StableHasher`]: FNV-1a, 64 bit. Equal in every
//!   process, run and machine, so it may name things that outlive a process:
//!   runner fingerprints, candidate-set checksums, environment digests, job
//!   directory names. Never Rust's randomized `Hash`.
//! - [`FastHasher`] / [`FastMap`]: for maps that live inside one process and
//!   sit on a hot path (the tuner's hit table, the trace recorder's open
//!   spans, trace analysis' name tables). Not stable across versions; never
//!   write its values anywhere.
//!
//! ```
//! use ranktune_core::hash::{fnv1a64, StableHasher};
//! let mut h = StableHasher::default();
//! h.write(b"gemm");
//! assert_eq!(h.finish(), fnv1a64(b"gemm"));
//! assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
//! ```

use std::collections::HashMap;
use std::hash::BuildHasherDefault;

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0100_0000_01b3;

/// FNV-1a, 64 bit, of `bytes`: tiny, stable, and good enough to name things.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h = StableHasher::default();
    h.write(bytes);
    h.finish()
}

/// Incremental FNV-1a, 64 bit: a stable hash for fingerprints and checksums.
#[derive(Clone, Copy, Debug)]
pub struct StableHasher(u64);

impl Default for StableHasher {
    fn default() -> Self {
        StableHasher(FNV_OFFSET)
    }
}

impl StableHasher {
    /// Feeds bytes.
    pub fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 ^ u64::from(*b)).wrapping_mul(FNV_PRIME);
        }
    }

    /// Feeds a string and a separator, so `("ab","c")` and `("a","bc")` differ.
    pub fn write_str(&mut self, s: &str) {
        self.write(s.as_bytes());
        self.write(&[0xff]);
    }

    /// The hash value.
    pub fn finish(&self) -> u64 {
        self.0
    }

    /// The hash as 16 lowercase hex digits.
    pub fn hex(&self) -> String {
        format!("{:016x}", self.0)
    }
}

/// A fast, unkeyed hasher for in-process maps: integers cost one multiply,
/// bytes eight at a time (the Fx scheme). No protection against chosen
/// keys: use it only for keys the process made itself (ids, interned names,
/// already-mixed hashes).
#[derive(Clone, Copy, Default, Debug)]
pub struct FastHasher(u64);

const FX_SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl std::hash::Hasher for FastHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        let mut h = self.0;
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            h = (h.rotate_left(5) ^ u64::from_le_bytes(w)).wrapping_mul(FX_SEED);
        }
        for &b in chunks.remainder() {
            h = (h.rotate_left(5) ^ u64::from(b)).wrapping_mul(FX_SEED);
        }
        self.0 = h;
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// A `HashMap` with [`FastHasher`].
pub type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<FastHasher>>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::Hasher;

    #[test]
    fn fnv_known_values() {
        assert_eq!(fnv1a64(b""), 0xcbf29ce484222325);
        assert_eq!(fnv1a64(b"a"), 0xaf63dc4c8601ec8c);
        assert_eq!(fnv1a64(b"foobar"), 0x85944171f73967e8);
    }

    #[test]
    fn stable_hasher_separates_strings() {
        let (mut a, mut b) = (StableHasher::default(), StableHasher::default());
        a.write_str("ab");
        a.write_str("c");
        b.write_str("a");
        b.write_str("bc");
        assert_ne!(a.finish(), b.finish());
        assert_eq!(a.hex().len(), 16);
    }

    #[test]
    fn fast_hasher_spreads_small_integers() {
        let hash = |n: u64| {
            let mut h = FastHasher::default();
            h.write_u64(n);
            h.finish()
        };
        // hashbrown uses the top 7 bits as a tag: neighbours must differ there.
        let tags: std::collections::HashSet<u64> = (0..64).map(|n| hash(n) >> 57).collect();
        assert!(tags.len() > 32, "{} distinct tags", tags.len());
    }
}
