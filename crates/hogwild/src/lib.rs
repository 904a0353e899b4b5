//! hogwild: fast asynchronous (Hogwild) training of sparse-feature models on CPU, and DeepRec's
//! AdamAsync optimizer.
//!
//! ```
//! use hogwild::optim::{AdamAsync, AdamAsyncState};
//!
//! let opt = AdamAsync::new(0.001f32, 0.9, 0.999, 1e-8);
//! let mut var = vec![1.0f32, 2.0];
//! let mut state = AdamAsyncState::new(var.len(), &opt);
//! opt.apply_dense(&mut var, &mut state, &[0.1, 0.1]).unwrap();
//! assert!(var[0] < 1.0);
//! assert!((state.beta1_power - 0.81).abs() < 1e-6);
//! ```
#![deny(unsafe_op_in_unsafe_fn)]

pub mod channel;
pub mod checkpoint;
mod error;
pub mod executor;
pub mod feed;
pub mod files;
pub mod metrics;
pub mod model;
pub mod models;
pub mod optim;
pub mod rng;
pub mod store;
pub mod subwords;
pub mod tools;
pub mod vectors;

pub use error::{Error, Result};
pub use executor::{startup, Run, RunOptions, RunReport};
pub use feed::{Batch, DataFeedDesc, FeedMode, FeedOptions, SlotBatch, SlotValues};
pub use model::Model;
pub use store::{Drawn, Table};
