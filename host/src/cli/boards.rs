//! `systole boards`: the boards table (resource model) and the measured per-W table of the board
//! images (`systole_boards::measured`, printed from the file built into the program); with
//! `--synthesize`, the command that writes that file: Yosys on each image at each W, one design
//! at a time, through `systole explore`'s synthesis and its cache keyed by design hash (so a
//! rerun after an interruption synthesises only what is missing).

use super::BoardsArgs;
use crate::explore::synth::{Cached, Resources, Yosys};
use crate::explore::{parse_list, Axes, DesignPoint, ExploreError};
use anyhow::Context;
use std::path::PathBuf;
use std::time::{Instant, SystemTime, UNIX_EPOCH};
use systole_boards::measured::{Image, MeasuredFile, MeasuredRow};
use systole_boards::{model, soc, Board, Family};
use systole_core::config::{MAX_SIZE, MIN_SIZE};

/// One synthesis of the measured table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Job {
    image: Image,
    board: &'static Board,
    point: DesignPoint,
}

impl Job {
    fn label(&self) -> String {
        let (n, fm, w) = (self.point.array, self.point.fm_depth, self.point.word_bits);
        let image = match self.image {
            Image::Bridge => "bridge",
            Image::Soc => "SoC",
        };
        format!("{image} for {} {n}x{n} fm{fm} W{w}", self.board.name)
    }
}

/// `systole boards`.
pub fn boards(a: &BoardsArgs) -> anyhow::Result<()> {
    if !a.routed.is_empty() {
        return gather_routed(a);
    }
    if !a.synthesize {
        if a.out.is_some() {
            anyhow::bail!("--out is for --synthesize or --routed: give one of them");
        }
        let mut text = systole_boards::boards_table();
        text.push('\n');
        text.push_str(&systole_boards::measured::measured_table()?);
        text.push('\n');
        text.push_str(&systole_boards::routed_table::routed_table()?.table());
        return super::write_stdout(text.as_bytes());
    }
    let out = a.out.as_ref().with_context(|| {
        format!(
            "--synthesize needs --out FILE (the repository's table is {})",
            systole_boards::measured::MEASURED_FILE
        )
    })?;
    if out.exists() && !a.overwrite {
        anyhow::bail!(
            "{} exists: give --overwrite to replace it, or another --out",
            out.display()
        );
    }
    systole_train::check_target(out)?;
    let jobs = jobs(a)?;
    // Before any synthesis: a missing Yosys says how to install it.
    let yosys = systole_boards::tools::yosys_version()?;
    let cache = super::explore::synth_cache_dir(a.synth_cache.as_deref(), &PathBuf::from("."));
    outln!(
        "synthesising {} design(s) with {yosys}, one at a time (cache {})",
        jobs.len(),
        cache.display()
    );
    let rows = measure(&jobs, |job| {
        let yosys = Yosys {
            work: cache.clone(),
            image: job.image,
            board: job.board,
        };
        let cached = Cached {
            inner: &yosys,
            dir: cache.clone(),
        };
        let started = Instant::now();
        let (r, hit) = cached.get(&job.point)?;
        let how = if hit {
            "cached".to_string()
        } else {
            format!("{:.0} s", started.elapsed().as_secs_f64())
        };
        outln!(
            "{}: {} LUT + {} LUT RAM, {} FF, {} DSP, {} BRAM ({how})",
            job.label(),
            r.luts,
            r.lutram,
            r.ffs,
            r.dsps,
            r.brams
        );
        Ok(r)
    })?;
    let file = MeasuredFile {
        yosys,
        date: utc_date(SystemTime::now()),
        command: format!(
            "systole boards --synthesize --image {} --array {} --fm-depth {} --word-bits {} --out {}",
            a.image,
            a.array,
            a.fm_depth,
            a.word_bits,
            systole_boards::measured::MEASURED_FILE
        ),
        rows,
    };
    let json = serde_json::to_string_pretty(&file)? + "\n";
    systole_train::write_atomic(out, json.as_bytes())?;
    outln!("wrote {} ({} rows)", out.display(), file.rows.len());
    Ok(())
}

