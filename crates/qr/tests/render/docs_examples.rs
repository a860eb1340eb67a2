//! The example images in docs/ are what the crate renders today.
//!
//! Regenerate them with `cargo run -p shortlink-qr --example docs_images`.

use shortlink_qr::{Format, Level, Options, render};

use crate::support::{decode_png, rasterise_svg, scan};

const TEXT: &str = "https://sho.rt/x7Kp2Qa";

fn docs_file(name: &str) -> Vec<u8> {
    let path = format!("{}/../../docs/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn options(format: Format) -> Options {
    Options {
        format,
        size: 256,
        ..Options::default()
    }
}

#[test]
fn the_svg_example_is_current() {
    let rendered = render(TEXT, &options(Format::Svg)).unwrap_or_else(|e| panic!("{e}"));
    let checked_in = docs_file("qr-example.svg");
    assert!(
        checked_in == rendered,
        "docs/qr-example.svg is stale: cargo run -p shortlink-qr --example docs_images"
    );
    let scanned = scan(&rasterise_svg(&checked_in));
    assert_eq!((scanned.text.as_str(), scanned.level), (TEXT, Level::M));
}

#[test]
fn the_png_example_is_current() {
    // Pixels, not bytes: a newer deflate may compress differently.
    let rendered = render(TEXT, &options(Format::Png)).unwrap_or_else(|e| panic!("{e}"));
    let checked_in = decode_png(&docs_file("qr-example.png")).image;
    assert!(
        checked_in.pixels == decode_png(&rendered).image.pixels,
        "docs/qr-example.png is stale: cargo run -p shortlink-qr --example docs_images"
    );
    let scanned = scan(&checked_in);
    assert_eq!((scanned.text.as_str(), scanned.level), (TEXT, Level::M));
}
