//! The SoC on its CPU: hand-assembled programs (`rv32`) run on the Verilated VexRiscv, checked
//! through the UART pins only. Skipped with a note when this build has no SoC model.

#[path = "rv32.rs"]
mod rv32;

use super::*;
use rv32::reg::*;
use rv32::Asm;
use systole_core::bus::{AcceleratorBus, Beat};
use systole_core::regmap;
use systole_core::soc::*;

/// The SoC running `image`, or `None` (and the reason) when this build has no SoC model.
fn soc(image: &[u8]) -> Option<VerilatedSoc> {
    match VerilatedSoc::new(image) {
        Ok(s) => Some(s),
        Err(SimError::SocNotBuilt(why)) => {
            eprintln!("no SoC model in this build: {why}");
            None
        }
        Err(e) => panic!("{e}"),
    }
}

/// `lui rd, hi(addr)` for an MMIO address whose low 12 bits are 0.
fn upper(addr: u32) -> u32 {
    assert_eq!(addr & 0xfff, 0, "{addr:#x}");
    addr >> 12
}

/// `putw`: sends a0 over the UART, low byte first (clobbers t1, t2; s0 = UART_DATA).
fn putw(a: &mut Asm) {
    let status = (UART_STATUS - UART_DATA) as i32;
    a.label("putw")
        .li(T1, 4) //             li   t1, 4
        .label("pw_wait")
        .lw(T2, status, S0) //    lw   t2, UART_STATUS(s0)
        .andi(T2, T2, UART_TX_READY.mask() as i32) // andi t2, t2, TX_READY
        .beqz(T2, "pw_wait") //   beqz t2, pw_wait
        .sw(A0, 0, S0) //         sw   a0, UART_DATA(s0)
        .srli(A0, A0, 8) //       srli a0, a0, 8
        .addi(T1, T1, -1) //      addi t1, t1, -1
        .bne(T1, ZERO, "pw_wait") // bnez t1, pw_wait
        .ret(); //                ret
}

/// Reads SYS_ID and the accelerator's ID register and sends both over the UART.
fn id_program() -> Vec<u8> {
    let mut a = Asm::default();
    a.lui(S0, upper(UART_DATA)) //        lui  s0, %hi(UART_DATA)
        .lui(T0, upper(SYS_ID)) //        lui  t0, %hi(SYS_ID)
        .lw(A0, 0, T0) //                 lw   a0, 0(t0)
        .jal(RA, "putw") //               call putw
        .lui(T0, upper(ACC_REGS)) //      lui  t0, %hi(ACC_REGS)
        .lw(A0, 4 * i32::from(regmap::ID), T0) // lw a0, 4*ID(t0)
        .jal(RA, "putw") //               call putw
        .label("done")
        .j("done"); //                    j    done
    putw(&mut a);
    a.finish()
}

/// A bus monitor (also [`monitor::MonitorBus`]'s program): `'W' addr data` stores a word, `'R' addr` loads one and sends it back
/// (every field 4 bytes, little-endian).
fn monitor_program() -> Vec<u8> {
    let mut a = Asm::default();
    let status = (UART_STATUS - UART_DATA) as i32;
    a.lui(S0, upper(UART_DATA)) //        lui  s0, %hi(UART_DATA)
        .label("main")
        .jal(RA, "getb") //               call getb
        .mv(S1, A0) //                    mv   s1, a0
        .jal(RA, "getw") //               call getw
        .mv(S2, A0) //                    mv   s2, a0
        .li(T0, i32::from(b'R')) //       li   t0, 'R'
        .beq(S1, T0, "read") //           beq  s1, t0, read
        .jal(RA, "getw") //               call getw
        .sw(A0, 0, S2) //                 sw   a0, 0(s2)
        .j("main") //                     j    main
        .label("read")
        .lw(A0, 0, S2) //                 lw   a0, 0(s2)
        .jal(RA, "putw") //               call putw
        .j("main") //                     j    main
        .label("getb") //                 a0 = the next received byte
        .lw(T1, status, S0) //            lw   t1, UART_STATUS(s0)
        .andi(T1, T1, UART_RX_VALID.mask() as i32) // andi t1, t1, RX_VALID
        .beqz(T1, "getb") //              beqz t1, getb
        .lw(A0, 0, S0) //                 lw   a0, UART_DATA(s0)
        .andi(A0, A0, 0xff) //            andi a0, a0, 0xff
        .ret() //                         ret
        .label("getw") //                 a0 = the next 4 bytes, little-endian
        .mv(S3, RA) //                    mv   s3, ra
        .li(S4, 0) //                     li   s4, 0
        .li(S5, 0) //                     li   s5, 0
        .label("gw_next")
        .jal(RA, "getb") //               call getb
        .sll(A0, A0, S5) //               sll  a0, a0, s5
        .or(S4, S4, A0) //                or   s4, s4, a0
        .addi(S5, S5, 8) //               addi s5, s5, 8
        .li(T2, 32) //                    li   t2, 32
        .bne(S5, T2, "gw_next") //        bne  s5, t2, gw_next
        .mv(A0, S4) //                    mv   a0, s4
        .jalr(ZERO, S3, 0); //            jr   s3
    putw(&mut a);
    a.finish()
}

#[test]
fn the_cpu_reads_the_ids_and_sends_them_over_the_uart() {
    let Some(mut soc) = soc(&id_program()) else {
        return;
    };
    let mut got = [0u8; 8];
    soc.read_exact(&mut got).unwrap();
    let word = |b: &[u8]| u32::from_le_bytes(b.try_into().unwrap());
    assert_eq!(word(&got[..4]), SOC_ID_VALUE, "SYS_ID");
    assert_eq!(word(&got[4..]), regmap::ID_VALUE, "accelerator ID");
    // The program then spins: nothing more comes.
    soc.set_read_timeout(200);
    assert!(soc.read(&mut got).is_err());
}

/// Boot: from the release of the reset to the first byte on the line, with every instruction
/// fetched through a cold cache.
#[test]
fn first_uart_byte_within_2000_cycles_of_reset() {
    let Some(mut soc) = soc(&id_program()) else {
        return;
    };
    let mut first = [0u8; 1];
    soc.read_exact(&mut first).unwrap();
    let cycles = soc.cycles();
    eprintln!("first UART byte complete {cycles} cycles after reset");
    // The byte's own 10 bits take 160 clocks of that.
    assert!(cycles < 2000, "first byte after {cycles} cycles");
}

#[test]
fn bad_images_are_refused() {
    if soc(&id_program()).is_none() {
        return;
    }
    for image in [vec![], vec![0u8; SIM_RAM_BYTES as usize + 1]] {
        let e = VerilatedSoc::new(&image).err().unwrap();
        assert!(matches!(e, SimError::Image(_)), "{e}");
        assert!(e.to_string().contains("program image"), "{e}");
    }
}

mod dma;
mod firmware;
mod mm;
mod monitor;
