use super::*;

/// The file built into the program parses, and each image it measures (image, board, array,
/// conv unit) is there at W = 8, 12 and 16: the bridge top and the SoC at 8x8 on 7-series at
/// each SoC RAM a board has, and the iCE40 board's bridge top.
#[test]
fn the_measured_file_parses_and_covers_every_w() {
    let file = MeasuredFile::parse(MEASURED_JSON).unwrap();
    assert!(file.yosys.starts_with("Yosys "), "{}", file.yosys);
    assert_eq!(file.date.len(), 10, "{}", file.date);
    assert!(file.command.starts_with("systole boards --synthesize"));
    let mut designs: Vec<(Image, &str, usize, usize)> = file
        .rows
        .iter()
        .map(|r| (r.image, r.board.as_str(), r.array, r.fm_depth))
        .collect();
    designs.dedup();
    for d in &designs {
        let mut ws: Vec<u32> = file
            .rows
            .iter()
            .filter(|r| (r.image, r.board.as_str(), r.array, r.fm_depth) == *d)
            .map(|r| r.word_bits)
            .collect();
        ws.sort_unstable();
        assert_eq!(ws, [8, 12, 16], "{d:?}");
    }
    for want in [
        (Image::Bridge, "arty-a7-35", 8, 0),
        (Image::Soc, "arty-a7-35", 8, 0),
        (Image::Soc, "arty-a7-100", 8, 0),
        (Image::Bridge, "icebreaker", 2, 0),
    ] {
        assert!(
            designs.contains(&want),
            "{want:?} not measured: {designs:?}"
        );
    }
}

/// `systole boards` prints every row of the file with the file's own counts, and a table made
/// from another file prints that file's counts: the figures come from the file, not the code.
#[test]
fn the_printed_rows_come_from_the_file() {
    let file = MeasuredFile::parse(MEASURED_JSON).unwrap();
    let printed = crate::boards_table() + &measured_table().unwrap();
    assert!(printed.contains(&file.yosys) && printed.contains(&file.date));
    for r in &file.rows {
        let line = printed
            .lines()
            .find(|l| {
                l.starts_with(&r.image_label(r.board().unwrap()))
                    && l.contains(&format!(
                        " {0}x{0} {1:>5} {2:>2} ",
                        r.array, r.fm_depth, r.word_bits
                    ))
            })
            .unwrap_or_else(|| panic!("no line for {r:?} in\n{printed}"));
        let counts = format!(
            "{}+{} {:>6} {:>4} {:>8}",
            r.luts,
            r.lutram,
            r.ffs,
            r.dsps,
            format!("{} ({})", r.brams, r.ramb36)
        );
        assert!(line.contains(&counts), "{line} should show {counts}");
    }
    let mut other = file.clone();
    other.rows[0].luts = 12_345;
    other.rows[0].ffs = 23_456;
    let t = MeasuredFile::parse(&serde_json::to_string(&other).unwrap())
        .unwrap()
        .table()
        .unwrap();
    assert!(t.contains("12345+") && t.contains(" 23456 "), "{t}");
}

fn row(image: Image, board: &str, w: u32) -> MeasuredRow {
    MeasuredRow {
        image,
        board: board.into(),
        array: 8,
        fm_depth: 0,
        word_bits: w,
        ram_bytes: (image == Image::Soc).then(|| soc::ram_bytes(crate::find(board).unwrap())),
        luts: 10_000,
        lutram: 100,
        ffs: 10_000,
        dsps: 64 + 4 * u32::from(image == Image::Soc),
        brams: 16,
        ramb36: 0,
    }
}

/// A row fits the boards of its family by its counts (every count within the part); a SoC row
/// speaks for the boards whose SoC has its RAM only; MACs per DSP leave out the CPU's.
#[test]
fn fits_and_macs_per_dsp_follow_the_counts() {
    let names = |r: &MeasuredRow| -> Vec<(&str, bool)> {
        r.fits()
            .unwrap()
            .iter()
            .map(|(b, f)| (b.name, f.is_ok()))
            .collect()
    };
    let bridge = row(Image::Bridge, "arty-a7-35", 8);
    assert_eq!(bridge.macs_per_dsp(), Some(1.0));
    assert_eq!(
        names(&bridge),
        [
            ("arty-a7-35", true),
            ("arty-a7-100", true),
            ("basys3", true),
            ("nexys-a7-100", true)
        ]
    );
    let soc = row(Image::Soc, "arty-a7-35", 8);
    assert_eq!(soc.macs_per_dsp(), Some(1.0));
    assert_eq!(names(&soc), [("arty-a7-35", true), ("basys3", true)]);
    // 120 RAMB18 do not fit the A7-35T's 100; two multiplies per DSP would read 2.0.
    let big = MeasuredRow {
        brams: 120,
        dsps: 36,
        ..soc
    };
    assert_eq!(big.macs_per_dsp(), Some(2.0));
    let fits = big.fits().unwrap();
    assert!(
        fits.iter()
            .all(|(_, f)| f.as_ref().is_err_and(|w| w.contains("120 block RAMs"))),
        "{fits:?}"
    );
    let ice = MeasuredRow {
        array: 2,
        dsps: 4,
        ..row(Image::Bridge, "icebreaker", 8)
    };
    let fits = ice.fits().unwrap();
    assert_eq!(fits.len(), 1);
    assert!(fits[0].1.as_ref().is_err_and(|w| w.contains("LUTs")));
}

/// A row the hardware does not build, or a SoC without its board's RAM, is refused by name.
#[test]
fn a_bad_row_is_refused() {
    let file = |r: MeasuredRow| {
        serde_json::to_string(&MeasuredFile {
            yosys: "Yosys 0.23".into(),
            date: "2026-12-02".into(),
            command: "systole boards --synthesize".into(),
            rows: vec![r],
        })
        .unwrap()
    };
    let e = MeasuredFile::parse(&file(row(Image::Bridge, "arty-a7-35", 20))).unwrap_err();
    assert!(e.to_string().contains("W = 20"), "{e}");
    let e = MeasuredFile::parse(&file(MeasuredRow {
        ram_bytes: Some(1024),
        ..row(Image::Soc, "arty-a7-35", 8)
    }))
    .unwrap_err();
    assert!(e.to_string().contains("ram_bytes"), "{e}");
    let e = MeasuredFile::parse(&file(row(Image::Soc, "icebreaker", 8))).unwrap_err();
    assert!(e.to_string().contains("icebreaker"), "{e}");
    let e = MeasuredFile::parse("{").unwrap_err();
    assert!(std::error::Error::source(&e).is_some(), "{e:?}");
}
