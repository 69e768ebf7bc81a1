//! Traces read back with a VCD parser: the converters' outputs carry the expected C values on
//! the expected cycles, and the file holds only the window's cycles.

use super::*;
use crate::{built_sizes, VerilatedArray};
use std::collections::HashMap;
use systole_core::numeric::convert;
use systole_core::regmap::{self, cmd};
use systole_core::{AcceleratorBus, ArrayConfig, Rounding};

/// The smallest compiled size, or `None` (and a note) without Verilator.
fn smallest() -> Option<ArrayConfig> {
    if cfg!(systole_no_verilator) {
        eprintln!(
            "systole-sim built without Verilator: {}",
            crate::INSTALL_HINT
        );
        return None;
    }
    built_sizes().into_iter().min().map(ArrayConfig::square)
}

/// Every variable's changes: `path` (scopes and name joined by `.`) -> `(time, value)`.
pub(super) struct Vcd {
    pub signals: HashMap<String, Vec<(u64, Option<u64>)>>,
    pub times: Vec<u64>,
}

impl Vcd {
    pub fn read(path: &Path) -> Vcd {
        use vcd::{Command, Value};
        let file = std::io::BufReader::new(std::fs::File::open(path).unwrap());
        let (mut scope, mut names) = (Vec::<String>::new(), HashMap::new());
        let mut signals: HashMap<String, Vec<(u64, Option<u64>)>> = HashMap::new();
        let (mut now, mut times) = (0, Vec::new());
        let bits = |v: &[Value]| {
            v.iter().try_fold(0u64, |acc, b| match b {
                Value::V0 => Some(acc << 1),
                Value::V1 => Some(acc << 1 | 1),
                _ => None,
            })
        };
        for c in vcd::Parser::new(file) {
            let (code, value) = match c.unwrap() {
                Command::ScopeDef(_, name) => {
                    scope.push(name);
                    continue;
                }
                Command::Upscope => {
                    scope.pop();
                    continue;
                }
                Command::VarDef(_, _, code, name, _) => {
                    let path = format!("{}.{name}", scope.join("."));
                    names.entry(code).or_insert_with(Vec::new).push(path);
                    continue;
                }
                Command::Timestamp(t) => {
                    (now, _) = (t, times.push(t));
                    continue;
                }
                Command::ChangeScalar(code, v) => (code, bits(&[v])),
                Command::ChangeVector(code, v) => (code, bits(&v)),
                _ => continue,
            };
            for path in names.get(&code).into_iter().flatten() {
                signals.entry(path.clone()).or_default().push((now, value));
            }
        }
        Vcd { signals, times }
    }

    /// The value of the signal whose path ends with `suffix` at `time`.
    pub fn at(&self, suffix: &str, time: u64) -> Option<u64> {
        let mut found = self.signals.iter().filter(|(p, _)| p.ends_with(suffix));
        let (path, changes) = found.next().unwrap_or_else(|| panic!("no signal {suffix}"));
        assert!(
            found.next().is_none(),
            "{suffix} names two signals ({path}, ..)"
        );
        let i = changes.partition_point(|&(t, _)| t <= time);
        i.checked_sub(1).and_then(|i| changes[i].1)
    }
}

