//! The host's half of the board operations (`systole_firmware::protocol::board_ops`): on a
//! board that announces them, a product or convolution is one `MATMUL` / `CONV` request on
//! tensors uploaded to the board's store, instead of the tile driver's register and row
//! traffic. The host keeps a copy of every tensor it left on the board and uploads an operand
//! only when no resident tensor holds exactly its shape and words (compared word for word),
//! so the tensors a training step uses twice cross the link once.
//!
//! Outputs are always stored as tensor [`OUT_ID`] (the board replaces the previous one); an
//! operation whose operands and output do not fit the store even after evicting every other
//! tensor returns `None`, and the caller drives it from the host as before. After any failure
//! the host forgets what it believed resident and clears the store before the next upload.
//!
//! The store is shared with the device's kept tensors (`kept.rs`, `Device::upload`): they are
//! pinned (`Resident::pin`), never evicted here, and the room this cache has is the store's
//! minus theirs. A cached operand equal to a kept tensor word for word uses the kept one.

use super::{LinkError, SerialBus};
use std::io::{Read, Write};
use systole_firmware::conv::{ConvJob, ConvOp};
use systole_firmware::driver::{DriverStats, MatmulJob, Transposed};
use systole_firmware::frame::MAX_PAYLOAD;
use systole_firmware::protocol::board_ops::{
    OpStats, A_TRANSPOSED, B_TRANSPOSED, NO_TENSOR, OP_REPLY_HEADER, WRITE_TENSOR_HEADER,
};
use systole_firmware::protocol::{
    cmd, ConvRequest, MatmulRequest, Request, Words, BATCH_ENTRY_HEADER,
};
use systole_firmware::store::MAX_TENSORS;

/// How long the host waits for a `MATMUL` / `CONV` answer before resending, at most (the
/// largest operation the store holds takes a real board at 100 MHz well under a second; a
/// simulated SoC runs about a hundred times slower). Once measured, the wait is the
/// operation's multiply-accumulates at that pace (`exchange`'s docs); before, [`first_wait`].
pub const OP_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// The pace a board's operations are assumed to keep at least before the link measured it,
/// in multiply-accumulates (with [`OP_FIXED_MACS`] for each request) a second: a quarter of
/// the slowest board there is, the simulated SoC (Verilator on the host), whose products ran
/// at 65,000 to 100,000 a second (a 40x40x40 product in 2.0 s, 24x40x24 in 0.89 s).
pub const FIRST_OP_MACS_PER_SEC: u64 = 16_000;

/// The least the first operation on a link may take in all: time for the board's own start
/// (the request's decoding, the driver's setup, the host's scheduling), whatever its size.
pub const FIRST_OP_FLOOR: std::time::Duration = std::time::Duration::from_secs(4);

/// How long the first operation of `units` multiply-accumulates (its own and
/// [`OP_FIXED_MACS`]) may take on the board in all, before any pace was measured: its work at
/// [`FIRST_OP_MACS_PER_SEC`], at least [`FIRST_OP_FLOOR`], at most [`OP_TIMEOUT`]. It is
/// spread over the tries (a board still at work answers a resend from its copy once done), so
/// a board that stopped is found after about this long; the bytes' time on the line and the
/// frame timeout are waited for besides, on each try (`exchange`).
pub fn first_wait(units: u64) -> std::time::Duration {
    let work = std::time::Duration::from_secs_f64(units as f64 / FIRST_OP_MACS_PER_SEC as f64);
    work.clamp(FIRST_OP_FLOOR, OP_TIMEOUT)
}

/// The cost of a `MATMUL` / `CONV` request besides its multiply-accumulates (the request's
/// decoding, the driver's setup, the answer), counted as this many of them: so the pace
/// measured on a small product does not make a large one's wait many times too long.
pub const OP_FIXED_MACS: u64 = 1 << 16;

/// The tensor id every output is stored as.
pub const OUT_ID: u8 = 0;

/// A tensor the host left on the board, with the host's copy of its words (none for a kept
/// product's result, which the host has not seen).
pub(crate) struct Resident {
    pub(crate) id: u8,
    pub(crate) rows: usize,
    pub(crate) cols: usize,
    pub(crate) words: Vec<i16>,
    pub(crate) last_use: u64,
    /// The kept tensor's key when the device keeps it (pinned: never evicted by the cache).
    pub(crate) pin: Option<u64>,
}

