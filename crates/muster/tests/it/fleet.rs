//! Rooms run by the studio's own game server (docs/fleet.md): the real `muster` binary starts
//! `clients/fleet-server/relay.py` — a Python server written against the Agones SDK's REST API —
//! as room processes: warm pool, cold starts, the queue at `max`, tickets redeemed by the game
//! server, players relayed over TCP, crashes, missed health, kill -9 of Muster (no orphans), and
//! bad configuration.

use crate::support;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};
use support::{eventually, free_port, muster_command, Backend, Binary, Database};

fn python() -> String {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join("python3"))
        .find(|p| p.is_file())
        .expect("python3 on PATH")
        .to_string_lossy()
        .into_owned()
}

fn relay_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../clients/fleet-server/relay.py")
}

/// A server kind `relay` running relay.py with `flags`; `settings` are more TOML lines of it.
fn fleet_toml(ports: &str, flags: &[&str], settings: &str) -> String {
    let mut args = vec![
        relay_script().to_string_lossy().into_owned(),
        "--port".into(),
        "{port}".into(),
    ];
    args.extend(flags.iter().map(|f| f.to_string()));
    format!(
        "[fleet]\nport_range = \"{ports}\"\n[fleet.servers.relay]\ncommand = \"{}\"\nargs = {}\n{settings}\n",
        python(),
        serde_json::to_string(&args).expect("args"),
    )
}

/// Muster on a fresh SQLite database with `toml` as its configuration file.
async fn muster_with(db: &Database, toml: &str) -> Binary {
    let path = db.data_dir().join("fleet.toml");
    std::fs::create_dir_all(db.data_dir()).expect("dir");
    std::fs::write(&path, toml).expect("config");
    let mut command = muster_command(db);
    command
        .arg("--config")
        .arg(&path)
        .env("MUSTER_ROOMS__ADMIN_KEY", "fleet-admin");
    Binary::run(command, free_port()).await
}

async fn metric(node: &Binary, name: &str) -> f64 {
    support::metric_at(&node.base(), name).await
}

async fn ready_processes(node: &Binary) -> f64 {
    metric(
        node,
        "muster_fleet_processes{server=\"relay\",state=\"Ready\"}",
    )
    .await
}

async fn player(node: &Binary, device: &str) -> String {
    support::device_session_at(&node.base(), device).await.0
}

/// `POST /v2/rooms` of the `relay` kind as `token`'s player: (status, body).
async fn create(node: &Binary, token: &str, capacity: u32) -> (u16, Value) {
    create_kind(node, token, "relay", capacity).await
}

async fn get(node: &Binary, token: &str, path: &str) -> (u16, Value) {
    let response = reqwest::Client::new()
        .get(format!("{}{path}", node.base()))
        .bearer_auth(token)
        .send()
        .await
        .expect("get");
    support::status_and_json(response).await
}

async fn destroy(node: &Binary, token: &str, room: &str) -> u16 {
    reqwest::Client::new()
        .delete(format!("{}/v2/rooms/{room}", node.base()))
        .bearer_auth(token)
        .send()
        .await
        .expect("delete")
        .status()
        .as_u16()
}

/// A player connected to a room's game server with its ticket: the line it was answered.
fn connect(info: &Value) -> (TcpStream, BufReader<TcpStream>, String) {
    assert_eq!(info["transport"], "tcp", "{info}");
    let address = format!("127.0.0.1:{}", info["port"]);
    let mut stream = TcpStream::connect(&address).expect("connect to the game server");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    writeln!(
        stream,
        "TICKET {}",
        info["ticket"].as_str().expect("ticket")
    )
    .expect("send");
    let mut reader = BufReader::new(stream.try_clone().expect("clone"));
    let mut answer = String::new();
    reader.read_line(&mut answer).expect("answer");
    (stream, reader, answer.trim().to_string())
}

fn read_line(reader: &mut BufReader<TcpStream>) -> String {
    let mut line = String::new();
    reader.read_line(&mut line).expect("line");
    line.trim().to_string()
}

