//! The bridge's tests: byte streams in, strobes and replies out.

use super::*;

const N: usize = 4;

/// Drives bytes into the bridge and plays the accelerator and the transmitter: records
/// every strobe the bridge raises and every byte it sends.
#[derive(Default, Debug, PartialEq)]
struct Seen {
    reg_writes: Vec<(u64, u64)>,
    a_rows: Vec<(bool, u64, Vec<i64>)>,
    b_rows: Vec<(bool, u64, Vec<i64>)>,
    fm_rows: Vec<(u64, Vec<i64>)>,
    sent: Vec<u8>,
}

/// Sends each command's bytes (one every tenth cycle, as a UART receiver of one clock per
/// bit would deliver them; real ones take at least 40) and waits for its reply of the given
/// length before the next, as a host does.
fn run(commands: Vec<(Vec<u8>, usize)>) -> Seen {
    run_lanes(N, commands)
}

/// [`run`] on a bridge of `n` lanes.
fn run_lanes(n: usize, commands: Vec<(Vec<u8>, usize)>) -> Seen {
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Seen::default()));
    let out = seen.clone();
    let total: usize = commands
        .iter()
        .map(|(c, r)| 10 * c.len() + 10 * r + 8)
        .sum();
    let mut sim = simple_sim!(UartBridge, clock, 1_000_000, ep, {
        let mut x = ep.init()?;
        x.reset.next = true;
        wait_clock_cycles!(ep, clock, x, 2);
        x.reset.next = false;
        let mut log = out.lock().unwrap();
        let mut bytes = commands.iter().flat_map(|(c, r)| {
            c.iter()
                .enumerate()
                .map(move |(i, b)| (*b, if i + 1 == c.len() { *r } else { 0 }))
        });
        let mut gap = 0;
        let mut wait_for = 0;
        // A real reply byte takes ten bit times on the wire: the host's next byte never
        // arrives in the cycle right after the bridge's last send.
        let mut quiet = 0;
        for _cycle in 0..total {
            x.rx_valid.next = false;
            if gap == 0 && log.sent.len() >= wait_for && quiet >= 2 {
                if let Some((b, reply)) = bytes.next() {
                    x.rx_data.next = (b as u64).to_bits();
                    x.rx_valid.next = true;
                    wait_for += reply;
                }
                gap = 9;
            } else if gap > 0 {
                gap -= 1;
            }
            // The accelerator: ID at register 0, the address itself elsewhere; the C row
            // words encode bank, row and lane.
            let addr = x.reg_addr.val().index() as u64;
            x.reg_rdata.next = (if addr == 0 { 0x5359_5354 } else { addr }).to_bits();
            for i in 0..n {
                let v = (x.bank.val() as i64) * 1000 + x.row.val().index() as i64 * 10 + i as i64;
                // (Wrapped to a word: rows past 3276 appear in the feature-map test.)
                x.c_rd_data[i].next = i64::from(-v as i16).to_signed_bits();
            }
            x.tx_busy.next = false;
            wait_clock_cycle!(ep, clock, x);
            let lanes = |x: &UartBridge| -> Vec<i64> {
                x.wr_data
                    .iter()
                    .map(|s| s.val().bigint().try_into().unwrap())
                    .collect()
            };
            if x.reg_we.val() {
                let w = (
                    x.reg_addr.val().index() as u64,
                    x.reg_wdata.val().index() as u64,
                );
                log.reg_writes.push(w);
            }
            if x.a_wr_en.val() {
                log.a_rows
                    .push((x.bank.val(), x.row.val().index() as u64, lanes(&x)));
            }
            if x.b_wr_en.val() {
                log.b_rows
                    .push((x.bank.val(), x.row.val().index() as u64, lanes(&x)));
            }
            if x.fm_wr_en.val() {
                let words = x
                    .fm_wr_data
                    .iter()
                    .map(|s| s.val().bigint().try_into().unwrap())
                    .collect();
                log.fm_rows.push((x.row.val().index() as u64, words));
            }
            quiet += 1;
            if x.tx_start.val() {
                log.sent.push(x.tx_data.val().index() as u8);
                quiet = 0;
            }
        }
        drop(log);
        ep.done(x)
    });
    let mut uut = UartBridge::new(n);
    uut.connect_all();
    sim.run(Box::new(uut), 1_000_000 * 10_000).unwrap();
    std::sync::Arc::try_unwrap(seen)
        .unwrap()
        .into_inner()
        .unwrap()
}

/// A write command: `bytes` followed by their CRC, high byte first.
fn write(bytes: &[u8]) -> Vec<u8> {
    let crc = systole_core::crc::crc16_bitwise(bytes);
    bytes.iter().copied().chain(crc.to_be_bytes()).collect()
}

/// `data` followed by the CRC of `request` and `data`, high byte first: a read's reply.
fn checked(request: &[u8], data: &[u8]) -> Vec<u8> {
    let all: Vec<u8> = request.iter().chain(data).copied().collect();
    let crc = systole_core::crc::crc16_bitwise(&all);
    data.iter().copied().chain(crc.to_be_bytes()).collect()
}

