//! The binary's life: migrations, configuration errors, and durability across `kill -9`.

use crate::support;

use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use support::{muster_command, Backend, Binary, Database};
use tokio::sync::watch;

on_both_backends!(
    acknowledged_accounts_survive_kill_9,
    migrate_command_and_schema_check
);

/// Tasks creating device accounts (`device-{tag}-{writer}-{n}`), each until it is stopped or a
/// call fails (the server died); every acknowledged id is published on a watch channel, so a
/// test waits for a count instead of polling.
struct AccountLoad {
    acknowledged: watch::Sender<Vec<String>>,
    stop: Arc<AtomicBool>,
    writers: Vec<tokio::task::JoinHandle<()>>,
}

impl AccountLoad {
    fn start(base: String, tag: &str, writers: usize) -> AccountLoad {
        let (acknowledged, _) = watch::channel(Vec::new());
        let stop = Arc::new(AtomicBool::new(false));
        let http = reqwest::Client::new();
        let writers = (0..writers)
            .map(|w| {
                let (http, base, tag) = (http.clone(), base.clone(), tag.to_owned());
                let (acknowledged, stop) = (acknowledged.clone(), stop.clone());
                tokio::spawn(async move {
                    for i in 0..100_000 {
                        if stop.load(Ordering::Relaxed) {
                            return;
                        }
                        let id = format!("device-{tag}-{w}-{i}");
                        let response = http
                            .post(format!("{base}/v2/account/authenticate/device?create=true"))
                            .basic_auth("defaultkey", Some(""))
                            .json(&json!({ "id": id }))
                            .send()
                            .await;
                        match response {
                            Ok(r) if r.status() == 200 => acknowledged.send_modify(|a| a.push(id)),
                            _ => return,
                        }
                    }
                })
            })
            .collect();
        AccountLoad {
            acknowledged,
            stop,
            writers,
        }
    }

    /// Waits (at most 10 s) until `count` accounts are acknowledged.
    async fn until(&self, count: usize) {
        let mut seen = self.acknowledged.subscribe();
        tokio::time::timeout(Duration::from_secs(10), seen.wait_for(|a| a.len() >= count))
            .await
            .unwrap_or_else(|_| panic!("{count} acknowledged accounts within 10 s"))
            .expect("the load's channel");
    }

    /// The accounts acknowledged so far.
    fn acknowledged(&self) -> Vec<String> {
        self.acknowledged.borrow().clone()
    }

    /// Stops the writers, waits for them, and answers every acknowledged account.
    async fn finish(self) -> Vec<String> {
        self.stop.store(true, Ordering::Relaxed);
        for writer in self.writers {
            writer.await.expect("writer");
        }
        self.acknowledged.borrow().clone()
    }
}

/// The accounts of `ids` that the server at `base` does not have.
async fn missing_accounts(base: &str, ids: &[String]) -> Vec<String> {
    let http = reqwest::Client::new();
    let mut missing = Vec::new();
    for id in ids {
        let status = http
            .post(format!(
                "{base}/v2/account/authenticate/device?create=false"
            ))
            .basic_auth("defaultkey", Some(""))
            .json(&json!({ "id": id }))
            .send()
            .await
            .expect("request")
            .status();
        if status != 200 {
            missing.push(id.clone());
        }
    }
    missing
}

/// The binary with its output captured, for tests that read what it prints.
fn muster(db: &Database) -> Command {
    let mut command = muster_command(db);
    command.stdout(Stdio::piped()).stderr(Stdio::piped());
    command
}

async fn acknowledged_accounts_survive_kill_9(backend: Backend) {
    let db = Database::new(backend).await;
    let mut running = Binary::start(&db).await;
    let load = AccountLoad::start(running.base(), "crash", 16);
    // Kill in the middle of the load, once a fair number of accounts is acknowledged.
    load.until(300).await;
    running.kill9();
    let acknowledged = load.finish().await;
    assert!(
        acknowledged.len() > 50,
        "only {} writes acknowledged before the kill",
        acknowledged.len()
    );

    let running = Binary::start(&db).await;
    let lost = missing_accounts(&running.base(), &acknowledged).await;
    drop(running);
    assert!(
        lost.is_empty(),
        "{} of {} acknowledged accounts lost: {:?}",
        lost.len(),
        acknowledged.len(),
        &lost[..lost.len().min(5)]
    );
}

