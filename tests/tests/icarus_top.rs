//! The emitted Verilog on a second simulator: the 4x4 `top` that `systole emit-verilog --array 4`
//! writes, run under Icarus Verilog (`iverilog -g2012` + `vvp`) by the bus-replay testbench of
//! `systole_hdl::icarus`, computes two matmul tiles through its documented ports and registers
//! (one with nearest-even rounding, one stochastic, in the other buffer banks) bit for bit as
//! the golden model does. Needs Icarus (`./x test` installs it; Debian: `apt-get install
//! iverilog`).

use std::fmt::Write as _;
use systole_core::numeric::tile_seed;
use systole_core::regmap::{
    command, DONE_COUNT, K_LEN, ROUNDING, SEED, SHIFT, STATUS, STATUS_BUSY, STATUS_ERROR,
};
use systole_core::{ArrayConfig, Rounding};
use systole_golden::QMatrix;
use systole_golden::{matmul, OutputSpec};

/// Small deterministic generator (splitmix64).
fn next(s: &mut u64) -> u64 {
    *s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *s;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A random `rows x cols` operand with edge words mixed in.
fn operand(s: &mut u64, rows: usize, cols: usize, frac: u32) -> QMatrix {
    let mut m = QMatrix::zeros(rows, cols, frac);
    for w in &mut m.data {
        *w = match next(s) % 8 {
            0 => [i16::MIN, i16::MAX, 0, -1][(next(s) % 4) as usize],
            _ => next(s) as i16,
        };
    }
    m
}

/// One tile: operands, the output spec, and the bank it uses.
struct Tile {
    a: QMatrix,
    b: QMatrix,
    out: OutputSpec,
    bank: u8,
}

/// Script lines writing the tile's operand rows into its banks.
fn write_rows(s: &mut String, t: &Tile, n: usize) {
    for k in 0..t.a.cols {
        let a: Vec<String> = (0..n)
            .map(|r| format!("{:x}", t.a.data[r * t.a.cols + k] as u16))
            .collect();
        let b: Vec<String> = (0..n)
            .map(|c| format!("{:x}", t.b.data[k * n + c] as u16))
            .collect();
        let _ = writeln!(s, "a {} {k:x} {}", t.bank, a.join(" "));
        let _ = writeln!(s, "b {} {k:x} {}", t.bank, b.join(" "));
    }
}

/// Script lines setting the conversion and enqueuing the tile's command.
fn start(s: &mut String, t: &Tile) {
    let shift = t.a.frac + t.b.frac - t.out.frac;
    let seed = tile_seed(t.out.seed, 0, 0);
    let cmd = command(t.bank, t.bank, t.bank, true, true);
    for (addr, v) in [
        (SHIFT, shift),
        (ROUNDING, t.out.rounding.code()),
        (SEED, seed),
        (K_LEN, t.a.cols as u32),
        (systole_core::regmap::COMMAND, cmd),
    ] {
        let _ = writeln!(s, "w {addr:x} {v:x}");
    }
}

#[test]
fn emitted_top_computes_tiles_under_icarus_as_the_golden_model() {
    let cfg = ArrayConfig::new(4, 8, 512).unwrap();
    let n = cfg.size;
    let mut s = 0x1CA2_0005u64;
    let tiles = [
        (13, Rounding::NearestEven, 0),
        (cfg.buffer_depth, Rounding::Stochastic, 1),
    ]
    .map(|(k, rounding, bank)| Tile {
        a: operand(&mut s, n, k, 15),
        b: operand(&mut s, k, n, 15),
        // Shift 22: sums of random products land mostly inside the 16-bit range (a few
        // saturate), so every rounding bit and the stochastic seed show in the outputs.
        out: OutputSpec {
            frac: 8,
            rounding,
            seed: next(&mut s) as u32,
        },
        bank,
    });
    // Tile 0 runs while tile 1's rows go into the other banks; SHIFT and ROUNDING change only
    // once the array is idle.
    let mut script = String::new();
    write_rows(&mut script, &tiles[0], n);
    start(&mut script, &tiles[0]);
    write_rows(&mut script, &tiles[1], n);
    let _ = writeln!(script, "p {STATUS:x} {STATUS_BUSY:x} 0");
    start(&mut script, &tiles[1]);
    let _ = writeln!(script, "p {DONE_COUNT:x} ffffffff 2");
    let _ = writeln!(script, "r {STATUS:x}");
    for t in &tiles {
        for r in 0..n {
            let _ = writeln!(script, "c {} {r:x}", t.bank);
        }
    }
    script.push_str("q\n");

    let verilog = systole_hdl::generate_verilog(&cfg).unwrap();
    let tb = systole_hdl::icarus::bus_testbench(&cfg).unwrap();
    let dir = std::env::temp_dir().join(format!("systole-icarus-top-{}", std::process::id()));
    let run = systole_hdl::icarus::run(
        &dir,
        "tb",
        &[("top.v", &verilog), ("tb.v", &tb)],
        &[("script.txt", &script)],
        &["dump.vcd"],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let unknown = systole_hdl::icarus::unknown_at_end(&run.files[0]);
    assert!(
        unknown.is_empty(),
        "{} signals Icarus left unknown (logic never evaluated), among them:\n{}",
        unknown.len(),
        unknown[..unknown.len().min(8)].join("\n")
    );
    let out = run.stdout;

    assert!(out.contains("END "), "the run did not finish:\n{out}");
    assert!(
        !out.contains("TIMEOUT"),
        "the tiles never completed:\n{out}"
    );
    let status = out
        .lines()
        .find_map(|l| l.strip_prefix("R "))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| u32::from_str_radix(v, 16).ok())
        .unwrap_or_else(|| panic!("no STATUS read back:\n{out}"));
    assert_eq!(status & STATUS_ERROR, 0, "STATUS {status:#x}:\n{out}");
    let mut got = [vec![0i16; n * n], vec![0i16; n * n]];
    let mut rows_read = 0;
    for line in out.lines().filter_map(|l| l.strip_prefix("C ")) {
        let f: Vec<&str> = line.split_whitespace().collect();
        let (bank, row): (usize, usize) = (f[0].parse().unwrap(), f[1].parse().unwrap());
        for (c, w) in f[2..].iter().enumerate() {
            let v = u16::from_str_radix(w, 16).unwrap_or_else(|_| {
                panic!("C[{row}][{c}] of bank {bank} is {w:?}, not a word (an x is a register Icarus never assigned):\n{out}")
            });
            got[bank][row * n + c] = v as i16;
        }
        rows_read += 1;
    }
    assert_eq!(rows_read, 2 * n, "C rows missing:\n{out}");
    for (t, got) in tiles.iter().zip(&got) {
        let want = matmul(&t.a, &t.b, &t.out, n).unwrap();
        let inside = want
            .data
            .iter()
            .filter(|w| !matches!(**w, i16::MIN | i16::MAX));
        assert!(
            inside.count() >= n * n / 2,
            "the tile saturates: a weak test"
        );
        assert_eq!(
            got, &want.data,
            "{:?} tile, K = {}: Icarus differs from the golden model",
            t.out.rounding, t.a.cols
        );
    }
}
