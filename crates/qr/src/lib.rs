#![doc = include_str!("../README.md")]

mod bitmap;
mod error;
mod matrix;
mod options;
mod svg;

pub use error::{EncodeError, QrError};
pub use options::{Color, Format, Level, MAX_MARGIN, MAX_SIZE, MIN_SIZE, OptionError, Options};

use matrix::{Layout, Matrix};

/// Renders `text` as a QR code image in `opts.format`.
///
/// The code is the smallest QR code version that holds the text at
/// `opts.level`. ASCII text is segmented into numeric, alphanumeric and byte
/// runs for the smallest code; other text is stored as UTF-8 in byte mode.
///
/// # Errors
///
/// - [`QrError::SizeOutOfRange`], [`QrError::MarginOutOfRange`], [`QrError::SameColours`]: see
///   [`Options::validate`].
/// - [`QrError::DataTooLong`]: the text does not fit any QR code at this level.
/// - [`QrError::TooSmall`]: the code and its quiet zone have more modules
///   across than `opts.size` has pixels (for both formats, so that an SVG and
///   a PNG of the same options succeed or fail together).
/// - [`QrError::Encode`]: an encoder failed; not expected.
pub fn render(text: &str, opts: &Options) -> Result<Vec<u8>, QrError> {
    opts.validate()?;
    let matrix = Matrix::encode(text, opts.level)?;
    let layout = Layout::new(&matrix, opts)?;
    match opts.format {
        Format::Svg => Ok(svg::Svg {
            matrix: &matrix,
            layout,
            opts,
        }
        .to_string()
        .into_bytes()),
        Format::Png => bitmap::render(&matrix, layout, opts),
    }
}
