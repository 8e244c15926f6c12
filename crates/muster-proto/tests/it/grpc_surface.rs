//! `proto/nakama/api.proto` — the part of Nakama's client API that Muster serves over gRPC — is
//! a rendering of Nakama's own protos: nakama-common's `api/api.proto` (`NAKAMA_COMMON_DIR`) and
//! Nakama's `apigrpc/apigrpc.proto` (`NAKAMA_DIR`), both from the Go module proxy. This test
//! renders it again from them, for the calls the file's `service Nakama` lists, and requires the
//! file to be exactly that: every message a served call reaches, with Nakama's names, numbers,
//! types and labels. To serve another call, add its `rpc` line to the service block and run
//! this test with `MUSTER_BLESS=1`, which writes the new rendering.
//!
//! It needs both directories: ignored unless asked for (`--include-ignored`, as `scripts/test`
//! runs it), and failing when run without them.

use std::collections::{BTreeSet, HashMap};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use prost_types::field_descriptor_proto::{Label, Type};
use prost_types::{DescriptorProto, EnumDescriptorProto, FieldDescriptorProto, FileDescriptorSet};

const OURS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/proto/nakama/api.proto");

const HEADER: &str = "\
// The part of Nakama's client API (package nakama.api, service Nakama) that Muster serves over
// gRPC, rendered from Nakama v3.40's published protos by muster-proto's test `grpc_surface`,
// which checks that this file is exactly that rendering (names, numbers, types and labels).
// Edit only the service block's list of calls, then run the test with MUSTER_BLESS=1.
syntax = \"proto3\";

package nakama.api;

import \"google/protobuf/empty.proto\";
import \"google/protobuf/timestamp.proto\";
import \"google/protobuf/wrappers.proto\";
";

fn dir(variable: &str) -> PathBuf {
    std::env::var_os(variable)
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            panic!("this test needs Nakama's protos: set {variable} (scripts/test fetches them)")
        })
}

/// `apigrpc.proto` without its HTTP and OpenAPI options (their definitions are not published
/// with it), so that it compiles on its own beside `api.proto`.
fn bare_service(nakama: &Path, into: &Path) {
    let text = std::fs::read_to_string(nakama.join("apigrpc/apigrpc.proto"))
        .expect("Nakama's apigrpc.proto reads");
    let mut out = String::new();
    let mut rest = text.as_str();
    while let Some(at) = rest.find("option (") {
        out.push_str(&rest[..at]);
        let tail = &rest[at..];
        let semicolon = tail.find(';').unwrap_or(tail.len());
        match tail.find('{') {
            Some(open) if open < semicolon => {
                let mut depth = 0;
                let mut end = open;
                for (i, c) in tail[open..].char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' => {
                            depth -= 1;
                            if depth == 0 {
                                end = open + i;
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                let after = tail[end..].find(';').map_or(tail.len(), |s| end + s + 1);
                rest = &tail[after..];
            }
            _ => rest = &tail[(semicolon + 1).min(tail.len())..],
        }
    }
    out.push_str(rest);
    let out = out
        .replace("import \"google/api/annotations.proto\";", "")
        .replace(
            "import \"protoc-gen-openapiv2/options/annotations.proto\";",
            "",
        );
    std::fs::create_dir_all(into.join("apigrpc")).expect("a scratch directory");
    std::fs::write(into.join("apigrpc/apigrpc.proto"), out).expect("writes");
}

/// Nakama's compiled protos: the messages of `nakama.api` and its service.
pub fn nakamas() -> FileDescriptorSet {
    let scratch = tempfile::tempdir().expect("a scratch directory");
    bare_service(&dir("NAKAMA_DIR"), scratch.path());
    protox::compile(
        ["apigrpc/apigrpc.proto"],
        [scratch.path(), dir("NAKAMA_COMMON_DIR").as_path()],
    )
    .expect("Nakama's protos compile")
}

fn short(name: &str) -> String {
    name.strip_prefix(".nakama.api.")
        .unwrap_or(name.trim_start_matches('.'))
        .to_owned()
}

fn scalar(t: Type) -> &'static str {
    match t {
        Type::Double => "double",
        Type::Float => "float",
        Type::Int64 => "int64",
        Type::Uint64 => "uint64",
        Type::Int32 => "int32",
        Type::Fixed64 => "fixed64",
        Type::Fixed32 => "fixed32",
        Type::Bool => "bool",
        Type::String => "string",
        Type::Bytes => "bytes",
        Type::Uint32 => "uint32",
        Type::Sfixed32 => "sfixed32",
        Type::Sfixed64 => "sfixed64",
        Type::Sint32 => "sint32",
        Type::Sint64 => "sint64",
        other => panic!("no scalar {other:?}"),
    }
}

struct Renderer<'a> {
    /// Every message of `nakama.api` by full name, nested ones included.
    messages: HashMap<String, &'a DescriptorProto>,
    out: String,
}

