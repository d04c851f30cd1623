//! One dimension value of a shape bucket, as every tuner we speak writes it.
//!
//! ranktune's own tuner writes sizes (non-negative integers), but the files
//! of other tuners hold more: TensorRT-LLM writes `-1` for every dimension a
//! constraint derives from others, `0` for non-tensor inputs, and a bucket
//! may hold a float such as `1.5`. [`Dim`] holds each of them exactly (a
//! float bit for bit), so a key read from a file is the key written back.
//!
//! This module owns the value type and its JSON form (an integer stays a
//! JSON integer, a float is written with a fraction or exponent so it reads
//! back as a float). It must never do I/O or decide what a dimension means.

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

/// One dimension of a shape bucket: an integer (any `u64`, or a negative
/// `i64` such as `-1`) or a finite float, kept bit-exact.
///
/// Integers and floats are different values: `1` and `1.0` are two keys,
/// as they are two keys in the files that write them.
///
/// ```
/// use ranktune_cache::Dim;
/// assert_eq!(Dim::from(64u64).to_string(), "64");
/// assert_eq!(Dim::from(-1i64).as_i64(), Some(-1));
/// let half = Dim::float(1.5).unwrap();
/// assert_eq!(half.as_f64(), Some(1.5));
/// assert_ne!(Dim::float(1.0).unwrap(), Dim::from(1u64));
/// assert_eq!(serde_json::to_string(&[Dim::from(-1i64), half]).unwrap(), "[-1,1.5]");
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Dim(Repr);

/// The canonical representation: each value has exactly one (a
/// non-negative integer is always `Size`), so derived equality, order and
/// hash are the value's.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Repr {
    /// A negative integer (always `< 0`).
    Negative(i64),
    /// A non-negative integer.
    Size(u64),
    /// A finite float's bits.
    Float(u64),
}

impl Dim {
    /// A size (a non-negative integer).
    pub const fn size(value: u64) -> Dim {
        Dim(Repr::Size(value))
    }

    /// A float dimension; `None` for infinities and NaN (JSON cannot
    /// write them, and no tuner uses them as a dimension).
    pub fn float(value: f64) -> Option<Dim> {
        value.is_finite().then_some(Dim(Repr::Float(value.to_bits())))
    }

    /// An integer dimension; `None` outside `i64::MIN..=u64::MAX`.
    pub fn int(value: i128) -> Option<Dim> {
        if value >= 0 {
            u64::try_from(value).ok().map(Dim::size)
        } else {
            i64::try_from(value).ok().map(|v| Dim(Repr::Negative(v)))
        }
    }

    /// The value as a size, when it is a non-negative integer.
    pub fn as_u64(&self) -> Option<u64> {
        match self.0 {
            Repr::Size(v) => Some(v),
            _ => None,
        }
    }

    /// The value as a signed integer, when it is an integer that fits.
    pub fn as_i64(&self) -> Option<i64> {
        match self.0 {
            Repr::Size(v) => i64::try_from(v).ok(),
            Repr::Negative(v) => Some(v),
            Repr::Float(_) => None,
        }
    }

    /// The value as an integer of any sign, when it is one.
    pub fn as_i128(&self) -> Option<i128> {
        match self.0 {
            Repr::Size(v) => Some(i128::from(v)),
            Repr::Negative(v) => Some(i128::from(v)),
            Repr::Float(_) => None,
        }
    }

    /// The value as a float, when it is one (bit-exact).
    pub fn as_f64(&self) -> Option<f64> {
        match self.0 {
            Repr::Float(bits) => Some(f64::from_bits(bits)),
            _ => None,
        }
    }

    /// Whether the value is a float (`1.0` is; `1` is not).
    pub fn is_float(&self) -> bool {
        matches!(self.0, Repr::Float(_))
    }
}

/// A bucket of sizes as [`Dim`]s: what ranktune's own tuner writes.
///
/// ```
/// use ranktune_cache::{sizes_bucket, Dim};
/// assert_eq!(sizes_bucket(&[vec![8, 4096]]), vec![vec![Dim::size(8), Dim::size(4096)]]);
/// ```
pub fn sizes_bucket(shapes: &[Vec<u64>]) -> Vec<Vec<Dim>> {
    shapes.iter().map(|dims| dims.iter().map(|&d| Dim::size(d)).collect()).collect()
}

/// The bucket as sizes, when every dim is a non-negative integer (`None`
/// when one is negative or a float: no ranktune tuner made that key).
pub fn bucket_sizes(bucket: &[Vec<Dim>]) -> Option<Vec<Vec<u64>>> {
    bucket.iter().map(|dims| dims.iter().map(Dim::as_u64).collect()).collect()
}

