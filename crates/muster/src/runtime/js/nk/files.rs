//! `fileRead(relPath)`: a file of the module's own folder (`runtime.path`), as text. A path
//! that leaves the folder (absolute, `..`, a link pointing out) is refused.

use std::path::{Component, Path};

use muster_js::JsError;
use serde_json::{json, Value};

use super::context::{invalid, Args, ServerHost};

pub(super) const NAMES: &[&str] = &["fileRead"];

/// Largest file one call reads.
const MAX_FILE_BYTES: u64 = 4 << 20;

pub(super) fn call(host: &ServerHost, name: &str, args: &Args) -> Result<Value, JsError> {
    match name {
        "fileRead" => {
            let root = &host.services.config.runtime.path;
            let relative = args.string(0, "relPath")?;
            Ok(json!(read_inside(Path::new(root), &relative)?))
        }
        _ => Err(JsError::new(format!("nk.{name} is not available"), 12)),
    }
}

/// The text of `relative` inside `root`; refused when it would leave `root`.
fn read_inside(root: &Path, relative: &str) -> Result<String, JsError> {
    let path = Path::new(relative);
    if relative.is_empty()
        || path
            .components()
            .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
    {
        return Err(invalid(format!(
            "{relative:?} is not a path inside the module's folder"
        )));
    }
    let not_found = || JsError::new(format!("file {relative:?} not found"), 5);
    let root = root.canonicalize().map_err(|_| not_found())?;
    let full = root.join(path).canonicalize().map_err(|_| not_found())?;
    if !full.starts_with(&root) {
        return Err(invalid(format!(
            "{relative:?} leads out of the module's folder"
        )));
    }
    let meta = std::fs::metadata(&full).map_err(|_| not_found())?;
    if !meta.is_file() {
        return Err(not_found());
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err(invalid(format!(
            "file {relative:?} is larger than {MAX_FILE_BYTES} bytes"
        )));
    }
    let bytes = std::fs::read(&full).map_err(|_| not_found())?;
    String::from_utf8(bytes).map_err(|_| invalid(format!("file {relative:?} is not UTF-8 text")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_inside_and_refuses_what_leaves_the_folder() {
        let dir = tempfile::tempdir().expect("dir");
        let module = dir.path().join("module");
        std::fs::create_dir_all(module.join("data")).unwrap();
        std::fs::write(module.join("data/levels.json"), "[1,2]").unwrap();
        std::fs::write(dir.path().join("secret"), "no").unwrap();
        assert_eq!(read_inside(&module, "data/levels.json").unwrap(), "[1,2]");
        assert_eq!(read_inside(&module, "./data/levels.json").unwrap(), "[1,2]");
        for bad in ["../secret", "/etc/passwd", "", "data/../../secret"] {
            assert_eq!(read_inside(&module, bad).unwrap_err().code, 3, "{bad}");
        }
        std::os::unix::fs::symlink(dir.path().join("secret"), module.join("link")).unwrap();
        assert_eq!(read_inside(&module, "link").unwrap_err().code, 3);
        assert_eq!(read_inside(&module, "missing.txt").unwrap_err().code, 5);
    }
}
