//! The guide's array timing table, from `ArrayConfig::emit_latency` and
//! `config::CONVERTER_STAGES`.

use super::table;
use systole_core::config::{self, ArrayConfig};

/// The latency of an emitted tile as a formula of `n` (it is linear in the size) with two
/// sizes worked out, and the converter's share of it.
pub(super) fn timing() -> String {
    let at = |n| ArrayConfig::square(n).emit_latency();
    let slope = at(5) - at(4);
    let base = at(4) - 4 * slope;
    let rows = vec![
        vec![
            "an emitting command's last K row issued -> its tile counted in `DONE_COUNT` (its last word in the C bank)".into(),
            format!("{slope}n + {base} ({} at n = 4, {} at n = 8)", at(4), at(8)),
            "`ArrayConfig::emit_latency`".into(),
        ],
        vec![
            "of which a column converter's register stages (row off the shadow chain -> word in the C bank)".into(),
            config::CONVERTER_STAGES.to_string(),
            "`config::CONVERTER_STAGES`".into(),
        ],
    ];
    table(&["from -> to", "clock edges", "defined by"], &rows)
}