impl From<u64> for Dim {
    fn from(value: u64) -> Dim {
        Dim::size(value)
    }
}

impl From<u32> for Dim {
    fn from(value: u32) -> Dim {
        Dim::size(u64::from(value))
    }
}

impl From<i64> for Dim {
    fn from(value: i64) -> Dim {
        match u64::try_from(value) {
            Ok(v) => Dim::size(v),
            Err(_) => Dim(Repr::Negative(value)),
        }
    }
}

impl From<i32> for Dim {
    fn from(value: i32) -> Dim {
        Dim::from(i64::from(value))
    }
}

impl PartialEq<u64> for Dim {
    fn eq(&self, other: &u64) -> bool {
        self.as_u64() == Some(*other)
    }
}

/// Integers in decimal; a float as Rust's shortest round-trip form, always
/// with a fraction or exponent (`1.0`, `1.5`, `1e-7`), so it never reads
/// as an integer.
impl fmt::Display for Dim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Repr::Size(v) => write!(f, "{v}"),
            Repr::Negative(v) => write!(f, "{v}"),
            Repr::Float(bits) => write!(f, "{:?}", f64::from_bits(bits)),
        }
    }
}

impl fmt::Debug for Dim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl Serialize for Dim {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            Repr::Size(v) => s.serialize_u64(v),
            Repr::Negative(v) => s.serialize_i64(v),
            // serde_json writes a finite f64 with a fraction or exponent
            // (`1.0`, `1e-7`), so it reads back as a float.
            Repr::Float(bits) => s.serialize_f64(f64::from_bits(bits)),
        }
    }
}

impl<'de> Deserialize<'de> for Dim {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Dim, D::Error> {
        struct DimVisitor;
        impl Visitor<'_> for DimVisitor {
            type Value = Dim;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a dimension (an integer or a finite number)")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Dim, E> {
                Ok(Dim::size(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Dim, E> {
                Ok(Dim::from(v))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Dim, E> {
                Dim::float(v).ok_or_else(|| E::custom(format!("dimension {v} is not finite")))
            }
        }
        d.deserialize_any(DimVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_round_trips_every_kind_exactly() {
        let text = "[0,-1,1.5,18446744073709551615,-9223372036854775808,1.0,0.1,1e-7,-0.0]";
        let dims: Vec<Dim> = serde_json::from_str(text).unwrap();
        assert_eq!(dims[0], Dim::size(0));
        assert_eq!(dims[1].as_i64(), Some(-1));
        assert_eq!(dims[2].as_f64().map(f64::to_bits), Some(1.5f64.to_bits()));
        assert_eq!(dims[3].as_u64(), Some(u64::MAX));
        assert_eq!(dims[4].as_i64(), Some(i64::MIN));
        assert!(dims[5].is_float());
        assert_eq!(dims[6].as_f64().map(f64::to_bits), Some(0.1f64.to_bits()));
        let again: Vec<Dim> = serde_json::from_str(&serde_json::to_string(&dims).unwrap()).unwrap();
        assert_eq!(again, dims);
        assert_eq!(dims[8].as_f64().map(f64::to_bits), Some((-0.0f64).to_bits()));
    }

    #[test]
    fn one_representation_per_value() {
        assert_eq!(Dim::from(5i64), Dim::size(5));
        assert_eq!(Dim::int(5), Some(Dim::size(5)));
        assert_eq!(Dim::int(-1), Some(Dim::from(-1i64)));
        assert_eq!(Dim::int(i128::from(u64::MAX) + 1), None);
        assert_eq!(Dim::float(f64::INFINITY), None);
        assert_eq!(Dim::float(f64::NAN), None);
        assert!(serde_json::from_str::<Dim>("\"1\"").is_err());
    }

    #[test]
    fn display_tells_floats_from_ints() {
        assert_eq!(Dim::float(1.0).unwrap().to_string(), "1.0");
        assert_eq!(Dim::from(-1i64).to_string(), "-1");
        assert_eq!(Dim::size(7).to_string(), "7");
    }

    #[test]
    fn sizes_convert_both_ways() {
        let b = sizes_bucket(&[vec![1, 2], vec![]]);
        assert_eq!(bucket_sizes(&b), Some(vec![vec![1, 2], vec![]]));
        assert_eq!(bucket_sizes(&[vec![Dim::from(-1i64)]]), None);
    }
}
