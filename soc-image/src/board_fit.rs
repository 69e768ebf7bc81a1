//! Which models, data sets and batch sizes fit each board's SoC RAM (`soc_ram_bytes` of the
//! boards table, from `systole_core::soc`): a step's [`Need`] against the RAM, and
//! [`NoRoom`], the refusal naming what is needed, what the board has and which boards have it.

use crate::step_ram::Case;
use crate::Budget;
use std::fmt::Write as _;
use systole_boards::Board;

/// Bytes of SoC RAM a training run needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Need {
    /// The firmware image's statics (code, data, bss with the tensor store).
    pub firmware: u64,
    /// The step's code on RV32.
    pub code: u64,
    /// The step's heap (weights, momentum, batch, activations, gradients).
    pub heap: u64,
    /// The stack reserve.
    pub stack: u64,
    /// The training set as the board keeps it: pixels packed at the bits they need, a byte
    /// per label.
    pub data_set: u64,
}

impl Need {
    /// `case`'s need with its measured `heap`, the step's `code` and the firmware's budget.
    pub fn new(case: &Case, heap: usize, code: u64, firmware: &Budget) -> Self {
        let (c, h, w) = case.image;
        Self {
            firmware: firmware.statics.into(),
            code,
            heap: heap as u64,
            stack: firmware.stack_reserve.into(),
            data_set: (case.train_images
                * (systole_step::resident::image_bytes(c * h * w, case.pixel_bits) + 1))
                as u64,
        }
    }

    /// RAM for the step with batches uploaded one at a time.
    pub fn step(&self) -> u64 {
        self.firmware + self.code + self.heap + self.stack
    }

    /// RAM for the step with the training set resident.
    pub fn resident(&self) -> u64 {
        self.step() + self.data_set
    }
}

/// How a run fits a board.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fit {
    /// The step and the whole training set, with this many bytes free.
    Resident(u64),
    /// The step, with the batches uploaded as it goes: the training set is this many bytes
    /// too many.
    ByBatch(u64),
}

/// A run that does not fit a board's SoC RAM.
#[derive(Debug, thiserror::Error)]
#[error(
    "{what} needs {need} B of SoC RAM (firmware {firmware} B, step code {code} B, step heap \
     {heap} B, stack {stack} B) and the SoC on {board} has {ram} B: {advice}"
)]
pub struct NoRoom {
    /// Model, data set and batch.
    pub what: String,
    /// Bytes needed.
    pub need: u64,
    /// The firmware's part.
    pub firmware: u64,
    /// The step's code.
    pub code: u64,
    /// The step's heap.
    pub heap: u64,
    /// The stack reserve.
    pub stack: u64,
    /// The board.
    pub board: &'static str,
    /// Its SoC's RAM.
    pub ram: u32,
    /// What to do instead.
    pub advice: String,
}

/// The SoC RAM of `board`; `None` for a board without a SoC.
fn ram(board: &Board) -> Option<u32> {
    board.soc_ram_bytes
}

/// Whether `case` (needing `need`) trains on `board`'s SoC, or why not.
pub fn fit(case: &Case, need: &Need, board: &Board) -> Result<Fit, NoRoom> {
    let have = ram(board).unwrap_or(0);
    let r = u64::from(have);
    if need.resident() <= r {
        return Ok(Fit::Resident(r - need.resident()));
    }
    if need.step() <= r {
        return Ok(Fit::ByBatch(need.resident() - r));
    }
    let larger: Vec<&str> = systole_boards::list()
        .iter()
        .filter(|b| ram(b).is_some_and(|m| u64::from(m) >= need.step()))
        .map(|b| b.name)
        .collect();
    let advice = if larger.is_empty() {
        "no board's SoC has that much: take a smaller batch (--batch) or model".to_string()
    } else {
        format!(
            "train on {} or take a smaller batch (--batch)",
            larger.join(" or ")
        )
    };
    Err(NoRoom {
        what: format!("{} on {} at batch {}", case.model, case.data, case.batch),
        need: need.step(),
        firmware: need.firmware,
        code: need.code,
        heap: need.heap,
        stack: need.stack,
        board: board.name,
        ram: have,
        advice,
    })
}

