//! The rendering options and the strings they parse from.

use std::fmt;
use std::str::FromStr;

use crate::QrError;

/// The smallest image side, in pixels, that [`render`](crate::render) accepts.
pub const MIN_SIZE: u32 = 64;
/// The largest image side, in pixels, that [`render`](crate::render) accepts.
pub const MAX_SIZE: u32 = 4096;
/// The widest quiet zone, in modules, that [`render`](crate::render) accepts.
pub const MAX_MARGIN: u32 = 16;

/// A string that does not name a valid option value.
///
/// Each variant's message says what is accepted, so it can be shown to the
/// person who typed the value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum OptionError {
    /// Not `svg` or `png`.
    #[error("format must be svg or png")]
    Format,
    /// Not one of `L`, `M`, `Q`, `H`.
    #[error("level must be one of L, M, Q, H")]
    Level,
    /// Not of the form `#rrggbb`.
    #[error("colour must have the form #rrggbb")]
    Color,
}

/// The image format to produce.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Format {
    /// Scalable Vector Graphics: one background rectangle and one path.
    #[default]
    Svg,
    /// A pixel-exact PNG (see the crate documentation for the layout rule).
    Png,
}

impl Format {
    /// The media type to send with an image of this format.
    #[must_use]
    pub const fn content_type(self) -> &'static str {
        match self {
            Self::Svg => "image/svg+xml",
            Self::Png => "image/png",
        }
    }

    /// The lower-case name, as accepted by [`FromStr`] and printed by [`Display`](fmt::Display).
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Svg => "svg",
            Self::Png => "png",
        }
    }
}

impl FromStr for Format {
    type Err = OptionError;

    /// Parses `svg` or `png`, in any case.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.eq_ignore_ascii_case("svg") {
            Ok(Self::Svg)
        } else if s.eq_ignore_ascii_case("png") {
            Ok(Self::Png)
        } else {
            Err(OptionError::Format)
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The error correction level: how much of the code can be damaged or hidden
/// and still scan. Higher levels need more modules for the same text.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Level {
    /// About 7% of the codewords can be restored.
    L,
    /// About 15% of the codewords can be restored.
    #[default]
    M,
    /// About 25% of the codewords can be restored.
    Q,
    /// About 30% of the codewords can be restored.
    H,
}

impl Level {
    /// The upper-case letter, as printed by [`Display`](fmt::Display).
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::L => "L",
            Self::M => "M",
            Self::Q => "Q",
            Self::H => "H",
        }
    }

    pub(crate) const fn ec_level(self) -> qrcode::EcLevel {
        match self {
            Self::L => qrcode::EcLevel::L,
            Self::M => qrcode::EcLevel::M,
            Self::Q => qrcode::EcLevel::Q,
            Self::H => qrcode::EcLevel::H,
        }
    }
}

impl FromStr for Level {
    type Err = OptionError;

    /// Parses one of `L`, `M`, `Q`, `H`, upper or lower case.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "L" | "l" => Ok(Self::L),
            "M" | "m" => Ok(Self::M),
            "Q" | "q" => Ok(Self::Q),
            "H" | "h" => Ok(Self::H),
            _ => Err(OptionError::Level),
        }
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An opaque sRGB colour.
///
/// Parses from and prints as `#rrggbb`; parsing accepts either case of hex
/// digit, printing uses lower case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Color([u8; 3]);

impl Color {
    /// `#000000`, the default foreground.
    pub const BLACK: Self = Self([0, 0, 0]);
    /// `#ffffff`, the default background.
    pub const WHITE: Self = Self([0xff, 0xff, 0xff]);

    /// The colour with these red, green and blue components.
    #[must_use]
    pub const fn rgb(r: u8, g: u8, b: u8) -> Self {
        Self([r, g, b])
    }

    /// The red, green and blue components.
    #[must_use]
    pub const fn components(self) -> [u8; 3] {
        self.0
    }