#[tokio::test]
async fn a_room_runs_the_game_server_from_a_warm_pool_to_its_shutdown() {
    let db = Database::new(Backend::Sqlite).await;
    let node = muster_with(&db, &fleet_toml("41000-41019", &[], "buffer = 1\nmax = 4")).await;
    eventually("a warm process", || async {
        ready_processes(&node).await == 1.0
    })
    .await;
    let alice = player(&node, "fleet-alice").await;
    let bob = player(&node, "fleet-bob-device").await;

    // Taken from the pool, and the pool is refilled.
    let (status, room) = create(&node, &alice, 2).await;
    assert_eq!(status, 201, "{room}");
    let id = room["room_id"].as_str().expect("id").to_owned();
    assert_eq!(room["handler"], "relay");
    eventually("the pool refilled", || async {
        ready_processes(&node).await == 1.0
    })
    .await;
    assert_eq!(
        metric(
            &node,
            "muster_fleet_allocations_total{how=\"warm\",server=\"relay\"}"
        )
        .await,
        1.0
    );

    // Each player gets a ticket; the game server redeems it through its SDK port.
    let (_, info_a) = get(&node, &alice, &format!("/v2/rooms/{id}/connection")).await;
    let (_, info_b) = get(&node, &bob, &format!("/v2/rooms/{id}/connection")).await;
    let port = info_a["port"].as_u64().expect("port");
    assert!((41000..=41019).contains(&port), "{info_a}");
    let (mut a, mut a_reader, welcome_a) = connect(&info_a);
    assert!(welcome_a.starts_with("WELCOME "), "{welcome_a}");
    let (mut b, mut b_reader, welcome_b) = connect(&info_b);
    assert!(welcome_b.starts_with("WELCOME "), "{welcome_b}");
    let a_id = welcome_a.trim_start_matches("WELCOME ").to_string();
    // A ticket works once.
    let (_, _, again) = connect(&info_a);
    assert!(again.starts_with("DENIED"), "{again}");

    // A game server elsewhere (no SDK port of Muster's) checks tickets over HTTP with the
    // rooms admin key, once each; a player may not.
    let (_, info_c) = get(&node, &alice, &format!("/v2/rooms/{id}/connection")).await;
    let verify = |key: Option<&str>| {
        let request = reqwest::Client::new()
            .post(format!("{}/v2/rooms/{id}/tickets/verify", node.base()))
            .json(&json!({"ticket": info_c["ticket"]}));
        match key {
            Some(key) => request.basic_auth(key, None::<&str>),
            None => request.bearer_auth(&alice),
        }
        .send()
    };
    let (status, _) = support::status_and_json(verify(None).await.expect("verify")).await;
    assert_eq!(status, 403, "a player may not redeem tickets");
    let (status, who) =
        support::status_and_json(verify(Some("fleet-admin")).await.expect("verify")).await;
    assert_eq!(status, 200, "{who}");
    assert_eq!(who["user_id"], a_id.as_str());
    let (status, _) =
        support::status_and_json(verify(Some("fleet-admin")).await.expect("verify")).await;
    assert_ne!(status, 200, "once");

    // The server relays between them, and tracks them (players in the room's info).
    writeln!(a, "hello from a").expect("send");
    assert_eq!(read_line(&mut b_reader), format!("{a_id} hello from a"));
    writeln!(b, "hi a").expect("send");
    assert!(read_line(&mut a_reader).ends_with(" hi a"));
    eventually("two players tracked", || async {
        get(&node, &alice, &format!("/v2/rooms/{id}")).await.1["players"] == 2
    })
    .await;

    // Both leave: the server asks to shut down, its room ends with the reason.
    drop((a, a_reader, b, b_reader));
    eventually("the room ended", || async {
        get(&node, &alice, &format!("/v2/rooms/{id}")).await.0 != 200
    })
    .await;
    let (status, ended) = get(&node, &alice, &format!("/v2/rooms/{id}")).await;
    assert_ne!(status, 200);
    assert!(
        ended.to_string().contains("asked to shut down"),
        "{status} {ended}"
    );
    eventually("one process left, ready", || async {
        ready_processes(&node).await == 1.0
            && metric(
                &node,
                "muster_fleet_processes{server=\"relay\",state=\"Allocated\"}",
            )
            .await
                == 0.0
    })
    .await;
}

