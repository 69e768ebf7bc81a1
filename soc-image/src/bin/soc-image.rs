//! Builds the SoC firmware image and prints its RAM budget (`./x test` runs this).

fn main() -> std::process::ExitCode {
    match systole_soc_image::build(&[]) {
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
