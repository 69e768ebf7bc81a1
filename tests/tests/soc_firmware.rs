//! The firmware image (`soc-firmware/`, built by `systole-soc-image`) on the Verilated SoC,
//! spoken to only through the UART pins: it boots and answers `PING`, reports a panic and comes
//! back after its reset, runs a matmul through the host's serial link bit for bit equal to the
//! golden model; and the CPU cycles each request costs. The training image boots too. Skipped
//! with a note when this build has no SoC model (no Verilator or no VexRiscv in `.venv`).

use std::io::{Read, Write};
use systole_core::regmap;
use systole_firmware::frame::{self, Decoder, FRAME_CAPACITY};
use systole_firmware::protocol::boot::is_boot;
use systole_firmware::protocol::panic::{parse_panic, PANIC_TEST_IDLE_CYCLES};
use systole_firmware::protocol::{cmd, Buffer, Request, Words, COUNTERS_REPLY, RESPONSE, VERSION};
use systole_sim::{SimError, VerilatedSoc};

/// The boot bound, from its parts (one source: `systole_soc_image`).
const BOOT_CYCLES: u64 = systole_soc_image::PING_AFTER_RESET_CYCLES;

fn soc(features: &[&str]) -> Option<VerilatedSoc> {
    let image = systole_soc_image::build(features).unwrap_or_else(|e| panic!("{e}"));
    match VerilatedSoc::new(&image.bytes) {
        Ok(s) => Some(s),
        Err(SimError::SocNotBuilt(why)) => {
            eprintln!("no SoC model in this build: {why}");
            None
        }
        Err(e) => panic!("{e}"),
    }
}

/// Clock cycles of one bit on the simulated serial line.
fn bit_cycles(soc: &mut VerilatedSoc) -> u64 {
    let t = soc.cycles();
    soc.run(1);
    soc.cycles() - t
}

/// One answered request: the reply's `CMD` and payload, and the cycles from the request's
/// last bit to the reply's first byte being complete on the line.
struct Reply {
    cmd: u8,
    seq: u8,
    payload: Vec<u8>,
    first_byte_after: u64,
}

fn exchange(soc: &mut VerilatedSoc, seq: u8, request: &Request<'_>) -> Reply {
    send(soc, seq, request);
    await_frame(soc).expect("the firmware answers")
}

fn send(soc: &mut VerilatedSoc, seq: u8, request: &Request<'_>) {
    let mut payload = [0u8; FRAME_CAPACITY];
    let n = request.encode_payload(&mut payload).unwrap();
    let mut buf = [0u8; FRAME_CAPACITY];
    let len = frame::encode(seq, request.cmd(), &payload[..n], &mut buf).unwrap();
    soc.write_all(&buf[..len]).unwrap();
    soc.flush().unwrap();
}

/// The next frame from the SoC other than its start announcement, or the read's error (a
/// timeout: nothing came).
fn await_frame(soc: &mut VerilatedSoc) -> std::io::Result<Reply> {
    await_any_frame(soc, true)
}

/// The next frame from the SoC (`skip_boot`: not its start announcement).
fn await_any_frame(soc: &mut VerilatedSoc, skip_boot: bool) -> std::io::Result<Reply> {
    let sent = soc.cycles();
    let mut decoder = Decoder::new();
    let mut first_byte_after = None;
    loop {
        if let Some(f) = decoder.next_frame() {
            let f = f.expect("an intact reply");
            if skip_boot && is_boot(f.cmd, f.payload) {
                first_byte_after = None;
                continue;
            }
            return Ok(Reply {
                cmd: f.cmd,
                seq: f.seq,
                payload: f.payload.to_vec(),
                first_byte_after: first_byte_after.unwrap_or(0),
            });
        }
        let mut b = [0u8; 1];
        let n = soc.read(&mut b)?;
        first_byte_after.get_or_insert(soc.cycles() - sent);
        decoder.push(&b[..n]);
    }
}

