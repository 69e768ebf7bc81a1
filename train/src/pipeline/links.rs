//! What neighbouring stages send each other, and the collective a stage needs
//! ([`StageLinks`]; MPI's in [`crate::dist`], feature `mpi`).

use systole_golden::tensor::QMatrix;
use systole_golden::NumericError;

/// An activation (forward) or the gradient of one (backward) of one unit, and the op index
/// at which the receiving stage goes on (the seeds the unit drew before it).
#[derive(Clone, Debug, PartialEq)]
pub struct Message {
    /// The unit (micro-batch of a shard) it belongs to.
    pub unit: u32,
    /// Seeds the unit has drawn in this step so far.
    pub op_index: u32,
    /// The tensor.
    pub tensor: QMatrix,
}

/// Header words of a message on the wire: unit, op index, rows, columns, fractional bits.
pub const HEADER_WORDS: usize = 5;

impl Message {
    /// The header as sent (`i64` words).
    pub fn header(&self) -> [i64; HEADER_WORDS] {
        let t = &self.tensor;
        [
            self.unit as i64,
            self.op_index as i64,
            t.rows as i64,
            t.cols as i64,
            t.frac as i64,
        ]
    }

    /// A message from its header and words, or why they do not make one.
    pub fn from_parts(h: &[i64], data: Vec<i16>) -> Result<Self, MessageError> {
        let bad = |m: String| MessageError::Header(m);
        let [unit, op_index, rows, cols, frac] = <[i64; HEADER_WORDS]>::try_from(h)
            .map_err(|_| bad(format!("{} words, not {HEADER_WORDS}", h.len())))?;
        let small = |v: i64| u32::try_from(v).map_err(|_| bad(format!("word {v} out of range")));
        let size = |v: i64, what: &str| usize::try_from(v).map_err(|_| bad(format!("{v} {what}")));
        let tensor = QMatrix::from_vec(
            size(rows, "rows")?,
            size(cols, "columns")?,
            small(frac)?,
            data,
        )
        .map_err(MessageError::Tensor)?;
        Ok(Message {
            unit: small(unit)?,
            op_index: small(op_index)?,
            tensor,
        })
    }

    /// Bytes on the wire: the header's words and the tensor's 16-bit words.
    pub fn bytes(&self) -> u64 {
        (HEADER_WORDS * 8 + self.tensor.data.len() * 2) as u64
    }
}

/// Why received words do not make a [`Message`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MessageError {
    /// The header is not one [`Message::header`] writes.
    #[error("a bad message header: {0}")]
    Header(String),
    /// The header's shape and the words do not make a tensor.
    #[error("the message's tensor")]
    Tensor(#[source] NumericError),
}

/// Point-to-point messages between ranks and the all-reduce among a stage's replicas.
pub trait StageLinks {
    /// Sends `msg` to world rank `to` (blocking until it may be reused).
    fn send(&self, to: usize, msg: &Message);
    /// Receives the next message from world rank `from`.
    fn recv(&self, from: usize) -> Result<Message, MessageError>;
    /// Sums `v` over the ranks of this rank's stage (its replicas), as
    /// [`crate::dist::Collective::all_reduce_sum_i64`] does over all ranks.
    fn replicas_all_reduce(&self, v: &mut [i64]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn received_words_that_make_no_message_say_why() {
        let m = Message {
            unit: 3,
            op_index: 9,
            tensor: QMatrix::from_vec(2, 2, 5, vec![1, -2, 3, -4]).unwrap(),
        };
        let back = Message::from_parts(&m.header(), m.tensor.data.clone()).unwrap();
        assert_eq!(back, m);
        let short = Message::from_parts(&m.header()[..4], vec![1, -2, 3, -4]).unwrap_err();
        assert!(matches!(short, MessageError::Header(_)), "{short:?}");
        // Three words for a 2x2 tensor: the tensor's own error stays the source.
        let e = Message::from_parts(&m.header(), vec![1, -2, 3]).unwrap_err();
        let source = std::error::Error::source(&e).expect("the tensor's error as source");
        assert!(source.downcast_ref::<NumericError>().is_some(), "{e:?}");
    }
}
