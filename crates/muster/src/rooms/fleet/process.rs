//! One game server process: started through `muster fleet-exec` (see [`super::reaper`]) with its
//! game port and its own SDK port, supervised until it exits, stopped with SIGTERM then SIGKILL.
//! Its state is what the Agones SDK shows it (`crate::net::fleet_sdk`): a phase, labels, annotations,
//! players; every change bumps a version that watchers and waiting room creates follow.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use parking_lot::Mutex;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::rooms::fleet::config::ServerConfig;

/// Where a process is in its life (Agones' GameServer states, those that apply).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Phase {
    /// Started; has not called Ready yet.
    Scheduled,
    /// Called Ready: may be allocated.
    Ready,
    /// Called Reserve: not allocated, not to be allocated, until the reservation ends.
    Reserved,
    /// A room's (or it allocated itself).
    Allocated,
    /// Missed its health deadline.
    Unhealthy,
    /// Called Shutdown, or is being stopped.
    Shutdown,
}

impl Phase {
    pub fn name(self) -> &'static str {
        match self {
            Phase::Scheduled => "Scheduled",
            Phase::Ready => "Ready",
            Phase::Reserved => "Reserved",
            Phase::Allocated => "Allocated",
            Phase::Unhealthy => "Unhealthy",
            Phase::Shutdown => "Shutdown",
        }
    }
}

/// Why Muster stopped a process (the label of `muster_fleet_exits_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// The game server called the SDK's Shutdown.
    Asked,
    /// It missed its health deadline.
    Unhealthy,
    /// It did not call Ready in time.
    NotReady,
    /// Its room was destroyed, or Muster is shutting down.
    Stopped,
}

impl Stop {
    pub fn label(self) -> &'static str {
        match self {
            Stop::Asked => "shutdown",
            Stop::Unhealthy => "unhealthy",
            Stop::NotReady => "not_ready",
            Stop::Stopped => "stopped",
        }
    }
}

/// The room a process serves.
#[derive(Debug, Clone)]
pub struct Assignment {
    pub room_id: String,
    pub capacity: u32,
    pub owner: Option<Uuid>,
    pub params: HashMap<String, String>,
    pub created_at_ms: i64,
}

/// What the SDK and Muster know of a process.
#[derive(Debug, Clone)]
pub struct State {
    pub phase: Phase,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    pub players: BTreeSet<String>,
    pub player_capacity: i64,
    pub room: Option<Assignment>,
    pub last_health: Instant,
    pub reserved_until: Option<Instant>,
}

/// A game server process.
pub struct GameServer {
    pub id: Uuid,
    pub handler: String,
    pub port: u16,
    pub sdk_port: u16,
    pub pid: u32,
    pub created_at_ms: i64,
    state: Mutex<State>,
    /// Bumped on every change of `state`.
    version: watch::Sender<u64>,
    /// Cancelled once the process has exited.
    pub exited: CancellationToken,
    /// Why Muster stopped it, once it has (the first reason given).
    pub ending: Mutex<Option<(Stop, String)>>,
    logs: Mutex<VecDeque<u8>>,
    log_bytes: usize,
    grace: Duration,
}

/// Replaces the placeholders of `template`.
pub fn fill(template: &str, values: &[(String, String)]) -> String {
    let mut text = template.to_string();
    for (key, value) in values {
        text = text.replace(key.as_str(), value);
    }
    text
}

