//! swarm's integration tests, one binary: one module per file.

mod common;
mod deploy_manifests;
mod docs_snippets;
mod end_to_end;
mod enet_flows;
mod graphql_step;
mod match_flows;
mod metagame_steps;
mod process_rooms;
mod remote_workers;
mod rpc_step;
mod world_step;
