//! PNG output: exact dimensions, whole-pixel modules, compact encodings,
//! and every image scans back to its text.

use shortlink_qr::{Color, Format, Level, MAX_MARGIN, Options, render};

use crate::support::{
    COLOURS, INK, LEVELS, PAPER, SHORT_URL, assert_scans_back, code_modules, code_width,
    decode_png, long_url, options, render_or_too_small,
};

/// Checks every pixel against the layout rule: `module_px = size / modules`,
/// the leftover split with the smaller half left and top, the quiet zone and
/// leftover in the background colour, each module a solid square.
fn assert_pixel_exact(bytes: &[u8], text: &str, opts: &Options) {
    let image = decode_png(bytes).image;
    assert_eq!((image.width, image.height), (opts.size, opts.size));
    let width = code_width(text, opts.level);
    let dark = code_modules(text, opts.level);
    let modules = width + 2 * opts.margin;
    let module_px = opts.size / modules;
    let offset = (opts.size - modules * module_px) / 2;
    let start = offset + opts.margin * module_px;
    let end = start + width * module_px;
    let (fg, bg) = (opts.fg.components(), opts.bg.components());
    // Rows are compared whole; the expected row depends only on the module row.
    let expected_row = |my: Option<u32>| -> Vec<[u8; 3]> {
        (0..opts.size)
            .map(|x| match my {
                Some(my) if (start..end).contains(&x) => {
                    let mx = (x - start) / module_px;
                    if dark[(my * width + mx) as usize] {
                        fg
                    } else {
                        bg
                    }
                }
                _ => bg,
            })
            .collect()
    };
    let light_row = expected_row(None);
    let mut want = (u32::MAX, light_row.clone());
    for y in 0..opts.size {
        let row = &image.pixels[(y * opts.size) as usize..((y + 1) * opts.size) as usize];
        let expected = if (start..end).contains(&y) {
            let my = (y - start) / module_px;
            if want.0 != my {
                want = (my, expected_row(Some(my)));
            }
            &want.1
        } else {
            &light_row
        };
        assert!(row == expected.as_slice(), "row {y} of {opts:?}");
    }
}

/// Renders every level × margin (0, 4, 16) × colour scheme × text at `size`;
/// returns how many rendered and how many were too small.
fn every_combination(size: u32) -> (usize, usize) {
    let (mut rendered, mut too_small) = (0, 0);
    let long = long_url();
    for text in [SHORT_URL, long.as_str()] {
        for level in LEVELS {
            for margin in [0, 4, MAX_MARGIN] {
                for colours in COLOURS {
                    let opts = options(Format::Png, size, margin, level, colours);
                    let Some(bytes) = render_or_too_small(text, &opts) else {
                        too_small += 1;
                        continue;
                    };
                    assert_pixel_exact(&bytes, text, &opts);
                    assert_scans_back(&bytes, text, &opts);
                    rendered += 1;
                }
            }
        }
    }
    (rendered, too_small)
}

#[test]
fn at_64_px_codes_that_fit_scan_and_the_others_are_too_small() {
    let (rendered, too_small) = every_combination(64);
    // The short URL fits at every level with margin 0 and 4; the 300-character
    // one (57 modules at level L) never fits with its margin.
    assert!(rendered >= 16, "{rendered}");
    assert!(too_small >= 24, "{too_small}");
}

#[test]
fn at_512_px_every_level_margin_and_colour_scans() {
    assert_eq!(every_combination(512), (48, 0));
}

/// A few cases only: decoding 16 million pixels takes seconds. Margin 0 is
/// left to the smaller sizes: the border `assert_scans_back` adds around such
/// codes makes the image large enough to overflow rqrr's integer geometry.
#[test]
fn at_4096_px_codes_scan() {
    let long = long_url();
    for (text, level, margin, colours) in [
        (SHORT_URL, Level::M, 4, (Color::BLACK, Color::WHITE)),
        (long.as_str(), Level::H, MAX_MARGIN, (INK, PAPER)),
    ] {
        let opts = options(Format::Png, 4096, margin, level, colours);
        let bytes = render(text, &opts).unwrap_or_else(|e| panic!("{e}"));
        assert_pixel_exact(&bytes, text, &opts);
        assert_scans_back(&bytes, text, &opts);
    }
}

