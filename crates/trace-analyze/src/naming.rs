//! How a merged trace names and numbers each rank's processes, shared by the
//! JSON and the Perfetto writers so both outputs show the same pids and
//! process names. Owns only these two rules; it never reads or writes files.

/// The merged pid of the `k`-th process (in order of first appearance) of
/// `rank`, when ranks are numbered below `stride`: `rank * 1000 + k` for
/// the first thousand, then `stride * 1000 + (k - 1000) * stride + rank`,
/// unique across ranks and the same however many workers merge.
pub fn merged_pid(rank: u32, k: u64, stride: u64) -> u64 {
    if k < 1000 {
        u64::from(rank) * 1000 + k
    } else {
        stride
            .saturating_mul(1000)
            .saturating_add((k - 1000).saturating_mul(stride))
            .saturating_add(u64::from(rank))
    }
}

/// The merged process name: "rank R · pid P", plus the process's own name
/// when it has one that says more than "rank R".
pub fn process_label(rank: u32, original_pid: &str, name: Option<&str>) -> String {
    let mut label = format!("rank {rank} · pid {original_pid}");
    if let Some(n) = name {
        if !n.is_empty() && n != format!("rank {rank}") {
            label.push_str(" · ");
            label.push_str(n);
        }
    }
    label
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pids_are_unique_past_a_thousand_processes() {
        let stride = 3;
        let mut seen = std::collections::HashSet::new();
        for rank in 0..3 {
            for k in 0..1500 {
                assert!(seen.insert(merged_pid(rank, k, stride)), "rank {rank} k {k}");
            }
        }
        assert_eq!(merged_pid(2, 5, stride), 2005);
        assert_eq!(process_label(1, "42", Some("rank 1")), "rank 1 · pid 42");
        assert_eq!(process_label(1, "42", Some("python")), "rank 1 · pid 42 · python");
    }
}