#[test]
fn register_write_and_read() {
    let s = run(vec![
        (write(&[b'W', 0x0B, 0x00, 0x01, 0x02, 0x03]), 1),
        (vec![b'R', 0x00], 6),
        (vec![b'R', 0x07], 6),
    ]);
    assert_eq!(s.reg_writes, vec![(0x0B, 0x0001_0203)]);
    let mut want = vec![b'W'];
    want.extend(checked(&[b'R', 0], &[0x53, 0x59, 0x53, 0x54]));
    want.extend(checked(&[b'R', 7], &[0, 0, 0, 7]));
    assert_eq!(s.sent, want);
    // The CRC of the first reply, computed outside the project from the parameters.
    assert_eq!(s.sent[5..7], [0x9A, 0xE1]);
}

#[test]
fn row_writes_and_c_read() {
    let mut a = vec![b'A', 1, 0x01, 0x05];
    for w in [1i16, -2, 300, -32768] {
        a.extend(w.to_be_bytes());
    }
    let mut b = vec![b'B', 0, 0x00, 0x02];
    for w in [7i16, 8, 9, 32767] {
        b.extend(w.to_be_bytes());
    }
    let s = run(vec![
        (write(&a), 1),
        (write(&b), 1),
        (vec![b'C', 1, 0x00, 0x03], 2 * N + 2),
        (vec![b'x'], 1),
    ]);
    assert_eq!(s.a_rows, vec![(true, 0x105, vec![1, -2, 300, -32768])]);
    assert_eq!(s.b_rows, vec![(false, 2, vec![7, 8, 9, 32767])]);
    let mut want = vec![b'A', b'B'];
    let mut row = vec![];
    for lane in 0..N as i16 {
        row.extend((-(1000 + 30 + lane)).to_be_bytes());
    }
    want.extend(checked(&[b'C', 1, 0x00, 0x03], &row));
    want.push(b'?');
    assert_eq!(s.sent, want);
}

/// `'F'` row(2) then `R` words: one feature-map row strobe with the words in order. With 6
/// lanes a row is 4 words (they shift in to lanes 2..6); with 4 lanes, all four.
#[test]
fn feature_map_rows() {
    for (n, words) in [
        (6usize, vec![5i16, -6, 32767, -32768]),
        (4, vec![1, 2, 3, -4]),
    ] {
        let mut f = vec![b'F', 0x12, 0x34];
        for w in &words {
            f.extend(w.to_be_bytes());
        }
        let s = run_lanes(
            n,
            vec![
                (write(&f), 1),
                (write(&[b'F', 0, 1, 0, 9, 0, 8, 0, 7, 0, 6]), 1),
            ],
        );
        let want: Vec<i64> = words.iter().map(|&w| w.into()).collect();
        assert_eq!(
            s.fm_rows,
            vec![(0x1234, want), (1, vec![9, 8, 7, 6])],
            "{n} lanes"
        );
        assert_eq!(s.sent, b"FF", "{n} lanes");
        assert!(s.a_rows.is_empty() && s.b_rows.is_empty() && s.reg_writes.is_empty());
    }
}

/// Every write with one bit flipped anywhere (opcode aside: that makes another command)
/// is answered `'!'` and changes nothing; the same write intact then goes through.
#[test]
fn a_damaged_write_is_refused_and_changes_nothing() {
    let mut a = vec![b'A', 1, 0x01, 0x05];
    for w in [1i16, -2, 300, -32768] {
        a.extend(w.to_be_bytes());
    }
    let f = vec![b'F', 0, 1, 0, 9, 0, 8, 0, 7, 0, 6];
    let reg = vec![b'W', 0x0B, 0x00, 0x01, 0x02, 0x03];
    for cmd in [reg, a, f] {
        let good = write(&cmd);
        let clean = run(vec![(good.clone(), 1)]);
        for byte in 1..good.len() {
            let mut bad = good.clone();
            bad[byte] ^= 1 << (byte % 8);
            let s = run(vec![(bad, 1), (good.clone(), 1)]);
            assert_eq!(s.sent, [REPLY_DAMAGED, cmd[0]], "byte {byte} of {cmd:?}");
            let strobes = (&s.reg_writes, &s.a_rows, &s.b_rows, &s.fm_rows);
            let once = (
                &clean.reg_writes,
                &clean.a_rows,
                &clean.b_rows,
                &clean.fm_rows,
            );
            assert_eq!(strobes, once, "byte {byte} of {cmd:?}");
        }
    }
}

#[test]
fn bridge_verilog_has_no_unresolved_indices() {
    let mut uut = UartBridge::new(3);
    uut.connect_all();
    let v = generate_verilog(&uut);
    assert!(!v.contains("[i"), "loop index left in Verilog");
    assert!(v.contains("module top"));
}
