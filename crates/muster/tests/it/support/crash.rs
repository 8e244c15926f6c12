//! The crash harness: the real `muster` binary as a separate process on a database of its own,
//! so a test can `kill -9` it in the middle of a load, start it again on the same data, and
//! check that nothing acknowledged was lost.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::support::Database;

/// A free TCP port on 127.0.0.1 (for a server started as a separate process).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port()
}

/// The `muster` binary on `db`, as the crash and command-line tests run it: a clean environment,
/// per-IP authentication, connection and socket limits off, the native TCP transport and the links
/// service on free ports (several servers run at once; their default ports are fixed) and logs
/// at `warn`. Callers add the command, flags and stdio their test needs.
/// A node of the cluster `prefix` on NATS at `nats` (tests share one NATS server; each
/// cluster its own subjects), beating every 100 ms and taking a node silent for 500 ms for dead.
pub fn cluster_node_command(db: &Database, nats: &str, prefix: &str, name: &str) -> Command {
    let mut command = muster_command(db);
    command
        .env("MUSTER_CLUSTER__NATS_URL", nats)
        .env("MUSTER_CLUSTER__SUBJECT_PREFIX", prefix)
        .env("MUSTER_CLUSTER__NODE_NAME", name)
        .env("MUSTER_CLUSTER__HEARTBEAT_MS", "100")
        .env("MUSTER_CLUSTER__FAILURE_TIMEOUT_MS", "500");
    command
}

pub fn muster_command(db: &Database) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_muster"));
    command
        .env_clear()
        .env("MUSTER_LIMITS__AUTH_PER_IP_PER_SEC", "0")
        .env("MUSTER_LIMITS__CONNECT_PER_IP_PER_SEC", "0")
        .env("MUSTER_LIMITS__MAX_SOCKETS_PER_IP", "0")
        .env("MUSTER_ROOMS__TCP_LISTEN", "127.0.0.1:0")
        .env("MUSTER_ENET__LISTEN", "127.0.0.1:0")
        .env("MUSTER_LINKS__LISTEN", "127.0.0.1:0")
        .env("MUSTER_GRPC__LISTEN", "127.0.0.1:0")
        .arg("--data-dir")
        .arg(db.data_dir())
        .arg("--log")
        .arg("warn");
    if !db.url.is_empty() {
        command.arg("--database-url").arg(&db.url);
    }
    command
}

/// Spawns `command` (a [`muster_command`]) listening on 127.0.0.1:`port`, its output discarded,
/// and waits until `/healthcheck` answers; panics if it never does.
pub async fn spawn_listening(mut command: Command, port: u16) -> Child {
    // Its log goes to a file, so that a server that does not come up says why.
    let log_path = std::env::temp_dir().join(format!("muster-test-{port}.log"));
    let log = std::fs::File::create(&log_path).expect("server log");
    let mut child = command
        .arg("--listen")
        .arg(format!("127.0.0.1:{port}"))
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("spawn muster");
    let http = reqwest::Client::new();
    // Up to 30 s: a start after a crash on a busy machine (recovery, migrations) can be slow.
    let mut exited = None;
    for _ in 0..1200 {
        if http
            .get(format!("http://127.0.0.1:{port}/healthcheck"))
            .send()
            .await
            .is_ok()
        {
            let _ = std::fs::remove_file(&log_path);
            return child;
        }
        if let Ok(Some(status)) = child.try_wait() {
            exited = Some(status);
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let _ = child.kill();
    let _ = child.wait();
    let text = std::fs::read_to_string(&log_path).unwrap_or_default();
    let tail: Vec<&str> = text.lines().rev().take(30).collect();
    let tail: Vec<&str> = tail.into_iter().rev().collect();
    panic!(
        "muster did not start listening on {port} ({}); its log ends:\n{}",
        exited.map_or("still running".to_string(), |s| format!("exited: {s}")),
        tail.join("\n")
    );
}

/// A `muster` binary serving on 127.0.0.1; killed (SIGKILL) when dropped.
pub struct Binary {
    pub child: Child,
    pub port: u16,
}

impl Binary {
    /// Starts the binary on `db` on a free port and waits until it answers.
    pub async fn start(db: &Database) -> Binary {
        Binary::run(muster_command(db), free_port()).await
    }

    /// Runs `command` (a [`muster_command`] the test adjusted, e.g. with more environment)
    /// listening on `port`.
    pub async fn run(command: Command, port: u16) -> Binary {
        let child = spawn_listening(command, port).await;
        Binary { child, port }
    }

    /// `http://host:port`.
    pub fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// SIGKILL, and reaps the process: no shutdown path runs.
    pub fn kill9(&mut self) {
        self.child.kill().expect("SIGKILL");
        self.child.wait().expect("reaped");
    }
}

impl Drop for Binary {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
