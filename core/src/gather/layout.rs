//! The bit layout of a gather engine's configuration words: where each quantity of a
//! [`super::Walk`] and [`super::GatherConfig`] sits. [`super::GatherConfig::words`] and
//! [`super::GatherConfig::from_words`] encode and decode with these fields, the hand-written
//! Verilog of the gather engine slices its configuration registers with them, and the guide
//! (docs/HARDWARE.md) tabulates them from [`engine_words`].
//!
//! One engine holds [`super::WORDS`] = 35 words: the lane walker's 17 (words 0..=16), the K
//! walker's 17 (words 17..=33, the same layout), then [`LIMITS`] (word 34).

use crate::field::Field;

/// Word 0: level counts 0 and 1.
pub const COUNTS01: usize = 0;
/// Level-0 count.
pub const COUNT0: Field = Field::new("count0", 0, 16, "positions of level 0 (>= 1)");
/// Level-1 count.
pub const COUNT1: Field = Field::new("count1", 16, 16, "positions of level 1 (>= 1)");
/// Word 1: level count 2 (and, in the lane walker's word only, the modulus).
pub const COUNT2_MOD: usize = 1;
/// Level-2 count.
pub const COUNT2: Field = Field::new("count2", 0, 16, "positions of level 2 (>= 1)");
/// Remainder modulus of both walkers (read from the lane walker's word 1 only).
pub const MODULUS: Field = Field::new(
    "modulus",
    16,
    4,
    "remainder modulus of BOTH walkers, 1..=15 (lane walker's word only; ignored in the K walker's)",
);

/// The word of the coordinate step of `level` (0..=3).
pub const fn step_q_word(level: usize) -> usize {
    2 + 2 * level
}

/// The word of the address and remainder steps of `level` (0..=3).
pub const fn step_a_word(level: usize) -> usize {
    3 + 2 * level
}

/// Coordinate step y.
pub const DQ_Y: Field = Field::new("dq_y", 0, 16, "added to q_y (two's complement, wraps)");
/// Coordinate step x.
pub const DQ_X: Field = Field::new("dq_x", 16, 16, "added to q_x");
/// Address step.
pub const DA: Field = Field::new("da", 0, 24, "added to the address (wraps at 2^24)");
/// Remainder step y.
pub const DR_Y: Field = Field::new("dr_y", 24, 4, "added to r_y (below the modulus)");
/// Remainder step x.
pub const DR_X: Field = Field::new("dr_x", 28, 4, "added to r_x");

/// Word 10: carries into the coordinates.
pub const CARRY_Q: usize = 10;
/// Carry into q_y.
pub const CQ_Y: Field = Field::new("cq_y", 0, 16, "added to q_y when r_y wraps");
/// Carry into q_x.
pub const CQ_X: Field = Field::new("cq_x", 16, 16, "added to q_x when r_x wraps");
/// Word 11: carry into the address when r_y wraps.
pub const CARRY_A_Y: usize = 11;
/// Word 12: carry into the address when r_x wraps.
pub const CARRY_A_X: usize = 12;
/// Address carry when r_y wraps (word 11).
pub const CA_Y: Field = Field::new("ca_y", 0, 24, "added to the address when r_y wraps");
/// Address carry when r_x wraps (word 12).
pub const CA_X: Field = Field::new("ca_x", 0, 24, "added to the address when r_x wraps");

/// Word 13: start counters of levels 0 and 1.
pub const START_IDX01: usize = 13;
/// Start counter 0.
pub const START_IDX0: Field = Field::new("start_idx0", 0, 16, "level-0 counter after a load");
/// Start counter 1.
pub const START_IDX1: Field = Field::new("start_idx1", 16, 16, "level-1 counter after a load");
/// Word 14: start counter 2 and start remainders.
pub const START_IDX2_R: usize = 14;
/// Start counter 2.
pub const START_IDX2: Field = Field::new("start_idx2", 0, 16, "level-2 counter after a load");
/// Start remainder y.
pub const START_RY: Field = Field::new("start_ry", 16, 4, "r_y after a load");
/// Start remainder x.
pub const START_RX: Field = Field::new("start_rx", 24, 4, "r_x after a load");
/// Word 15: start coordinates.
pub const START_Q: usize = 15;
/// Start q_y.
pub const START_QY: Field = Field::new("start_qy", 0, 16, "q_y after a load");
/// Start q_x.
pub const START_QX: Field = Field::new("start_qx", 16, 16, "q_x after a load");
/// Word 16: start address.
pub const START_ADDR: usize = 16;
/// Start address.
pub const ADDR: Field = Field::new("start_addr", 0, 24, "address after a load");

/// Engine word 34: the coordinate limits.
pub const LIMITS: usize = 2 * super::WALK_WORDS;
/// Limit of `q_y`.
pub const LIMIT_Y: Field = Field::new(
    "limit_y",
    0,
    16,
    "a word is read only where lane.q_y + k.q_y < limit_y (unsigned 16-bit)",
);
/// Limit of `q_x`.
pub const LIMIT_X: Field = Field::new("limit_x", 16, 16, "the same for x");

