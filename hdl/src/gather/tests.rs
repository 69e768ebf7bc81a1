//! The gather engine against `systole_core::gather::EngineModel`, row by row.

use super::*;
use systole_core::gather::{ConvGeom, EngineModel, GatherConfig};
use systole_core::regmap::{gather_command, LaneMode, GA_CFG, GA_CMD};

type X = Box<GatherEngine>;

#[test]
fn gather_engine_synthesizes() {
    let mut e = GatherEngine::new(4, GA_CFG, GA_CMD, 64, 512, 16).unwrap();
    e.connect_all();
    let v = generate_verilog(&e);
    assert!(v.contains("module top"));
    assert!(GatherEngine::new(4, GA_CFG, GA_CMD, 64, 500, 16).is_err());
    assert!(GatherEngine::new(1, GA_CFG, GA_CMD, 64, 512, 16).is_err());
}

/// The low `w` bits of `x`, sign-extended: the word a `w`-bit feature map holds for `x`.
fn at_width(x: i16, w: u32) -> i16 {
    (x << (16 - w)) >> (16 - w)
}

/// Commands `(klen, lane mode, k_next)` run on a 4-lane engine of `word_bits`-bit feature-map
/// words and on the model (whose map holds each written word's low `word_bits` bits,
/// sign-extended).
fn compare(cfg: GatherConfig, fm: Vec<i16>, cmds: Vec<(usize, LaneMode, bool)>, word_bits: u32) {
    let n = 4;
    let mut model = EngineModel::new(n);
    // The model indexes a power-of-two buffer, as the hardware's 512-word one.
    let mut fm512: Vec<i16> = fm.iter().map(|&x| at_width(x, word_bits)).collect();
    fm512.resize(512, 0);
    let mut want: Vec<Vec<Vec<i16>>> = vec![];
    for &(klen, mode, k_next) in &cmds {
        let mut rows = vec![vec![0i16; n]; klen];
        model.run(&cfg, klen, mode, k_next, &fm512, |k, w| {
            rows[k] = w.to_vec()
        });
        want.push(rows);
    }
    let words = cfg.words();
    let mut sim = Simulation::new();
    sim.add_clock(5, |x: &mut X| x.clock.next = !x.clock.val());
    sim.add_testbench(move |mut sim: Sim<GatherEngine>| {
        let mut x = sim.init()?;
        x.reset.next = true;
        wait_clock_cycle!(sim, clock, x);
        x.reset.next = false;
        x.fm_we.next = true;
        for (r, row) in fm.chunks(4).enumerate() {
            x.fm_row.next = bits(r as u64);
            for (i, w) in row.iter().enumerate() {
                x.fm_data[i].next = signed(*w as i64);
            }
            wait_clock_cycle!(sim, clock, x);
        }
        x.fm_we.next = false;
        x.reg_we.next = true;
        x.reg_addr.next = bits(GA_CFG as u64);
        for w in words {
            x.reg_wdata.next = bits(w as u64);
            wait_clock_cycle!(sim, clock, x);
        }
        for (c, &(klen, mode, k_next)) in cmds.iter().enumerate() {
            x.reg_we.next = true;
            x.reg_addr.next = bits(GA_CMD as u64);
            x.reg_wdata.next =
                bits(gather_command(klen as u32, (c % 2) as u8, mode, k_next) as u64);
            wait_clock_cycle!(sim, clock, x);
            x.reg_we.next = false;
            if c == 1 {
                // The interlock: while an array command reads the target bank (bit c % 2),
                // the engine walks its lanes but writes no row.
                x.bank_busy.next = bits(0b10);
                for _ in 0..30 {
                    sim_assert!(sim, x.busy.val() && !x.wr_en.val(), x);
                    wait_clock_cycle!(sim, clock, x);
                }
                // The other bank being read does not hold this fill.
                x.bank_busy.next = bits(0b01);
            }
            let mut got = 0;
            let mut guard = 0;
            while x.busy.val() || got == 0 {
                if x.wr_en.val() {
                    let row = x.wr_row.val().index();
                    sim_assert_eq!(sim, (c, row, x.wr_bank.val()), (c, got, c % 2 == 1), x);
                    for (l, &w) in want[c][row].iter().enumerate() {
                        let v = x.wr_data[l].val().bigint().try_into().unwrap_or(i64::MAX) as i16;
                        sim_assert_eq!(sim, (c, row, l, v), (c, row, l, w), x);
                    }
                    got += 1;
                }
                guard += 1;
                sim_assert!(sim, guard < 1000, x);
                wait_clock_cycle!(sim, clock, x);
            }
            sim_assert_eq!(sim, got, klen, x);
            x.bank_busy.next = bits(0);
        }
        // Accepted when idle; the same write once the engine is busy is refused; so is klen 0.
        x.reg_we.next = true;
        x.reg_wdata.next = bits(gather_command(8, 0, LaneMode::Keep, false) as u64);
        x = sim.wait(1, x)?;
        sim_assert!(sim, !x.cmd_error.val(), x);
        wait_clock_cycle!(sim, clock, x);
        sim_assert!(sim, x.busy.val() && x.cmd_error.val(), x);
        x.reg_we.next = false;
        while x.busy.val() {
            wait_clock_cycle!(sim, clock, x);
        }
        x.reg_we.next = true;
        x.reg_wdata.next = bits(gather_command(0, 0, LaneMode::Keep, false) as u64);
        x = sim.wait(1, x)?;
        sim_assert!(sim, x.cmd_error.val(), x);
        sim.done(x)
    });
    let mut uut = GatherEngine::new(n, GA_CFG, GA_CMD, 64, 512, word_bits).unwrap();
    uut.connect_all();
    sim.run(Box::new(uut), 10_000_000).unwrap();
}

