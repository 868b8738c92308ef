//! What code run in the test process writes (log lines, EMF records), kept to read back.

use std::io::Write;
use std::sync::{Arc, Mutex};

use serde_json::Value;

/// A writer that keeps what it is given, shared by its clones; read back as JSON lines.
#[derive(Clone, Default)]
pub struct JsonLines(Arc<Mutex<Vec<u8>>>);

impl Write for JsonLines {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().write(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl JsonLines {
    /// What was written so far.
    pub fn text(&self) -> String {
        String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
    }

    /// What was written so far, one JSON value a line.
    pub fn lines(&self) -> Vec<Value> {
        let text = self.text();
        text.lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}
