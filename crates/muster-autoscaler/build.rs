//! Generates the KEDA external scaler's gRPC server and client from `proto/externalscaler.proto`
//! with `protox` (a protobuf compiler in Rust, so building needs no `protoc`).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto/externalscaler.proto");
    let descriptors = protox::compile(["proto/externalscaler.proto"], ["proto"])?;
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        .compile_fds(descriptors)?;
    Ok(())
}