#[test]
fn boots_and_answers_ping() {
    let Some(mut soc) = soc(&[]) else { return };
    send(&mut soc, 1, &Request::Ping);
    // The start announcement comes first, then the answer.
    let hello = await_any_frame(&mut soc, false).unwrap();
    assert!(is_boot(hello.cmd, &hello.payload), "{:02x?}", hello.payload);
    let r = await_frame(&mut soc).unwrap();
    let booted = soc.cycles();
    assert_eq!((r.cmd, r.seq), (cmd::PING | RESPONSE, 1));
    let word = |i: usize| u32::from_le_bytes(r.payload[i..i + 4].try_into().unwrap());
    assert_eq!(word(0), regmap::ID_VALUE);
    assert_eq!(word(4), soc.config().config_word());
    assert_eq!(r.payload[8], VERSION);
    println!("PING answered {booted} cycles after reset");
    assert!(booted <= BOOT_CYCLES, "{booted} cycles");
}

/// The training image (`soc-firmware` feature `training`: linked for the simulated SoC's
/// 256 KiB, its heap set up first thing) boots and serves like the standard one.
#[test]
#[ignore = "builds the training image (a second firmware build with the step)"]
fn the_training_image_boots_and_answers_ping() {
    let Some(mut soc) = soc(&[systole_soc_image::TRAINING]) else {
        return;
    };
    assert_eq!(
        systole_core::soc::TRAINING_RAM_BYTES,
        systole_core::soc::SIM_RAM_BYTES
    );
    send(&mut soc, 1, &Request::Ping);
    let r = await_frame(&mut soc).unwrap();
    let booted = soc.cycles();
    assert_eq!((r.cmd, r.seq), (cmd::PING | RESPONSE, 1));
    assert_eq!(r.payload[8], VERSION);
    println!("training image: PING answered {booted} cycles after reset");
    assert!(booted <= BOOT_CYCLES, "{booted} cycles");
}

#[test]
fn a_panic_is_reported_and_the_board_restarts() {
    let Some(mut soc) = soc(&["panic-test"]) else {
        return;
    };
    assert_eq!(
        exchange(&mut soc, 1, &Request::Ping).cmd,
        cmd::PING | RESPONSE
    );
    let r = exchange(
        &mut soc,
        2,
        &Request::Idle {
            cycles: PANIC_TEST_IDLE_CYCLES,
        },
    );
    let message = parse_panic(r.cmd, &r.payload).expect("a panic report");
    let message = String::from_utf8_lossy(message);
    assert!(message.contains("panic-test: IDLE 0xdead0001"), "{message}");
    assert!(message.contains("panic_test.rs"), "where: {message}");
    // The reset runs the image again from the reset vector. A request sent at once, into the
    // reset, waits in the UART's FIFO (outside the software reset) and is answered after the
    // start announcement: the first try.
    let after = soc.cycles();
    send(&mut soc, 3, &Request::Ping);
    let hello = await_any_frame(&mut soc, false).expect("the start announcement");
    assert!(is_boot(hello.cmd, &hello.payload), "{:02x?}", hello.payload);
    let again = await_any_frame(&mut soc, false).unwrap_or_else(|e| {
        panic!(
            "no answer {} cycles after the panic: {e}",
            soc.cycles() - after
        )
    });
    println!("answered {} cycles after the panic", soc.cycles() - after);
    assert_eq!((again.cmd, again.seq), (cmd::PING | RESPONSE, 3));
}

#[test]
fn cpu_cycles_per_operation() {
    let Some(mut soc) = soc(&[]) else { return };
    // After boot, so boot time is not counted as the first request's.
    exchange(&mut soc, 0, &Request::Ping);
    let bit = bit_cycles(&mut soc);
    let n = soc.size();
    // Firmware time: from the request's last bit to the reply's first byte, less that byte's
    // 10 bits on the line.
    let mut seq = 0u8;
    let mut cost = |soc: &mut VerilatedSoc, req: &Request<'_>| {
        seq = seq.wrapping_add(1);
        let r = exchange(soc, seq, req);
        assert_eq!(r.cmd, req.cmd() | RESPONSE, "{req:?}: {:?}", r.payload);
        r.first_byte_after - 10 * bit
    };
    let ping = cost(&mut soc, &Request::Ping);
    let write_reg = cost(
        &mut soc,
        &Request::WriteReg {
            addr: regmap::SHIFT,
            value: 3,
        },
    );
    let bytes: Vec<u8> = (0..2 * n * n).map(|i| i as u8).collect();
    let rows = |count: usize| Request::WriteRows {
        buffer: Buffer::A,
        bank: 0,
        start: 0,
        count: count as u16,
        words: Words::from_le_bytes(&bytes[..2 * n * count]),
    };
    let one_row = cost(&mut soc, &rows(1));
    let all_rows = cost(&mut soc, &rows(n));
    let read = |count: u16| Request::ReadRows {
        bank: 0,
        start: 0,
        count,
    };
    let read_one = cost(&mut soc, &read(1));
    let read_all = cost(&mut soc, &read(n as u16));
    let idle = cost(&mut soc, &Request::Idle { cycles: 1000 });
    let per_row = (all_rows - one_row) / (n as u64 - 1);
    let per_c_row = (read_all - read_one) / (n as u64 - 1);
    println!(
        "{n}x{n} SoC, {bit} cycles per bit: PING {ping}, WRITE_REG {write_reg}, WRITE_ROWS \
         1 row {one_row} (+{per_row} per row), READ_ROWS 1 row {read_one} (+{per_c_row} per \
         row), IDLE 1000 {idle} cycles"
    );
    // IDLE waits on the cycle counter: at least its cycles, plus the frame's handling.
    assert!(
        idle >= 1000 && idle <= 1000 + 2 * ping + 4 * bit,
        "IDLE {idle}"
    );
    assert!(all_rows > one_row && read_all > read_one);
}

