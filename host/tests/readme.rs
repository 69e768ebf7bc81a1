//! The README's CLI section runs as written: every line of the ```` ```sh ```` block under
//! "## The `systole` CLI" is one plain `systole` command, and each runs, in order, from one
//! fresh empty folder (so every path in it is relative to that folder). It must succeed and
//! print no Rust debug text. `program` needs a board, so openFPGALoader is always a stand-in
//! that checks the file it is handed. The default suite runs the board flows' tools as
//! stand-ins too (their two minutes of place-and-route would be most of this test's time);
//! `--ignored` runs the same lines with the real Yosys, nextpnr-ice40 and icepack.

mod common;

use common::stub_tools;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Condvar, Mutex};
use std::time::Instant;

const SECTION: &str = "## The `systole` CLI";

/// The command lines of the CLI section: (README line number, words). A line that is not one
/// plain command (a shell operator, `|` between alternatives, a placeholder) is an error.
fn cli_lines(readme: &str) -> Result<Vec<(usize, Vec<String>)>, String> {
    let mut lines = readme.lines().enumerate().map(|(i, l)| (i + 1, l));
    lines
        .by_ref()
        .find(|(_, l)| l.trim() == SECTION)
        .ok_or(format!("README.md has no `{SECTION}` heading"))?;
    lines
        .by_ref()
        .take_while(|(_, l)| !l.starts_with("## "))
        .find(|(_, l)| l.trim() == "```sh")
        .ok_or(format!("no ```sh block under `{SECTION}`"))?;
    let mut out = Vec::new();
    for (n, line) in lines.take_while(|(_, l)| l.trim() != "```") {
        // A comment starts at a `#` after white space.
        let command = line.find(" #").map_or(line, |i| &line[..i]).trim();
        if command.is_empty() {
            continue;
        }
        if let Some(c) = command
            .chars()
            .find(|c| "|&;<>$`'\"*?()[]{}\\".contains(*c))
        {
            return Err(format!(
                "README.md line {n} is not one plain command (`{c}`): {line}"
            ));
        }
        let words: Vec<String> = command.split_whitespace().map(String::from).collect();
        if words[0] != "systole" || words.iter().any(|w| w == "...") {
            return Err(format!(
                "README.md line {n} is not a complete `systole` command: {line}"
            ));
        }
        out.push((n, words));
    }
    if out.is_empty() {
        return Err(format!("the ```sh block under `{SECTION}` is empty"));
    }
    Ok(out)
}

/// The first piece of Rust debug formatting in `text`: `Name { field: ...` or `Some(...)`.
fn debug_text(text: &str) -> Option<String> {
    for (i, _) in text.match_indices(" { ") {
        let before = text[..i].rsplit(|c: char| !c.is_alphanumeric()).next()?;
        let after = text[i + 3..].split(' ').next().unwrap_or("");
        let field = after.strip_suffix(':').unwrap_or("");
        if before.starts_with(|c: char| c.is_ascii_uppercase())
            && !field.is_empty()
            && field.chars().all(|c| c.is_ascii_lowercase() || c == '_')
        {
            return Some(format!("{before} {{ {after}"));
        }
    }
    ["Some(", "Ok(", "Err("]
        .into_iter()
        .find_map(|p| text.find(p).map(|i| text[i..].chars().take(20).collect()))
}

fn run(words: &[String], dir: &Path, bin: &Path, log: &Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_systole"))
        .args(&words[1..])
        .current_dir(dir)
        .env("PATH", stub_tools::path_with(bin))
        .env("STUB_LOG", log)
        .output()
        .expect("run systole")
}

/// The folder or file a line writes (`--out`): lines sharing one run in README order.
fn out_of(words: &[String]) -> Option<&str> {
    let i = words.iter().position(|w| w == "--out")?;
    words.get(i + 1).map(String::as_str)
}

/// Runs one line; `Err` says why it is wrong.
fn check_line(n: usize, words: &[String], dirs: &Dirs) -> Result<(), String> {
    let t0 = Instant::now();
    let o = run(words, &dirs.work, &dirs.bin, &dirs.log);
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    let line = words.join(" ");
    if !o.status.success() {
        return Err(format!("README.md line {n} failed: {line}\n{out}{err}"));
    }
    if let Some(d) = debug_text(&out).or_else(|| debug_text(&err)) {
        return Err(format!(
            "README.md line {n} ({line}) prints Rust debug text `{d}`:\n{out}{err}"
        ));
    }
    eprintln!(
        "README.md line {n}: {:.1} s: {line}",
        t0.elapsed().as_secs_f64()
    );
    Ok(())
}

struct Dirs {
    work: PathBuf,
    bin: PathBuf,
    log: PathBuf,
}

