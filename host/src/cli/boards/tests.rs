use super::*;

fn args(image: &str, array: &str, word_bits: &str) -> BoardsArgs {
    BoardsArgs {
        synthesize: true,
        image: image.into(),
        array: array.into(),
        fm_depth: "0".into(),
        word_bits: word_bits.into(),
        routed: Vec::new(),
        out: None,
        overwrite: false,
        synth_cache: None,
    }
}

/// The default table: the 7-series bridge top at each array and W, the SoC once per RAM the
/// 7-series boards give it (64 KiB on the A7-35T boards, 256 KiB on the A7-100T), and the
/// iCEBreaker's 2x2 bridge top at each W.
#[test]
fn the_jobs_are_each_image_at_each_w() {
    let a = args("bridge,soc,ice40", "4,8", "8,12,16");
    let labels: Vec<String> = jobs(&a).unwrap().iter().map(Job::label).collect();
    assert_eq!(labels.len(), 6 + 12 + 3, "{labels:#?}");
    assert_eq!(labels[0], "bridge for arty-a7-35 4x4 fm0 W8");
    assert_eq!(labels[5], "bridge for arty-a7-35 8x8 fm0 W16");
    assert_eq!(labels[6], "SoC for arty-a7-35 4x4 fm0 W8");
    assert_eq!(labels[12], "SoC for arty-a7-100 4x4 fm0 W8");
    assert_eq!(labels[18], "bridge for icebreaker 2x2 fm0 W8");
    assert_eq!(labels[20], "bridge for icebreaker 2x2 fm0 W16");
    // The conv unit on 7-series only (no conv unit fits the iCE40's block RAM).
    let mut conv = args("bridge,ice40", "8", "8,16");
    conv.fm_depth = "0,4096".into();
    let labels: Vec<String> = jobs(&conv).unwrap().iter().map(Job::label).collect();
    assert_eq!(
        labels,
        [
            "bridge for arty-a7-35 8x8 fm0 W8",
            "bridge for arty-a7-35 8x8 fm0 W16",
            "bridge for arty-a7-35 8x8 fm4096 W8",
            "bridge for arty-a7-35 8x8 fm4096 W16",
            "bridge for icebreaker 2x2 fm0 W8",
            "bridge for icebreaker 2x2 fm0 W16",
        ]
    );
    for (bad, flag) in [
        (args("bridge,cpu", "8", "8"), "--image"),
        (args("bridge", "8", "8,20"), "--word-bits"),
        (args("bridge", "8,8", "8"), "--array"),
    ] {
        let e = jobs(&bad).unwrap_err().to_string();
        assert!(e.contains(flag), "{e}");
    }
}

/// Each row holds what the synthesis of its job gave, and the table prints those counts.
#[test]
fn the_rows_are_the_synthesised_counts() {
    let a = args("bridge,soc,ice40", "8", "8,16");
    let todo = jobs(&a).unwrap();
    let rows = measure(&todo, |j| {
        Ok(Resources {
            luts: 10_000 + j.point.word_bits * 10 + u32::from(j.image == Image::Soc),
            lutram: 7,
            ffs: 20_000 + j.point.word_bits,
            dsps: (j.point.array * j.point.array) as u32 + 4 * u32::from(j.image == Image::Soc),
            brams: 16,
            ramb36: 3,
        })
    })
    .unwrap();
    assert_eq!(rows.len(), todo.len());
    let soc_256 = rows
        .iter()
        .find(|r| r.image == Image::Soc && r.board == "arty-a7-100" && r.word_bits == 16)
        .unwrap();
    assert_eq!(
        (soc_256.luts, soc_256.ffs, soc_256.ram_bytes),
        (10_161, 20_016, Some(256 * 1024))
    );
    let file = MeasuredFile {
        yosys: "Yosys 0.23".into(),
        date: "2026-12-02".into(),
        command: "test".into(),
        rows,
    };
    let text = serde_json::to_string(&file).unwrap();
    let table = MeasuredFile::parse(&text).unwrap().table().unwrap();
    assert!(
        table.contains("10081+7") && table.contains("20008"),
        "{table}"
    );
    assert!(table.contains("SoC xc7 256 KiB"), "{table}");
}

#[test]
fn dates_are_utc_civil_days() {
    let at = |s| utc_date(UNIX_EPOCH + std::time::Duration::from_secs(s));
    assert_eq!(at(0), "1970-01-01");
    assert_eq!(at(951_782_400), "2000-02-29");
    assert_eq!(at(1_796_169_600 + 86_399), "2026-12-02");
}
