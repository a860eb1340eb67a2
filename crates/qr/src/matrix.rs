//! The QR code as a grid of modules, and where that grid goes in the image.

use qrcode::bits::Bits;
use qrcode::{EcLevel, QrCode, Version};

use crate::{Level, Options, QrError};

/// The most characters any QR code holds (7089 digits in numeric mode at
/// level L). Every character takes at least one byte, so longer text is
/// refused before the encoder spends time on it.
const MAX_TEXT_BYTES: usize = 7089;

/// A QR code without its quiet zone: `width × width` modules, row by row.
pub(crate) struct Matrix {
    width: usize,
    dark: Vec<bool>,
}

impl Matrix {
    /// Encodes `text` in the smallest QR code version that holds it at `level`.
    pub(crate) fn encode(text: &str, level: Level) -> Result<Self, QrError> {
        let len = text.len();
        if len > MAX_TEXT_BYTES {
            return Err(QrError::DataTooLong { len });
        }
        let ec = level.ec_level();
        let code = if text.is_ascii() {
            QrCode::with_error_correction_level(text, ec)
        } else {
            encode_bytes(text.as_bytes(), ec)
        }
        .map_err(|e| QrError::from_qr(e, len))?;
        let width = code.width();
        let dark = code
            .into_colors()
            .into_iter()
            .map(|c| c == qrcode::Color::Dark)
            .collect();
        Ok(Self { width, dark })
    }

    /// Modules across, without the quiet zone.
    pub(crate) const fn width(&self) -> usize {
        self.width
    }

    /// Row `y`: `true` for a dark module.
    pub(crate) fn row(&self, y: usize) -> &[bool] {
        &self.dark[y * self.width..(y + 1) * self.width]
    }

    /// The horizontal runs of dark modules in row `y`, as `(first x, length)`.
    pub(crate) fn dark_runs(&self, y: usize) -> impl Iterator<Item = (usize, usize)> + '_ {
        let row = self.row(y);
        let mut x = 0;
        std::iter::from_fn(move || {
            let start = x + row[x..].iter().position(|&d| d)?;
            let len = row[start..].iter().take_while(|&&d| d).count();
            x = start + len;
            Some((start, len))
        })
    }
}

/// Encodes non-ASCII text in byte mode only.
///
/// The encoder's automatic segmentation treats byte pairs that are valid
/// Shift JIS as Kanji, and many UTF-8 sequences are (e.g. `日` is E6 97 A5):
/// a reader would then decode those pairs as Shift JIS and show other text.
/// Byte mode keeps the UTF-8 bytes as they are, which is what readers expect.
fn encode_bytes(data: &[u8], ec: EcLevel) -> qrcode::QrResult<QrCode> {
    for version in 1..=40 {
        let mut bits = Bits::new(Version::Normal(version));
        if bits.push_byte_data(data).is_ok() && bits.push_terminator(ec).is_ok() {
            return QrCode::with_bits(bits, ec);
        }
    }
    Err(qrcode::types::QrError::DataTooLong)
}

/// Where the modules go in a `size × size` image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Layout {
    /// Modules across, quiet zone included: the code's width plus twice the margin.
    pub(crate) modules: u32,
    /// The quiet zone in modules.
    pub(crate) margin: u32,
    /// Pixels per module side in a PNG: `size / modules`, at least 1.
    pub(crate) module_px: u32,
    /// Pixels before the first module of the quiet zone, left and top: half of
    /// what is left over after `modules * module_px`, rounded down.
    pub(crate) offset: u32,
}

impl Layout {
    /// The layout of `matrix` under `opts`, whose size and margin have been
    /// validated.
    pub(crate) fn new(matrix: &Matrix, opts: &Options) -> Result<Self, QrError> {
        // The width is at most 177 (version 40) and the margin at most
        // MAX_MARGIN, so this neither truncates nor overflows.
        let modules = matrix.width() as u32 + 2 * opts.margin;
        let module_px = opts.size / modules;
        if module_px == 0 {
            return Err(QrError::TooSmall {
                size: opts.size,
                modules,
            });
        }
        Ok(Self {
            modules,
            margin: opts.margin,
            module_px,
            offset: (opts.size - modules * module_px) / 2,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matrix(rows: &[&str]) -> Matrix {
        Matrix {
            width: rows.len(),
            dark: rows
                .iter()
                .flat_map(|r| r.chars().map(|c| c == '#'))
                .collect(),
        }
    }

    #[test]
    fn dark_runs_merge_neighbours() {
        let m = matrix(&["#..##", "#####", ".....", "..#.#", "...##"]);
        let runs = |y| m.dark_runs(y).collect::<Vec<_>>();
        assert_eq!(runs(0), [(0, 1), (3, 2)]);
        assert_eq!(runs(1), [(0, 5)]);
        assert_eq!(runs(2), []);
        assert_eq!(runs(3), [(2, 1), (4, 1)]);
        assert_eq!(runs(4), [(3, 2)]);
    }

    #[test]
    fn layout_spreads_the_leftover_pixels() {
        // Version 1 is 21 modules; with margin 4 that is 29 across.
        let m = Matrix::encode("hi", Level::M).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(m.width(), 21);
        let opts = |size, margin| Options {
            size,
            margin,
            ..Options::default()
        };
        let layout = Layout::new(&m, &opts(512, 4)).unwrap_or_else(|e| panic!("{e}"));
        // 512 / 29 = 17, 29 * 17 = 493, 19 left over: 9 before, 10 after.
        assert_eq!(
            layout,
            Layout {
                modules: 29,
                margin: 4,
                module_px: 17,
                offset: 9
            }
        );
        let layout = Layout::new(&m, &opts(64, 0)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((layout.module_px, layout.offset), (3, 0));
        assert!(matches!(
            Layout::new(&m, &opts(64, 22)),
            Err(QrError::TooSmall {
                size: 64,
                modules: 65
            })
        ));
    }

    #[test]
    fn the_encoders_segmentation_misreads_utf8_as_kanji() {
        // Why non-ASCII text bypasses the encoder's segmentation: "ß" is C3 9F
        // in UTF-8, a valid Shift JIS pair. The integration tests decode such
        // text and compare it.
        let segments = qrcode::optimize::Parser::new("straße".as_bytes());
        assert!(
            segments
                .into_iter()
                .any(|s| s.mode == qrcode::types::Mode::Kanji)
        );
    }

    #[test]
    fn non_ascii_text_takes_the_smallest_byte_mode_version() {
        // Byte mode at level H holds 14 bytes in version 2 (25 modules) and
        // 24 in version 3 (29 modules): 18 UTF-8 bytes need version 3, 12 fit
        // in version 2.
        let m = Matrix::encode("日本語日本語", Level::H).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(m.width(), 29);
        let m = Matrix::encode("日本語日", Level::H).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(m.width(), 25);
    }

    #[test]
    fn overlong_text_is_refused_early() {
        let text = "9".repeat(MAX_TEXT_BYTES + 1);
        assert!(matches!(
            Matrix::encode(&text, Level::L),
            Err(QrError::DataTooLong { len }) if len == MAX_TEXT_BYTES + 1
        ));
        // The largest all-digit text still fits at level L.
        let text = "9".repeat(MAX_TEXT_BYTES);
        assert_eq!(
            Matrix::encode(&text, Level::L)
                .unwrap_or_else(|e| panic!("{e}"))
                .width(),
            177
        );
    }
}