/// Two lines at a time (Yosys and nextpnr use one core each), in README order except that a
/// line waits for every earlier line writing the same `--out` (a run it resumes, a build it
/// programs) while others go ahead.
#[test]
fn every_cli_line_of_the_readme_runs_as_written() {
    readme_lines_run(&stub_tools::ALL);
}

#[test]
#[ignore = "the board flows with the real tools (about two minutes): run with --ignored (./x test --all)"]
fn every_cli_line_of_the_readme_runs_with_the_real_tools() {
    readme_lines_run(&[stub_tools::one("openFPGALoader")]);
}

/// Runs the README's lines with `stubs` standing in for those tools.
fn readme_lines_run(stubs: &[(&str, &str)]) {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md"))
            .unwrap();
    let lines = cli_lines(&readme).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        lines.iter().any(|(_, w)| w[1] == "program"),
        "the README shows no `program` line"
    );
    let root = tempfile::tempdir().unwrap();
    let dirs = Dirs {
        work: root.path().join("work"),
        bin: root.path().join("bin"),
        log: root.path().join("tools.log"),
    };
    std::fs::create_dir(&dirs.work).unwrap();
    stub_tools::write(&dirs.bin, stubs);
    // Per line: started, finished; then the errors so far.
    let state = Mutex::new((
        vec![false; lines.len()],
        vec![false; lines.len()],
        Vec::new(),
    ));
    let changed = Condvar::new();
    // A line is ready when every earlier line writing the same `--out` has finished.
    let ready = |i: usize, finished: &[bool]| {
        let out = out_of(&lines[i].1);
        (0..i).all(|j| out.is_none() || out_of(&lines[j].1) != out || finished[j])
    };
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                let mut st = state.lock().unwrap();
                loop {
                    let next = (0..lines.len()).find(|&i| !st.0[i] && ready(i, &st.1));
                    let Some(i) = next else {
                        if st.0.iter().all(|&started| started) {
                            return;
                        }
                        st = changed.wait(st).unwrap();
                        continue;
                    };
                    st.0[i] = true;
                    drop(st);
                    let result = check_line(lines[i].0, &lines[i].1, &dirs);
                    st = state.lock().unwrap();
                    st.1[i] = true;
                    st.2.extend(result.err());
                    changed.notify_all();
                }
            });
        }
    });
    let errors = &state.lock().unwrap().2;
    assert!(errors.is_empty(), "{}", errors.join("\n\n"));
}

/// The README is for a newcomer's first ten minutes; reference text belongs in docs/.
const MAX_WORDS: usize = 2000;

#[test]
fn the_readme_stays_short() {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md"))
            .unwrap();
    let words = readme.split_whitespace().count();
    assert!(
        words <= MAX_WORDS,
        "README.md has {words} words, over {MAX_WORDS}: move reference text into docs/ and link it from \"Where next\""
    );
}

/// Every relative link of the README (`](path)`) names a file of the repository.
#[test]
fn the_readmes_links_lead_to_files() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let missing: Vec<&str> = readme
        .split("](")
        .skip(1)
        .filter_map(|rest| rest.split(')').next())
        .filter(|target| !target.contains("://"))
        .map(|target| target.split('#').next().unwrap_or(target))
        .filter(|path| !path.is_empty() && !root.join(path).exists())
        .collect();
    assert!(
        missing.is_empty(),
        "README.md links to missing files: {missing:?}"
    );
}

#[test]
fn lines_that_are_not_plain_commands_are_refused() {
    let block = |body: &str| format!("x\n{SECTION}\n\ntext\n```sh\n{body}\n```\n## Next\n");
    let ok = cli_lines(&block("systole boards   # the boards\n\nsystole info")).unwrap();
    assert_eq!(ok.len(), 2);
    assert_eq!(
        ok[0],
        (6, vec!["systole".to_string(), "boards".to_string()])
    );
    for bad in [
        "systole train --precision fixed16|f32",
        "systole info | emit-verilog",
        "systole train ...",
        "cargo run",
        "systole check --out $HOME",
    ] {
        let e = cli_lines(&block(bad)).unwrap_err();
        assert!(e.contains("line 6"), "{bad}: {e}");
    }
    assert!(cli_lines("no section").is_err());
    assert!(cli_lines(&block("")).is_err());
}

#[test]
fn debug_text_is_found() {
    assert_eq!(
        debug_text("fmax Fmax { mhz: 8.09, meets_target: true }"),
        Some("Fmax { mhz:".to_string())
    );
    assert!(debug_text("got Some(3)").is_some());
    assert_eq!(debug_text("fmax 8.09 MHz, timing met { fine }"), None);
    assert_eq!(debug_text("wrote build/top.bin (104090 bytes)"), None);
}
