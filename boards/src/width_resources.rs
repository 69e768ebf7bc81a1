//! Resource truth of the whole array at the word width `W`: the `top` of an 8x8
//! array without the conv unit, built at `W` = 8, 12 and 16, through Yosys `synth_xilinx`
//! (Arty A7-35T's family) and `synth_ice40 -dsp` (iCEBreaker's); and the same top with a
//! 4096-word conv unit at each `W` on 7-series (no conv unit fits an iCE40's block RAM). Heavy
//! (Yosys, minutes): `cargo test -p systole-boards --lib width_resources -- --ignored
//! --nocapture` (`conv_unit_resources_shrink_with_w` alone for the conv unit,
//! `dsp_packing_halves_the_dsps` for two multiplies per DSP48E1 at 8 bits).

use crate::find;
use crate::tools::{yosys_synth, ResourceReport};
use systole_core::ArrayConfig;

/// The 8x8 array at `W`, synthesised for both families: `(7-series, iCE40)`.
fn synthesise(w: u32) -> (ResourceReport, ResourceReport) {
    let cfg = ArrayConfig {
        fm_depth: 0,
        ..ArrayConfig::square(8)
    }
    .with_word_bits(w);
    let verilog = systole_hdl::generate_verilog(&cfg).unwrap();
    let mut out = Vec::new();
    for board in ["arty-a7-35", "icebreaker"] {
        let dir =
            std::env::temp_dir().join(format!("systole-width-{w}-{board}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("top.v"), &verilog).unwrap();
        let r = yosys_synth(find(board).unwrap(), &["top.v"], &dir).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        out.push(r);
    }
    let (x, i) = (out[0], out[1]);
    println!(
        "| {w} | {} | {} | {} | {} | {} | {} | {} | {} |",
        x.luts, x.lutram, x.ffs, x.dsps, x.brams, i.luts, i.ffs, i.dsps
    );
    // One MAC per DSP48E1 and per SB_MAC16 at every W.
    assert_eq!((x.dsps, i.dsps), (64, 64), "W = {w}: {x:?} {i:?}");
    (x, i)
}

/// What a narrower word saves, measured against the next wider one: fewer LUTs and flip-flops
/// on both families (the words, accumulators and converters shrink with `W`).
fn assert_narrower(
    narrow: (ResourceReport, ResourceReport),
    wide: (ResourceReport, ResourceReport),
) {
    for (n, w) in [(narrow.0, wide.0), (narrow.1, wide.1)] {
        assert!(n.luts < w.luts && n.ffs < w.ffs, "{n:?} vs {w:?}");
    }
}

#[test]
#[ignore = "Yosys on the 8x8 array at 8, 12 and 16 bits, minutes; run with --ignored --nocapture"]
fn width_resources_shrink_with_w() {
    println!("| W | LUT | LUTRAM | FF | DSP48E1 | RAMB18 | iCE40 SB_LUT4 | SB_DFF* | SB_MAC16 |");
    let r: Vec<_> = [8, 12, 16].into_iter().map(synthesise).collect();
    assert_narrower(r[0], r[1]);
    assert_narrower(r[1], r[2]);
}

/// The 8x8 top at `W` with a conv unit of `fm_depth` words, synthesised for 7-series.
fn synthesise_conv(w: u32, fm_depth: usize) -> ResourceReport {
    let cfg = ArrayConfig {
        fm_depth,
        ..ArrayConfig::square(8)
    }
    .with_word_bits(w);
    let verilog = systole_hdl::generate_verilog(&cfg).unwrap();
    let dir = std::env::temp_dir().join(format!(
        "systole-width-conv-{w}-{fm_depth}-{}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("top.v"), &verilog).unwrap();
    let r = yosys_synth(find("arty-a7-35").unwrap(), &["top.v"], &dir).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    r
}

/// The conv unit at `W`: its feature-map copies hold `W`-bit words (an entry of four words is
/// `4W` bits), so its block RAM shrinks with `W` (the array's own block RAM, its lane banks,
/// is the same at every `W`: the table of `width_resources_shrink_with_w`). Printed for the
/// 8x8 top with a 4096-word unit; the unit's share is the difference from that table.
#[test]
#[ignore = "Yosys on the 8x8 array with a conv unit at 8, 12 and 16 bits, minutes; run with --ignored --nocapture"]
fn conv_unit_resources_shrink_with_w() {
    println!("| W | LUT | LUT RAM | FF | DSP48E1 | RAMB18 |");
    let mut brams = Vec::new();
    for w in [8, 12, 16] {
        let r = synthesise_conv(w, 4096);
        println!(
            "| {w} | {} | {} | {} | {} | {} |",
            r.luts, r.lutram, r.ffs, r.dsps, r.brams
        );
        brams.push(r.brams);
    }
    assert!(brams[0] < brams[1] && brams[1] < brams[2], "{brams:?}");
}

/// The `size x size` top at 8 bits (no conv unit) on 7-series, its PEs paired or not.
fn synthesise_packed(size: usize, pack: bool) -> ResourceReport {
    let cfg = ArrayConfig {
        fm_depth: 0,
        ..ArrayConfig::square(size)
    }
    .with_word_bits(8)
    .with_dsp_pack(pack);
    let verilog = systole_hdl::generate_verilog(&cfg).unwrap();
    let dir = std::env::temp_dir().join(format!(
        "systole-pack-{}-{}",
        cfg.name(),
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("top.v"), &verilog).unwrap();
    let r = yosys_synth(find("arty-a7-35").unwrap(), &["top.v"], &dir).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    println!(
        "| {size}x{size} | {} | {} | {} | {} | {} | {} | {:.1} |",
        if pack { "packed" } else { "one per MAC" },
        r.luts,
        r.lutram,
        r.ffs,
        r.dsps,
        r.brams,
        (size * size) as f64 / r.dsps as f64
    );
    r
}

/// Two multiplies per DSP48E1 at 8 bits (`ArrayConfig::dsp_pack`): the 8x8 array's 64 MACs
/// on 32 DSP48E1s (2.0 MACs per DSP48E1 against 1.0), the same block RAM; what it costs in
/// fabric is printed (the packed factor's decrement and the high product's correction per
/// pair, no flip-flop: the alignment is the upper PE's own A register).
#[test]
#[ignore = "Yosys on the 8x8 array at 8 bits packed and not, minutes; run with --ignored --nocapture"]
fn dsp_packing_halves_the_dsps() {
    println!("| array | multiplies | LUT | LUT RAM | FF | DSP48E1 | RAMB18 | MACs per DSP48E1 |");
    packing_halves_the_dsps(8);
}

fn packing_halves_the_dsps(n: usize) {
    let plain = synthesise_packed(n, false);
    let packed = synthesise_packed(n, true);
    let macs = (n * n) as u32;
    assert_eq!(
        (plain.dsps, packed.dsps),
        (macs, macs / 2),
        "{plain:?} {packed:?}"
    );
    assert_eq!(plain.brams, packed.brams);
}

/// The same for the 16x16 array (256 MACs: 128 DSP48E1s packed).
#[test]
#[ignore = "Yosys on the 16x16 array at 8 bits packed and not, about 4 minutes; run with --ignored --nocapture"]
fn dsp_packing_halves_the_dsps_16x16() {
    println!("| array | multiplies | LUT | LUT RAM | FF | DSP48E1 | RAMB18 | MACs per DSP48E1 |");
    packing_halves_the_dsps(16);
}
