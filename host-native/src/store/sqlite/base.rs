//! What every part of the SQLite store uses: its error conversion and its
//! background threads.

use engage_core::store::StoreError;

pub(crate) fn err(e: rusqlite::Error) -> StoreError {
    StoreError(e.to_string())
}

/// A background thread of a store, told to stop (its channel closed) and joined
/// when the store is dropped: nothing of it (a connection, a file) outlives the
/// store, so whoever opens the database next (a checkpoint, a copy) has it alone.
pub(crate) struct Background<T> {
    sender: Option<std::sync::mpsc::Sender<T>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl<T> Background<T> {
    pub(crate) fn new(sender: std::sync::mpsc::Sender<T>, thread: std::thread::JoinHandle<()>) -> Background<T> {
        Background { sender: Some(sender), thread: Some(thread) }
    }

    /// Sends work to the thread; false once it is gone.
    pub(crate) fn send(&self, msg: T) -> bool {
        self.sender.as_ref().is_some_and(|s| s.send(msg).is_ok())
    }
}

impl<T> Drop for Background<T> {
    fn drop(&mut self) {
        drop(self.sender.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
