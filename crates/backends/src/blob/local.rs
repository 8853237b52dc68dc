//! The blob store in a local folder: one file per key, the key's segments as sub-folders.
//!
//! Every write goes to a temporary file in the target's folder, is synced, then renamed over the
//! key, so a reader or a crash sees either the old blob or the new one, never a part. Temporary
//! files are named `.~tmp~<uuid>`: `~` is outside the key alphabet, so they can never be taken
//! for a key, and [`LocalBlobStore::remove_stale_temp_files`] sweeps the ones a crash left.
//!
//! A key cannot be both a blob and a folder of other blobs here (`a` and `a/b`), which S3 allows;
//! writing the second one fails with [`BlobError::Backend`].

use std::io::{self, ErrorKind};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use bytes::{Bytes, BytesMut};
use futures::StreamExt;
use tokio::fs::{self, File, OpenOptions};
use tokio::io::{AsyncReadExt, AsyncSeekExt, AsyncWriteExt};

use super::{BlobError, BlobStore, ByteStream, check_key, check_prefix, effective_chunk_size, into_stream_error};

/// The start of every temporary file's name.
const TEMP_PREFIX: &str = ".~tmp~";

/// A blob store in a local folder.
#[derive(Debug, Clone)]
pub struct LocalBlobStore {
    root: PathBuf,
}

impl LocalBlobStore {
    /// Opens the store in `root`, creating the folder (and its parents) if needed.
    pub async fn open(root: &Path) -> Result<Self, BlobError> {
        let root = std::path::absolute(root).map_err(|err| io_error(format!("resolving {}", root.display()), err))?;
        fs::create_dir_all(&root)
            .await
            .map_err(|err| io_error(format!("creating {}", root.display()), err))?;
        Ok(Self { root })
    }

    /// The folder holding the blobs.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Removes the temporary files older than `older_than` that interrupted writes left behind
    /// (a crash, a killed process), and returns how many were removed. Younger ones are kept
    /// because they may belong to writes still in progress, possibly from another process.
    pub async fn remove_stale_temp_files(&self, older_than: Duration) -> Result<usize, BlobError> {
        let cutoff = SystemTime::now()
            .checked_sub(older_than)
            .unwrap_or(SystemTime::UNIX_EPOCH);
        let mut removed = 0;
        let mut folders = vec![self.root.clone()];
        while let Some(folder) = folders.pop() {
            let mut entries = match fs::read_dir(&folder).await {
                Ok(entries) => entries,
                Err(err) if is_missing(&err) => continue,
                Err(err) => return Err(io_error(format!("listing {}", folder.display()), err)),
            };
            while let Some(entry) = entries
                .next_entry()
                .await
                .map_err(|err| io_error(format!("listing {}", folder.display()), err))?
            {
                let Ok(file_type) = entry.file_type().await else {
                    continue;
                };
                if file_type.is_dir() {
                    folders.push(entry.path());
                    continue;
                }
                let is_temp = entry
                    .file_name()
                    .to_str()
                    .is_some_and(|name| name.starts_with(TEMP_PREFIX));
                if !file_type.is_file() || !is_temp {
                    continue;
                }
                let modified = entry.metadata().await.and_then(|meta| meta.modified());
                if matches!(modified, Ok(modified) if modified <= cutoff) {
                    match fs::remove_file(entry.path()).await {
                        Ok(()) => removed += 1,
                        Err(err) if is_missing(&err) => {}
                        Err(err) => return Err(io_error(format!("removing {}", entry.path().display()), err)),
                    }
                }
            }
        }
        if removed > 0 {
            tracing::info!(root = %self.root.display(), removed, "removed stale temporary blob files");
        }
        Ok(removed)
    }

    /// The file of a checked key.
    fn path_of(&self, key: &str) -> Result<PathBuf, BlobError> {
        check_key(key)?;
        Ok(self.root.join(key))
    }

    /// Creates a new temporary file beside `target`, creating the target's folder first.
    async fn create_temp(&self, target: &Path) -> Result<(TempFile, File), BlobError> {
        let folder = target.parent().unwrap_or(&self.root);
        fs::create_dir_all(folder)
            .await
            .map_err(|err| io_error(format!("creating {}", folder.display()), err))?;
        let path = folder.join(format!("{TEMP_PREFIX}{}", uuid::Uuid::new_v4().simple()));
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .await
            .map_err(|err| io_error(format!("creating {}", path.display()), err))?;
        Ok((TempFile { path, armed: true }, file))
    }

