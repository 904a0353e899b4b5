//! What `train`, `eval`, `predict` and `check` share about the data feed: reading the
//! data.prototxt (with a warning for each Paddle field hogwild accepts but does not honour), its
//! `thread_num`, and the line prefix of Paddle's instance ids (`--parse-ins-id`).

use std::path::Path;

use anyhow::Result;
use clap::Args as ClapArgs;
use hogwild::feed::{DataFeedDesc, LinePrefix};

/// `--parse-ins-id`, `--parse-content`, `--parse-logkey`: Paddle's dataset settings of the same
/// names (`set_parse_ins_id` ...).
#[derive(ClapArgs, Debug, Clone)]
pub struct LinePrefixArgs {
    /// Lines start with an instance id written `1 <id>` before the slots (Paddle's
    /// `set_parse_ins_id(True)`); `predict` writes each prediction after its id and a tab.
    #[arg(long)]
    pub parse_ins_id: bool,
    /// Then a content written `1 <content>`, read past (Paddle's `set_parse_content(True)`).
    #[arg(long)]
    pub parse_content: bool,
    /// Then a log key written `1 <logkey>` (Paddle's `set_parse_logkey(True)`), which is the
    /// instance id `predict` writes, as Paddle takes it for the id.
    #[arg(long)]
    pub parse_logkey: bool,
}

impl LinePrefixArgs {
    pub fn prefix(&self) -> LinePrefix {
        LinePrefix {
            ins_id: self.parse_ins_id,
            content: self.parse_content,
            logkey: self.parse_logkey,
        }
    }
}

/// Reads the data.prototxt at `path`, warning once (on stderr) for each field it sets that
/// hogwild accepts but does not honour ([`DataFeedDesc::ignored_fields`]).
pub fn read_desc(path: &Path) -> Result<DataFeedDesc> {
    let desc = DataFeedDesc::from_file(path)?;
    for field in desc.ignored_fields() {
        eprintln!("warning: data feed desc {}: {field}", path.display());
    }
    Ok(desc)
}

/// The run's worker threads as a Paddle user expects them: `--threads` when given, else the
/// desc's `thread_num` when it sets one (> 0; Paddle trains with the dataset's threads when none
/// are given), else `None` (every core). A `--threads` that overrides another `thread_num` is
/// said once.
pub fn threads(given: Option<usize>, desc: &DataFeedDesc, path: &Path) -> Option<usize> {
    let from_desc = usize::try_from(desc.thread_num()).ok().filter(|&n| n > 0);
    match (given, from_desc) {
        (Some(n), Some(m)) if n != m => {
            eprintln!(
                "note: --threads {n} overrides thread_num: {m} of data feed desc {}",
                path.display()
            );
            Some(n)
        }
        (Some(n), _) => Some(n),
        (None, m) => m,
    }
}
