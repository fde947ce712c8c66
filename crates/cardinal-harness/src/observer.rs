//! How long work reports itself: notes (one line each) and progress (done of total). The
//! binary draws them on stderr; tests collect them.

/// Receives notes and progress from long work. Implementations must be cheap and thread-safe.
pub trait Observer: Sync {
    /// One line worth telling the user ("resuming: 8 cases done, 28 to go").
    fn note(&self, line: &str);
    /// `done` of `total` units of the named phase.
    fn progress(&self, phase: &str, done: usize, total: usize);
}

/// An observer that drops everything.
pub struct Silent;

impl Observer for Silent {
    fn note(&self, _line: &str) {}
    fn progress(&self, _phase: &str, _done: usize, _total: usize) {}
}

/// An observer that keeps the notes (for tests).
#[derive(Default)]
pub struct Collect(pub std::sync::Mutex<Vec<String>>);

impl Observer for Collect {
    fn note(&self, line: &str) {
        if let Ok(mut v) = self.0.lock() {
            v.push(line.to_string());
        }
    }
    fn progress(&self, _phase: &str, _done: usize, _total: usize) {}
}

impl Collect {
    pub fn lines(&self) -> Vec<String> {
        self.0.lock().map(|v| v.clone()).unwrap_or_default()
    }
}
