//! `deploy/swarm/`'s manifests against the binary they run: every flag they pass exists, the
//! scenario they name is bundled and valid, and the ports and worker counts agree with each
//! other. (No Kubernetes cluster is reachable from the test machine; `scripts/netns-swarm.sh`
//! runs the same topology end to end across network interfaces.)

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(repo().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

fn help(sub: &str) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_swarm"))
        .args([sub, "--help"])
        .output()
        .expect("swarm --help");
    assert!(out.status.success());
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The value of the first `key: value` line (YAML scalars on one line).
fn scalar<'a>(text: &'a str, key: &str) -> &'a str {
    text.lines()
        .find_map(|l| l.trim().strip_prefix(&format!("{key}:")))
        .map(|v| v.split('#').next().unwrap_or("").trim())
        .unwrap_or_else(|| panic!("no {key}: line"))
}

/// The block-list items under the first `args:` line.
fn block_args(text: &str) -> Vec<String> {
    let mut lines = text.lines().skip_while(|l| l.trim() != "args:").skip(1);
    let mut args = Vec::new();
    for line in lines.by_ref() {
        match line.trim().strip_prefix("- ") {
            Some(item) => args.push(item.trim().to_string()),
            None => break,
        }
    }
    args
}

fn flags_exist(args: &[String], help: &str) {
    for flag in args.iter().filter(|a| a.starts_with("--")) {
        let name = flag.split('=').next().unwrap_or(flag);
        assert!(
            help.contains(&format!("{name} ")) || help.contains(&format!("{name}\n")),
            "{name} is not a flag of swarm:\n{help}"
        );
    }
}

#[test]
fn worker_job_runs_a_real_worker_command_behind_its_service() {
    let text = read("deploy/swarm/workers.yaml");
    let inline = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("args:"))
        .expect("worker args");
    let args: Vec<String> = serde_json::from_str(inline.trim()).expect("args as a list");
    assert_eq!(args[0], "worker");
    flags_exist(&args, &help("worker"));
    let listen = &args[args.iter().position(|a| a == "--listen").unwrap() + 1];
    let port = listen.rsplit(':').next().unwrap();
    assert_eq!(scalar(&text, "port"), port);
    assert_eq!(scalar(&text, "targetPort"), port);
    assert!(text.contains(&format!("containerPort: {port}")));
    assert!(
        text.contains("clusterIP: None"),
        "the Service must be headless"
    );
    assert_eq!(scalar(&text, "completionMode"), "Indexed");
    assert_eq!(scalar(&text, "completions"), scalar(&text, "parallelism"));
    assert!(
        args.contains(&"--once".to_string()),
        "a Job's pod must exit"
    );
}

#[test]
fn coordinator_job_runs_a_bundled_scenario_against_the_worker_service() {
    let workers = read("deploy/swarm/workers.yaml");
    let text = read("deploy/swarm/coordinator.yaml");
    let args = block_args(&text);
    assert_eq!(args[0], "run");
    flags_exist(&args, &help("run"));
    let scenario = args[1]
        .strip_prefix("/scenarios/")
        .expect("a bundled scenario");
    let check = Command::new(env!("CARGO_BIN_EXE_swarm"))
        .arg("check")
        .arg(repo().join("scenarios").join(scenario))
        .output()
        .expect("swarm check");
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stderr)
    );
    let value = |flag: &str| {
        args.iter()
            .find_map(|a| a.strip_prefix(&format!("{flag}=")))
            .unwrap_or_else(|| panic!("no {flag}"))
            .to_string()
    };
    let at = value("--workers-at");
    assert!(
        at.starts_with(&format!("{}.", scalar(&workers, "name"))),
        "{at}"
    );
    assert_eq!(at.rsplit(':').next().unwrap(), scalar(&workers, "port"));
    assert_eq!(value("--expect-workers"), scalar(&workers, "completions"));
    let dockerfile = read("deploy/swarm/Dockerfile");
    assert!(dockerfile.contains("cargo build --release -p swarm"));
    assert!(dockerfile.contains("COPY --from=build /src/scenarios /scenarios"));
}