impl Resident {
    /// Words it takes in the store.
    pub(crate) fn len(&self) -> usize {
        self.rows * self.cols
    }
}

/// What the host knows of the board's store.
pub(crate) struct BoardStore {
    pub(crate) capacity: usize,
    pub(crate) tensors: Vec<Resident>,
    /// Words of the stored output ([`OUT_ID`]), if one is there.
    pub(crate) out_words: Option<usize>,
    pub(crate) uses: u64,
    /// The board may hold tensors the host does not know of (after opening or a failure).
    pub(crate) unknown: bool,
}

impl BoardStore {
    pub(crate) fn new(capacity: usize) -> Self {
        BoardStore {
            capacity,
            tensors: Vec::new(),
            out_words: None,
            uses: 0,
            unknown: true,
        }
    }

    /// Forgets every tensor: the board may hold any (or none), so the next upload clears it.
    /// Kept tensors go too (their handles then say the board lost them).
    pub(crate) fn forget(&mut self) {
        *self = BoardStore::new(self.capacity);
    }

    /// Words and count of the kept (pinned) tensors.
    pub(crate) fn pinned(&self) -> (usize, usize) {
        let kept = self.tensors.iter().filter(|t| t.pin.is_some());
        kept.fold((0, 0), |(w, n), t| (w + t.len(), n + 1))
    }

    /// Makes room for `words` more words and `entries` more tensors beside the pinned ones
    /// and the tensors used at `now`, evicting the old output and then the least recently used
    /// unpinned tensors; returns the ids to free.
    pub(crate) fn make_room(
        &mut self,
        words: usize,
        entries: usize,
        now: u64,
    ) -> Result<Vec<u8>, LinkError> {
        let mut frees = Vec::new();
        loop {
            let used: usize = self.tensors.iter().map(Resident::len).sum();
            let old_out = self.out_words.unwrap_or(0);
            let table = self.tensors.len() + usize::from(self.out_words.is_some()) + entries;
            if used + old_out + words <= self.capacity && table <= MAX_TENSORS {
                return Ok(frees);
            }
            let Some(id) = self.evict_one(now) else {
                return Err(LinkError::Protocol(
                    "the kept tensors do not fit the board's store".into(),
                ));
            };
            frees.push(id);
        }
    }

    /// Drops, from the host's record, the old output or else the least recently used unpinned
    /// tensor not used at `now`; returns its id (for `FREE_TENSORS`), `None` when nothing may go.
    fn evict_one(&mut self, now: u64) -> Option<u8> {
        if self.out_words.take().is_some() {
            return Some(OUT_ID);
        }
        let victim = self
            .tensors
            .iter()
            .enumerate()
            .filter(|(_, t)| t.last_use != now && t.pin.is_none())
            .min_by_key(|(_, t)| t.last_use)
            .map(|(i, _)| i)?;
        Some(self.tensors.remove(victim).id)
    }

    /// A tensor id no stored tensor has (nor the output's).
    pub(crate) fn free_id(&self) -> Result<u8, LinkError> {
        (OUT_ID + 1..NO_TENSOR)
            .find(|id| self.tensors.iter().all(|t| t.id != *id))
            .ok_or_else(|| LinkError::Protocol("no free tensor id".into()))
    }
}

/// One operand of a board operation: a stored tensor's shape and words.
#[derive(Clone, Copy)]
pub(crate) struct Operand<'a> {
    pub(crate) rows: usize,
    pub(crate) cols: usize,
    pub(crate) words: &'a [i16],
}

impl<T: Read + Write> SerialBus<T> {
    /// Whether the board runs products and convolutions itself.
    pub fn has_board_ops(&self) -> bool {
        self.board.is_some()
    }

