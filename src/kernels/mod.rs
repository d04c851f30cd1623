//! Real CPU operators with several tactics each.
