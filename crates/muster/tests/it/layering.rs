//! The layering check: every path into the crate (`use crate::…`, `crate::…`, and `super::…`
//! that climbs to the crate root) in `crates/muster/src` must respect the rules written in
//! `docs/ARCHITECTURE.md` — a module imports only the layers below its own, and a module of its
//! own layer only where a `sideways` line allows it. A failure names the file, the line and the
//! rule it breaks.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// The rules as `docs/ARCHITECTURE.md` states them.
struct Rules {
    /// Top-level module → its layer's rank (0 is the bottom).
    rank: HashMap<String, usize>,
    /// Allowed imports between modules of one layer: (from, to).
    sideways: Vec<(String, String)>,
}

impl Rules {
    fn parse(text: &str) -> Rules {
        let layers = fenced(text, "layers");
        let lines: Vec<&str> = layers.lines().filter(|l| !l.trim().is_empty()).collect();
        assert!(
            !lines.is_empty(),
            "docs/ARCHITECTURE.md has no ```layers block"
        );
        let mut rank = HashMap::new();
        for (i, line) in lines.iter().enumerate() {
            let (_, modules) = line
                .split_once(':')
                .unwrap_or_else(|| panic!("a layers line is `name: modules…`, got {line:?}"));
            for module in modules.split_whitespace() {
                let previous = rank.insert(module.to_owned(), lines.len() - 1 - i);
                assert!(previous.is_none(), "{module} is in two layers");
            }
        }
        let sideways = fenced(text, "sideways")
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|line| {
                let (pair, why) = line.split_once(':').unwrap_or((line, ""));
                assert!(
                    !why.trim().is_empty(),
                    "a sideways import needs its reason: {line:?}"
                );
                let (from, to) = pair
                    .split_once("->")
                    .unwrap_or_else(|| panic!("a sideways line is `a -> b: why`, got {line:?}"));
                (from.trim().to_owned(), to.trim().to_owned())
            })
            .collect();
        let rules = Rules { rank, sideways };
        for (from, to) in &rules.sideways {
            assert!(
                !rules.sideways.iter().any(|(a, b)| a == to && b == from),
                "{from} and {to} may not import each other: a sideways line goes one way (put what \
                 both need below both)"
            );
        }
        rules
    }

    /// Why `from` may not import `to`, if it may not.
    fn refusal(&self, from: &str, to: &str) -> Option<String> {
        if from == to {
            return None;
        }
        let rank = |m: &str| {
            *self.rank.get(m).unwrap_or_else(|| {
                panic!("module `{m}` is in no layer of docs/ARCHITECTURE.md: add it")
            })
        };
        let (mine, theirs) = (rank(from), rank(to));
        if theirs < mine {
            return None;
        }
        if theirs == mine && self.sideways.iter().any(|(a, b)| a == from && b == to) {
            return None;
        }
        Some(if theirs > mine {
            format!("`{from}` imports `{to}`, a layer above it")
        } else {
            format!("`{from}` imports `{to}` in its own layer with no `sideways` line saying why")
        })
    }
}

/// The body of the first ```name fenced block.
fn fenced(text: &str, name: &str) -> String {
    let open = format!("```{name}\n");
    let Some(start) = text.find(&open) else {
        return String::new();
    };
    let body = &text[start + open.len()..];
    body[..body.find("```").unwrap_or(body.len())].to_owned()
}

fn source_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            source_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The module path of a source file: `net/http/mod.rs` → [net, http]; `app.rs` → [app].
fn module_path(relative: &Path) -> Vec<String> {
    let mut parts: Vec<String> = relative
        .iter()
        .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    if parts.len() == 1 && (parts[0] == "lib" || parts[0] == "main") {
        // The crate root's own items: `super` is not used there.
        return parts;
    }
    parts
}

