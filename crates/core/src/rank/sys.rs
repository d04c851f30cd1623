//! Platform calls for a process's identity (the host name), isolated here.
//! Every part of ranktune that names the host (cache metadata, lock
//! holders, trace files, collective rendezvous) asks this one function.

/// This machine's host name, or `"unknown-host"` when the OS will not say.
pub fn host_name() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: `buf` is valid for `buf.len()` bytes; gethostname writes at most
    // that many and we only read up to the first NUL within the buffer.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast::<libc::c_char>(), buf.len()) };
    if rc != 0 {
        return "unknown-host".into();
    }
    let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
    match String::from_utf8_lossy(&buf[..end]).trim() {
        "" => "unknown-host".into(),
        name => name.to_string(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn hostname_is_not_empty() {
        assert!(!super::host_name().is_empty());
    }
}
