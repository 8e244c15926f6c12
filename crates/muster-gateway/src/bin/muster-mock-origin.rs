//! The mock origin as a command, for benches: `muster-mock-origin --listen 127.0.0.1:9000
//! --delay-ms 500 --error-rate 0`. Serves until interrupted; `GET /_stats` shows what it
//! received (see `muster_gateway::mock`).

use std::time::Duration;

use clap::Parser;
use muster_gateway::mock::{MockOrigin, MockSettings};

#[derive(Parser)]
#[command(about = "A mock REST origin: a configurable delay and error rate, every request counted")]
struct Args {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: String,
    /// Delay before each answer, in milliseconds.
    #[arg(long, default_value_t = 500)]
    delay_ms: u64,
    /// Share of requests answered 500 (0.0 to 1.0).
    #[arg(long, default_value_t = 0.0)]
    error_rate: f64,
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let args = Args::parse();
    if !(0.0..=1.0).contains(&args.error_rate) {
        eprintln!("--error-rate must be between 0 and 1");
        std::process::exit(2);
    }
    let origin = MockOrigin::start(
        &args.listen,
        MockSettings {
            delay: Duration::from_millis(args.delay_ms),
            error_rate: args.error_rate,
        },
    )
    .await?;
    println!("listening on {}", origin.addr);
    tokio::signal::ctrl_c().await?;
    Ok(())
}
