//! Decoding helpers shared by the tests.

use std::io::Cursor;

use shortlink_qr::{Color, Format, Level, Options, QrError, render};

/// A link as the service produces it.
pub const SHORT_URL: &str = "http://127.0.0.1:8080/AbC123x";

/// A destination-sized URL of 300 characters.
pub fn long_url() -> String {
    let url = format!(
        "https://shop.example.com/catalogue/autumn-sale/items?campaign=newsletter-2026-11\
         &utm_source=mail&utm_medium=email&utm_content=hero-banner&ref={}",
        "x7Kp2QaZ9".repeat(20)
    );
    url[..300].to_owned()
}

/// The deep blue on cream pair the colour tests use.
pub const INK: Color = Color::rgb(0x1a, 0x23, 0x7e);
/// See [`INK`].
pub const PAPER: Color = Color::rgb(0xff, 0xf8, 0xe1);

/// Every error correction level.
pub const LEVELS: [Level; 4] = [Level::L, Level::M, Level::Q, Level::H];

/// The two colour schemes every size is tried with.
pub const COLOURS: [(Color, Color); 2] = [(Color::BLACK, Color::WHITE), (INK, PAPER)];

pub fn options(
    format: Format,
    size: u32,
    margin: u32,
    level: Level,
    (fg, bg): (Color, Color),
) -> Options {
    Options {
        format,
        size,
        margin,
        level,
        fg,
        bg,
    }
}

/// The code's width in modules (no quiet zone), straight from the encoder.
/// The crate encodes ASCII text the same way, which is all these tests use
/// it for.
pub fn code_width(text: &str, level: Level) -> u32 {
    encoder_code(text, level).width() as u32
}

/// The encoder's own module grid, row by row, `true` for dark.
pub fn code_modules(text: &str, level: Level) -> Vec<bool> {
    encoder_code(text, level)
        .into_colors()
        .into_iter()
        .map(|c| c == qrcode::Color::Dark)
        .collect()
}

fn encoder_code(text: &str, level: Level) -> qrcode::QrCode {
    let ec = match level {
        Level::L => qrcode::EcLevel::L,
        Level::M => qrcode::EcLevel::M,
        Level::Q => qrcode::EcLevel::Q,
        Level::H => qrcode::EcLevel::H,
    };
    qrcode::QrCode::with_error_correction_level(text, ec).unwrap_or_else(|e| panic!("{e}"))
}

/// An RGB image.
pub struct Rgb {
    pub width: u32,
    pub height: u32,
    pub pixels: Vec<[u8; 3]>,
}

impl Rgb {
    pub fn at(&self, x: u32, y: u32) -> [u8; 3] {
        self.pixels[(y * self.width + x) as usize]
    }
}

/// What the PNG header says, and its pixels.
pub struct DecodedPng {
    pub color_type: png::ColorType,
    pub bit_depth: png::BitDepth,
    pub palette: Option<Vec<u8>>,
    pub image: Rgb,
}

/// Decodes a PNG with the png crate, expanding palette and 1-bit greyscale to RGB.
pub fn decode_png(bytes: &[u8]) -> DecodedPng {
    let mut decoder = png::Decoder::new(Cursor::new(bytes));
    decoder.set_transformations(png::Transformations::EXPAND);
    let mut reader = decoder.read_info().unwrap_or_else(|e| panic!("{e}"));
    let info = reader.info();
    let (color_type, bit_depth) = (info.color_type, info.bit_depth);
    let palette = info.palette.as_ref().map(|p| p.to_vec());
    let size = reader
        .output_buffer_size()
        .unwrap_or_else(|| panic!("no size"));
    let mut buf = vec![0; size];
    let frame = reader
        .next_frame(&mut buf)
        .unwrap_or_else(|e| panic!("{e}"));
    let buf = &buf[..frame.buffer_size()];
    let pixels = match frame.color_type {
        png::ColorType::Grayscale => buf.iter().map(|&l| [l, l, l]).collect(),
        png::ColorType::Rgb => buf.chunks_exact(3).map(|p| [p[0], p[1], p[2]]).collect(),
        other => panic!("unexpected output colour type {other:?}"),
    };
    DecodedPng {
        color_type,
        bit_depth,
        palette,
        image: Rgb {
            width: frame.width,
            height: frame.height,
            pixels,
        },
    }
}

/// Rasterises an SVG at its own `width` × `height` with resvg.
pub fn rasterise_svg(bytes: &[u8]) -> Rgb {
    rasterise_svg_scaled(bytes, 1)
}

/// Rasterises an SVG at `scale` times its own `width` × `height`, as a screen
/// with that device pixel ratio would.
pub fn rasterise_svg_scaled(bytes: &[u8], scale: u32) -> Rgb {
    use resvg::{tiny_skia, usvg};
    let tree =
        usvg::Tree::from_data(bytes, &usvg::Options::default()).unwrap_or_else(|e| panic!("{e}"));
    let size = tree.size().to_int_size();
    let (width, height) = (size.width() * scale, size.height() * scale);
    let mut pixmap = tiny_skia::Pixmap::new(width, height).unwrap_or_else(|| panic!("empty image"));
    let transform = tiny_skia::Transform::from_scale(scale as f32, scale as f32);
    resvg::render(&tree, transform, &mut pixmap.as_mut());
    let pixels = pixmap
        .pixels()
        .iter()
        .map(|p| {
            // Everything drawn is opaque, so premultiplied equals straight.
            assert_eq!(p.alpha(), 255, "transparent pixel");
            [p.red(), p.green(), p.blue()]
        })
        .collect();
    Rgb {
        width,
        height,
        pixels,
    }
}