    /// Runs `job` (operands read through their transposes where `tr` says so) on the board;
    /// `None` when it cannot (no board operations, or too large for the store).
    pub(crate) fn board_matmul(
        &mut self,
        job: &MatmulJob<'_>,
        tr: Transposed,
        out: &mut [i16],
    ) -> Option<Result<DriverStats, LinkError>> {
        let shape = |t: bool, r: usize, c: usize| if t { (c, r) } else { (r, c) };
        let (ar, ac) = shape(tr.a, job.m, job.k);
        let (br, bc) = shape(tr.b, job.k, job.n);
        let ops = [
            Operand {
                rows: ar,
                cols: ac,
                words: job.a,
            },
            Operand {
                rows: br,
                cols: bc,
                words: job.b,
            },
        ];
        let shift = u8::try_from(job.shift).ok()?;
        let (m, n) = (job.m, job.n);
        let macs = (m * job.k * n) as u64;
        self.board_op(&ops, (m * n, macs), out, |ids| {
            Request::Matmul(MatmulRequest {
                a: ids[0],
                b: ids[1],
                out: OUT_ID,
                flags: if tr.a { A_TRANSPOSED } else { 0 } | if tr.b { B_TRANSPOSED } else { 0 },
                shift,
                rounding: job.rounding,
                seed: job.seed,
            })
        })
    }

    /// Runs the convolution op `job` on the board's conv unit; `None` when it cannot.
    pub(crate) fn board_conv(
        &mut self,
        job: &ConvJob<'_>,
        out: &mut [i16],
    ) -> Option<Result<DriverStats, LinkError>> {
        let g = &job.geom;
        let used = |ops: &[ConvOp]| ops.contains(&job.op);
        let all = [
            (
                used(&[ConvOp::Forward, ConvOp::BackwardWeights]),
                job.batch,
                g.in_words(),
                job.x,
            ),
            (
                used(&[ConvOp::BackwardInput, ConvOp::BackwardWeights]),
                job.batch,
                g.out_words(),
                job.dy,
            ),
            (
                used(&[ConvOp::Forward, ConvOp::BackwardInput]),
                g.out_ch,
                g.in_ch * g.kernel * g.kernel,
                job.w,
            ),
        ];
        let ops: Vec<Operand<'_>> = all
            .iter()
            .filter(|o| o.0)
            .map(|&(_, rows, cols, words)| Operand { rows, cols, words })
            .collect();
        let fits = |v: usize, max: u8| v <= usize::from(max);
        if !(fits(g.kernel, u8::MAX) && fits(g.stride, u8::MAX) && fits(g.pad, u8::MAX))
            || [job.batch, g.in_ch, g.in_h, g.in_w, g.out_ch]
                .iter()
                .any(|&d| u16::try_from(d).is_err())
        {
            return None;
        }
        let shift = u8::try_from(job.shift).ok()?;
        let (m, k, n) = job.shape();
        let flags: Vec<bool> = all.iter().map(|o| o.0).collect();
        self.board_op(&ops, (m * n, (m * k * n) as u64), out, |ids| {
            let mut it = ids.iter().copied();
            let mut next = |used: bool| {
                if used {
                    it.next().unwrap_or(NO_TENSOR)
                } else {
                    NO_TENSOR
                }
            };
            let (x, dy, w) = (next(flags[0]), next(flags[1]), next(flags[2]));
            Request::Conv(ConvRequest {
                op: job.op,
                x,
                dy,
                w,
                out: OUT_ID,
                batch: job.batch as u16,
                geom: *g,
                shift,
                rounding: job.rounding,
                seed: job.seed,
            })
        })
    }

