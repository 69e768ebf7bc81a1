//! What goes onto hardware: `systole emit-verilog` (the accelerator's Verilog and its cocotb
//! constants) and `systole bitstream` (a board's build, bridge top or SoC).

use super::{BitstreamArgs, EmitArgs};
use anyhow::Context;
use systole_core::ArrayConfig;

/// `systole emit-verilog`.
pub fn emit_verilog(a: &EmitArgs) -> anyhow::Result<()> {
    let mut cfg = ArrayConfig::new(a.array, 8, a.buffer_depth)
        .map_err(|e| anyhow::anyhow!("--array / --buffer-depth: {e}"))?;
    cfg.fm_depth = a.fm_depth;
    cfg.validate()
        .map_err(|e| anyhow::anyhow!("--fm-depth: {e}"))?;
    let cfg = cfg.with_word_bits(a.word_bits).with_dsp_pack(a.dsp_pack);
    cfg.validate_built().map_err(|e| {
        let pack = if a.dsp_pack { " --dsp-pack" } else { "" };
        anyhow::anyhow!("--word-bits {}{pack}: {e}", a.word_bits)
    })?;
    let v = systole_hdl::generate_verilog(&cfg)?;
    if let Some(p) = &a.cocotb {
        if a.out.as_deref() == Some(p.as_path()) {
            anyhow::bail!("--cocotb and --out name the same file: give each its own");
        }
        let py = systole_hdl::cocotb::python_constants(&cfg)?;
        systole_train::write_atomic(p, py.as_bytes())?;
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
            systole_train::write_atomic(p, v.as_bytes())?;
            let conv = if cfg.has_conv_unit() {
                format!("conv unit of {} feature-map words", cfg.fm_depth)
            } else {
                "no conv unit".to_string()
            };
            outln!(
                "wrote {} ({} lines, top module `top`: {n}x{n} array of {}-bit words{}, {}-row buffers, {conv}; CONFIG word 0x{:08x})",
                p.display(),
                v.lines().count(),
                cfg.word_bits,
                if cfg.dsp_pack { " (two MACs per DSP48E1)" } else { "" },
                cfg.buffer_depth,
                cfg.config_word(),
                n = cfg.size,
            );
        }
        None => super::write_stdout(v.as_bytes())?,
    }
    Ok(())
}

/// `systole bitstream`.
pub fn bitstream(a: &BitstreamArgs) -> anyhow::Result<()> {
    let table = systole_boards::find(&a.board)?;
    let owned = match a.clock_mhz {
        Some(mhz) => systole_boards::generate::with_clock(table, mhz)?,
        None => *table,
    };
    let board = &owned;
    let cfg = match a.array {
        Some(n) => ArrayConfig::new(n, 8, 512).map_err(|e| anyhow::anyhow!("--array: {e}"))?,
        None => systole_boards::largest_array(board)
            .with_context(|| format!("no array size fits the {} board", a.board))?,
    };
    let cfg = ArrayConfig {
        fm_depth: a.fm_depth,
        ..cfg
    }
    .with_word_bits(a.word_bits)
    .with_dsp_pack(a.dsp_pack);
    cfg.validate_built().map_err(|e| {
        anyhow::anyhow!("--fm-depth {} --word-bits {}: {e}", a.fm_depth, a.word_bits)
    })?;
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
    if let Some(t) = &r.timing {
        outln!("{}", t.line());
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
    board: &systole_boards::Board,
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
    board: &systole_boards::Board,
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
            systole_train::check_target(&path)?;
        }
    }
    Ok(())
}
