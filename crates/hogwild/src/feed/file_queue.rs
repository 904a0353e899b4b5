//! The shared list of files (or pieces of files) that reader threads take from, epoch after
//! epoch.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Hands out `files` in order, `epochs` times over, to any number of threads without a lock.
/// The items are paths by default; the feed queues pieces of files (a file, or a byte range of
/// one) the same way.
#[derive(Debug)]
pub struct FileQueue<T = PathBuf> {
    files: Vec<T>,
    total: usize,
    next: AtomicUsize,
}

impl<T> FileQueue<T> {
    /// A queue over `files`, repeated `epochs` times.
    pub fn new(files: Vec<T>, epochs: usize) -> Self {
        let total = files.len() * epochs;
        FileQueue {
            files,
            total,
            next: AtomicUsize::new(0),
        }
    }

    /// The next file, or `None` when every epoch has been handed out.
    pub fn next(&self) -> Option<&T> {
        self.next_with_epoch().map(|(file, _)| file)
    }

    /// The next file and the epoch (0-based) it is handed out for.
    pub fn next_with_epoch(&self) -> Option<(&T, usize)> {
        let i = self.next.fetch_add(1, Ordering::Relaxed);
        let n = self.files.len();
        (i < self.total).then(|| (&self.files[i % n], i / n))
    }
}