    /// Makes `ops` resident, sends the request `make` builds from their ids (an operation of
    /// `macs` multiply-accumulates) and reads the `out_len` output words back.
    fn board_op(
        &mut self,
        ops: &[Operand<'_>],
        (out_len, macs): (usize, u64),
        out: &mut [i16],
        make: impl FnOnce(&[u8]) -> Request<'static>,
    ) -> Option<Result<DriverStats, LinkError>> {
        let store = self.board.as_ref()?;
        let dims_fit = ops
            .iter()
            .all(|o| u16::try_from(o.rows).is_ok() && u16::try_from(o.cols).is_ok());
        let total: usize = ops.iter().map(|o| o.words.len()).sum::<usize>() + out_len;
        // The kept tensors stay: what is left of the store is this cache's.
        let (pinned_words, pinned) = store.pinned();
        if !dims_fit
            || total + pinned_words > store.capacity
            || pinned + ops.len() + 1 > MAX_TENSORS
            || ops.iter().any(|o| o.words.is_empty())
            || out_len == 0
            || out.len() != out_len
        {
            return None;
        }
        let r = self.flush().and_then(|()| {
            let ids = self.make_resident(ops, out_len)?;
            let req = make(&ids);
            self.run_op(&req, macs, out)
        });
        if r.is_err() {
            self.discard();
            if let Some(b) = self.board.as_mut() {
                b.forget();
            }
        }
        Some(r)
    }

    /// Uploads what of `ops` is not resident, evicting the least recently used tensors that
    /// this operation does not use when the store needs room; returns the operands' ids.
    fn make_resident(&mut self, ops: &[Operand<'_>], out_len: usize) -> Result<Vec<u8>, LinkError> {
        let Some(mut store) = self.board.take() else {
            return Err(LinkError::Protocol("the board has no tensor store".into()));
        };
        let r = self.upload(&mut store, ops, out_len);
        self.board = Some(store);
        r
    }

    fn upload(
        &mut self,
        store: &mut BoardStore,
        ops: &[Operand<'_>],
        out_len: usize,
    ) -> Result<Vec<u8>, LinkError> {
        store.uses += 1;
        let now = store.uses;
        let mut frees: Vec<u8> = Vec::new();
        if std::mem::take(&mut store.unknown) {
            frees.push(NO_TENSOR);
            store.tensors.clear();
            store.out_words = None;
        }
        // Which operands are there already (an operand given twice is uploaded once).
        let mut ids: Vec<Option<u8>> = ops
            .iter()
            .map(|o| {
                store
                    .tensors
                    .iter_mut()
                    .find(|t| {
                        t.rows == o.rows && t.cols == o.cols && t.words == o.words && t.len() > 0
                    })
                    .map(|t| {
                        t.last_use = now;
                        t.id
                    })
            })
            .collect();
        let mut fresh: Vec<usize> = Vec::new();
        for (i, o) in ops.iter().enumerate() {
            if ids[i].is_none()
                && !fresh
                    .iter()
                    .any(|&j| ops[j].words == o.words && ops[j].rows == o.rows)
            {
                fresh.push(i);
            }
        }
        let upload: usize = fresh.iter().map(|&i| ops[i].words.len()).sum();
        // Room: the uploads beside the kept tensors and the old output, then the new output
        // in place of the old one; and a table entry each.
        let fits = |s: &BoardStore| {
            let kept: usize = s.tensors.iter().map(Resident::len).sum();
            let old_out = s.out_words.unwrap_or(0);
            let entries = s.tensors.len() + fresh.len() + 1;
            kept + old_out + upload <= s.capacity
                && kept + upload + out_len <= s.capacity
                && entries <= MAX_TENSORS
        };
        while !fits(store) {
            let Some(id) = store.evict_one(now) else {
                return Err(LinkError::Protocol(
                    "the operation's tensors do not fit the board's store".into(),
                ));
            };
            frees.push(id);
        }
        if !frees.is_empty() {
            self.push_entry(&Request::FreeTensors(&frees))?;
        }
        for &i in &fresh {
            let id = store.free_id()?;
            self.write_tensor(id, &ops[i])?;
            store.tensors.push(Resident {
                id,
                rows: ops[i].rows,
                cols: ops[i].cols,
                words: ops[i].words.to_vec(),
                last_use: now,
                pin: None,
            });
            for (j, o) in ops.iter().enumerate() {
                if ids[j].is_none()
                    && o.words == ops[i].words
                    && o.rows == ops[i].rows
                    && o.cols == ops[i].cols
                {
                    ids[j] = Some(id);
                }
            }
        }
        self.flush()?;
        store.out_words = Some(out_len);
        Ok(ids.into_iter().map(|id| id.unwrap_or(NO_TENSOR)).collect())
    }

    /// Queues `WRITE_TENSOR` entries for `op` as tensor `id`, filling frames.
    pub(crate) fn write_tensor(&mut self, id: u8, op: &Operand<'_>) -> Result<(), LinkError> {
        let overhead = BATCH_ENTRY_HEADER + WRITE_TENSOR_HEADER;
        let most = (MAX_PAYLOAD - overhead) / 2;
        let mut done = 0;
        while done < op.words.len() {
            let room = MAX_PAYLOAD.saturating_sub(self.batch.len() + overhead) / 2;
            // Not worth an entry's header: start the next frame.
            let take = (op.words.len() - done).min(if room < 16 { most } else { room });
            let bytes: Vec<u8> = op.words[done..done + take]
                .iter()
                .flat_map(|w| w.to_le_bytes())
                .collect();
            self.push_entry(&Request::WriteTensor {
                id,
                rows: op.rows as u16,
                cols: op.cols as u16,
                offset: done as u32,
                words: Words::from_le_bytes(&bytes),
            })?;
            done += take;
        }
        Ok(())
    }

    /// Sends a `MATMUL` / `CONV` and reads its whole output into `out`.
    fn run_op(
        &mut self,
        req: &Request<'_>,
        macs: u64,
        out: &mut [i16],
    ) -> Result<DriverStats, LinkError> {
        let (stats, first) = self.send_op(req, out.len(), macs)?;
        put(&first, &mut out[..first.len() / 2]);
        self.read_stored(OUT_ID, first.len() / 2, out)?;
        Ok(stats)
    }

    /// Sends a `MATMUL` / `CONV` of `macs` multiply-accumulates whose output has `out_len`
    /// words; returns the driver's counters and the bytes of the output's first words the
    /// answer carries.
    pub(crate) fn send_op(
        &mut self,
        req: &Request<'_>,
        out_len: usize,
        macs: u64,
    ) -> Result<(DriverStats, Vec<u8>), LinkError> {
        let mut payload = [0u8; MAX_PAYLOAD];
        let len = req
            .encode_payload(&mut payload)
            .map_err(LinkError::Encode)?;
        // The board answers when the whole operation has run: wait for that, not a frame's
        // time (a resend would only wait in its receive FIFO and be answered from the copy).
        let units = (macs + OP_FIXED_MACS).min(u64::from(u32::MAX)) as u32;
        let work = super::exchange::Work::Paced {
            kind: super::exchange::Kind::Mac,
            units,
            unmeasured: first_wait(u64::from(units)) / (self.retries + 1),
            capped: true,
        };
        let mut p = self.transact_for(req.cmd(), &payload[..len], work)?;
        let bad = |what: String| LinkError::Protocol(what);
        let stats = OpStats::parse(p.get(4..).unwrap_or(&[]))
            .ok_or_else(|| bad(format!("operation answer of {} bytes", p.len())))?;
        let (m, n) = (
            usize::from(u16::from_le_bytes([p[0], p[1]])),
            usize::from(u16::from_le_bytes([p[2], p[3]])),
        );
        let first = (p.len() - OP_REPLY_HEADER) / 2;
        if m * n != out_len || first > out_len || !(p.len() - OP_REPLY_HEADER).is_multiple_of(2) {
            return Err(bad(format!(
                "the board answered a {m}x{n} output ({first} words) for one of {out_len} words"
            )));
        }
        let stats = DriverStats {
            cycles: stats.cycles,
            mac_cycles: stats.mac_cycles,
            rows_written: stats.rows_written.into(),
            rows_read: stats.rows_read.into(),
            reg_writes: stats.reg_writes.into(),
            reg_reads: stats.reg_reads.into(),
            fm_words: stats.fm_words.into(),
            ..DriverStats::default()
        };
        Ok((stats, p.split_off(OP_REPLY_HEADER)))
    }

    /// Reads words `from..` of stored tensor `id` into `out[from..]` by `READ_TENSOR`.
    pub(crate) fn read_stored(
        &mut self,
        id: u8,
        from: usize,
        out: &mut [i16],
    ) -> Result<(), LinkError> {
        let mut done = from;
        while done < out.len() {
            let count = (out.len() - done).min(MAX_PAYLOAD / 2);
            let mut q = [0u8; 7];
            q[0] = id;
            q[1..5].copy_from_slice(&(done as u32).to_le_bytes());
            q[5..7].copy_from_slice(&(count as u16).to_le_bytes());
            let words = self.transact(cmd::READ_TENSOR, &q)?;
            if words.len() != 2 * count {
                return Err(LinkError::Protocol(format!(
                    "READ_TENSOR answered {} bytes for {count} words",
                    words.len()
                )));
            }
            put(&words, &mut out[done..done + count]);
            done += count;
        }
        Ok(())
    }
}

fn put(bytes: &[u8], out: &mut [i16]) {
    for (w, b) in out.iter_mut().zip(bytes.chunks_exact(2)) {
        *w = i16::from_le_bytes([b[0], b[1]]);
    }
}
