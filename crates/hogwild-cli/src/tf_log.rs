//! TensorFlow's own log lines, off unless asked for.
//!
//! With the `tf` feature the binary links TensorFlow, whose library constructors log start-up
//! notices (oneDNN, absl's "before InitializeLog") to stderr before `main` runs, whatever the
//! command and whatever `TF_CPP_MIN_LOG_LEVEL` says. So a function in the executable's
//! `.preinit_array`, which the dynamic loader runs before any library's constructors, points
//! stderr at /dev/null, and `main` points it back first thing. A command that runs TensorFlow
//! (`tf-train`) also wants `TF_CPP_MIN_LOG_LEVEL=2` (errors only; the runner reports a failing
//! step itself) unless the user set a level; TensorFlow reads it during its start-up, before
//! `main` could set it, and a `setenv` in `.preinit_array` is undone by libc's own start-up, so
//! that command starts itself again with the level in its environment. `--tf-log` (any command)
//! or `TF_CPP_MIN_LOG_LEVEL=0` leaves TensorFlow's logging as TensorFlow has it.

use std::ffi::{c_char, c_int, CStr};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

/// The option that keeps TensorFlow's log lines.
const TF_LOG_FLAG: &str = "--tf-log";

/// The real stderr while TensorFlow's constructors run; -1: not redirected.
static SAVED_STDERR: AtomicI32 = AtomicI32::new(-1);
/// Whether TensorFlow's lines are hidden and the user set no `TF_CPP_MIN_LOG_LEVEL`.
static SET_LEVEL: AtomicBool = AtomicBool::new(false);

/// Run by the dynamic loader before every library constructor, with `main`'s arguments and
/// environment (glibc passes them to `.preinit_array` functions). Not in the unit tests' binary,
/// whose stderr stays as it is.
#[used]
#[cfg_attr(not(test), link_section = ".preinit_array")]
static HUSH: extern "C" fn(c_int, *const *const c_char, *const *const c_char) = hush;

/// Whether the null-terminated array `list` of the first `limit` C strings (all of them with
/// `usize::MAX`) has one for which `hit` holds.
///
/// # Safety
/// `list` is null or a null-terminated array of valid C strings (the loader's argv and envp).
unsafe fn any(list: *const *const c_char, limit: usize, hit: impl Fn(&[u8]) -> bool) -> bool {
    if list.is_null() {
        return false;
    }
    for i in 0..limit {
        // SAFETY: the array is null-terminated (caller), and `i` stops at the terminator.
        let s = unsafe { *list.add(i) };
        if s.is_null() {
            return false;
        }
        // SAFETY: every entry before the terminator is a valid C string (caller).
        if hit(unsafe { CStr::from_ptr(s) }.to_bytes()) {
            return true;
        }
    }
    false
}

extern "C" fn hush(argc: c_int, argv: *const *const c_char, envp: *const *const c_char) {
    const LEVEL: &[u8] = b"TF_CPP_MIN_LOG_LEVEL=";
    let argc = usize::try_from(argc).unwrap_or(0);
    // SAFETY: the loader hands `.preinit_array` functions main's argv (argc entries, then null)
    // and environ (null-terminated).
    let (asked, level_set, level_zero) = unsafe {
        (
            any(argv, argc, |a| a == TF_LOG_FLAG.as_bytes()),
            any(envp, usize::MAX, |e| e.starts_with(LEVEL)),
            any(envp, usize::MAX, |e| {
                e.strip_prefix(LEVEL).is_some_and(|v| v == b"0")
            }),
        )
    };
    if asked || level_zero {
        return;
    }
    SET_LEVEL.store(!level_set, Ordering::SeqCst);
    // SAFETY: dup/open/dup2/close take plain descriptors and a valid C path.
    unsafe {
        let saved = libc::dup(2);
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if saved < 0 || null < 0 {
            for fd in [saved, null] {
                if fd >= 0 {
                    libc::close(fd);
                }
            }
            return;
        }
        libc::dup2(null, 2);
        libc::close(null);
        SAVED_STDERR.store(saved, Ordering::SeqCst);
    }
}

/// For a command that runs TensorFlow, called before it starts any thread: when TensorFlow's
/// lines are hidden and the user set no level, runs this program again with
/// `TF_CPP_MIN_LOG_LEVEL=2`, which its TensorFlow then reads at start-up (the lines of a
/// session's creation and first step are no start-up constructors' lines). Returns only when
/// that is not needed or the program cannot be started again (its lines then show).
pub fn quiet_tensorflow_runtime() {
    use std::os::unix::process::CommandExt;
    if !SET_LEVEL.swap(false, Ordering::SeqCst) {
        return;
    }
    // The executable's path, not /proc/self/exe, which would name the process "exe".
    let Ok(program) = std::env::current_exe() else {
        return;
    };
    let mut args = std::env::args_os();
    let arg0 = args.next().unwrap_or_default();
    let _error = std::process::Command::new(program)
        .arg0(arg0)
        .args(args)
        .env("TF_CPP_MIN_LOG_LEVEL", "2")
        .exec();
}

/// Points stderr back at the real one; `main` calls it before anything else.
pub fn restore_stderr() {
    let saved = SAVED_STDERR.swap(-1, Ordering::SeqCst);
    if saved >= 0 {
        // SAFETY: `saved` is the descriptor `hush` duplicated from stderr and nothing else owns
        // it; dup2 onto 2 and close take plain descriptors.
        unsafe {
            libc::dup2(saved, 2);
            libc::close(saved);
        }
    }
}