/// One 4x4-or-larger tile with nearest-even rounding, driven through the bus, traced from
/// the command's cycle for `window` cycles. Returns the product C and the cycle DONE_COUNT
/// first reads 1.
fn traced_tile(cfg: &ArrayConfig, path: &Path, window: u64) -> (Vec<Vec<i16>>, u64) {
    let (n, k, shift) = (cfg.size, 7usize, 10u32);
    let word = |x: usize| ((x % 61) as i16 - 30) * 50;
    let a: Vec<Vec<i16>> = (0..k)
        .map(|r| (0..n).map(|l| word(r * 37 + l * 11)).collect())
        .collect();
    let b: Vec<Vec<i16>> = (0..k)
        .map(|r| (0..n).map(|l| word(r * 13 + l * 29 + 5)).collect())
        .collect();
    let mut sim = VerilatedArray::new(cfg).unwrap();
    // The command is written on cycle 2 (reset) + 3 registers + k row beats.
    let command_cycle = 2 + 3 + k as u64;
    let w = TraceWindow::new(path, None, command_cycle, Some(window)).unwrap();
    sim.open_trace(w).unwrap();
    sim.write_reg(regmap::SHIFT, shift).unwrap();
    sim.write_reg(regmap::ROUNDING, Rounding::NearestEven.code())
        .unwrap();
    sim.write_reg(regmap::K_LEN, k as u32).unwrap();
    for r in 0..k {
        let beat = systole_core::bus::Beat {
            a: Some(systole_core::bus::RowWrite {
                bank: 0,
                row: r as u16,
                data: &a[r],
            }),
            b: Some(systole_core::bus::RowWrite {
                bank: 0,
                row: r as u16,
                data: &b[r],
            }),
            c: None,
        };
        sim.beat(&beat, &mut []).unwrap();
    }
    assert_eq!(sim.cycles(), command_cycle);
    sim.write_reg(regmap::COMMAND, cmd::CLEAR.put(1) | cmd::EMIT.put(1))
        .unwrap();
    while sim.read_reg(regmap::DONE_COUNT).unwrap() == 0 {
        assert!(
            sim.cycles() < command_cycle + 100,
            "the tile never finished"
        );
        sim.idle(1).unwrap();
    }
    let done = sim.cycles();
    let want: Vec<Vec<i16>> = (0..n)
        .map(|i| {
            (0..n)
                .map(|j| {
                    let acc: i64 = (0..k)
                        .map(|r| i64::from(a[r][i]) * i64::from(b[r][j]))
                        .sum();
                    convert(acc, shift, Rounding::NearestEven, 0, 16) as i16
                })
                .collect()
        })
        .collect();
    let saturated = |v: &i16| *v == i16::MIN || *v == i16::MAX;
    assert!(!want.iter().flatten().any(saturated), "{want:?}");
    for (i, row) in want.iter().enumerate() {
        let mut got = vec![0; n];
        sim.read_c_row(0, i as u16, &mut got).unwrap();
        assert_eq!(&got, row, "C row {i} read through the bus");
    }
    drop(sim);
    (want, done)
}

#[test]
fn converter_outputs_carry_c_on_their_cycles_and_the_window_bounds_the_file() {
    let Some(cfg) = smallest() else { return };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tile.vcd");
    let window = 22;
    let (want, done) = traced_tile(&cfg, &path, window);
    let vcd = Vcd::read(&path);
    let from = 2 + 3 + 7;
    // Two samples per cycle (settled inputs at 2c, after the rising edge at 2c + 1), from the
    // window's first cycle to its last.
    assert_eq!(vcd.times.first(), Some(&(2 * from)));
    assert_eq!(vcd.times.last(), Some(&(2 * (from + window) - 1)));
    let n = cfg.size as u64;
    for c in 0..cfg.size {
        let converter = format!("converters${c}.");
        // Column c's converter writes row r of the tile on cycle done - 2n + c + r (the
        // columns are skewed by a cycle each, as the array's lanes are; DONE_COUNT reads the
        // tile two cycles after the last column's last row), sampled after the rising edge.
        for (r, row) in want.iter().enumerate() {
            let t = 2 * (done - 2 * n + (c + r) as u64) + 1;
            let at = |s: &str| vcd.at(&format!("{converter}{s}"), t);
            assert_eq!(at("wr_en"), Some(1), "column {c} row {r} at {t}");
            assert_eq!(at("wr_row"), Some(r as u64), "column {c} row {r} at {t}");
            assert_eq!(
                at("wr_data"),
                Some(u64::from(row[c] as u16)),
                "column {c} row {r}"
            );
        }
        let before = 2 * (done - 2 * n + c as u64) - 1;
        assert_eq!(
            vcd.at(&format!("{converter}wr_en"), before),
            Some(0),
            "column {c}"
        );
    }
}

