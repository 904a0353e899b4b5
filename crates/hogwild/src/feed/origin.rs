//! Where instances were read from. A model finds some bad lines only when it trains or evaluates
//! them (a label out of range, a word id past the vocabulary), long after the line was parsed and,
//! in memory, shuffled: every batch knows the file and line of each of its instances, so that such
//! a line is named as a line the parser refuses is, `file:line: slot "name": cause`.
//!
//! Origins are runs of consecutive lines, not one entry per instance or per value: a batch read
//! from files holds one run per piece of a file it spans (and one more after each skipped line);
//! an in-memory dataset holds one run per piece it loaded and per skipped line (16 bytes each, for
//! millions of instances), and a batch gathered from it the record number of each instance.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use super::source::lines_before;
use crate::Error;

/// The lines one reader reads of one file: the whole file, or the lines that start in a byte range
/// of it, whose first line's number is counted (once) only when a message needs it.
#[derive(Debug)]
pub(crate) struct PieceName {
    /// The file's name as messages show it.
    name: String,
    /// Lines of the file before the piece's first line.
    base: OnceLock<u64>,
    /// For a byte range whose base is not known yet: the file and the offset of its first line.
    count_to: Option<(PathBuf, u64)>,
}

impl PieceName {
    /// The piece of file `name` whose first line is line `base + 1` (a whole file: base 0).
    pub(crate) fn known(name: &str, base: u64) -> Self {
        PieceName {
            name: name.to_string(),
            base: OnceLock::from(base),
            count_to: None,
        }
    }

    /// The piece of file `name` (at `path`) whose first line starts at byte `offset`.
    pub(crate) fn at_offset(name: &str, path: PathBuf, offset: u64) -> Self {
        PieceName {
            name: name.to_string(),
            base: OnceLock::new(),
            count_to: Some((path, offset)),
        }
    }

    /// Line `line` of the piece (from 1) as a line of its file, or `None` when the lines before
    /// the piece cannot be counted (the file changed or went away).
    fn file_line(&self, line: u64) -> Option<u64> {
        if let Some(base) = self.base.get() {
            return Some(base + line);
        }
        let (path, offset) = self.count_to.as_ref()?;
        let base = lines_before(path, *offset).ok()?;
        Some(*self.base.get_or_init(|| base) + line)
    }
}

/// Instances `first..` of a batch are lines `line..` (from 1) of `piece`, until the next run.
#[derive(Debug, Clone)]
pub(crate) struct LineRun {
    first: usize,
    piece: Arc<PieceName>,
    line: u64,
}

/// Where the instances of an in-memory dataset come from: runs of records that are consecutive
/// lines of one file.
#[derive(Debug, Default)]
pub(crate) struct DatasetOrigins {
    files: Vec<String>,
    /// Sorted by `first`: records `first..` are lines `line..` of `files[file]`.
    runs: Vec<RecordRun>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct RecordRun {
    pub(crate) first: u64,
    pub(crate) file: u32,
    pub(crate) line: u64,
}

impl DatasetOrigins {
    /// Origins over `files` (names as messages show them) from `runs` sorted by their first
    /// record.
    pub(crate) fn new(files: Vec<String>, runs: Vec<RecordRun>) -> Self {
        debug_assert!(runs.windows(2).all(|w| w[0].first < w[1].first));
        DatasetOrigins { files, runs }
    }

    /// The file (its index and name) and line of record `record`.
    pub(crate) fn locate(&self, record: usize) -> Option<(usize, &str, u64)> {
        let record = record as u64;
        let at = self
            .runs
            .partition_point(|r| r.first <= record)
            .checked_sub(1)?;
        let run = self.runs[at];
        let file = run.file as usize;
        Some((file, self.files.get(file)?, run.line + (record - run.first)))
    }

    /// Bytes held.
    pub(crate) fn byte_size(&self) -> usize {
        std::mem::size_of_val(self.runs.as_slice())
    }
}

/// Where a batch's instances come from (see the module docs).
#[derive(Debug, Clone, Default)]
pub(crate) enum Origin {
    /// Built by hand: no file to name.
    #[default]
    Unknown,
    /// Parsed from files: runs in instance order.
    Lines(Vec<LineRun>),
    /// Gathered from an in-memory dataset: each instance's record.
    Records(Arc<DatasetOrigins>, Vec<u32>),
}

impl Origin {
    /// Forgets every instance's origin, keeping the buffers.
    pub(crate) fn clear(&mut self) {
        match self {
            Origin::Unknown => {}
            Origin::Lines(runs) => runs.clear(),
            Origin::Records(_, records) => records.clear(),
        }
    }

    /// Instance `instance` (the last one added) is line `line` of `piece`: a new run unless it
    /// continues the last one.
    #[inline]
    pub(crate) fn push_line(&mut self, instance: usize, piece: &Arc<PieceName>, line: u64) {
        if let Origin::Lines(runs) = self {
            if let Some(last) = runs.last() {
                if Arc::ptr_eq(&last.piece, piece)
                    && last.line + (instance - last.first) as u64 == line
                {
                    return;
                }
            }
            runs.push(LineRun {
                first: instance,
                piece: Arc::clone(piece),
                line,
            });
        } else {
            *self = Origin::Lines(vec![LineRun {
                first: instance,
                piece: Arc::clone(piece),
                line,
            }]);
        }
    }

    /// The next instances are the records `records` of the dataset with `origins`.
    #[inline]
    pub(crate) fn push_records(&mut self, origins: &Arc<DatasetOrigins>, records: &[u32]) {
        match self {
            Origin::Records(held, ids) if Arc::ptr_eq(held, origins) => {
                ids.extend_from_slice(records)
            }
            _ => *self = Origin::Records(Arc::clone(origins), records.to_vec()),
        }
    }

