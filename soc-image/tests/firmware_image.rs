//! The real firmware image: it builds for the SoC, fits its RAM, and lays out as the CPU boots.

use systole_core::soc::{BASE_RAM_BYTES, RAM_BASE, RESET_VECTOR};

#[test]
fn the_firmware_builds_fits_and_boots_from_the_reset_vector() {
    let image = systole_soc_image::build(&[]).unwrap_or_else(|e| panic!("{e}"));
    let b = image.budget;
    println!("{b}");
    assert!(b.fits(), "{b}");
    assert_eq!(b.ram, BASE_RAM_BYTES);
    assert!(
        b.text > 1024,
        "the protocol server is more than 1 KiB of code: {b}"
    );
    assert_eq!(image.bytes.len() as u32, b.image);
    assert!(b.image <= b.statics && b.statics + b.stack_reserve <= b.ram);
    assert_eq!(std::fs::read(&image.bin).unwrap(), image.bytes);
    // The first instruction riscv-rt places is at the reset vector.
    let elf = std::fs::read(&image.elf).unwrap();
    let entry = u32::from_le_bytes(elf[24..28].try_into().unwrap());
    assert_eq!(entry, RESET_VECTOR);
    assert_ne!(
        image.words().nth(((RESET_VECTOR - RAM_BASE) / 4) as usize),
        Some(0)
    );
    assert_eq!(image.words().count(), image.bytes.len().div_ceil(4));
}

/// The training image (feature `training`): linked for `TRAINING_RAM_BYTES`, carrying the
/// allocator and the whole training step, no AMO in it (`build` checks), the rest of the RAM
/// left to the heap. A second firmware build (the step's crates for RV32): `./x test --all`.
#[test]
#[ignore = "builds a second firmware image with the training step"]
fn the_training_image_links_the_step_for_the_training_ram() {
    use object::{Object, ObjectSymbol};
    use systole_core::soc::TRAINING_RAM_BYTES;
    let image =
        systole_soc_image::build(&[systole_soc_image::TRAINING]).unwrap_or_else(|e| panic!("{e}"));
    let b = image.budget;
    println!("{b}");
    assert_eq!(b.ram, TRAINING_RAM_BYTES);
    assert!(b.fits(), "{b}");
    let elf = std::fs::read(&image.elf).unwrap();
    let file = object::File::parse(&*elf).unwrap();
    let names: Vec<&str> = file.symbols().filter_map(|s| s.name().ok()).collect();
    assert!(names.contains(&"__sheap"), "__sheap is not in the image");
    // The step is in it: far more code than the serving image alone.
    let base = systole_soc_image::build(&[]).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        b.text > base.budget.text + 8 * 1024,
        "{b} vs {}",
        base.budget
    );
}
