//! The hot-path key: an op's bucketed shapes in a fixed-size, stack-only
//! value, and its hash.
//!
//! Owns the representation used by lookups. Nothing here may allocate except
//! the explicit conversions to and from the cache's nested `Vec` form.

/// Most inputs an op may have.
pub const MAX_INPUTS: usize = 8;
/// Most dims over all inputs of an op.
pub const MAX_DIMS: usize = 16;

/// The bucketed shapes of one op call: for each input, its dims.
///
/// A plain `Copy` value: building, hashing and comparing it never allocates.
/// Equality looks at the used dims only.
#[derive(Clone, Copy, Debug)]
pub struct BucketKey {
    dims: [u64; MAX_DIMS],
    ends: [u8; MAX_INPUTS],
    inputs: u8,
}

impl Default for BucketKey {
    #[inline]
    fn default() -> Self {
        BucketKey { dims: [0; MAX_DIMS], ends: [0; MAX_INPUTS], inputs: 0 }
    }
}

impl PartialEq for BucketKey {
    #[inline]
    fn eq(&self, other: &Self) -> bool {
        self.inputs == other.inputs
            && self.ends == other.ends
            && self.dims[..self.used()].iter().zip(&other.dims[..other.used()]).all(|(a, b)| a == b)
    }
}

impl Eq for BucketKey {}

impl std::hash::Hash for BucketKey {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        state.write_u64(self.hash_with(0));
    }
}

impl BucketKey {
    #[inline]
    fn used(&self) -> usize {
        if self.inputs == 0 {
            0
        } else {
            self.ends[self.inputs as usize - 1] as usize
        }
    }

    /// Appends one input's shape given as `usize` dims (the hot path's form);
    /// `false` when the limits are exceeded.
    #[inline]
    pub fn push_dims(&mut self, shape: &[usize]) -> bool {
        let i = self.inputs as usize;
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        let end = start + shape.len();
        if i >= MAX_INPUTS || end > MAX_DIMS {
            return false;
        }
        for (slot, d) in self.dims[start..end].iter_mut().zip(shape) {
            *slot = *d as u64;
        }
        self.ends[i] = end as u8;
        self.inputs += 1;
        true
    }

    /// Flat position of `inputs[input].shape[dim]`.
    #[inline]
    pub(crate) fn pos(&self, input: usize, dim: usize) -> Option<usize> {
        if input >= self.inputs as usize || input >= MAX_INPUTS {
            return None;
        }
        let start = if input == 0 { 0 } else { self.ends[input - 1] as usize };
        let p = start + dim;
        (p < self.ends[input] as usize).then_some(p)
    }

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

    #[inline]
    pub(crate) fn at(&self, p: usize) -> u64 {
        self.dims.get(p).copied().unwrap_or(0)
    }

    #[inline]
    pub(crate) fn set_at(&mut self, p: usize, v: u64) {
        if let Some(d) = self.dims.get_mut(p) {
            *d = v;
        }
    }

    /// `inputs[input].shape[dim]`, or 0 when out of range.
    #[inline]
    pub fn dim(&self, input: usize, dim: usize) -> u64 {
        match self.pos(input, dim) {
            Some(p) => self.dims[p],
            None => 0,
        }
    }

    /// Sets `inputs[input].shape[dim]`; `false` when out of range.
    #[inline]
    pub fn set(&mut self, input: usize, dim: usize, value: u64) -> bool {
        match self.pos(input, dim) {
            Some(p) => {
                self.dims[p] = value;
                true
            }
            None => false,
        }
    }

    /// The nested form stored in cache keys.
    pub fn to_nested(&self) -> Vec<Vec<u64>> {
        (0..self.num_inputs()).map(|i| self.input(i).to_vec()).collect()
    }

    /// A well-mixed 64-bit hash of `(op_id, self)`. Not stable across
    /// library versions; only used in memory.
    #[inline(always)]
    pub fn hash_with(&self, op_id: u64) -> u64 {
        // foldhash-style: one 64×64→128 folded multiply per two dims.
        #[inline(always)]
        fn fold(a: u64, b: u64) -> u64 {
            let m = u128::from(a) * u128::from(b);
            (m as u64) ^ ((m >> 64) as u64)
        }
        const K0: u64 = 0x243f_6a88_85a3_08d3;
        const K1: u64 = 0x1319_8a2e_0370_7344;
        const K2: u64 = 0xa409_3822_299f_31d0;
        let mut h = fold(op_id ^ K0, u64::from_le_bytes(self.ends) ^ K1);
        let used = self.used();
        let mut i = 0;
        while i + 1 < used {
            h = fold(self.dims[i] ^ h, self.dims[i + 1] ^ K1);
            i += 2;
        }
        if i < used {
            h = fold(self.dims[i] ^ h, K2);
        }
        fold(h ^ K2, K0)
    }
}