/// The traced model (Verilated at run time from the same Verilog and port list) computes
/// exactly what the compiled fast one does, in the same cycles.
#[test]
fn traced_and_fast_models_agree() {
    use systole_firmware::driver::{matmul, MatmulJob};
    let Some(cfg) = smallest() else { return };
    let dir = tempfile::tempdir().unwrap();
    let (m, k, n) = (2 * cfg.size + 3, 37, cfg.size + 1);
    let a: Vec<i16> = (0..m * k).map(|i| (i as i16).wrapping_mul(-977)).collect();
    let b: Vec<i16> = (0..k * n).map(|i| (i as i16).wrapping_mul(1201)).collect();
    let job = MatmulJob {
        a: &a,
        b: &b,
        m,
        k,
        n,
        shift: 9,
        rounding: Rounding::Stochastic,
        seed: 7,
    };
    let mut fast = VerilatedArray::new(&cfg).unwrap();
    let mut traced = VerilatedArray::new(&cfg).unwrap();
    let path = dir.path().join("run.vcd");
    traced
        .open_trace(TraceWindow::new(&path, None, 100, Some(50)).unwrap())
        .unwrap();
    assert_eq!(traced.trace_state(), Some(TraceState::Waiting));
    let (mut want, mut got) = (vec![0i16; m * n], vec![0i16; m * n]);
    let s1 = matmul(&mut fast, &cfg, &job, &mut want).unwrap();
    let s2 = matmul(&mut traced, &cfg, &job, &mut got).unwrap();
    assert_eq!(want, got, "the traced model differs");
    assert_eq!(s1, s2);
    assert_eq!(fast.cycles(), traced.cycles());
    assert_eq!(
        fast.read_reg(regmap::CYCLES).unwrap(),
        traced.read_reg(regmap::CYCLES).unwrap()
    );
    assert_eq!(traced.trace_state(), Some(TraceState::Closed));
    assert_eq!(fast.trace_state(), None);
}

#[test]
fn bad_trace_requests_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let e = TraceWindow::new(&dir.path().join("t.txt"), None, 0, None).unwrap_err();
    assert!(e.to_string().contains(".vcd or .fst"), "{e}");
    let e = TraceWindow::new(&dir.path().join("t.vcd"), None, 0, Some(0)).unwrap_err();
    assert!(e.to_string().contains("0 cycles"), "{e}");
    let stated = TraceWindow::new(&dir.path().join("t"), Some(TraceFormat::Vcd), 0, None);
    assert_eq!(stated.unwrap().format, TraceFormat::Vcd);
    // An existing file is kept unless overwriting is asked for; a folder never is replaced.
    let file = dir.path().join("old.fst");
    std::fs::write(&file, "keep").unwrap();
    let w = TraceWindow::new(&file, None, 0, None).unwrap();
    assert_eq!(w.format, TraceFormat::Fst);
    let e = w.create_file(false).unwrap_err();
    assert!(e.to_string().contains("--overwrite-trace"), "{e}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "keep");
    w.create_file(true).unwrap();
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "");
    let e = TraceWindow::new(&dir.path().join("sub.vcd"), None, 0, None);
    std::fs::create_dir(dir.path().join("sub.vcd")).unwrap();
    let e = e.unwrap().create_file(true).unwrap_err();
    assert!(e.to_string().contains("not a regular file"), "{e}");
    let w = TraceWindow::new(Path::new("/nonexistent-dir/x.vcd"), None, 0, None).unwrap();
    assert!(matches!(
        w.create_file(false),
        Err(SimError::TraceFile { .. })
    ));
    // Too late: the fast model has run.
    let Some(cfg) = smallest() else { return };
    let mut sim = VerilatedArray::new(&cfg).unwrap();
    sim.idle(1).unwrap();
    let w = TraceWindow::new(&dir.path().join("late.vcd"), None, 0, None).unwrap();
    assert!(matches!(sim.open_trace(w), Err(SimError::TraceTooLate)));
}

/// An array systole-hdl refuses keeps its reason as the error's cause chain: SimError ->
/// ImageError -> HdlError (the config it names), not a string.
#[test]
fn an_image_that_cannot_be_generated_keeps_its_cause() {
    use std::error::Error;
    let dir = tempfile::tempdir().unwrap();
    let w = TraceWindow::new(&dir.path().join("t.vcd"), None, 0, None).unwrap();
    let bad = ArrayConfig::square(systole_core::config::MAX_SIZE + 1);
    let Err(e) = crate::top::traced_array(&bad, w) else {
        panic!("a {0}x{0} array was traced", bad.size)
    };
    assert!(matches!(e, SimError::TraceImage(_)), "{e}");
    let image = e.source().expect("the image error as the source");
    let image = image
        .downcast_ref::<crate::ImageError>()
        .expect("an ImageError");
    let hdl = image.source().expect("systole-hdl's error as the source");
    assert_eq!(
        hdl.downcast_ref::<systole_hdl::HdlError>(),
        Some(&systole_hdl::HdlError::Config(
            systole_core::ConfigError::Size(bad.size)
        ))
    );
}
