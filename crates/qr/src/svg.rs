//! The SVG image: one background rectangle and one path for all dark modules.

use std::fmt;

use crate::Options;
use crate::matrix::{Layout, Matrix};

/// Writes the document through [`fmt::Display`], so it goes straight into
/// one `String` with no intermediate allocations and no write results to
/// ignore.
pub(crate) struct Svg<'a> {
    pub(crate) matrix: &'a Matrix,
    pub(crate) layout: Layout,
    pub(crate) opts: &'a Options,
}

impl fmt::Display for Svg<'_> {
    /// The `viewBox` is in modules, quiet zone included, so every module is a
    /// unit square and the path needs only small integers. Each horizontal
    /// run of dark modules is one closed subpath `M x y h w v1 h-w z`, which
    /// keeps the file small and the whole code a single element.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Options { size, fg, bg, .. } = *self.opts;
        let n = self.layout.modules;
        let margin = self.layout.margin as usize;
        write!(
            f,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{size}" height="{size}" viewBox="0 0 {n} {n}" shape-rendering="crispEdges">"#
        )?;
        write!(f, r#"<rect width="{n}" height="{n}" fill="{bg}"/>"#)?;
        write!(f, r#"<path fill="{fg}" d=""#)?;
        for y in 0..self.matrix.width() {
            for (x, w) in self.matrix.dark_runs(y) {
                write!(f, "M{} {}h{w}v1h-{w}z", x + margin, y + margin)?;
            }
        }
        f.write_str("\"/></svg>\n")
    }
}
