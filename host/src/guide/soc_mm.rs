//! The product sequencer's registers and fields (section 8 of the hardware guide), from
//! `systole_core::soc`.

use super::table;
use super::tables::bits;
use systole_core::soc::*;

pub(super) fn soc_mm() -> String {
    let mut rows: Vec<Vec<String>> = MM_REGISTERS
        .iter()
        .map(|&(name, addr, meaning)| {
            vec![
                format!("`0x{addr:08X}`"),
                format!("`{name}`"),
                meaning.into(),
            ]
        })
        .collect();
    rows.push(vec![
        format!("`0x{SYS_FEATURES:08X}`"),
        "`SYS_FEATURES`".into(),
        format!(
            "read-only; bit {} (`{}`): {}",
            SYS_FEATURE_MM.lsb, SYS_FEATURE_MM.name, SYS_FEATURE_MM.meaning
        ),
    ]);
    let mut out = table(&["address", "register", "meaning"], &rows);
    out.push('\n');
    let fields: Vec<Vec<String>> = [
        ("`MM_M`, `MM_N`", MM_SIZE_MN),
        ("`MM_K`", MM_SIZE_K),
        ("`MM_CONVERT`", MM_SHIFT),
        ("`MM_CONVERT`", MM_ROUNDING),
        ("`MM_STATUS`", MM_ERR_SIZE),
        ("`MM_STATUS`", MM_ERR_CONVERT),
        ("`MM_STATUS`", MM_ERR_DEVICE),
    ]
    .iter()
    .map(|(reg, f)| {
        vec![
            (*reg).into(),
            format!("`{}`", f.name),
            bits(f),
            f.meaning.into(),
        ]
    })
    .collect();
    out.push_str(&table(&["register", "field", "bits", "meaning"], &fields));
    out
}
