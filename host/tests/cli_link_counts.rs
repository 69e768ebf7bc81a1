//! A training run over a serial link prints the link's counters in its summary and writes them
//! into run.json's device stats.

use std::process::Command;
use systole_core::ArrayConfig;
use systole_device::board_sim::SimBoard;

#[test]
fn a_serial_run_reports_its_link_counters() {
    let board = SimBoard::spawn_verilated(ArrayConfig::square(4)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let device = format!("serial:{}", board.path().display());
    let o = Command::new(env!("CARGO_BIN_EXE_systole"))
        .args([
            "train", "--device", &device, "--array", "4", "--limit", "64", "--epochs", "1",
        ])
        .arg("--out")
        .arg(dir.path())
        .output()
        .expect("run systole");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("run.json")).unwrap()).unwrap();
    let st = &json["device"][1];
    let count = |k: &str| st[k].as_u64().unwrap_or_else(|| panic!("no {k} in {st}"));
    let (frames, trips) = (count("frames"), count("round_trips"));
    assert!(frames > 0 && count("bytes_to_device") > 0, "{st}");
    // No resends on a pty: every frame is one wait.
    assert_eq!(trips, frames, "{st}");
    // The board loop runs on the host: no board CPU reports cycles.
    assert_eq!(count("firmware_cycles"), 0, "{st}");
    let text = String::from_utf8_lossy(&o.stdout);
    let line = format!("{frames} frames, {trips} round trips");
    assert!(text.contains(&line), "{line} not in:\n{text}");
    board.close().unwrap();
}
