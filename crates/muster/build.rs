//! Generates the client (and, for the contract tests, the server) of Agones' allocator service
//! from `proto/agones/allocation.proto` with `protox` (a protobuf compiler in Rust, so building
//! needs no `protoc`).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto/agones/allocation.proto");
    let descriptors = protox::compile(["proto/agones/allocation.proto"], ["proto"])?;
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        .compile_fds(descriptors)?;
    Ok(())
}