/// The top-level modules a line of code names, with `super::` resolved from `module`.
fn targets(code: &str, module: &[String]) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        let before = rest[..at].chars().last();
        let tail = &rest[at + "crate::".len()..];
        if !before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$') {
            let name: String = tail
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                found.push(name);
            }
        }
        rest = tail;
    }
    // `super::` chains that climb to the crate root and name a top-level module.
    let mut rest = code;
    while let Some(at) = rest.find("super::") {
        let before = rest[..at].chars().last();
        let mut tail = &rest[at..];
        if !before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            let mut depth = 0;
            while let Some(t) = tail.strip_prefix("super::") {
                depth += 1;
                tail = t;
            }
            // A mod.rs's `super` is its parent module; a file's too.
            if depth >= module.len() {
                let name: String = tail
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if !name.is_empty() {
                    found.push(name);
                }
            }
        }
        rest = &rest[at + "super::".len()..];
    }
    found
}

#[test]
fn every_import_respects_the_layers_in_the_architecture_doc() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = crate_dir.join("../../docs/ARCHITECTURE.md");
    let rules = Rules::parse(&std::fs::read_to_string(&doc).expect("docs/ARCHITECTURE.md"));
    let src = crate_dir.join("src");
    let mut files = Vec::new();
    source_files(&src, &mut files);
    files.sort();
    let mut broken = Vec::new();
    let mut used = std::collections::HashSet::new();
    for file in &files {
        let relative = file.strip_prefix(&src).expect("under src");
        let module = module_path(relative);
        let from = module[0].as_str();
        let text = std::fs::read_to_string(file).expect("source");
        for (number, line) in text.lines().enumerate() {
            // Comments may name anything; only code imports.
            let code = line.split("//").next().unwrap_or_default();
            for to in targets(code, &module) {
                if !rules.rank.contains_key(&to) {
                    // A crate-root item such as a macro, not a module.
                    continue;
                }
                used.insert((from.to_owned(), to.clone()));
                if let Some(why) = rules.refusal(from, &to) {
                    broken.push(format!(
                        "{}:{}: {why}\n    {}",
                        relative.display(),
                        number + 1,
                        line.trim()
                    ));
                }
            }
        }
    }
    assert!(
        broken.is_empty(),
        "imports that break the layering rules of docs/ARCHITECTURE.md:\n{}",
        broken.join("\n")
    );
    let stale: Vec<String> = rules
        .sideways
        .iter()
        .filter(|pair| !used.contains(*pair))
        .map(|(from, to)| format!("{from} -> {to}"))
        .collect();
    assert!(
        stale.is_empty(),
        "sideways lines of docs/ARCHITECTURE.md that no import uses any more: {}",
        stale.join(", ")
    );
}

#[test]
fn the_checker_sees_upward_sideways_and_climbing_imports() {
    let rules = Rules::parse(
        "```layers\ntop: app\nmid: a b\nlow: base\n```\n```sideways\na -> b: a reason\n```\n",
    );
    assert_eq!(rules.refusal("app", "a"), None);
    assert_eq!(rules.refusal("a", "base"), None);
    assert_eq!(rules.refusal("a", "b"), None, "allowed sideways");
    assert!(rules.refusal("b", "a").is_some(), "sideways one way only");
    let both_ways = std::panic::catch_unwind(|| {
        Rules::parse("```layers\nmid: a b\n```\n```sideways\na -> b: x\nb -> a: y\n```\n")
    });
    assert!(both_ways.is_err(), "a two-way pair is refused");
    assert!(rules.refusal("base", "a").is_some(), "upward");
    let module = |p: &str| module_path(Path::new(p));
    assert_eq!(
        targets("use crate::net::http::x;", &module("base/config/mod.rs")),
        ["net"]
    );
    assert_eq!(
        targets("use super::x;", &module("net/http/mod.rs")),
        [] as [&str; 0]
    );
    assert_eq!(
        targets("use super::session::X;", &module("chat.rs")),
        ["session"]
    );
    assert_eq!(
        targets("use super::super::store::Y;", &module("chat/handlers.rs")),
        ["store"]
    );
    assert_eq!(
        targets("let a = mycrate::net::x;", &module("app.rs")),
        [] as [&str; 0]
    );
}
