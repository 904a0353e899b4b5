//! Opening a data file as a stream of lines: directly, or piped through `pipe_command`, with gzip
//! recognised by its magic bytes and decompressed transparently. As Paddle's file system layer
//! does (`zcat FILE | pipe_command`), a gzip file is decompressed before the command reads it.
//! A command that writes no line for a file that is not empty fails the file (with what it wrote
//! on standard error); what a command that succeeds writes on standard error is kept for the
//! caller to show ([`Source::take_stderr`]).

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use flate2::read::MultiGzDecoder;

use super::origin::PieceName;
use crate::{Error, Result};

const BUFFER: usize = 1 << 18;
const STDERR_TAIL: usize = 2048;
const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// Whether a `pipe_command` means "read the file directly".
pub(crate) fn is_direct(command: &str) -> bool {
    let command = command.trim();
    command.is_empty() || command == "cat"
}

struct Piped {
    command: String,
    child: Child,
    stderr: Option<JoinHandle<()>>,
    stderr_tail: Arc<Mutex<Vec<u8>>>,
    /// The thread that writes the file (decompressed if it is gzip) to the command's standard
    /// input; it returns the bytes it read of the file and the error of reading it, if any.
    feeder: Option<JoinHandle<(u64, Option<std::io::Error>)>>,
    /// Whether the file was gzip, decompressed before the command read it.
    decompressed: bool,
}

/// A file opened for reading lines.
pub(crate) struct Source {
    name: String,
    reader: Box<dyn BufRead + Send>,
    piped: Option<Piped>,
    /// Reading a byte range: the bytes from the next line's start to the range's end (no line
    /// starting at or past the end is read).
    remaining: Option<u64>,
    /// Reading a byte range: the file and the offset of the range's first line, for line numbers.
    range_file: Option<(PathBuf, u64)>,
    /// Lines before the range's first line, once counted.
    line_base: Option<u64>,
    /// Lines read so far (for a `pipe_command` that wrote none).
    lines_read: u64,
    /// What a `pipe_command` that succeeded wrote on standard error, once it has finished.
    stderr_note: Option<String>,
}

/// The first bytes of `raw`, as many as gzip's magic has (fewer only at the end).
fn read_head(raw: &mut impl Read, name: &str) -> Result<Vec<u8>> {
    let mut head = [0u8; GZIP_MAGIC.len()];
    let mut got = 0;
    while got < head.len() {
        match raw.read(&mut head[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(Error::io(name, &e)),
        }
    }
    Ok(head[..got].to_vec())
}

/// `raw` buffered, and decompressed if it starts with gzip's magic bytes. The probe reads the
/// first bytes itself (a pipe may hand them over one read at a time) and puts them back in
/// front of the rest, so nothing is lost from an input that cannot seek.
fn buffered_maybe_gzip<R: Read + Send + 'static>(
    mut raw: R,
    name: &str,
) -> Result<Box<dyn BufRead + Send>> {
    let head = read_head(&mut raw, name)?;
    let is_gzip = head == GZIP_MAGIC;
    let whole = std::io::Cursor::new(head).chain(raw);
    let reader = BufReader::with_capacity(BUFFER, whole);
    if is_gzip {
        Ok(Box::new(BufReader::with_capacity(
            BUFFER,
            MultiGzDecoder::new(reader),
        )))
    } else {
        Ok(Box::new(reader))
    }
}

