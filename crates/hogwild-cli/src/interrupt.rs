//! Ctrl-C (SIGINT) and SIGTERM during `train`, `eval` and `predict`. The first asks the run to
//! stop cleanly: the workers finish the batch they hold and the run returns what it trained
//! (`train` then saves it with `--save`). A second ends the process at once. Either way the
//! process exits with the status a shell gives a process killed by the signal (128 + its
//! number: 130, 143), so scripts see that it did not finish.
//!
//! The handlers are the `signal-hook` crate's (only async-signal-safe work in the handler: flags
//! and `_exit`), not hand-written `sigaction` code.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use anyhow::{Context, Result};
use hogwild::executor::Stop;
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::flag;
use signal_hook::iterator::Signals;

/// The last signal received (0: none), set by the handlers.
static RECEIVED: OnceLock<Arc<AtomicUsize>> = OnceLock::new();
/// The stop request the handlers make; one per process.
static STOP: OnceLock<Stop> = OnceLock::new();
/// Whether the first signal was announced (by the thread that waits for it, or at the exit if the
/// run ended before that thread ran).
static ANNOUNCED: Mutex<bool> = Mutex::new(false);

/// Installs the handlers (once per process) and returns the stop request they make, for
/// [`hogwild::executor::RunOptions::stop`].
pub fn install() -> Result<Stop> {
    if let Some(stop) = STOP.get() {
        return Ok(stop.clone());
    }
    let requested = Arc::new(AtomicBool::new(false));
    let received = RECEIVED.get_or_init(Default::default);
    let register = || -> std::io::Result<()> {
        for signal in [SIGINT, SIGTERM] {
            // Registered first, so that it sees the request the first signal made only from the
            // second signal on; then it exits within the handler, whatever the threads do.
            flag::register_conditional_shutdown(signal, 128 + signal, Arc::clone(&requested))?;
            flag::register_usize(signal, Arc::clone(received), signal as usize)?;
            flag::register(signal, Arc::clone(&requested))?;
        }
        // The message cannot be printed from a handler: a thread waits for the first signal.
        let mut signals = Signals::new([SIGINT, SIGTERM])?;
        std::thread::Builder::new()
            .name("hogwild-signals".into())
            .spawn(move || {
                if signals.forever().next().is_some() {
                    announce();
                }
            })?;
        Ok(())
    };
    register().context("cannot install the SIGINT and SIGTERM handlers")?;
    Ok(STOP.get_or_init(|| Stop::from_flag(requested)).clone())
}

/// The signal that asked the command to stop, by name (`SIGINT`), if one did.
pub fn received() -> Option<&'static str> {
    let signal = RECEIVED.get()?.load(Ordering::SeqCst);
    (signal != 0).then(|| name(signal as i32))
}

/// The exit status of a command a signal stopped: 128 + the signal's number (the signal is
/// announced first, if it was not yet).
pub fn exit_status() -> Option<i32> {
    let signal = RECEIVED.get()?.load(Ordering::SeqCst);
    if signal == 0 {
        return None;
    }
    announce();
    Some(128 + signal as i32)
}

/// Says, once, that the run stops on the signal received.
fn announce() {
    let mut done = ANNOUNCED.lock().unwrap_or_else(|p| p.into_inner());
    if !*done {
        *done = true;
        eprintln!(
            "{}: stopping after the current batches (a second signal quits at once)",
            received().unwrap_or("a signal")
        );
    }
}

fn name(signal: i32) -> &'static str {
    match signal {
        SIGINT => "SIGINT",
        SIGTERM => "SIGTERM",
        _ => "a signal",
    }
}
