//! docs/EXTENDING.md, "A new board": a board is one `Board` value, data only. This test builds
//! one (a made-up Artix-7 35T board with its own pins and a 50 MHz oscillator; a real entry goes
//! into `boards/src/table.rs` with the pins of its vendor's master constraints) and runs
//! everything `systole bitstream` does before a tool runs: the constraints, the Vivado script,
//! the resource model's largest array and its refusals, and the bridge top's Verilog for its
//! clock and pins.

use systole_boards::model::{clearly_too_big, estimate, fits, largest_array};
use systole_boards::{find, flow, generate_vivado_tcl, generate_xdc, Board, Family, Pin};
use systole_core::ArrayConfig;

const fn pin(site: &'static str) -> Pin {
    Pin {
        site,
        active_low: false,
    }
}

/// The new board's user LEDs.
static LEDS: [Pin; 2] = [pin("A17"), pin("C16")];

/// The new board: the Arty A7-35T's part (so its budget is the table's) on another package.
fn my_board() -> Board {
    let arty = find("arty-a7-35").unwrap();
    Board {
        name: "my-a7",
        title: "Example Artix-7 35T board",
        family: Family::Xc7,
        part: "xc7a35tcpg236-1",
        package: "cpg236",
        clock: pin("L17"),
        clock_hz: 50_000_000,
        pll_hz: None,
        halve_clock: false,
        uart_rx: pin("J17"),
        uart_tx: pin("J18"),
        leds: &LEDS,
        reset: Pin {
            site: "A18",
            active_low: true,
        },
        io_standard: "LVCMOS33",
        budget: arty.budget,
        soc_ram_bytes: arty.soc_ram_bytes,
        loader_board: "cmod_a7",
    }
}

#[test]
fn a_board_from_data_gets_constraints_a_script_and_a_fit() {
    let b = my_board();
    let xdc = generate_xdc(&b);
    for (site, port) in [
        ("L17", "clock"),
        ("A18", "reset_pin"),
        ("J17", "uart_rx"),
        ("J18", "uart_tx"),
        ("A17", "led0"),
        ("C16", "led1"),
    ] {
        let line = format!("PACKAGE_PIN {site} IOSTANDARD LVCMOS33 }} [get_ports {{ {port} }}]");
        assert_eq!(xdc.matches(&line).count(), 1, "{site} {port}:\n{xdc}");
    }
    assert!(xdc.contains("-period 20.000 "), "a 50 MHz clock:\n{xdc}");
    let tcl = generate_vivado_tcl(&b, &["bridge_top.v", "board.xdc"], "top");
    assert!(
        tcl.contains("synth_design -top top -part xc7a35tcpg236-1"),
        "{tcl}"
    );

    // The resource model works from the budget alone: the same part fits the same array.
    let largest = largest_array(&b).expect("an array fits an Artix-7 35T");
    assert_eq!(largest, largest_array(find("arty-a7-35").unwrap()).unwrap());
    assert!(fits(&b, &estimate(&b, &ArrayConfig::square(2))));
    let n = largest.size + 1;
    assert!(!fits(&b, &estimate(&b, &ArrayConfig::square(n))), "{n}x{n}");
    let refusal = clearly_too_big(&b, &ArrayConfig::square(16)).expect("256 MACs, 90 DSPs");
    assert!(
        refusal.contains("the largest array that fits is"),
        "{refusal}"
    );
}

#[test]
fn the_bridge_top_is_built_for_the_boards_clock() {
    let cfg = ArrayConfig {
        fm_depth: 0,
        ..ArrayConfig::square(2)
    };
    let mine = flow::bridge_verilog(&my_board(), &cfg).unwrap();
    let arty = flow::bridge_verilog(find("arty-a7-35").unwrap(), &cfg).unwrap();
    assert!(mine.contains("module top"), "the bridge top is `top`");
    // The UART's divider comes from the oscillator: 50 MHz is not the Arty's 100 MHz.
    assert_ne!(mine, arty, "the board's clock changes the design");
}
