//! The `muster` binary: the command line (`muster::cli`) with no game logic of a studio's own.
//! `muster` alone serves.

fn main() -> std::process::ExitCode {
    muster::cli::main_with(muster::app::GameLogic::default())
}
