//! Run with `cargo run --release -p muster-autoscaler --example simulate [-- --json]`
//! (`bench/autoscale.sh` runs it).
//!
//! The simulator's experiment with the default model — the same library call and the same
//! defaults as `muster autoscale simulate`, without building the whole server: the table, or with
//! `--json` the runs as JSON.

use muster_autoscaler::simulate::{report, Model};

fn main() {
    let cells = report::experiment(&Model::default());
    if std::env::args().any(|arg| arg == "--json") {
        println!("{:#}", report::json(&cells));
    } else {
        print!("{}", report::table(&cells));
    }
}
