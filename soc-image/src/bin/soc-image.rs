//! Builds the SoC firmware image and prints its RAM budget (`./x test` runs this). Arguments
//! are features of the firmware: `soc-image training` builds the training image.

fn main() -> std::process::ExitCode {
    let features: Vec<String> = std::env::args().skip(1).collect();
    let features: Vec<&str> = features.iter().map(String::as_str).collect();
    match systole_soc_image::build(&features) {
        Ok(image) => {
            println!("{}", image.budget);
            println!("{} ({} bytes)", image.bin.display(), image.bytes.len());
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("soc-image: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
