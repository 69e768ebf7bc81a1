//! [`TensorStore`]: tensors the host uploads into the board's RAM, so a product's operands
//! cross the link once and are then used by as many `MATMUL` / `CONV` requests as need them
//! (protocol commands `WRITE_TENSOR`, `READ_TENSOR`, `FREE_TENSORS`).
//!
//! The store is one slice of words (on the SoC a static array beside the image and the
//! stack, `systole_core::soc::TENSOR_STORE_BYTES`) holding the tensors back to back, in the
//! order they were created, with no gaps: freeing a tensor moves the ones above it down, so
//! the free space is always one run at the top and a tensor fits exactly when its words do.
//! A new tensor always goes on top, which lets a product's output be written while its
//! operands, all below it, are read ([`TensorStore::output`]).

/// Tensors the store holds at most (each a table entry).
pub const MAX_TENSORS: usize = 16;

/// Why the store refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreError {
    /// Not enough free words for the tensor.
    Full {
        /// Words the tensor needs.
        needed: usize,
        /// Words free.
        free: usize,
    },
    /// Every one of the [`MAX_TENSORS`] entries holds a tensor.
    TooMany,
    /// No tensor has this id.
    UnknownId(u8),
    /// A write or read past the tensor's end, or a chunk whose shape differs from the tensor's.
    Range,
}

#[derive(Clone, Copy, Debug)]
struct Entry {
    id: u8,
    rows: u16,
    cols: u16,
    offset: usize,
    len: usize,
}

/// A stored tensor, read-only: `rows x cols` words, row-major.
#[derive(Clone, Copy, Debug)]
pub struct Tensor<'s> {
    /// Rows.
    pub rows: usize,
    /// Columns.
    pub cols: usize,
    /// The words.
    pub words: &'s [i16],
}

/// Where the tensors are: the store's bookkeeping without its words. A copy of it checks a
/// whole batch of tensor requests before any of them runs.
#[derive(Clone, Copy, Debug)]
pub struct Table {
    entries: [Option<Entry>; MAX_TENSORS],
    /// Words in use (the tensors are packed from 0).
    used: usize,
    capacity: usize,
}

impl Table {
    fn find(&self, id: u8) -> Option<usize> {
        self.entries
            .iter()
            .position(|e| matches!(e, Some(e) if e.id == id))
    }

    fn entry(&self, id: u8) -> Result<Entry, StoreError> {
        self.find(id)
            .and_then(|i| self.entries[i])
            .ok_or(StoreError::UnknownId(id))
    }

    /// Words free.
    pub fn free_words(&self) -> usize {
        self.capacity - self.used
    }

    /// Drops `id` from the table; returns the words `(offset, len)` it held. The words above
    /// them must move down by `len` (the table already says they did).
    fn free(&mut self, id: u8) -> Result<(usize, usize), StoreError> {
        let i = self.find(id).ok_or(StoreError::UnknownId(id))?;
        let Some(gone) = self.entries[i].take() else {
            return Err(StoreError::UnknownId(id));
        };
        for e in self.entries.iter_mut().flatten() {
            if e.offset > gone.offset {
                e.offset -= gone.len;
            }
        }
        self.used -= gone.len;
        Ok((gone.offset, gone.len))
    }

    /// Creates `id` on top (after freeing an old `id`, returned as by [`Table::free`]).
    /// Refused, with the table unchanged, when it does not fit.
    fn create(
        &mut self,
        id: u8,
        rows: u16,
        cols: u16,
    ) -> Result<Option<(usize, usize)>, StoreError> {
        let len = usize::from(rows) * usize::from(cols);
        let existing = self.find(id);
        let old = existing.and_then(|i| self.entries[i]).map_or(0, |e| e.len);
        let free = self.free_words() + old;
        if len > free {
            return Err(StoreError::Full { needed: len, free });
        }
        if existing.is_none() && self.entries.iter().all(Option::is_some) {
            return Err(StoreError::TooMany);
        }
        let moved = match existing {
            Some(_) => Some(self.free(id)?),
            None => None,
        };
        let Some(slot) = self.entries.iter_mut().find(|e| e.is_none()) else {
            return Err(StoreError::TooMany);
        };
        *slot = Some(Entry {
            id,
            rows,
            cols,
            offset: self.used,
            len,
        });
        self.used += len;
        Ok(moved)
    }

    /// Where a `WRITE_TENSOR` chunk goes (`offset = 0` creates the tensor first); checks it
    /// and updates the table as the request will.
    pub fn write(
        &mut self,
        id: u8,
        rows: u16,
        cols: u16,
        offset: usize,
        count: usize,
    ) -> Result<Option<(usize, usize)>, StoreError> {
        let moved = if offset == 0 {
            self.create(id, rows, cols)?
        } else {
            None
        };
        let e = self.entry(id)?;
        if (e.rows, e.cols) != (rows, cols)
            || offset.checked_add(count).is_none_or(|end| end > e.len)
        {
            return Err(StoreError::Range);
        }
        Ok(moved)
    }

    /// Frees the `ids` in order (`every` frees all); the table as `FREE_TENSORS` leaves it.
    pub fn free_all_of(&mut self, ids: &[u8], every: u8) -> Result<(), StoreError> {
        for &id in ids {
            if id == every {
                *self = Table::new(self.capacity);
            } else {
                self.free(id)?;
            }
        }
        Ok(())
    }

