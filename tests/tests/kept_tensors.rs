//! One test body, [`kept_body`], run on every `Device` backend: tensors kept on the device
//! (`Device::upload`), products on them whose results stay there (`Device::matmul_kept`, all
//! four transpose flags, a product of a kept result), each equal bit for bit to the
//! value-based product and the golden model; read back equal to what went up; a freed, a
//! foreign and an oversized tensor refused with typed errors and nothing stored.
//!
//! Golden, verilator, the bridge image and a serial board without a store keep the tensors in
//! host memory; the serial board with a tensor store (the firmware's frame server on a pty over
//! the Verilated 4x4 array) and the SoC image keep them in the board's RAM.

use systole_core::{ArrayConfig, Rounding};
use systole_device::board_sim::SimBoard;
use systole_device::{self as device, Device, DeviceError, DeviceTensor, Transposed};
use systole_golden::{self as golden, OutputSpec, QMatrix};

mod common;
use common::Rng;

/// Words kept tensors may hold in the body (below every board's store).
const LIMIT: usize = 700;

fn spec(frac: u32, rounding: Rounding, seed: u32) -> OutputSpec {
    OutputSpec {
        frac,
        rounding,
        seed,
    }
}

fn read(dev: &mut dyn Device, t: &DeviceTensor) -> QMatrix {
    dev.read_tensor(t)
        .unwrap_or_else(|e| panic!("{}: read back: {}", dev.name(), common::chain(&e)))
}

fn keep(dev: &mut dyn Device, t: &QMatrix) -> DeviceTensor {
    dev.upload(t)
        .unwrap_or_else(|e| panic!("{}: upload: {}", dev.name(), common::chain(&e)))
}

