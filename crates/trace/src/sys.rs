//! Platform calls for trace recording: OS thread ids.
//! The only module of `trace` that talks to libc; it must never hold state.

/// The calling thread's OS thread id (Linux `gettid`), or a process-unique
/// counter on platforms without one.
pub(crate) fn thread_id() -> u64 {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: gettid has no preconditions and cannot fail.
        let tid = unsafe { libc::gettid() };
        u64::try_from(tid).unwrap_or(0)
    }
    #[cfg(not(target_os = "linux"))]
    {
        use std::sync::atomic::{AtomicU64, Ordering};
        static NEXT: AtomicU64 = AtomicU64::new(1);
        NEXT.fetch_add(1, Ordering::Relaxed)
    }
}

/// Asks the OS to fault in the whole pages of `len` bytes at `ptr` now, in
/// one call (Linux `MADV_POPULATE_WRITE`, 5.14 and later), instead of one
/// page fault per 4 KiB page as the recorder first writes them. Only an
/// optimisation: ignored where unsupported. Does nothing elsewhere.
pub(crate) fn prefault(ptr: *const u8, len: usize) {
    #[cfg(target_os = "linux")]
    {
        const PAGE: usize = 4096;
        let Some(start) = (ptr as usize).checked_next_multiple_of(PAGE) else {
            return;
        };
        let end = (ptr as usize).saturating_add(len) / PAGE * PAGE;
        if end > start {
            // SAFETY: the range lies inside an allocation the caller owns
            // and has not handed out; populating writes no contents (the
            // pages read as before: fresh ones as zeros, reused ones as they
            // were) and changes no mapping. A failure is harmless.
            unsafe {
                libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_POPULATE_WRITE)
            };
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (ptr, len);
}

/// Asks the OS to back the 2 MiB-aligned part of `len` bytes at `ptr` with
/// huge pages (Linux `MADV_HUGEPAGE`; only an advice, ignored when
/// transparent huge pages are off). Does nothing elsewhere.
pub(crate) fn advise_huge_pages(ptr: *const u8, len: usize) {
    #[cfg(target_os = "linux")]
    {
        const HUGE: usize = 2 << 20;
        let Some(start) = (ptr as usize).checked_next_multiple_of(HUGE) else {
            return;
        };
        let end = (ptr as usize).saturating_add(len) / HUGE * HUGE;
        if end > start {
            // SAFETY: the range lies inside an allocation the caller owns;
            // MADV_HUGEPAGE changes no contents and no mapping, only how
            // the kernel backs the pages. A failure is harmless.
            unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE) };
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (ptr, len);
}

#[cfg(test)]
mod tests {
    #[test]
    fn thread_ids_differ_between_threads() {
        let here = super::thread_id();
        let there = std::thread::spawn(super::thread_id).join().unwrap();
        assert_ne!(here, there);
        assert_eq!(here, super::thread_id());
    }

    #[test]
    fn huge_page_advice_leaves_memory_usable() {
        let mut big = vec![0u8; 5 << 20];
        super::advise_huge_pages(big.as_ptr(), big.len());
        big[3 << 20] = 7;
        assert_eq!(big.iter().map(|&b| u64::from(b)).sum::<u64>(), 7);
        // Ranges too small to hold an aligned 2 MiB page are left alone.
        super::advise_huge_pages(big.as_ptr(), 4096);
    }
}