    fn new(capacity: usize) -> Self {
        Table {
            entries: [None; MAX_TENSORS],
            used: 0,
            capacity,
        }
    }
}

/// The board's tensor store over a slice of words.
pub struct TensorStore<'s> {
    words: &'s mut [i16],
    table: Table,
}

impl<'s> TensorStore<'s> {
    /// An empty store over `words`.
    pub fn new(words: &'s mut [i16]) -> Self {
        let capacity = words.len();
        TensorStore {
            words,
            table: Table::new(capacity),
        }
    }

    /// Words the store holds in all.
    pub fn capacity(&self) -> usize {
        self.words.len()
    }

    /// Words free.
    pub fn free_words(&self) -> usize {
        self.table.free_words()
    }

    /// A copy of the bookkeeping, to check requests against before running them.
    pub fn table(&self) -> Table {
        self.table
    }

    /// The tensor `id`.
    pub fn get(&self, id: u8) -> Result<Tensor<'_>, StoreError> {
        let e = self.table.entry(id)?;
        Ok(Tensor {
            rows: e.rows.into(),
            cols: e.cols.into(),
            words: &self.words[e.offset..e.offset + e.len],
        })
    }

    /// Moves the words above a freed region down over it.
    fn close_gap(&mut self, used_before: usize, gap: Option<(usize, usize)>) {
        if let Some((offset, len)) = gap {
            self.words.copy_within(offset + len..used_before, offset);
        }
    }

    /// Frees tensor `id`, moving the tensors above it down.
    pub fn free(&mut self, id: u8) -> Result<(), StoreError> {
        let used = self.table.used;
        let gap = self.table.free(id)?;
        self.close_gap(used, Some(gap));
        Ok(())
    }

    /// Frees every tensor.
    pub fn clear(&mut self) {
        self.table = Table::new(self.words.len());
    }

    /// Creates tensor `id` of `rows x cols` words on top of the store (contents unspecified
    /// until written), replacing an existing tensor `id`. Refused with [`StoreError::Full`]
    /// or [`StoreError::TooMany`] (nothing freed) when it does not fit even after the old
    /// `id` is gone.
    pub fn create(&mut self, id: u8, rows: u16, cols: u16) -> Result<(), StoreError> {
        let used = self.table.used;
        let gap = self.table.create(id, rows, cols)?;
        self.close_gap(used, gap);
        Ok(())
    }

    /// Runs a `WRITE_TENSOR` chunk: `bytes` (little-endian words) into tensor `id` from word
    /// `offset`, creating it at `rows x cols` first when `offset` is 0.
    pub fn write(
        &mut self,
        id: u8,
        rows: u16,
        cols: u16,
        offset: usize,
        bytes: &[u8],
    ) -> Result<(), StoreError> {
        let count = bytes.len() / 2;
        let used = self.table.used;
        let mut table = self.table;
        let gap = table.write(id, rows, cols, offset, count)?;
        self.table = table;
        self.close_gap(used, gap);
        let e = self.table.entry(id)?;
        let to = &mut self.words[e.offset + offset..e.offset + offset + count];
        for (w, b) in to.iter_mut().zip(bytes.chunks_exact(2)) {
            *w = i16::from_le_bytes([b[0], b[1]]);
        }
        Ok(())
    }

    /// Runs a `FREE_TENSORS` list (`every`: the id meaning all); all or nothing.
    pub fn free_list(&mut self, ids: &[u8], every: u8) -> Result<(), StoreError> {
        self.table().free_all_of(ids, every)?;
        for &id in ids {
            if id == every {
                self.clear();
            } else {
                self.free(id)?;
            }
        }
        Ok(())
    }

    /// Creates tensor `out` (`rows x cols`, on top, replacing an existing `out`) and returns
    /// the store below it, to read a product's operands from, and its words to write.
    pub fn output(
        &mut self,
        out: u8,
        rows: u16,
        cols: u16,
    ) -> Result<(StoreView<'_>, &mut [i16]), StoreError> {
        self.create(out, rows, cols)?;
        let e = self.table.entry(out)?;
        let (below, above) = self.words.split_at_mut(e.offset);
        Ok((
            StoreView {
                words: below,
                entries: &self.table.entries,
                out,
            },
            &mut above[..e.len],
        ))
    }
}

/// The tensors below a product's output ([`TensorStore::output`]).
pub struct StoreView<'v> {
    words: &'v [i16],
    entries: &'v [Option<Entry>; MAX_TENSORS],
    out: u8,
}

impl StoreView<'_> {
    /// The tensor `id` (not the output).
    pub fn get(&self, id: u8) -> Result<Tensor<'_>, StoreError> {
        let e = self
            .entries
            .iter()
            .flatten()
            .find(|e| e.id == id && id != self.out)
            .ok_or(StoreError::UnknownId(id))?;
        Ok(Tensor {
            rows: e.rows.into(),
            cols: e.cols.into(),
            words: &self.words[e.offset..e.offset + e.len],
        })
    }
}

#[cfg(test)]
mod tests;
