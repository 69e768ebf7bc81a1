//! From the firmware's ELF to the flat RAM image: loadable segments placed at their load
//! addresses, section sizes for the [`Budget`], and the AMO check.

use crate::Budget;
use object::elf::{EM_RISCV, PT_LOAD, SHF_ALLOC, SHF_EXECINSTR, SHF_WRITE, SHT_NOBITS};
use object::read::elf::{ElfFile32, FileHeader, ProgramHeader, SectionHeader};
use object::Endianness;
use systole_core::soc::RAM_BASE;
use systole_firmware::soc::stack_reserve_bytes;

/// Why an ELF is not a loadable SoC image.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ElfError {
    /// Not a readable 32-bit ELF.
    #[error("the firmware ELF cannot be read")]
    Parse(#[source] object::Error),
    /// A segment's bytes lie outside the file.
    #[error("the firmware ELF is truncated: a loadable segment lies beyond its end")]
    Truncated,
    /// Built for another machine.
    #[error("the firmware ELF is for machine {0}, not RISC-V")]
    NotRiscv(u16),
    /// A loadable part lies outside the SoC's RAM.
    #[error(
        "{what} at {addr:#x}..{end:#x} lies outside the SoC's RAM ({RAM_BASE:#x}..{ram_end:#x})"
    )]
    OutsideRam {
        /// Segment or section.
        what: String,
        /// One past the RAM's last byte.
        ram_end: u64,
        /// First address.
        addr: u64,
        /// One past the last.
        end: u64,
    },
    /// An atomic read-modify-write instruction: the SoC's VexRiscv has LR/SC only and traps.
    #[error(
        "instruction {word:#010x} at {addr:#x} is an AMO, which the SoC's CPU does not have \
         (no read-modify-write atomics such as fetch_add in the firmware)"
    )]
    Amo {
        /// Address of the instruction.
        addr: u64,
        /// The instruction.
        word: u32,
    },
}

/// The flat image and its budget.
#[derive(Clone, Debug)]
pub struct Flat {
    /// RAM contents from `RAM_BASE` up to the end of the last loadable byte.
    pub bytes: Vec<u8>,
    /// Where the RAM goes.
    pub budget: Budget,
}

fn outside(what: &str, ram_end: u64, addr: u64, size: u64) -> ElfError {
    ElfError::OutsideRam {
        what: what.to_owned(),
        ram_end,
        addr,
        end: addr + size,
    }
}

/// Lays out the loadable segments of `elf` by load address, sizes its sections and checks
/// its instructions, for a SoC of `ram_bytes` of RAM (`BASE_RAM_BYTES`, or
/// `TRAINING_RAM_BYTES` for the training image).
pub fn flatten(elf: &[u8], ram_bytes: u32) -> Result<Flat, ElfError> {
    let file = ElfFile32::<Endianness>::parse(elf).map_err(ElfError::Parse)?;
    let e = file.endian();
    let machine = file.elf_header().e_machine(e).0;
    if machine != EM_RISCV.0 {
        return Err(ElfError::NotRiscv(machine));
    }
    let ram = u64::from(RAM_BASE)..u64::from(RAM_BASE) + u64::from(ram_bytes);
    let mut bytes = Vec::new();
    for ph in file.elf_program_headers() {
        let size = u64::from(ph.p_filesz(e));
        if ph.p_type(e) != PT_LOAD || size == 0 {
            continue;
        }
        let addr = u64::from(ph.p_paddr(e));
        if addr < ram.start || addr + size > ram.end {
            return Err(outside("loadable segment", ram.end, addr, size));
        }
        let data = ph.data(e, elf).map_err(|()| ElfError::Truncated)?;
        let at = (addr - ram.start) as usize;
        if bytes.len() < at + data.len() {
            bytes.resize(at + data.len(), 0);
        }
        bytes[at..at + data.len()].copy_from_slice(data);
    }
    let mut budget = Budget {
        stack_reserve: stack_reserve_bytes(ram_bytes),
        tensor_store: systole_core::soc::tensor_store_bytes(ram_bytes),
        ram: ram_bytes,
        image: bytes.len() as u32,
        ..Budget::default()
    };
    let sections = file.elf_section_table();
    let mut static_end = ram.start;
    for sh in sections.iter() {
        let flags = sh.sh_flags(e).0;
        let size = sh.sh_size(e);
        if flags & SHF_ALLOC.0 == 0 || size == 0 {
            continue;
        }
        let name = sections.section_name(e, sh).unwrap_or(b"?");
        // riscv-rt's .stack and .heap sections span the free RAM: the stack is budgeted as
        // the reserve instead.
        if name == b".stack" || name == b".heap" {
            continue;
        }
        let addr = u64::from(sh.sh_addr(e));
        let size = u64::from(size);
        if addr < ram.start || addr + size > ram.end {
            return Err(outside(&String::from_utf8_lossy(name), ram.end, addr, size));
        }
        static_end = static_end.max(addr + size);
        let slot = if flags & SHF_EXECINSTR.0 != 0 {
            let data = sh.data(e, elf).map_err(ElfError::Parse)?;
            check_no_amo(data, addr)?;
            &mut budget.text
        } else if flags & SHF_WRITE.0 == 0 {
            &mut budget.rodata
        } else if sh.sh_type(e) == SHT_NOBITS {
            &mut budget.bss
        } else {
            &mut budget.data
        };
        *slot += size as u32;
    }
    budget.statics = (static_end - ram.start) as u32;
    Ok(Flat { bytes, budget })
}

