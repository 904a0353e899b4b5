//! Writing outputs so that a failure never destroys what was there, and telling inputs apart
//! from outputs.
//!
//! Every file the crate and the `hogwild` command write (checkpoints, predictions, converted data,
//! its data.prototxt and vocabulary, exported vectors, word2vec's id files) goes through one
//! helper, [`Replacement`]: the content is written under a temporary name beside the target,
//! `<name>.tmp.<pid>.<n>`, flushed to disk and renamed over the target only once it is whole. A
//! reader of the target sees the old file or the new one; a failed or interrupted write leaves
//! the old one. [`Output`] is the same as a [`Write`]r, or standard output.
//!
//! A process killed while writing (`kill -9`, a power cut) cannot remove its temporary file, so
//! the next write of the same target removes the temporaries that no running process writes:
//! those whose pid is not alive ([`StaleTemps`]). A live writer's temporary is never touched, on
//! this machine: pids are only comparable within one pid namespace, so writers of one target in
//! two containers, or on two machines sharing a file system, should use different targets.
//!
//! ```
//! use std::io::Write;
//! use hogwild::files::Output;
//!
//! let dir = std::env::temp_dir().join(format!("hogwild-files-doc-{}", std::process::id()));
//! std::fs::create_dir_all(&dir).unwrap();
//! let target = dir.join("out.txt");
//! std::fs::write(&target, "old\n").unwrap();
//! let mut out = Output::create(&target).unwrap();
//! out.write_all(b"new\n").unwrap();
//! assert_eq!(std::fs::read_to_string(&target).unwrap(), "old\n"); // not until committed
//! out.commit().unwrap();
//! assert_eq!(std::fs::read_to_string(&target).unwrap(), "new\n");
//! let mut out = Output::create(&target).unwrap();
//! out.write_all(b"half a line").unwrap();
//! drop(out); // a failure: the old file stays, the temporary is gone
//! assert_eq!(std::fs::read_to_string(&target).unwrap(), "new\n");
//! assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
//! # std::fs::remove_dir_all(&dir).unwrap();
//! ```

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::{Error, Result};

const BUFFER: usize = 1 << 18;

/// The temporary files of one target that a [`Replacement`] found left behind by writers that
/// are no longer running, and removed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StaleTemps {
    /// The target they were written for.
    pub target: PathBuf,
    /// How many were removed.
    pub files: usize,
    /// Their size in bytes.
    pub bytes: u64,
}

impl StaleTemps {
    /// Whether nothing was removed.
    pub fn is_empty(&self) -> bool {
        self.files == 0
    }
}

impl std::fmt::Display for StaleTemps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let plural = if self.files == 1 { "" } else { "s" };
        write!(
            f,
            "removed {} stale temporary file{plural} of {} ({}) left by interrupted writes",
            self.files,
            self.target.display(),
            byte_size(self.bytes)
        )
    }
}