impl GameServer {
    /// Starts a process of `config` (named `handler`) on `port` through `launcher`'s
    /// `fleet-exec`, its SDK answering on `sdk_port`; `room` when it is started for one room
    /// (no warm pool).
    pub fn start(
        launcher: &std::path::Path,
        handler: &str,
        config: &ServerConfig,
        port: u16,
        sdk_port: u16,
        room: Option<Assignment>,
    ) -> std::io::Result<(Arc<GameServer>, tokio::process::Child)> {
        let id = Uuid::new_v4();
        let mut values = vec![
            ("{port}".to_string(), port.to_string()),
            ("{sdk_port}".to_string(), sdk_port.to_string()),
            ("{server_id}".to_string(), id.to_string()),
        ];
        if let Some(room) = &room {
            values.push(("{room_id}".into(), room.room_id.clone()));
            values.push(("{capacity}".into(), room.capacity.to_string()));
            for (k, v) in &room.params {
                values.push((format!("{{param.{k}}}"), v.clone()));
            }
        }
        let mut command = tokio::process::Command::new(launcher);
        command
            .arg("fleet-exec")
            .arg("--parent")
            .arg(std::process::id().to_string())
            .arg("--")
            .arg(&config.command)
            .args(config.args.iter().map(|a| fill(a, &values)));
        // Muster's own settings (secrets among them) are not the game server's business.
        for (key, _) in std::env::vars_os() {
            if key.to_string_lossy().starts_with("MUSTER_") {
                command.env_remove(&key);
            }
        }
        command
            .envs(config.env.iter().map(|(k, v)| (k, fill(v, &values))))
            .env("AGONES_SDK_HTTP_PORT", sdk_port.to_string())
            .env("MUSTER_GAME_PORT", port.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        if !config.working_dir.is_empty() {
            command.current_dir(&config.working_dir);
        }
        let mut child = command.spawn()?;
        let pid = child.id().unwrap_or(0);
        let now = Instant::now();
        let phase = Phase::Scheduled;
        let server = Arc::new(GameServer {
            id,
            handler: handler.to_string(),
            port,
            sdk_port,
            pid,
            created_at_ms: crate::base::clock::now_ms(),
            state: Mutex::new(State {
                phase,
                labels: BTreeMap::new(),
                annotations: BTreeMap::new(),
                players: BTreeSet::new(),
                player_capacity: room.as_ref().map_or(0, |r| i64::from(r.capacity)),
                room,
                last_health: now,
                reserved_until: None,
            }),
            version: watch::channel(0).0,
            exited: CancellationToken::new(),
            ending: Mutex::new(None),
            logs: Mutex::new(VecDeque::new()),
            log_bytes: config.log_bytes,
            grace: Duration::from_millis(config.shutdown_grace_ms),
        });
        if let Some(out) = child.stdout.take() {
            tokio::spawn(server.clone().keep_output(out));
        }
        if let Some(err) = child.stderr.take() {
            tokio::spawn(server.clone().keep_output(err));
        }
        Ok((server, child))
    }

    async fn keep_output(self: Arc<Self>, mut from: impl AsyncRead + Unpin) {
        let mut buffer = [0u8; 4096];
        while let Ok(n) = from.read(&mut buffer).await {
            if n == 0 {
                return;
            }
            let mut logs = self.logs.lock();
            logs.extend(&buffer[..n]);
            let excess = logs.len().saturating_sub(self.log_bytes);
            logs.drain(..excess);
        }
    }

    /// The most recent output (standard output and error, interleaved as read).
    pub fn output(&self) -> String {
        let logs = self.logs.lock();
        String::from_utf8_lossy(&logs.iter().copied().collect::<Vec<u8>>()).into_owned()
    }

    pub fn state(&self) -> State {
        self.state.lock().clone()
    }

    /// Changes the state; watchers are told.
    pub fn update<T>(&self, change: impl FnOnce(&mut State) -> T) -> T {
        let result = change(&mut self.state.lock());
        self.version.send_modify(|v| *v += 1);
        result
    }

    /// Follows the state's changes.
    pub fn watch(&self) -> watch::Receiver<u64> {
        self.version.subscribe()
    }

    pub fn phase(&self) -> Phase {
        self.state.lock().phase
    }

    /// Stops the process: SIGTERM to its group, SIGKILL after the grace. `why` is kept as the
    /// reason its room ended (the first reason given wins).
    pub fn stop(self: &Arc<Self>, kind: Stop, why: &str) {
        {
            let mut ending = self.ending.lock();
            if ending.is_none() {
                *ending = Some((kind, why.to_string()));
            }
        }
        self.update(|s| s.phase = Phase::Shutdown);
        if self.exited.is_cancelled() {
            return;
        }
        let group = Pid::from_raw(self.pid as i32);
        let _ = killpg(group, Signal::SIGTERM);
        let server = self.clone();
        tokio::spawn(async move {
            tokio::select! {
                () = server.exited.cancelled() => {}
                () = tokio::time::sleep(server.grace) => {
                    let _ = killpg(group, Signal::SIGKILL);
                }
            }
        });
    }
}