#[test]
fn a_matmul_through_the_firmware_equals_the_golden_model() {
    use systole_core::Rounding;
    use systole_device::serial::SerialBus;
    use systole_firmware::driver::{self, MatmulJob};
    use systole_golden::{OutputSpec, QMatrix};
    let Some(soc) = soc(&[]) else { return };
    let cfg = soc.config();
    // Not multiples of the array size: edge tiles are padded, K spans several rows.
    let (m, k, n) = (2 * cfg.size + 1, 3 * cfg.size - 1, cfg.size + 2);
    let mut x = 0x1234_5677u32;
    let mut words = |len: usize| -> Vec<i16> {
        (0..len)
            .map(|_| {
                x = x.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                // Within +-512 (2.0 in Q8): sums stay below saturation, so every output
                // word carries its own rounding.
                ((x >> 16) as i16) >> 6
            })
            .collect()
    };
    let a = QMatrix::from_vec(m, k, 8, words(m * k)).unwrap();
    let b = QMatrix::from_vec(k, n, 8, words(k * n)).unwrap();
    let spec = OutputSpec {
        frac: 8,
        rounding: Rounding::Stochastic,
        seed: 0xC0FFEE,
    };
    let expect = systole_golden::matmul(&a, &b, &spec, cfg.size).unwrap();
    let job = MatmulJob {
        a: &a.data,
        b: &b.data,
        m,
        k,
        n,
        shift: 8,
        rounding: spec.rounding,
        seed: spec.seed,
    };
    let mut bus = SerialBus::new(soc, cfg.size);
    let mut c = vec![0i16; m * n];
    driver::matmul(&mut bus, &cfg, &job, &mut c).unwrap();
    bus.flush().unwrap();
    let saturated = expect
        .data
        .iter()
        .filter(|&&w| w == i16::MAX || w == i16::MIN);
    assert_eq!(
        saturated.count(),
        0,
        "a test of rounding, not of saturation"
    );
    assert_eq!(c, expect.data, "bit for bit");
}

