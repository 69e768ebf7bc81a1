//! The link counters: a known frame exchange counts exact bytes, frames and round trips, the
//! firmware-cycles question is left out of them, and a device's `DeviceStats` carry what its
//! link counted for each operation (serial and bridge).

use std::time::Duration;
use systole_core::{regmap, AcceleratorBus, ArrayConfig, Rounding};
use systole_device::backend::{Meter, Traffic};
use systole_device::board_sim::SimBoard;
use systole_device::bridge::BridgeDevice;
use systole_device::serial::{SerialBus, SerialDevice};
use systole_device::Device;
use systole_golden::{self as golden, OutputSpec, QMatrix};

fn port(b: &SimBoard) -> Box<dyn serialport::SerialPort> {
    serialport::new(b.path().to_str().unwrap(), 3_000_000)
        .timeout(Duration::from_millis(20))
        .open()
        .unwrap()
}

/// Two register writes and a row go out as one `BATCH` frame when the register read needs
/// an answer: frame sizes from the protocol table (8 bytes of frame around each payload).
#[test]
fn a_known_exchange_counts_exact_bytes_frames_and_round_trips() {
    let cfg = ArrayConfig::square(4);
    let b = SimBoard::spawn_verilated(cfg).unwrap();
    let mut bus = SerialBus::new(port(&b), cfg.size);
    bus.write_reg(regmap::SHIFT, 3).unwrap();
    bus.write_reg(regmap::SEED, 5).unwrap();
    bus.write_a_row(0, 1, &[1, 2, 3, 4]).unwrap();
    assert_eq!(
        bus.traffic(),
        Traffic::default(),
        "writes wait in the batch"
    );
    assert_eq!(bus.read_reg(regmap::SHIFT).unwrap(), 3);
    // BATCH: 8 + (3 + 5) + (3 + 5) + (3 + 6 + 8) = 41 bytes, READ_REG: 8 + 1; answers: an
    // empty BATCH response (8) and the register (8 + 4).
    let want = Traffic {
        bytes_out: 50,
        bytes_in: 20,
        frames: 2,
        round_trips: 2,
        resends: 0,
    };
    assert_eq!(bus.traffic(), want);
    // The frame server on the host has no cycle counter; asking costs a frame that is not
    // counted (it only measures).
    assert_eq!(bus.firmware_cycles().unwrap(), None);
    assert_eq!(bus.board_counters().unwrap(), (3, None));
    assert_eq!(bus.traffic(), want);
    drop(bus);
    b.close().unwrap();
}

fn matrix(rows: usize, cols: usize, salt: u32) -> QMatrix {
    let data = (0..rows * cols)
        .map(|i| ((i as u32).wrapping_mul(2_654_435_761) ^ salt) as i16 >> 4)
        .collect();
    QMatrix::from_vec(rows, cols, 6, data).unwrap()
}

/// Runs two products on `dev` and returns the stats; the results must equal the golden model.
fn two_products(dev: &mut dyn Device) -> systole_device::DeviceStats {
    let spec = OutputSpec {
        frac: 5,
        rounding: Rounding::Stochastic,
        seed: 77,
    };
    for (m, k, n) in [(6, 9, 5), (8, 4, 8)] {
        let (x, y) = (matrix(m, k, 1), matrix(k, n, 2));
        let got = dev.matmul(&x, &y, &spec).unwrap();
        assert_eq!(got, golden::matmul(&x, &y, &spec, 4).unwrap());
    }
    dev.stats()
}

#[test]
fn device_stats_carry_what_the_serial_link_counted() {
    let cfg = ArrayConfig::square(4);
    let b = SimBoard::spawn_verilated(cfg).unwrap();
    let mut dev = SerialDevice::open(b.path().to_str().unwrap(), cfg).unwrap();
    // Opening pinged the board: that is not an operation's traffic.
    let before = dev.link_counters();
    let st = two_products(&mut dev);
    let c = dev.link_counters();
    assert_eq!(st.ops, 2);
    assert!(st.frames > 2, "{st:?}");
    assert_eq!(st.frames, c.frames - before.frames);
    assert_eq!(st.resends, c.resends - before.resends);
    assert_eq!(st.round_trips, st.frames + st.resends);
    // The driver's port traffic crosses the link inside frames, plus their framing.
    assert!(st.port_bytes > 0 && st.port_bytes < st.bytes_to_device + st.bytes_from_device);
    // Two products: 6x9·9x5 and 8x4·4x8, operands and results once, 2 bytes a word.
    assert_eq!(st.tensor_bytes, 2 * (54 + 45 + 30 + 32 + 32 + 64));
    assert_eq!(st.bytes_to_device, c.bytes_out - before.bytes_out);
    assert_eq!(st.bytes_from_device, c.bytes_in - before.bytes_in);
    // The firmware runs on the host here: no board CPU reports cycles.
    assert_eq!(st.firmware_cycles, 0);
    dev.reset_stats();
    assert_eq!(dev.stats().frames, 0);
    drop(dev);
    b.close().unwrap();
}

#[test]
fn device_stats_carry_what_the_bridge_counted() {
    let b = match SimBoard::spawn_bridge_image() {
        Ok(b) => b,
        Err(e) => {
            eprintln!("no bridge image in this build: {e}");
            return;
        }
    };
    let path = b.path().to_str().unwrap().to_string();
    let mut dev = BridgeDevice::open(&path, 1_000_000, ArrayConfig::square(4)).unwrap();
    let before = dev.link_counters();
    let st = two_products(&mut dev);
    let c = dev.link_counters();
    assert_eq!(st.frames, c.commands - before.commands);
    assert_eq!(st.round_trips, c.round_trips - before.round_trips);
    assert_eq!(st.bytes_to_device, c.bytes_out - before.bytes_out);
    assert_eq!(st.resends, c.retries - before.retries);
    // Every bus access is a transaction; only reads and echo checks wait.
    assert!(st.round_trips > 0 && st.round_trips < st.frames, "{st:?}");
    assert_eq!(st.firmware_cycles, 0);
    drop(dev);
    b.close().unwrap();
}