fn luma([r, g, b]: [u8; 3]) -> u8 {
    ((u32::from(r) * 299 + u32::from(g) * 587 + u32::from(b) * 114) / 1000) as u8
}

/// What the decoder read.
#[derive(Debug)]
pub struct Scan {
    pub text: String,
    /// The QR version, 1..=40.
    pub version: usize,
    pub level: Level,
}

/// Decodes the one QR code in `image` with rqrr.
pub fn scan(image: &Rgb) -> Scan {
    try_scan(image, 0, Color::WHITE).unwrap_or_else(|e| panic!("{e}"))
}

/// Decodes the one QR code in `image` with rqrr, after surrounding the image
/// with `pad` pixels of `pad_colour`.
pub fn try_scan(image: &Rgb, pad: u32, pad_colour: Color) -> Result<Scan, String> {
    let pad_luma = luma(pad_colour.components());
    let (w, h) = (image.width + 2 * pad, image.height + 2 * pad);
    let mut prepared =
        rqrr::PreparedImage::prepare_from_greyscale(w as usize, h as usize, |x, y| {
            let (x, y) = (x as u32, y as u32);
            let inside =
                (pad..pad + image.width).contains(&x) && (pad..pad + image.height).contains(&y);
            if inside {
                luma(image.at(x - pad, y - pad))
            } else {
                pad_luma
            }
        });
    let grids = prepared.detect_grids();
    let [grid] = grids.as_slice() else {
        return Err(format!("found {} codes, expected one", grids.len()));
    };
    let (meta, text) = grid.decode().map_err(|e| format!("decode: {e:?}"))?;
    // The format information stores the level as two bits: L 01, M 00, Q 11, H 10.
    let level = match meta.ecc_level {
        1 => Level::L,
        0 => Level::M,
        3 => Level::Q,
        2 => Level::H,
        other => return Err(format!("ecc level {other}")),
    };
    Ok(Scan {
        text,
        version: meta.version.0,
        level,
    })
}

/// Renders, or asserts `TooSmall` when the code cannot have whole-pixel
/// modules. Returns `None` in that case.
pub fn render_or_too_small(text: &str, opts: &Options) -> Option<Vec<u8>> {
    let modules = code_width(text, opts.level) + 2 * opts.margin;
    let result = render(text, opts);
    if modules > opts.size {
        match result {
            Err(QrError::TooSmall { size, modules: m }) => {
                assert_eq!((size, m), (opts.size, modules), "{opts:?}");
                None
            }
            other => panic!(
                "{opts:?}: expected TooSmall, got {:?}",
                other.map(|b| b.len())
            ),
        }
    } else {
        Some(result.unwrap_or_else(|e| panic!("{opts:?}: {e}")))
    }
}

/// Decodes a rendered image of either format and checks text, level and
/// version against what was asked for.
pub fn assert_scans_back(bytes: &[u8], text: &str, opts: &Options) {
    let modules = code_width(text, opts.level) + 2 * opts.margin;
    let image = match opts.format {
        Format::Png => {
            let image = decode_png(bytes).image;
            assert_eq!(
                (image.width, image.height),
                (opts.size, opts.size),
                "{opts:?}"
            );
            image
        }
        Format::Svg => {
            // rqrr misreads crisp codes whose modules come out a non-integer
            // 2 to 4 pixels wide (alternately 2 and 3 pixels, say): its
            // sampling grid drifts. Such SVGs are rasterised at the smallest
            // device pixel ratio that gives modules of 4 pixels or more, as a
            // phone screen or a camera would see them. PNG modules are whole
            // pixels and are decoded at 1×.
            let scale = (4 * modules).div_ceil(opts.size);
            let image = rasterise_svg_scaled(bytes, scale);
            let side = opts.size * scale;
            assert_eq!((image.width, image.height), (side, side), "{opts:?}");
            image
        }
    };
    // A code with margin 0 is meant to sit on a background of its own, and
    // rqrr needs that quiet zone: without it, it misreads modules at the
    // edge of an SVG (which has no leftover pixels around the code). Such
    // images get a 4-module border in the background colour before decoding.
    let pad = if opts.margin == 0 {
        4 * image.width.div_ceil(modules)
    } else {
        0
    };
    let scan = try_scan(&image, pad, opts.bg).unwrap_or_else(|e| panic!("{opts:?}: {e}"));
    assert_eq!(scan.text, text, "{opts:?}");
    assert_eq!(scan.level, opts.level, "{opts:?}");
    assert_eq!(
        scan.version * 4 + 17,
        code_width(text, opts.level) as usize,
        "{opts:?}"
    );
}
