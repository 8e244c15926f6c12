//! A studio's own server (docs/extending.md): Muster's whole command line — settings, logging,
//! the open-file limit, the runtime, `migrate`, `config`, `world` — with one server function of
//! the studio's own, `buy_sword`. Built with the tests, so the guide's code always compiles.
//!
//! Run: `cargo run --release -p muster --example custom_server -- --data-dir ./data`
//! then, as a player: `POST /v2/rpc/buy_sword` with `{"order_id": "..."}`.

use std::process::ExitCode;

use muster::app::GameLogic;
use muster::economy::Change;
use muster::functions::{Call, Functions, RpcError, ServerFunction};

/// `buy_sword`: 250 coins for a sword, atomically; a retried order applies once.
struct BuySword;

#[async_trait::async_trait]
impl ServerFunction for BuySword {
    async fn call(&self, call: Call<'_>) -> Result<String, RpcError> {
        #[derive(serde::Deserialize)]
        struct Order {
            order_id: String,
        }
        let order: Order = call.json()?; // bad JSON: InvalidArgument with the reason
        let change = Change::new(call.user(None)?, "buy_sword")
            .spend("coins", 250)
            .grant_item("sword", "weapon", 1, None)
            .idempotency_key(&order.order_id);
        let receipt = call.economy.apply(change).await?; // overdraw: FailedPrecondition
        Ok(serde_json::json!({ "coins": receipt.wallet["coins"] }).to_string())
    }
}

fn main() -> ExitCode {
    let mut functions = Functions::new();
    if let Err(error) = functions.register("buy_sword", BuySword) {
        eprintln!("my-game-server: {error}");
        return ExitCode::FAILURE;
    }
    muster::cli::main_with(GameLogic {
        functions,
        ..GameLogic::default()
    })
}