#[tokio::test]
async fn cold_starts_queue_at_the_maximum_and_time_out() {
    let db = Database::new(Backend::Sqlite).await;
    let node = muster_with(
        &db,
        &fleet_toml(
            "41020-41039",
            &[],
            "buffer = 0\nmin = 0\nmax = 1\nqueue_timeout_ms = 8000",
        ),
    )
    .await;
    let owner = player(&node, "fleet-owner").await;
    // No warm pool: the first create starts its process.
    let (status, first) = create(&node, &owner, 2).await;
    assert_eq!(status, 201, "{first}");
    assert_eq!(
        metric(
            &node,
            "muster_fleet_allocations_total{how=\"cold\",server=\"relay\"}"
        )
        .await,
        1.0
    );
    // At max: the next create waits, and gets a process once the first room is destroyed.
    let queued = {
        let base = node.base();
        let owner = owner.clone();
        tokio::spawn(async move {
            let response = reqwest::Client::new()
                .post(format!("{base}/v2/rooms"))
                .bearer_auth(&owner)
                .json(&json!({"handler": "relay", "capacity": 2}))
                .send()
                .await
                .expect("create");
            support::status_and_json(response).await
        })
    };
    eventually("the second create queued", || async {
        metric(&node, "muster_fleet_creates_queued{server=\"relay\"}").await == 1.0
    })
    .await;
    assert!(!queued.is_finished(), "waits while the fleet is full");
    let first_id = first["room_id"].as_str().expect("id");
    assert_eq!(destroy(&node, &owner, first_id).await, 204);
    let (status, second) = queued.await.expect("task");
    assert_eq!(status, 201, "{second}");
    assert_ne!(second["room_id"], first["room_id"]);
    // It was the queue that served it.
    assert_eq!(
        metric(
            &node,
            "muster_fleet_allocations_total{how=\"queued\",server=\"relay\"}"
        )
        .await,
        1.0
    );
    assert_eq!(
        metric(&node, "muster_fleet_creates_queued{server=\"relay\"}").await,
        0.0
    );

    // Nothing frees up: a waiting create gives up with a clear error after the queue timeout.
    let started = std::time::Instant::now();
    let (status, refused) = create(&node, &owner, 2).await;
    assert!(started.elapsed() >= Duration::from_secs(7), "waited");
    assert_ne!(status, 201);
    assert!(
        refused.to_string().contains("was free within 8000 ms"),
        "{refused}"
    );
}

#[tokio::test]
async fn a_crash_or_a_missed_health_ping_ends_the_room() {
    let db = Database::new(Backend::Sqlite).await;
    let node = muster_with(
        &db,
        &fleet_toml(
            "41040-41059",
            &["--crash-after", "0.3"],
            "buffer = 1\nmax = 2",
        ),
    )
    .await;
    let owner = player(&node, "fleet-crash").await;
    eventually("warm", || async { ready_processes(&node).await == 1.0 }).await;
    let (_, room) = create(&node, &owner, 2).await;
    let id = room["room_id"].as_str().expect("id").to_owned();
    let (_, info) = get(&node, &owner, &format!("/v2/rooms/{id}/connection")).await;
    let (_stream, mut reader, welcome) = connect(&info);
    assert!(welcome.starts_with("WELCOME"), "{welcome}");
    // The server crashes mid-match: the player's connection closes, the room ends.
    let mut rest = String::new();
    let _ = reader.read_line(&mut rest);
    assert_eq!(rest, "", "connection closed");
    eventually("the room ended", || async {
        get(&node, &owner, &format!("/v2/rooms/{id}")).await.0 != 200
    })
    .await;
    let (_, ended) = get(&node, &owner, &format!("/v2/rooms/{id}")).await;
    assert!(ended.to_string().contains("exited"), "{ended}");
    assert_eq!(
        metric(
            &node,
            "muster_fleet_exits_total{server=\"relay\",why=\"exited\"}"
        )
        .await,
        1.0
    );
    drop(node);

    // A server that never pings: unhealthy after health_timeout_ms, its room ends.
    let db = Database::new(Backend::Sqlite).await;
    let node = muster_with(
        &db,
        &fleet_toml(
            "41060-41079",
            &["--no-health"],
            "buffer = 1\nmax = 2\nhealth_timeout_ms = 800",
        ),
    )
    .await;
    let owner = player(&node, "fleet-unhealthy").await;
    eventually("warm", || async { ready_processes(&node).await == 1.0 }).await;
    let (status, room) = create(&node, &owner, 2).await;
    assert_eq!(status, 201, "{room}");
    let id = room["room_id"].as_str().expect("id").to_owned();
    eventually("the room ended", || async {
        get(&node, &owner, &format!("/v2/rooms/{id}")).await.0 != 200
    })
    .await;
    let (_, ended) = get(&node, &owner, &format!("/v2/rooms/{id}")).await;
    assert!(ended.to_string().contains("no health ping"), "{ended}");
}

fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|stat| !stat.contains(") Z "))
        .unwrap_or(false)
}

#[tokio::test]
async fn muster_killed_leaves_no_game_server_behind_and_starts_again() {
    let db = Database::new(Backend::Sqlite).await;
    let pids = tempfile::tempdir().expect("dir");
    let pid_dir = pids.path().to_string_lossy().into_owned();
    let toml = fleet_toml(
        "41080-41099",
        &["--pid-dir", &pid_dir],
        "buffer = 2\nmax = 4",
    );
    let mut node = muster_with(&db, &toml).await;
    eventually("two warm", || async { ready_processes(&node).await == 2.0 }).await;
    let running: Vec<u32> = std::fs::read_dir(pids.path())
        .expect("pids")
        .map(|e| {
            e.expect("entry")
                .file_name()
                .to_string_lossy()
                .parse()
                .expect("pid")
        })
        .collect();
    assert_eq!(running.len(), 2);
    assert!(running.iter().all(|p| alive(*p)));
    node.kill9();
    eventually("no orphan", || async { running.iter().all(|p| !alive(*p)) }).await;
    // On the same data, Muster starts again and fills its pool.
    let node = muster_with(&db, &toml).await;
    eventually("two warm again", || async {
        ready_processes(&node).await == 2.0
    })
    .await;
}

#[tokio::test]
async fn bad_configuration_and_an_exhausted_port_range_are_named() {
    // A command that does not exist: Muster does not start, and says why.
    let db = Database::new(Backend::Sqlite).await;
    std::fs::create_dir_all(db.data_dir()).expect("dir");
    let path = db.data_dir().join("fleet.toml");
    std::fs::write(
        &path,
        "[fleet.servers.ghost]\ncommand = \"/nonexistent/game-server\"\n",
    )
    .expect("config");
    let output = muster_command(&db)
        .arg("--config")
        .arg(&path)
        .arg("--listen")
        .arg(format!("127.0.0.1:{}", free_port()))
        .output()
        .expect("run");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("fleet.servers.ghost.command") && stderr.contains("not an executable"),
        "{stderr}"
    );

    // One port for two rooms: the second create is refused, naming the range. (The port is
    // one found free now: a fixed one may be some connection's ephemeral port meanwhile.)
    let db = Database::new(Backend::Sqlite).await;
    let port = free_port();
    let node = muster_with(
        &db,
        &fleet_toml(
            &format!("{port}-{port}"),
            &[],
            "buffer = 0\nmin = 0\nmax = 2",
        ),
    )
    .await;
    let owner = player(&node, "fleet-ports").await;
    let (status, _) = create(&node, &owner, 2).await;
    assert_eq!(status, 201);
    let (status, refused) = create(&node, &owner, 2).await;
    assert_ne!(status, 201);
    assert!(refused.to_string().contains("No free port"), "{refused}");
}

/// A stand-in for Agones' allocator, generated from the same `allocation.proto`: mutual TLS (a
/// client certificate signed by its CA is required), records each request, answers `answer`.
mod allocator {
    use std::sync::{Arc, Mutex};

