//! The `gradlift` command line: `check`, `run`, `grad`, `jvp` and `dump` over IR text
//! files.
//!
//! Everything lives in the `cli` module; this file only hands the process's exit
//! status back to the operating system. See `docs/cli.md` for how to use it.

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
