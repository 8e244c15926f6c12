//! Power cuts: every write Muster acknowledged survives a cut of the power, not only a
//! `kill -9` (which leaves the kernel's page cache in place, so a write never fsynced still
//! reads back after the restart).
//!
//! The real `muster` binary keeps its data — and on PostgreSQL the database cluster's data
//! directory too, with `fsync=on` — on a [`powercut::Disk`], which holds every write in memory
//! until it is fsynced. Each round starts the servers, checks that everything acknowledged
//! before the last cut is there, runs a concurrent load of writes (accounts, ledger rows by
//! server-to-server calls, chat messages, invite links, storage objects, leaderboard scores, and
//! on SQLite the world's claims),
//! kills the servers with SIGKILL in the middle of it, cuts the power and mounts the disk again
//! (the machine restarting). After the last round everything acknowledged is checked once more.
//! Each engine prints one JSON line of figures.
//!
//! Needs FUSE (`/dev/fuse`, `fusermount3`), PostgreSQL's binaries for the PostgreSQL half and
//! the Helsinki extract for the world's claims (`WORLD_TEST_PBF`, or the extract fetched under
//! `target/`): ignored unless asked for, and failing when run without them. See
//! docs/storage.md.

use crate::support;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use powercut::Disk;
use serde_json::{json, Value};
use support::{free_port, muster_command, Binary, Client, Database};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_tungstenite::tungstenite::Message;