    use muster::rooms::fleet::agones::proto::allocation_service_server::{
        AllocationService, AllocationServiceServer,
    };
    use muster::rooms::fleet::agones::proto::{
        allocation_response, AllocationRequest, AllocationResponse,
    };
    use tonic::transport::{Certificate, Identity, Server, ServerTlsConfig};

    #[derive(Clone, Default)]
    pub struct Fake {
        pub requests: Arc<Mutex<Vec<AllocationRequest>>>,
        pub exhausted: Arc<Mutex<bool>>,
    }

    #[tonic::async_trait]
    impl AllocationService for Fake {
        async fn allocate(
            &self,
            request: tonic::Request<AllocationRequest>,
        ) -> Result<tonic::Response<AllocationResponse>, tonic::Status> {
            self.requests
                .lock()
                .expect("lock")
                .push(request.into_inner());
            if *self.exhausted.lock().expect("lock") {
                return Err(tonic::Status::resource_exhausted(
                    "there is no available GameServer to allocate",
                ));
            }
            Ok(tonic::Response::new(AllocationResponse {
                game_server_name: "stormgate-x7k2p".into(),
                ports: vec![allocation_response::GameServerStatusPort {
                    name: "default".into(),
                    port: 7777,
                }],
                address: "10.1.2.3".into(),
                node_name: "gke-node-1".into(),
                source: "local".into(),
            }))
        }
    }

    /// Certificates: a CA, the allocator's (for "localhost") and a client's, all PEM.
    pub struct Pki {
        pub ca: String,
        pub server_cert: String,
        pub server_key: String,
        pub client_cert: String,
        pub client_key: String,
    }

    pub fn pki() -> Pki {
        use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
        let ca_key = KeyPair::generate().expect("key");
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("params");
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca = ca_params.self_signed(&ca_key).expect("ca");
        let issuer = Issuer::new(ca_params, &ca_key);
        let server_key = KeyPair::generate().expect("key");
        let server = CertificateParams::new(vec!["localhost".to_string()])
            .expect("params")
            .signed_by(&server_key, &issuer)
            .expect("server cert");
        let client_key = KeyPair::generate().expect("key");
        let client = CertificateParams::new(vec!["muster".to_string()])
            .expect("params")
            .signed_by(&client_key, &issuer)
            .expect("client cert");
        Pki {
            ca: ca.pem(),
            server_cert: server.pem(),
            server_key: server_key.serialize_pem(),
            client_cert: client.pem(),
            client_key: client_key.serialize_pem(),
        }
    }

    /// Serves `fake` on 127.0.0.1 with mutual TLS; its port.
    pub async fn serve(fake: Fake, pki: &Pki) -> u16 {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let tls = ServerTlsConfig::new()
            .identity(Identity::from_pem(&pki.server_cert, &pki.server_key))
            .client_ca_root(Certificate::from_pem(&pki.ca));
        let server = Server::builder()
            .tls_config(tls)
            .expect("tls")
            .add_service(AllocationServiceServer::new(fake));
        tokio::spawn(
            server.serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
        );
        port
    }
}

