use super::*;

/// The committed guide, relative to this crate.
fn guide_path() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/HARDWARE.md")
}

#[test]
fn guide_is_current() {
    let doc = std::fs::read_to_string(guide_path()).expect("docs/HARDWARE.md is committed");
    let fresh = render(&doc).unwrap();
    if fresh != doc {
        let line = doc
            .lines()
            .zip(fresh.lines())
            .position(|(a, b)| a != b)
            .map_or(doc.lines().count().min(fresh.lines().count()), |i| i);
        panic!(
            "docs/HARDWARE.md differs from its generated parts from line {}: run \
             `cargo run -p systole --bin systole -- guide --write` and commit the result\n  committed: {:?}\n  generated: {:?}",
            line + 1,
            doc.lines().nth(line),
            fresh.lines().nth(line)
        );
    }
    for part in PARTS {
        assert!(
            doc.contains(&format!("<!-- generated: {part} -->")),
            "the guide does not show part {part}"
        );
    }
}

#[test]
fn render_replaces_only_between_markers_and_names_bad_markers() {
    let doc = "intro\n<!-- generated: limits -->\nstale\n<!-- end: limits -->\noutro\n";
    let out = render(doc).unwrap();
    assert!(out.starts_with("intro\n<!-- generated: limits -->\n| what |"));
    assert!(out.ends_with("<!-- end: limits -->\noutro\n"));
    assert!(!out.contains("stale"));
    assert_eq!(render(&out).unwrap(), out, "rendering is idempotent");
    let e = render("a\n<!-- generated: nope -->\n<!-- end: nope -->\n").unwrap_err();
    assert!(
        e.to_string().contains("line 2") && e.to_string().contains("`nope`"),
        "{e}"
    );
    let e = render("<!-- generated: limits -->\nno end\n").unwrap_err();
    assert!(matches!(e, GuideError::Unterminated { line: 1, .. }), "{e}");
}

#[test]
fn every_part_generates() {
    for part in PARTS {
        let text = generate(part).unwrap();
        assert!(!text.trim().is_empty(), "{part}");
    }
}

/// The guide's hand-written prose restates a few limits to explain them; each phrase is
/// built here from its constant, so a changed constant fails until the prose follows it.
#[test]
fn hand_written_limits_follow_the_constants() {
    use systole_core::config::DEFAULT_FM_DEPTH;
    use systole_core::numeric::{MAX_FRAC, MAX_K, MAX_SHIFT, PRODUCT_MAX};
    use systole_golden::split::SUM_FRAC;
    let doc = std::fs::read_to_string(guide_path()).expect("docs/HARDWARE.md is committed");
    // MAX_K is 2^e - 1 and the prose says so in powers of two.
    let e = (MAX_K + 1).trailing_zeros();
    assert_eq!(
        MAX_K + 1,
        1 << e,
        "MAX_K is no longer one below a power of two"
    );
    let p = PRODUCT_MAX.trailing_zeros();
    for phrase in [
        format!("a feature-map buffer of `F` words (default {DEFAULT_FM_DEPTH})"),
        format!("`2^{p}` at 16 bits"),
        format!("`MAX_K` (table Limits) = `2^{e} - 1` long"),
        format!("(2^{e} - 1)·2^(2W-2) < 2^(2W+{})`", e - 2),
        format!("(at `2^{e}` the all-`(-2^(W-1))^2`"),
        format!(
            "`acc_bits(W) = 2W + {}` bits",
            systole_core::numeric::K_BITS - 1
        ),
        format!("must be in `0..={MAX_SHIFT}`"),
        format!("where `frac` (0 to `W - 1`: 0 to {MAX_FRAC} at 16 bits) is chosen"),
        format!("converted to the largest `F <= {MAX_FRAC}` at which"),
        format!("to the largest fractional bits `F <= {MAX_FRAC}` at"),
        format!("the exact integer `w·2^({SUM_FRAC} - f_j)`"),
        format!("(`M >> ({SUM_FRAC} - F) < 32767`"),
    ] {
        assert!(
            doc.contains(&phrase),
            "docs/HARDWARE.md no longer says `{phrase}`: write its prose from today's constants"
        );
    }
    let shift = systole_core::regmap::value::SHIFT.meaning;
    assert!(
        shift.contains(&format!("0..={MAX_SHIFT}")),
        "the SHIFT field's meaning ({shift}) states another range than 0..={MAX_SHIFT}"
    );
}