    /// Makes a fully written temporary file durable and moves it over `target`.
    async fn commit(&self, mut temp: TempFile, mut file: File, target: &Path) -> Result<(), BlobError> {
        file.flush()
            .await
            .map_err(|err| io_error(format!("writing {}", temp.path.display()), err))?;
        // The data must be on disk before the rename publishes it, or a crash could leave an
        // empty or partial file under the real key.
        file.sync_all()
            .await
            .map_err(|err| io_error(format!("syncing {}", temp.path.display()), err))?;
        drop(file);
        fs::rename(&temp.path, target)
            .await
            .map_err(|err| io_error(format!("moving a new blob to {}", target.display()), err))?;
        temp.armed = false;
        sync_folder(target.parent().unwrap_or(&self.root)).await
    }
}

#[async_trait]
impl BlobStore for LocalBlobStore {
    fn name(&self) -> &'static str {
        "local"
    }

    async fn check(&self) -> Result<(), BlobError> {
        let unavailable =
            |what: &str, err: io::Error| BlobError::Unavailable(format!("{what} in {}: {err}", self.root.display()));
        fs::create_dir_all(&self.root)
            .await
            .map_err(|err| unavailable("cannot create the folder", err))?;
        // Writing and removing a probe proves the folder is writable, which its existence does not.
        let probe = self
            .root
            .join(format!("{TEMP_PREFIX}probe-{}", uuid::Uuid::new_v4().simple()));
        let written = fs::write(&probe, b"probe").await;
        let removed = fs::remove_file(&probe).await;
        written.map_err(|err| unavailable("cannot write", err))?;
        removed.map_err(|err| unavailable("cannot remove files", err))
    }

    async fn put(&self, key: &str, data: Bytes) -> Result<(), BlobError> {
        let target = self.path_of(key)?;
        let (temp, mut file) = self.create_temp(&target).await?;
        file.write_all(&data)
            .await
            .map_err(|err| io_error(format!("writing {}", temp.path.display()), err))?;
        self.commit(temp, file, &target).await
    }

    async fn put_stream(&self, key: &str, mut stream: ByteStream, max_bytes: u64) -> Result<u64, BlobError> {
        let target = self.path_of(key)?;
        let (temp, mut file) = self.create_temp(&target).await?;
        let mut written: u64 = 0;
        // Every early return drops `temp`, which removes the partial file.
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(into_stream_error)?;
            written = written.saturating_add(chunk.len() as u64);
            if written > max_bytes {
                return Err(BlobError::TooLarge { limit: max_bytes });
            }
            file.write_all(&chunk)
                .await
                .map_err(|err| io_error(format!("writing {}", temp.path.display()), err))?;
        }
        self.commit(temp, file, &target).await?;
        Ok(written)
    }

    async fn get(&self, key: &str) -> Result<Bytes, BlobError> {
        let path = self.path_of(key)?;
        match fs::read(&path).await {
            Ok(data) => Ok(Bytes::from(data)),
            Err(err) if is_missing(&err) => Err(BlobError::NotFound(key.to_string())),
            Err(err) => Err(io_error(format!("reading {}", path.display()), err)),
        }
    }

    async fn get_range(&self, key: &str, start: u64, end: u64) -> Result<Bytes, BlobError> {
        let path = self.path_of(key)?;
        let (mut file, size) = open_blob(&path, key).await?;
        let end = end.min(size);
        if start >= end {
            return Ok(Bytes::new());
        }
        let length = usize::try_from(end - start)
            .map_err(|_| BlobError::Backend(format!("range of {} bytes does not fit in memory", end - start)))?;
        file.seek(io::SeekFrom::Start(start))
            .await
            .map_err(|err| io_error(format!("seeking in {}", path.display()), err))?;
        let mut data = vec![0; length];
        file.read_exact(&mut data)
            .await
            .map_err(|err| io_error(format!("reading {}", path.display()), err))?;
        Ok(Bytes::from(data))
    }

    async fn get_stream(&self, key: &str, chunk_size: usize) -> Result<ByteStream, BlobError> {
        let path = self.path_of(key)?;
        let (file, _) = open_blob(&path, key).await?;
        let chunk_size = effective_chunk_size(chunk_size);
        let stream = futures::stream::try_unfold((file, path), move |(mut file, path)| async move {
            let mut chunk = BytesMut::with_capacity(chunk_size);
            while chunk.len() < chunk_size {
                let wanted = (chunk_size - chunk.len()) as u64;
                let read = (&mut file)
                    .take(wanted)
                    .read_buf(&mut chunk)
                    .await
                    .map_err(|err| io_error(format!("reading {}", path.display()), err))?;
                if read == 0 {
                    break;
                }
            }
            if chunk.is_empty() {
                Ok(None)
            } else {
                Ok(Some((chunk.freeze(), (file, path))))
            }
        });
        Ok(stream.boxed())
    }

    async fn size(&self, key: &str) -> Result<Option<u64>, BlobError> {
        let path = self.path_of(key)?;
        match fs::metadata(&path).await {
            Ok(meta) if meta.is_file() => Ok(Some(meta.len())),
            Ok(_) => Ok(None),
            Err(err) if is_missing(&err) => Ok(None),
            Err(err) => Err(io_error(format!("inspecting {}", path.display()), err)),
        }
    }

    async fn rename(&self, from: &str, to: &str) -> Result<(), BlobError> {
        let source = self.path_of(from)?;
        let target = self.path_of(to)?;
        // A folder of other blobs is not a blob: moving it would move all of them.
        if self.size(from).await?.is_none() {
            return Err(BlobError::NotFound(from.to_string()));
        }
        if source == target {
            return Ok(());
        }
        let target_folder = target.parent().unwrap_or(&self.root);
        fs::create_dir_all(target_folder)
            .await
            .map_err(|err| io_error(format!("creating {}", target_folder.display()), err))?;
        match fs::rename(&source, &target).await {
            Ok(()) => {}
            Err(err) if err.kind() == ErrorKind::NotFound => return Err(BlobError::NotFound(from.to_string())),
            Err(err) => {
                return Err(io_error(
                    format!("moving {} to {}", source.display(), target.display()),
                    err,
                ));
            }
        }
        sync_folder(target_folder).await?;
        let source_folder = source.parent().unwrap_or(&self.root);
        if source_folder != target_folder {
            sync_folder(source_folder).await?;
        }
        Ok(())
    }

    async fn delete(&self, key: &str) -> Result<(), BlobError> {
        let path = self.path_of(key)?;
        match fs::remove_file(&path).await {
            Ok(()) => Ok(()),
            Err(err) if is_missing(&err) => Ok(()),
            Err(err) => Err(io_error(format!("removing {}", path.display()), err)),
        }
    }

    async fn list(&self, prefix: &str) -> Result<Vec<String>, BlobError> {
        check_prefix(prefix)?;
        // Only the folder named by the prefix's complete segments can hold matching keys.
        let (start_key, start) = match prefix.rfind('/') {
            Some(slash) => (prefix[..slash].to_string(), self.root.join(&prefix[..slash])),
            None => (String::new(), self.root.clone()),
        };
        let mut keys = Vec::new();
        let mut folders = vec![(start, start_key)];
        while let Some((folder, folder_key)) = folders.pop() {
            let mut entries = match fs::read_dir(&folder).await {
                Ok(entries) => entries,
                // A folder that vanished (or never existed) holds no keys.
                Err(err) if is_missing(&err) => continue,
                Err(err) => return Err(io_error(format!("listing {}", folder.display()), err)),
            };
            loop {
                let entry = match entries.next_entry().await {
                    Ok(Some(entry)) => entry,
                    Ok(None) => break,
                    Err(err) if is_missing(&err) => break,
                    Err(err) => return Err(io_error(format!("listing {}", folder.display()), err)),
                };
                let Some(name) = entry.file_name().to_str().map(str::to_string) else {
                    continue;
                };
                let key = if folder_key.is_empty() {
                    name
                } else {
                    format!("{folder_key}/{name}")
                };
                // Symbolic links are neither followed nor listed, so a link cannot lead outside.
                let file_type = match entry.file_type().await {
                    Ok(file_type) => file_type,
                    Err(err) if is_missing(&err) => continue,
                    Err(err) => return Err(io_error(format!("inspecting {}", entry.path().display()), err)),
                };
                if file_type.is_dir() {
                    let below = format!("{key}/");
                    if below.starts_with(prefix) || prefix.starts_with(&below) {
                        folders.push((entry.path(), key));
                    }
                } else if file_type.is_file() && key.starts_with(prefix) && check_key(&key).is_ok() {
                    keys.push(key);
                }
            }
        }
        keys.sort_unstable();
        Ok(keys)
    }
}