/// The RAM budget table (Markdown): one row per case, one column per SoC RAM size with the
/// boards that have it.
pub fn table(rows: &[(&Case, Need)]) -> String {
    let mut sizes: Vec<u32> = systole_boards::list().iter().filter_map(ram).collect();
    sizes.sort_unstable();
    sizes.dedup();
    let mut s = String::from("| model, data set, batch | step | + training set |");
    let mut rule = String::from("|---|--:|--:|");
    let mut columns = Vec::new();
    for &size in &sizes {
        let boards: Vec<&Board> = systole_boards::list()
            .iter()
            .filter(|b| ram(b) == Some(size))
            .collect();
        let names: Vec<&str> = boards.iter().map(|b| b.name).collect();
        let _ = write!(s, " {} KiB: {} |", size / 1024, names.join(", "));
        rule.push_str("---|");
        columns.push(boards[0]);
    }
    s.push('\n');
    s.push_str(&rule);
    for (case, need) in rows {
        let _ = write!(
            s,
            "\n| {}, {}, {} | {} B | {} B |",
            case.model,
            case.data,
            case.batch,
            need.step(),
            need.resident()
        );
        for board in &columns {
            let cell = match fit(case, need, board) {
                Ok(Fit::Resident(free)) => format!("yes, data set resident ({free} B free)"),
                Ok(Fit::ByBatch(over)) => {
                    format!("yes, batches uploaded (data set {over} B too many)")
                }
                Err(e) => format!("no: {} B over", e.need - u64::from(e.ram)),
            };
            let _ = write!(s, " {cell} |");
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::step_ram::CASES;
    use systole_core::soc::{BASE_RAM_BYTES, TRAINING_RAM_BYTES};

    fn need(case: &Case, total_step: u64) -> Need {
        Need {
            firmware: 50_000,
            code: 30_000,
            heap: total_step - 50_000 - 30_000 - 8_192,
            stack: 8_192,
            data_set: Need::new(case, 0, 0, &Budget::default()).data_set,
        }
    }

    #[test]
    fn runs_fit_by_the_boards_ram_and_a_refusal_names_the_boards_that_have_it() {
        let digits = &CASES[0];
        // 1,438 images of 64 pixels at 5 bits (40 bytes) and a label each.
        assert_eq!(need(digits, 100_000).data_set, 1_438 * 41);
        let arty35 = systole_boards::find("arty-a7-35").unwrap();
        let arty100 = systole_boards::find("arty-a7-100").unwrap();
        let big = u64::from(TRAINING_RAM_BYTES);
        let exact = need(digits, big - 1_438 * 41);
        assert_eq!(fit(digits, &exact, arty100).unwrap(), Fit::Resident(0));
        let over = need(digits, big - 1_438 * 41 + 1);
        assert_eq!(fit(digits, &over, arty100).unwrap(), Fit::ByBatch(1));
        let e = fit(digits, &over, arty35).unwrap_err().to_string();
        assert!(
            e.starts_with("MLP 64-32-10 on digits at batch 32 needs ")
                && e.contains(&format!("the SoC on arty-a7-35 has {BASE_RAM_BYTES} B"))
                && e.ends_with(
                    "train on arty-a7-100 or nexys-a7-100 or take a smaller batch (--batch)"
                ),
            "{e}"
        );
        let huge = need(digits, big + 1);
        let e = fit(digits, &huge, arty100).unwrap_err().to_string();
        assert!(e.contains("no board's SoC has that much"), "{e}");
        let t = table(&[(digits, exact)]);
        assert!(
            t.contains(
                "| 64 KiB: arty-a7-35, basys3, ulx3s-85f | 256 KiB: arty-a7-100, nexys-a7-100 |"
            ) && t.ends_with("| no: 137650 B over | yes, data set resident (0 B free) |"),
            "{t}"
        );
    }
}