#[tokio::test]
async fn rooms_are_allocated_from_agones_through_its_allocator_over_mutual_tls() {
    let pki = allocator::pki();
    let fake = allocator::Fake::default();
    let port = allocator::serve(fake.clone(), &pki).await;
    let db = Database::new(Backend::Sqlite).await;
    let file = |name: &str, text: &str| write_file(&db, name, text);
    let toml = format!(
        "[fleet.agones.stormgate]\nallocator = \"https://localhost:{port}\"\nnamespace = \"games\"\n\
         match_labels = {{ \"agones.dev/fleet\" = \"stormgate\" }}\n\
         client_cert = \"{}\"\nclient_key = \"{}\"\nca_cert = \"{}\"\n",
        file("client.pem", &pki.client_cert),
        file("client.key", &pki.client_key),
        file("ca.pem", &pki.ca),
    );
    let node = muster_with(&db, &toml).await;
    let owner = player(&node, "fleet-agones-owner").await;
    let response = reqwest::Client::new()
        .post(format!("{}/v2/rooms", node.base()))
        .bearer_auth(&owner)
        .json(&json!({"handler": "stormgate", "capacity": 8, "params": {"map": "ruins"}}))
        .send()
        .await
        .expect("create");
    let (status, room) = support::status_and_json(response).await;
    assert_eq!(status, 201, "{room}");
    let id = room["room_id"].as_str().expect("id").to_owned();
    // The allocator was asked for a Ready GameServer of the fleet, with the room as annotations.
    {
        let requests = fake.requests.lock().expect("lock");
        assert_eq!(requests.len(), 1);
        let request = &requests[0];
        assert_eq!(request.namespace, "games");
        assert_eq!(
            request.game_server_selectors[0]
                .match_labels
                .get("agones.dev/fleet")
                .map(String::as_str),
            Some("stormgate")
        );
        let annotations = &request.metadata.as_ref().expect("metadata").annotations;
        assert_eq!(annotations.get("muster.dev/room-id"), Some(&id));
        assert_eq!(
            annotations.get("muster.dev/capacity").map(String::as_str),
            Some("8")
        );
        assert_eq!(
            annotations.get("muster.dev/param.map").map(String::as_str),
            Some("ruins")
        );
    }
    // Players are sent to the allocated address and port, with a ticket the server can verify.
    let (status, info) = get(&node, &owner, &format!("/v2/rooms/{id}/connection")).await;
    assert_eq!(status, 200, "{info}");
    assert_eq!(
        (info["host"].as_str(), info["port"].as_u64()),
        (Some("10.1.2.3"), Some(7777))
    );
    let verified = reqwest::Client::new()
        .post(format!("{}/v2/rooms/{id}/tickets/verify", node.base()))
        .basic_auth("fleet-admin", None::<&str>)
        .json(&json!({"ticket": info["ticket"]}))
        .send()
        .await
        .expect("verify");
    assert_eq!(verified.status(), 200);
    let (_, shown) = get(&node, &owner, &format!("/v2/rooms/{id}")).await;
    assert_eq!(shown["handler"], "stormgate");

    // No Ready GameServer: a clear refusal, nothing created.
    *fake.exhausted.lock().expect("lock") = true;
    let (status, refused) = create_kind(&node, &owner, "stormgate", 2).await;
    assert_ne!(status, 201);
    assert!(
        refused
            .to_string()
            .contains("No 'stormgate' game server is ready"),
        "{refused}"
    );
    drop(node);

    // A Muster that does not present the certificate the allocator's CA signed is refused.
    let other = allocator::pki();
    let db = Database::new(Backend::Sqlite).await;
    let file = |name: &str, text: &str| write_file(&db, name, text);
    let toml = format!(
        "[fleet.agones.stormgate]\nallocator = \"https://localhost:{port}\"\n\
         client_cert = \"{}\"\nclient_key = \"{}\"\nca_cert = \"{}\"\n",
        file("client.pem", &other.client_cert),
        file("client.key", &other.client_key),
        file("ca.pem", &pki.ca),
    );
    let node = muster_with(&db, &toml).await;
    let owner = player(&node, "fleet-agones-stranger").await;
    let before = fake.requests.lock().expect("lock").len();
    let (status, refused) = create_kind(&node, &owner, "stormgate", 2).await;
    assert_ne!(status, 201, "{refused}");
    assert_eq!(
        fake.requests.lock().expect("lock").len(),
        before,
        "never reached the service"
    );
}

/// Writes `text` to `name` in `db`'s data folder; the file's path.
fn write_file(db: &Database, name: &str, text: &str) -> String {
    std::fs::create_dir_all(db.data_dir()).expect("dir");
    let path = db.data_dir().join(name);
    std::fs::write(&path, text).expect("write");
    path.to_string_lossy().into_owned()
}

async fn create_kind(node: &Binary, token: &str, handler: &str, capacity: u32) -> (u16, Value) {
    let response = reqwest::Client::new()
        .post(format!("{}/v2/rooms", node.base()))
        .bearer_auth(token)
        .json(&json!({"handler": handler, "capacity": capacity}))
        .send()
        .await
        .expect("create");
    support::status_and_json(response).await
}

