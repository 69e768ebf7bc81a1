//! docs/CLI.md is the clap definitions rendered ([`systole::cli_docs::markdown`]): the test
//! fails when the committed file is stale and names the command that rewrites it, which is
//! this test with `SYSTOLE_UPDATE_DOCS=1` (nothing is written without it).

use std::path::Path;

#[test]
fn cli_md_matches_the_clap_definitions() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/CLI.md");
    let fresh = systole::cli_docs::markdown();
    if std::env::var_os("SYSTOLE_UPDATE_DOCS").is_some_and(|v| v == "1") {
        std::fs::write(&path, &fresh).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
        eprintln!("wrote {}", path.display());
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    if committed != fresh {
        let line = committed
            .lines()
            .zip(fresh.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(committed.lines().count().min(fresh.lines().count()));
        panic!(
            "docs/CLI.md is out of date with the command-line options (first difference at line {}).\n\
             Regenerate it with:\n\n    {}\n",
            line + 1,
            systole::cli_docs::REGENERATE
        );
    }
}
