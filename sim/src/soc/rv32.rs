//! A few RV32I instructions encoded for the SoC's tests, with labels resolved on `finish`:
//! enough to hand-write small test programs without a cross toolchain. Each method is one
//! instruction of the same name (`j`, `mv`, `li`, `beqz`, `ret` are the usual pseudo-ops).

use std::collections::HashMap;

/// Register numbers by ABI name.
pub mod reg {
    pub const ZERO: u32 = 0;
    pub const RA: u32 = 1;
    pub const T0: u32 = 5;
    pub const T1: u32 = 6;
    pub const T2: u32 = 7;
    pub const S0: u32 = 8;
    pub const S1: u32 = 9;
    pub const A0: u32 = 10;
    pub const S2: u32 = 18;
    pub const S3: u32 = 19;
    pub const S4: u32 = 20;
    pub const S5: u32 = 21;
}
use reg::*;

/// Branch or jump whose offset is filled in by [`Asm::finish`].
enum Fixup {
    Branch(u32),
    Jal,
}

/// A program being written: instruction words and labels.
#[derive(Default)]
pub struct Asm {
    words: Vec<u32>,
    labels: HashMap<&'static str, usize>,
    fixups: Vec<(usize, &'static str, Fixup)>,
}

fn i_type(imm: i32, rs1: u32, f3: u32, rd: u32, op: u32) -> u32 {
    assert!((-2048..2048).contains(&imm), "immediate {imm} out of range");
    ((imm as u32 & 0xfff) << 20) | (rs1 << 15) | (f3 << 12) | (rd << 7) | op
}

impl Asm {
    /// Marks the next instruction's address.
    pub fn label(&mut self, name: &'static str) -> &mut Self {
        assert!(
            self.labels.insert(name, self.words.len()).is_none(),
            "{name} twice"
        );
        self
    }
    fn push(&mut self, w: u32) -> &mut Self {
        self.words.push(w);
        self
    }
    pub fn lui(&mut self, rd: u32, upper: u32) -> &mut Self {
        self.push((upper << 12) | (rd << 7) | 0x37)
    }
    pub fn addi(&mut self, rd: u32, rs1: u32, imm: i32) -> &mut Self {
        self.push(i_type(imm, rs1, 0, rd, 0x13))
    }
    pub fn andi(&mut self, rd: u32, rs1: u32, imm: i32) -> &mut Self {
        self.push(i_type(imm, rs1, 7, rd, 0x13))
    }
    pub fn srli(&mut self, rd: u32, rs1: u32, shamt: i32) -> &mut Self {
        self.push(i_type(shamt, rs1, 5, rd, 0x13))
    }
    pub fn sll(&mut self, rd: u32, rs1: u32, rs2: u32) -> &mut Self {
        self.push((rs2 << 20) | (rs1 << 15) | (1 << 12) | (rd << 7) | 0x33)
    }
    pub fn or(&mut self, rd: u32, rs1: u32, rs2: u32) -> &mut Self {
        self.push((rs2 << 20) | (rs1 << 15) | (6 << 12) | (rd << 7) | 0x33)
    }
    pub fn lw(&mut self, rd: u32, off: i32, rs1: u32) -> &mut Self {
        self.push(i_type(off, rs1, 2, rd, 0x03))
    }
    pub fn sw(&mut self, rs2: u32, off: i32, rs1: u32) -> &mut Self {
        assert!((-2048..2048).contains(&off));
        let imm = off as u32 & 0xfff;
        self.push(
            ((imm >> 5) << 25) | (rs2 << 20) | (rs1 << 15) | (2 << 12) | ((imm & 31) << 7) | 0x23,
        )
    }
    fn branch(&mut self, f3: u32, rs1: u32, rs2: u32, to: &'static str) -> &mut Self {
        self.fixups.push((self.words.len(), to, Fixup::Branch(f3)));
        self.push((rs2 << 20) | (rs1 << 15))
    }
    pub fn beq(&mut self, rs1: u32, rs2: u32, to: &'static str) -> &mut Self {
        self.branch(0, rs1, rs2, to)
    }
    pub fn bne(&mut self, rs1: u32, rs2: u32, to: &'static str) -> &mut Self {
        self.branch(1, rs1, rs2, to)
    }
    pub fn beqz(&mut self, rs1: u32, to: &'static str) -> &mut Self {
        self.beq(rs1, ZERO, to)
    }
    pub fn jal(&mut self, rd: u32, to: &'static str) -> &mut Self {
        self.fixups.push((self.words.len(), to, Fixup::Jal));
        self.push(rd << 7)
    }
    pub fn j(&mut self, to: &'static str) -> &mut Self {
        self.jal(ZERO, to)
    }
    pub fn jalr(&mut self, rd: u32, rs1: u32, off: i32) -> &mut Self {
        self.push(i_type(off, rs1, 0, rd, 0x67))
    }
    pub fn ret(&mut self) -> &mut Self {
        self.jalr(ZERO, RA, 0)
    }
    pub fn mv(&mut self, rd: u32, rs1: u32) -> &mut Self {
        self.addi(rd, rs1, 0)
    }
    pub fn li(&mut self, rd: u32, imm: i32) -> &mut Self {
        self.addi(rd, ZERO, imm)
    }
    /// The program as little-endian bytes, every label resolved.
    pub fn finish(&mut self) -> Vec<u8> {
        for (at, to, kind) in std::mem::take(&mut self.fixups) {
            let target = *self
                .labels
                .get(to)
                .unwrap_or_else(|| panic!("no label {to}"));
            let off = (target as i64 - at as i64) * 4;
            let o = off as u32;
            let bit = |n: u32| (o >> n) & 1;
            let bits = |hi: u32, lo: u32| (o >> lo) & ((1 << (hi - lo + 1)) - 1);
            self.words[at] |= match kind {
                Fixup::Branch(f3) => {
                    assert!((-4096..4096).contains(&off));
                    (bit(12) << 31)
                        | (bits(10, 5) << 25)
                        | (f3 << 12)
                        | (bits(4, 1) << 8)
                        | (bit(11) << 7)
                        | 0x63
                }
                Fixup::Jal => {
                    assert!((-(1 << 20)..(1 << 20)).contains(&off));
                    (bit(20) << 31)
                        | (bits(10, 1) << 21)
                        | (bit(11) << 20)
                        | (bits(19, 12) << 12)
                        | 0x6f
                }
            };
        }
        self.words.iter().flat_map(|w| w.to_le_bytes()).collect()
    }
}

#[test]
fn encodings_match_the_isa_manual() {
    // Words as GNU as assembles them.
    let mut a = Asm::default();
    a.label("top")
        .lui(S0, 0x80000) // lui s0, 0x80000
        .lw(T1, 4, S0) // lw t1, 4(s0)
        .sw(A0, 0, S0) // sw a0, 0(s0)
        .andi(T1, T1, 2) // andi t1, t1, 2
        .srli(A0, A0, 8) // srli a0, a0, 8
        .sll(A0, A0, S5) // sll a0, a0, s5
        .or(S4, S4, A0) // or s4, s4, a0
        .addi(T1, T1, -1) // addi t1, t1, -1
        .beqz(T1, "top") // beqz t1, top (-32)
        .j("top") // j top (-36)
        .ret(); // ret
    let words: Vec<u32> = a
        .finish()
        .chunks(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(
        words,
        [
            0x8000_0437,
            0x0044_2303,
            0x00a4_2023,
            0x0023_7313,
            0x0085_5513,
            0x0155_1533,
            0x00aa_6a33,
            0xfff3_0313,
            0xfe03_00e3,
            0xfddf_f06f,
            0x0000_8067,
        ]
    );
}