impl Source {
    /// Opens `path`, piping it through `pipe_command` unless that is empty or `cat`.
    pub(crate) fn open(path: &Path, pipe_command: &str) -> Result<Self> {
        let name = path.display().to_string();
        let file = File::open(path).map_err(|e| Error::io(&name, &e))?;
        if is_direct(pipe_command) {
            let reader = buffered_maybe_gzip(file, &name)?;
            return Ok(Source::direct(name, reader));
        }
        let command = pipe_command.to_string();
        let spawn_error = |e: std::io::Error| Error::PipeCommand {
            command: command.clone(),
            file: name.clone(),
            status: format!("cannot start: {e}"),
            stderr: String::new(),
        };
        // The file is handed to the command as Paddle's readers hand it: decompressed.
        let mut file = file;
        let head = read_head(&mut file, &name)?;
        let decompressed = head == GZIP_MAGIC;
        let input: Box<dyn Read + Send> = {
            let whole = std::io::Cursor::new(head).chain(file);
            if decompressed {
                Box::new(MultiGzDecoder::new(BufReader::with_capacity(BUFFER, whole)))
            } else {
                Box::new(whole)
            }
        };
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(&command)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(spawn_error)?;
        let stdin = child.stdin.take().expect("stdin is piped");
        let feeder = std::thread::spawn(move || feed_command(input, stdin));
        let stdout = child.stdout.take().expect("stdout is piped");
        let mut stderr = child.stderr.take().expect("stderr is piped");
        let stderr_tail = Arc::new(Mutex::new(Vec::new()));
        let tail = Arc::clone(&stderr_tail);
        let stderr_thread = std::thread::spawn(move || {
            let mut chunk = [0u8; 4096];
            while let Ok(n) = stderr.read(&mut chunk) {
                if n == 0 {
                    break;
                }
                let mut tail = tail.lock().unwrap_or_else(|e| e.into_inner());
                tail.extend_from_slice(&chunk[..n]);
                if tail.len() > STDERR_TAIL {
                    let cut = tail.len() - STDERR_TAIL;
                    tail.drain(..cut);
                }
            }
        });
        let piped = Piped {
            command,
            child,
            stderr: Some(stderr_thread),
            stderr_tail,
            feeder: Some(feeder),
            decompressed,
        };
        let reader = buffered_maybe_gzip(stdout, &name);
        let mut source = Source::direct(name, Box::new(std::io::empty()));
        source.piped = Some(piped);
        match reader {
            Ok(reader) => source.reader = reader,
            Err(e) => return Err(source.finish().err().unwrap_or(e)),
        }
        Ok(source)
    }

    fn direct(name: String, reader: Box<dyn BufRead + Send>) -> Self {
        Source {
            name,
            reader,
            piped: None,
            remaining: None,
            range_file: None,
            line_base: Some(0),
            lines_read: 0,
            stderr_note: None,
        }
    }

    /// The size of `path` if it can be read in byte ranges: a plain file read directly (no
    /// `pipe_command`, not gzip). `None` otherwise, and for anything that is not a plain file
    /// (a pipe, standard input, a named pipe), which is not read here: what this probe read
    /// from it would be lost to the reader that opens it next.
    pub(crate) fn splittable_len(path: &Path, pipe_command: &str) -> Result<Option<u64>> {
        if !is_direct(pipe_command) {
            return Ok(None);
        }
        let name = path.display().to_string();
        let meta = std::fs::metadata(path).map_err(|e| Error::io(&name, &e))?;
        if !meta.is_file() {
            return Ok(None);
        }
        let len = meta.len();
        let mut file = File::open(path).map_err(|e| Error::io(&name, &e))?;
        Ok((read_head(&mut file, &name)? != GZIP_MAGIC).then_some(len))
    }

    /// Opens the lines of plain file `path` that start inside `range` (a line starts at offset 0
    /// or after a newline); the last one is read to its end even past the range. Ranges that
    /// tile a file read each line exactly once. Line numbers in messages stay the file's own.
    pub(crate) fn open_range(path: &Path, range: Range<u64>) -> Result<Self> {
        let name = path.display().to_string();
        let mut file = File::open(path).map_err(|e| Error::io(&name, &e))?;
        let mut first_line = 0;
        if range.start > 0 {
            // The line holding byte `start - 1` belongs to the range before, unless that byte is
            // its newline: skip to just past the next newline at or after `start - 1`.
            file.seek(SeekFrom::Start(range.start - 1))
                .map_err(|e| Error::io(&name, &e))?;
        }
        let mut reader = BufReader::with_capacity(BUFFER, file);
        if range.start > 0 {
            let mut skipped = Vec::new();
            let n = reader
                .read_until(b'\n', &mut skipped)
                .map_err(|e| Error::io(&name, &e))?;
            first_line = range.start - 1 + n as u64;
        }
        let mut source = Source::direct(name, Box::new(reader));
        source.remaining = Some(range.end.saturating_sub(first_line));
        source.range_file = Some((path.to_path_buf(), first_line));
        source.line_base = (first_line == 0).then_some(0);
        Ok(source)
    }

