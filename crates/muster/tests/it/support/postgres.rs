//! A PostgreSQL cluster of a test's own, for tests that stop and restart the database (the
//! shared one of `TEST_POSTGRES_URL` serves every other test at once). Debian's binaries, as the
//! test command installs them; run as the `postgres` user when the tests run as root.

use std::path::PathBuf;
use std::process::{Command, Stdio};

pub struct PrivatePostgres {
    bin: PathBuf,
    dir: tempfile::TempDir,
    pub port: u16,
}

impl PrivatePostgres {
    /// initdb and start a cluster on a free port of 127.0.0.1; None when PostgreSQL is not
    /// installed (the caller decides whether that skips or fails the test).
    pub fn start() -> Option<PrivatePostgres> {
        let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
            .ok()?
            .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
            .filter(|bin| bin.join("initdb").exists())
            .collect();
        versions.sort();
        let bin = versions.pop()?;
        let dir = tempfile::Builder::new()
            .prefix("muster-test-pg")
            .tempdir_in("/tmp")
            .expect("temp dir");
        if is_root() {
            let status = Command::new("chown")
                .arg("postgres")
                .arg(dir.path())
                .status()
                .expect("chown");
            assert!(
                status.success(),
                "chown the cluster's directory to postgres"
            );
        }
        let port = super::free_port();
        let cluster = PrivatePostgres { bin, dir, port };
        cluster.run(
            "initdb",
            &[
                "-A",
                "trust",
                "-U",
                "postgres",
                "-E",
                "UTF8",
                "--no-sync",
                "-D",
            ],
            true,
        );
        cluster.start_again();
        Some(cluster)
    }

    /// The URL of the cluster's `postgres` database.
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// Stops the cluster at once, as a crash would (no checkpoint; recovery on the next start).
    pub fn stop_immediate(&self) {
        self.run("pg_ctl", &["-m", "immediate", "-w", "stop", "-D"], true);
    }

    pub fn start_again(&self) {
        let options = format!(
            "-c listen_addresses=127.0.0.1 -p {} -k {}",
            self.port,
            self.dir.path().display()
        );
        let log = self.dir.path().join("log");
        self.run(
            "pg_ctl",
            &[
                "-w",
                "-o",
                &options,
                "-l",
                &log.display().to_string(),
                "start",
                "-D",
            ],
            true,
        );
    }

    /// Runs one of the cluster's commands with the data directory as its last argument.
    fn run(&self, program: &str, args: &[&str], must_succeed: bool) {
        let data = self.dir.path().join("data");
        let mut command = if is_root() {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(self.bin.join(program));
            c
        } else {
            Command::new(self.bin.join(program))
        };
        let status = command
            .args(args)
            .arg(&data)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("run a PostgreSQL command");
        assert!(!must_succeed || status.success(), "{program} failed");
    }
}

impl Drop for PrivatePostgres {
    fn drop(&mut self) {
        self.run("pg_ctl", &["-m", "immediate", "stop", "-D"], false);
    }
}

fn is_root() -> bool {
    // /proc/self belongs to the process's effective user.
    std::fs::metadata("/proc/self")
        .map(|m| std::os::unix::fs::MetadataExt::uid(&m) == 0)
        .unwrap_or(false)
}