async fn migrate_command_and_schema_check(backend: Backend) {
    let db = Database::new(backend).await;
    // With migrations off at start, a fresh database is refused with a clear instruction.
    let refused = muster(&db)
        .env("MUSTER_DATABASE__MIGRATE_ON_START", "false")
        // Not the default port: another server may hold it.
        .arg("--listen")
        .arg("127.0.0.1:0")
        .output()
        .expect("run");
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("muster migrate"), "{stderr}");

    let first = muster(&db).arg("migrate").output().expect("run migrate");
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    let stdout = String::from_utf8_lossy(&first.stdout);
    let latest = muster::services::schema().latest();
    assert!(
        stdout.contains(&format!(
            "applied {latest} migration(s); schema at version {latest}"
        )),
        "{stdout}"
    );
    let second = muster(&db).arg("migrate").output().expect("run migrate");
    assert!(String::from_utf8_lossy(&second.stdout).contains("applied 0 migration(s)"));

    // A bad setting names itself.
    let bad = muster(&db)
        .env("MUSTER_SOCKET__PING_PERIOD_MS", "soon")
        .output()
        .expect("run");
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr)
        .to_lowercase()
        .contains("ping_period_ms"));
}

#[test]
fn config_command_prints_documented_defaults() {
    let output = Command::new(env!("CARGO_BIN_EXE_muster"))
        .arg("config")
        .output()
        .expect("run");
    assert!(output.status.success());
    let text = String::from_utf8_lossy(&output.stdout);
    let parsed: muster::config::Config = toml::from_str(&text).expect("valid TOML");
    assert_eq!(parsed, muster::config::Config::default());
}

#[test]
fn version_flag_names_the_build() {
    let output = Command::new(env!("CARGO_BIN_EXE_muster"))
        .arg("--version")
        .output()
        .expect("run");
    assert!(output.status.success());
    assert_eq!(
        String::from_utf8_lossy(&output.stdout).trim(),
        format!("muster {}", env!("CARGO_PKG_VERSION"))
    );
}

/// `log_format = "json"`: every log line is one JSON object (a start refused for want of
/// migrations is logged as an error).
#[tokio::test]
async fn json_log_lines() {
    let db = Database::new(Backend::Sqlite).await;
    let output = muster(&db)
        .env("MUSTER_DATABASE__MIGRATE_ON_START", "false")
        .env("MUSTER_LOG_FORMAT", "json")
        .arg("--listen")
        .arg("127.0.0.1:0")
        .output()
        .expect("run");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    let logged: Vec<serde_json::Value> = stderr
        .lines()
        .filter(|line| line.starts_with('{'))
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect();
    let error = logged
        .iter()
        .find(|line| line["level"] == "ERROR")
        .unwrap_or_else(|| panic!("no error line in {stderr}"));
    assert!(
        error["fields"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("muster migrate")),
        "{error}"
    );
    assert!(error["timestamp"].is_string(), "{error}");
}

/// `muster backup` under write load: the copy, restored into a fresh data directory, holds every
/// account acknowledged before the backup began; a backup never overwrites a file; on
/// PostgreSQL the command says to use PostgreSQL's own tools.
#[tokio::test]
async fn a_backup_taken_under_load_restores_every_acknowledged_write() {
    let db = Database::new(Backend::Sqlite).await;
    let running = Binary::start(&db).await;
    let load = AccountLoad::start(running.base(), "backup", 8);
    load.until(200).await;
    // What was acknowledged before the backup began must be in it; the load goes on meanwhile.
    let before = load.acknowledged();
    let copy = db.data_dir().join("backup.sqlite3");
    let output = muster(&db)
        .arg("backup")
        .arg(&copy)
        .output()
        .expect("run backup");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let answer: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON on stdout");
    assert!(answer["bytes"].as_u64().is_some_and(|b| b > 0), "{answer}");
    // The load was running before the backup and goes on after it.
    load.until(before.len() + 100).await;
    load.finish().await;
    drop(running);

    // A second backup to the same file is refused, and the first is left as it was.
    let again = muster(&db).arg("backup").arg(&copy).output().expect("run");
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("exists"));

    // Restore: the copy as the database of a fresh data directory.
    let restored = Database::new(Backend::Sqlite).await;
    std::fs::copy(&copy, restored.data_dir().join("muster.sqlite3")).expect("restore");
    let running = Binary::start(&restored).await;
    let lost = missing_accounts(&running.base(), &before).await;
    assert!(
        lost.is_empty(),
        "{} of {} accounts acknowledged before the backup are not in it: {:?}",
        lost.len(),
        before.len(),
        &lost[..lost.len().min(5)]
    );

    // PostgreSQL's backups are PostgreSQL's.
    let refused = muster_command(&restored)
        .arg("--database-url")
        .arg("postgres://nobody@127.0.0.1:1/none")
        .arg("backup")
        .arg(restored.data_dir().join("other.sqlite3"))
        .output()
        .expect("run");
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("pg_dump"));
}