impl Renderer<'_> {
    fn is_map(&self, type_name: &str) -> Option<&DescriptorProto> {
        self.messages
            .get(type_name)
            .copied()
            .filter(|m| m.options.as_ref().is_some_and(|o| o.map_entry()))
    }

    fn field_type(&self, field: &FieldDescriptorProto) -> String {
        match field.r#type() {
            Type::Message | Type::Enum => match self.is_map(field.type_name()) {
                Some(entry) => format!(
                    "map<{}, {}>",
                    self.field_type(&entry.field[0]),
                    self.field_type(&entry.field[1])
                ),
                None => short(field.type_name()),
            },
            other => scalar(other).to_owned(),
        }
    }

    fn enumeration(&mut self, e: &EnumDescriptorProto, indent: &str) {
        let _ = writeln!(self.out, "{indent}enum {} {{", e.name());
        for value in &e.value {
            let _ = writeln!(self.out, "{indent}  {} = {};", value.name(), value.number());
        }
        let _ = writeln!(self.out, "{indent}}}");
    }

    fn message(&mut self, m: &DescriptorProto, indent: &str) {
        let inner = format!("{indent}  ");
        let _ = writeln!(self.out, "{indent}message {} {{", m.name());
        for e in &m.enum_type {
            self.enumeration(e, &inner);
        }
        for nested in &m.nested_type {
            if !nested.options.as_ref().is_some_and(|o| o.map_entry()) {
                self.message(nested, &inner);
            }
        }
        for field in &m.field {
            let ty = self.field_type(field);
            let repeated = if field.label() == Label::Repeated && !ty.starts_with("map<") {
                "repeated "
            } else {
                ""
            };
            let optional = if field.proto3_optional() {
                "optional "
            } else {
                ""
            };
            let _ = writeln!(
                self.out,
                "{inner}{repeated}{optional}{ty} {} = {};",
                field.name(),
                field.number()
            );
        }
        let _ = writeln!(self.out, "{indent}}}");
    }
}

fn collect<'a>(
    prefix: &str,
    m: &'a DescriptorProto,
    into: &mut HashMap<String, &'a DescriptorProto>,
) {
    let name = format!("{prefix}.{}", m.name());
    for nested in &m.nested_type {
        collect(&name, nested, into);
    }
    into.insert(name, m);
}

fn references(m: &DescriptorProto, into: &mut Vec<String>) {
    for field in &m.field {
        if matches!(field.r#type(), Type::Message | Type::Enum) {
            into.push(field.type_name().to_owned());
        }
    }
    for nested in &m.nested_type {
        references(nested, into);
    }
}

/// The file as rendered for `calls`, from Nakama's protos.
pub fn render(set: &FileDescriptorSet, calls: &[String]) -> String {
    let files: Vec<_> = set
        .file
        .iter()
        .filter(|f| f.package() == "nakama.api")
        .collect();
    let mut renderer = Renderer {
        messages: HashMap::new(),
        out: String::from(HEADER),
    };
    let mut order = Vec::new();
    let mut enums = HashMap::new();
    for file in &files {
        for m in &file.message_type {
            collect(".nakama.api", m, &mut renderer.messages);
            order.push(format!(".nakama.api.{}", m.name()));
        }
        for e in &file.enum_type {
            enums.insert(format!(".nakama.api.{}", e.name()), e);
            order.push(format!(".nakama.api.{}", e.name()));
        }
    }
    let service = files
        .iter()
        .flat_map(|f| f.service.iter())
        .find(|s| s.name() == "Nakama")
        .expect("Nakama's service");
    let methods: Vec<_> = calls
        .iter()
        .map(|call| {
            service
                .method
                .iter()
                .find(|m| m.name() == call)
                .unwrap_or_else(|| panic!("Nakama's service has no call {call}"))
        })
        .collect();
    // Every top-level message or enum a served call reaches.
    let mut wanted = BTreeSet::new();
    let mut pending: Vec<String> = methods
        .iter()
        .flat_map(|m| [m.input_type().to_owned(), m.output_type().to_owned()])
        .collect();
    while let Some(name) = pending.pop() {
        let Some(local) = name.strip_prefix(".nakama.api.") else {
            continue;
        };
        let top = format!(
            ".nakama.api.{}",
            local.split('.').next().unwrap_or_default()
        );
        if !wanted.insert(top.clone()) {
            continue;
        }
        if let Some(m) = renderer.messages.get(&top) {
            references(m, &mut pending);
        }
    }
    for name in order.iter().filter(|n| wanted.contains(*n)) {
        renderer.out.push('\n');
        if let Some(m) = renderer.messages.get(name).copied() {
            renderer.message(m, "");
        } else if let Some(e) = enums.get(name) {
            renderer.enumeration(e, "");
        }
    }
    renderer.out.push_str("\nservice Nakama {\n");
    for m in methods {
        let _ = writeln!(
            renderer.out,
            "  rpc {} ({}) returns ({});",
            m.name(),
            short(m.input_type()),
            short(m.output_type())
        );
    }
    renderer.out.push_str("}\n");
    renderer.out
}

/// The calls the checked-in file's service lists.
pub fn served_calls(text: &str) -> Vec<String> {
    let service = text.split("service Nakama {").nth(1).unwrap_or_default();
    service
        .lines()
        .filter_map(|line| line.trim().strip_prefix("rpc "))
        .filter_map(|rest| rest.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

#[test]
#[ignore = "needs Nakama's protos (NAKAMA_COMMON_DIR, NAKAMA_DIR)"]
fn the_grpc_surface_is_nakamas() {
    let ours = std::fs::read_to_string(OURS).expect("proto/nakama/api.proto reads");
    let calls = served_calls(&ours);
    assert!(!calls.is_empty(), "the service block lists no call");
    let rendered = render(&nakamas(), &calls);
    if std::env::var_os("MUSTER_BLESS").is_some() {
        std::fs::write(OURS, &rendered).expect("writes proto/nakama/api.proto");
        return;
    }
    assert!(
        ours == rendered,
        "proto/nakama/api.proto is not Nakama's rendering; run this test with MUSTER_BLESS=1 \
         and look at the diff"
    );
}
