//! Reads the playground's static files (the `www/dist` build) when the core asks
//! for one ([`engage_core::Then::ServeAsset`]): the core routes `/playground/` and
//! checks the path's segments (decoded, none empty, hidden or holding a separator);
//! this reads the file, which must still lie under the (canonical) root, so
//! symlinks cannot lead outside it either.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use engage_core::AssetPath;

/// The directory served, set once at start-up (unset: `/playground` is an ordinary
/// API path, answered by the core with 404).
static ROOT: OnceLock<PathBuf> = OnceLock::new();

/// Chooses the directory: the one given, else `www/dist` under the current
/// directory if it exists. Returns the directory served, if any.
pub fn init(dir: Option<PathBuf>) -> Result<Option<PathBuf>, String> {
    let dir = match dir {
        Some(d) => d,
        None => {
            let d = PathBuf::from("www/dist");
            if !d.is_dir() {
                return Ok(None);
            }
            d
        }
    };
    let root = dir.canonicalize().map_err(|e| format!("playground directory {}: {e}", dir.display()))?;
    if !root.is_dir() {
        return Err(format!("playground directory {} is not a directory", dir.display()));
    }
    let _ = ROOT.set(root.clone());
    Ok(Some(root))
}

/// The content of a playground file, or `None` when there is no playground or no
/// such file.
pub fn read(path: &AssetPath) -> Option<Vec<u8>> {
    read_under(ROOT.get()?, path)
}

/// The content of the file `path` names under `root`. The core checked the path's
/// segments; this checks that the file, symlinks resolved, still lies under the root.
fn read_under(root: &Path, path: &AssetPath) -> Option<Vec<u8>> {
    let mut file = root.to_path_buf();
    for segment in path.segments() {
        file.push(segment);
    }
    let real = file.canonicalize().ok()?;
    if !real.starts_with(root) || !real.is_file() {
        return None;
    }
    std::fs::read(real).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small site in its own directory per test (removed when dropped).
    fn site() -> (tempfile::TempDir, PathBuf) {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        std::fs::create_dir_all(dir.join("site/pkg")).unwrap();
        std::fs::write(dir.join("site/index.html"), "<!doctype html>").unwrap();
        std::fs::write(dir.join("site/pkg/engage_www.js"), "export {}").unwrap();
        std::fs::write(dir.join("secret.txt"), "outside").unwrap();
        #[cfg(unix)]
        std::os::unix::fs::symlink(dir.join("secret.txt"), dir.join("site/link.txt")).unwrap();
        let root = dir.join("site").canonicalize().unwrap();
        (tmp, root)
    }

    fn get(root: &Path, raw: &str) -> Option<Vec<u8>> {
        AssetPath::parse(raw).and_then(|p| read_under(root, &p))
    }

    #[test]
    fn files_are_read_and_a_directory_path_names_its_index() {
        let (_tmp, root) = site();
        assert_eq!(get(&root, "").as_deref(), Some(&b"<!doctype html>"[..]));
        assert_eq!(get(&root, "pkg/engage_www.js").as_deref(), Some(&b"export {}"[..]));
        assert_eq!(get(&root, "pkg"), None, "a directory is not a file");
        assert_eq!(get(&root, "missing.js"), None);
    }

    #[test]
    fn paths_cannot_leave_the_root_not_even_through_a_symlink() {
        let (_tmp, root) = site();
        for raw in ["../secret.txt", "%2e%2e/secret.txt", "pkg/..%2f..%2fsecret.txt", "link.txt", "%2fetc/passwd"] {
            assert_eq!(get(&root, raw), None, "{raw}");
        }
    }
}