/// The body: `other` is a second device whose handles `dev` must refuse (and the reverse).
fn kept_body(dev: &mut dyn Device, other: &mut dyn Device, seed: u64) {
    let name = dev.name();
    let (size, w) = (dev.config().size, dev.config().word_bits);
    let mut rng = Rng(seed);
    dev.limit_kept_words(LIMIT);
    let (m, k, n) = (size + 3, 9, size + 1);
    let a = rng.matrix_at(m, k, 6, w);
    let b = rng.matrix_at(k, n, 5, w);
    let at = rng.matrix_at(k, m, 7, w);
    let bt = rng.matrix_at(n, k, 4, w);
    let kept: Vec<DeviceTensor> = [&a, &b, &at, &bt].iter().map(|t| keep(dev, t)).collect();
    let [ha, hb, hat, hbt] = [0, 1, 2, 3].map(|i| kept[i].clone());
    for (h, t) in kept.iter().zip([&a, &b, &at, &bt]) {
        assert_eq!(&read(dev, h), t, "{name}: read back after upload");
        assert_eq!((h.rows(), h.cols(), h.frac()), (t.rows, t.cols, t.frac));
    }
    // Each transpose form, against the value-based product on the same device and the golden
    // model.
    let forms = [
        (&ha, &hb, false, false, Rounding::Stochastic),
        (&ha, &hbt, false, true, Rounding::NearestEven),
        (&hat, &hb, true, false, Rounding::Truncate),
        (&hat, &hbt, true, true, Rounding::Stochastic),
    ];
    let mut results = Vec::new();
    for (i, (x, y, ta, tb, rounding)) in forms.into_iter().enumerate() {
        let s = spec(5, rounding, 0xC0DE + i as u32);
        let tr = Transposed { a: ta, b: tb };
        let c = dev
            .matmul_kept(x, y, tr, &s)
            .unwrap_or_else(|e| panic!("{name}: form {i}: {}", common::chain(&e)));
        let (vx, vy) = (read(dev, x), read(dev, y));
        let (ox, oy) = (
            if ta { vx.transpose() } else { vx.clone() },
            if tb { vy.transpose() } else { vy.clone() },
        );
        let by_value = match (ta, tb) {
            (false, false) => dev.matmul(&vx, &vy, &s),
            (false, true) => dev.matmul_nt(&vx, &vy, &s),
            (true, false) => dev.matmul_tn(&vx, &vy, &s),
            (true, true) => dev.matmul(&ox, &oy, &s),
        }
        .unwrap();
        let want = golden::matmul_at(&ox, &oy, &s, size, w).unwrap();
        assert_eq!(by_value, want, "{name}: form {i} by value");
        assert_eq!(
            read(dev, &c),
            want,
            "{name}: form {i} (Aᵀ {ta}, Bᵀ {tb}) kept"
        );
        assert_eq!((c.rows(), c.cols(), c.frac()), (m, n, 5));
        results.push((c, want));
    }
    // A product of a kept result (which the host never sent): Cᵀ·C.
    let (c0, want0) = &results[0];
    let s = spec(3, Rounding::NearestEven, 9);
    let ctc = dev
        .matmul_kept(c0, c0, Transposed { a: true, b: false }, &s)
        .unwrap();
    let want = golden::matmul_at(&want0.transpose(), want0, &s, size, w).unwrap();
    assert_eq!(read(dev, &ctc), want, "{name}: a product of a kept result");
    // The uploads are intact after all the products (a board's cache of operands shares the
    // store and must not have evicted them).
    for (h, t) in kept.iter().zip([&a, &b, &at, &bt]) {
        assert_eq!(&read(dev, h), t, "{name}: read back after the products");
    }
    // A shape mismatch is a typed error, nothing kept.
    let room = dev.tensor_room().expect("the device keeps tensors");
    let bad = dev.matmul_kept(&ha, &ha, Transposed::default(), &s);
    assert!(
        matches!(bad, Err(DeviceError::Numeric(_))),
        "{name}: {bad:?}"
    );
    assert_eq!(dev.tensor_room(), Some(room));

    // Freed: every use refused, the words given back.
    dev.free_tensor(&ha).unwrap();
    let after = dev.tensor_room().unwrap();
    assert_eq!(after.used, room.used - a.data.len(), "{name}");
    for e in [
        dev.matmul_kept(&ha, &hb, Transposed::default(), &s)
            .map(|_| ()),
        dev.read_tensor(&ha).map(|_| ()),
        dev.free_tensor(&ha),
    ] {
        assert!(
            matches!(e, Err(DeviceError::FreedTensor { .. })),
            "{name}: {e:?}"
        );
    }

    // Foreign: a handle of another device is refused both ways.
    let theirs = other.upload(&b).unwrap();
    let e = dev.matmul_kept(&hat, &theirs, Transposed::default(), &s);
    assert!(
        matches!(e, Err(DeviceError::ForeignTensor { .. })),
        "{name}: {e:?}"
    );
    let e = dev.read_tensor(&theirs);
    assert!(
        matches!(e, Err(DeviceError::ForeignTensor { .. })),
        "{name}: {e:?}"
    );
    let e = other.read_tensor(&hb);
    assert!(
        matches!(e, Err(DeviceError::ForeignTensor { .. })),
        "{name}: {e:?}"
    );
    other.free_tensor(&theirs).unwrap();

    // Full: a tensor one word larger than the free room, then a product whose result does
    // not fit once the room is filled; both refused with nothing stored.
    let room = dev.tensor_room().unwrap();
    let big = rng.matrix_at(1, room.free() + 1, 0, w);
    let e = dev.upload(&big);
    match &e {
        Err(DeviceError::StoreFull { needed, free, .. }) => {
            assert_eq!((*needed, *free), (room.free() + 1, room.free()), "{name}");
            let text = e.as_ref().unwrap_err().to_string();
            assert!(text.contains("free_tensor"), "{name}: {text}");
        }
        e => panic!("{name}: {e:?}"),
    }
    assert_eq!(dev.tensor_room(), Some(room), "{name}: nothing stored");
    let filler = keep(dev, &rng.matrix_at(1, room.free() - 1, 0, w));
    let room = dev.tensor_room().unwrap();
    let e = dev.matmul_kept(&hb, &hb, Transposed { a: true, b: false }, &s);
    assert!(
        matches!(e, Err(DeviceError::StoreFull { .. })),
        "{name}: {e:?}"
    );
    assert_eq!(dev.tensor_room(), Some(room), "{name}: nothing stored");
    // The value-based products still run beside a full store of kept tensors (on operands
    // no kept tensor holds: a board runs it from the host when they do not fit beside them).
    let (a2, b2) = (rng.matrix_at(m, k, 6, w), rng.matrix_at(k, n, 5, w));
    let by_value = dev.matmul(&a2, &b2, &s).unwrap_or_else(|e| {
        panic!(
            "{name}: by value beside a full store: {}",
            common::chain(&e)
        )
    });
    assert_eq!(by_value, golden::matmul_at(&a2, &b2, &s, size, w).unwrap());
    assert_eq!(read(dev, &hb), b, "{name}: kept beside a full store");

    for h in [&hb, &hat, &hbt, &filler, &ctc]
        .into_iter()
        .chain(results.iter().map(|(c, _)| c))
    {
        dev.free_tensor(h).unwrap();
    }
    assert_eq!(dev.tensor_room().unwrap().used, 0, "{name}: all freed");
}

fn golden_dev() -> Box<dyn Device> {
    device::open("golden", ArrayConfig::square(4)).unwrap()
}

#[test]
fn golden_4x4() {
    let mut dev = golden_dev();
    kept_body(dev.as_mut(), golden_dev().as_mut(), 0x4E97_0001);
}

#[test]
fn verilator_4x4() {
    let mut dev = match device::open("verilator", ArrayConfig::square(4)) {
        Ok(d) => d,
        Err(e) => return eprintln!("SKIPPED verilator: {e}"),
    };
    // Another device of the same kind: its handles are foreign too.
    let mut other = device::open("verilator", ArrayConfig::square(4)).unwrap();
    kept_body(dev.as_mut(), other.as_mut(), 0x4E97_0002);
}