fn strided_input_gradient() -> (GatherConfig, usize, usize) {
    let g = ConvGeom {
        in_ch: 2,
        in_h: 5,
        in_w: 4,
        out_ch: 2,
        kernel: 3,
        stride: 2,
        pad: 1,
    };
    (
        g.backward_input_a(2, g.out_words()),
        2 * g.out_words().next_multiple_of(4),
        g.out_ch * 9,
    )
}

/// At `W` = 8 and 12 the map keeps the low `W` bits of each word and the lanes read them back
/// sign-extended: the words written here run past the `W`-bit range in both directions, so a
/// map one bit narrow, or a lane zero-extending, gives other words than the model's.
#[test]
fn gather_engine_matches_the_model_at_8_and_12_bits() {
    let (cfg, words, k) = strided_input_gradient();
    for w in [8, 12] {
        let fm: Vec<i16> = (0..words)
            .map(|i| (i as i16 * 1297).wrapping_sub(20_000))
            .collect();
        assert!(fm.iter().any(|&x| at_width(x, w) < -(1 << (w - 2))));
        assert!(fm.iter().any(|&x| at_width(x, w) > 1 << (w - 2)));
        compare(
            cfg,
            fm,
            vec![(k, LaneMode::Load, false), (k, LaneMode::Next, false)],
            w,
        );
    }
}

#[test]
fn gather_engine_matches_the_model() {
    // Strided input gradient (remainders, flipped kernel), tiles walked, kept and restarted,
    // a K walk continued across commands.
    let (cfg, words, k) = strided_input_gradient();
    // Two slots of the output gradient, padded to whole 4-word rows.
    let fm: Vec<i16> = (0..words).map(|i| 100 + i as i16 * 7).collect();
    compare(
        cfg,
        fm,
        vec![
            (k, LaneMode::Load, false),
            (k, LaneMode::Next, false),
            (7, LaneMode::Keep, false),
            (k - 7, LaneMode::Keep, true),
            (k, LaneMode::Load, false),
        ],
        16,
    );
}

/// `gather.v` declares the engine's ports as rust-hdl does, the per-lane ones packed (`fm_data`
/// holds the `fm_data$i`, `wr_data` the `wr_data$i`, 16 bits a lane), and its parameters in
/// the order and with the defaults the crate passes.
#[test]
fn gather_file_declares_the_blocks_ports_and_parameters() {
    use crate::vfile::{header, rust_hdl_ports, Decl, Dir};
    let (n, row_words) = (4, 4);
    let mut e = GatherEngine::new(n, GA_CFG, GA_CMD, 64, 512, 16).unwrap();
    e.connect_all();
    let v = generate_verilog(&e);
    let first = v.split("endmodule").next().unwrap();
    let lanes = |decl: &str| {
        (0..n)
            .filter(|i| first.contains(&format!("{decl}{i};")))
            .count()
    };
    assert_eq!(
        lanes("input wire signed [15:0] fm_data$"),
        row_words,
        "{first}"
    );
    assert_eq!(lanes("output wire signed [15:0] wr_data$"), n, "{first}");
    let mut want = rust_hdl_ports(&v);
    let packed = |name: &str, dir, range: &str| Decl {
        name: name.into(),
        dir,
        signed: false,
        range: Some(range.into()),
    };
    want.push(packed("fm_data", Dir::In, "ROW_WORDS*16-1:0"));
    want.push(packed("wr_data", Dir::Out, "N*16-1:0"));
    let mut got = header(verilog::GATHER_V).unwrap().ports;
    want.sort();
    got.sort();
    assert_eq!(got, want);
    let shape = verilog::EngineShape {
        n,
        row_words,
        fm_words: 512,
        enabled: true,
        word_bits: 16,
    };
    let params = verilog::params(&shape);
    let file = header(verilog::GATHER_V).unwrap().params;
    let names: Vec<&str> = params.iter().map(|p| p.0).collect();
    assert_eq!(&file[..names.len()], &names[..]);
    // The model's constants follow, which rust-hdl declares.
    assert_eq!(
        &file[names.len()..],
        ["a_cfg", "a_cmd", "depth", "lanes_last", "enabled"]
    );
    for (name, value) in params {
        let line = format!("parameter {name} = {value},");
        assert!(verilog::GATHER_V.contains(&line), "gather.v lacks {line:?}");
    }
}
