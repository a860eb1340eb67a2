//! Writes the example images that docs/QR.md shows.
//!
//! Run from anywhere in the workspace: `cargo run -p shortlink-qr --example docs_images`.

use std::path::Path;

use shortlink_qr::{Format, Options, render};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let docs = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../docs")
        .canonicalize()?;
    for format in [Format::Svg, Format::Png] {
        let opts = Options {
            format,
            size: 256,
            ..Options::default()
        };
        let bytes = render("https://sho.rt/x7Kp2Qa", &opts)?;
        let path = docs.join(format!("qr-example.{format}"));
        std::fs::write(&path, &bytes)?;
        println!("{} ({} bytes)", path.display(), bytes.len());
    }
    Ok(())
}
