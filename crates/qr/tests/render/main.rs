//! Renders codes through the public API and reads them back with a real QR
//! decoder (rqrr): PNGs as they are, SVGs rasterised by resvg first.

mod docs_examples;
mod errors;
mod png_images;
mod properties;
mod support;
mod svg_images;
