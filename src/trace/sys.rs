//! Platform calls for trace recording: OS thread ids and the host name.
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

/// This machine's host name, or `"unknown-host"` when the OS will not say.
pub(crate) fn host_name() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the pointer and length describe `buf`, which outlives the call.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return "unknown-host".to_string();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    let name = String::from_utf8_lossy(&buf[..end]).trim().to_string();
    if name.is_empty() {
        "unknown-host".to_string()
    } else {
        name
    }
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
    fn host_name_is_not_empty() {
        assert!(!super::host_name().is_empty());
    }
}
