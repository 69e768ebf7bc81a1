//! The product sequencer's registers and fields (section 8 of the hardware guide), from
//! `systole_core::soc`.

use super::tables::soc_block;
use systole_core::soc::*;

pub(super) fn soc_mm() -> String {
    soc_block(
        &MM_REGISTERS,
        &SYS_FEATURE_MM,
        &[
            ("`MM_M`, `MM_N`", MM_SIZE_MN),
            ("`MM_K`", MM_SIZE_K),
            ("`MM_CONVERT`", MM_SHIFT),
            ("`MM_CONVERT`", MM_ROUNDING),
            ("`MM_STATUS`", MM_ERR_SIZE),
            ("`MM_STATUS`", MM_ERR_CONVERT),
            ("`MM_STATUS`", MM_ERR_DEVICE),
        ],
    )
}
