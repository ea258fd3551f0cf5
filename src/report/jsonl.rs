//! `--output FILE.jsonl`: one JSON record per finished measurement point, flushed as it
//! goes, so a crash keeps every point finished before it (DESIGN.md: "finished
//! measurement points are never lost").

use serde::Serialize;
use std::fs::File;
use std::io::{self, Write};
use std::path::Path;

/// A JSON-lines file that is flushed and synced after every record.
#[derive(Debug)]
pub struct JsonlWriter {
    file: File,
}

impl JsonlWriter {
    /// Creates (truncates) `path`.
    pub fn create(path: &Path) -> io::Result<Self> {
        let file = File::create(path)?;
        crate::launch::signals::note_output(path);
        Ok(JsonlWriter { file })
    }

    /// Appends one record as a single line and forces it to disk.
    pub fn write<T: Serialize>(&mut self, record: &T) -> io::Result<()> {
        self.write_line(&serde_json::to_string(record).map_err(io::Error::other)?)
    }

    /// Appends one record given as JSON text (without its line break) and forces
    /// it to disk.
    pub fn write_line(&mut self, json: &str) -> io::Result<()> {
        let line = format!("{json}\n");
        // One write call per record: a crash leaves whole lines only.
        self.file.write_all(line.as_bytes())?;
        self.file.flush()?;
        self.file.sync_data()?;
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
}
