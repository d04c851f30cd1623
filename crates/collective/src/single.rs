//! The trivial collective of a one-rank job: no other rank, nothing to wait for.

use std::time::Duration;

use super::engine::check_broadcast;
use super::error::CollectiveError;
use super::Collective;

/// The only rank of a one-rank job. Every call returns at once, after the
/// same argument checks as the multi-rank implementations.
#[derive(Clone, Copy, Debug, Default)]
pub struct SingleRank;

impl Collective for SingleRank {
    fn rank(&self) -> u32 {
        0
    }

    fn world_size(&self) -> u32 {
        1
    }

    fn all_gather(
        &mut self,
        _tag: &str,
        data: &[u8],
        _timeout: Duration,
    ) -> Result<Vec<Vec<u8>>, CollectiveError> {
        Ok(vec![data.to_vec()])
    }

    fn broadcast(
        &mut self,
        _tag: &str,
        root: u32,
        data: Option<&[u8]>,
        _timeout: Duration,
    ) -> Result<Vec<u8>, CollectiveError> {
        check_broadcast(0, 1, root, data)
    }

    fn barrier(&mut self, _tag: &str, _timeout: Duration) -> Result<(), CollectiveError> {
        Ok(())
    }

    fn describe(&self) -> String {
        "single rank (no other ranks)".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_rank_returns_its_own_data() {
        let t = Duration::from_secs(1);
        let mut c = SingleRank;
        assert_eq!(c.all_gather("g", b"ab", t).unwrap(), vec![b"ab".to_vec()]);
        assert_eq!(c.broadcast("b", 0, Some(b"x"), t).unwrap(), b"x");
        assert!(c.broadcast("b", 1, Some(b"x"), t).is_err());
        assert!(c.broadcast("b", 0, None, t).is_err());
        c.barrier("s", t).unwrap();
    }
}
