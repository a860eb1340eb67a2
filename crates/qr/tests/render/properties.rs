//! Properties over arbitrary input: no panics, and what renders scans back.

use proptest::prelude::*;
use shortlink_qr::{
    Color, Format, Level, MAX_MARGIN, MAX_SIZE, MIN_SIZE, Options, QrError, render,
};

use crate::support::{decode_png, rasterise_svg, scan};

fn level() -> impl Strategy<Value = Level> {
    prop_oneof![
        Just(Level::L),
        Just(Level::M),
        Just(Level::Q),
        Just(Level::H)
    ]
}

fn format() -> impl Strategy<Value = Format> {
    prop_oneof![Just(Format::Svg), Just(Format::Png)]
}

fn color() -> impl Strategy<Value = Color> {
    any::<[u8; 3]>().prop_map(|[r, g, b]| Color::rgb(r, g, b))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Any text and any options give an image or a typed error, never a
    /// panic; the image has the asked size.
    #[test]
    fn render_never_panics(
        text in prop_oneof![".{0,64}", "\\PC{0,3000}", "[0-9]{0,8000}"],
        format in format(),
        // Mostly valid sizes (kept small to keep the test fast), some not.
        size in prop_oneof![4 => MIN_SIZE..=700, 1 => 0..MIN_SIZE, 1 => MAX_SIZE + 1..=u32::MAX],
        margin in prop_oneof![4 => 0..=MAX_MARGIN, 1 => MAX_MARGIN + 1..=u32::MAX],
        level in level(),
        fg in color(),
        bg in color(),
    ) {
        let opts = Options { format, size, margin, level, fg, bg };
        match render(&text, &opts) {
            Ok(bytes) => {
                let (w, h) = match format {
                    Format::Png => {
                        let image = decode_png(&bytes).image;
                        (image.width, image.height)
                    }
                    Format::Svg => {
                        let image = rasterise_svg(&bytes);
                        (image.width, image.height)
                    }
                };
                prop_assert_eq!((w, h), (size, size));
            }
            Err(QrError::SizeOutOfRange { .. }) => prop_assert!(!(MIN_SIZE..=MAX_SIZE).contains(&size)),
            Err(QrError::MarginOutOfRange { .. }) => prop_assert!(margin > MAX_MARGIN),
            Err(QrError::DataTooLong { len }) => prop_assert!(len == text.len() && len > 1000),
            Err(QrError::TooSmall { modules, .. }) => prop_assert!(modules > size),
            Err(QrError::SameColours) => prop_assert_eq!(fg, bg),
            Err(e @ QrError::Encode(_)) => prop_assert!(false, "{e}"),
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Any text that renders scans back to itself, in either format.
    #[test]
    fn text_round_trips(
        text in prop_oneof!["[ -~]{0,120}", "\\PC{0,40}"],
        format in format(),
        level in level(),
    ) {
        let opts = Options { format, size: 400, level, ..Options::default() };
        let bytes = render(&text, &opts).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let image = match format {
            Format::Png => decode_png(&bytes).image,
            Format::Svg => rasterise_svg(&bytes),
        };
        let scanned = scan(&image);
        prop_assert_eq!(scanned.text, text);
        prop_assert_eq!(scanned.level, level);
    }
}
