//! The write-ahead log of the edge index.
//!
//! qdrant-edge 0.7.2 logs every update but never replays its log, so only a flush of the
//! segments makes a write durable, and a flush writes and syncs many files (about 350 ms on
//! the shared development disk, even for a handful of points). This log makes writes durable
//! for the price of one `fdatasync` of one file, shared by the writes that run alongside:
//! each applied update operation is appended as a record, the file is synced before the write
//! is acknowledged, the records are replayed when the index is opened, and the log is emptied
//! once a flush of the segments covers them (a checkpoint).
//!
//! A record is `len: u32 LE`, `crc32(payload): u32 LE`, then the payload, the operation in
//! CBOR (the encoding qdrant's own log uses). Reading stops at the first record that is cut
//! short or fails its checksum (a crash in the middle of an append): that record was never
//! acknowledged, and the file is truncated there before new records are appended.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;

use qdrant_edge::UpdateOperation;

/// The log's file name inside the index directory (qdrant-edge's own log is `wal/`).
pub(super) const FILE_NAME: &str = "thinkus-wal.log";

/// The largest record accepted when reading: anything larger is corruption.
const MAX_RECORD_BYTES: u32 = 512 * 1024 * 1024;

/// An open log, positioned at its end.
#[derive(Debug)]
pub(super) struct Wal {
    file: File,
    len: u64,
}

/// A log's records as read at open.
#[derive(Debug, Default)]
pub(super) struct Replay {
    pub operations: Vec<UpdateOperation>,
    /// Bytes dropped at the end: a record cut short or damaged by a crash.
    pub torn_bytes: u64,
}

impl Wal {
    /// Opens (or creates) the log in `dir` and reads its records.
    pub fn open(dir: &Path) -> std::io::Result<(Self, Replay)> {
        let path = dir.join(FILE_NAME);
        let mut file = OpenOptions::new().read(true).append(true).create(true).open(&path)?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)?;
        let (operations, valid) = decode(&bytes);
        let torn_bytes = bytes.len() as u64 - valid;
        if torn_bytes > 0 {
            file.set_len(valid)?;
            file.sync_data()?;
        }
        file.seek(SeekFrom::End(0))?;
        Ok((Self { file, len: valid }, Replay { operations, torn_bytes }))
    }

    /// Appends one record per operation; durable only after [`Wal::sync_handle`] syncs.
    pub fn append(&mut self, operations: &[UpdateOperation]) -> std::io::Result<()> {
        let mut buffer = Vec::new();
        for operation in operations {
            let payload = serde_cbor::to_vec(operation).map_err(std::io::Error::other)?;
            buffer.extend_from_slice(&(payload.len() as u32).to_le_bytes());
            buffer.extend_from_slice(&crc32fast::hash(&payload).to_le_bytes());
            buffer.extend_from_slice(&payload);
        }
        if let Err(err) = self.file.write_all(&buffer) {
            // A partial record would hide every later one: cut it off.
            let _ = self.file.set_len(self.len);
            return Err(err);
        }
        self.len += buffer.len() as u64;
        Ok(())
    }

    /// Bytes in the log.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// A second handle on the same file, to sync without holding the log.
    pub fn sync_handle(&self) -> std::io::Result<File> {
        self.file.try_clone()
    }

    /// Empties the log (its records are in flushed segments now).
    pub fn reset(&mut self) -> std::io::Result<()> {
        self.file.set_len(0)?;
        self.file.sync_data()?;
        self.len = 0;
        Ok(())
    }
}

/// The operations of the valid records at the start of `bytes`, and their length in bytes.
fn decode(bytes: &[u8]) -> (Vec<UpdateOperation>, u64) {
    let mut operations = Vec::new();
    let mut at = 0usize;
    while bytes.len() - at >= 8 {
        let len = u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
        let crc = u32::from_le_bytes(bytes[at + 4..at + 8].try_into().expect("4 bytes"));
        let start = at + 8;
        if len > MAX_RECORD_BYTES || bytes.len() - start < len as usize {
            break;
        }
        let payload = &bytes[start..start + len as usize];
        if crc32fast::hash(payload) != crc {
            break;
        }
        match serde_cbor::from_slice::<UpdateOperation>(payload) {
            Ok(operation) => operations.push(operation),
            Err(_) => break,
        }
        at = start + len as usize;
    }
    (operations, at as u64)
}

#[cfg(test)]
mod tests {
    use qdrant_edge::{PointId, PointOperations};

    use super::*;

    fn delete(n: u64) -> UpdateOperation {
        UpdateOperation::PointOperation(PointOperations::DeletePoints {
            ids: vec![PointId::NumId(n)],
        })
    }

    #[test]
    fn records_survive_reopening_and_a_torn_tail_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        {
            let (mut wal, replay) = Wal::open(dir.path()).unwrap();
            assert!(replay.operations.is_empty());
            wal.append(&[delete(1), delete(2)]).unwrap();
            wal.append(&[delete(3)]).unwrap();
            wal.sync_handle().unwrap().sync_data().unwrap();
        }
        // A crash in the middle of a fourth append leaves half a record.
        let path = dir.path().join(FILE_NAME);
        let whole = std::fs::metadata(&path).unwrap().len();
        let mut file = OpenOptions::new().append(true).open(&path).unwrap();
        file.write_all(&[40, 0, 0, 0, 1, 2, 3, 4, 5]).unwrap();
        drop(file);

        let (mut wal, replay) = Wal::open(dir.path()).unwrap();
        assert_eq!(replay.operations, vec![delete(1), delete(2), delete(3)]);
        assert_eq!(replay.torn_bytes, 9);
        assert_eq!(wal.len(), whole);
        wal.append(&[delete(4)]).unwrap();
        drop(wal);
        let (mut wal, replay) = Wal::open(dir.path()).unwrap();
        assert_eq!(replay.operations.len(), 4, "appends after a torn tail are readable");
        wal.reset().unwrap();
        drop(wal);
        assert!(Wal::open(dir.path()).unwrap().1.operations.is_empty());
    }

    #[test]
    fn a_damaged_record_ends_the_log() {
        let dir = tempfile::tempdir().unwrap();
        let (mut wal, _) = Wal::open(dir.path()).unwrap();
        wal.append(&[delete(1), delete(2)]).unwrap();
        drop(wal);
        let path = dir.path().join(FILE_NAME);
        let mut bytes = std::fs::read(&path).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 0xff;
        std::fs::write(&path, &bytes).unwrap();
        let (_, replay) = Wal::open(dir.path()).unwrap();
        assert_eq!(replay.operations, vec![delete(1)]);
        assert!(replay.torn_bytes > 0);
    }
}