    /// The number of lines before the first line this source reads: 0 unless it reads a byte
    /// range, whose line numbers in messages are then counted from the file's start.
    pub(crate) fn line_base(&mut self) -> Result<u64> {
        if let Some(base) = self.line_base {
            return Ok(base);
        }
        let Some((path, first_line)) = &self.range_file else {
            return Ok(0);
        };
        let lines = lines_before(path, *first_line)?;
        self.line_base = Some(lines);
        Ok(lines)
    }

    /// What names this source's lines in the origins of the instances read from it: the lines
    /// before a byte range are counted only if a message needs them.
    pub(crate) fn piece_name(&self) -> PieceName {
        match (&self.line_base, &self.range_file) {
            (None, Some((path, first_line))) => {
                PieceName::at_offset(&self.name, path.clone(), *first_line)
            }
            (base, _) => PieceName::known(&self.name, base.unwrap_or(0)),
        }
    }

    /// The file's name as shown in messages.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// Reads the next line into `buf` without its newline (`\n` or `\r\n`). Returns `false` at the
    /// end. A last line without a newline is returned like the others, except that from a
    /// `pipe_command` the command's exit is checked first, so a command that died mid-line is
    /// reported as such rather than as a garbled line.
    pub(crate) fn read_line(&mut self, buf: &mut Vec<u8>) -> Result<bool> {
        buf.clear();
        if self.remaining == Some(0) {
            return Ok(false);
        }
        let n = match self.reader.read_until(b'\n', buf) {
            Ok(n) => n,
            Err(e) => {
                let err = Error::io(&self.name, &e);
                return Err(self.finish().err().unwrap_or(err));
            }
        };
        if n == 0 {
            return Ok(false);
        }
        self.lines_read += 1;
        if let Some(remaining) = &mut self.remaining {
            *remaining = remaining.saturating_sub(n as u64);
        }
        if buf.last() == Some(&b'\n') {
            buf.pop();
            if buf.last() == Some(&b'\r') {
                buf.pop();
            }
        } else if self.piped.is_some() {
            self.wait_child()?;
        }
        Ok(true)
    }

    /// Whether the lines come from a `pipe_command`.
    pub(crate) fn is_piped(&self) -> bool {
        self.piped.is_some()
    }

    /// Reads any output left, then waits for the `pipe_command` and reports its failure.
    pub(crate) fn finish(&mut self) -> Result<()> {
        if self.piped.is_none() {
            return Ok(());
        }
        // Drain so a command blocked on a full pipe can exit; read errors here are superseded by
        // the exit status.
        let _ = std::io::copy(&mut self.reader, &mut std::io::sink());
        self.wait_child()
    }

    /// What the `pipe_command` wrote on standard error, when it succeeded and wrote anything:
    /// `pipe_command "C" wrote on standard error reading FILE: TEXT`. Known once the source
    /// has finished; taken once.
    pub(crate) fn take_stderr(&mut self) -> Option<String> {
        self.stderr_note.take()
    }

    fn wait_child(&mut self) -> Result<()> {
        let Some(mut piped) = self.piped.take() else {
            return Ok(());
        };
        self.reader = Box::new(std::io::empty());
        let status = piped.child.wait();
        if let Some(thread) = piped.stderr.take() {
            // The stderr reader only copies bytes; a panic there leaves the tail as it was.
            let _ = thread.join();
        }
        // The feeder ends once the file is written or the command has closed its input; `fed`
        // is what it read of the file, more than 0 for any file that is not empty.
        let (fed, read_error) = piped
            .feeder
            .take()
            .and_then(|thread| thread.join().ok())
            .unwrap_or((0, None));
        let stderr_tail = {
            let tail = piped.stderr_tail.lock().unwrap_or_else(|e| e.into_inner());
            String::from_utf8_lossy(&tail).trim().to_string()
        };
        if let Some(e) = read_error {
            let what = if piped.decompressed {
                "cannot decompress it for the pipe_command"
            } else {
                "cannot read it for the pipe_command"
            };
            return Err(Error::Io {
                path: self.name.clone(),
                message: format!("{what}: {e}"),
            });
        }
        // A command given gzip's bytes by a user who expected Paddle's behaviour would be
        // puzzling without this.
        let input = if piped.decompressed {
            " (its input was the file decompressed, as Paddle's readers hand a .gz file over)"
        } else {
            ""
        };
        let status = match status {
            Ok(status) if status.success() && (self.lines_read > 0 || fed == 0) => {
                if !stderr_tail.is_empty() {
                    self.stderr_note = Some(format!(
                        "pipe_command \"{}\" wrote on standard error reading {}: {stderr_tail}",
                        piped.command, self.name
                    ));
                }
                return Ok(());
            }
            Ok(status) if status.success() => {
                format!("it wrote no line for a file that is not empty{input}")
            }
            Ok(status) => format!("{}{input}", describe_status(status)),
            Err(e) => format!("cannot wait for it: {e}"),
        };
        Err(Error::PipeCommand {
            command: piped.command,
            file: self.name.clone(),
            status,
            stderr: stderr_tail,
        })
    }
}

