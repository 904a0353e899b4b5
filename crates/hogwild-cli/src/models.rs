//! Building, loading and saving the CLI's models, and expanding file arguments.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use hogwild::checkpoint;
use hogwild::model::Model;
use hogwild::models::{Bow, ModelConfig, ModelKind, OptimizerConfig};
use hogwild::optim::{Adagrad, AdamAsync, Sgd};

/// A model of any built-in kind with any optimizer (each combination is its own compiled type).
#[allow(clippy::enum_variant_names)] // model and optimizer, both part of each name
pub enum AnyModel {
    BowSgd(Bow<Sgd<f32>>),
    BowAdagrad(Bow<Adagrad<f32>>),
    BowAdam(Bow<AdamAsync<f32>>),
}

/// Runs `$body` with `$m` bound to the concrete model.
#[macro_export]
macro_rules! with_model {
    ($any:expr, $m:ident => $body:expr) => {
        match $any {
            $crate::models::AnyModel::BowSgd($m) => $body,
            $crate::models::AnyModel::BowAdagrad($m) => $body,
            $crate::models::AnyModel::BowAdam($m) => $body,
        }
    };
}

impl AnyModel {
    /// A fresh model (parameters not yet initialised: run the startup step).
    pub fn new(config: &ModelConfig) -> Result<Self> {
        let ModelKind::Bow(bow) = &config.model;
        Ok(match config.optimizer {
            OptimizerConfig::Sgd { .. } => Self::BowSgd(Bow::new(
                bow.clone(),
                config.optimizer.sgd().unwrap_or(Sgd { lr: 0.0 }),
            )?),
            OptimizerConfig::Adagrad { .. } => Self::BowAdagrad(Bow::new(
                bow.clone(),
                config.optimizer.adagrad().context("adagrad settings")?,
            )?),
            OptimizerConfig::AdamAsync { .. } => Self::BowAdam(Bow::new(
                bow.clone(),
                config
                    .optimizer
                    .adam_async()
                    .context("adam_async settings")?,
            )?),
        })
    }

    /// A model saved by [`AnyModel::save`]; its configuration comes from the checkpoint.
    pub fn load(path: &Path) -> Result<(ModelConfig, Self)> {
        let mut ck = checkpoint::load(path)?;
        let config =
            ModelConfig::from_toml(&ck.meta, &format!("{} (stored config)", path.display()))?;
        let ModelKind::Bow(bow) = &config.model;
        let opt = config.optimizer;
        let model = match opt {
            OptimizerConfig::Sgd { .. } => Self::BowSgd(Bow::from_checkpoint(
                bow.clone(),
                opt.sgd().context("sgd settings")?,
                &mut ck,
            )?),
            OptimizerConfig::Adagrad { .. } => Self::BowAdagrad(Bow::from_checkpoint(
                bow.clone(),
                opt.adagrad().context("adagrad settings")?,
                &mut ck,
            )?),
            OptimizerConfig::AdamAsync { .. } => Self::BowAdam(Bow::from_checkpoint(
                bow.clone(),
                opt.adam_async().context("adam_async settings")?,
                &mut ck,
            )?),
        };
        Ok((config, model))
    }

    /// Saves the model (atomically, with a checksum).
    pub fn save(&self, path: &Path) -> Result<()> {
        with_model!(self, m => checkpoint::save(path, &m.describe(), &m.tables()))?;
        Ok(())
    }

    /// Bytes held by the parameter tables and their optimizer state.
    pub fn memory_bytes(&self) -> usize {
        with_model!(self, m => m.tables().iter().map(|t| t.memory_bytes()).sum())
    }
}

/// Expands file arguments: plain paths, `@list` files (one path per line, relative to the list),
/// and `*` / `?` patterns in the last path component. The result is sorted per argument.
pub fn expand_files(args: &[String]) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for arg in args {
        if let Some(list) = arg.strip_prefix('@') {
            let text = std::fs::read_to_string(list)
                .with_context(|| format!("cannot read the file list {list}"))?;
            let base = Path::new(list).parent().unwrap_or(Path::new(""));
            for line in text
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty() && !l.starts_with('#'))
            {
                out.push(base.join(line));
            }
        } else if arg.contains(['*', '?']) {
            let path = Path::new(arg);
            let dir = match path.parent() {
                Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
                _ => PathBuf::from("."),
            };
            let pattern = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if dir.to_str().is_some_and(|d| d.contains(['*', '?'])) {
                bail!("{arg}: patterns are only supported in the file name, not in directories");
            }
            let mut found: Vec<PathBuf> = std::fs::read_dir(&dir)
                .with_context(|| format!("{arg}: cannot list {}", dir.display()))?
                .filter_map(|e| e.ok())
                .filter(|e| e.file_name().to_str().is_some_and(|n| matches(pattern, n)))
                .map(|e| e.path())
                .collect();
            if found.is_empty() {
                bail!("{arg}: no file matches");
            }
            found.sort();
            out.extend(found);
        } else {
            out.push(PathBuf::from(arg));
        }
    }
    if out.is_empty() {
        bail!("no data files given");
    }
    Ok(out)
}

/// Whether `name` matches `pattern` (`*` any run, `?` one character).
fn matches(pattern: &str, name: &str) -> bool {
    let (p, n): (Vec<char>, Vec<char>) = (pattern.chars().collect(), name.chars().collect());
    let (mut pi, mut ni, mut star, mut mark) = (0, 0, None, 0);
    while ni < n.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == n[ni]) {
            pi += 1;
            ni += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = ni;
            pi += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ni = mark;
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

/// The number of threads to use when none is given: every core.
pub fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_match_like_a_shell() {
        assert!(matches("part-*", "part-00"));
        assert!(matches("*.txt", "a.txt"));
        assert!(matches("p?rt", "part"));
        assert!(!matches("part-*", "xpart-0"));
        assert!(!matches("*.txt", "a.txt.gz"));
    }

    #[test]
    fn globs_and_lists_expand_and_mistakes_are_named() {
        let dir = tempfile::tempdir().unwrap();
        for n in ["part-1", "part-0", "other"] {
            std::fs::write(dir.path().join(n), "").unwrap();
        }
        let d = dir.path().display();
        let got = expand_files(&[format!("{d}/part-*")]).unwrap();
        assert_eq!(
            got,
            vec![dir.path().join("part-0"), dir.path().join("part-1")]
        );
        let list = dir.path().join("files.txt");
        std::fs::write(&list, "other\n# comment\npart-0\n").unwrap();
        let got = expand_files(&[format!("@{}", list.display())]).unwrap();
        assert_eq!(
            got,
            vec![dir.path().join("other"), dir.path().join("part-0")]
        );
        let e = expand_files(&[format!("{d}/none-*")])
            .unwrap_err()
            .to_string();
        assert!(e.contains("no file matches"), "{e}");
        assert!(expand_files(&[]).is_err());
    }
}
