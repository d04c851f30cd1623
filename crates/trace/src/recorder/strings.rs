//! Reused text buffers for args and messages.
//!
//! A `tracing` span's args are formatted when it opens and copied into the
//! event buffer when it closes; the buffer in between comes from this
//! thread's small pool instead of the allocator, so a steady stream of spans
//! with fields allocates nothing. The pool is bounded in count and in each
//! buffer's capacity; it never holds text that is still in use.

use std::cell::RefCell;

/// Buffers kept per thread.
const KEEP: usize = 32;
/// Buffers bigger than this go back to the allocator.
const KEEP_CAPACITY: usize = 4096;
/// Capacity of a fresh buffer (most args objects fit).
const FRESH_CAPACITY: usize = 128;

thread_local! {
    static POOL: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
}

/// An empty buffer, reused when this thread has one.
#[inline]
pub(crate) fn take() -> String {
    POOL.try_with(|p| p.try_borrow_mut().ok().and_then(|mut p| p.pop()))
        .ok()
        .flatten()
        .unwrap_or_else(|| String::with_capacity(FRESH_CAPACITY))
}

/// Returns `s` to this thread's pool (or frees it).
#[inline]
pub(crate) fn give(mut s: String) {
    if s.capacity() == 0 || s.capacity() > KEEP_CAPACITY {
        return;
    }
    s.clear();
    let _ = POOL.try_with(|p| {
        if let Ok(mut p) = p.try_borrow_mut() {
            if p.len() < KEEP {
                p.push(s);
            }
        }
    });
}

#[cfg(test)]
mod tests {
    #[test]
    fn buffers_come_back_empty_and_reused() {
        let mut s = super::take();
        s.push_str("{\"k\":1}");
        let ptr = s.as_ptr();
        super::give(s);
        let again = super::take();
        assert!(again.is_empty());
        assert_eq!(again.as_ptr(), ptr);
        super::give(String::with_capacity(1 << 20)); // too big: freed, not kept
        let next = super::take();
        assert!(next.capacity() <= super::KEEP_CAPACITY);
    }
}
