//! `muster fleet-exec --parent PID -- COMMAND ARGS…`: how every game server is started. The
//! wrapper asks the kernel to SIGKILL it when its parent (Muster) dies, checks that parent is
//! still Muster (it may have died in between), then replaces itself with the game server,
//! which keeps the parent-death signal across the exec: a game server never outlives Muster.
//! (The signal follows the thread that started it: Muster starts them from its runtime's worker
//! threads, which live as long as it does.)

use std::os::unix::process::CommandExt as _;

use nix::sys::signal::Signal;

/// Becomes `command`; returns only if that fails, with why.
pub fn become_game_server(parent: u32, command: &[String]) -> String {
    let Some((program, args)) = command.split_first() else {
        return "no command given".into();
    };
    if let Err(error) = nix::sys::prctl::set_pdeathsig(Signal::SIGKILL) {
        return format!("cannot set the parent-death signal: {error}");
    }
    if nix::unistd::getppid().as_raw() as u32 != parent {
        return "Muster is gone".into();
    }
    let error = std::process::Command::new(program).args(args).exec();
    format!("cannot run {program:?}: {error}")
}
