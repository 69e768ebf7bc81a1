//! [`BatchIter`]: the entries of a `BATCH` payload.

use super::{cmd, u16_at, ErrorCode, Request, BATCH_ENTRY_HEADER};

/// Iterates over the entries of a `BATCH` payload; an error carries the entry index.
pub struct BatchIter<'a> {
    rest: &'a [u8],
    index: u16,
    failed: bool,
}

impl<'a> BatchIter<'a> {
    /// Iterator over `payload`'s entries.
    pub fn new(payload: &'a [u8]) -> Self {
        BatchIter {
            rest: payload,
            index: 0,
            failed: false,
        }
    }
}

impl<'a> Iterator for BatchIter<'a> {
    type Item = Result<Request<'a>, (ErrorCode, u16)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() || self.failed {
            return None;
        }
        let index = self.index;
        self.index = self.index.wrapping_add(1);
        let fail = |s: &mut Self, code| {
            s.failed = true;
            Some(Err((code, index)))
        };
        if self.rest.len() < BATCH_ENTRY_HEADER {
            return fail(self, ErrorCode::Malformed);
        }
        let c = self.rest[0];
        let len = usize::from(u16_at(self.rest, 1));
        if self.rest.len() < BATCH_ENTRY_HEADER + len {
            return fail(self, ErrorCode::Malformed);
        }
        let body = &self.rest[BATCH_ENTRY_HEADER..BATCH_ENTRY_HEADER + len];
        self.rest = &self.rest[BATCH_ENTRY_HEADER + len..];
        if !matches!(
            c,
            cmd::WRITE_REG
                | cmd::WRITE_ROWS
                | cmd::IDLE
                | cmd::WRITE_FM
                | cmd::WRITE_TENSOR
                | cmd::FREE_TENSORS
        ) {
            let code = if matches!(c, cmd::PING..=cmd::RUN_STEPS) {
                ErrorCode::NotBatchable
            } else {
                ErrorCode::UnknownCommand
            };
            return fail(self, code);
        }
        match Request::parse(c, body) {
            Ok(r) => Some(Ok(r)),
            Err(code) => fail(self, code),
        }
    }
}