    /// The grey level, if red, green and blue are equal.
    pub(crate) const fn gray(self) -> Option<u8> {
        let [r, g, b] = self.0;
        if r == g && g == b { Some(r) } else { None }
    }
}

impl FromStr for Color {
    type Err = OptionError;

    /// Parses exactly `#` followed by six hex digits.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let digits = match s.as_bytes() {
            [b'#', digits @ ..] if digits.len() == 6 => digits,
            _ => return Err(OptionError::Color),
        };
        let mut rgb = [0_u8; 3];
        for (component, pair) in rgb.iter_mut().zip(digits.chunks_exact(2)) {
            *component = hex_value(pair[0])? << 4 | hex_value(pair[1])?;
        }
        Ok(Self(rgb))
    }
}

/// The value of one ASCII hex digit. Written out rather than using
/// `u8::from_str_radix`, which also accepts a leading `+`.
fn hex_value(digit: u8) -> Result<u8, OptionError> {
    match digit {
        b'0'..=b'9' => Ok(digit - b'0'),
        b'a'..=b'f' => Ok(digit - b'a' + 10),
        b'A'..=b'F' => Ok(digit - b'A' + 10),
        _ => Err(OptionError::Color),
    }
}

impl fmt::Display for Color {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [r, g, b] = self.0;
        write!(f, "#{r:02x}{g:02x}{b:02x}")
    }
}

/// Everything that shapes the image besides the text.
///
/// The fields are public and any combination can be built; [`render`](crate::render)
/// checks the ranges of `size` and `margin` (see [`Options::validate`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Options {
    /// SVG or PNG.
    pub format: Format,
    /// The side of the square image in pixels, [`MIN_SIZE`]`..=`[`MAX_SIZE`].
    pub size: u32,
    /// The quiet zone around the code, in modules, `0..=`[`MAX_MARGIN`].
    /// Scanners want 4; less is for codes placed on a plain background anyway.
    pub margin: u32,
    /// The error correction level.
    pub level: Level,
    /// The colour of the dark modules.
    pub fg: Color,
    /// The colour of the light modules and the quiet zone.
    pub bg: Color,
}

impl Default for Options {
    /// SVG, 512 pixels, a margin of 4 modules, level M, black on white.
    fn default() -> Self {
        Self {
            format: Format::Svg,
            size: 512,
            margin: 4,
            level: Level::M,
            fg: Color::BLACK,
            bg: Color::WHITE,
        }
    }
}

