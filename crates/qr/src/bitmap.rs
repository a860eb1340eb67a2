//! The PNG image: whole pixels per module, one bit per pixel.

use png::{BitDepth, ColorType, DeflateCompression, Encoder, Filter};

use crate::matrix::{Layout, Matrix};
use crate::{Color, Options, QrError};

/// The deflate level: zlib's default. Measured on 512 px codes it gives files
/// 3–4 times smaller than the png crate's fdeflate mode, in well under a
/// millisecond; level 9 saves nothing more there (docs/QR.md has the table).
const DEFLATE_LEVEL: u8 = 6;

/// The longest match deflate can copy, in bytes.
const DEFLATE_MAX_MATCH: usize = 258;

/// How the two colours are stored. Both use one bit per pixel: measured, an
/// 8-bit greyscale image of the same code is 2–3 times larger and slower to
/// compress, so greys other than black and white go into a palette too.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pixels {
    /// Both colours black or white: 1-bit greyscale (1 is white), which needs
    /// no palette chunk.
    Gray1 { dark: bool, light: bool },
    /// Anything else: a two-entry palette, background first.
    Palette1 { palette: [u8; 6] },
}

impl Pixels {
    fn choose(fg: Color, bg: Color) -> Self {
        match (fg.gray(), bg.gray()) {
            (Some(dark @ (0 | 255)), Some(light @ (0 | 255))) => Self::Gray1 {
                dark: dark == 255,
                light: light == 255,
            },
            _ => {
                let [br, bgr, bb] = bg.components();
                let [fr, fgr, fb] = fg.components();
                Self::Palette1 {
                    palette: [br, bgr, bb, fr, fgr, fb],
                }
            }
        }
    }

    /// The bit a dark and a light pixel are stored as.
    const fn bits(self) -> (bool, bool) {
        match self {
            Self::Gray1 { dark, light } => (dark, light),
            Self::Palette1 { .. } => (true, false),
        }
    }
}

/// Renders `matrix` as a `size × size` PNG.
///
/// Every module is `layout.module_px` pixels square; the quiet zone and the
/// leftover pixels around it are background.
pub(crate) fn render(matrix: &Matrix, layout: Layout, opts: &Options) -> Result<Vec<u8>, QrError> {
    let pixels = Pixels::choose(opts.fg, opts.bg);
    let (dark_bit, light_bit) = pixels.bits();
    let size = opts.size;
    let Layout {
        module_px,
        offset,
        margin,
        ..
    } = layout;
    // The first pixel of the code proper, left and top alike, and one past its last.
    let start = offset + margin * module_px;
    let end = start + matrix.width() as u32 * module_px;

    let light_row = pack_bits(size, |_| light_bit);
    let mut data = Vec::with_capacity(light_row.len() * size as usize);
    for _ in 0..start {
        data.extend_from_slice(&light_row);
    }
    for y in 0..matrix.width() {
        let modules = matrix.row(y);
        let row = pack_bits(size, |x| {
            let dark = (start..end).contains(&x) && modules[((x - start) / module_px) as usize];
            if dark { dark_bit } else { light_bit }
        });
        for _ in 0..module_px {
            data.extend_from_slice(&row);
        }
    }
    for _ in end..size {
        data.extend_from_slice(&light_row);
    }
    encode(&data, size, pixels)
}

/// Packs one bit per pixel, most significant bit first, as PNG wants. The
/// unused bits at the end of the row stay 0.
fn pack_bits(width: u32, bit: impl Fn(u32) -> bool) -> Vec<u8> {
    let mut row = vec![0_u8; width.div_ceil(8) as usize];
    for x in 0..width {
        if bit(x) {
            row[(x / 8) as usize] |= 0x80 >> (x % 8);
        }
    }
    row
}

/// The row filter that compresses best, as measured.
///
/// Each module row repeats `module_px` times. Unfiltered, a repeated row
/// with its filter-type byte is one deflate match as long as that is at most
/// [`DEFLATE_MAX_MATCH`] bytes (images up to 2056 pixels wide), and that beats
/// every filter. Longer rows need several matches each, and the `Up` filter,
/// which turns a repeated row into zeros, wins instead.
fn filter_for(row_bytes: usize) -> Filter {
    // The row plus its filter-type byte fits in one match.
    if row_bytes < DEFLATE_MAX_MATCH {
        Filter::NoFilter
    } else {
        Filter::Up
    }
}

/// Writes `data`, rows of one bit per pixel, as a `size × size` PNG.
fn encode(data: &[u8], size: u32, pixels: Pixels) -> Result<Vec<u8>, QrError> {
    let mut out = Vec::new();
    let mut encoder = Encoder::new(&mut out, size, size);
    encoder.set_depth(BitDepth::One);
    match pixels {
        Pixels::Gray1 { .. } => encoder.set_color(ColorType::Grayscale),
        Pixels::Palette1 { palette } => {
            encoder.set_color(ColorType::Indexed);
            encoder.set_palette(palette.to_vec());
        }
    }
    encoder.set_deflate_compression(DeflateCompression::Level(DEFLATE_LEVEL));
    encoder.set_filter(filter_for(size.div_ceil(8) as usize));
    let mut writer = encoder.write_header()?;
    writer.write_image_data(data)?;
    writer.finish()?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn black_and_white_is_greyscale_everything_else_a_palette() {
        assert_eq!(
            Pixels::choose(Color::BLACK, Color::WHITE),
            Pixels::Gray1 {
                dark: false,
                light: true
            }
        );
        assert_eq!(
            Pixels::choose(Color::WHITE, Color::BLACK),
            Pixels::Gray1 {
                dark: true,
                light: false
            }
        );
        assert_eq!(
            Pixels::choose(Color::rgb(0x33, 0x33, 0x33), Color::WHITE),
            Pixels::Palette1 {
                palette: [0xff, 0xff, 0xff, 0x33, 0x33, 0x33]
            }
        );
        assert_eq!(
            Pixels::choose(Color::rgb(0x1a, 0x23, 0x7e), Color::rgb(0xff, 0xf8, 0xe1)),
            Pixels::Palette1 {
                palette: [0xff, 0xf8, 0xe1, 0x1a, 0x23, 0x7e]
            }
        );
    }

    #[test]
    fn pack_bits_is_msb_first() {
        assert_eq!(
            pack_bits(10, |x| x == 0 || x == 9),
            [0b1000_0000, 0b0100_0000]
        );
    }

    #[test]
    fn rows_up_to_2056_pixels_are_unfiltered() {
        assert_eq!(filter_for(2048 / 8), Filter::NoFilter);
        assert_eq!(filter_for(2056 / 8), Filter::NoFilter);
        assert_eq!(filter_for(2064 / 8), Filter::Up);
    }

    #[test]
    fn a_png_encoder_failure_is_an_encode_error() {
        // Too few bytes for a 64 × 64 image.
        let e = encode(&[0; 3], 64, Pixels::choose(Color::BLACK, Color::WHITE));
        let Err(e @ QrError::Encode(_)) = e else {
            panic!("expected an encode error, got {e:?}");
        };
        let source = std::error::Error::source(&e).map(ToString::to_string);
        assert!(
            source.is_some_and(|s| s.starts_with("PNG encoder: ")),
            "{e:?}"
        );
    }
}
