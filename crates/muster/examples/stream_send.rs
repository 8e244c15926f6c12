//! bench/runtime.sh's Rust side of `nk.streamSend`: Muster with one server function of its own,
//! `stream_send_rust`, that does in Rust what the bench module's `stream_send_js` does — send the
//! payload to every session on the bench's stream.
//!
//! Run: `cargo run --release -p muster --example stream_send -- --data-dir ./data`

use std::process::ExitCode;

use muster::app::GameLogic;
use muster::functions::{Call, Functions, RpcError, ServerFunction};
use muster::streams::StreamKey;
use muster_proto::realtime::Stream;

/// The stream of bench/runtime/index.js (`{ mode: 200, label: "bench" }`).
fn bench_stream() -> StreamKey {
    StreamKey::of(&Stream {
        mode: 200,
        label: "bench".into(),
        ..Stream::default()
    })
    .expect("a stream of the game's own")
}

struct StreamSend;

#[async_trait::async_trait]
impl ServerFunction for StreamSend {
    async fn call(&self, call: Call<'_>) -> Result<String, RpcError> {
        call.streams
            .send(&bench_stream(), call.payload.to_owned(), &[], true);
        Ok(String::new())
    }
}

fn main() -> ExitCode {
    let mut functions = Functions::new();
    if let Err(error) = functions.register("stream_send_rust", StreamSend) {
        eprintln!("stream_send: {error}");
        return ExitCode::FAILURE;
    }
    muster::cli::main_with(GameLogic {
        functions,
        ..GameLogic::default()
    })
}
