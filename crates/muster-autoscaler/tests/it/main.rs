//! muster-autoscaler's integration tests, one binary: one module per file.

mod http;
mod keda;
mod spaceape_experiment;
