//! Which file a store's path named when the store migrated it, so that readiness can tell when
//! the path no longer names it: a database file deleted under a running server (its connections
//! go on writing into the unlinked file, and everything written since is lost at the restart), or
//! another file put in its place (which this server does not see).

use std::sync::OnceLock;

use crate::StorageError;

/// A file told apart from any other put at the same path later.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileIdentity {
    device: u64,
    inode: u64,
}

impl FileIdentity {
    fn of(path: &str) -> std::io::Result<Self> {
        let metadata = std::fs::metadata(path)?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            Ok(Self {
                device: metadata.dev(),
                inode: metadata.ino(),
            })
        }
        // Elsewhere only a deleted file is told (a file open there cannot be deleted anyway).
        #[cfg(not(unix))]
        {
            let _ = metadata;
            Ok(Self {
                device: 0,
                inode: 0,
            })
        }
    }
}

/// The file a path named once it was migrated.
#[derive(Debug, Default)]
pub(crate) struct OpenedFile(OnceLock<FileIdentity>);

impl OpenedFile {
    /// Remembers the file `path` names now (the first call wins; a path that names no file, as
    /// an in-memory database's, is not watched).
    pub(crate) fn remember(&self, path: &str) {
        if let Ok(identity) = FileIdentity::of(path) {
            let _ = self.0.set(identity);
        }
    }

    /// Fails when `path` no longer names the remembered file.
    pub(crate) fn check(&self, path: &str) -> Result<(), StorageError> {
        let Some(opened) = self.0.get() else {
            return Ok(());
        };
        match FileIdentity::of(path) {
            Ok(now) if now == *opened => Ok(()),
            Ok(_) => Err(StorageError::Unavailable(format!(
                "another file took the place of {path} while this server used it: restart the \
                 server to use the new one"
            ))),
            Err(e) => Err(StorageError::Unavailable(format!(
                "{path} is gone ({e}) while this server used it: what it writes now is lost when \
                 it stops"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_deleted_or_replaced_fails_the_check_and_one_moved_back_passes() {
        let dir = std::env::temp_dir().join(format!("shortlink-identity-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a directory");
        let path = dir.join("db");
        let path = path.to_str().expect("a UTF-8 path");
        std::fs::write(path, b"one").expect("write");
        // Held open, as a server's connections hold it: a file made later cannot reuse its inode.
        let _held = std::fs::File::open(path).expect("open");
        let opened = OpenedFile::default();
        opened.remember(path);
        opened.check(path).expect("the same file");

        let away = format!("{path}.away");
        std::fs::rename(path, &away).expect("move away");
        assert!(opened.check(path).is_err(), "gone");
        std::fs::rename(&away, path).expect("move back");
        opened.check(path).expect("back");

        std::fs::remove_file(path).expect("delete");
        assert!(opened.check(path).is_err(), "deleted");
        std::fs::write(path, b"two").expect("another file");
        assert!(opened.check(path).is_err(), "replaced");
        std::fs::remove_dir_all(&dir).expect("clean up");
    }
}