/// A temporary file that is removed when dropped unless it was moved into place. The removal
/// is synchronous because `Drop` cannot await; unlinking one file is short.
#[derive(Debug)]
struct TempFile {
    path: PathBuf,
    armed: bool,
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if self.armed
            && let Err(err) = std::fs::remove_file(&self.path)
            && err.kind() != ErrorKind::NotFound
        {
            tracing::warn!(path = %self.path.display(), error = %err, "cannot remove a temporary blob file");
        }
    }
}

/// Opens a blob for reading and returns it with its size; a missing file or a folder is
/// [`BlobError::NotFound`].
async fn open_blob(path: &Path, key: &str) -> Result<(File, u64), BlobError> {
    let file = match File::open(path).await {
        Ok(file) => file,
        Err(err) if is_missing(&err) => return Err(BlobError::NotFound(key.to_string())),
        Err(err) => return Err(io_error(format!("opening {}", path.display()), err)),
    };
    let meta = file
        .metadata()
        .await
        .map_err(|err| io_error(format!("inspecting {}", path.display()), err))?;
    if !meta.is_file() {
        return Err(BlobError::NotFound(key.to_string()));
    }
    Ok((file, meta.len()))
}

/// Syncs a folder so that a rename into it survives a crash.
async fn sync_folder(folder: &Path) -> Result<(), BlobError> {
    let handle = File::open(folder)
        .await
        .map_err(|err| io_error(format!("opening {}", folder.display()), err))?;
    handle
        .sync_all()
        .await
        .map_err(|err| io_error(format!("syncing {}", folder.display()), err))
}