/// Writes `input` to a `pipe_command`'s standard input and closes it; returns the bytes read
/// from `input` and the error of reading it, if any. A command that stops reading early (`head`) is no
/// error: its exit status tells.
fn feed_command(
    mut input: Box<dyn Read + Send>,
    mut stdin: std::process::ChildStdin,
) -> (u64, Option<std::io::Error>) {
    use std::io::{ErrorKind, Write};
    let mut buf = vec![0u8; 1 << 16];
    let mut fed = 0u64;
    loop {
        let n = match input.read(&mut buf) {
            Ok(0) => return (fed, None),
            Ok(n) => n,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return (fed, Some(e)),
        };
        fed += n as u64;
        if stdin.write_all(&buf[..n]).is_err() {
            // The command closed its input (or died): whatever it did is in its status.
            return (fed, None);
        }
    }
}

/// The lines of `path` before byte `offset` (the start of a line).
pub(crate) fn lines_before(path: &Path, offset: u64) -> Result<u64> {
    let name = path.display().to_string();
    let file = File::open(path).map_err(|e| Error::io(&name, &e))?;
    let mut head = BufReader::with_capacity(BUFFER, file.take(offset));
    let mut lines = 0u64;
    loop {
        let buf = head.fill_buf().map_err(|e| Error::io(&name, &e))?;
        if buf.is_empty() {
            break;
        }
        lines += buf.iter().filter(|&&b| b == b'\n').count() as u64;
        let n = buf.len();
        head.consume(n);
    }
    Ok(lines)
}

/// Plain files at least this large are split into byte ranges that readers parse in parallel.
pub(crate) const MIN_PIECE_BYTES: u64 = 1 << 20;

/// What one reader parses during a load: a whole file, or the lines that start in a byte range
/// of a plain one.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Piece {
    pub(crate) file: usize,
    pub(crate) range: Option<Range<u64>>,
}

/// Cuts `files` into pieces for `readers` readers, in file order: a plain file (read directly,
/// not gzip) of at least `2 * min_bytes` becomes up to `readers` ranges of at least `min_bytes`;
/// any other file is one piece.
pub(crate) fn plan_pieces(
    files: &[PathBuf],
    pipe_command: &str,
    readers: usize,
    min_bytes: u64,
) -> Result<Vec<Piece>> {
    let mut pieces = Vec::with_capacity(files.len());
    for (file, path) in files.iter().enumerate() {
        let len = match readers {
            0 | 1 => None,
            _ => Source::splittable_len(path, pipe_command)?,
        };
        let count = len.map_or(1, |len| (len / min_bytes.max(1)).min(readers as u64).max(1));
        if count == 1 {
            pieces.push(Piece { file, range: None });
            continue;
        }
        let len = len.unwrap_or(0);
        pieces.extend((0..count).map(|k| {
            // The last range is open-ended: whatever the file holds past its size at planning.
            let end = if k + 1 == count {
                u64::MAX
            } else {
                (k + 1) * len / count
            };
            Piece {
                file,
                range: Some(k * len / count..end),
            }
        }));
    }
    Ok(pieces)
}

fn describe_status(status: std::process::ExitStatus) -> String {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(signal) = status.signal() {
            return format!("killed by signal {signal}");
        }
    }
    match status.code() {
        Some(code) => format!("exit status {code}"),
        None => status.to_string(),
    }
}

