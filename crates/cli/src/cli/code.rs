//! The command's exit status as a number: the same API as
//! `std::process::ExitCode` (`SUCCESS`, `FAILURE`, `From<u8>`), but readable,
//! so that the command can run inside another process's entry point (the
//! Python package's `ranktune` script) and hand its status back. Owns only
//! the type; which status means what is the commands'.

/// An exit status, 0 to 255.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExitCode(u8);

impl ExitCode {
    /// Exit status 0.
    pub const SUCCESS: ExitCode = ExitCode(0);
    /// Exit status 1.
    pub const FAILURE: ExitCode = ExitCode(1);

    /// The status as a number.
    pub fn code(self) -> u8 {
        self.0
    }
}

impl From<u8> for ExitCode {
    fn from(code: u8) -> ExitCode {
        ExitCode(code)
    }
}

impl From<ExitCode> for std::process::ExitCode {
    fn from(code: ExitCode) -> std::process::ExitCode {
        std::process::ExitCode::from(code.0)
    }
}
