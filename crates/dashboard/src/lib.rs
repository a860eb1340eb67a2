#![doc = include_str!("../README.md")]

use std::borrow::Cow;
use std::collections::HashMap;
use std::io::Write;
use std::sync::LazyLock;

use flate2::Compression;
use flate2::write::GzEncoder;
use rust_embed::Embed;

/// The path prefix under which the assets are served (`/assets/app.js`). `assets` is one of the
/// reserved slugs, so no short link can take it.
pub const PREFIX: &str = "/assets";

/// The page served at `/`: the dashboard is one page that loads its scripts as modules.
pub const INDEX: &str = "index.html";

/// Every file under `assets/`, compiled into the binary (in debug builds too).
#[derive(Embed)]
#[folder = "assets/"]
struct Files;

/// One embedded file, ready to serve.
#[derive(Debug)]
pub struct Asset {
    bytes: Cow<'static, [u8]>,
    content_type: &'static str,
    etag: String,
    gzip: Option<Vec<u8>>,
}

impl Asset {
    /// The file's bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Its `Content-Type`, with `charset=utf-8` on text.
    pub fn content_type(&self) -> &'static str {
        self.content_type
    }

    /// Its `ETag`: the start of the file's SHA-256, so it changes with the content; weak, because
    /// the plain and the gzipped forms share it.
    pub fn etag(&self) -> &str {
        &self.etag
    }

    /// The file gzipped, when that makes it smaller (text, not PNG).
    pub fn gzip(&self) -> Option<&[u8]> {
        self.gzip.as_deref()
    }
}

/// Looks an asset up by its path below the prefix (`app.js`, `pages/links.js`); `None` for a path
/// that is not an embedded file.
pub fn lookup(path: &str) -> Option<&'static Asset> {
    ASSETS.get(path)
}

/// The paths of every embedded file.
pub fn paths() -> impl Iterator<Item = &'static str> {
    ASSETS.keys().map(String::as_str)
}

/// Built once, on first use: every file with its type, tag and compressed form.
static ASSETS: LazyLock<HashMap<String, Asset>> = LazyLock::new(|| {
    Files::iter()
        .filter_map(|path| {
            let file = Files::get(&path)?;
            let content_type = content_type(&path);
            let hex: String = file.metadata.sha256_hash()[..16]
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            let etag = format!("W/\"{hex}\"");
            let gzip = content_type
                .contains("charset")
                .then(|| gzip(&file.data))
                .filter(|gz| gz.len() < file.data.len());
            Some((
                path.into_owned(),
                Asset {
                    bytes: file.data,
                    content_type,
                    etag,
                    gzip,
                },
            ))
        })
        .collect()
});

/// The type of each kind of file the dashboard ships; anything else is served as opaque bytes
/// (and a test makes sure there is nothing else).
fn content_type(path: &str) -> &'static str {
    match path.rsplit_once('.').map(|(_, ext)| ext) {
        Some("html") => "text/html; charset=utf-8",
        Some("css") => "text/css; charset=utf-8",
        Some("js") => "text/javascript; charset=utf-8",
        Some("svg") => "image/svg+xml; charset=utf-8",
        Some("json") => "application/json; charset=utf-8",
        Some("png") => "image/png",
        _ => "application/octet-stream",
    }
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = GzEncoder::new(Vec::new(), Compression::best());
    // Writing into a Vec cannot fail.
    encoder
        .write_all(bytes)
        .and_then(|()| encoder.finish())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_file_has_a_known_type_and_the_index_is_there() {
        assert!(lookup(INDEX).is_some());
        for path in paths() {
            let asset = lookup(path).expect("listed");
            assert_ne!(asset.content_type(), "application/octet-stream", "{path}");
            assert_eq!(asset.etag().len(), 36, "{path}");
            assert!(asset.etag().starts_with("W/\"") && asset.etag().ends_with('"'));
        }
    }

    #[test]
    fn gzip_round_trips() {
        let asset = lookup(INDEX).expect("index");
        let gz = asset.gzip().expect("HTML compresses");
        let mut out = Vec::new();
        std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(gz), &mut out)
            .expect("valid gzip");
        assert_eq!(out, asset.bytes());
    }

    /// The budget: every asset together, gzipped, at most 300 KiB.
    #[test]
    fn assets_fit_the_budget() {
        let total: usize = paths()
            .filter_map(lookup)
            .map(|a| a.gzip().map_or(a.bytes().len(), <[u8]>::len))
            .sum();
        assert!(total <= 300 * 1024, "{total} bytes gzipped");
    }
}