/// `boards --routed DIR... --out FILE`: the routed table from the builds' `timing.json`.
fn gather_routed(a: &BoardsArgs) -> anyhow::Result<()> {
    let out = a.out.as_ref().with_context(|| {
        format!(
            "--routed needs --out FILE (the repository's table is {})",
            systole_boards::routed_table::ROUTED_FILE
        )
    })?;
    if out.exists() && !a.overwrite {
        anyhow::bail!(
            "{} exists: give --overwrite to replace it, or another --out",
            out.display()
        );
    }
    systole_train::check_target(out)?;
    let rows = a
        .routed
        .iter()
        .map(|dir| {
            systole_boards::Timing::read(dir).with_context(|| {
                format!(
                    "{} is not a routed build folder: build it with `systole bitstream` on an \
                     iCE40 or ECP5 board (or Vivado) first",
                    dir.display()
                )
            })
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let dirs: Vec<String> = a.routed.iter().map(|d| d.display().to_string()).collect();
    let file = systole_boards::routed_table::RoutedFile {
        date: utc_date(SystemTime::now()),
        command: format!(
            "systole boards --routed {} --out {}",
            dirs.join(" "),
            systole_boards::routed_table::ROUTED_FILE
        ),
        rows,
    };
    let json = serde_json::to_string_pretty(&file)? + "\n";
    // What is written must read back as the table `systole boards` prints.
    systole_boards::routed_table::RoutedFile::parse(&json)?;
    systole_train::write_atomic(out, json.as_bytes())?;
    outln!("wrote {} ({} rows)", out.display(), file.rows.len());
    Ok(())
}

/// The designs `a` asks for, in the table's order: per image, array, feature-map depth and W.
/// The SoC is synthesised once per RAM size the 7-series boards give it (on the first board
/// with that RAM); the iCE40 image is the iCE40 boards' bridge top at their largest array,
/// without a conv unit.
pub(crate) fn jobs(a: &BoardsArgs) -> Result<Vec<Job>, ExploreError> {
    let images = parse_list("--image", &a.image, "bridge,soc,ice40", |s| {
        ["bridge", "soc", "ice40"]
            .contains(&s)
            .then(|| s.to_string())
    })?;
    // The sweep's axes and their checks (any array size: nothing here is simulated).
    let all_sizes: Vec<usize> = (MIN_SIZE..=MAX_SIZE).collect();
    let points = Axes {
        arrays: a.array.clone(),
        fm_depths: a.fm_depth.clone(),
        word_bits: a.word_bits.clone(),
        roundings: "stochastic".into(),
        dsp_packs: "off".into(),
    }
    .points(&all_sizes)?;
    let arrays: Vec<usize> = points.iter().fold(Vec::new(), |mut v, p| {
        if !v.contains(&p.array) {
            v.push(p.array);
        }
        v
    });
    let xc7: Vec<&'static Board> = systole_boards::list()
        .iter()
        .filter(|b| b.family == Family::Xc7)
        .collect();
    let mut targets: Vec<(Image, &'static Board, Vec<usize>)> = Vec::new();
    for image in &images {
        match image.as_str() {
            "bridge" => targets.extend(xc7.first().map(|b| (Image::Bridge, *b, arrays.clone()))),
            "soc" => {
                let mut rams = Vec::new();
                for b in &xc7 {
                    if !rams.contains(&soc::ram_bytes(b)) {
                        rams.push(soc::ram_bytes(b));
                        targets.push((Image::Soc, *b, arrays.clone()));
                    }
                }
            }
            _ => {
                for b in systole_boards::list() {
                    if let (Family::Ice40Up, Some(c)) = (b.family, model::largest_array(b)) {
                        targets.push((Image::Bridge, b, vec![c.size]));
                    }
                }
            }
        }
    }
    let mut jobs = Vec::new();
    for (image, board, sizes) in targets {
        for &array in &sizes {
            // The points of the first array, at this one (the iCE40 board's own size, without
            // a conv unit: none fits its block RAM).
            let ice40 = board.family == Family::Ice40Up;
            for p in points
                .iter()
                .filter(|p| p.array == arrays[0] && !(ice40 && p.fm_depth > 0))
            {
                let point = DesignPoint { array, ..*p };
                point
                    .config()
                    .validate_built()
                    .map_err(|source| ExploreError::Array {
                        value: array,
                        source,
                    })?;
                jobs.push(Job {
                    image,
                    board,
                    point,
                });
            }
        }
    }
    Ok(jobs)
}

/// Runs `synthesise` on each job in order and makes its row of the table.
pub(crate) fn measure(
    jobs: &[Job],
    mut synthesise: impl FnMut(&Job) -> Result<Resources, ExploreError>,
) -> Result<Vec<MeasuredRow>, ExploreError> {
    jobs.iter()
        .map(|job| {
            let r = synthesise(job)?;
            Ok(MeasuredRow {
                image: job.image,
                board: job.board.name.to_string(),
                array: job.point.array,
                fm_depth: job.point.fm_depth,
                word_bits: job.point.word_bits,
                ram_bytes: (job.image == Image::Soc).then(|| soc::ram_bytes(job.board)),
                luts: r.luts,
                lutram: r.lutram,
                ffs: r.ffs,
                dsps: r.dsps,
                brams: r.brams,
                ramb36: r.ramb36,
            })
        })
        .collect()
}

/// `YYYY-MM-DD` of `t` in UTC (days since 1970 to the civil date, proleptic Gregorian).
pub(crate) fn utc_date(t: SystemTime) -> String {
    let days = t
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() / 86_400) as i64;
    // Eras of 400 years (146,097 days) from 0000-03-01.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

#[cfg(test)]
mod tests;