impl Drop for Source {
    fn drop(&mut self) {
        if let Some(piped) = &mut self.piped {
            // Stopped early: the command's output is no longer wanted.
            let _ = piped.child.kill();
            let _ = piped.child.wait();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_tile_plain_files_and_keep_other_files_whole() {
        let dir = tempfile::tempdir().unwrap();
        let plain = dir.path().join("plain");
        std::fs::write(&plain, vec![b'x'; 1000]).unwrap();
        let small = dir.path().join("small");
        std::fs::write(&small, b"1 1 1 0\n").unwrap();
        let gzip = dir.path().join("gz");
        std::fs::write(&gzip, [0x1f, 0x8b, 8, 0]).unwrap();
        let files = [plain, small, gzip];
        let pieces = plan_pieces(&files, "", 3, 100).unwrap();
        let ranges: Vec<_> = pieces.iter().map(|p| (p.file, p.range.clone())).collect();
        assert_eq!(
            ranges,
            vec![
                (0, Some(0..333)),
                (0, Some(333..666)),
                (0, Some(666..u64::MAX)),
                (1, None),
                (2, None),
            ]
        );
        // No more ranges than `len / min_bytes`; one reader, or a pipe command, splits nothing.
        assert_eq!(plan_pieces(&files[..1], "", 8, 400).unwrap().len(), 2);
        assert_eq!(plan_pieces(&files[..1], "", 1, 1).unwrap().len(), 1);
        assert_eq!(plan_pieces(&files[..1], "gzip -dc", 4, 1).unwrap().len(), 1);
        assert_eq!(plan_pieces(&files[..1], "cat", 4, 1).unwrap().len(), 4);
        // A missing file is named.
        let missing = dir.path().join("missing");
        let error = plan_pieces(std::slice::from_ref(&missing), "", 2, 1).unwrap_err();
        assert!(error.to_string().contains(&missing.display().to_string()));
    }

    /// A pipe: one byte per read, no seeking.
    struct Trickle(std::io::Cursor<Vec<u8>>);

    impl Read for Trickle {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = buf.len().min(1);
            self.0.read(&mut buf[..n])
        }
    }

    fn read_all(mut reader: Box<dyn BufRead + Send>) -> Vec<u8> {
        let mut out = Vec::new();
        reader.read_to_end(&mut out).unwrap();
        out
    }

    #[test]
    fn the_gzip_probe_keeps_every_byte_of_a_pipe() {
        for text in [&b"1 5 1 0\n2 7 8 1 1\n"[..], b"x", b""] {
            let pipe = Trickle(std::io::Cursor::new(text.to_vec()));
            assert_eq!(read_all(buffered_maybe_gzip(pipe, "pipe").unwrap()), text);
        }
        // Gzip's magic arriving one byte at a time is still recognised.
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut gz, b"1 5 1 0\n").unwrap();
        let pipe = Trickle(std::io::Cursor::new(gz.finish().unwrap()));
        assert_eq!(
            read_all(buffered_maybe_gzip(pipe, "pipe").unwrap()),
            b"1 5 1 0\n"
        );
    }

    /// A named pipe is planned as one piece without being read, so the reader that opens it gets
    /// every byte (the probe once read two bytes from it, which were lost).
    #[cfg(unix)]
    #[test]
    fn named_pipes_are_never_split_or_probed() {
        use std::os::unix::ffi::OsStrExt;
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let c_path = std::ffi::CString::new(fifo.as_os_str().as_bytes()).unwrap();
        // SAFETY: `c_path` is a NUL-terminated path that outlives the call.
        assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
        let text = "1 5 1 0\n".repeat(1000);
        let writer = {
            let (fifo, text) = (fifo.clone(), text.clone());
            std::thread::spawn(move || std::fs::write(fifo, text).unwrap())
        };
        let files = [fifo.clone()];
        let pieces = plan_pieces(&files, "", 4, 1).unwrap();
        assert_eq!(
            pieces,
            vec![Piece {
                file: 0,
                range: None
            }]
        );
        let mut source = Source::open(&fifo, "").unwrap();
        let (mut buf, mut lines) = (Vec::new(), 0);
        while source.read_line(&mut buf).unwrap() {
            assert_eq!(buf, b"1 5 1 0");
            lines += 1;
        }
        assert_eq!(lines, 1000);
        writer.join().unwrap();
    }
}
