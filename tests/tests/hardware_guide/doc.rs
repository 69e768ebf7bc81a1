//! The facts the testbench uses, read out of docs/HARDWARE.md's tables (not from `systole_core`):
//! register addresses, bit fields, gather configuration word layout and contract constants.

use std::collections::HashMap;

/// A bit field as the guide states it.
#[derive(Clone, Copy, Debug)]
pub struct Bits {
    pub lsb: u32,
    pub width: u32,
}

impl Bits {
    /// `value` placed in the field (the guide: bits not listed are ignored).
    pub fn put(self, value: u32) -> u32 {
        let mask = if self.width == 32 {
            u32::MAX
        } else {
            (1 << self.width) - 1
        };
        (value & mask) << self.lsb
    }

    pub fn get(self, word: u32) -> u32 {
        let mask = if self.width == 32 {
            u32::MAX
        } else {
            (1 << self.width) - 1
        };
        (word >> self.lsb) & mask
    }

    /// Parses `[msb:lsb]` or `[bit]`.
    fn parse(s: &str) -> Bits {
        let inner = s.trim().trim_start_matches('[').trim_end_matches(']');
        match inner.split_once(':') {
            Some((hi, lo)) => {
                let (hi, lo): (u32, u32) = (hi.parse().unwrap(), lo.parse().unwrap());
                Bits {
                    lsb: lo,
                    width: hi - lo + 1,
                }
            }
            None => Bits {
                lsb: inner.parse().unwrap(),
                width: 1,
            },
        }
    }
}

/// The guide's tables.
pub struct Guide {
    regs: HashMap<String, u8>,
    fields: HashMap<(String, String), Bits>,
    /// `(walker, field, level)` -> (word index, bits).
    words: HashMap<(String, String, Option<usize>), (usize, Bits)>,
    consts: HashMap<String, u32>,
}

/// Rows of the table whose header line starts with `header`, cells trimmed, backticks removed.
fn rows(doc: &str, header: &str) -> Vec<Vec<String>> {
    let mut lines = doc.lines().skip_while(|l| !l.starts_with(header));
    assert!(lines.next().is_some(), "the guide has no table `{header}`");
    lines
        .skip(1)
        .take_while(|l| l.starts_with('|'))
        .map(|l| {
            l.trim_matches('|')
                .split('|')
                .map(|c| c.trim().replace('`', ""))
                .collect()
        })
        .collect()
}

fn hex(s: &str) -> u32 {
    u32::from_str_radix(s.trim_start_matches("0x"), 16).unwrap()
}

impl Guide {
    pub fn load() -> Guide {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/HARDWARE.md");
        let doc = std::fs::read_to_string(&path).expect("docs/HARDWARE.md");
        let regs = rows(&doc, "| addr | name |")
            .into_iter()
            .map(|r| (r[1].clone(), hex(&r[0]) as u8))
            .collect();
        let mut fields = HashMap::new();
        for r in rows(&doc, "| register | field | bits |") {
            for reg in r[0].split(", ") {
                fields.insert((reg.to_string(), r[1].clone()), Bits::parse(&r[2]));
            }
        }
        let mut words = HashMap::new();
        for r in rows(&doc, "| word | walker |") {
            let index: usize = r[0].parse().unwrap();
            let level = r[3].parse().ok();
            for f in r[4].split(", ") {
                let (name, bits) = f.split_once(' ').unwrap();
                let key = (r[1].clone(), name.to_string(), level);
                words.insert(key, (index, Bits::parse(bits)));
            }
        }
        let consts = rows(&doc, "| constant | value |")
            .into_iter()
            .map(|r| (r[0].clone(), hex(&r[1])))
            .collect();
        Guide {
            regs,
            fields,
            words,
            consts,
        }
    }

    pub fn reg(&self, name: &str) -> u8 {
        *self
            .regs
            .get(name)
            .unwrap_or_else(|| panic!("the guide has no register {name}"))
    }

    pub fn field(&self, reg: &str, name: &str) -> Bits {
        *self
            .fields
            .get(&(reg.to_string(), name.to_string()))
            .unwrap_or_else(|| panic!("the guide has no field {reg}.{name}"))
    }

    /// Word index and bits of a gather configuration field (`level` for step words).
    pub fn word(&self, walker: &str, name: &str, level: Option<usize>) -> (usize, Bits) {
        *self
            .words
            .get(&(walker.to_string(), name.to_string(), level))
            .unwrap_or_else(|| panic!("the guide has no gather field {walker}.{name} ({level:?})"))
    }

    pub fn constant(&self, name: &str) -> u32 {
        *self
            .consts
            .get(name)
            .unwrap_or_else(|| panic!("the guide has no constant {name}"))
    }
}