#[test]
fn bridge_image_4x4() {
    let Some((board, mut dev)) = common::bridge_image() else {
        return;
    };
    kept_body(dev.as_mut(), golden_dev().as_mut(), 0x4E97_0003);
    drop(dev);
    board.close().expect("the bridge image reported an error");
}

/// A serial board: without a store (kept in host memory), and with one (kept in its RAM).
fn serial_board(store: Option<usize>, seed: u64) -> Option<device::DeviceStats> {
    let config = ArrayConfig::square(4);
    let board = match store {
        Some(words) => SimBoard::spawn_verilated_with_store(config, words),
        None => SimBoard::spawn_verilated(config),
    };
    let board = match board {
        Ok(b) => b,
        Err(e) => {
            eprintln!("SKIPPED serial board: {e}");
            return None;
        }
    };
    let spec = format!("serial:{}", board.path().display());
    let mut dev = device::open(&spec, config).unwrap();
    kept_body(dev.as_mut(), golden_dev().as_mut(), seed);
    let stats = dev.stats();
    if store.is_some() {
        too_many(dev.as_mut());
    }
    drop(dev);
    board.close().expect("the board reported an error");
    Some(stats)
}

/// A board's store has a table of `MAX_TENSORS` entries: one more kept tensor is refused,
/// nothing stored.
fn too_many(dev: &mut dyn Device) {
    let t = QMatrix::from_vec(1, 2, 0, vec![1, -1]).unwrap();
    let most = systole_firmware::store::MAX_TENSORS;
    let kept: Vec<DeviceTensor> = (0..most).map(|_| keep(dev, &t)).collect();
    let room = dev.tensor_room();
    let e = dev.upload(&t);
    assert!(
        matches!(e, Err(DeviceError::TooManyTensors { most: m, .. }) if m == most),
        "{e:?}"
    );
    assert_eq!(dev.tensor_room(), room);
    for h in &kept {
        assert_eq!(read(dev, h), t);
        dev.free_tensor(h).unwrap();
    }
}

#[test]
fn serial_board_without_store_4x4() {
    if let Some(st) = serial_board(None, 0x4E97_0004) {
        assert_eq!(st.board_ops, 0, "{st:?}");
    }
}

#[test]
fn serial_board_with_store_4x4() {
    // 800 words (the SoC's store is 7,680): the body's kept tensors reach 700 of them, so its
    // value-based products share the store with them (the cache evicting around the pinned
    // tensors) and at the end no longer fit beside them (run from the host instead).
    if let Some(st) = serial_board(Some(800), 0x4E97_0005) {
        // The five kept products ran on the board, and so did the value-based ones that fit.
        assert!(st.board_ops >= 5, "{st:?}");
    }
}

#[test]
#[ignore = "the SoC image (the firmware on the Verilated CPU): seconds; run with --ignored"]
fn soc_firmware_4x4() {
    let Some((board, mut dev)) = common::soc_image() else {
        return;
    };
    kept_body(&mut dev, golden_dev().as_mut(), 0x4E97_0006);
    too_many(&mut dev);
    common::check_stack(&mut dev, "kept tensors");
    drop(dev);
    board.close().expect("the SoC image reported an error");
}

/// A board whose link fails in a store request has a store the host can no longer vouch for:
/// the host forgets it, and every kept tensor's handle then says the board lost it (no request
/// sent), while freeing the handle still works.
#[test]
fn a_failed_request_loses_the_boards_kept_tensors() {
    let config = ArrayConfig::square(4);
    let board = match SimBoard::spawn_verilated_with_store(config, 800) {
        Ok(b) => b,
        Err(e) => return eprintln!("SKIPPED serial board: {e}"),
    };
    let port = format!("serial:{}", board.path().display());
    let mut dev = device::open(&port, config).unwrap();
    let t = QMatrix::from_vec(2, 2, 1, vec![1, 2, 3, -4]).unwrap();
    let (h, g) = (keep(dev.as_mut(), &t), keep(dev.as_mut(), &t));
    let s = spec(0, Rounding::NearestEven, 1);
    let c = dev.matmul_kept(&h, &g, Transposed::default(), &s).unwrap();
    board.close().expect("the board reported an error");
    // The read fails on the link, inside the store's request.
    let e = dev.read_tensor(&c);
    assert!(matches!(e, Err(DeviceError::Transport { .. })), "{e:?}");
    for t in [&h, &g, &c] {
        let e = dev.read_tensor(t);
        assert!(matches!(e, Err(DeviceError::TensorLost { .. })), "{e:?}");
    }
    dev.free_tensor(&h).unwrap();
    let e = dev.read_tensor(&h);
    assert!(matches!(e, Err(DeviceError::FreedTensor { .. })), "{e:?}");
}
