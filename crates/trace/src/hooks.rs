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
//!
//! A signal that arrives while the session is being exported (by `stop()`,
//! drop or a checkpoint) waits for that export (the signal thread waits on
//! the export lock; the final export runs at most once, see `active`), then
//! ends the process by the signal. So that the process cannot slip out with
//! status 0 between the end of `stop()`'s export and the signal thread
//! waking up, the signal handler also records the signal in an atomic
//! (`PENDING`), and `stop()` ends the process itself when it finds one there.

use crate::active::active;
use crate::TraceError;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Once, OnceLock, PoisonError};
use std::time::Duration;

/// How long a hook waits for a concurrent export or for the session lock.
const PATIENCE: Duration = Duration::from_secs(10);

/// How long the signal thread waits for an export already under way (a
/// `stop()` of a big trace): the process must not die with a half-written
/// temp file, and a second signal does not hurry it (SIGKILL does).
const SIGNAL_PATIENCE: Duration = Duration::from_secs(120);

/// The SIGINT/SIGTERM that arrived, set inside the signal handler (0: none).
static PENDING: OnceLock<Arc<AtomicUsize>> = OnceLock::new();

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
        let pending = Arc::clone(PENDING.get_or_init(|| Arc::new(AtomicUsize::new(0))));
        for sig in [SIGINT, SIGTERM] {
            signal_hook::flag::register_usize(sig, Arc::clone(&pending), sig as usize)
                .map_err(TraceError::Signals)?;
        }
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
        // The final export: waits for one under way and writes nothing
        // after it (the session's complete file stays).
        match core.finish(SIGNAL_PATIENCE) {
            Ok(path) => eprintln!("ranktune: {name}: trace written to {}", path.display()),
            Err(e) => eprintln!("ranktune: {name}: {e}"),
        }
    }
    die_by(sig);
}

/// Ends the process by the SIGINT/SIGTERM the signal handler caught, if it
/// caught one: called by `stop()` after its final export, so that a signal
/// that arrived during that export ends the process even when the signal
/// thread has not woken up yet.
pub(crate) fn end_if_signalled() {
    #[cfg(unix)]
    if let Some(sig) = PENDING.get().map(|p| p.load(Ordering::SeqCst)).filter(|&s| s != 0) {
        die_by(i32::try_from(sig).unwrap_or(signal_hook::consts::SIGTERM));
    }
}

#[cfg(unix)]
fn die_by(sig: i32) -> ! {
    // Terminate by the signal's default action; exit with the shell's code
    // for it if that somehow returns.
    let _ = signal_hook::low_level::emulate_default_handler(sig);
    std::process::exit(128 + sig);
}
