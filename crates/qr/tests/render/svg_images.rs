//! SVG output: the exact document shape, one path that redraws the encoder's
//! modules exactly, and every image scans back once rasterised.

use shortlink_qr::{Color, Format, Level, MAX_MARGIN, Options, render};

use crate::support::{
    COLOURS, INK, LEVELS, PAPER, SHORT_URL, assert_scans_back, code_modules, code_width, long_url,
    options, rasterise_svg, render_or_too_small,
};

/// The value of attribute `name` in `tag`.
fn attr<'a>(tag: &'a str, name: &str) -> &'a str {
    let key = format!(" {name}=\"");
    let start = tag
        .find(&key)
        .unwrap_or_else(|| panic!("no {name} in {tag}"))
        + key.len();
    let len = tag[start..].find('"').unwrap_or_else(|| panic!("{tag}"));
    &tag[start..start + len]
}

/// Parses a path of `M x y h w v1 h-w z` subpaths into `(x, y, w)` runs.
fn runs(d: &str) -> Vec<(u32, u32, u32)> {
    let num = |s: &str| s.parse::<u32>().unwrap_or_else(|e| panic!("{s:?}: {e}"));
    d.split('M')
        .skip(1)
        .map(|sub| {
            let (xy, rest) = sub.split_once('h').unwrap_or_else(|| panic!("{sub}"));
            let (x, y) = xy.split_once(' ').unwrap_or_else(|| panic!("{sub}"));
            let (w, rest) = rest.split_once("v1h-").unwrap_or_else(|| panic!("{sub}"));
            assert_eq!(rest, format!("{w}z"), "subpath {sub}");
            (num(x), num(y), num(w))
        })
        .collect()
}

/// Checks the whole document: root attributes, one background rectangle,
/// one path whose runs are exactly the encoder's dark modules, maximal.
fn assert_document(bytes: &[u8], text: &str, opts: &Options) {
    let svg = std::str::from_utf8(bytes).unwrap_or_else(|e| panic!("{e}"));
    let width = code_width(text, opts.level);
    let n = width + 2 * opts.margin;
    let tags: Vec<&str> = svg
        .split('<')
        .skip(1)
        .map(|t| t.split('>').next().unwrap_or_default())
        .collect();
    assert_eq!(tags.len(), 4, "svg, rect, path and /svg only: {tags:?}");
    let (root, rect, path) = (tags[0], tags[1], tags[2]);
    assert!(root.starts_with("svg "), "{root}");
    assert_eq!(attr(root, "xmlns"), "http://www.w3.org/2000/svg");
    assert_eq!(attr(root, "width"), opts.size.to_string());
    assert_eq!(attr(root, "height"), opts.size.to_string());
    assert_eq!(attr(root, "viewBox"), format!("0 0 {n} {n}"));
    assert_eq!(attr(root, "shape-rendering"), "crispEdges");
    assert!(rect.starts_with("rect "), "{rect}");
    assert_eq!(attr(rect, "width"), n.to_string());
    assert_eq!(attr(rect, "height"), n.to_string());
    assert_eq!(attr(rect, "fill"), opts.bg.to_string());
    assert!(path.starts_with("path "), "{path}");
    assert_eq!(attr(path, "fill"), opts.fg.to_string());
    assert_eq!(tags[3], "/svg");
    assert!(svg.ends_with("</svg>\n"));

    let mut drawn = vec![false; (width * width) as usize];
    let mut previous: Option<(u32, u32, u32)> = None;
    for (x, y, w) in runs(attr(path, "d")) {
        assert!(w > 0);
        // Runs are in reading order and never touch: touching runs would
        // have been one.
        if let Some((px, py, pw)) = previous {
            assert!(
                y > py || (y == py && x > px + pw),
                "{previous:?} then {:?}",
                (x, y, w)
            );
        }
        previous = Some((x, y, w));
        let (x, y) = (x - opts.margin, y - opts.margin);
        for dx in 0..w {
            drawn[(y * width + x + dx) as usize] = true;
        }
    }
    assert!(
        drawn == code_modules(text, opts.level),
        "path differs from the code"
    );
}

fn every_combination(size: u32) -> (usize, usize) {
    let (mut rendered, mut too_small) = (0, 0);
    let long = long_url();
    for text in [SHORT_URL, long.as_str()] {
        for level in LEVELS {
            for margin in [0, 4, MAX_MARGIN] {
                for colours in COLOURS {
                    let opts = options(Format::Svg, size, margin, level, colours);
                    let Some(bytes) = render_or_too_small(text, &opts) else {
                        too_small += 1;
                        continue;
                    };
                    assert_document(&bytes, text, &opts);
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
    assert!(rendered >= 16, "{rendered}");
    assert!(too_small >= 24, "{too_small}");
}

#[test]
fn at_512_px_every_level_margin_and_colour_scans() {
    assert_eq!(every_combination(512), (48, 0));
}

/// A few cases only, as for PNG (see there).
#[test]
fn at_4096_px_codes_scan() {
    let long = long_url();
    for (text, level, margin, colours) in [
        (SHORT_URL, Level::Q, MAX_MARGIN, (INK, PAPER)),
        (long.as_str(), Level::M, 4, (Color::BLACK, Color::WHITE)),
    ] {
        let opts = options(Format::Svg, 4096, margin, level, colours);
        let bytes = render(text, &opts).unwrap_or_else(|e| panic!("{e}"));
        assert_document(&bytes, text, &opts);
        assert_scans_back(&bytes, text, &opts);
    }
}

#[test]
fn the_default_document_is_exactly_this_shape() {
    let bytes = render(SHORT_URL, &Options::default()).unwrap_or_else(|e| panic!("{e}"));
    let svg = String::from_utf8(bytes).unwrap_or_else(|e| panic!("{e}"));
    let head = r##"<svg xmlns="http://www.w3.org/2000/svg" width="512" height="512" viewBox="0 0 37 37" shape-rendering="crispEdges"><rect width="37" height="37" fill="#ffffff"/><path fill="#000000" d="M4 4h7v1h-7z"##;
    assert!(svg.starts_with(head), "{svg}");
    assert_eq!(svg.matches("<path").count(), 1);
    // A few hundred runs for a version 3 code, not hundreds of elements.
    assert!(svg.len() < 6_000, "{} bytes", svg.len());
}

#[test]
fn rasterised_pixels_are_only_the_two_colours() {
    // crispEdges turns anti-aliasing off, even at 512 / 37 pixels a module.
    let opts = options(Format::Svg, 512, 4, Level::M, (INK, PAPER));
    let bytes = render(SHORT_URL, &opts).unwrap_or_else(|e| panic!("{e}"));
    let image = rasterise_svg(&bytes);
    let (fg, bg) = (INK.components(), PAPER.components());
    assert!(image.pixels.iter().all(|&p| p == fg || p == bg));
    assert!(image.pixels.contains(&fg) && image.pixels.contains(&bg));
}
