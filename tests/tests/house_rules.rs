//! The code's house rules, checked over every Rust file of the repository: no function of
//! non-test code is over [`MAX_FN_LINES`] lines (the `#[hdl_gen]` kernels excepted: rust-hdl
//! turns one function into one Verilog block), and no field in use has a leading underscore
//! (an underscore says "unused"). Test code is a file named `tests.rs` or `*_tests.rs`, a file
//! under a `tests` folder, a `#[cfg(test)]` module and a `#[test]` function.

use std::path::{Path, PathBuf};

/// The longest a function may be.
const MAX_FN_LINES: usize = 120;

/// Rust source with comments and the contents of string and character literals blanked
/// (each replaced by spaces, newlines kept), so braces and names are the code's own.
fn blank(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    // Blanks b[from..to], keeping newlines.
    let keep = |out: &mut Vec<u8>, s: &[u8]| {
        out.extend(s.iter().map(|&c| if c == b'\n' { c } else { b' ' }));
    };
    while i < b.len() {
        let rest = &b[i..];
        if rest.starts_with(b"//") {
            let end = rest.iter().position(|&c| c == b'\n').unwrap_or(rest.len());
            keep(&mut out, &rest[..end]);
            i += end;
        } else if rest.starts_with(b"/*") {
            let (mut depth, mut j) = (0usize, 0);
            while j < rest.len() {
                if rest[j..].starts_with(b"/*") {
                    depth += 1;
                    j += 2;
                } else if rest[j..].starts_with(b"*/") {
                    depth -= 1;
                    j += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    j += 1;
                }
            }
            keep(&mut out, &rest[..j]);
            i += j;
        } else if let Some(len) = raw_string(rest) {
            keep(&mut out, &rest[..len]);
            i += len;
        } else if rest[0] == b'"' || rest.starts_with(b"b\"") {
            let mut j = if rest[0] == b'"' { 1 } else { 2 };
            while j < rest.len() && rest[j] != b'"' {
                j += if rest[j] == b'\\' { 2 } else { 1 };
            }
            let j = (j + 1).min(rest.len());
            keep(&mut out, &rest[..j]);
            i += j;
        } else if rest[0] == b'\'' {
            // A character literal ('x', '\n', '\u{..}') or a lifetime ('a).
            let len = if rest.get(1) == Some(&b'\\') {
                rest[2..]
                    .iter()
                    .position(|&c| c == b'\'')
                    .map_or(1, |p| p + 3)
            } else {
                let ch = std::str::from_utf8(&rest[1..rest.len().min(5)])
                    .or_else(|e| std::str::from_utf8(&rest[1..1 + e.valid_up_to()]))
                    .ok()
                    .and_then(|s| s.chars().next());
                match ch {
                    Some(c) if rest.get(1 + c.len_utf8()) == Some(&b'\'') => 2 + c.len_utf8(),
                    _ => 1,
                }
            };
            keep(&mut out, &rest[..len]);
            i += len;
        } else {
            out.push(rest[0]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The length of a raw string literal (`r"…"`, `r#"…"#`, `br#"…"#`) at the start of `s`.
fn raw_string(s: &[u8]) -> Option<usize> {
    let start = if s.starts_with(b"br") {
        2
    } else if s.starts_with(b"r") {
        1
    } else {
        return None;
    };
    let hashes = s[start..].iter().take_while(|&&c| c == b'#').count();
    if s.get(start + hashes) != Some(&b'"') {
        return None;
    }
    let mut close = vec![b'"'];
    close.extend(std::iter::repeat_n(b'#', hashes));
    let body = start + hashes + 1;
    let end = s[body..]
        .windows(close.len())
        .position(|w| w == close.as_slice())?;
    Some(body + end + close.len())
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// The index of the brace that closes the one at `open`.
fn closing(b: &[u8], open: usize) -> usize {
    let mut depth = 0usize;
    for (j, &c) in b.iter().enumerate().skip(open) {
        match c {
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return j;
                }
            }
            _ => {}
        }
    }
    b.len() - 1
}

/// The attributes written just before byte `at` (`#[...]` items, innermost last).
fn attributes_before(b: &[u8], at: usize) -> String {
    let mut text = String::new();
    let mut j = at;
    loop {
        // Skip whitespace and visibility/qualifier words back to the previous item.
        let mut k = j;
        while k > 0
            && (b[k - 1].is_ascii_whitespace() || is_ident(b[k - 1]) || b"(),".contains(&b[k - 1]))
        {
            k -= 1;
        }
        if k == 0 || b[k - 1] != b']' {
            return text;
        }
        // Find the matching '#['.
        let mut depth = 0usize;
        let mut s = k - 1;
        loop {
            match b[s] {
                b']' => depth += 1,
                b'[' => {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                }
                _ => {}
            }
            if s == 0 {
                return text;
            }
            s -= 1;
        }
        if s == 0 || b[s - 1] != b'#' {
            return text;
        }
        text.push_str(&String::from_utf8_lossy(&b[s - 1..k]));
        j = s - 1;
    }
}

/// A function of non-test code over the limit: `file:line name (N lines)`.
fn long_functions(path: &Path, src: &str) -> Vec<String> {
    let code = blank(src);
    let b = code.as_bytes();
    let line_of = |at: usize| 1 + b[..at].iter().filter(|&&c| c == b'\n').count();
    // Byte ranges of test modules, skipped.
    let mut skip: Vec<(usize, usize)> = Vec::new();
    let mut found = Vec::new();
    let mut i = 0;
    while let Some(p) = code[i..].find("mod ").map(|p| p + i) {
        i = p + 4;
        if p > 0 && is_ident(b[p - 1]) {
            continue;
        }
        if attributes_before(b, p).contains("cfg(test)") {
            let open = code[p..].find(['{', ';']).map(|o| o + p);
            if let Some(o) = open.filter(|&o| b[o] == b'{') {
                skip.push((o, closing(b, o)));
            }
        }
    }
    let mut i = 0;
    while let Some(p) = code[i..].find("fn ").map(|p| p + i) {
        i = p + 3;
        if p > 0 && is_ident(b[p - 1]) || skip.iter().any(|&(s, e)| p > s && p < e) {
            continue;
        }
        let name: String = code[p + 3..]
            .trim_start()
            .chars()
            .take_while(|&c| c.is_alphanumeric() || c == '_')
            .collect();
        if name.is_empty() {
            continue;
        }
        // The body: the first '{' outside parentheses, brackets and angle brackets; a ';'
        // first means a declaration without one.
        let (mut depth, mut j) = (0i32, p);
        let open = loop {
            match b.get(j) {
                None => break None,
                Some(b'(' | b'[') => depth += 1,
                Some(b')' | b']') => depth -= 1,
                Some(b';') if depth == 0 => break None,
                Some(b'{') if depth == 0 => break Some(j),
                _ => {}
            }
            j += 1;
        };
        let Some(open) = open else { continue };
        let attrs = attributes_before(b, p);
        if attrs.contains("#[test]") || attrs.contains("hdl_gen") || attrs.contains("cfg(test)") {
            continue;
        }
        let lines = line_of(closing(b, open)) - line_of(p) + 1;
        if lines > MAX_FN_LINES {
            found.push(format!(
                "{}:{} {name} ({lines} lines)",
                path.display(),
                line_of(p)
            ));
        }
    }
    found
}

/// Fields whose names start with an underscore, declared in structs other than rust-hdl's
/// `LogicBlock`s (whose derive takes an underscore to mean "a parameter, not a signal"):
/// `file:line name`.
fn underscore_fields(path: &Path, src: &str) -> Vec<String> {
    let code = blank(src);
    let b = code.as_bytes();
    let mut found = Vec::new();
    let mut i = 0;
    while let Some(p) = code[i..].find("struct ").map(|p| p + i) {
        i = p + 7;
        if p > 0 && is_ident(b[p - 1]) || attributes_before(b, p).contains("LogicBlock") {
            continue;
        }
        let Some(open) = code[p..].find(['{', ';', '(']).map(|o| o + p) else {
            continue;
        };
        if b[open] != b'{' {
            continue;
        }
        let close = closing(b, open);
        // A field: a line (the code is rustfmt's) of a name, after its visibility, and ':'.
        let first = 1 + b[..open].iter().filter(|&&c| c == b'\n').count();
        for (k, line) in code[open..close].lines().enumerate() {
            let words = line.trim_start();
            let words = words.strip_prefix("pub(crate) ").unwrap_or(words);
            let words = words.strip_prefix("pub ").unwrap_or(words);
            let name: String = words
                .chars()
                .take_while(|&c| c.is_alphanumeric() || c == '_')
                .collect();
            let field = words[name.len()..].trim_start().starts_with(':');
            if field && name.starts_with('_') && name.len() > 1 {
                found.push(format!("{}:{} {name}", path.display(), first + k));
            }
        }
    }
    found
}

/// Whether `code` reads or writes field `name` (`x.name`).
fn uses_field(code: &str, name: &str) -> bool {
    code.match_indices(&format!(".{name}")).any(|(p, m)| {
        let after = code.as_bytes().get(p + m.len()).copied();
        !after.is_some_and(is_ident)
    })
}

fn is_test_file(path: &Path) -> bool {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    name == "tests.rs"
        || name.ends_with("_tests.rs")
        || path.components().any(|c| c.as_os_str() == "tests")
}

/// Every `.rs` file under `dir`, build output and virtual environments left out.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        let name = e.file_name();
        let name = name.to_string_lossy();
        if p.is_dir() {
            if !(name == "target" || name.starts_with('.') || name == "node_modules") {
                rust_files(&p, out);
            }
        } else if name.ends_with(".rs") {
            out.push(p);
        }
    }
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Every non-test Rust file of the repository (its path from the root) and its text.
fn sources() -> Vec<(PathBuf, String)> {
    let root = repo();
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    files.sort();
    assert!(
        files.len() > 100,
        "only {} Rust files under {}",
        files.len(),
        root.display()
    );
    files
        .into_iter()
        .map(|f| (f.strip_prefix(&root).unwrap_or(&f).to_path_buf(), f))
        .filter(|(rel, _)| !is_test_file(rel))
        .map(|(rel, f)| (rel, std::fs::read_to_string(f).unwrap()))
        .collect()
}

fn offenders(check: fn(&Path, &str) -> Vec<String>) -> Vec<String> {
    sources().iter().flat_map(|(p, s)| check(p, s)).collect()
}

#[test]
fn no_function_of_non_test_code_is_over_120_lines() {
    let found = offenders(long_functions);
    assert!(
        found.is_empty(),
        "split these functions:\n{}",
        found.join("\n")
    );
}

#[test]
fn no_field_in_use_has_a_leading_underscore() {
    let declared = offenders(underscore_fields);
    let code: Vec<String> = sources().iter().map(|(_, s)| blank(s)).collect();
    let used: Vec<&String> = declared
        .iter()
        .filter(|d| {
            let name = d.rsplit(' ').next().unwrap_or("");
            code.iter().any(|c| uses_field(c, name))
        })
        .collect();
    assert!(
        used.is_empty(),
        "these fields are in use: rename them without the underscore:\n{used:?}"
    );
}

/// The scanner itself: what it counts and what it leaves out.
#[test]
fn the_scanner_sees_functions_and_skips_tests_comments_and_strings() {
    let body = "    let x = 1;\n".repeat(MAX_FN_LINES);
    let long = format!("fn long() {{\n{body}}}\n");
    let path = Path::new("x.rs");
    assert_eq!(
        long_functions(path, &long),
        [format!("x.rs:1 long ({} lines)", MAX_FN_LINES + 2)]
    );
    let short = format!(
        "fn short() {{\n{}}}\n",
        "    let x = 1;\n".repeat(MAX_FN_LINES - 2)
    );
    assert!(long_functions(path, &short).is_empty());
    // Braces in strings, characters and comments are not the code's.
    let tricky = format!(
        "fn a<'a>(x: &'a str) -> char {{ let _ = \"}}\"; let _ = r#\"}}\"#; /* }} */ '}}' }}\n{long}"
    );
    assert_eq!(long_functions(path, &tricky).len(), 1, "{tricky}");
    for wrap in [
        format!("#[test]\n{long}"),
        format!("#[cfg(test)]\nmod t {{\n{long}}}\n"),
        format!("#[hdl_gen]\n{long}"),
        format!("/// doc\n#[hdl_gen]\npub {long}"),
    ] {
        assert!(long_functions(path, &wrap).is_empty(), "{wrap}");
    }
    let structs = "struct S {\n    pub _lock: u8,\n    b: u8,\n}\n#[derive(LogicBlock)]\nstruct P {\n    _len: usize,\n}\n";
    assert_eq!(underscore_fields(path, structs), ["x.rs:2 _lock"]);
    assert!(uses_field("fn f(s: S) { s._lock; }", "_lock"));
    assert!(!uses_field(
        "fn f(s: S) { s._locks; let _lock = 1; }",
        "_lock"
    ));
    assert!(is_test_file(Path::new("train/src/pipeline/tests.rs")));
    assert!(is_test_file(Path::new("host/tests/cli.rs")));
    assert!(!is_test_file(Path::new("host/src/cli/mod.rs")));
}
