//! Run reports: `run.json` (options, model, arithmetic, per-epoch results, device counters)
//! and `history.csv` (one line per epoch), both written atomically.

use crate::outfile::write_atomic;
use crate::train::run::RunSummary;
use crate::train::{EpochRecord, TrainError};
use std::fmt::Write as _;
use std::path::Path;

/// The CSV header of [`history_csv`].
pub const CSV_HEADER: &str = "epoch,train_loss,train_acc,test_loss,test_acc,seconds";

/// One line per epoch under [`CSV_HEADER`].
pub fn history_csv(history: &[EpochRecord]) -> String {
    let mut s = format!("{CSV_HEADER}\n");
    for r in history {
        let _ = writeln!(
            s,
            "{},{:.6},{:.3},{:.6},{:.3},{:.3}",
            r.epoch, r.train_loss, r.train_acc, r.test_loss, r.test_acc, r.seconds
        );
    }
    s
}

/// Writes `run.json` and `history.csv` into `dir`.
pub fn write_reports(summary: &RunSummary, dir: &Path) -> Result<(), TrainError> {
    let json = serde_json::to_vec_pretty(summary)
        .map_err(|e| TrainError::Config(format!("cannot encode the report: {e}")))?;
    write_atomic(&dir.join("run.json"), &json)?;
    write_atomic(
        &dir.join("history.csv"),
        history_csv(&summary.history).as_bytes(),
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_has_one_line_per_epoch() {
        let r = EpochRecord {
            epoch: 1,
            train_loss: 0.5,
            train_acc: 80.0,
            test_acc: 85.5,
            test_loss: 0.4,
            seconds: 1.25,
        };
        let csv = history_csv(&[r.clone(), EpochRecord { epoch: 2, ..r }]);
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines.len(), 3);
        assert_eq!(lines[1], "1,0.500000,80.000,0.400000,85.500,1.250");
    }
}
