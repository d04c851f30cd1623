//! The `ranktune` command-line tool. All logic lives in the `cli` module.

mod cli;

fn main() -> std::process::ExitCode {
    cli::sys::restore_sigpipe();
    cli::main()
}
