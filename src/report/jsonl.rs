//! `--output FILE.jsonl`: one JSON record per finished measurement point, flushed as it
//! goes, so a crash keeps every point finished before it (DESIGN.md: "finished
//! measurement points are never lost"), and a record that cannot be written whole (a
//! full disk) is taken back, so the file holds whole lines only.

use serde::Serialize;
use std::fs::File;
use std::io::{self, Seek, SeekFrom, Write};
use std::path::Path;

/// Where a [`JsonlWriter`] writes: a file, which can be cut back to a length.
pub trait Sink: Write {
    /// Cuts the sink back to its first `len_bytes` and writes on from there.
    ///
    /// # Errors
    /// When it cannot be cut.
    fn truncate(&mut self, len_bytes: u64) -> io::Result<()>;
    /// Forces what was written to the storage.
    ///
    /// # Errors
    /// When the storage fails.
    fn sync(&mut self) -> io::Result<()>;
}

impl Sink for File {
    fn truncate(&mut self, len_bytes: u64) -> io::Result<()> {
        self.set_len(len_bytes)?;
        self.seek(SeekFrom::Start(len_bytes)).map(drop)
    }

    fn sync(&mut self) -> io::Result<()> {
        self.sync_data()
    }
}

/// A JSON-lines file that is flushed and synced after every record.
#[derive(Debug)]
pub struct JsonlWriter<S: Sink = File> {
    sink: S,
    /// The length of the whole records written, bytes.
    len_bytes: u64,
}

impl JsonlWriter {
    /// Creates (truncates) `path`.
    pub fn create(path: &Path) -> io::Result<Self> {
        let file = File::create(path)?;
        crate::launch::signals::note_output(path);
        Ok(JsonlWriter::new(file))
    }
}

impl<S: Sink> JsonlWriter<S> {
    /// A writer appending to the empty `sink`.
    pub fn new(sink: S) -> Self {
        JsonlWriter { sink, len_bytes: 0 }
    }

    /// Appends one record as a single line and forces it to disk.
    pub fn write<T: Serialize>(&mut self, record: &T) -> io::Result<()> {
        self.write_line(&serde_json::to_string(record).map_err(io::Error::other)?)
    }

    /// Appends one record given as JSON text (without its line break) and forces
    /// it to disk; a record that cannot be written whole is cut off again.
    ///
    /// # Errors
    /// The write's error (the sink then ends with the previous record).
    pub fn write_line(&mut self, json: &str) -> io::Result<()> {
        let line = format!("{json}\n");
        // One write call per record: a crash leaves whole lines only.
        let written = (self.sink.write_all(line.as_bytes()))
            .and_then(|()| self.sink.flush())
            .and_then(|()| self.sink.sync());
        if let Err(e) = written {
            // Best effort: the error said is the write's, which caused it.
            let _ = self.sink.truncate(self.len_bytes);
            return Err(e);
        }
        self.len_bytes += line.len() as u64;
        crate::launch::signals::note_record();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_survive_a_writer_that_is_never_closed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.jsonl");
        let mut w = JsonlWriter::create(&path).unwrap();
        w.write(&serde_json::json!({"size": 1})).unwrap();
        w.write(&serde_json::json!({"size": 2})).unwrap();
        // Simulate a crash: leak the writer instead of dropping it.
        std::mem::forget(w);
        let text = std::fs::read_to_string(&path).unwrap();
        let sizes: Vec<u64> = text
            .lines()
            .map(|l| {
                serde_json::from_str::<serde_json::Value>(l).unwrap()["size"]
                    .as_u64()
                    .unwrap()
            })
            .collect();
        assert_eq!(sizes, vec![1, 2]);
    }

    /// A sink of `capacity_bytes`, like a nearly full disk: a write beyond it puts
    /// in what fits and fails.
    struct Small {
        bytes: Vec<u8>,
        capacity_bytes: usize,
    }

    impl Write for Small {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            let room = self.capacity_bytes - self.bytes.len();
            if room == 0 {
                return Err(io::Error::from(io::ErrorKind::StorageFull));
            }
            let n = buf.len().min(room);
            self.bytes.extend_from_slice(&buf[..n]);
            Ok(n)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    impl Sink for Small {
        fn truncate(&mut self, len_bytes: u64) -> io::Result<()> {
            self.bytes.truncate(len_bytes as usize);
            Ok(())
        }
        fn sync(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn issue38_a_record_that_does_not_fit_is_taken_back() {
        let mut w = JsonlWriter::new(Small {
            bytes: Vec::new(),
            capacity_bytes: 40,
        });
        w.write(&serde_json::json!({"size": 1})).unwrap();
        w.write(&serde_json::json!({"size": 2})).unwrap();
        let e = w.write(&serde_json::json!({"size": 3, "pad": "x".repeat(30)}));
        assert_eq!(e.unwrap_err().kind(), io::ErrorKind::StorageFull);
        assert_eq!(w.sink.bytes, b"{\"size\":1}\n{\"size\":2}\n");
        // A record that fits after the failure follows the last whole one.
        w.write(&serde_json::json!({"size": 4})).unwrap();
        assert_eq!(
            String::from_utf8(w.sink.bytes.clone())
                .unwrap()
                .lines()
                .count(),
            3
        );
    }
}
