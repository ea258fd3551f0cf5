//! A one-line progress display on stderr for long sweeps (hyperfine's progress bar,
//! without the dependency).
//!
//! Each update is one `write` of the whole line: rank 0's stderr may be a pipe that
//! the local launcher relays to the terminal, and a line written in pieces (as
//! `eprint!` does, one write per format argument) can be relayed in pieces with the
//! table on stdout landing between them.

use std::io::Write;

/// Draws `\r`-updated lines on stderr when enabled, and nothing otherwise.
pub struct Progress {
    enabled: bool,
    drawn: bool,
}

/// Moves to the start of the line and erases it (carriage return, ANSI "erase line").
const ERASE_LINE: &str = "\r\x1b[K";

impl Progress {
    /// A display that draws only when `enabled` (rank 0 with a terminal on stderr).
    pub fn new(enabled: bool) -> Progress {
        Progress {
            enabled,
            drawn: false,
        }
    }

    /// Replaces the current line with `text`.
    pub fn update(&mut self, text: &str) {
        if self.enabled {
            self.drawn = true;
            write_at_once(&mut std::io::stderr(), &line(text));
        }
    }

    /// Erases the line, so that what follows starts on a clean one.
    pub fn finish(&mut self) {
        if self.drawn {
            self.drawn = false;
            write_at_once(&mut std::io::stderr(), ERASE_LINE);
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.finish();
    }
}

/// The bytes of one update: erase, then the text.
fn line(text: &str) -> String {
    format!("{ERASE_LINE}{text}")
}

/// One `write_all` of a prepared string; a failed write to stderr is not worth failing
/// a measurement for.
fn write_at_once(out: &mut impl Write, text: &str) {
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Counts the write calls it receives.
    struct CountingWriter {
        writes: usize,
        bytes: Vec<u8>,
    }

    impl Write for CountingWriter {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.writes += 1;
            self.bytes.extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn an_update_is_one_write_of_the_erased_line() {
        let mut out = CountingWriter {
            writes: 0,
            bytes: Vec::new(),
        };
        write_at_once(&mut out, &line(&format!("tcp: {}/{} points", 3, 7)));
        assert_eq!(out.writes, 1);
        assert_eq!(out.bytes, b"\r\x1b[Ktcp: 3/7 points");
    }

    #[test]
    fn a_disabled_display_draws_nothing_and_finishes_quietly() {
        let mut p = Progress::new(false);
        p.update("never shown");
        assert!(!p.drawn);
        p.finish();
    }
}