#[test]
fn modules_are_whole_pixels_and_the_leftover_is_split() {
    // The short URL at level M is version 3: 29 modules, 37 with a margin of
    // 4. 512 / 37 = 13 pixels a module, 481 in all; the 31 left over go 15
    // before and 16 after. The code proper starts at 15 + 4 × 13 = 67 and
    // ends before 67 + 29 × 13 = 444.
    assert_eq!(code_width(SHORT_URL, Level::M), 29);
    let opts = Options {
        format: Format::Png,
        ..Options::default()
    };
    let bytes = render(SHORT_URL, &opts).unwrap_or_else(|e| panic!("{e}"));
    let image = decode_png(&bytes).image;
    assert_eq!((image.width, image.height), (512, 512));
    let black = [0, 0, 0];
    let is_dark = |x, y| image.at(x, y) == black;
    let first_dark = (0..512 * 512)
        .map(|i| (i % 512, i / 512))
        .find(|&(x, y)| is_dark(x, y));
    assert_eq!(first_dark, Some((67, 67)));
    // Each finder pattern's outer ring is 7 modules: 91 pixels, in both
    // directions, at top left, top right and bottom left.
    let run = |pixels: &mut dyn Iterator<Item = (u32, u32)>| {
        pixels.take_while(|&(x, y)| is_dark(x, y)).count()
    };
    assert_eq!(run(&mut (67..512).map(|x| (x, 67))), 91);
    assert_eq!(run(&mut (67..512).map(|y| (67, y))), 91);
    assert_eq!(run(&mut (0..444).rev().map(|x| (x, 67))), 91);
    assert_eq!(run(&mut (67..512).map(|x| (x, 443))), 91);
    // The ring is exactly one module thick.
    assert!(is_dark(67 + 12, 67 + 13) && !is_dark(67 + 13, 67 + 13));
    // Quiet zone and leftover: nothing dark before 67 or from 444 on.
    let outside = |x, y| !(67..444).contains(&x) || !(67..444).contains(&y);
    assert!(
        (0..512 * 512)
            .map(|i| (i % 512, i / 512))
            .all(|(x, y)| !outside(x, y) || !is_dark(x, y))
    );
    assert_pixel_exact(&bytes, SHORT_URL, &opts);
}

#[test]
fn black_and_white_is_1_bit_greyscale_other_colours_a_1_bit_palette() {
    // rqrr reads dark-on-light codes only, so the inverted one is checked
    // pixel by pixel but not scanned.
    let png = |fg, bg, scan| {
        let opts = Options {
            format: Format::Png,
            fg,
            bg,
            ..Options::default()
        };
        let bytes = render(SHORT_URL, &opts).unwrap_or_else(|e| panic!("{e}"));
        assert_pixel_exact(&bytes, SHORT_URL, &opts);
        if scan {
            assert_scans_back(&bytes, SHORT_URL, &opts);
        }
        decode_png(&bytes)
    };
    for (fg, bg) in [(Color::BLACK, Color::WHITE), (Color::WHITE, Color::BLACK)] {
        let decoded = png(fg, bg, fg == Color::BLACK);
        assert_eq!(decoded.color_type, png::ColorType::Grayscale);
        assert_eq!(decoded.bit_depth, png::BitDepth::One);
        assert_eq!(decoded.palette, None);
    }
    let grey = Color::rgb(0x40, 0x40, 0x40);
    for (fg, bg) in [(INK, PAPER), (grey, Color::WHITE)] {
        let decoded = png(fg, bg, true);
        assert_eq!(decoded.color_type, png::ColorType::Indexed);
        assert_eq!(decoded.bit_depth, png::BitDepth::One);
        let [br, bgr, bb] = bg.components();
        let [fr, fgr, fb] = fg.components();
        assert_eq!(decoded.palette, Some(vec![br, bgr, bb, fr, fgr, fb]));
    }
}

#[test]
fn files_are_small() {
    // Measured with the settings in src/bitmap.rs; the bounds leave some room
    // for a different deflate implementation but catch a lost setting (an
    // 8-bit or unfiltered 4096 px image is several times larger).
    for (size, bound) in [(256, 700), (512, 1_000), (4096, 16_000)] {
        for colours in COLOURS {
            let opts = options(Format::Png, size, 4, Level::M, colours);
            let len = render(SHORT_URL, &opts)
                .unwrap_or_else(|e| panic!("{e}"))
                .len();
            assert!(len <= bound, "{size} px: {len} bytes, over {bound}");
        }
    }
}
