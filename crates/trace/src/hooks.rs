//! Crash hooks: export the active session from a panic hook and on
//! SIGINT/SIGTERM.
//!
//! Both are installed at most once per process and stay installed; they look
//! up the active session when they fire and do nothing more when there is
//! none. The signal side uses `signal-hook`'s self-pipe iterator, so the
//! export runs on an ordinary thread, never inside a signal handler. After
//! exporting, that thread re-raises the signal with its default action
//! (`signal_hook::low_level::emulate_default_handler`), so the process still
//! dies *by* SIGINT/SIGTERM and its parent sees that. A program that handles
//! these signals itself should turn this off (`handle_signals: false` /
//! `RANKTUNE_TRACE_SIGNALS=0`) and call `stop()` on its own shutdown path.

use crate::active::active;
use crate::TraceError;
use std::sync::{Mutex, Once, PoisonError};
use std::time::Duration;

/// How long a hook waits for a concurrent export or for the session lock.
const PATIENCE: Duration = Duration::from_secs(10);

/// Installs the panic hook once; it exports, then runs the previous hook.
pub(crate) fn install_panic_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if let Some(core) = active(PATIENCE) {
                match core.export(PATIENCE) {
                    Ok(path) => eprintln!("ranktune: panic: trace written to {}", path.display()),
                    Err(e) => eprintln!("ranktune: panic: {e}"),
                }
            }
            previous(info);
        }));
    });
}

/// Installs the SIGINT/SIGTERM handler thread once.
pub(crate) fn install_signal_handler() -> Result<(), TraceError> {
    #[cfg(unix)]
    {
        static INSTALLED: Mutex<bool> = Mutex::new(false);
        let mut installed = INSTALLED.lock().unwrap_or_else(PoisonError::into_inner);
        if *installed {
            return Ok(());
        }
        use signal_hook::consts::{SIGINT, SIGTERM};
        let mut signals =
            signal_hook::iterator::Signals::new([SIGINT, SIGTERM]).map_err(TraceError::Signals)?;
        std::thread::Builder::new()
            .name("ranktune-trace-signals".into())
            .spawn(move || {
                if let Some(sig) = signals.forever().next() {
                    on_signal(sig);
                }
            })
            .map_err(TraceError::Signals)?;
        *installed = true;
    }
    Ok(())
}

#[cfg(unix)]
fn on_signal(sig: i32) {
    let name = if sig == signal_hook::consts::SIGINT { "SIGINT" } else { "SIGTERM" };
    if let Some(core) = active(PATIENCE) {
        match core.export(PATIENCE) {
            Ok(path) => eprintln!("ranktune: {name}: trace written to {}", path.display()),
            Err(e) => eprintln!("ranktune: {name}: {e}"),
        }
    }
    // Terminate by the signal's default action; exit with the shell's code
    // for it if that somehow returns.
    let _ = signal_hook::low_level::emulate_default_handler(sig);
    std::process::exit(128 + sig);
}
