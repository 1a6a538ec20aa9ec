//! Reads the playground's static files when the core asks for one
//! ([`engage_core::Then::ServeAsset`]): from a directory (the `www/dist` build), or
//! from the files embedded in the binary (built with the `embed-playground`
//! feature, as release builds are). The core routes `/playground/` and checks the
//! path's segments (decoded, none empty, hidden or holding a separator); a file read
//! from a directory must still lie under the (canonical) root, so symlinks cannot
//! lead outside it either.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use engage_core::{AssetPath, Playground};

use crate::engine::SharedEngine;

mod embedded {
    include!(concat!(env!("OUT_DIR"), "/playground_files.rs"));
}

/// Where the served files come from (unset: `/playground` is an ordinary API path,
/// answered by the core with 404).
static SOURCE: OnceLock<Source> = OnceLock::new();

enum Source {
    Dir(PathBuf),
    Embedded,
}

/// What `engage serve` serves at `/playground/`, chosen at start-up.
pub enum Chosen {
    /// A directory with a built playground.
    Dir(PathBuf),
    /// A directory whose playground is still being built: [`watch`] serves it once
    /// its `index.html` appears.
    Building(PathBuf),
    /// The files inside the binary.
    Embedded,
    /// Nothing.
    None,
}

impl Chosen {
    /// The engine's view of it.
    pub fn state(&self) -> Playground {
        match self {
            Chosen::Dir(_) | Chosen::Embedded => Playground::Served,
            Chosen::Building(_) => Playground::Building,
            Chosen::None => Playground::Absent,
        }
    }
}

/// The name `serve.sh` gives a failed build's note inside the directory.
const BUILD_FAILED: &str = ".build-failed";

/// Chooses what to serve: the directory given (being built while it has no
/// `index.html`), else the embedded files when the binary has them, else `www/dist`
/// under the current directory when it holds a build.
pub fn init(dir: Option<PathBuf>) -> Result<Chosen, String> {
    let chosen = match dir {
        Some(dir) => {
            let root = dir.canonicalize().map_err(|e| format!("playground directory {}: {e}", dir.display()))?;
            if !root.is_dir() {
                return Err(format!("playground directory {} is not a directory", dir.display()));
            }
            if root.join("index.html").is_file() {
                Chosen::Dir(root)
            } else {
                Chosen::Building(root)
            }
        }
        None if !embedded::FILES.is_empty() => Chosen::Embedded,
        None => match Path::new("www/dist").canonicalize() {
            Ok(root) if root.join("index.html").is_file() => Chosen::Dir(root),
            _ => Chosen::None,
        },
    };
    match &chosen {
        Chosen::Dir(root) => {
            let _ = SOURCE.set(Source::Dir(root.clone()));
        }
        Chosen::Embedded => {
            let _ = SOURCE.set(Source::Embedded);
        }
        Chosen::Building(_) | Chosen::None => {}
    }
    Ok(chosen)
}

/// While a playground is being built into `root`: looks every second, serves it
/// once its `index.html` is there, and tells the engine (built, or failed: `serve.sh`
/// leaves a note when the build fails).
pub async fn watch(engine: SharedEngine, root: PathBuf) {
    let mut failed = false;
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        if root.join("index.html").is_file() {
            let _ = SOURCE.set(Source::Dir(root.clone()));
            engine.set_playground(Playground::Served);
            tracing::info!("the playground is built: serving it from {} at /playground/", root.display());
            return;
        }
        let now_failed = root.join(BUILD_FAILED).is_file();
        if now_failed != failed {
            failed = now_failed;
            engine.set_playground(if failed { Playground::Failed } else { Playground::Building });
        }
    }
}

/// The content of a playground file, or `None` when there is no playground or no
/// such file.
pub fn read(path: &AssetPath) -> Option<Vec<u8>> {
    match SOURCE.get()? {
        Source::Dir(root) => read_under(root, path),
        Source::Embedded => read_embedded(embedded::FILES, path),
    }
}

/// The embedded file `path` names.
fn read_embedded(files: &[(&str, &[u8])], path: &AssetPath) -> Option<Vec<u8>> {
    let name = path.segments().join("/");
    files.iter().find(|(p, _)| *p == name).map(|(_, content)| content.to_vec())
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
    fn embedded_files_are_found_by_their_path_and_the_root_names_its_index() {
        let files: &[(&str, &[u8])] = &[("index.html", b"<!doctype html>"), ("pkg/engage_www.js", b"export {}")];
        let get = |raw: &str| AssetPath::parse(raw).and_then(|p| read_embedded(files, &p));
        assert_eq!(get("").as_deref(), Some(&b"<!doctype html>"[..]));
        assert_eq!(get("pkg/engage_www.js").as_deref(), Some(&b"export {}"[..]));
        assert_eq!(get("pkg"), None, "a directory is not a file");
        assert_eq!(get("pkg/"), None);
        assert_eq!(get("../index.html"), None);
    }

    #[test]
    fn paths_cannot_leave_the_root_not_even_through_a_symlink() {
        let (_tmp, root) = site();
        for raw in ["../secret.txt", "%2e%2e/secret.txt", "pkg/..%2f..%2fsecret.txt", "link.txt", "%2fetc/passwd"] {
            assert_eq!(get(&root, raw), None, "{raw}");
        }
    }
}