/// Walks RISC-V code (16-bit compressed and 32-bit instructions) from `addr` and refuses
/// AMO instructions (major opcode `0x2F` other than LR and SC).
pub fn check_no_amo(code: &[u8], addr: u64) -> Result<(), ElfError> {
    const AMO: u32 = 0x2F;
    const LR: u32 = 0b00010;
    const SC: u32 = 0b00011;
    let mut i = 0;
    while i + 2 <= code.len() {
        let lo = u16::from_le_bytes([code[i], code[i + 1]]);
        if lo & 3 != 3 {
            i += 2;
            continue;
        }
        let Some(hi) = code.get(i + 2..i + 4) else {
            break;
        };
        let word = u32::from(lo) | u32::from(u16::from_le_bytes([hi[0], hi[1]])) << 16;
        let funct5 = word >> 27;
        if word & 0x7F == AMO && funct5 != LR && funct5 != SC {
            return Err(ElfError::Amo {
                addr: addr + i as u64,
                word,
            });
        }
        i += 4;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(words: &[u32], lead_compressed: bool) -> Vec<u8> {
        let mut v = Vec::new();
        if lead_compressed {
            v.extend_from_slice(&0x0001u16.to_le_bytes()); // c.nop
        }
        for w in words {
            v.extend_from_slice(&w.to_le_bytes());
        }
        v
    }

    // addi a0, a0, 1; lr.w a0, (a2); sc.w a0, a1, (a2); amoadd.w a0, a1, (a2)
    const ADDI: u32 = 0x0015_0513;
    const LR_W: u32 = 0x1006_252F;
    const SC_W: u32 = 0x18B6_252F;
    const AMOADD_W: u32 = 0x00B6_252F;

    #[test]
    fn lr_and_sc_pass_an_amo_is_found_at_its_address() {
        assert!(check_no_amo(&code(&[ADDI, LR_W, SC_W], true), 0x100).is_ok());
        match check_no_amo(&code(&[ADDI, LR_W, AMOADD_W], true), 0x100) {
            Err(ElfError::Amo { addr, word }) => {
                assert_eq!((addr, word), (0x100 + 2 + 8, AMOADD_W));
            }
            other => panic!("expected the AMO, got {other:?}"),
        }
    }

    #[test]
    fn not_an_elf_is_refused() {
        assert!(matches!(
            flatten(b"\x7fELF nonsense", systole_core::soc::BASE_RAM_BYTES),
            Err(ElfError::Parse(_))
        ));
    }
}
