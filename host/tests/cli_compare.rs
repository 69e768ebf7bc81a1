//! `systole compare` does what its options say (formats, seeds, per-run reports) and options
//! that would change nothing are refused, not ignored.

mod cli_common;

use cli_common::{fails_with, stderr, systole};

/// A quick compare into `out` with `extra` options.
fn compare(out: &std::path::Path, extra: &[&str]) -> std::process::Output {
    let mut args = vec![
        "compare",
        "--limit",
        "200",
        "--hidden",
        "8",
        "--epochs",
        "1",
        "--out",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    systole(&args)
}

#[test]
fn compare_trains_the_formats_and_seeds_it_is_given_and_reports_each_run() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("cmp");
    let args = [
        "--formats",
        "f32,fixed16-nearest",
        "--seed",
        "5",
        "--seeds",
        "2",
    ];
    let o = compare(&out, &args);
    assert!(o.status.success(), "{}", stderr(&o));
    let csv = std::fs::read_to_string(out.join("compare.csv")).unwrap();
    let runs: Vec<&str> = csv
        .lines()
        .skip(1)
        .map(|l| l.rsplit_once(',').unwrap().0)
        .collect();
    assert_eq!(
        runs,
        ["f32,5", "f32,6", "fixed16-nearest,5", "fixed16-nearest,6"],
        "{csv}"
    );
    for (format, precision, rounding) in [
        ("f32", "F32", "nearest"),
        ("fixed16-nearest", "Fixed16", "nearest"),
    ] {
        for seed in [5, 6] {
            let run = out.join(format!("{format}-seed{seed}"));
            let json = std::fs::read_to_string(run.join("run.json")).unwrap();
            let v: serde_json::Value = serde_json::from_str(&json).unwrap();
            assert_eq!(v["config"]["seed"], seed, "{json:.300}");
            assert_eq!(v["config"]["precision"], precision, "{json:.300}");
            assert_eq!(v["config"]["rounding"], rounding, "{json:.300}");
            let acc = v["history"][0]["test_acc"].as_f64().unwrap();
            assert!(
                csv.contains(&format!("{format},{seed},{acc:.3}")),
                "{csv} vs {acc}"
            );
            for f in ["history.csv", "loss.png"] {
                assert!(run.join(f).is_file(), "{} missing", run.join(f).display());
            }
        }
    }
    // Seeds differ, so the runs do.
    let acc = |f: &str| std::fs::read_to_string(out.join(f).join("run.json")).unwrap();
    assert_ne!(acc("f32-seed5"), acc("f32-seed6"));
    // A second compare into the folder is refused; --overwrite replaces its results.
    let before = std::fs::read(out.join("compare.csv")).unwrap();
    fails_with(
        &compare(&out, &["--formats", "f32", "--seeds", "1"]),
        &["holds the results of an earlier compare", "--overwrite"],
    );
    assert_eq!(std::fs::read(out.join("compare.csv")).unwrap(), before);
    let o = compare(&out, &["--formats", "f32", "--seeds", "1", "--overwrite"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let csv = std::fs::read_to_string(out.join("compare.csv")).unwrap();
    assert_eq!(csv.lines().count(), 2, "{csv}");
}

#[test]
fn options_that_would_change_nothing_are_refused() {
    for args in [
        &["train", "--frac-bits", "8"][..],
        &["compare", "--resume"],
        &["compare", "--precision", "f32"],
        &["compare", "--rounding", "nearest"],
        &["compare", "--shards", "2"],
    ] {
        let o = systole(args);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains(&format!("unexpected argument '{}'", args[1])),
            "{err}"
        );
    }
    // A format clap cannot parse is a usage error (exit code 2) naming the choices.
    let o = systole(&["compare", "--formats", "f32,fixed16"]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("unknown format 'fixed16'") && err.contains("fixed16-stochastic"),
        "{err}"
    );
    // An alias names the format it is.
    fails_with(
        &systole(&["compare", "--formats", "f32,fixed16-nearest,fixed16-rne"]),
        &["names fixed16-nearest twice"],
    );
    fails_with(
        &systole(&["compare", "--seed", "18446744073709551615", "--seeds", "2"]),
        &["--seed + --seeds"],
    );
}
