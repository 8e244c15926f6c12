//! Generates the gRPC surface (`muster_proto::grpc`) from `proto/nakama/api.proto` — the part
//! of Nakama's client API Muster serves, a rendering of Nakama's protos checked by the test
//! `grpc_surface` — with `protox` (a protobuf compiler in Rust, so building needs no `protoc`):
//! the messages (prost), the service's server and client (tonic) and the messages' protobuf-JSON
//! mapping (pbjson, proto field names), plus the descriptor set the server's reflection serves.

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto/nakama/api.proto");
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    let descriptors = protox::compile(["nakama/api.proto"], ["proto"])?;
    let encoded = prost::Message::encode_to_vec(&descriptors);
    std::fs::write(out.join("nakama_api_descriptor.bin"), &encoded)?;
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        .compile_well_known_types(true)
        .extern_path(".google.protobuf", "::pbjson_types")
        // Times as Nakama's gateway writes them in JSON (`Z`, 0/3/6/9 fraction digits):
        // pbjson_types' Timestamp writes `+00:00`.
        .extern_path(".google.protobuf.Timestamp", "crate::wire::Timestamp")
        .compile_fds(descriptors)?;
    pbjson_build::Builder::new()
        .register_descriptors(&encoded)?
        .preserve_proto_field_names()
        .ignore_unknown_fields()
        .build(&[".nakama.api"])?;
    Ok(())
}
