//! The command line's files: `-` for standard input and output, and the checks every command
//! makes before it creates an output (its inputs exist, no output is one of its inputs, an input
//! that can be read only once is not read twice). Outputs themselves are written through
//! [`hogwild::files::Output`], which replaces a file only once its new content is whole.

use std::io::{BufRead, IsTerminal};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use hogwild::files::{readable_once, same_file, Output};

/// The argument that names standard input (for inputs) or standard output (for `-o`).
pub const STDIO: &str = "-";

/// Where standard input is opened as a file, so that every reader (the feed, the converters)
/// reads it as it reads any other file.
const STDIN_PATH: &str = "/dev/stdin";

/// Prints a status line: to standard output, or to standard error when standard output carries
/// the command's data (`-o -`), which the line must not get mixed into.
#[macro_export]
macro_rules! say {
    ($data_on_stdout:expr, $($arg:tt)*) => {
        if $data_on_stdout {
            eprintln!($($arg)*)
        } else {
            println!($($arg)*)
        }
    };
}

/// Whether an argument is `-`.
pub fn is_stdio(arg: &Path) -> bool {
    arg.as_os_str() == STDIO
}

/// The file an input argument names: `-` is standard input.
pub fn input(arg: &Path) -> PathBuf {
    if is_stdio(arg) {
        PathBuf::from(STDIN_PATH)
    } else {
        arg.to_path_buf()
    }
}

/// Refuses `-` given more than once among `args`: standard input can be read only once.
pub fn stdin_once<'a>(args: impl IntoIterator<Item = &'a str>) -> Result<()> {
    if args.into_iter().filter(|a| *a == STDIO).count() > 1 {
        bail!("standard input (-) is named more than once: it can be read only once");
    }
    Ok(())
}

/// The output an `-o` argument names: `-` is standard output. Says which stale temporaries of
/// interrupted writes of the same file it removed (see [`hogwild::files`]); `data_on_stdout`
/// tells where such messages go.
pub fn output(arg: &Path, data_on_stdout: bool) -> Result<Output> {
    if is_stdio(arg) {
        return Ok(Output::stdout());
    }
    let out = Output::create(arg)?;
    if !out.stale().is_empty() {
        say!(data_on_stdout, "{}", out.stale());
    }
    Ok(out)
}

/// Checks that every input (`what`, e.g. "data file") exists and is not a directory, without
/// reading any (a pipe read here would lose what was read): run before any output is created and
/// before a long load of the others, so that a missing input is reported while the outputs are
/// still as they were.
pub fn check_inputs<'a>(what: &str, inputs: impl IntoIterator<Item = &'a Path>) -> Result<()> {
    for path in inputs {
        match std::fs::metadata(path) {
            Ok(meta) if meta.is_dir() => {
                bail!("{what} {}: is a directory, not a file", shown(path))
            }
            Ok(_) => {}
            Err(e) => bail!("{what} {}: cannot read: {e}", shown(path)),
        }
    }
    Ok(())
}

/// Refuses to write `output` (the `what` of the command, e.g. "the output") when it is the same
/// file as one of `inputs`, however either is spelled: writing it would destroy that input.
pub fn refuse_overwrite<'a>(
    output: &Path,
    what: &str,
    inputs: impl IntoIterator<Item = &'a Path>,
) -> Result<()> {
    if is_stdio(output) {
        return Ok(());
    }
    for input in inputs {
        if same_file(output, input) {
            bail!(
                "{what} {} is the input {}: writing it would destroy the input; \
                 choose another output file",
                output.display(),
                input.display()
            );
        }
    }
    Ok(())
}

/// Refuses an input that can be read only once (a pipe, standard input) where the command
/// reads it twice: `why` says why it does.
pub fn refuse_read_once(inputs: &[PathBuf], why: &str) -> Result<()> {
    if let Some(path) = inputs.iter().find(|p| readable_once(p)) {
        bail!(
            "{} is a pipe and can be read only once, but {why}: write it to a file first",
            shown(path)
        );
    }
    Ok(())
}

/// An input's name for messages: `-` for standard input.
fn shown(path: &Path) -> String {
    if path == Path::new(STDIN_PATH) {
        format!("standard input ({STDIO})")
    } else {
        path.display().to_string()
    }
}

/// Calls `f` with each line of standard input, its number (from 1) and its text (`Err` when it is
/// not UTF-8), for commands that answer queries line by line (word2vec.c's `distance`, fastText's
/// `print-word-vectors`). When standard input is a terminal, `prompt` is shown on standard error
/// before each line and `f` is told to flush its answer at once.
pub fn stdin_lines(
    prompt: &str,
    mut f: impl FnMut(u64, std::result::Result<&str, std::str::Utf8Error>, bool) -> Result<()>,
) -> Result<()> {
    let stdin = std::io::stdin();
    let interactive = stdin.is_terminal();
    let mut input = stdin.lock();
    let mut buf = Vec::new();
    for line in 1.. {
        if interactive {
            eprint!("{prompt}");
        }
        buf.clear();
        if input
            .read_until(b'\n', &mut buf)
            .context("reading standard input")?
            == 0
        {
            break;
        }
        f(line, std::str::from_utf8(&buf), interactive)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dashes_name_standard_input_once() {
        assert_eq!(input(Path::new("-")), PathBuf::from(STDIN_PATH));
        assert_eq!(input(Path::new("a/-")), PathBuf::from("a/-"));
        assert!(stdin_once(["a", "-", "b"]).is_ok());
        let e = stdin_once(["-", "b", "-"]).unwrap_err().to_string();
        assert!(e.contains("more than once"), "{e}");
    }

    #[test]
    fn an_output_that_is_an_input_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("x.txt");
        std::fs::write(&data, "1\n").unwrap();
        let other = dir.path().join("y.txt");
        let dotted = dir.path().join(".").join("x.txt");
        let e = refuse_overwrite(&dotted, "the output", [data.as_path()])
            .unwrap_err()
            .to_string();
        assert!(e.contains("would destroy the input"), "{e}");
        assert!(refuse_overwrite(&other, "the output", [data.as_path()]).is_ok());
        assert!(refuse_overwrite(Path::new("-"), "the output", [data.as_path()]).is_ok());
        let e = check_inputs("data file", [other.as_path()])
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with(&format!("data file {}: cannot read", other.display())),
            "{e}"
        );
        let e = check_inputs("--test file", [dir.path()])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("--test file") && e.contains("is a directory"),
            "{e}"
        );
    }
}
