//! The `weir` binary: everything lives in the library (`weir::cli`).

fn main() -> std::process::ExitCode {
    weir::cli::main()
}
