//! Every input error `render` reports, and the edge cases of text.

use shortlink_qr::{Format, Level, MAX_MARGIN, MAX_SIZE, MIN_SIZE, Options, QrError, render};

use crate::support::{SHORT_URL, assert_scans_back, long_url};

fn opts(format: Format, size: u32, margin: u32, level: Level) -> Options {
    Options {
        format,
        size,
        margin,
        level,
        ..Options::default()
    }
}

#[test]
fn sizes_outside_the_range_are_refused() {
    for format in [Format::Svg, Format::Png] {
        for size in [0, 1, MIN_SIZE - 1, MAX_SIZE + 1, u32::MAX] {
            let result = render(SHORT_URL, &opts(format, size, 4, Level::M));
            assert!(
                matches!(result, Err(QrError::SizeOutOfRange { size: s }) if s == size),
                "{size}: {result:?}"
            );
        }
        for size in [MIN_SIZE, MAX_SIZE] {
            assert!(render(SHORT_URL, &opts(format, size, 0, Level::L)).is_ok());
        }
    }
}

#[test]
fn margins_over_the_maximum_are_refused() {
    for format in [Format::Svg, Format::Png] {
        for margin in [MAX_MARGIN + 1, 1000, u32::MAX] {
            let result = render(SHORT_URL, &opts(format, 512, margin, Level::M));
            assert!(
                matches!(result, Err(QrError::MarginOutOfRange { margin: m }) if m == margin),
                "{margin}: {result:?}"
            );
        }
    }
}

#[test]
fn text_over_the_capacity_of_version_40_is_too_long() {
    // Version 40 holds 2953 bytes at level L and 1273 at level H (byte mode;
    // lower case letters are not alphanumeric-mode characters).
    for (level, capacity) in [(Level::L, 2953), (Level::H, 1273)] {
        let fits = "x".repeat(capacity);
        let bytes = render(&fits, &opts(Format::Png, 1024, 4, level))
            .unwrap_or_else(|e| panic!("{level:?}: {e}"));
        assert!(!bytes.is_empty());
        let over = "x".repeat(capacity + 1);
        let result = render(&over, &opts(Format::Png, 1024, 4, level));
        assert!(
            matches!(result, Err(QrError::DataTooLong { len }) if len == capacity + 1),
            "{level:?}: {result:?}"
        );
    }
}

#[test]
fn huge_text_is_too_long_quickly() {
    let text = "y".repeat(10 << 20);
    let started = std::time::Instant::now();
    let result = render(&text, &Options::default());
    assert!(matches!(result, Err(QrError::DataTooLong { len }) if len == text.len()));
    assert!(
        started.elapsed().as_millis() < 100,
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn a_code_wider_than_the_image_is_too_small() {
    // 300 characters at level H: version 18, 89 modules; with a margin of 4,
    // 97 modules do not fit in 64 pixels.
    let long = long_url();
    for format in [Format::Svg, Format::Png] {
        let result = render(&long, &opts(format, 64, 4, Level::H));
        assert!(
            matches!(
                result,
                Err(QrError::TooSmall {
                    size: 64,
                    modules: 97
                })
            ),
            "{result:?}"
        );
        let message = result.map(|_| ()).err().map(|e| e.to_string());
        assert_eq!(
            message.as_deref(),
            Some(
                "a code 97 modules wide (quiet zone included) does not fit in 64 pixels; \
                 use a larger size, a smaller margin or a lower level"
            )
        );
    }
}

#[test]
fn options_are_checked_before_the_text() {
    let result = render(&"x".repeat(5000), &opts(Format::Png, 10, 4, Level::M));
    assert!(matches!(result, Err(QrError::SizeOutOfRange { size: 10 })));
}

#[test]
fn awkward_texts_scan_back() {
    let texts = [
        "",
        "0123456789012345678901234567890123456789",
        "HTTPS://SHO.RT/ABC-123",
        "https://bücher.example/straße?q=日本語&emoji=😀",
        "Привет, мир",
        "line\nbreak\ttab\0nul",
    ];
    for text in texts {
        for format in [Format::Svg, Format::Png] {
            let opts = opts(format, 512, 4, Level::Q);
            let bytes = render(text, &opts).unwrap_or_else(|e| panic!("{text:?}: {e}"));
            let image = match format {
                Format::Png => crate::support::decode_png(&bytes).image,
                Format::Svg => crate::support::rasterise_svg(&bytes),
            };
            let scan = crate::support::scan(&image);
            assert_eq!(scan.text, text, "{format:?}");
            assert_eq!(scan.level, Level::Q);
        }
    }
    // The ASCII ones also match the encoder's own segmentation exactly.
    assert_scans_back(
        &render(texts[1], &opts(Format::Png, 512, 4, Level::Q)).unwrap_or_else(|e| panic!("{e}")),
        texts[1],
        &opts(Format::Png, 512, 4, Level::Q),
    );
}
