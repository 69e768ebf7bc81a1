//! What neighbouring stages send each other, and the collective a stage needs
//! ([`StageLinks`]; MPI's in [`crate::dist`], feature `mpi`).

use systole_golden::tensor::QMatrix;
use systole_golden::NumericError;

/// The activations (forward) or their gradients (backward) of one unit that cross a cut, and
/// the op index at which the receiving stage goes on (the seeds the unit drew before it).
/// Forward, every tensor that crosses the cut (`Graph::crossing`: the stage's input and the
/// earlier ends of residual connections, in the graph's order); backward, the gradients of
/// those that need one, in the same order.
#[derive(Clone, Debug, PartialEq)]
pub struct Message {
    /// The unit (micro-batch of a shard) it belongs to.
    pub unit: u32,
    /// Seeds the unit has drawn in this step so far.
    pub op_index: u32,
    /// The tensors.
    pub tensors: Vec<QMatrix>,
}

/// Header words of a message on the wire before its tensors': unit, op index, tensor count.
pub const HEADER_WORDS: usize = 3;
/// Header words of each tensor: rows, columns, fractional bits.
pub const TENSOR_WORDS: usize = 3;
/// Most tensors one message may carry (a bound on a received header).
const MAX_TENSORS: i64 = 1 << 16;

impl Message {
    /// The header as sent (`i64` words): [`HEADER_WORDS`], then [`TENSOR_WORDS`] per tensor.
    pub fn header(&self) -> Vec<i64> {
        let mut h = vec![
            self.unit as i64,
            self.op_index as i64,
            self.tensors.len() as i64,
        ];
        for t in &self.tensors {
            h.extend([t.rows as i64, t.cols as i64, t.frac as i64]);
        }
        h
    }

    /// The tensors' 16-bit words, one after the other, as sent.
    pub fn words(&self) -> Vec<i16> {
        self.tensors
            .iter()
            .flat_map(|t| t.data.iter().copied())
            .collect()
    }

    /// A message from its header and words, or why they do not make one.
    pub fn from_parts(h: &[i64], data: Vec<i16>) -> Result<Self, MessageError> {
        let bad = |m: String| MessageError::Header(m);
        let small = |v: i64| u32::try_from(v).map_err(|_| bad(format!("word {v} out of range")));
        let size = |v: i64, what: &str| usize::try_from(v).map_err(|_| bad(format!("{v} {what}")));
        let [unit, op_index, count] =
            <[i64; HEADER_WORDS]>::try_from(h.get(..HEADER_WORDS).unwrap_or(h))
                .map_err(|_| bad(format!("{} words, fewer than {HEADER_WORDS}", h.len())))?;
        if !(0..=MAX_TENSORS).contains(&count) {
            return Err(bad(format!("{count} tensors")));
        }
        let shapes = &h[HEADER_WORDS..];
        if shapes.len() != count as usize * TENSOR_WORDS {
            return Err(bad(format!(
                "{} words for {count} tensor(s), not {}",
                h.len(),
                HEADER_WORDS + count as usize * TENSOR_WORDS
            )));
        }
        let (mut tensors, mut at) = (Vec::new(), 0usize);
        for s in shapes.chunks(TENSOR_WORDS) {
            let (rows, cols) = (size(s[0], "rows")?, size(s[1], "columns")?);
            let len = rows.checked_mul(cols).filter(|&l| l <= data.len() - at);
            let len =
                len.ok_or_else(|| bad(format!("a {rows}x{cols} tensor in {} words", data.len())))?;
            let words = data[at..at + len].to_vec();
            at += len;
            tensors.push(
                QMatrix::from_vec(rows, cols, small(s[2])?, words).map_err(MessageError::Tensor)?,
            );
        }
        if at != data.len() {
            return Err(bad(format!(
                "{} words left over after the tensors",
                data.len() - at
            )));
        }
        Ok(Message {
            unit: small(unit)?,
            op_index: small(op_index)?,
            tensors,
        })
    }

    /// Bytes on the wire: the header's words and the tensors' 16-bit words.
    pub fn bytes(&self) -> u64 {
        let words: usize = self.tensors.iter().map(|t| t.data.len()).sum();
        ((HEADER_WORDS + TENSOR_WORDS * self.tensors.len()) * 8 + words * 2) as u64
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
        let t = |r, c, f, d: Vec<i16>| QMatrix::from_vec(r, c, f, d).unwrap();
        let m = Message {
            unit: 3,
            op_index: 9,
            tensors: vec![t(2, 2, 5, vec![1, -2, 3, -4]), t(1, 3, 7, vec![5, 6, -7])],
        };
        let back = Message::from_parts(&m.header(), m.words()).unwrap();
        assert_eq!(back, m);
        assert_eq!(m.bytes(), (3 + 6) * 8 + 7 * 2);
        let short = Message::from_parts(&m.header()[..4], m.words()).unwrap_err();
        assert!(matches!(short, MessageError::Header(_)), "{short:?}");
        for n in 0..m.words().len() {
            let e = Message::from_parts(&m.header(), m.words()[..n].to_vec()).unwrap_err();
            assert!(matches!(e, MessageError::Header(_)), "{n} words: {e:?}");
        }
        let mut long = m.words();
        long.push(0);
        let e = Message::from_parts(&m.header(), long)
            .unwrap_err()
            .to_string();
        assert!(e.contains("1 words left over"), "{e}");
        // A bad fractional-bit count: the tensor's own error stays the source.
        let mut h = m.header();
        h[5] = 99;
        let e = Message::from_parts(&h, m.words()).unwrap_err();
        let source = std::error::Error::source(&e).expect("the tensor's error as source");
        assert!(source.downcast_ref::<NumericError>().is_some(), "{e:?}");
    }
}
