//! Typed exchange on top of the byte collectives: values travel as JSON.
//!
//! The strategies exchange small structured values (hit flags, timings,
//! choices); these helpers save each of them the encoding and give one clear
//! error when a peer's bytes do not decode (e.g. ranks running different
//! versions). Nothing here waits or talks to other ranks by itself.

use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::Serialize;

use super::error::CollectiveError;
use super::Collective;

fn encode<T: Serialize>(tag: &str, value: &T) -> Result<Vec<u8>, CollectiveError> {
    serde_json::to_vec(value).map_err(|e| {
        CollectiveError::InvalidArgument(format!("cannot encode the value for {tag:?}: {e}"))
    })
}

pub(crate) fn decode<T: DeserializeOwned>(
    tag: &str,
    rank: u32,
    bytes: &[u8],
) -> Result<T, CollectiveError> {
    serde_json::from_slice(bytes).map_err(|e| CollectiveError::Decode {
        op: tag.into(),
        rank,
        reason: e.to_string(),
    })
}

/// JSON-typed versions of the collectives, for every [`Collective`] (also `dyn Collective`).
///
/// ```
/// use std::time::Duration;
/// use ranktune_collective::{CollectiveExt, LocalCollective};
///
/// let mut group = LocalCollective::group(1).unwrap();
/// let hits: Vec<bool> = group[0].all_gather_json("gemm hit?", &true, Duration::from_secs(5)).unwrap();
/// assert_eq!(hits, vec![true]);
/// ```
pub trait CollectiveExt: Collective {
    /// [`Collective::all_gather`] of a JSON-encoded value; every rank's value, in rank order.
    fn all_gather_json<T: Serialize + DeserializeOwned>(
        &mut self,
        tag: &str,
        value: &T,
        timeout: Duration,
    ) -> Result<Vec<T>, CollectiveError> {
        let bytes = encode(tag, value)?;
        let all = self.all_gather(tag, &bytes, timeout)?;
        all.iter().enumerate().map(|(rank, b)| decode(tag, rank as u32, b)).collect()
    }

    /// [`Collective::broadcast`] of a JSON-encoded value; the root passes `Some`.
    fn broadcast_json<T: Serialize + DeserializeOwned>(
        &mut self,
        tag: &str,
        root: u32,
        value: Option<&T>,
        timeout: Duration,
    ) -> Result<T, CollectiveError> {
        let bytes = match value {
            Some(v) if self.rank() == root => Some(encode(tag, v)?),
            _ => None,
        };
        let got = self.broadcast(tag, root, bytes.as_deref(), timeout)?;
        decode(tag, root, &got)
    }
}

impl<C: Collective + ?Sized> CollectiveExt for C {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::LocalCollective;
    use std::thread;

    const LONG: Duration = Duration::from_secs(30);

    #[test]
    fn typed_values_round_trip_on_every_rank() {
        let threads: Vec<_> = LocalCollective::group(3)
            .unwrap()
            .into_iter()
            .map(|mut c| {
                thread::spawn(move || {
                    let r = c.rank();
                    let times: Vec<(u32, f64)> =
                        c.all_gather_json("timings", &(r, f64::from(r) * 1.5), LONG).unwrap();
                    let dynamic: &mut dyn Collective = &mut c;
                    let choice = (r == 1).then(|| "tactic 7".to_string());
                    let got: String =
                        dynamic.broadcast_json("choice", 1, choice.as_ref(), LONG).unwrap();
                    (times, got)
                })
            })
            .collect();
        for t in threads {
            let (times, got) = t.join().unwrap();
            assert_eq!(times, vec![(0, 0.0), (1, 1.5), (2, 3.0)]);
            assert_eq!(got, "tactic 7");
        }
    }

    #[test]
    fn a_peer_sending_another_type_is_a_decode_error_naming_it() {
        let threads: Vec<_> = LocalCollective::group(2)
            .unwrap()
            .into_iter()
            .map(|mut c| {
                thread::spawn(move || {
                    if c.rank() == 0 {
                        c.all_gather_json("hit?", &true, LONG).map(|_| ())
                    } else {
                        c.all_gather_json("hit?", &"yes".to_string(), LONG).map(|_| ())
                    }
                })
            })
            .collect();
        let results: Vec<_> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        let err = results[0].as_ref().unwrap_err();
        assert!(matches!(err, CollectiveError::Decode { rank: 1, .. }), "{err}");
        assert!(err.to_string().contains("same ranktune version"), "{err}");
        assert!(matches!(
            results[1].as_ref().unwrap_err(),
            CollectiveError::Decode { rank: 0, .. }
        ));
    }
}