/// `bytes` for a reader: exact below a KiB, else in KiB, MiB or GiB to one decimal.
fn byte_size(bytes: u64) -> String {
    const UNITS: [&str; 3] = ["KiB", "MiB", "GiB"];
    if bytes < 1024 {
        return format!("{bytes} bytes");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

/// A temporary file beside a target, renamed over it by [`Replacement::commit`] and removed if
/// dropped before: the one way this crate replaces a file. Creating one removes the target's
/// stale temporaries first ([`Replacement::stale`]).
#[derive(Debug)]
pub struct Replacement {
    target: PathBuf,
    tmp: PathBuf,
    stale: StaleTemps,
    committed: bool,
}

impl Replacement {
    /// A temporary name beside `target` (the file a symbolic link `target` points to, so that the
    /// link stays a link); nothing is created yet. Removes the target's stale temporaries.
    pub fn new(target: &Path) -> Self {
        // A link is followed so that the rename replaces the file, not the link; a target that
        // does not exist yet is taken as given.
        let given = target;
        let target = std::fs::canonicalize(given).unwrap_or_else(|_| given.to_path_buf());
        let stale = StaleTemps {
            // Named as the user named it.
            target: given.to_path_buf(),
            ..remove_stale_temps(&target)
        };
        let tmp = temp_path(&target);
        Replacement {
            target,
            tmp,
            stale,
            committed: false,
        }
    }

    /// Where to write the new content.
    pub fn path(&self) -> &Path {
        &self.tmp
    }

    /// The target's temporaries from interrupted writes that were removed.
    pub fn stale(&self) -> &StaleTemps {
        &self.stale
    }

    /// Renames the temporary file over the target (the caller has written and synced it). The
    /// target keeps its permissions. On failure the temporary file is removed.
    pub fn commit(mut self) -> std::io::Result<()> {
        if let Ok(meta) = std::fs::metadata(&self.target) {
            // Best effort: a replaced file keeps the mode its owner gave it.
            let _ = std::fs::set_permissions(&self.tmp, meta.permissions());
        }
        std::fs::rename(&self.tmp, &self.target)?;
        self.committed = true;
        // The rename itself reaches the disk with the directory: without this, a crash soon
        // after can bring back the old file although the command reported the new one.
        if let Some(dir) = self.target.parent() {
            let dir = if dir.as_os_str().is_empty() {
                Path::new(".")
            } else {
                dir
            };
            if let Ok(dir) = File::open(dir) {
                let _ = dir.sync_all();
            }
        }
        Ok(())
    }
}

impl Drop for Replacement {
    fn drop(&mut self) {
        if !self.committed {
            // Nothing may have been created: a missing file is no error here.
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

/// Replaces `path` with what `write` puts into a temporary file beside it (see [`Replacement`]),
/// renamed into place only when `write` succeeds. `write` must sync what it wrote. A failed
/// rename is reported through `rename_error`.
pub fn replace_file<E>(
    path: &Path,
    write: impl FnOnce(&Path) -> std::result::Result<(), E>,
    rename_error: impl FnOnce(std::io::Error) -> E,
) -> std::result::Result<(), E> {
    let replacement = Replacement::new(path);
    write(replacement.path())?;
    replacement.commit().map_err(rename_error)
}

/// The marker between a target's name and the writer's pid in a temporary name.
const TEMP_MARK: &str = ".tmp.";

/// A temporary name beside `path` that no other writer uses: `<name>.tmp.<pid>.<n>`, so that two
/// processes, or two threads of one, writing the same file never write into one another's
/// temporary file, and a later writer can tell whose it is.
fn temp_path(path: &Path) -> PathBuf {
    static WRITES: AtomicU64 = AtomicU64::new(0);
    let n = WRITES.fetch_add(1, Ordering::Relaxed);
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!("{TEMP_MARK}{}.{n}", std::process::id()));
    path.with_file_name(name)
}

/// The pid in `file_name` if it is a temporary name of `target_name` (see [`temp_path`]).
fn temp_owner(target_name: &str, file_name: &str) -> Option<u32> {
    let rest = file_name
        .strip_prefix(target_name)?
        .strip_prefix(TEMP_MARK)?;
    let (pid, n) = rest.split_once('.')?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(pid) || !digits(n) {
        return None;
    }
    pid.parse().ok()
}

/// Whether process `pid` is running (on this machine, in this pid namespace). Where that cannot be
/// told, every process counts as running, so that nothing is removed.
fn process_alive(pid: u32) -> bool {
    if pid == std::process::id() {
        return true;
    }
    #[cfg(unix)]
    {
        // 0 and negative pids name process groups: never a writer's.
        let Ok(pid) = libc::pid_t::try_from(pid) else {
            return true;
        };
        if pid <= 0 {
            return true;
        }
        // SAFETY: signal 0 sends nothing; `kill` only checks that the process exists and may be
        // signalled, and has no memory effects.
        let status = unsafe { libc::kill(pid, 0) };
        // EPERM: it exists but belongs to another user.
        status == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
    }
    #[cfg(not(unix))]
    {
        true
    }
}

/// Removes the temporary files of `target` (canonical) whose writers are no longer running, as
/// far as they can be removed; returns what was removed.
fn remove_stale_temps(target: &Path) -> StaleTemps {
    let mut stale = StaleTemps {
        target: target.to_path_buf(),
        ..StaleTemps::default()
    };
    let (Some(name), Some(dir)) = (target.file_name().and_then(|n| n.to_str()), target.parent())
    else {
        return stale;
    };
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    // Best effort: a directory that cannot be listed fails the write itself, with its reason.
    let Ok(entries) = std::fs::read_dir(dir) else {
        return stale;
    };
    for entry in entries.flatten() {
        let file_name = entry.file_name();
        let Some(pid) = file_name.to_str().and_then(|f| temp_owner(name, f)) else {
            continue;
        };
        if process_alive(pid) {
            continue;
        }
        let bytes = entry.metadata().map_or(0, |m| m.len());
        if std::fs::remove_file(entry.path()).is_ok() {
            stale.files += 1;
            stale.bytes += bytes;
        }
    }
    stale
}

/// Where an [`Output`] goes.
enum Sink {
    Stdout(BufWriter<std::io::Stdout>),
    /// A target that is not a plain file (a device such as `/dev/null`, a named pipe): written
    /// in place, as it cannot be replaced.
    InPlace(BufWriter<File>),
    Replace(BufWriter<File>, Replacement),
}

/// An output file written through a [`Replacement`] (the target changes only at
/// [`Output::commit`]; dropped before, it stays as it was), or standard output.
pub struct Output {
    name: String,
    sink: Sink,
    stale: StaleTemps,
}

impl Output {
    /// An output replacing `path` when committed. A device (`/dev/...`) or named pipe is written
    /// directly. Removes the stale temporaries of `path` ([`Output::stale`]).
    pub fn create(path: &Path) -> Result<Output> {
        let name = path.display().to_string();
        let io = |e: std::io::Error| Error::Io {
            path: name.clone(),
            message: format!("cannot create: {e}"),
        };
        let special = path.starts_with("/dev")
            || std::fs::metadata(path).is_ok_and(|m| !m.is_file() && !m.is_dir());
        if special {
            let file = File::options().write(true).open(path).map_err(io)?;
            return Ok(Output {
                name,
                sink: Sink::InPlace(BufWriter::with_capacity(BUFFER, file)),
                stale: StaleTemps::default(),
            });
        }
        if path.is_dir() {
            return Err(Error::Io {
                path: name,
                message: "is a directory, not a file to write".into(),
            });
        }
        let replacement = Replacement::new(path);
        let file = File::create(replacement.path()).map_err(io)?;
        Ok(Output {
            name,
            stale: replacement.stale().clone(),
            sink: Sink::Replace(BufWriter::with_capacity(BUFFER, file), replacement),
        })
    }

    /// Standard output (messages name it "standard output").
    pub fn stdout() -> Output {
        Output {
            name: "standard output".into(),
            sink: Sink::Stdout(BufWriter::with_capacity(BUFFER, std::io::stdout())),
            stale: StaleTemps::default(),
        }
    }

    /// The output's name for messages: the path as given, or "standard output".
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether this is standard output.
    pub fn is_stdout(&self) -> bool {
        matches!(self.sink, Sink::Stdout(_))
    }

    /// The target's temporaries from interrupted writes that were removed when it was created.
    pub fn stale(&self) -> &StaleTemps {
        &self.stale
    }

    /// Finishes the output: flushes it, and for a file syncs it and renames it over the target.
    pub fn commit(self) -> Result<()> {
        let io = |what: &str, e: std::io::Error| Error::Io {
            path: self.name.clone(),
            message: format!("cannot {what}: {e}"),
        };
        match self.sink {
            Sink::Stdout(mut out) => out.flush().map_err(|e| io("write", e)),
            Sink::InPlace(mut out) => out.flush().map_err(|e| io("write", e)),
            Sink::Replace(out, replacement) => {
                let file = out.into_inner().map_err(|e| io("write", e.into_error()))?;
                file.sync_all().map_err(|e| io("write", e))?;
                drop(file);
                replacement
                    .commit()
                    .map_err(|e| io("rename the finished file into place", e))
            }
        }
    }

    fn writer(&mut self) -> &mut dyn Write {
        match &mut self.sink {
            Sink::Stdout(out) => out,
            Sink::InPlace(out) | Sink::Replace(out, _) => out,
        }
    }
}

impl Write for Output {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.writer().write(buf)
    }

    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        self.writer().write_all(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.writer().flush()
    }
}

impl std::fmt::Debug for Output {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Output").field("name", &self.name).finish()
    }
}

/// Whether `a` and `b` name the same file: the same device and inode when both exist (so links
/// and other spellings of one path match), else the same canonical directory and file name.
pub fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(ma), Ok(mb)) => {
            #[cfg(unix)]
            {
                use std::os::unix::fs::MetadataExt;
                ma.dev() == mb.dev() && ma.ino() == mb.ino()
            }
            #[cfg(not(unix))]
            {
                let _ = (ma, mb);
                std::fs::canonicalize(a).ok() == std::fs::canonicalize(b).ok()
            }
        }
        (Err(_), Err(_)) => absolute(a) == absolute(b),
        // One exists and the other does not: two different names.
        _ => false,
    }
}

