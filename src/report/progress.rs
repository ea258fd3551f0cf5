//! Progress on stderr for long sweeps and suites, drawn by indicatif: a status line
//! for a sweep ([`Progress::line`]) or a bar with the time left for a suite
//! ([`Progress::bar`]).
//!
//! The caller decides whether anything is drawn (rank 0 with a terminal behind its
//! stderr, see [`crate::launch::local::stderr_is_terminal`]): rank 0's stderr may
//! be a pipe that the local launcher relays to the terminal, which indicatif's own
//! terminal check would take for "no terminal". Drawing goes through [`AtOnce`],
//! which hands each frame to stderr as one `write`: a frame written in pieces
//! could be relayed in pieces with the table on stdout landing between them.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle, TermLike};
use std::io::{self, Write};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A progress display that draws only when enabled (else its bar is hidden).
pub struct Progress {
    bar: ProgressBar,
}

impl Progress {
    /// A status line (`update` replaces its text) drawn when `enabled`.
    pub fn line(enabled: bool) -> Progress {
        Progress::with(enabled, None, "{msg}", AtOnce::stderr())
    }

    /// A bar over `total` steps with the time elapsed and left, drawn when
    /// `enabled`; it ticks on its own so the times move while a step runs.
    pub fn bar(enabled: bool, total: u64) -> Progress {
        let p = Progress::with(
            enabled,
            Some(total),
            "{bar:24} {pos}/{len} {msg} ({elapsed} elapsed, about {eta} left)",
            AtOnce::stderr(),
        );
        if enabled {
            p.bar.enable_steady_tick(Duration::from_millis(500));
        }
        p
    }

    fn with(enabled: bool, total: Option<u64>, template: &str, target: AtOnce) -> Progress {
        if !enabled {
            return Progress {
                bar: ProgressBar::hidden(),
            };
        }
        let bar =
            ProgressBar::with_draw_target(total, ProgressDrawTarget::term_like(Box::new(target)));
        bar.set_style(
            ProgressStyle::with_template(template)
                .expect("a valid template")
                .progress_chars("=> "),
        );
        Progress { bar }
    }

    /// Replaces the text.
    pub fn update(&mut self, text: &str) {
        self.bar.set_message(text.to_string());
    }

    /// Sets the steps done.
    pub fn set_position(&mut self, done: u64) {
        self.bar.set_position(done);
    }

    /// Prints `line` above the display (or on stderr when nothing is drawn).
    pub fn println(&mut self, line: &str) {
        self.bar.suspend(|| eprintln!("{line}"));
    }

    /// Erases the display, so that what follows starts on a clean line.
    pub fn finish(&mut self) {
        self.bar.finish_and_clear();
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.finish();
    }
}

/// A terminal for indicatif that collects a frame and writes it with one call
/// when indicatif flushes.
#[derive(Clone)]
pub struct AtOnce {
    frame: Arc<Mutex<Vec<u8>>>,
    sink: Arc<Mutex<dyn Write + Send>>,
}

impl std::fmt::Debug for AtOnce {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AtOnce")
    }
}

impl AtOnce {
    /// Onto stderr.
    pub fn stderr() -> AtOnce {
        AtOnce::new(Arc::new(Mutex::new(io::stderr())))
    }

    /// Onto `sink`.
    pub fn new(sink: Arc<Mutex<dyn Write + Send>>) -> AtOnce {
        AtOnce {
            frame: Arc::new(Mutex::new(Vec::new())),
            sink,
        }
    }

    /// A cursor move; none for 0 (terminals read `CSI 0 A` as 1).
    fn cursor(&self, n: usize, direction: char) -> io::Result<()> {
        if n == 0 {
            return Ok(());
        }
        self.push(format!("\x1b[{n}{direction}").as_bytes())
    }

    fn push(&self, bytes: &[u8]) -> io::Result<()> {
        self.frame
            .lock()
            .map_err(|_| io::Error::other("poisoned"))?
            .extend_from_slice(bytes);
        Ok(())
    }
}

impl TermLike for AtOnce {
    fn width(&self) -> u16 {
        std::env::var("COLUMNS")
            .ok()
            .and_then(|c| c.parse().ok())
            .unwrap_or(80)
    }

    fn move_cursor_up(&self, n: usize) -> io::Result<()> {
        self.cursor(n, 'A')
    }

    fn move_cursor_down(&self, n: usize) -> io::Result<()> {
        self.cursor(n, 'B')
    }

    fn move_cursor_right(&self, n: usize) -> io::Result<()> {
        self.cursor(n, 'C')
    }

    fn move_cursor_left(&self, n: usize) -> io::Result<()> {
        self.cursor(n, 'D')
    }

    fn write_line(&self, s: &str) -> io::Result<()> {
        self.push(s.as_bytes())?;
        self.push(b"\n")
    }

    fn write_str(&self, s: &str) -> io::Result<()> {
        self.push(s.as_bytes())
    }

    fn clear_line(&self) -> io::Result<()> {
        self.push(b"\r\x1b[2K")
    }

    fn flush(&self) -> io::Result<()> {
        let frame = std::mem::take(
            &mut *self
                .frame
                .lock()
                .map_err(|_| io::Error::other("poisoned"))?,
        );
        if frame.is_empty() {
            return Ok(());
        }
        let mut sink = self.sink.lock().map_err(|_| io::Error::other("poisoned"))?;
        // A failed write to stderr is not worth failing a measurement for.
        let _ = sink.write_all(&frame);
        let _ = sink.flush();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Keeps each write call's bytes apart.
    #[derive(Default)]
    struct Writes(Vec<String>);

    impl Write for Writes {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0.push(String::from_utf8_lossy(buf).into_owned());
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_frame_is_one_write() {
        let sink = Arc::new(Mutex::new(Writes::default()));
        let mut p = Progress::with(
            true,
            Some(7),
            "{pos}/{len} {msg}",
            AtOnce::new(sink.clone()),
        );
        p.set_position(3);
        p.update("tcp");
        p.finish();
        let writes = &sink.lock().unwrap().0;
        // The frame with the line went out in one write: erase, then the text.
        assert!(
            writes
                .iter()
                .any(|w| w.starts_with("\r\x1b[2K") && w.trim_end().ends_with("3/7 tcp")),
            "{writes:?}"
        );
    }

    #[test]
    fn a_disabled_display_draws_nothing() {
        let mut p = Progress::line(false);
        p.update("never shown");
        p.set_position(1);
        assert!(p.bar.is_hidden());
        p.finish();
    }
}