/// The fields of walker word `i` (0..17); `lane` adds the modulus to word 1.
pub const fn walk_word_fields(i: usize, lane: bool) -> &'static [Field] {
    match i {
        COUNTS01 => &[COUNT0, COUNT1],
        COUNT2_MOD if lane => &[COUNT2, MODULUS],
        COUNT2_MOD => &[COUNT2],
        2 | 4 | 6 | 8 => &[DQ_Y, DQ_X],
        3 | 5 | 7 | 9 => &[DA, DR_Y, DR_X],
        CARRY_Q => &[CQ_Y, CQ_X],
        CARRY_A_Y => &[CA_Y],
        CARRY_A_X => &[CA_X],
        START_IDX01 => &[START_IDX0, START_IDX1],
        START_IDX2_R => &[START_IDX2, START_RY, START_RX],
        START_Q => &[START_QY, START_QX],
        START_ADDR => &[ADDR],
        _ => &[],
    }
}

/// One configuration word of an engine, for the guide's table.
#[derive(Clone, Copy, Debug)]
pub struct EngineWord {
    /// Index in shift-in order (0 is written first).
    pub index: usize,
    /// `lane` or `k`: which walker (or `limits`).
    pub walker: &'static str,
    /// Level the word's steps belong to (step words 2..=9 only).
    pub level: Option<usize>,
    /// Its fields.
    pub fields: &'static [Field],
}

/// All [`super::WORDS`] words of an engine, in shift-in order.
pub fn engine_words() -> impl Iterator<Item = EngineWord> {
    (0..super::WORDS).map(|index| {
        let (walker, i) = match index {
            LIMITS => ("limits", 0),
            i if i < super::WALK_WORDS => ("lane", i),
            i => ("k", i - super::WALK_WORDS),
        };
        let fields = if walker == "limits" {
            &[LIMIT_Y, LIMIT_X][..]
        } else {
            walk_word_fields(i, walker == "lane")
        };
        let level = (2..=9).contains(&i).then(|| (i - 2) / 2);
        let level = if walker == "limits" { None } else { level };
        EngineWord {
            index,
            walker,
            level,
            fields,
        }
    })
}

impl super::GatherConfig {
    /// Decodes [`Self::words`] (what the engine's configuration registers hold).
    pub fn from_words(w: &[u32; super::WORDS]) -> Self {
        let walk = |w: &[u32]| {
            let h = |f: Field, i: usize| f.get(w[i]) as u16;
            let mut k = super::Walk {
                counts: [
                    h(COUNT0, COUNTS01),
                    h(COUNT1, COUNTS01),
                    h(COUNT2, COUNT2_MOD),
                ],
                cq: [h(CQ_Y, CARRY_Q), h(CQ_X, CARRY_Q)],
                ca: [CA_Y.get(w[CARRY_A_Y]), CA_X.get(w[CARRY_A_X])],
                ..super::Walk::default()
            };
            for l in 0..4 {
                k.dq[l] = [h(DQ_Y, step_q_word(l)), h(DQ_X, step_q_word(l))];
                k.da[l] = DA.get(w[step_a_word(l)]);
                k.dr[l] = [
                    DR_Y.get(w[step_a_word(l)]) as u8,
                    DR_X.get(w[step_a_word(l)]) as u8,
                ];
            }
            k.start = super::WalkState {
                idx: [
                    h(START_IDX0, START_IDX01),
                    h(START_IDX1, START_IDX01),
                    h(START_IDX2, START_IDX2_R),
                ],
                q: [h(START_QY, START_Q), h(START_QX, START_Q)],
                r: [
                    START_RY.get(w[START_IDX2_R]) as u8,
                    START_RX.get(w[START_IDX2_R]) as u8,
                ],
                addr: ADDR.get(w[START_ADDR]),
            };
            k
        };
        super::GatherConfig {
            lanes: walk(&w[..super::WALK_WORDS]),
            k: walk(&w[super::WALK_WORDS..2 * super::WALK_WORDS]),
            modulus: MODULUS.get(w[COUNT2_MOD]) as u8,
            limit: [LIMIT_Y.get(w[LIMITS]) as u16, LIMIT_X.get(w[LIMITS]) as u16],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::field::disjoint;

    #[test]
    fn every_word_is_laid_out_without_overlap() {
        let mut words = [None; super::super::WORDS];
        for w in engine_words() {
            assert!(!w.fields.is_empty(), "word {} has no fields", w.index);
            assert!(disjoint(w.fields), "word {} overlaps", w.index);
            words[w.index] = Some(w);
        }
        let words = words.map(Option::unwrap);
        assert_eq!(words[LIMITS].walker, "limits");
        assert_eq!(words[17 + COUNT2_MOD].fields.len(), 1);
        assert_eq!(words[COUNT2_MOD].fields.len(), 2);
        assert_eq!(words[step_a_word(3)].level, Some(3));
    }
}