/// The firmware's receive path (UART reads, frame decode, CRC) in CPU cycles per byte, measured
/// where the line does not pace it: a frame that arrived whole into the UART's FIFO while the
/// firmware ran an `IDLE`. Two such frames of different lengths (`PING`s with a payload, refused
/// as malformed once their CRC checked, so nothing else runs) differ in the time to their
/// answer by the bytes between them. The firmware must take bytes faster than the line brings them.
#[test]
fn the_firmware_takes_bytes_faster_than_the_line() {
    let Some(mut soc) = soc(&[]) else { return };
    exchange(&mut soc, 0, &Request::Ping);
    let byte_time = 10 * bit_cycles(&mut soc);
    // Reads wait out the IDLE.
    soc.set_read_timeout(100_000);
    let mut seq = 0u8;
    let mut drain = |soc: &mut VerilatedSoc, payload_len: usize| -> u64 {
        let mut frames = Vec::new();
        let mut buf = [0u8; FRAME_CAPACITY];
        seq = seq.wrapping_add(1);
        // Idle long enough for the whole second frame to arrive meanwhile.
        let idle = Request::Idle {
            cycles: (byte_time * (FRAME_CAPACITY as u64 + 100)) as u32,
        };
        let mut payload = [0u8; 8];
        let n = idle.encode_payload(&mut payload).unwrap();
        let len = frame::encode(seq, idle.cmd(), &payload[..n], &mut buf).unwrap();
        frames.extend_from_slice(&buf[..len]);
        let len = frame::encode(seq + 1, cmd::PING, &vec![0x33; payload_len], &mut buf).unwrap();
        frames.extend_from_slice(&buf[..len]);
        seq = seq.wrapping_add(1);
        // Timed from the first bit sent: a firmware slower than the line reads the second
        // frame before it runs the IDLE, so its reading shows before the first answer, not
        // between the two.
        let start = soc.cycles();
        soc.write_all(&frames).unwrap();
        soc.flush().unwrap();
        let idled = await_frame(soc).unwrap();
        assert_eq!(idled.cmd, cmd::IDLE | RESPONSE);
        let t = soc.cycles();
        let refused = await_frame(soc).unwrap();
        assert_eq!(refused.cmd, systole_firmware::protocol::ERROR);
        assert_eq!(refused.seq, seq);
        // Refused for its content: every byte arrived (none lost in the FIFO).
        let code = systole_firmware::protocol::RemoteError::parse(&refused.payload).unwrap();
        assert_eq!(
            code.code,
            Some(systole_firmware::protocol::ErrorCode::Malformed)
        );
        t + refused.first_byte_after - start
    };
    let (short, long) = (64, 1000);
    let per_byte = (drain(&mut soc, long) - drain(&mut soc, short)) as f64 / (long - short) as f64;
    println!(
        "receive path: {per_byte:.1} CPU cycles per byte (the line brings one every {byte_time})"
    );
    assert!(per_byte < byte_time as f64, "{per_byte} cycles per byte");
}

/// `COUNTERS`: (clock flag, requests executed, busy cycles) from a reply's payload.
fn counters(soc: &mut VerilatedSoc, seq: u8) -> (u8, u32, u64) {
    let r = exchange(soc, seq, &Request::Counters);
    assert_eq!(r.cmd, cmd::COUNTERS | RESPONSE, "{:?}", r.payload);
    let p = &r.payload;
    assert_eq!(p.len(), COUNTERS_REPLY);
    let frames = u32::from_le_bytes(p[1..5].try_into().unwrap());
    (
        p[0],
        frames,
        u64::from_le_bytes(p[5..13].try_into().unwrap()),
    )
}

/// The firmware counts the cycles it spends on requests with the SoC's timer: between two
/// `COUNTERS` questions, the busy cycles of the requests in between are most of what the
/// host sees from each request's last bit to its reply's first byte (that span also holds the
/// last byte's way through the UART and the reply's first byte on the line), and the COUNTERS
/// requests themselves are not counted.
#[test]
fn the_firmware_reports_the_cycles_it_spends_on_requests() {
    let Some(mut soc) = soc(&[]) else { return };
    exchange(&mut soc, 1, &Request::Ping);
    let bit = bit_cycles(&mut soc);
    let (clock, frames0, busy0) = counters(&mut soc, 2);
    assert_eq!((clock, frames0), (1, 1), "the SoC has a clock; PING ran");
    let n = soc.size();
    let bytes: Vec<u8> = (0..2 * n * n).map(|i| (i * 7) as u8).collect();
    let requests = [
        Request::WriteReg {
            addr: regmap::SHIFT,
            value: 3,
        },
        Request::WriteRows {
            buffer: Buffer::B,
            bank: 1,
            start: 0,
            count: n as u16,
            words: Words::from_le_bytes(&bytes),
        },
        Request::ReadRows {
            bank: 0,
            start: 0,
            count: n as u16,
        },
    ];
    let mut seen = 0;
    for (i, req) in requests.iter().enumerate() {
        let r = exchange(&mut soc, 3 + i as u8, req);
        assert_eq!(r.cmd, req.cmd() | RESPONSE);
        seen += r.first_byte_after - 10 * bit;
    }
    let (_, frames, busy) = counters(&mut soc, 9);
    let busy = busy - busy0;
    println!("busy {busy} cycles of {seen} seen from the line");
    // The first COUNTERS and the three requests ran; neither COUNTERS costs busy cycles.
    assert_eq!(frames - frames0, 4);
    assert!(busy <= seen && busy >= seen / 2, "busy {busy}, seen {seen}");
}
