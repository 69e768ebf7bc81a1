//! Run reports: `run.json` (options, model, arithmetic, per-epoch results, device counters,
//! saturation counters per tensor)
//! and `history.csv` (one line per epoch), both written atomically.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use systole_train::fixed::SaturationCount;
use systole_train::outfile::write_atomic;
use systole_train::run::RunSummary;
use systole_train::{EpochRecord, TrainError};

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

/// The one-line saturation summary of a fixed-point run (`None` for a float run): totals, and
/// the tensor with the most retries.
pub fn saturation_line(counts: &BTreeMap<String, SaturationCount>) -> Option<String> {
    if counts.is_empty() {
        return None;
    }
    let ops: u64 = counts.values().map(|c| c.ops).sum();
    let retries: u64 = counts.values().map(|c| c.retries).sum();
    let words: u64 = counts.values().map(|c| c.saturated_words).sum();
    let mut line = format!(
        "saturation: {retries} retries in {ops} device operations, {words} saturated words kept"
    );
    if let Some((op, c)) = counts
        .iter()
        .filter(|(_, c)| c.retries + c.saturated_words > 0)
        .max_by_key(|(_, c)| (c.retries, c.saturated_words))
    {
        let _ = write!(
            line,
            " (most: {op}, {} retries, {} words; per tensor in run.json)",
            c.retries, c.saturated_words
        );
    }
    Some(line)
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
    fn saturation_line_sums_and_names_the_worst_tensor() {
        assert_eq!(saturation_line(&BTreeMap::new()), None);
        let c = |ops, retries, saturated_words| SaturationCount {
            ops,
            retries,
            saturated_words,
        };
        let counts = BTreeMap::from([
            ("layer 1 forward".to_string(), c(10, 1, 0)),
            ("layer 2 backward dW".to_string(), c(12, 3, 2)),
            ("layer 2 forward".to_string(), c(10, 0, 0)),
        ]);
        let line = saturation_line(&counts).unwrap();
        assert!(
            line.starts_with("saturation: 4 retries in 32 device operations, 2 saturated words"),
            "{line}"
        );
        assert!(
            line.contains("most: layer 2 backward dW, 3 retries, 2 words"),
            "{line}"
        );
    }

    #[test]
    fn csv_has_one_line_per_epoch() {
        let r = EpochRecord {
            epoch: 1,
            train_loss: 0.5,
            train_acc: 80.0,
            test_acc: 85.5,
            test_loss: 0.4,
            seconds: 1.25,
            retries: 0,
            saturated_words: 0,
        };
        let csv = history_csv(&[r.clone(), EpochRecord { epoch: 2, ..r }]);
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines.len(), 3);
        assert_eq!(lines[1], "1,0.500000,80.000,0.400000,85.500,1.250");
    }
}
