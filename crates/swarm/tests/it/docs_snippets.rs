//! The README's and the docs' snippets that are not Rust (the Rust ones are compiled as muster's
//! doctests: `crates/muster/src/lib.rs`), checked against the code, so that a renamed flag,
//! setting or message fails here rather than in a reader's terminal. It lives in swarm's tests
//! because they see both command lines: `muster`'s through its library, `swarm`'s binary.
//!
//! - every `muster` command line parses as the binary's, and `config`, `migrate` and `backup` run
//!   (on a temporary data directory);
//! - every `swarm` command line uses only flags its subcommand has, and the scenarios it names
//!   pass `swarm check`;
//! - TOML blocks load as Muster's settings (unknown keys refused, values validated), as the
//!   autoscaler's calendar, as swarm steps inside a scenario, or as a Cargo manifest;
//! - JSON blocks parse, realtime ones as envelopes; a block with an ellipsis (`…`) is a shape,
//!   not a value, and is skipped;
//! - the body a `curl -d` sends is JSON;
//! - `docs/extending.md` shows `crates/muster/examples/custom_server.rs` as it is.
//!
//! Other commands (`cargo build`, `kubectl`, `curl` itself, `scripts/test`) are not run here: they
//! need a cluster, a registry or the whole suite.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use pulldown_cmark::{CodeBlockKind, Event, Parser, Tag, TagEnd};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The documents whose snippets a reader copies.
fn documents() -> Vec<PathBuf> {
    let mut docs = vec![
        repo().join("README.md"),
        repo().join("crates/swarm/README.md"),
    ];
    let mut folder: Vec<PathBuf> = std::fs::read_dir(repo().join("docs"))
        .expect("docs/")
        .map(|entry| entry.expect("docs/ entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "md"))
        .collect();
    folder.sort();
    docs.extend(folder);
    docs
}

/// One fenced code block: its language (the info string's first word), where it starts, its text.
struct Snippet {
    lang: String,
    place: String,
    text: String,
}

fn snippets(path: &Path) -> Vec<Snippet> {
    let markdown = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    let name = path
        .strip_prefix(repo())
        .unwrap_or(path)
        .display()
        .to_string();
    let mut found = Vec::new();
    let mut open: Option<Snippet> = None;
    for (event, range) in Parser::new(&markdown).into_offset_iter() {
        match event {
            Event::Start(Tag::CodeBlock(CodeBlockKind::Fenced(info))) => {
                let line = markdown[..range.start].lines().count() + 1;
                open = Some(Snippet {
                    lang: info.split([',', ' ']).next().unwrap_or("").to_string(),
                    place: format!("{name}:{line}"),
                    text: String::new(),
                });
            }
            Event::Text(text) => {
                if let Some(snippet) = open.as_mut() {
                    snippet.text.push_str(&text);
                }
            }
            Event::End(TagEnd::CodeBlock) => found.extend(open.take()),
            _ => {}
        }
    }
    found
}

/// The shell commands of a block: continuation lines joined, comments and a trailing `&` cut,
/// `<placeholders>` and `$(…)` replaced by a word, leading `NAME=value` assignments dropped.
fn commands(text: &str) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    // A command continues over lines ending in `\` and over a quoted string's line breaks.
    let mut pending = String::new();
    for line in text.replace("\\\n", " ").lines() {
        let line = line.split(" #").next().unwrap_or("");
        if pending.is_empty() && line.trim_start().starts_with('#') {
            continue;
        }
        pending.push_str(line);
        pending.push('\n');
        let Some(words) = shlex::split(&placeholders(pending.trim().trim_end_matches('&'))) else {
            continue;
        };
        pending.clear();
        let words: Vec<String> = words
            .into_iter()
            .skip_while(|w| {
                w.split_once('=').is_some_and(|(name, _)| {
                    name.chars().all(|c| c.is_ascii_uppercase() || c == '_')
                })
            })
            .collect();
        if !words.is_empty() {
            found.push(words);
        }
    }
    assert!(pending.is_empty(), "unbalanced quotes: {pending}");
    found
}

/// `<a placeholder>` and `$(a command)` become one word.
fn placeholders(line: &str) -> String {
    let mut out = String::new();
    let mut rest = line;
    loop {
        let angle = rest.find('<').map(|i| (i, 1, '>'));
        let substitution = rest.find("$(").map(|i| (i, 2, ')'));
        let next = [angle, substitution]
            .into_iter()
            .flatten()
            .min_by_key(|(i, _, _)| *i);
        let Some((start, open, close)) = next else {
            out.push_str(rest);
            return out;
        };
        let Some(length) = rest[start + open..].find(close) else {
            out.push_str(rest);
            return out;
        };
        out.push_str(&rest[..start]);
        out.push_str("PLACEHOLDER");
        rest = &rest[start + open + length + 1..];
    }
}

/// Which program a command line runs, and its arguments after the program's name.
enum Program {
    Muster(Vec<String>),
    Swarm(Vec<String>),
    Curl(Vec<String>),
    Other,
}

fn program(words: &[String]) -> Program {
    let after_dashes = |words: &[String]| -> Vec<String> {
        match words.iter().position(|w| w == "--") {
            Some(i) => words[i + 1..].to_vec(),
            None => Vec::new(),
        }
    };
    let first = words[0].as_str();
    if first == "cargo" && words.get(1).map(String::as_str) == Some("run") {
        let package = words
            .iter()
            .position(|w| w == "-p")
            .and_then(|i| words.get(i + 1));
        return match package.map(String::as_str) {
            Some("muster") => Program::Muster(after_dashes(words)),
            Some("swarm") => Program::Swarm(after_dashes(words)),
            _ => Program::Other,
        };
    }
    match first.rsplit('/').next() {
        Some("muster") => Program::Muster(words[1..].to_vec()),
        Some("swarm") => Program::Swarm(words[1..].to_vec()),
        Some("curl") => Program::Curl(words[1..].to_vec()),
        _ => Program::Other,
    }
}

/// What the checks saw, so that the test cannot pass on documents it failed to read.
#[derive(Default, Debug)]
struct Seen {
    muster_lines: usize,
    muster_runs: usize,
    swarm_lines: usize,
    scenarios_checked: usize,
    settings: usize,
    calendars: usize,
    steps: usize,
    manifests: usize,
    envelopes: usize,
    json: usize,
    shapes_skipped: usize,
    curl_bodies: usize,
}

struct Checker {
    data_dir: tempfile::TempDir,
    seen: Seen,
    failures: Vec<String>,
}

impl Checker {
    fn fail(&mut self, place: &str, what: String) {
        self.failures.push(format!("{place}: {what}"));
    }

    fn muster(&mut self, place: &str, mut args: Vec<String>) {
        self.seen.muster_lines += 1;
        let mut line = vec!["muster".to_string()];
        line.extend(args.iter().cloned());
        if let Err(error) = muster::cli::check_args(&line) {
            return self.fail(
                place,
                format!("`{}` does not parse: {error}", line.join(" ")),
            );
        }
        // Run the commands that only touch a data directory, on a temporary one.
        let Some(command) = args.first().cloned() else {
            return;
        };
        if !["config", "migrate", "backup"].contains(&command.as_str()) {
            return;
        }
        let data_dir = self.data_dir.path().display().to_string();
        match args.iter().position(|a| a == "--data-dir") {
            Some(i) => args[i + 1] = data_dir.clone(),
            None => args.extend(["--data-dir".to_string(), data_dir.clone()]),
        }
        if command == "backup" {
            args[1] = format!("{data_dir}/backup-{}.sqlite3", self.seen.muster_runs);
        }
        let mut line = vec!["muster".to_string()];
        line.extend(args);
        let code = muster::cli::main_with_args(&line, muster::app::GameLogic::default());
        if code != ExitCode::SUCCESS {
            return self.fail(place, format!("`{}` failed: {code:?}", line.join(" ")));
        }
        if command == "backup" && !Path::new(&line[2]).exists() {
            return self.fail(place, format!("`{}` wrote no file", line.join(" ")));
        }
        self.seen.muster_runs += 1;
    }

    fn swarm(&mut self, place: &str, args: Vec<String>) {
        self.seen.swarm_lines += 1;
        let Some(sub) = args.first() else {
            return self.fail(place, "`swarm` without a subcommand".into());
        };
        let help = Command::new(env!("CARGO_BIN_EXE_swarm"))
            .args([sub.as_str(), "--help"])
            .output()
            .expect("swarm --help");
        if !help.status.success() {
            return self.fail(place, format!("`swarm {sub}` is not a subcommand"));
        }
        let help = String::from_utf8_lossy(&help.stdout).into_owned();
        for flag in args.iter().filter(|a| a.starts_with("--")) {
            let name = flag.split('=').next().unwrap_or(flag);
            if !help.contains(&format!("{name} ")) && !help.contains(&format!("{name}\n")) {
                self.fail(place, format!("`swarm {sub}` has no flag {name}"));
            }
        }
        for scenario in args.iter().filter(|a| a.ends_with(".toml")) {
            let out = Command::new(env!("CARGO_BIN_EXE_swarm"))
                .args(["check", scenario.as_str()])
                .current_dir(repo())
                .output()
                .expect("swarm check");
            if !out.status.success() {
                let why = String::from_utf8_lossy(&out.stderr).into_owned();
                self.fail(place, format!("`swarm check {scenario}`: {why}"));
            }
            self.seen.scenarios_checked += 1;
        }
    }

    fn curl(&mut self, place: &str, args: &[String]) {
        if let Some(i) = args.iter().position(|a| a == "-d" || a == "--data") {
            let body = &args[i + 1];
            if let Err(error) = serde_json::from_str::<serde_json::Value>(body) {
                self.fail(place, format!("curl's body is not JSON ({error}): {body}"));
            }
            self.seen.curl_bodies += 1;
        }
    }

    fn toml(&mut self, place: &str, text: &str) {
        if text.contains("[[event]]") {
            self.seen.calendars += 1;
            if let Err(error) = muster_autoscaler::calendar::Calendar::from_toml(text) {
                self.fail(place, format!("not a calendar: {error}"));
            }
        } else if text.contains("[[steps]]") {
            self.seen.steps += 1;
            let scenario = format!(
                "name = \"snippet\"\n[[phases]]\nname = \"hold\"\nduration_s = 10\nplayers = 10\n\
                 [[steps]]\ndo = \"authenticate\"\ncreate = true\n[[steps]]\ndo = \"connect\"\n\
                 {text}"
            );
            if let Err(error) = swarm::scenario::Scenario::parse(&scenario, place) {
                self.fail(place, format!("not swarm steps: {error}"));
            }
        } else if text.contains("[package]") {
            self.seen.manifests += 1;
            if let Err(error) = text.parse::<toml::Table>() {
                self.fail(place, format!("not TOML: {error}"));
            }
        } else {
            self.seen.settings += 1;
            let file = self.data_dir.path().join("snippet.toml");
            std::fs::write(&file, text).expect("write snippet.toml");
            if let Err(error) = muster::config::Config::load(Some(&file), &[]) {
                self.fail(place, format!("not Muster's settings: {error}"));
            }
        }
    }

    fn json(&mut self, place: &str, text: &str) {
        if text.contains('…') {
            self.seen.shapes_skipped += 1;
            return;
        }
        let value: serde_json::Value = match serde_json::from_str(text) {
            Ok(value) => value,
            Err(error) => return self.fail(place, format!("not JSON: {error}")),
        };
        self.seen.json += 1;
        if value.get("cid").is_some() {
            self.seen.envelopes += 1;
            if let Err(error) = muster_proto::realtime::decode_json(text.as_bytes()) {
                self.fail(place, format!("not a realtime envelope: {error}"));
            }
        }
    }
}

#[test]
fn the_docs_snippets_match_the_code() {
    let mut checker = Checker {
        data_dir: tempfile::tempdir().expect("tempdir"),
        seen: Seen::default(),
        failures: Vec::new(),
    };
    for document in documents() {
        for snippet in snippets(&document) {
            let place = snippet.place.as_str();
            match snippet.lang.as_str() {
                "sh" => {
                    for words in commands(&snippet.text) {
                        match program(&words) {
                            Program::Muster(args) => checker.muster(place, args),
                            Program::Swarm(args) => checker.swarm(place, args),
                            Program::Curl(args) => checker.curl(place, &args),
                            Program::Other => {}
                        }
                    }
                }
                "toml" => checker.toml(place, &snippet.text),
                "json" => checker.json(place, &snippet.text),
                _ => {}
            }
        }
    }
    // docs/extending.md shows the example project's code as it is.
    let example = std::fs::read_to_string(repo().join("crates/muster/examples/custom_server.rs"))
        .expect("custom_server.rs");
    let example: String = example
        .lines()
        .skip_while(|line| line.starts_with("//!") || line.is_empty())
        .map(|line| format!("{line}\n"))
        .collect();
    let shown = snippets(&repo().join("docs/extending.md"))
        .into_iter()
        .find(|snippet| snippet.lang == "rust")
        .expect("docs/extending.md shows its main");
    if shown.text != example {
        checker.fail(
            &shown.place,
            "differs from crates/muster/examples/custom_server.rs".into(),
        );
    }
    let seen = &checker.seen;
    eprintln!("{seen:?}");
    assert!(
        checker.failures.is_empty(),
        "stale snippets:\n{}",
        checker.failures.join("\n")
    );
    // The documents as they are today hold at least these; fewer means the reading broke.
    assert!(seen.muster_lines >= 6, "{seen:?}");
    assert_eq!(
        seen.muster_runs, 3,
        "config, migrate and backup run: {seen:?}"
    );
    assert!(
        seen.swarm_lines >= 3 && seen.scenarios_checked >= 3,
        "{seen:?}"
    );
    assert!(
        seen.settings >= 6 && seen.calendars >= 1 && seen.steps >= 2,
        "{seen:?}"
    );
    assert!(seen.envelopes >= 2 && seen.curl_bodies >= 1, "{seen:?}");
}
