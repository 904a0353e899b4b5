//! The `hogwild` command.

mod autotune;
mod bad_lines;
mod check;
mod convert;
mod demo;
mod eval;
mod export;
mod feed_args;
#[cfg(feature = "tf")]
mod import;
mod interrupt;
mod labels;
mod models;
mod paths;
mod predict;
mod preflight;
mod queries;
#[cfg(all(target_os = "linux", feature = "tf"))]
mod tf_log;
mod train;
mod word_vectors;

use std::process::ExitCode;

// The library's macro over its `AnyModel`, as `crate::with_model` for every command.
use hogwild::with_model;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "hogwild",
    version,
    about = "Lock-free asynchronous training on CPU"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Show TensorFlow's own log lines (start-up notices, warnings), which are hidden unless
    /// this option or TF_CPP_MIN_LOG_LEVEL=0 is given (TF_CPP_MIN_LOG_LEVEL is 2 unless set).
    #[cfg(all(target_os = "linux", feature = "tf"))]
    #[arg(long = "tf-log", global = true)]
    _tf_log: bool,
}

#[derive(Subcommand)]
enum Command {
    /// Validate MultiSlot data files against a data.prototxt and report every bad line.
    Check(check::Args),
    /// Convert fastText, libsvm, libffm, VW or CSV text to MultiSlot, with its data.prototxt.
    Convert(convert::Args),
    /// Export a saved model: a TensorFlow SavedModel (any model), or a word2vec model's vectors
    /// in word2vec's text format.
    Export(export::Args),
    /// Train a model on data files (or resume a saved one).
    Train(train::Args),
    /// Metrics of a saved model on data files (bag-of-words: also fastText's P@k, R@k and
    /// per-label F1).
    Eval(eval::Args),
    /// Predictions of a saved model, one line per instance (bag-of-words: fastText's labels).
    Predict(predict::Args),
    /// Nearest neighbours of words by cosine similarity in a word2vec model's vectors (or a
    /// vectors file), as gensim's most_similar finds them.
    Nn(queries::NnArgs),
    /// Analogies ("A is to B as C is to ?") in word vectors, or the accuracy on a test set of
    /// them (word2vec's questions-words.txt), as gensim's evaluate_word_analogies measures it.
    Analogy(queries::AnalogyArgs),
    /// Vectors of any words, misspelled or unseen ones too, from a word2vec model with subwords
    /// (fastText's print-word-vectors): the mean of their character n-grams' rows.
    WordVectors(word_vectors::Args),
    /// Generate a small corpus, train the bag-of-words model on it and print the results.
    Demo(demo::Args),
    /// Train a TensorFlow graph from files with several threads sharing one session (Hogwild).
    #[cfg(feature = "tf")]
    TfTrain(Box<hogwild_tf::TfTrainArgs>),
    /// Make a native model of the TensorFlow checkpoint of its exported training graph
    /// (`export --format tf-train`, trained by `tf-train`).
    #[cfg(feature = "tf")]
    Import(import::Args),
}

/// Output piped into a program that stops reading (`| head`) ends the process quietly, as in other
/// Unix tools, instead of a panic in `println!` (Rust ignores SIGPIPE by default).
#[cfg(unix)]
fn quiet_broken_pipe() {
    // SAFETY: called first thing in `main`, before any other thread exists; restoring a signal's
    // default disposition has no other precondition.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

fn main() -> ExitCode {
    #[cfg(all(target_os = "linux", feature = "tf"))]
    tf_log::restore_stderr();
    #[cfg(unix)]
    quiet_broken_pipe();
    let result = match Cli::parse().command {
        Command::Check(args) => check::run(args),
        Command::Convert(args) => convert::run(args),
        Command::Export(args) => {
            // The SavedModel and training-graph exports run TensorFlow.
            #[cfg(all(target_os = "linux", feature = "tf"))]
            tf_log::quiet_tensorflow_runtime();
            export::run(args)
        }
        Command::Train(args) => train::run(args),
        Command::Eval(args) => eval::run(args),
        Command::Predict(args) => predict::run(args),
        Command::Nn(args) => queries::run_nn(args),
        Command::Analogy(args) => queries::run_analogy(args),
        Command::WordVectors(args) => word_vectors::run(args),
        Command::Demo(args) => demo::run(args),
        #[cfg(feature = "tf")]
        Command::TfTrain(args) => {
            #[cfg(target_os = "linux")]
            tf_log::quiet_tensorflow_runtime();
            hogwild_tf::tf_train(&args).map(|_| ()).map_err(Into::into)
        }
        #[cfg(feature = "tf")]
        Command::Import(args) => {
            #[cfg(target_os = "linux")]
            tf_log::quiet_tensorflow_runtime();
            import::run(args)
        }
    };
    if let Err(error) = &result {
        // Printed here, not returned from `main`: anyhow prints a returned error with a stack
        // trace whenever RUST_BACKTRACE is set, and a user's mistake is no crash to debug.
        // The chain reads as one line: `error: training: data.ms:12: slot "label": ...`.
        eprintln!("error: {error:#}");
    }
    // A command stopped by SIGINT or SIGTERM exits with the signal's status (130, 143), not 1.
    if let Some(status) = interrupt::exit_status() {
        std::process::exit(status);
    }
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(_) => ExitCode::FAILURE,
    }
}