impl Options {
    /// Checks `size` and `margin` against their ranges and that `fg` and `bg`
    /// differ, so a caller can reject bad options before it has the text at
    /// hand. [`render`](crate::render) makes the same checks.
    ///
    /// # Errors
    ///
    /// [`QrError::SizeOutOfRange`], [`QrError::MarginOutOfRange`] or
    /// [`QrError::SameColours`].
    pub const fn validate(&self) -> Result<(), QrError> {
        if self.size < MIN_SIZE || self.size > MAX_SIZE {
            return Err(QrError::SizeOutOfRange { size: self.size });
        }
        if self.margin > MAX_MARGIN {
            return Err(QrError::MarginOutOfRange {
                margin: self.margin,
            });
        }
        let (fg, bg) = (self.fg.0, self.bg.0);
        if fg[0] == bg[0] && fg[1] == bg[1] && fg[2] == bg[2] {
            return Err(QrError::SameColours);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_parses_case_insensitively() {
        for (input, want) in [
            ("svg", Format::Svg),
            ("SVG", Format::Svg),
            ("Svg", Format::Svg),
            ("png", Format::Png),
            ("PNG", Format::Png),
            ("pNg", Format::Png),
        ] {
            assert_eq!(input.parse::<Format>(), Ok(want), "{input}");
        }
        for input in ["", "jpg", "svg ", " png", "svgz", "image/png", "ſvg"] {
            assert_eq!(
                input.parse::<Format>(),
                Err(OptionError::Format),
                "{input:?}"
            );
        }
    }

    #[test]
    fn format_prints_and_names_its_media_type() {
        assert_eq!(Format::Svg.to_string(), "svg");
        assert_eq!(Format::Png.to_string(), "png");
        assert_eq!(Format::Svg.content_type(), "image/svg+xml");
        assert_eq!(Format::Png.content_type(), "image/png");
        assert_eq!(Format::default(), Format::Svg);
    }

    #[test]
    fn level_parses_either_case() {
        for (input, want) in [
            ("L", Level::L),
            ("l", Level::L),
            ("M", Level::M),
            ("m", Level::M),
            ("Q", Level::Q),
            ("q", Level::Q),
            ("H", Level::H),
            ("h", Level::H),
        ] {
            assert_eq!(input.parse::<Level>(), Ok(want), "{input}");
            assert_eq!(want.to_string(), input.to_ascii_uppercase());
        }
        for input in ["", "X", "LL", "low", "m ", "7"] {
            assert_eq!(input.parse::<Level>(), Err(OptionError::Level), "{input:?}");
        }
        assert_eq!(Level::default(), Level::M);
    }

    #[test]
    fn color_parses_exactly_rrggbb() {
        assert_eq!("#1a237e".parse(), Ok(Color::rgb(0x1a, 0x23, 0x7e)));
        assert_eq!("#FFF8E1".parse(), Ok(Color::rgb(0xff, 0xf8, 0xe1)));
        assert_eq!("#000000".parse(), Ok(Color::BLACK));
        assert_eq!("#ffffff".parse(), Ok(Color::WHITE));
        for input in [
            "",
            "#",
            "1a237e",
            "#1a237",
            "#1a237e0",
            "#fff",
            "#gggggg",
            "# 1a237",
            "#+1a237",
            "#1a237e ",
            "rgb(1,2,3)",
            "#1a2é7",
            "##1a237e",
        ] {
            assert_eq!(input.parse::<Color>(), Err(OptionError::Color), "{input:?}");
        }
    }

    #[test]
    fn color_prints_lower_case_and_round_trips() {
        assert_eq!(Color::rgb(0x1A, 0x23, 0x7E).to_string(), "#1a237e");
        assert_eq!(Color::BLACK.to_string(), "#000000");
        assert_eq!(Color::WHITE.components(), [255, 255, 255]);
        for c in [Color::rgb(1, 2, 3), Color::rgb(255, 0, 128)] {
            assert_eq!(c.to_string().parse(), Ok(c));
        }
    }

    #[test]
    fn defaults_are_the_documented_ones() {
        let o = Options::default();
        assert_eq!(o.format, Format::Svg);
        assert_eq!(o.size, 512);
        assert_eq!(o.margin, 4);
        assert_eq!(o.level, Level::M);
        assert_eq!(o.fg, Color::BLACK);
        assert_eq!(o.bg, Color::WHITE);
    }

    #[test]
    fn validate_checks_the_ranges_inclusively() {
        let with = |size, margin| Options {
            size,
            margin,
            ..Options::default()
        };
        assert!(with(MIN_SIZE, 0).validate().is_ok());
        assert!(with(MAX_SIZE, MAX_MARGIN).validate().is_ok());
        for size in [0, MIN_SIZE - 1, MAX_SIZE + 1, u32::MAX] {
            assert!(matches!(
                with(size, 4).validate(),
                Err(QrError::SizeOutOfRange { size: s }) if s == size
            ));
        }
        for margin in [MAX_MARGIN + 1, u32::MAX] {
            assert!(matches!(
                with(512, margin).validate(),
                Err(QrError::MarginOutOfRange { margin: m }) if m == margin
            ));
        }
        let blank = Options {
            fg: Color::WHITE,
            ..Options::default()
        };
        assert!(matches!(blank.validate(), Err(QrError::SameColours)));
    }
}
