//! Offline tools around the data feed, not part of it: converters from other text formats to
//! MultiSlot files with their `DataFeedDesc` (`hogwild convert`), and the checker that reports
//! every bad line of a file (`hogwild check`).

mod check;
pub mod convert;

pub use check::{check_file, check_file_with, CheckOptions, CheckReport, MODEL_CLASS};
