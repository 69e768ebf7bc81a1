use super::*;

fn emit(args: &[&str]) -> anyhow::Result<()> {
    let cli = Cli::try_parse_from(["systole", "emit-verilog"].iter().chain(args))?;
    run(cli)
}

/// The declared width of input `port` in the emitted text.
fn width(v: &str, port: &str) -> u32 {
    let line = v
        .lines()
        .find(|l| l.trim().starts_with("input") && l.trim_end().ends_with(&format!(" {port};")))
        .unwrap_or_else(|| panic!("no input {port}"));
    match line.split_once('[') {
        Some((_, r)) => r.split(':').next().unwrap().parse::<u32>().unwrap() + 1,
        None => 1,
    }
}

#[test]
fn emit_verilog_options_change_the_top() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.v"), dir.path().join("b.v"));
    let (a_s, b_s) = (a.to_str().unwrap(), b.to_str().unwrap());
    emit(&[
        "--array",
        "4",
        "--buffer-depth",
        "64",
        "--fm-depth",
        "0",
        "--out",
        a_s,
    ])
    .unwrap();
    emit(&["--array", "4", "--fm-depth", "1024", "--out", b_s]).unwrap();
    let (va, vb) = (
        std::fs::read_to_string(&a).unwrap(),
        std::fs::read_to_string(&b).unwrap(),
    );
    assert_eq!((width(&va, "a_wr_row"), width(&vb, "a_wr_row")), (6, 9));
    // fm_wr_row: log2(fm_depth) - log2(4), with 9 standing for "no conv unit".
    assert_eq!((width(&va, "fm_wr_row"), width(&vb, "fm_wr_row")), (7, 8));
    let e = emit(&["--array", "4", "--fm-depth", "1000", "--out", a_s]).unwrap_err();
    assert!(
        e.to_string().contains("--fm-depth") && e.to_string().contains("1000"),
        "{e}"
    );
    let e = emit(&["--array", "4", "--buffer-depth", "8", "--out", a_s]).unwrap_err();
    assert!(e.to_string().contains("--buffer-depth"), "{e}");
    // Two multiplies per DSP48E1 at 8 bits: a packed multiply per pair; refused at 16 bits.
    let packed = ["--array", "4", "--fm-depth", "0", "--word-bits", "8"];
    emit(&[&packed[..], &["--dsp-pack", "--out", a_s]].concat()).unwrap();
    let v = std::fs::read_to_string(&a).unwrap();
    assert_eq!(v.matches("p = ub_q * factor;").count(), 8);
    let e = emit(&["--array", "4", "--dsp-pack", "--out", b_s]).unwrap_err();
    assert!(
        e.to_string().contains("--word-bits 16 --dsp-pack: ")
            && e.to_string().contains("at most 8 bits"),
        "{e}"
    );
}

/// The help of every option that states a limit of `systole_core` states today's value: a
/// changed constant fails here until the help text follows it.
#[test]
fn help_texts_state_the_limits_of_core() {
    use clap::CommandFactory;
    use systole_core::config::{MAX_BUFFER_DEPTH, MAX_FM_DEPTH, MIN_BUFFER_DEPTH, MIN_FM_DEPTH};
    use systole_core::numeric::{MAX_WORD_BITS, MIN_WORD_BITS};
    let fm_range = format!("{MIN_FM_DEPTH}..={MAX_FM_DEPTH}");
    let buffer_range = format!("{MIN_BUFFER_DEPTH}..={MAX_BUFFER_DEPTH}");
    let word_range = format!("{MIN_WORD_BITS} to {MAX_WORD_BITS}");
    let master_range = format!("W to {MAX_WORD_BITS}");
    let pack_limit = format!("W <= {}", systole_core::dsp_pack::MAX_PACK_WORD_BITS);
    let stated = [
        ("bitstream", "--fm-depth", &fm_range),
        ("bitstream", "--word-bits", &word_range),
        ("emit-verilog", "--fm-depth", &fm_range),
        ("emit-verilog", "--buffer-depth", &buffer_range),
        ("train", "--word-bits", &word_range),
        ("compare", "--word-bits", &word_range),
        ("explore", "--word-bits", &word_range),
        ("train", "--master-bits", &master_range),
        ("explore", "--dsp-pack", &pack_limit),
    ];
    let mut cli = Cli::command();
    for (sub, option, range) in stated {
        let help = cli
            .find_subcommand_mut(sub)
            .unwrap()
            .render_long_help()
            .to_string();
        let text = help
            .split(&format!("{option} <"))
            .nth(1)
            .unwrap_or_else(|| panic!("`systole {sub} --help` has no {option}"));
        let text = &text[..text.find("\n\n").unwrap_or(text.len())];
        assert!(
            text.contains(range.as_str()),
            "`systole {sub} --help` states another {option} range than {range}:{text}"
        );
    }
}
