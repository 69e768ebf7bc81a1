//! `systole check` (a device against the golden model) and `systole info`.

use super::{CheckArgs, DeviceArgs};
use anyhow::Context;
use systole_core::numeric::{max_frac, word_max, word_min, WORD_BITS};
use systole_core::{ArrayConfig, Rounding};
use systole_device as device;
use systole_golden::tensor::QMatrix;
use systole_golden::{self as golden, Conv2dGeom, ConvGeom, OutputSpec};
use systole_train::{compare_with_golden as compare, random_stream, SplitMix64};

fn array_config(d: &DeviceArgs) -> anyhow::Result<ArrayConfig> {
    ArrayConfig::new(d.array, 8, 512).map_err(|e| anyhow::anyhow!("--array: {e}"))
}

/// The array of `check`: `--array` at `--word-bits`, as `train` opens it.
fn check_config(a: &CheckArgs) -> anyhow::Result<ArrayConfig> {
    let cfg = array_config(&a.device)?;
    if a.word_bits == WORD_BITS {
        return Ok(cfg);
    }
    let narrow = cfg.with_word_bits(a.word_bits);
    narrow
        .validate_built()
        .map_err(|e| anyhow::anyhow!("--word-bits {}: {e}", a.word_bits))?;
    Ok(narrow)
}

/// A random `rows x cols` matrix of `w`-bit words (sign-extended in 16 bits).
fn random_matrix(r: &mut SplitMix64, rows: usize, cols: usize, w: u32) -> QMatrix {
    let frac = r.below(max_frac(w) as usize + 1) as u32;
    let (lo, hi) = (word_min(w) as i16, word_max(w) as i16);
    // Mostly full-range words, with the extremes mixed in: they are where saturation lives.
    let data = (0..rows * cols)
        .map(|_| match r.below(16) {
            0 => lo,
            1 => hi,
            _ => ((r.next_u64() as i16) << (16 - w)) >> (16 - w),
        })
        .collect();
    QMatrix {
        rows,
        cols,
        frac,
        data,
    }
}

/// `systole check`: random products and convolutions in every rounding mode, device vs golden.
pub fn check(a: &CheckArgs) -> anyhow::Result<()> {
    if a.cases == 0 {
        anyhow::bail!("--cases must be at least 1: with no cases nothing would be checked");
    }
    let cfg = check_config(a)?;
    let window = a.trace.window(&a.device.device)?;
    let result = check_on(a, cfg, window.clone());
    super::trace::finish(&window, result)
}

