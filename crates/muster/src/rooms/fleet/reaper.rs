//! No orphan game servers. Each process runs in its own process group, and its parent-death
//! signal is SIGKILL (set by `muster fleet-exec`, the wrapper it is started through), so Muster
//! killed with -9 takes its processes with it. As a second guard, every running process is
//! written down (`<data_dir>/fleet-processes`: pid and start time); a Muster that starts finds
//! the list its predecessor left and kills whatever of it still runs — a pid is only trusted
//! when its start time matches, so a recycled pid is never hit.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use parking_lot::Mutex;

pub struct Reaper {
    path: PathBuf,
    running: Mutex<BTreeMap<u32, u64>>,
}

/// A process's start time (clock ticks after boot, field 22 of `/proc/PID/stat`).
pub fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces: count from its end.
    let after = &stat[stat.rfind(')')? + 2..];
    after.split(' ').nth(19)?.parse().ok()
}

impl Reaper {
    /// Kills what a previous run left (as written in `path`); returns the reaper and how many.
    pub fn open(path: &Path) -> (Reaper, usize) {
        let mut reaped = 0;
        if let Ok(text) = std::fs::read_to_string(path) {
            for line in text.lines() {
                let mut fields = line.split_whitespace();
                let (Some(pid), Some(started)) = (fields.next(), fields.next()) else {
                    continue;
                };
                let (Ok(pid), Ok(started)) = (pid.parse::<u32>(), started.parse::<u64>()) else {
                    continue;
                };
                if start_time(pid) == Some(started)
                    && killpg(Pid::from_raw(pid as i32), Signal::SIGKILL).is_ok()
                {
                    reaped += 1;
                }
            }
        }
        let reaper = Reaper {
            path: path.to_path_buf(),
            running: Mutex::new(BTreeMap::new()),
        };
        reaper.write(&BTreeMap::new());
        (reaper, reaped)
    }

    pub fn started(&self, pid: u32) {
        let Some(at) = start_time(pid) else { return };
        let mut running = self.running.lock();
        running.insert(pid, at);
        self.write(&running);
    }

    pub fn ended(&self, pid: u32) {
        let mut running = self.running.lock();
        if running.remove(&pid).is_some() {
            self.write(&running);
        }
    }

    /// Rewrites the list (a temporary file renamed over it: never half written).
    fn write(&self, running: &BTreeMap<u32, u64>) {
        let text: String = running
            .iter()
            .map(|(pid, at)| format!("{pid} {at}\n"))
            .collect();
        let temporary = self.path.with_extension("tmp");
        let result =
            std::fs::write(&temporary, text).and_then(|()| std::fs::rename(&temporary, &self.path));
        if let Err(error) = result {
            tracing::warn!(path = %self.path.display(), %error, "fleet: cannot write the process list");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt as _;

    #[test]
    fn a_previous_runs_processes_are_killed_and_a_recycled_pid_is_not() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("fleet-processes");
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .process_group(0)
            .spawn()
            .expect("sleep");
        let pid = child.id();
        let at = start_time(pid).expect("start time");
        // A line for the child, one for a pid whose start time does not match, and junk.
        std::fs::write(&path, format!("{pid} {at}\n1 12345\nnot a line\n")).expect("write");
        let (reaper, reaped) = Reaper::open(&path);
        assert_eq!(reaped, 1);
        let status = child.wait().expect("wait");
        assert!(!status.success(), "killed");
        assert_eq!(std::fs::read_to_string(&path).expect("read"), "");
        // Written down while running, forgotten when ended.
        let me = std::process::id();
        reaper.started(me);
        assert!(std::fs::read_to_string(&path)
            .expect("read")
            .starts_with(&format!("{me} ")));
        reaper.ended(me);
        assert_eq!(std::fs::read_to_string(&path).expect("read"), "");
    }
}