/// `path` with its directory made canonical where it exists (the file itself may not).
fn absolute(path: &Path) -> PathBuf {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    match path.file_name() {
        Some(name) => dir.join(name),
        None => dir,
    }
}

/// Whether `path` can be read only once: it exists and is not a plain file (a pipe, standard
/// input, a named pipe, a device). Reading such an input twice, or in byte ranges, loses data.
pub fn readable_once(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| !m.is_file() && !m.is_dir())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    /// A pid that no process has: one of a child that has exited and been reaped.
    fn dead_pid() -> u32 {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        pid
    }

    #[test]
    fn a_write_replaces_the_target_only_when_committed() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("out");
        std::fs::write(&target, "old").unwrap();
        let mut out = Output::create(&target).unwrap();
        out.write_all(b"new").unwrap();
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "old");
        assert_eq!(
            names(dir.path()).len(),
            2,
            "the temporary beside the target"
        );
        out.commit().unwrap();
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "new");
        assert_eq!(names(dir.path()), ["out"]);

        // A failed write (the closure's error) leaves the old file and no temporary.
        let e = replace_file(
            &target,
            |tmp| {
                std::fs::write(tmp, "partial").unwrap();
                Err("failed midway")
            },
            |_| "rename",
        );
        assert_eq!(e, Err("failed midway"));
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "new");
        assert_eq!(names(dir.path()), ["out"]);
    }

    #[cfg(unix)]
    #[test]
    fn links_stay_links_and_modes_are_kept() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real");
        std::fs::write(&real, "old").unwrap();
        std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o640)).unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let mut out = Output::create(&link).unwrap();
        out.write_all(b"new").unwrap();
        out.commit().unwrap();
        assert!(std::fs::symlink_metadata(&link).unwrap().is_symlink());
        assert_eq!(std::fs::read_to_string(&real).unwrap(), "new");
        let mode = std::fs::metadata(&real).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o640);
    }

    #[test]
    fn stale_temporaries_of_dead_writers_are_removed_and_counted() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("m.ckpt");
        let dead = dead_pid();
        let live = std::process::id();
        std::fs::write(dir.path().join(format!("m.ckpt.tmp.{dead}.0")), [0u8; 1000]).unwrap();
        std::fs::write(dir.path().join(format!("m.ckpt.tmp.{dead}.7")), [0u8; 500]).unwrap();
        // Kept: a live writer's, another target's, names that only look alike.
        let keep = [
            format!("m.ckpt.tmp.{live}.0"),
            format!("other.tmp.{dead}.0"),
            format!("m.ckpt.tmp.{dead}.x"),
            format!("m.ckpt.tmp.5.tmp.{dead}.0"),
            "m.ckpt.tmp.0.0".to_string(),
        ];
        for name in &keep {
            std::fs::write(dir.path().join(name), "x").unwrap();
        }
        let out = Output::create(&target).unwrap();
        let stale = out.stale().clone();
        assert_eq!((stale.files, stale.bytes), (2, 1500));
        let message = stale.to_string();
        assert!(
            message.starts_with("removed 2 stale temporary files of ")
                && message.contains("m.ckpt (1.5 KiB)"),
            "{message}"
        );
        out.commit().unwrap();
        let mut expected: Vec<String> = keep.to_vec();
        expected.push("m.ckpt".into());
        expected.sort();
        assert_eq!(names(dir.path()), expected);
        // Nothing left to remove: nothing said.
        assert!(Replacement::new(&target).stale().is_empty());
    }

    #[test]
    fn sizes_read_well() {
        assert_eq!(byte_size(999), "999 bytes");
        assert_eq!(byte_size(1536), "1.5 KiB");
        assert_eq!(byte_size(3_300_000_000), "3.1 GiB");
    }

    #[test]
    fn same_file_sees_through_spellings_and_links() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a");
        std::fs::write(&a, "x").unwrap();
        let b = dir.path().join("b");
        std::fs::write(&b, "x").unwrap();
        let dotted = dir.path().join(".").join("a");
        assert!(same_file(&a, &dotted));
        assert!(!same_file(&a, &b));
        std::fs::hard_link(&a, dir.path().join("hard")).unwrap();
        assert!(same_file(&a, &dir.path().join("hard")));
        // Neither exists yet: the same name in the same directory.
        let new = dir.path().join("new");
        assert!(same_file(&new, &dir.path().join(".").join("new")));
        assert!(!same_file(&new, &a));
    }

    #[test]
    fn directories_are_refused_as_outputs() {
        let dir = tempfile::tempdir().unwrap();
        let e = Output::create(dir.path()).unwrap_err().to_string();
        assert!(e.contains("is a directory"), "{e}");
    }
}
