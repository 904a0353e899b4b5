//! The data feed: Paddle-compatible `DataFeedDesc` (read from `data.prototxt`), the MultiSlot
//! text format, and threads that read files into batches for Hogwild workers.
//!
//! Reader threads take files from a shared queue (more workers than files is fine), parse lines
//! into [`Batch`]es and hand them to the workers' own bounded queues, so parsing runs ahead
//! while workers compute and workers do not share a lock while their queues have batches (an
//! idle worker takes from the others' queues, see [`WorkerQueue::recv`]). Files may be gzip-compressed (detected
//! by magic bytes) or piped through the desc's `pipe_command` (a gzip file decompressed first, as
//! Paddle hands it over). Which field of Paddle's desc is honoured: docs/data-feed.md. Converters from other formats and
//! the file checker are tools beside the feed: [`crate::tools`].
//!
//! ```
//! use hogwild::feed::{start_feed, DataFeedDesc, FeedOptions, SlotValues};
//!
//! let desc = DataFeedDesc::from_text(r#"
//!     name: "MultiSlotDataFeed"
//!     batch_size: 2
//!     multi_slot_desc {
//!       slots { name: "words" type: "uint64" is_dense: false is_used: true }
//!       slots { name: "label" type: "uint64" is_dense: false is_used: true }
//!     }
//! "#).unwrap();
//! let dir = std::env::temp_dir().join(format!("hogwild-feed-doc-{}", std::process::id()));
//! std::fs::create_dir_all(&dir).unwrap();
//! let file = dir.join("part-0");
//! std::fs::write(&file, "3 1234 2345 3456 1 1\n2 7 8 1 0\n1 9 1 1\n").unwrap();
//!
//! let (mut queues, handle) = start_feed(&desc, &[file], &FeedOptions::default()).unwrap();
//! let first = queues[0].recv().unwrap();
//! assert_eq!(first.len, 2);
//! assert_eq!(first.slots[0].offsets, vec![0, 3, 5]);
//! assert_eq!(first.slots[0].values, SlotValues::U64(vec![1234, 2345, 3456, 7, 8]));
//! assert_eq!(queues[0].recv().unwrap().len, 1); // the short last batch
//! assert!(queues[0].recv().is_none());
//! let stats = handle.join().unwrap();
//! assert_eq!(stats.instances, 3);
//! # std::fs::remove_dir_all(&dir).unwrap();
//! ```

mod batch;
mod dataset;
mod desc;
mod file_queue;
mod origin;
mod parser;
mod reader;
mod source;

pub use batch::{Batch, SlotBatch, SlotValues};
pub use dataset::InMemoryDataset;
pub use desc::{proto, DataFeedDesc, GraphConfig, MultiSlotDesc, Slot, SlotType};
pub use file_queue::FileQueue;
pub use parser::{LineError, LineErrorKind, LineParser, LinePrefix};
pub use reader::{
    count_instances, start_feed, ErrorPolicy, FeedHandle, FeedMode, FeedOptions, FeedStats,
    WorkerQueue,
};
// For `tools::check`, which reads a file line by line as the feed's readers do.
pub(crate) use origin::DatasetOrigins;
pub(crate) use reader::{ReadContext, BAD_EXAMPLES};
pub(crate) use source::Source;
