//! What `train`, `eval` and `predict` check before they read any data: a mistake in an option or
//! an output path found after training would cost the training.

use std::io::ErrorKind;
use std::path::Path;

use anyhow::{bail, Result};
use hogwild::executor::MAX_THREADS;

use crate::models::default_threads;
use crate::paths;

/// `--threads`: a worker thread count, 1 to [`MAX_THREADS`] (parsed by clap, so a bad count is
/// refused before anything runs).
pub fn parse_threads(text: &str) -> std::result::Result<usize, String> {
    match text.trim().parse::<usize>() {
        Ok(0) => Err("0 threads train nothing: give 1 or more".into()),
        Ok(n) if n > MAX_THREADS => Err(format!(
            "{n} is more than the {MAX_THREADS} worker threads a run can start"
        )),
        Ok(n) => Ok(n),
        Err(e) => Err(format!("\"{text}\" is not a number of threads: {e}")),
    }
}

/// `--epochs`: 1 or more (a run of 0 epochs would train nothing and save an untrained model).
pub fn parse_epochs(text: &str) -> std::result::Result<usize, String> {
    match text.trim().parse::<usize>() {
        Ok(0) => Err("0 epochs train nothing: give 1 or more".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(format!("\"{text}\" is not a number of epochs: {e}")),
    }
}

/// The run's thread count: `threads`, or every core. More threads than cores is allowed (a
/// benchmark may want it) but said: Hogwild threads that share a core take turns and slow each
/// other.
pub fn threads(threads: Option<usize>) -> usize {
    let cores = default_threads();
    let threads = threads.unwrap_or(cores);
    if threads > cores {
        eprintln!(
            "warning: --threads {threads} is more than the {cores} core{} available: the \
             threads will share them",
            if cores == 1 { "" } else { "s" }
        );
    }
    threads
}

/// Checks that `path`, given to `option`, can be written as an output: it is not a directory,
/// and its directory exists and takes new files (the outputs are written to a temporary file
/// there, then renamed). The last is found by creating a probe file, removed at once: unlike
/// permission bits, that also finds read-only mounts and the rights of the user who runs it.
pub fn output(path: &Path, option: &str) -> Result<()> {
    if paths::is_stdio(path) {
        return Ok(());
    }
    let shown = path.display();
    if path.is_dir() {
        bail!("{option} {shown}: is a directory (give a file name, e.g. {shown}/model.ckpt)");
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => bail!("{option} {shown}: {} is not a directory", dir.display()),
        Err(e) if e.kind() == ErrorKind::NotFound => {
            bail!(
                "{option} {shown}: the directory {} does not exist",
                dir.display()
            )
        }
        Err(e) => bail!("{option} {shown}: cannot read {}: {e}", dir.display()),
    }
    if let Err(e) = tempfile::Builder::new()
        .prefix(".hogwild-probe-")
        .tempfile_in(dir)
    {
        // The kind alone ("permission denied"): the error's text names the probe's random name.
        bail!(
            "{option} {shown}: cannot write in {}: {}",
            dir.display(),
            e.kind()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_and_epoch_counts_are_refused_with_the_reason() {
        assert_eq!(parse_threads("4"), Ok(4));
        assert!(parse_threads("0").unwrap_err().contains("1 or more"));
        let e = parse_threads("100000").unwrap_err();
        assert!(e.contains("100000") && e.contains("1024"), "{e}");
        assert!(parse_threads("many").unwrap_err().contains("many"));
        assert_eq!(parse_epochs("3"), Ok(3));
        assert!(parse_epochs("0").unwrap_err().contains("nothing"));
        assert!(parse_epochs("-1").unwrap_err().contains("-1"));
    }

    #[test]
    fn outputs_are_checked_without_leaving_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        output(&d.join("m.ckpt"), "--save").unwrap();
        assert_eq!(
            std::fs::read_dir(d).unwrap().count(),
            0,
            "the probe is removed"
        );
        let e = output(d, "--save").unwrap_err().to_string();
        assert!(e.contains("--save") && e.contains("is a directory"), "{e}");
        let e = output(&d.join("no/m.ckpt"), "--save")
            .unwrap_err()
            .to_string();
        assert!(e.contains("does not exist") && e.contains("no"), "{e}");
        std::fs::write(d.join("file"), "").unwrap();
        let e = output(&d.join("file/m.ckpt"), "-o")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("-o ") && e.contains("not a directory"), "{e}");
        // A bare file name is written in the current directory.
        assert!(output(Path::new("m.ckpt"), "--save").is_ok());
    }
}
