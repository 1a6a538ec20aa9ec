//! Build facts the binary carries:
//! - `ENGAGE_COMMIT`: the commit it was built from (`engage --version`, `/healthz`,
//!   the landing page). Taken from the environment when set (a release build from a
//!   tarball of the sources), else from `git rev-parse`, else empty (unknown).
//! - with the `embed-playground` feature, `playground_files.rs` in `OUT_DIR`: every
//!   file of the built playground (`www/dist`, or `ENGAGE_PLAYGROUND_EMBED_DIR`) as
//!   `(path, bytes)`, so the binary serves `/playground/` with nothing beside it.

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=ENGAGE_COMMIT");
    println!("cargo:rustc-env=ENGAGE_COMMIT={}", commit());
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let table =
        if std::env::var_os("CARGO_FEATURE_EMBED_PLAYGROUND").is_some() { embedded_table() } else { "&[]".to_string() };
    let code = format!("/// The embedded playground's files (path under its root, content).\npub static FILES: &[(&str, &[u8])] = {table};\n");
    std::fs::write(out.join("playground_files.rs"), code).expect("OUT_DIR is writable");
}

/// The commit, abbreviated to 12 hex digits; empty when neither the environment
/// nor git tells.
fn commit() -> String {
    if let Ok(given) = std::env::var("ENGAGE_COMMIT") {
        return given.chars().filter(char::is_ascii_hexdigit).take(40).collect();
    }
    let git = |args: &[&str]| -> Option<String> {
        let out = Command::new("git").args(args).output().ok()?;
        out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
    };
    // Rebuild when HEAD moves: HEAD itself, the branch it names, and packed refs.
    if let Some(dir) = git(&["rev-parse", "--absolute-git-dir"]) {
        let dir = PathBuf::from(dir);
        let mut watched = vec![dir.join("HEAD"), dir.join("packed-refs")];
        if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
            watched.push(dir.join(branch));
        }
        // A path that does not exist would make cargo run this script every build.
        for path in watched.iter().filter(|p| p.exists()) {
            println!("cargo:rerun-if-changed={}", path.display());
        }
    }
    git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_default()
}

/// The Rust expression of the embedded files' table.
fn embedded_table() -> String {
    println!("cargo:rerun-if-env-changed=ENGAGE_PLAYGROUND_EMBED_DIR");
    let root = match std::env::var_os("ENGAGE_PLAYGROUND_EMBED_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../www/dist"),
    };
    if !root.join("index.html").is_file() {
        panic!(
            "the embed-playground feature embeds the built playground, and {} holds none: \
             run `bash www/build.sh` first (or set ENGAGE_PLAYGROUND_EMBED_DIR)",
            root.display()
        );
    }
    let root = root.canonicalize().expect("the playground directory exists");
    println!("cargo:rerun-if-changed={}", root.display());
    let mut files = Vec::new();
    collect(&root, &root, &mut files);
    files.sort();
    let mut table = String::from("&[\n");
    for (relative, absolute) in files {
        println!("cargo:rerun-if-changed={}", absolute.display());
        table.push_str(&format!("    ({relative:?}, include_bytes!({:?})),\n", absolute.display().to_string()));
    }
    table.push(']');
    table
}

/// Every regular file under `dir`, hidden ones (`.sources`) left out as the server
/// never serves them.
fn collect(root: &Path, dir: &Path, files: &mut Vec<(String, PathBuf)>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()));
    for entry in entries {
        let entry = entry.expect("a readable directory entry");
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().to_string();
        if name.starts_with('.') {
            continue;
        }
        if path.is_dir() {
            println!("cargo:rerun-if-changed={}", path.display());
            collect(root, &path, files);
        } else if path.is_file() {
            let relative = path.strip_prefix(root).expect("under the root");
            let parts: Vec<String> =
                relative.components().map(|c| c.as_os_str().to_string_lossy().to_string()).collect();
            files.push((parts.join("/"), path));
        }
    }
}