    /// The record numbers of a batch gathered from the in-memory dataset with `origins`, in
    /// instance order; `None` for a batch read from files or from another dataset.
    pub(crate) fn records_of(&self, origins: &Arc<DatasetOrigins>) -> Option<&[u32]> {
        match self {
            Origin::Records(held, records) if Arc::ptr_eq(held, origins) => Some(records),
            _ => None,
        }
    }

    /// The runs of a batch parsed from one piece of a file: (first instance, line in the piece).
    pub(crate) fn piece_runs(&self) -> impl Iterator<Item = (usize, u64)> + '_ {
        let runs = match self {
            Origin::Lines(runs) => runs.as_slice(),
            _ => &[],
        };
        runs.iter().map(|r| (r.first, r.line))
    }

    /// The file name and line of instance `i`, when known.
    pub(crate) fn locate(&self, i: usize) -> Option<(String, u64)> {
        match self {
            Origin::Unknown => None,
            Origin::Lines(runs) => {
                let at = runs.partition_point(|r| r.first <= i).checked_sub(1)?;
                let run = &runs[at];
                let line = run.piece.file_line(run.line + (i - run.first) as u64)?;
                Some((run.piece.name.clone(), line))
            }
            Origin::Records(origins, records) => {
                let (_, name, line) = origins.locate(*records.get(i)? as usize)?;
                Some((name.to_string(), line))
            }
        }
    }

    /// `error` with the file and line of the instance it names, when it names one and its origin
    /// is known: a model's [`Error::BadInstance`] becomes [`Error::BadRecord`].
    pub(crate) fn locate_error(&self, error: Error) -> Error {
        match error {
            Error::BadInstance {
                slot,
                instance,
                reason,
            } => match self.locate(instance) {
                Some((file, line)) => Error::BadRecord {
                    file,
                    line,
                    slot,
                    reason,
                },
                None => Error::BadInstance {
                    slot,
                    instance,
                    reason,
                },
            },
            other => other,
        }
    }

    /// Bytes held (a dataset's origins are counted by the dataset).
    pub(crate) fn byte_size(&self) -> usize {
        match self {
            Origin::Unknown => 0,
            Origin::Lines(runs) => std::mem::size_of_val(runs.as_slice()),
            Origin::Records(_, records) => std::mem::size_of_val(records.as_slice()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_name_every_instance_by_its_line() {
        let a = Arc::new(PieceName::known("a", 0));
        let b = Arc::new(PieceName::known("b", 100));
        let mut origin = Origin::default();
        // a:1, a:2, (a:3 skipped) a:4, then b's piece starting at line 101.
        for (i, (piece, line)) in [(&a, 1), (&a, 2), (&a, 4), (&b, 1), (&b, 2)]
            .into_iter()
            .enumerate()
        {
            origin.push_line(i, piece, line);
        }
        let Origin::Lines(runs) = &origin else {
            panic!("lines")
        };
        assert_eq!(runs.len(), 3);
        let got: Vec<_> = (0..5).map(|i| origin.locate(i).unwrap()).collect();
        let want = [("a", 1), ("a", 2), ("a", 4), ("b", 101), ("b", 102)];
        assert_eq!(
            got,
            want.map(|(f, l)| (f.to_string(), l)).to_vec(),
            "{origin:?}"
        );
        let error = origin.locate_error(Error::BadInstance {
            slot: "label".into(),
            instance: 2,
            reason: "label 7 is out of range (classes = 2)".into(),
        });
        assert_eq!(
            error.to_string(),
            "a:4: slot \"label\": label 7 is out of range (classes = 2)"
        );
        // Without an origin the instance stays named by its place in the batch.
        let unknown = Origin::Unknown.locate_error(Error::BadInstance {
            slot: "label".into(),
            instance: 2,
            reason: "bad".into(),
        });
        assert!(matches!(unknown, Error::BadInstance { instance: 2, .. }));
    }

    #[test]
    fn a_range_counts_the_lines_before_it_when_asked() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, "x\ny\nz\nw\n").unwrap();
        // The range's first line starts at byte 4 ("z"): two lines before it.
        let piece = Arc::new(PieceName::at_offset("f", path, 4));
        let mut origin = Origin::default();
        origin.push_line(0, &piece, 1);
        origin.push_line(1, &piece, 2);
        assert_eq!(origin.locate(1), Some(("f".to_string(), 4)));
    }

    #[test]
    fn records_are_found_in_the_dataset_runs() {
        let origins = Arc::new(DatasetOrigins::new(
            vec!["a".into(), "b".into()],
            vec![
                RecordRun {
                    first: 0,
                    file: 0,
                    line: 1,
                },
                RecordRun {
                    first: 3,
                    file: 0,
                    line: 5,
                },
                RecordRun {
                    first: 4,
                    file: 1,
                    line: 1,
                },
            ],
        ));
        let mut origin = Origin::default();
        origin.push_records(&origins, &[4, 2, 3]);
        origin.push_records(&origins, &[0]);
        assert_eq!(origin.locate(0), Some(("b".to_string(), 1)));
        assert_eq!(origin.locate(1), Some(("a".to_string(), 3)));
        assert_eq!(origin.locate(2), Some(("a".to_string(), 5)));
        assert_eq!(origin.locate(3), Some(("a".to_string(), 1)));
        assert_eq!(origin.locate(4), None);
    }
}
