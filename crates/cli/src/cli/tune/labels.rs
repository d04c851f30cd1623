//! Short labels for people: a tactic (`blocked(tile_m=4,tile_n=64)`) and a
//! bucket (`64x512,64x512`), used by the table, the failure lines and the
//! progress bar. The formatting itself lives in `ranktune_cache`, so that
//! `tune`, `cache show` and `cache diff` write them the same way.

/// `{"blocked":{"tile_m":4,"tile_n":64}}` → `blocked(tile_m=4,tile_n=64)`.
pub(super) fn tactic_label(t: &serde_json::Value) -> String {
    ranktune_cache::tactic_label(t)
}

/// A bucket, e.g. `64x512,64x512`.
pub(super) fn shape_label(bucket: &[Vec<u64>]) -> String {
    ranktune_cache::bucket_label(&ranktune_cache::sizes_bucket(bucket))
}