fn check_on(
    a: &CheckArgs,
    cfg: ArrayConfig,
    window: Option<device::TraceWindow>,
) -> anyhow::Result<()> {
    let mut dev = a.device.device.open_traced(cfg, window)?;
    let n = cfg.size;
    let w = cfg.word_bits;
    let mut r = random_stream(a.seed, 0xC4EC);
    let mut total = 0;
    for rounding in Rounding::ALL {
        for case in 0..a.cases {
            // Shapes around and across tile boundaries.
            let (m, k, p) = (1 + r.below(3 * n), 1 + r.below(4 * n), 1 + r.below(3 * n));
            let x = random_matrix(&mut r, m, k, w);
            let y = random_matrix(&mut r, k, p, w);
            let frac_out = ((x.frac + y.frac) as usize)
                .saturating_sub(r.below(20))
                .min(max_frac(w) as usize) as u32;
            let spec = OutputSpec {
                frac: frac_out,
                rounding,
                seed: r.next_u64() as u32,
            };
            let what = format!("matmul {m}x{k}·{k}x{p} {} case {case}", rounding.name());
            let got = dev.matmul(&x, &y, &spec).with_context(|| what.clone())?;
            compare(&what, &got, &golden::matmul_at(&x, &y, &spec, n, w)?)?;
            let g = Conv2dGeom {
                batch: 1 + r.below(3),
                shape: ConvGeom {
                    in_ch: 1 + r.below(3),
                    in_h: 3 + r.below(6),
                    in_w: 3 + r.below(6),
                    out_ch: 1 + r.below(4),
                    kernel: 3,
                    stride: 1 + r.below(2),
                    pad: r.below(2),
                },
            };
            let xi = random_matrix(&mut r, g.batch, g.in_ch * g.in_h * g.in_w, w);
            let wt = random_matrix(&mut r, g.out_ch, g.in_ch * 9, w);
            let dy = random_matrix(&mut r, g.batch, g.out_ch * g.out_h() * g.out_w(), w);
            let conv = |f: u32| OutputSpec {
                frac: f.saturating_sub(8).min(max_frac(w)),
                rounding,
                seed: spec.seed ^ 0x55,
            };
            let what = format!("conv forward ({g}), {} rounding", rounding.name());
            let s = conv(xi.frac + wt.frac);
            compare(
                &what,
                &dev.conv2d_forward(&xi, &wt, &g, &s)
                    .with_context(|| what.clone())?,
                &golden::conv::conv2d_forward_at(&xi, &wt, &g, &s, n, w)?,
            )?;
            let what = format!("conv backward input ({g}), {} rounding", rounding.name());
            let s = conv(dy.frac + wt.frac);
            compare(
                &what,
                &dev.conv2d_backward_input(&dy, &wt, &g, &s)
                    .with_context(|| what.clone())?,
                &golden::conv::conv2d_backward_input_at(&dy, &wt, &g, &s, n, w)?,
            )?;
            let what = format!("conv backward weights ({g}), {} rounding", rounding.name());
            let s = conv(xi.frac + dy.frac);
            compare(
                &what,
                &dev.conv2d_backward_weights(&xi, &dy, &g, &s)
                    .with_context(|| what.clone())?,
                &golden::conv::conv2d_backward_weights_at(&xi, &dy, &g, &s, n, w)?,
            )?;
            total += 4;
        }
    }
    let st = dev.stats();
    outln!(
        "{} ({}-bit words): {total} operations agree with the golden model bit for bit ({} MACs, {} cycles)",
        dev.name(),
        w,
        st.macs,
        st.cycles
    );
    Ok(())
}

/// `systole info`.
pub fn info(d: &DeviceArgs) -> anyhow::Result<()> {
    let cfg = array_config(d)?;
    outln!("systole {}", env!("CARGO_PKG_VERSION"));
    outln!(
        "array {}: {}x{} PEs, {}-bit words, {}-bit accumulators, buffer depth {}, config word 0x{:08x}",
        cfg.name(),
        cfg.size,
        cfg.size,
        cfg.word_bits,
        cfg.acc_bits,
        cfg.buffer_depth,
        cfg.config_word()
    );
    for spec in ["golden", "verilator"] {
        match device::open(spec, cfg) {
            Ok(dev) => outln!("device {spec}: available ({})", dev.name()),
            Err(e) => outln!("device {spec}: {e}"),
        }
    }
    outln!("device serial:PATH: a board (or the simulated board) behind a serial port");
    match systole_train::data::digits::load() {
        Ok(ds) => outln!(
            "data digits: shipped, {} train / {} test images",
            ds.train.len(),
            ds.test.len()
        ),
        Err(e) => outln!("data digits: {:#}", anyhow::Error::from(e)),
    }
    let fdir = systole_train::data::fashion::default_dir();
    if fdir.join("train-images-idx3-ubyte.gz").exists() {
        outln!("data fashion-mnist: installed in {}", fdir.display());
    } else {
        outln!("data fashion-mnist: not installed (apt-get install dataset-fashion-mnist)");
    }
    let font = std::path::Path::new(crate::plot::FONT_PATH).exists();
    outln!(
        "plot font: {}",
        if font {
            crate::plot::FONT_PATH
        } else {
            "missing, plots have no text (apt-get install fonts-dejavu-core)"
        }
    );
    Ok(())
}
