//! The device's kept tensors in the board's tensor store (`Device::upload`,
//! `Device::matmul_kept`): the same `WRITE_TENSOR`, `READ_TENSOR`, `FREE_TENSORS` and `MATMUL`
//! requests as the cache of operands in `board_ops.rs`, in the same store, each kept tensor
//! pinned there under its key until freed. The device has checked the room (`KeptStore`)
//! before any of these runs: making it evicts only the cache's tensors.
//!
//! A kept product's result stays on the board (the answer carries its first words, which the
//! host drops); the host reads a kept tensor only when asked. A failure, like one of a board
//! operation, makes the host forget the whole store (`BoardStore::forget`): the kept tensors
//! then count as lost.

use super::board_ops::{BoardStore, Operand, Resident};
use super::{LinkError, SerialBus};
use crate::backend::{KeptProduct, KeptStore};
use std::io::{Read, Write};
use systole_firmware::driver::DriverStats;
use systole_firmware::protocol::board_ops::{A_TRANSPOSED, B_TRANSPOSED, NO_TENSOR};
use systole_firmware::protocol::{MatmulRequest, Request};
use systole_firmware::store::MAX_TENSORS;

impl<T: Read + Write> SerialBus<T> {
    /// The store as the kept tensors see it; no room at all on a board without one.
    pub(crate) fn kept_store(&self) -> KeptStore {
        let (capacity, (kept_words, kept)) = match &self.board {
            Some(store) => (store.capacity, store.pinned()),
            None => (0, (0, 0)),
        };
        KeptStore {
            capacity,
            kept_words,
            kept,
            most: MAX_TENSORS,
        }
    }

    /// The board id of kept tensor `key`, if the host believes the board holds it.
    fn kept_id(&self, key: u64) -> Option<u8> {
        let store = self.board.as_ref()?;
        store
            .tensors
            .iter()
            .find(|t| t.pin == Some(key))
            .map(|t| t.id)
    }

    pub(crate) fn holds_kept(&self, key: u64) -> bool {
        self.kept_id(key).is_some()
    }

    /// Runs `body` on the store; any failure forgets the store (the board's state is then
    /// unknown) and drops what was buffered.
    fn on_store<R>(
        &mut self,
        body: impl FnOnce(&mut Self, &mut BoardStore) -> Result<R, LinkError>,
    ) -> Result<R, LinkError> {
        let Some(mut store) = self.board.take() else {
            return Err(LinkError::Protocol("the board has no tensor store".into()));
        };
        let r = self.flush().and_then(|()| body(self, &mut store));
        if r.is_err() {
            self.discard();
            store.forget();
        }
        self.board = Some(store);
        r
    }

    /// Frees what an unknown store holds and what `make_room` evicted, in the batch.
    fn clear_for(
        &mut self,
        store: &mut BoardStore,
        words: usize,
        now: u64,
    ) -> Result<(), LinkError> {
        let mut frees = Vec::new();
        if std::mem::take(&mut store.unknown) {
            frees.push(NO_TENSOR);
            store.tensors.clear();
            store.out_words = None;
        }
        frees.extend(store.make_room(words, 1, now)?);
        if !frees.is_empty() {
            self.push_entry(&Request::FreeTensors(&frees))?;
        }
        Ok(())
    }

    pub(crate) fn keep(
        &mut self,
        key: u64,
        rows: usize,
        cols: usize,
        words: &[i16],
    ) -> Result<(), LinkError> {
        self.on_store(|bus, store| {
            store.uses += 1;
            let now = store.uses;
            bus.clear_for(store, words.len(), now)?;
            let id = store.free_id()?;
            let op = Operand { rows, cols, words };
            if words.is_empty() {
                // An empty tensor is created by one chunk of no words.
                bus.push_entry(&Request::WriteTensor {
                    id,
                    rows: rows as u16,
                    cols: cols as u16,
                    offset: 0,
                    words: systole_firmware::protocol::Words::from_le_bytes(&[]),
                })?;
            } else {
                bus.write_tensor(id, &op)?;
            }
            bus.flush()?;
            store.tensors.push(Resident {
                id,
                rows,
                cols,
                words: words.to_vec(),
                last_use: now,
                pin: Some(key),
            });
            Ok(())
        })
    }

    pub(crate) fn read_kept(&mut self, key: u64, out: &mut [i16]) -> Result<(), LinkError> {
        let id = self.kept_id(key).ok_or_else(lost)?;
        self.on_store(|bus, _| bus.read_stored(id, 0, out))
    }

    /// Frees kept tensor `key`: the host's record at once, the board's with the next frame
    /// (a `FREE_TENSORS` entry in the batch, which every later request is sent after).
    pub(crate) fn free_kept(&mut self, key: u64) -> Result<(), LinkError> {
        let id = self.kept_id(key).ok_or_else(lost)?;
        let r = self.push_entry(&Request::FreeTensors(&[id]));
        match self.board.as_mut() {
            Some(store) if r.is_ok() => store.tensors.retain(|t| t.id != id),
            Some(store) => store.forget(),
            None => {}
        }
        r
    }

    pub(crate) fn matmul_kept(&mut self, p: &KeptProduct) -> Result<DriverStats, LinkError> {
        let (a, b) = (
            self.kept_id(p.a).ok_or_else(lost)?,
            self.kept_id(p.b).ok_or_else(lost)?,
        );
        let shift = u8::try_from(p.shift)
            .map_err(|_| LinkError::Protocol(format!("output shift {} > 255", p.shift)))?;
        self.on_store(|bus, store| {
            store.uses += 1;
            let now = store.uses;
            // The operands are in use: touched, so the room is never made from them.
            for t in store.tensors.iter_mut().filter(|t| t.id == a || t.id == b) {
                t.last_use = now;
            }
            bus.clear_for(store, p.m * p.n, now)?;
            let out = store.free_id()?;
            let req = Request::Matmul(MatmulRequest {
                a,
                b,
                out,
                flags: if p.tr.a { A_TRANSPOSED } else { 0 }
                    | if p.tr.b { B_TRANSPOSED } else { 0 },
                shift,
                rounding: p.rounding,
                seed: p.seed,
            });
            bus.flush()?;
            // K is the stored A's inner dimension (its rows when read transposed).
            let k = store.tensors.iter().find(|t| t.id == a).map_or(0, |t| {
                if p.tr.a {
                    t.rows
                } else {
                    t.cols
                }
            });
            let (stats, _first) = bus.send_op(&req, p.m * p.n, (p.m * k * p.n) as u64)?;
            store.tensors.push(Resident {
                id: out,
                rows: p.m,
                cols: p.n,
                words: Vec::new(),
                last_use: now,
                pin: Some(p.out),
            });
            Ok(stats)
        })
    }
}

fn lost() -> LinkError {
    LinkError::Protocol("the board no longer holds the kept tensor".into())
}
