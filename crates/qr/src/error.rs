//! The one error type of [`render`](crate::render).
//!
//! Parsing an option from a string fails with the smaller
//! [`OptionError`](crate::OptionError) instead, which says nothing about rendering.

use std::fmt;

use crate::{MAX_MARGIN, MAX_SIZE, MIN_SIZE};

/// Why no image was produced.
///
/// All but [`QrError::Encode`] are the caller's input; `Encode` is a fault in
/// this crate or its encoders and is not expected to happen.
#[derive(Debug, thiserror::Error)]
pub enum QrError {
    /// `size` is outside `MIN_SIZE..=MAX_SIZE`.
    #[error("size must be between {MIN_SIZE} and {MAX_SIZE} pixels, not {size}")]
    SizeOutOfRange {
        /// The size that was asked for.
        size: u32,
    },
    /// `margin` is over `MAX_MARGIN`.
    #[error("margin must be between 0 and {MAX_MARGIN} modules, not {margin}")]
    MarginOutOfRange {
        /// The margin that was asked for.
        margin: u32,
    },
    /// The text does not fit in the largest QR code (version 40) at the
    /// requested error correction level.
    #[error("text of {len} bytes is too long for a QR code at this error correction level")]
    DataTooLong {
        /// The length of the text in bytes.
        len: usize,
    },
    /// The code, quiet zone included, has more modules across than the image
    /// has pixels, so a module would be smaller than a pixel.
    #[error(
        "a code {modules} modules wide (quiet zone included) does not fit in {size} pixels; \
         use a larger size, a smaller margin or a lower level"
    )]
    TooSmall {
        /// The size that was asked for.
        size: u32,
        /// Modules across: the code's width plus twice the margin.
        modules: u32,
    },
    /// `fg` and `bg` are the same colour: the code would be a blank square.
    #[error("fg and bg must differ: a code in one colour cannot be scanned")]
    SameColours,
    /// An encoder failed on input this crate prepared.
    #[error("could not encode the image")]
    Encode(#[source] EncodeError),
}

/// The cause of a [`QrError::Encode`]: which encoder failed and how.
#[derive(Debug)]
pub struct EncodeError(Inner);

#[derive(Debug)]
enum Inner {
    Qr(qrcode::types::QrError),
    Png(png::EncodingError),
}

impl fmt::Display for EncodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Inner::Qr(e) => write!(f, "QR encoder: {e}"),
            Inner::Png(e) => write!(f, "PNG encoder: {e}"),
        }
    }
}

impl std::error::Error for EncodeError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.0 {
            Inner::Qr(e) => Some(e),
            Inner::Png(e) => Some(e),
        }
    }
}

impl From<png::EncodingError> for QrError {
    fn from(e: png::EncodingError) -> Self {
        Self::Encode(EncodeError(Inner::Png(e)))
    }
}

impl QrError {
    /// Maps the QR encoder's error: only "too long" is the caller's doing.
    pub(crate) fn from_qr(e: qrcode::types::QrError, len: usize) -> Self {
        match e {
            qrcode::types::QrError::DataTooLong => Self::DataTooLong { len },
            other => Self::Encode(EncodeError(Inner::Qr(other))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qr_encoder_errors_other_than_length_are_encode_errors() {
        let e = QrError::from_qr(qrcode::types::QrError::InvalidVersion, 3);
        assert!(matches!(e, QrError::Encode(_)));
        let source = std::error::Error::source(&e).map(ToString::to_string);
        assert_eq!(source.as_deref(), Some("QR encoder: invalid version"));
        assert!(matches!(
            QrError::from_qr(qrcode::types::QrError::DataTooLong, 3000),
            QrError::DataTooLong { len: 3000 }
        ));
    }

    #[test]
    fn messages_name_the_limits() {
        assert_eq!(
            QrError::SizeOutOfRange { size: 10 }.to_string(),
            "size must be between 64 and 4096 pixels, not 10"
        );
        assert_eq!(
            QrError::MarginOutOfRange { margin: 17 }.to_string(),
            "margin must be between 0 and 16 modules, not 17"
        );
    }
}
