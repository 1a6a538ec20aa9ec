//! The `engage groups` command line: `create` prints only the new id, `list` shows
//! the workspace's groups, bad input fails without output.

use std::process::Output;

fn engage(db: &std::path::Path, args: &[&str]) -> Output {
    let db = db.to_str().expect("a UTF-8 path");
    let all: Vec<&str> = ["groups"].into_iter().chain(args.iter().copied()).chain(["--db", db]).collect();
    crate::support::engage_output(&all)
}

/// A database path in a directory of its own (removed when dropped).
fn temp_db() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("engage.db");
    (dir, db)
}

#[test]
fn groups_create_prints_only_the_id_and_list_shows_it() {
    let (_dir, db) = temp_db();
    let out = engage(&db, &["create", "--workspace", "w1", "--name", "News", "--channel", "email"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8(out.stdout).expect("utf-8");
    let id = stdout.strip_suffix('\n').expect("one line");
    assert!(!id.contains('\n') && id.len() == 36 && id.matches('-').count() == 4, "{stdout:?}");

    let out = engage(&db, &["create", "--workspace", "w1", "--name", "Texts", "--channel", "sms"]);
    assert!(out.status.success());
    let sms = String::from_utf8(out.stdout).expect("utf-8").trim().to_string();

    let out = engage(&db, &["list", "--workspace", "w1"]);
    let listed = String::from_utf8(out.stdout).expect("utf-8");
    let mut expected = vec![format!("{id}\temail\tNews"), format!("{sms}\tsms\tTexts")];
    expected.sort();
    assert_eq!(listed.lines().collect::<Vec<_>>(), expected);
    // Another workspace has none.
    assert_eq!(engage(&db, &["list", "--workspace", "w2"]).stdout, b"");
}

#[test]
fn groups_create_refuses_an_unknown_channel_or_an_empty_name() {
    let (_dir, db) = temp_db();
    for args in [["create", "--name", "X", "--channel", "fax"], ["create", "--name", " ", "--channel", "email"]] {
        let out = engage(&db, &args);
        assert!(!out.status.success(), "{args:?}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
    assert!(engage(&db, &["list"]).stdout.is_empty());
}
