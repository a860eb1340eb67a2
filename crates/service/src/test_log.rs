//! What a test logged, as text: for the tests of what the crate says in its log.

use std::io;
use std::sync::{Arc, Mutex, PoisonError};

#[derive(Clone, Default)]
struct Logged(Arc<Mutex<Vec<u8>>>);

impl io::Write for Logged {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        let mut text = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        text.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Runs `f` and returns what it logged on this thread (every level, plain text).
pub(crate) fn logged(f: impl FnOnce()) -> String {
    let logged = Logged::default();
    let writer = logged.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .finish();
    tracing::subscriber::with_default(subscriber, f);
    let text = logged.0.lock().unwrap_or_else(PoisonError::into_inner);
    String::from_utf8_lossy(&text).into_owned()
}
