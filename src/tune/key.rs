//! The hot-path key: an op's bucketed shapes in a fixed-size, stack-only
//! value, and its hash.
//!
//! Owns the representation used by lookups. Nothing here may allocate except
//! the explicit conversions to and from the cache's nested `Vec` form.

/// Most inputs an op may have.
pub const MAX_INPUTS: usize = 8;
/// Most dims over all inputs of an op.
pub const MAX_DIMS: usize = 24;

/// The bucketed shapes of one op call: for each input, its dims.
///
/// A plain `Copy` value: building, hashing and comparing it never allocates.
/// Unused slots are zero, so the derived equality is exact.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BucketKey {
    dims: [u64; MAX_DIMS],
    ends: [u8; MAX_INPUTS],
    inputs: u8,
}

impl Default for BucketKey {
    fn default() -> Self {
        BucketKey { dims: [0; MAX_DIMS], ends: [0; MAX_INPUTS], inputs: 0 }
    }
}

impl BucketKey {
    /// Appends one input's shape; `false` when the limits are exceeded.
    #[inline]
    pub fn push_input(&mut self, shape: impl IntoIterator<Item = u64>) -> bool {
        let i = self.inputs as usize;
        if i >= MAX_INPUTS {
            return false;
        }
        let mut end = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        for d in shape {
            if end >= MAX_DIMS {
                return false;
            }
            self.dims[end] = d;
            end += 1;
        }
        self.ends[i] = end as u8;
        self.inputs += 1;
        true
    }

    /// Builds a key from nested shapes; `None` when over the limits.
    pub fn from_nested(shapes: &[Vec<u64>]) -> Option<BucketKey> {
        let mut k = BucketKey::default();
        for s in shapes {
            if !k.push_input(s.iter().copied()) {
                return None;
            }
        }
        Some(k)
    }

    /// Number of inputs.
    pub fn num_inputs(&self) -> usize {
        self.inputs as usize
    }

    /// The dims of input `input` (empty when out of range).
    #[inline]
    pub fn input(&self, input: usize) -> &[u64] {
        if input >= self.inputs as usize {
            return &[];
        }
        let start = if input == 0 { 0 } else { self.ends[input - 1] as usize };
        &self.dims[start..self.ends[input] as usize]
    }

    /// `inputs[input].shape[dim]`, or 0 when out of range.
    #[inline]
    pub fn dim(&self, input: usize, dim: usize) -> u64 {
        self.input(input).get(dim).copied().unwrap_or(0)
    }

    /// Sets `inputs[input].shape[dim]`; `false` when out of range.
    #[inline]
    pub fn set(&mut self, input: usize, dim: usize, value: u64) -> bool {
        if input >= self.inputs as usize {
            return false;
        }
        let start = if input == 0 { 0 } else { self.ends[input - 1] as usize };
        let end = self.ends[input] as usize;
        if start + dim >= end {
            return false;
        }
        self.dims[start + dim] = value;
        true
    }

    /// The nested form stored in cache keys.
    pub fn to_nested(&self) -> Vec<Vec<u64>> {
        (0..self.num_inputs()).map(|i| self.input(i).to_vec()).collect()
    }

    /// A well-mixed 64-bit hash of `(op_id, self)`. Not stable across
    /// library versions; only used in memory.
    #[inline]
    pub fn hash_with(&self, op_id: u64) -> u64 {
        const K: u64 = 0x9e37_79b9_7f4a_7c15;
        let used = if self.inputs == 0 { 0 } else { self.ends[self.inputs as usize - 1] as usize };
        let mut h = op_id ^ u64::from_le_bytes(self.ends).wrapping_mul(K);
        for d in &self.dims[..used] {
            h = (h.rotate_left(5) ^ *d).wrapping_mul(K);
        }
        // splitmix64 finalizer
        h ^= h >> 30;
        h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
        h ^= h >> 27;
        h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
        h ^ (h >> 31)
    }
}