/// Whether an IO error means that no blob is at the path: nothing there, a file where a folder
/// was expected, or a folder where a file was expected.
fn is_missing(err: &io::Error) -> bool {
    matches!(
        err.kind(),
        ErrorKind::NotFound | ErrorKind::NotADirectory | ErrorKind::IsADirectory
    )
}

fn io_error(context: String, err: io::Error) -> BlobError {
    match err.kind() {
        ErrorKind::StorageFull | ErrorKind::QuotaExceeded => BlobError::Full(format!("{context}: {err}")),
        _ => BlobError::Backend(format!("{context}: {err}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_disk_is_storage_full_not_an_internal_error() {
        let full = io_error("write".into(), io::Error::from(ErrorKind::StorageFull));
        assert!(matches!(full, BlobError::Full(_)), "{full:?}");
        let api = thinkus_common::ApiError::from(full);
        assert_eq!(api.code, thinkus_common::error::ErrorCode::ResourceExhausted);
        assert!(api.retry_after.is_some());
        let other = io_error("write".into(), io::Error::from(ErrorKind::PermissionDenied));
        assert!(matches!(other, BlobError::Backend(_)), "{other:?}");
    }

    #[test]
    fn prefixes_cannot_escape() {
        for good in ["", "a", "a/", "a/b", "a/b/", "users/u1/ab.", "x/..y"] {
            assert!(check_prefix(good).is_ok(), "{good:?} should be accepted");
        }
        for bad in ["/", "/a", "../", "a/../", "./a", "a//", "a b", "ü", "a\\b"] {
            assert!(check_prefix(bad).is_err(), "{bad:?} should be refused");
        }
    }

    #[tokio::test]
    async fn interrupted_writes_leave_only_temporary_files_that_get_swept() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = LocalBlobStore::open(dir.path()).await.expect("open");
        store.put("a/b.bin", Bytes::from_static(b"kept")).await.expect("put");
        // A crash between creating and renaming the temporary file leaves it like this.
        let leftover = dir.path().join("a").join(format!("{TEMP_PREFIX}deadbeef"));
        std::fs::write(&leftover, b"half").expect("write leftover");

        assert_eq!(store.list("").await.expect("list"), vec!["a/b.bin".to_string()]);
        assert_eq!(
            store
                .remove_stale_temp_files(Duration::from_secs(3600))
                .await
                .expect("sweep"),
            0
        );
        assert!(leftover.exists(), "a young temporary file may belong to a live write");
        assert_eq!(store.remove_stale_temp_files(Duration::ZERO).await.expect("sweep"), 1);
        assert!(!leftover.exists(), "the stale temporary file should be gone");
        assert_eq!(store.get("a/b.bin").await.expect("get"), Bytes::from_static(b"kept"));
    }

    #[tokio::test]
    async fn a_folder_is_not_a_blob() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = LocalBlobStore::open(dir.path()).await.expect("open");
        store.put("a/b", Bytes::from_static(b"x")).await.expect("put");
        assert!(matches!(store.get("a").await, Err(BlobError::NotFound(_))));
        assert!(matches!(store.get_range("a", 0, 1).await, Err(BlobError::NotFound(_))));
        assert!(matches!(store.get_stream("a", 1).await, Err(BlobError::NotFound(_))));
        assert_eq!(store.size("a").await.expect("size"), None);
        assert!(matches!(store.rename("a", "c").await, Err(BlobError::NotFound(_))));
        store.delete("a").await.expect("deleting a folder key is a no-op");
        assert_eq!(store.get("a/b").await.expect("get"), Bytes::from_static(b"x"));
        assert!(matches!(store.get("a/b/c").await, Err(BlobError::NotFound(_))));
    }
}