/// Power cuts per engine.
const CUTS: usize = 20;
/// The key of server-to-server calls (`runtime.http_key`'s default).
const HTTP_KEY: &str = "defaulthttpkey";
/// The links service's API key in these runs.
const LINKS_KEY: &str = "power-cut-links-key";
/// The chat room every round writes to.
const ROOM: &str = "powercut";
/// Tasks creating accounts in each round's load.
const ACCOUNT_WRITERS: usize = 2;
/// Ledger writers, each for an account of its own.
const LEDGER_WRITERS: usize = 3;
/// Chat sockets sending messages.
const CHAT_WRITERS: usize = 2;
/// Invite-link writers.
const LINK_WRITERS: usize = 2;
/// Players writing storage objects, a new key each time.
const STORAGE_WRITERS: usize = 2;
/// Players adding 1 to their record on the [`BOARD`] leaderboard, one submission at a time.
const SCORE_WRITERS: usize = 2;
/// The leaderboard the score writers submit to (operator `incr`, from the settings).
const BOARD: &str = "powercut";
/// Most claims one round's world player makes (a player may own 1,000 towers).
const CLAIMS_PER_ROUND: usize = 40;
/// The longest wait for a server to come up or for the load to get going.
const WAIT: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs FUSE"]
async fn sqlite_acknowledged_writes_survive_power_cuts() {
    run(Machine::new(), Engine::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL and FUSE"]
async fn postgres_acknowledged_writes_survive_power_cuts() {
    run(Machine::new(), Engine::Postgres).await;
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Engine {
    Sqlite,
    Postgres,
}

impl Engine {
    fn name(self) -> &'static str {
        match self {
            Engine::Sqlite => "sqlite",
            Engine::Postgres => "postgres",
        }
    }
}

/// One engine's rounds: restart, check, load, kill, cut.
async fn run(mut machine: Machine, engine: Engine) {
    let started = Instant::now();
    machine.power_on();
    let mut servers = Servers::new(&machine, engine);
    let http = reqwest::Client::new();
    let mut all = Acknowledged::default();
    let mut unchecked = Acknowledged::default();
    let mut lost = Lost::default();
    let mut next_building = 0u32;
    let world = servers.map.is_some();
    for round in 0..CUTS {
        let node = servers.start().await;
        lost.add(check(&http, node, &unchecked).await);
        all.extend(std::mem::take(&mut unchecked));
        let load = Load::start(&http, node, engine, round, world, next_building).await;
        // The load runs a few hundred ms, a different span each round, so the kill finds it
        // at a different moment (this is the load's length, not a wait for anything).
        tokio::time::sleep(Duration::from_millis(150 + (round as u64 * 53) % 250)).await;
        servers.kill9();
        let (acked, next) = load.finish().await;
        next_building = next;
        machine.cut();
        machine.power_on();
        unchecked = acked;
    }
    let node = servers.start().await;
    all.extend(unchecked);
    // Everything once more: a later round's recovery must not have undone an earlier one's.
    lost.add(check(&http, node, &all).await);
    servers.kill9();
    println!(
        "{{\"engine\":\"{}\",\"cuts\":{CUTS},\"acknowledged\":{},\"lost\":{},\
         \"dropped_bytes\":{},\"fsyncs\":{},\"seconds\":{:.1},\"by_kind\":{}}}",
        engine.name(),
        all.len(),
        lost.len(),
        machine.dropped_bytes,
        machine.fsyncs,
        started.elapsed().as_secs_f64(),
        json!({
            "accounts": all.accounts.len(),
            "ledger": all.ledger.len(),
            "messages": all.messages.len(),
            "links": all.links.len(),
            "objects": all.objects.len(),
            "scores": all.scores.len(),
            "claims": all.claims.len(),
        })
    );
    assert!(
        lost.is_empty(),
        "{} of {} acknowledged writes lost to power cuts on {}: {}",
        lost.len(),
        all.len(),
        engine.name(),
        lost.sample()
    );
    // Each kind was written (the load did run).
    assert!(
        !all.accounts.is_empty()
            && !all.ledger.is_empty()
            && !all.messages.is_empty()
            && !all.links.is_empty()
            && !all.objects.is_empty()
            && !all.scores.is_empty()
            && (!world || !all.claims.is_empty()),
        "a kind of write was never acknowledged"
    );
    // Unsynced writes did meet the cuts: a missing fsync would have had something to lose.
    assert!(machine.dropped_bytes > 0, "no cut ever dropped a byte");
}

/// One engine's servers, their data on the disk: Muster, and on PostgreSQL a cluster of the
/// test's own.
struct Servers {
    postgres: Option<Postgres>,
    /// Muster's data directory (and database URL).
    db: Database,
    /// The world's map, on SQLite (outside the disk: the world's input, not its state).
    map: Option<PathBuf>,
    node: Option<Node>,
}

impl Servers {
    /// The engine's servers on the machine's disk (not started yet).
    fn new(machine: &Machine, engine: Engine) -> Servers {
        let postgres = match engine {
            Engine::Sqlite => None,
            Engine::Postgres => Some(Postgres::init(machine)),
        };
        let map = match engine {
            Engine::Sqlite => Some(world_map()),
            Engine::Postgres => None,
        };
        let db = Database {
            dir: tempfile::Builder::new()
                .prefix("muster")
                .tempdir_in(&machine.mnt)
                .expect("muster's data dir on the disk"),
            url: postgres.as_ref().map(Postgres::url).unwrap_or_default(),
        };
        Servers {
            postgres,
            db,
            map,
            node: None,
        }
    }

    /// Starts the servers (recovering from the last cut); Muster's node.
    async fn start(&mut self) -> &Node {
        if let Some(pg) = &mut self.postgres {
            pg.start().await;
        }
        self.node
            .insert(Node::start(&self.db, self.map.as_deref()).await)
    }

    /// SIGKILL to Muster and PostgreSQL: no shutdown path runs, nothing more is synced.
    fn kill9(&mut self) {
        if let Some(mut node) = self.node.take() {
            node.binary.kill9();
        }
        if let Some(pg) = &mut self.postgres {
            pg.kill9();
        }
    }
}

// --- The machine --------------------------------------------------------------------------

/// A power-cut disk over a backing directory of the test's own.
struct Machine {
    /// First, so that it is unmounted before `work` is removed.
    disk: Option<Disk>,
    work: tempfile::TempDir,
    backing: PathBuf,
    mnt: PathBuf,
    /// Totals over every cut.
    dropped_bytes: u64,
    fsyncs: u64,
}

impl Machine {
    /// A machine on a fresh power-cut disk (the test fails without FUSE).
    fn new() -> Machine {
        support::require_fuse();
        let work = tempfile::Builder::new()
            .prefix("muster-power-cut")
            .tempdir_in("/tmp")
            .expect("temp dir");
        // PostgreSQL, running as its own user, must reach the mount and its socket directory.
        std::fs::set_permissions(work.path(), std::fs::Permissions::from_mode(0o711))
            .expect("chmod");
        let backing = work.path().join("backing");
        let mnt = work.path().join("mnt");
        for dir in [&backing, &mnt] {
            std::fs::create_dir(dir).expect("dir");
        }
        std::fs::set_permissions(&backing, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        Machine {
            disk: None,
            work,
            backing,
            mnt,
            dropped_bytes: 0,
            fsyncs: 0,
        }
    }

    fn power_on(&mut self) {
        self.disk = Some(Disk::mount(&self.backing, &self.mnt).expect("mount the disk"));
    }

    /// The power cut; the servers must be dead already.
    fn cut(&mut self) {
        let disk = self.disk.take().expect("mounted");
        let stats = disk.cut().expect("cut the power");
        self.dropped_bytes += stats.dropped_bytes;
        self.fsyncs += stats.fsyncs;
    }
}

// --- PostgreSQL on the disk ---------------------------------------------------------------

/// A PostgreSQL cluster of the test's own with its data directory on the disk, fsync on
/// (the test command's shared cluster runs with fsync off), run as `postgres` when the test
/// runs as root. The server is started directly, as the leader of a process group of its own,
/// so that SIGKILL reaches every one of its processes at once.
struct Postgres {
    bin: PathBuf,
    data: PathBuf,
    sockets: PathBuf,
    log: PathBuf,
    port: u16,
    server: Option<Child>,
}

impl Postgres {
    /// initdb on the disk (synced: the cluster's starting state is durable); the test fails
    /// when PostgreSQL is not installed.
    fn init(machine: &Machine) -> Postgres {
        let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
            .into_iter()
            .flatten()
            .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
            .filter(|bin| bin.join("initdb").exists())
            .collect();
        versions.sort();
        let bin = versions.pop().expect(
            "this test needs PostgreSQL's binaries (Debian's postgresql; scripts/test installs it)",
        );
        let home = machine.mnt.join("pg");
        let sockets = machine.work.path().join("sockets");
        for dir in [&home, &sockets] {
            std::fs::create_dir(dir).expect("dir");
            if is_root() {
                let status = Command::new("chown")
                    .arg("postgres:postgres")
                    .arg(dir)
                    .status()
                    .expect("chown");
                assert!(status.success(), "chown {} to postgres", dir.display());
            }
        }
        let pg = Postgres {
            data: home.join("data"),
            log: machine.work.path().join("postgres.log"),
            bin,
            sockets,
            port: free_port(),
            server: None,
        };
        let status = pg
            .as_postgres("initdb")
            .args(["-A", "trust", "-U", "postgres", "-E", "UTF8", "-D"])
            .arg(&pg.data)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("initdb");
        assert!(status.success(), "initdb on the power-cut disk");
        pg
    }

    /// One of the cluster's programs, as `postgres` when the test runs as root.
    fn as_postgres(&self, program: &str) -> Command {
        if is_root() {
            let mut command = Command::new("setpriv");
            command
                .args([
                    "--reuid=postgres",
                    "--regid=postgres",
                    "--init-groups",
                    "--",
                ])
                .arg(self.bin.join(program));
            command
        } else {
            Command::new(self.bin.join(program))
        }
    }

    fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// Starts the server (recovering from the last cut) and waits until it takes connections.
    async fn start(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .expect("log");
        let mut command = self.as_postgres("postgres");
        command
            .arg("-D")
            .arg(&self.data)
            .args(["-p", &self.port.to_string(), "-k"])
            .arg(&self.sockets)
            .args([
                "-c",
                "listen_addresses=127.0.0.1",
                "-c",
                "fsync=on",
                "-c",
                "synchronous_commit=on",
                "-c",
                "full_page_writes=on",
                "-c",
                "max_connections=100",
                // After a crash PostgreSQL first syncs every file of its data directory
                // (about a thousand fsyncs here, most of each round's time), so that what the
                // dead server left in the page cache is durable before recovery builds on it.
                // After a cut nothing is pending, so one syncfs() does (a no-op on FUSE).
                "-c",
                "recovery_init_sync_method=syncfs",
            ])
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .process_group(0);
        self.server = Some(command.spawn().expect("start postgres"));
        let url = self.url();
        let deadline = Instant::now() + WAIT;
        while tokio_postgres::connect(&url, tokio_postgres::NoTls)
            .await
            .is_err()
        {
            let log = std::fs::read_to_string(&self.log).unwrap_or_default();
            assert!(
                Instant::now() < deadline,
                "PostgreSQL did not come up on the power-cut disk; its log:\n{log}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// SIGKILL to the server and every process it started, at once; reaps the server.
    fn kill9(&mut self) {
        let Some(mut server) = self.server.take() else {
            return;
        };
        let group = nix::unistd::Pid::from_raw(server.id() as i32);
        let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL);
        server.wait().expect("reap postgres");
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        self.kill9();
    }
}

fn is_root() -> bool {
    std::fs::metadata("/proc/self")
        .map(|m| std::os::unix::fs::MetadataExt::uid(&m) == 0)
        .unwrap_or(false)
}

// --- Muster on the disk -------------------------------------------------------------------

/// The Helsinki extract, when the test command or an earlier fetch put it in place.
fn world_map() -> PathBuf {
    if std::env::var_os("WORLD_TEST_PBF").is_some() {
        return muster_world::testdata::helsinki_extract();
    }
    let fetched =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/world-data/Helsinki.osm.pbf");
    assert!(
        fetched.exists(),
        "the world's claims need the Helsinki extract: set WORLD_TEST_PBF (scripts/test fetches it)"
    );
    fetched
}

/// The `muster` binary with its data on the disk.
struct Node {
    binary: Binary,
    links: String,
}

impl Node {
    async fn start(db: &Database, map: Option<&Path>) -> Node {
        let links_port = free_port();
        let mut command = muster_command(db);
        command
            .env("MUSTER_LINKS__LISTEN", format!("127.0.0.1:{links_port}"))
            .env("MUSTER_GRPC__LISTEN", "")
            .env("MUSTER_LINKS__API_KEY", LINKS_KEY)
            .env("MUSTER_LINKS__REQUESTS_PER_IP_PER_SEC", "0")
            .env("MUSTER_LIMITS__MAX_CONNECTIONS_PER_IP", "0")
            .env("MUSTER_CHAT__MESSAGES_PER_SEC", "0")
            // The players spend coins: they start with the seed economy test's 1,000,000.
            .env("MUSTER_ECONOMY__STARTING_WALLET", "{coins=1000000}")
            .env(
                "MUSTER_LEADERBOARDS__BOARDS",
                format!("[{{id=\"{BOARD}\",sort_order=\"desc\",operator=\"incr\"}}]"),
            );
        if let Some(map) = map {
            command
                .env("MUSTER_WORLD__MAP", map)
                .env("MUSTER_WORLD__SEED_TOWERS_PER_SHARD", "50")
                .env("MUSTER_WORLD__TILES_PER_SHARD", "2")
                .env("MUSTER_WORLD__CHECKPOINT_INTERVAL_S", "1")
                .env("MUSTER_WORLD__ACTIONS_PER_SEC", "0");
        }
        let binary = Binary::run(command, free_port()).await;
        Node {
            binary,
            links: format!("http://127.0.0.1:{links_port}"),
        }
    }

    fn base(&self) -> String {
        self.binary.base()
    }
}

// --- The load -----------------------------------------------------------------------------

/// The writes the servers acknowledged, each with what it was answered.
#[derive(Default)]
struct Acknowledged {
    /// (device id, user id).
    accounts: Vec<(String, String)>,
    /// (device id of the account, idempotency key, ledger id).
    ledger: Vec<(String, String, String)>,
    /// Message ids, all in [`ROOM`].
    messages: Vec<String>,
    /// (code, long URL).
    links: Vec<(String, String)>,
    /// (device id of the owner, key, version acknowledged).
    objects: Vec<(String, String, String)>,
    /// (device id of the owner, its score on [`BOARD`] as acknowledged).
    scores: Vec<(String, i64)>,
    /// (device id of the player, building claimed).
    claims: Vec<(String, u32)>,
}

impl Acknowledged {
    fn len(&self) -> usize {
        self.accounts.len()
            + self.ledger.len()
            + self.messages.len()
            + self.links.len()
            + self.objects.len()
            + self.scores.len()
            + self.claims.len()
    }

    fn extend(&mut self, other: Acknowledged) {
        self.accounts.extend(other.accounts);
        self.ledger.extend(other.ledger);
        self.messages.extend(other.messages);
        self.links.extend(other.links);
        self.objects.extend(other.objects);
        self.scores.extend(other.scores);
        self.claims.extend(other.claims);
    }
}

/// What each writer shares: the acknowledged writes, and a counter that ticks at each one
/// (the round waits on it instead of polling).
#[derive(Clone)]
struct Tally {
    acked: Arc<Mutex<Acknowledged>>,
    ticks: Arc<watch::Sender<u64>>,
}

impl Tally {
    fn record(&self, add: impl FnOnce(&mut Acknowledged)) {
        add(&mut self.acked.lock().expect("lock"));
        self.ticks.send_modify(|n| *n += 1);
    }
}

/// One round's writers, each writing until the server dies under it.
struct Load {
    tally: Tally,
    writers: Vec<JoinHandle<()>>,
    next_building: Arc<std::sync::atomic::AtomicU32>,
}

impl Load {
    /// Sets the round's players up, starts the writers, and returns once each kind of write
    /// (the world's claims aside: they may run out of buildings) has been acknowledged.
    async fn start(
        http: &reqwest::Client,
        node: &Node,
        engine: Engine,
        round: usize,
        world: bool,
        first_building: u32,
    ) -> Load {
        let (ticks, mut seen) = watch::channel(0u64);
        let tally = Tally {
            acked: Arc::default(),
            ticks: Arc::new(ticks),
        };
        let next_building = Arc::new(std::sync::atomic::AtomicU32::new(first_building));
        let base = node.base();
        let tag = format!("pc-{}-r{round}", engine.name());
        let mut writers = Vec::new();
        for t in 0..ACCOUNT_WRITERS {
            let (http, base, tally) = (http.clone(), base.clone(), tally.clone());
            let prefix = format!("{tag}-a{t}");
            writers.push(tokio::spawn(write_accounts(http, base, prefix, tally)));
        }
        for w in 0..LEDGER_WRITERS {
            let device = format!("{tag}-ledger{w}");
            let (_, user) = signed_up(http, &base, &device, &tally).await;
            let (http, base, tally) = (http.clone(), base.clone(), tally.clone());
            let prefix = format!("r{round}-w{w}");
            writers.push(tokio::spawn(write_ledger(
                http, base, device, user, prefix, tally,
            )));
        }
        let addr = base.trim_start_matches("http://").to_owned();
        for c in 0..CHAT_WRITERS {
            let name = format!("{tag}-chat{c}");
            let mut player = Client::connect_at(&addr, &name).await;
            tally.record(|a| {
                a.accounts
                    .push((format!("device-{name}"), player.user_id.clone()))
            });
            player
                .ok(
                    "channel_join",
                    json!({"target": ROOM, "type": 1, "persistence": true, "hidden": false}),
                    "channel",
                )
                .await;
            writers.push(tokio::spawn(write_messages(player, tally.clone())));
        }
        for t in 0..LINK_WRITERS {
            let (http, links, tally) = (http.clone(), node.links.clone(), tally.clone());
            let prefix = format!("{tag}/{t}");
            writers.push(tokio::spawn(write_links(http, links, prefix, tally)));
        }
        for s in 0..STORAGE_WRITERS {
            let device = format!("{tag}-storage{s}");
            let (token, _) = signed_up(http, &base, &device, &tally).await;
            let (http, base, tally) = (http.clone(), base.clone(), tally.clone());
            writers.push(tokio::spawn(write_objects(
                http, base, device, token, tally,
            )));
        }
        for s in 0..SCORE_WRITERS {
            let device = format!("{tag}-score{s}");
            let (token, _) = signed_up(http, &base, &device, &tally).await;
            let (http, base, tally) = (http.clone(), base.clone(), tally.clone());
            writers.push(tokio::spawn(write_scores(http, base, device, token, tally)));
        }
        if world {
            let device = format!("{tag}-world");
            let (token, _) = signed_up(http, &base, &device, &tally).await;
            let (http, base, tally, next) = (
                http.clone(),
                base.clone(),
                tally.clone(),
                next_building.clone(),
            );
            writers.push(tokio::spawn(write_claims(
                http, base, device, token, next, tally,
            )));
        }
        let acked = tally.acked.clone();
        let players = acked.lock().expect("lock").accounts.len();
        let going = tokio::time::timeout(
            WAIT,
            seen.wait_for(|_| {
                let a = acked.lock().expect("lock");
                a.accounts.len() > players
                    && !a.ledger.is_empty()
                    && !a.messages.is_empty()
                    && !a.links.is_empty()
                    && !a.objects.is_empty()
                    && !a.scores.is_empty()
            }),
        )
        .await;
        assert!(
            matches!(going, Ok(Ok(_))),
            "round {round}: some kind of write was never acknowledged"
        );
        Load {
            tally,
            writers,
            next_building,
        }
    }

    /// Waits for the writers (the server is dead: each stops at its next request); what they
    /// had acknowledged, and the first building the next round's player may claim.
    async fn finish(self) -> (Acknowledged, u32) {
        for writer in self.writers {
            writer.await.expect("writer");
        }
        let acked = std::mem::take(&mut *self.tally.acked.lock().expect("lock"));
        let next = self.next_building.load(std::sync::atomic::Ordering::SeqCst);
        (acked, next)
    }
}

/// A device account created (the server is up: this must work), counted as acknowledged;
/// its session token and user id.
async fn signed_up(
    http: &reqwest::Client,
    base: &str,
    device: &str,
    tally: &Tally,
) -> (String, String) {
    let (token, user) = authenticate(http, base, device, true)
        .await
        .unwrap_or_else(|| panic!("sign-up of {device} refused"));
    tally.record(|a| a.accounts.push((device.to_owned(), user.clone())));
    (token, user)
}

/// `POST /v2/account/authenticate/device`: the session token and user id, or `None`.
async fn authenticate(
    http: &reqwest::Client,
    base: &str,
    device: &str,
    create: bool,
) -> Option<(String, String)> {
    let response = http
        .post(format!(
            "{base}/v2/account/authenticate/device?create={create}"
        ))
        .basic_auth("defaultkey", Some(""))
        .json(&json!({ "id": device }))
        .send()
        .await
        .ok()?;
    if response.status() != 200 {
        return None;
    }
    let body: Value = response.json().await.ok()?;
    let token = body["token"].as_str()?.to_owned();
    let user = support::claims(&token)["uid"].as_str()?.to_owned();
    Some((token, user))
}

/// `POST /v2/rpc/{id}`, with a player's session token or (`None`) the server's HTTP key: the
/// status and the function's answer.
async fn rpc(
    http: &reqwest::Client,
    base: &str,
    token: Option<&str>,
    id: &str,
    payload: &Value,
) -> Option<(u16, Value)> {
    let mut request = http
        .post(format!("{base}/v2/rpc/{id}"))
        .json(&Value::String(payload.to_string()));
    request = match token {
        Some(token) => request.bearer_auth(token),
        None => request.query(&[("http_key", HTTP_KEY)]),
    };
    let response = request.send().await.ok()?;
    let status = response.status().as_u16();
    let body: Value = response.json().await.ok()?;
    let answer = body["payload"]
        .as_str()
        .and_then(|p| serde_json::from_str(p).ok())
        .unwrap_or(body);
    Some((status, answer))
}

async fn write_accounts(http: reqwest::Client, base: String, prefix: String, tally: Tally) {
    for i in 0.. {
        let device = format!("{prefix}-{i}");
        match authenticate(&http, &base, &device, true).await {
            Some((_, user)) => tally.record(|a| a.accounts.push((device, user))),
            None => return,
        }
    }
}

/// Spends and grants for one account, server to server (the HTTP key and `user_id`), each
/// with an idempotency key of its own.
async fn write_ledger(
    http: reqwest::Client,
    base: String,
    device: String,
    user: String,
    prefix: String,
    tally: Tally,
) {
    for i in 0.. {
        let key = format!("{prefix}-{i}");
        let (id, payload) = if i % 3 == 2 {
            (
                "inventory_grant",
                json!({"user_id": user, "item": "gem", "idempotency_key": key}),
            )
        } else {
            (
                "wallet_spend",
                json!({"user_id": user, "amount": 1, "idempotency_key": key}),
            )
        };
        let Some((200, answer)) = rpc(&http, &base, None, id, &payload).await else {
            return;
        };
        let Some(ledger_id) = answer["ledger_id"].as_str() else {
            return;
        };
        let ledger_id = ledger_id.to_owned();
        tally.record(|a| a.ledger.push((device.clone(), key, ledger_id)));
    }
}

/// Storage objects of one player, a new key each time.
async fn write_objects(
    http: reqwest::Client,
    base: String,
    device: String,
    token: String,
    tally: Tally,
) {
    for i in 0.. {
        let key = format!("save-{i}");
        let body = json!({"objects": [{"collection": "pc", "key": key, "value": json!({"i": i}).to_string()}]});
        let answer = http
            .put(format!("{base}/v2/storage"))
            .bearer_auth(&token)
            .json(&body)
            .send()
            .await;
        let Ok(answer) = answer else { return };
        if answer.status() != 200 {
            return;
        }
        let Ok(acks) = answer.json::<Value>().await else {
            return;
        };
        let Some(version) = acks["acks"][0]["version"].as_str() else {
            return;
        };
        let version = version.to_owned();
        tally.record(|a| a.objects.push((device.clone(), key, version)));
    }
}

/// One player's record on [`BOARD`], 1 added per submission; each answer is the record's score.
async fn write_scores(
    http: reqwest::Client,
    base: String,
    device: String,
    token: String,
    tally: Tally,
) {
    loop {
        let answer = http
            .post(format!("{base}/v2/leaderboard/{BOARD}"))
            .bearer_auth(&token)
            .json(&json!({"score": 1}))
            .send()
            .await;
        let Ok(answer) = answer else { return };
        if answer.status() != 200 {
            return;
        }
        let Ok(record) = answer.json::<Value>().await else {
            return;
        };
        let Some(score) = record["score"].as_str().and_then(|s| s.parse().ok()) else {
            return;
        };
        tally.record(|a| a.scores.push((device.clone(), score)));
    }
}

/// Persisted messages, each sent once the previous one is acknowledged.
async fn write_messages(mut player: Client, tally: Tally) {
    for i in 0.. {
        let cid = i.to_string();
        let send = json!({"cid": cid, "channel_message_send": {
            "channel_id": format!("2...{ROOM}"),
            "content": json!({"n": i}).to_string(),
        }});
        if player
            .socket
            .send(Message::text(send.to_string()))
            .await
            .is_err()
        {
            return;
        }
        // Other members' messages arrive on the socket too: wait for this send's answer.
        loop {
            let Some(Ok(frame)) = player.socket.next().await else {
                return;
            };
            let Message::Text(text) = frame else { continue };
            let Ok(reply) = serde_json::from_str::<Value>(&text) else {
                return;
            };
            if reply["cid"] != cid.as_str() {
                continue;
            }
            let Some(id) = reply["channel_message_ack"]["message_id"].as_str() else {
                return;
            };
            let id = id.to_owned();
            tally.record(|a| a.messages.push(id));
            break;
        }
    }
}

async fn write_links(http: reqwest::Client, links: String, prefix: String, tally: Tally) {
    for i in 0.. {
        let url = format!("https://game.example.com/{prefix}/{i}");
        let Ok(response) = http
            .post(format!("{links}/"))
            .bearer_auth(LINKS_KEY)
            .json(&json!({ "url": url }))
            .send()
            .await
        else {
            return;
        };
        if response.status() != 201 {
            return;
        }
        let Ok(body) = response.json::<Value>().await else {
            return;
        };
        let Some(code) = body["code"].as_str() else {
            return;
        };
        let code = code.to_owned();
        tally.record(|a| a.links.push((code, url)));
    }
}

/// The world's claims: buildings in order from `next`, skipping those already owned (by the
/// seeded NPCs), at most [`CLAIMS_PER_ROUND`].
async fn write_claims(
    http: reqwest::Client,
    base: String,
    device: String,
    token: String,
    next: Arc<std::sync::atomic::AtomicU32>,
    tally: Tally,
) {
    for _ in 0..CLAIMS_PER_ROUND {
        loop {
            let building = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let payload = json!({ "building": building });
            match rpc(&http, &base, Some(&token), "world_claim", &payload).await {
                Some((200, _)) => {
                    tally.record(|a| a.claims.push((device.clone(), building)));
                    break;
                }
                Some((409, _)) => continue,
                // No such building (all claimed), or the server is gone.
                _ => return,
            }
        }
    }
}

// --- The checks ---------------------------------------------------------------------------

/// Acknowledged writes not found after a restart, each named once (the last check looks at
/// everything again).
#[derive(Default)]
struct Lost(BTreeSet<String>);

impl Lost {
    fn len(&self) -> usize {
        self.0.len()
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn add(&mut self, other: Lost) {
        self.0.extend(other.0);
    }

    /// The first few, for the failure's message.
    fn sample(&self) -> String {
        self.0
            .iter()
            .take(12)
            .cloned()
            .collect::<Vec<_>>()
            .join("; ")
    }
}

/// How many checks run at once.
const CHECKS_AT_ONCE: usize = 16;

/// Every write of `acked` that the server on `node` does not show.
async fn check(http: &reqwest::Client, node: &Node, acked: &Acknowledged) -> Lost {
    let base = node.base();
    let base = base.as_str();
    let mut lost = Lost::default();
    // Accounts: each device signs in again, without creating, as the same user.
    let accounts = futures_util::stream::iter(&acked.accounts)
        .map(|(device, user)| async move {
            match authenticate(http, base, device, false).await {
                Some((_, got)) if got == *user => None,
                _ => Some(format!("account {device}")),
            }
        })
        .buffer_unordered(CHECKS_AT_ONCE)
        .collect::<Vec<_>>()
        .await;
    lost.0.extend(accounts.into_iter().flatten());
    // Ledger rows: each under its idempotency key, with the id it was answered with.
    let mut by_device: BTreeMap<&str, Vec<(&str, &str)>> = BTreeMap::new();
    for (device, key, id) in &acked.ledger {
        by_device.entry(device).or_default().push((key, id));
    }
    let ledgers = futures_util::stream::iter(by_device)
        .map(|(device, rows)| async move {
            let stored = match authenticate(http, base, device, false).await {
                Some((token, _)) => ledger(http, base, &token).await,
                None => HashMap::new(),
            };
            rows.into_iter()
                .filter(|(key, id)| stored.get(*key).map(String::as_str) != Some(*id))
                .map(|(key, _)| format!("ledger row {key} of {device}"))
                .collect()
        })
        .buffer_unordered(CHECKS_AT_ONCE)
        .collect::<Vec<Vec<String>>>()
        .await;
    lost.0.extend(ledgers.into_iter().flatten());
    // Messages: in the room's history.
    if !acked.messages.is_empty() {
        let stored = history(http, base).await;
        lost.0.extend(
            acked
                .messages
                .iter()
                .filter(|id| !stored.contains(*id))
                .map(|id| format!("message {id}")),
        );
    }
    // Links: each readable over the API, pointing where it did.
    let links = futures_util::stream::iter(&acked.links)
        .map(|(code, url)| async move {
            let read = http
                .get(format!("{}/api/links/{code}", node.links))
                .bearer_auth(LINKS_KEY)
                .send()
                .await;
            let found = match read {
                Ok(read) if read.status() == 200 => read
                    .json::<Value>()
                    .await
                    .is_ok_and(|link| link["url"] == url.as_str()),
                _ => false,
            };
            (!found).then(|| format!("link {code}"))
        })
        .buffer_unordered(CHECKS_AT_ONCE)
        .collect::<Vec<_>>()
        .await;
    lost.0.extend(links.into_iter().flatten());
    // Storage objects: each read back at the version it was acknowledged with.
    let mut by_owner: BTreeMap<&str, Vec<(&str, &str)>> = BTreeMap::new();
    for (device, key, version) in &acked.objects {
        by_owner.entry(device).or_default().push((key, version));
    }
    let objects = futures_util::stream::iter(by_owner)
        .map(|(device, objects)| async move {
            let mut stored = HashMap::new();
            if let Some((token, user)) = authenticate(http, base, device, false).await {
                for chunk in objects.chunks(100) {
                    let ids: Vec<Value> = chunk
                        .iter()
                        .map(|(key, _)| json!({"collection": "pc", "key": key, "user_id": user}))
                        .collect();
                    let read = http
                        .post(format!("{base}/v2/storage"))
                        .bearer_auth(&token)
                        .json(&json!({ "object_ids": ids }))
                        .send()
                        .await;
                    if let Ok(read) = read {
                        let body: Value = read.json().await.unwrap_or_default();
                        for object in body["objects"].as_array().into_iter().flatten() {
                            stored.insert(
                                object["key"].as_str().unwrap_or_default().to_owned(),
                                object["version"].as_str().unwrap_or_default().to_owned(),
                            );
                        }
                    }
                }
            }
            objects
                .into_iter()
                .filter(|(key, version)| stored.get(*key).map(String::as_str) != Some(*version))
                .map(|(key, _)| format!("object {key} of {device}"))
                .collect::<Vec<_>>()
        })
        .buffer_unordered(CHECKS_AT_ONCE)
        .collect::<Vec<Vec<String>>>()
        .await;
    lost.0.extend(objects.into_iter().flatten());
    // Scores: each player's record holds at least the last score it was acknowledged with.
    let mut best: BTreeMap<&str, i64> = BTreeMap::new();
    for (device, score) in &acked.scores {
        let top = best.entry(device).or_default();
        *top = (*top).max(*score);
    }
    let scores = futures_util::stream::iter(best)
        .map(|(device, acknowledged)| async move {
            let stored = match authenticate(http, base, device, false).await {
                Some((token, user)) => http
                    .get(format!("{base}/v2/leaderboard/{BOARD}?owner_ids={user}"))
                    .bearer_auth(&token)
                    .send()
                    .await
                    .ok()
                    .map(|r| r.json::<Value>()),
                None => None,
            };
            let stored = match stored {
                Some(body) => body.await.unwrap_or_default()["owner_records"][0]["score"]
                    .as_str()
                    .and_then(|s| s.parse::<i64>().ok()),
                None => None,
            };
            (stored.unwrap_or(0) < acknowledged)
                .then(|| format!("score {acknowledged} of {device} (stored {stored:?})"))
        })
        .buffer_unordered(CHECKS_AT_ONCE)
        .collect::<Vec<_>>()
        .await;
    lost.0.extend(scores.into_iter().flatten());
    // Claims: claiming the building again is refused (409: already claimed).
    let mut claims: HashMap<&str, Vec<u32>> = HashMap::new();
    for (device, building) in &acked.claims {
        claims.entry(device).or_default().push(*building);
    }
    for (device, buildings) in claims {
        let token = authenticate(http, base, device, false)
            .await
            .map(|(t, _)| t);
        for building in buildings {
            let payload = json!({ "building": building });
            let again = match &token {
                Some(token) => rpc(http, base, Some(token), "world_claim", &payload).await,
                None => None,
            };
            if !matches!(again, Some((409, _))) {
                lost.0
                    .insert(format!("claim of building {building} by {device}"));
            }
        }
    }
    lost
}

/// Every ledger row of the caller of `token`: idempotency key → ledger id.
async fn ledger(http: &reqwest::Client, base: &str, token: &str) -> HashMap<String, String> {
    support::ledger_at(http, base, token)
        .await
        .iter()
        .filter_map(|row| {
            let key = row["idempotency_key"].as_str()?;
            Some((key.to_owned(), row["id"].as_str()?.to_owned()))
        })
        .collect()
}

/// Every message id in [`ROOM`]'s history.
async fn history(http: &reqwest::Client, base: &str) -> HashSet<String> {
    let (token, _) = authenticate(http, base, "pc-history-reader", true)
        .await
        .expect("a reader's session");
    let mut ids = HashSet::new();
    let mut cursor = String::new();
    loop {
        let page: Value = http
            .get(format!(
                "{base}/v2/channel/2...{ROOM}?limit=100&cursor={cursor}"
            ))
            .bearer_auth(&token)
            .send()
            .await
            .expect("history")
            .json()
            .await
            .expect("history JSON");
        for message in page["messages"].as_array().into_iter().flatten() {
            if let Some(id) = message["message_id"].as_str() {
                ids.insert(id.to_owned());
            }
        }
        match page["next_cursor"].as_str() {
            Some(next) => cursor = next.to_owned(),
            None => return ids,
        }
    }
}
