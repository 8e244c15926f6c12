//! muster-world's integration tests, one binary: one module per file.

mod aoi;
mod checkpoint;
mod index_oracle;
mod map_and_routes;
mod support;
mod tick;
