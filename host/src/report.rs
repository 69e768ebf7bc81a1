//! Run reports: `run.json` (options, model, arithmetic, per-epoch results, device counters,
//! saturation counters per tensor)
//! and `history.csv` (one line per epoch), both written atomically.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use systole_device::DeviceStats;
use systole_train::run::RunSummary;
use systole_train::write_atomic;
use systole_train::SaturationCount;
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

/// The run summary's device lines: operations and cycles; for a device behind a link its
/// traffic; for a board whose firmware reports its cycles, their share of the array's.
pub fn device_lines(name: &str, st: &DeviceStats) -> Vec<String> {
    let mut lines = vec![format!(
        "device {name}: {} operations, {} MACs, {} cycles, array busy {} cycles",
        st.ops, st.macs, st.cycles, st.mac_cycles
    )];
    if st.frames > 0 {
        lines.push(format!(
            "link: {} bytes to the device, {} from it, {} frames, {} round trips, {} resends ({} bytes through the array's ports, tensors {} bytes)",
            st.bytes_to_device,
            st.bytes_from_device,
            st.frames,
            st.round_trips,
            st.resends,
            st.port_bytes,
            st.tensor_bytes
        ));
    }
    if st.board_steps > 0 {
        let steps = st.board_steps as f64;
        lines.push(format!(
            "board training: {} steps run by the board; per step {:.0} link bytes, {:.1} round trips, {:.0} CPU cycles ({:.0} outside the array's MAC cycles), array busy {:.1}% of the CPU's cycles",
            st.board_steps,
            (st.bytes_to_device + st.bytes_from_device) as f64 / steps,
            st.round_trips as f64 / steps,
            st.firmware_cycles as f64 / steps,
            st.firmware_cycles.saturating_sub(st.mac_cycles) as f64 / steps,
            100.0 * st.mac_cycles as f64 / st.firmware_cycles.max(1) as f64
        ));
    }
    if st.firmware_cycles > 0 {
        lines.push(format!(
            "firmware: {} CPU cycles on requests, {:.1}% of the array's busy cycles; {} of {} operations run by the board itself",
            st.firmware_cycles,
            100.0 * st.firmware_cycles as f64 / st.mac_cycles.max(1) as f64,
            st.board_ops,
            st.ops
        ));
    }
    lines
}

/// Writes `run.json` and `history.csv` into `dir`.
pub fn write_reports(summary: &RunSummary, dir: &Path) -> Result<(), TrainError> {
    let json = serde_json::to_vec_pretty(summary).map_err(|source| TrainError::Encode {
        what: "report",
        source,
    })?;
    write_atomic(&dir.join(systole_train::run::RUN_JSON), &json)?;
    write_atomic(
        &dir.join(systole_train::run::HISTORY_CSV),
        history_csv(&summary.history).as_bytes(),
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_lines_print_the_link_and_firmware_counters() {
        let mut st = DeviceStats {
            ops: 2,
            macs: 64,
            cycles: 900,
            mac_cycles: 200,
            bytes_to_device: 1234,
            bytes_from_device: 56,
            frames: 7,
            round_trips: 5,
            resends: 1,
            port_bytes: 1000,
            tensor_bytes: 300,
            firmware_cycles: 50,
            board_ops: 1,
            board_steps: 0,
        };
        assert_eq!(
            device_lines("serial 4x4", &st),
            [
                "device serial 4x4: 2 operations, 64 MACs, 900 cycles, array busy 200 cycles",
                "link: 1234 bytes to the device, 56 from it, 7 frames, 5 round trips, 1 resends (1000 bytes through the array's ports, tensors 300 bytes)",
                "firmware: 50 CPU cycles on requests, 25.0% of the array's busy cycles; 1 of 2 operations run by the board itself",
            ]
        );
        (st.frames, st.firmware_cycles) = (0, 0);
        assert_eq!(device_lines("verilator 4x4", &st).len(), 1);
    }

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
