//! `systole check` (a device against the golden model) and `systole info`.

use super::{BenchArgs, BitstreamArgs, CheckArgs, DeviceArgs, EmitArgs};
use anyhow::Context;
use systole_core::numeric::MAX_FRAC;
use systole_core::{ArrayConfig, Rounding};
use systole_device as device;
use systole_golden::tensor::QMatrix;
use systole_golden::{self as golden, Conv2dGeom, ConvGeom, OutputSpec};
use systole_train::fixed::compare;
use systole_train::rng::{self, SplitMix64};

fn array_config(d: &DeviceArgs) -> anyhow::Result<ArrayConfig> {
    ArrayConfig::new(d.array, 8, 512).map_err(|e| anyhow::anyhow!("--array: {e}"))
}

fn random_matrix(r: &mut SplitMix64, rows: usize, cols: usize) -> QMatrix {
    let frac = r.below(MAX_FRAC as usize + 1) as u32;
    // Mostly full-range words, with the extremes mixed in: they are where saturation lives.
    let data = (0..rows * cols)
        .map(|_| match r.below(16) {
            0 => i16::MIN,
            1 => i16::MAX,
            _ => r.next_u64() as i16,
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
    let cfg = array_config(&a.device)?;
    let window = a.trace.window(&a.device.device)?;
    let result = check_on(a, cfg, window.clone());
    super::trace::finish(&window, result)
}

fn check_on(
    a: &CheckArgs,
    cfg: ArrayConfig,
    window: Option<device::TraceWindow>,
) -> anyhow::Result<()> {
    let mut dev = device::open_traced(&a.device.device, cfg, window)?;
    let n = cfg.size;
    let mut r = rng::stream(a.seed, 0xC4EC);
    let mut total = 0;
    for rounding in Rounding::ALL {
        for case in 0..a.cases {
            // Shapes around and across tile boundaries.
            let (m, k, p) = (1 + r.below(3 * n), 1 + r.below(4 * n), 1 + r.below(3 * n));
            let x = random_matrix(&mut r, m, k);
            let y = random_matrix(&mut r, k, p);
            let frac_out = ((x.frac + y.frac) as usize)
                .saturating_sub(r.below(20))
                .min(15) as u32;
            let spec = OutputSpec {
                frac: frac_out,
                rounding,
                seed: r.next_u64() as u32,
            };
            let what = format!("matmul {m}x{k}·{k}x{p} {} case {case}", rounding.name());
            let got = dev.matmul(&x, &y, &spec).with_context(|| what.clone())?;
            compare(&what, &got, &golden::matmul(&x, &y, &spec, n)?)?;
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
            let xi = random_matrix(&mut r, g.batch, g.in_ch * g.in_h * g.in_w);
            let w = random_matrix(&mut r, g.out_ch, g.in_ch * 9);
            let dy = random_matrix(&mut r, g.batch, g.out_ch * g.out_h() * g.out_w());
            let conv = |f: u32| OutputSpec {
                frac: f.saturating_sub(8).min(MAX_FRAC),
                rounding,
                seed: spec.seed ^ 0x55,
            };
            let what = format!("conv forward ({g}), {} rounding", rounding.name());
            let s = conv(xi.frac + w.frac);
            compare(
                &what,
                &dev.conv2d_forward(&xi, &w, &g, &s)
                    .with_context(|| what.clone())?,
                &golden::conv2d_forward(&xi, &w, &g, &s, n)?,
            )?;
            let what = format!("conv backward input ({g}), {} rounding", rounding.name());
            let s = conv(dy.frac + w.frac);
            compare(
                &what,
                &dev.conv2d_backward_input(&dy, &w, &g, &s)
                    .with_context(|| what.clone())?,
                &golden::conv2d_backward_input(&dy, &w, &g, &s, n)?,
            )?;
            let what = format!("conv backward weights ({g}), {} rounding", rounding.name());
            let s = conv(xi.frac + dy.frac);
            compare(
                &what,
                &dev.conv2d_backward_weights(&xi, &dy, &g, &s)
                    .with_context(|| what.clone())?,
                &golden::conv2d_backward_weights(&xi, &dy, &g, &s, n)?,
            )?;
            total += 4;
        }
    }
    let st = dev.stats();
    outln!(
        "{}: {total} operations agree with the golden model bit for bit ({} MACs, {} cycles)",
        dev.name(),
        st.macs,
        st.cycles
    );
    Ok(())
}

/// `systole emit-verilog`.
pub fn emit_verilog(a: &EmitArgs) -> anyhow::Result<()> {
    let mut cfg = ArrayConfig::new(a.array, 8, a.buffer_depth)
        .map_err(|e| anyhow::anyhow!("--array / --buffer-depth: {e}"))?;
    cfg.fm_depth = a.fm_depth;
    cfg.validate()
        .map_err(|e| anyhow::anyhow!("--fm-depth: {e}"))?;
    let v = systole_hdl::generate_verilog(&cfg)?;
    if let Some(p) = &a.cocotb {
        if a.out.as_deref() == Some(p.as_path()) {
            anyhow::bail!("--cocotb and --out name the same file: give each its own");
        }
        let py = systole_hdl::cocotb::python_constants(&cfg)?;
        systole_train::outfile::write_atomic(p, py.as_bytes())?;
        // On standard output the Verilog comes alone: the note goes to standard error.
        let note = format!(
            "wrote {} (cocotb constants of the same top: ports, registers, bit fields)",
            p.display()
        );
        if a.out.is_some() {
            outln!("{note}");
        } else {
            eprintln!("{note}");
        }
    }
    match &a.out {
        Some(p) => {
            systole_train::outfile::write_atomic(p, v.as_bytes())?;
            let conv = if cfg.has_conv_unit() {
                format!("conv unit of {} feature-map words", cfg.fm_depth)
            } else {
                "no conv unit".to_string()
            };
            outln!(
                "wrote {} ({} lines, top module `top`: {n}x{n} array, {}-row buffers, {conv}; CONFIG word 0x{:08x})",
                p.display(),
                v.lines().count(),
                cfg.buffer_depth,
                cfg.config_word(),
                n = cfg.size,
            );
        }
        None => super::write_stdout(v.as_bytes())?,
    }
    Ok(())
}

/// `systole bench`.
pub fn bench(a: &BenchArgs) -> anyhow::Result<()> {
    if a.link {
        if a.steps == 0 || a.batch == 0 || a.hidden == 0 {
            anyhow::bail!("--steps, --batch and --hidden must be at least 1");
        }
        let bench = crate::bench_link::run(a.steps, a.batch, a.hidden)?;
        outln!("{bench}");
        return Ok(());
    }
    for &n in &a.array {
        ArrayConfig::new(n, 8, 512).map_err(|e| anyhow::anyhow!("--array: {e}"))?;
    }
    use systole_core::limits::MAX_TENSOR_WORDS;
    if a.sizes.contains(&0) {
        anyhow::bail!("--sizes must be positive");
    }
    if let Some(s) = a
        .sizes
        .iter()
        .find(|&&s| s.checked_mul(s).is_none_or(|w| w > MAX_TENSOR_WORDS))
    {
        anyhow::bail!(
            "--sizes {s}: a {s}x{s} matrix is more than the {MAX_TENSOR_WORDS} (2^26) words systole allocates per tensor; use sizes up to 8192"
        );
    }
    // The weight gradient reduces over every output position of the batch.
    let one = crate::bench_conv::lenet_layer(1);
    let max_batch = systole_core::numeric::MAX_K / (one.out_h() * one.out_w());
    if a.conv_batch > max_batch {
        anyhow::bail!(
            "--conv-batch {}: the weight gradient would sum over more than the contract's {} (MAX_K) products; use at most {max_batch}",
            a.conv_batch,
            systole_core::numeric::MAX_K
        );
    }
    if a.trace.trace.is_some() && a.array.len() != 1 {
        anyhow::bail!(
            "--trace writes the waveform of one model: give one --array size (not {})",
            a.array.len()
        );
    }
    let window = a.trace.window("verilator")?;
    let shapes: Vec<(usize, usize, usize)> = a.sizes.iter().map(|&s| (s, s, s)).collect();
    let rows = super::trace::finish(
        &window,
        crate::bench::matmul_table(&a.array, &shapes, window.clone()).map_err(Into::into),
    )?;
    outln!("{}", crate::bench::BenchTable(&rows));
    if a.conv_batch > 0 {
        let g = crate::bench_conv::lenet_layer(a.conv_batch);
        outln!(
            "conv unit: LeNet layer {}->{} channels, {}x{} kernel, {}x{} input, batch {}",
            g.in_ch,
            g.out_ch,
            g.kernel,
            g.kernel,
            g.in_h,
            g.in_w,
            g.batch
        );
        let rows = crate::bench_conv::conv_table(&a.array, &g)?;
        outln!("{}", crate::bench_conv::ConvTable(&rows));
    }
    Ok(())
}

/// `systole bitstream`.
pub fn bitstream(a: &BitstreamArgs) -> anyhow::Result<()> {
    let board = systole_boards::find(&a.board)?;
    let cfg = match a.array {
        Some(n) => ArrayConfig::new(n, 8, 512).map_err(|e| anyhow::anyhow!("--array: {e}"))?,
        None => systole_boards::largest_array(board)
            .with_context(|| format!("no array size fits the {} board", a.board))?,
    };
    let cfg = ArrayConfig {
        fm_depth: a.fm_depth,
        ..cfg
    };
    cfg.validate()
        .map_err(|e| anyhow::anyhow!("--fm-depth {}: {e}", a.fm_depth))?;
    refuse_before_the_flow(board, &cfg, &a.out, a.soc)?;
    let r = if a.soc {
        soc_bitstream(board, &cfg, &a.out)?
    } else {
        systole_boards::bitstream(board, &cfg, &a.out)?
    };
    outln!(
        "{}: {}x{} array, files in {}",
        r.board,
        r.config.size,
        r.config.size,
        r.out_dir.display()
    );
    outln!(
        "verilog {}, constraints {}",
        r.verilog.display(),
        r.constraints.display()
    );
    let (u, b) = (&r.resources, &board.budget);
    outln!(
        "yosys: {} of {} LUTs (with {} LUT RAM and shift registers), {} of {} flip-flops, {} of {} \
         multipliers, {} of {} block RAMs",
        u.luts.max(u.logic_cells) + u.lutram,
        b.luts,
        u.lutram,
        u.ffs,
        b.ffs,
        u.dsps,
        b.dsps,
        u.brams,
        b.bram_blocks
    );
    if let Some(f) = &r.fmax {
        outln!("{f}");
    }
    match (&r.bitstream, &r.next_step) {
        (Some(b), _) => outln!("bitstream {}", b.display()),
        (None, Some(n)) => outln!("no bitstream built here: {n}"),
        (None, None) => outln!("no bitstream built"),
    }
    Ok(())
}

/// `bitstream --soc`: the firmware image (built now if its sources changed) and the CPU's
/// Verilog, then the SoC flow.
fn soc_bitstream(
    board: &'static systole_boards::Board,
    cfg: &ArrayConfig,
    out: &std::path::Path,
) -> anyhow::Result<systole_boards::BitstreamReport> {
    let cpu = systole_hdl::soc::vexriscv_verilog()?;
    let image = systole_soc_image::build(&[]).context("building the SoC firmware image")?;
    let words: Vec<u32> = image.words().collect();
    outln!("firmware image: {}", image.budget);
    Ok(systole_boards::soc::bitstream(
        board, cfg, out, &words, &cpu,
    )?)
}

/// What `bitstream` can refuse before any file is written or tool started: an array the board
/// certainly cannot hold (the resource model, so an icebreaker `--array 16` fails at once
/// instead of after minutes of Yosys; with `--soc` also block RAM, which the model counts per
/// memory), and a build folder that is not a folder or holds a link, device or FIFO the flow
/// would write through.
fn refuse_before_the_flow(
    board: &'static systole_boards::Board,
    cfg: &ArrayConfig,
    out: &std::path::Path,
    soc: bool,
) -> anyhow::Result<()> {
    let too_big = if soc {
        systole_boards::soc::clearly_too_big(board, cfg)
    } else {
        systole_boards::model::clearly_too_big(board, cfg)
    };
    if let Some(what) = too_big {
        return Err(systole_boards::BoardError::DoesNotFit {
            board: board.name,
            what,
        }
        .into());
    }
    let entries = match std::fs::read_dir(out) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => {
            return Err(anyhow::Error::new(e).context(format!(
                "--out {} must be a folder (or not exist yet)",
                out.display()
            )))
        }
    };
    for entry in entries {
        let path = entry
            .with_context(|| format!("cannot list {}", out.display()))?
            .path();
        if !path.is_dir() || path.is_symlink() {
            systole_train::outfile::check_target(&path)?;
        }
    }
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
