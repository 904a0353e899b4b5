//! A bounded staging area between threads: limited by element count **and** by bytes.
//!
//! `put` blocks while the channel holds `capacity` elements or while the new element would take
//! the held bytes over `byte_limit`. An element larger than the byte limit on its own still goes
//! in when the channel is empty, so no producer can deadlock; the held bytes therefore never
//! exceed `max(byte_limit, largest element)`. `close` makes writers fail, while readers drain
//! what is left and then see the end (`None`). `get_timeout` and `try_get` let a reader wait
//! a bounded time or not at all, and tell an empty channel from an ended one.
//!
//! ```
//! use hogwild::channel::{ByteSize, Channel};
//!
//! struct Block(Vec<u8>);
//! impl ByteSize for Block {
//!     fn byte_size(&self) -> usize { self.0.len() }
//! }
//! let ch = Channel::new(4, 1 << 20);
//! ch.put(Block(vec![0; 100])).unwrap();
//! ch.close();
//! assert!(ch.put(Block(vec![])).is_err());
//! assert_eq!(ch.get().map(|b| b.0.len()), Some(100));
//! assert!(ch.get().is_none());
//! ```

use std::collections::VecDeque;
use std::fmt;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// How many bytes an element holds (its heap payload; used for the byte limit).
pub trait ByteSize {
    /// Bytes this element counts for.
    fn byte_size(&self) -> usize;
}

/// `put` on a closed channel; gives the element back.
#[derive(PartialEq, Eq)]
pub struct SendError<T>(pub T);

impl<T> fmt::Debug for SendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SendError(..)")
    }
}

impl<T> fmt::Display for SendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("put on a closed channel")
    }
}

impl<T> std::error::Error for SendError<T> {}

/// Why `try_put` did not take the element; gives it back.
#[derive(Debug, PartialEq, Eq)]
pub enum TryPutError<T> {
    /// The channel is at its element or byte limit.
    Full(T),
    /// The channel is closed.
    Closed(T),
}

/// What a bounded wait on a channel found.
#[derive(Debug, PartialEq, Eq)]
pub enum Got<T> {
    /// The oldest element.
    Item(T),
    /// The channel is open and stayed empty.
    Empty,
    /// The channel is closed and drained.
    Closed,
}

struct State<T> {
    items: VecDeque<(T, usize)>,
    bytes: usize,
    peak_bytes: usize,
    closed: bool,
}

/// A bounded multi-producer multi-consumer channel (see the module docs).
pub struct Channel<T> {
    state: Mutex<State<T>>,
    not_empty: Condvar,
    not_full: Condvar,
    capacity: usize,
    byte_limit: usize,
}

impl<T: ByteSize> Channel<T> {
    /// A channel holding at most `capacity` elements (at least 1) and `byte_limit` bytes.
    pub fn new(capacity: usize, byte_limit: usize) -> Self {
        Channel {
            state: Mutex::new(State {
                items: VecDeque::new(),
                bytes: 0,
                peak_bytes: 0,
                closed: false,
            }),
            not_empty: Condvar::new(),
            not_full: Condvar::new(),
            capacity: capacity.max(1),
            byte_limit,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State<T>> {
        // A panic while holding the lock cannot leave the queue inconsistent (every update is a
        // single push or pop), so a poisoned lock is still usable.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn fits(&self, state: &State<T>, size: usize) -> bool {
        state.items.is_empty()
            || (state.items.len() < self.capacity && state.bytes + size <= self.byte_limit)
    }

    fn push(&self, mut state: MutexGuard<'_, State<T>>, item: T, size: usize) {
        state.bytes += size;
        state.peak_bytes = state.peak_bytes.max(state.bytes);
        state.items.push_back((item, size));
        drop(state);
        self.not_empty.notify_one();
    }

    /// Puts an element, blocking while the channel is full; fails once the channel is closed.
    pub fn put(&self, item: T) -> Result<(), SendError<T>> {
        let size = item.byte_size();
        let mut state = self.lock();
        loop {
            if state.closed {
                return Err(SendError(item));
            }
            if self.fits(&state, size) {
                self.push(state, item, size);
                return Ok(());
            }
            state = self.not_full.wait(state).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Puts an element if there is room now.
    pub fn try_put(&self, item: T) -> Result<(), TryPutError<T>> {
        let size = item.byte_size();
        let state = self.lock();
        if state.closed {
            return Err(TryPutError::Closed(item));
        }
        if !self.fits(&state, size) {
            return Err(TryPutError::Full(item));
        }
        self.push(state, item, size);
        Ok(())
    }

    /// Takes the oldest element, blocking while the channel is empty and open; `None` once it is
    /// closed and drained.
    pub fn get(&self) -> Option<T> {
        match self.get_until(None) {
            Got::Item(item) => Some(item),
            Got::Empty | Got::Closed => None,
        }
    }

    /// Takes the oldest element, waiting at most `timeout` while the channel is empty and open.
    pub fn get_timeout(&self, timeout: Duration) -> Got<T> {
        self.get_until(Some(Instant::now() + timeout))
    }

    /// Takes the oldest element if there is one now.
    pub fn try_get(&self) -> Got<T> {
        self.get_until(Some(Instant::now()))
    }

    /// Takes the oldest element, waiting while the channel is empty and open until `deadline`
    /// (forever without one).
    fn get_until(&self, deadline: Option<Instant>) -> Got<T> {
        let mut state = self.lock();
        loop {
            if let Some((item, size)) = state.items.pop_front() {
                state.bytes -= size;
                drop(state);
                // Producers wait for different amounts of room: wake them all to re-check.
                self.not_full.notify_all();
                return Got::Item(item);
            }
            if state.closed {
                return Got::Closed;
            }
            state = match deadline {
                None => self
                    .not_empty
                    .wait(state)
                    .unwrap_or_else(|e| e.into_inner()),
                Some(deadline) => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Got::Empty;
                    }
                    self.not_empty
                        .wait_timeout(state, left)
                        .unwrap_or_else(|e| e.into_inner())
                        .0
                }
            };
        }
    }

    /// Closes the channel: blocked and later writers fail, readers drain and then get `None`.
    pub fn close(&self) {
        self.lock().closed = true;
        self.not_empty.notify_all();
        self.not_full.notify_all();
    }

    /// Whether `close` was called.
    pub fn is_closed(&self) -> bool {
        self.lock().closed
    }

    /// Elements held now.
    pub fn len(&self) -> usize {
        self.lock().items.len()
    }

    /// Whether no element is held now.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes held now.
    pub fn bytes(&self) -> usize {
        self.lock().bytes
    }

    /// The most bytes ever held at once.
    pub fn peak_bytes(&self) -> usize {
        self.lock().peak_bytes
    }

    /// The element limit.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The byte limit.
    pub fn byte_limit(&self) -> usize {
        self.byte_limit
    }
}
