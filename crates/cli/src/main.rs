//! The `ranktune` command-line tool. All logic lives in the library
//! (`ranktune_cli`, `src/lib.rs`).

fn main() -> std::process::ExitCode {
    ranktune_cli::main().into()
}