#[tokio::test]
async fn a_game_server_that_calls_ready_again_serves_another_room() {
    let db = Database::new(Backend::Sqlite).await;
    let node = muster_with(
        &db,
        &fleet_toml("41120-41139", &["--reuse"], "buffer = 1\nmax = 4"),
    )
    .await;
    eventually("warm", || async { ready_processes(&node).await == 1.0 }).await;
    let owner = player(&node, "fleet-reuse").await;
    let (_, first) = create(&node, &owner, 2).await;
    let first_id = first["room_id"].as_str().expect("id").to_owned();
    let (_, info) = get(&node, &owner, &format!("/v2/rooms/{first_id}/connection")).await;
    let (stream, reader, welcome) = connect(&info);
    assert!(welcome.starts_with("WELCOME"), "{welcome}");
    drop((stream, reader));
    // The game is over: the process is ready again, its first room ended.
    eventually("the first room ended", || async {
        get(&node, &owner, &format!("/v2/rooms/{first_id}")).await.0 != 200
    })
    .await;
    let (_, ended) = get(&node, &owner, &format!("/v2/rooms/{first_id}")).await;
    assert!(
        ended.to_string().contains("ready for another room"),
        "{ended}"
    );
    eventually("two ready", || async {
        ready_processes(&node).await == 2.0
    })
    .await;
    // The next room gets the same process (the one ready longest), on the same game port.
    let (_, second) = create(&node, &owner, 2).await;
    let second_id = second["room_id"].as_str().expect("id").to_owned();
    let (_, again) = get(&node, &owner, &format!("/v2/rooms/{second_id}/connection")).await;
    assert_eq!(again["port"], info["port"]);
    let (_, _, welcome) = connect(&again);
    assert!(
        welcome.starts_with("WELCOME"),
        "a ticket of the new room: {welcome}"
    );
}

/// The console shows a process room's game server output (what the game server printed), and
/// refuses the log of a room that is not a game server's.
#[tokio::test]
async fn the_console_shows_a_process_rooms_output() {
    let db = Database::new(Backend::Sqlite).await;
    let path = db.data_dir().join("fleet.toml");
    std::fs::create_dir_all(db.data_dir()).expect("dir");
    std::fs::write(&path, fleet_toml("41060-41069", &[], "buffer = 1\nmax = 2")).expect("config");
    let console_port = free_port();
    let mut command = muster_command(&db);
    command
        .arg("--config")
        .arg(&path)
        .env(
            "MUSTER_CONSOLE__LISTEN",
            format!("127.0.0.1:{console_port}"),
        )
        .env("MUSTER_CONSOLE__ADMIN_PASSWORD", "fleet-console-pw");
    let node = Binary::run(command, free_port()).await;
    let alice = player(&node, "fleet-console-alice").await;
    let (status, room) = create(&node, &alice, 2).await;
    assert_eq!(status, 201, "{room}");
    let id = room["room_id"].as_str().expect("id").to_owned();
    let console = format!("http://127.0.0.1:{console_port}");
    let http = reqwest::Client::new();
    let login = http
        .post(format!("{console}/api/login"))
        .json(&json!({"username": "admin", "password": "fleet-console-pw"}))
        .send()
        .await
        .expect("login");
    let cookie = login.headers()["set-cookie"]
        .to_str()
        .expect("cookie")
        .split(';')
        .next()
        .expect("pair")
        .to_owned();
    let log = |room: String| {
        let http = http.clone();
        let cookie = cookie.clone();
        let console = console.clone();
        async move {
            let r = http
                .get(format!("{console}/api/rooms/{room}/log"))
                .header("cookie", cookie)
                .send()
                .await
                .expect("log");
            let status = r.status().as_u16();
            (status, r.json::<Value>().await.unwrap_or_default())
        }
    };
    let (status, output) = log(id.clone()).await;
    assert_eq!(status, 200, "{output}");
    assert!(
        output["output"]
            .as_str()
            .expect("output")
            .contains("ready on port"),
        "{output}"
    );
    let (status, _) = log("not-a-room".into()).await;
    assert!((400..500).contains(&status));
}
