//! The in-memory dataset: files are parsed once and held, so that every epoch of a training run
//! (the executor's in-memory mode shuffles and cuts them into batches) is served without touching
//! the files again.
//!
//! Instances are stored one record after another (per used slot: the number of values, then the
//! values), not slot by slot as a [`Batch`] holds them. A shuffled epoch visits instances at
//! random, and a dataset larger than the cache then costs a cache miss (and a TLB miss) per piece
//! of an instance it touches: with one array of offsets and one of values per slot that is two
//! per slot (22 for a CTR instance of 10 fields and a label), with records it is the one or two
//! lines the record spans, which the gathering also prefetches a few instances ahead.
//!
//! Records are made of 32-bit words: word ids, feature ids of up to a few billion and float bits
//! take one word each, and only a slot whose values do not all fit in 32 bits takes two words per
//! value. A word2vec corpus or a CTR set of dense feature ids is held in half the memory 64-bit
//! words would take.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use super::batch::{Batch, InstanceIds, SlotValues};
use super::desc::DataFeedDesc;
use super::origin::{DatasetOrigins, RecordRun};
use super::reader::{FeedOptions, FeedStats, PieceRead, ReadContext, Shared};
use super::source::{plan_pieces, Piece, MIN_PIECE_BYTES};
use crate::store::prefetch;
use crate::{Error, Result};

/// All instances of a set of files, parsed and held in memory, with the file and line each came
/// from (runs of consecutive lines, so a few bytes per piece and skipped line).
pub struct InMemoryDataset {
    desc: DataFeedDesc,
    data: Arc<Records>,
    origins: Arc<DatasetOrigins>,
    load_stats: FeedStats,
}

/// What one reader loaded of one piece: its records, where runs of consecutive lines start
/// (record in the part, line in the piece from 1), and the lines it read.
#[derive(Default)]
struct Part {
    records: Records,
    runs: Vec<(u64, u64)>,
    lines: u64,
}

impl Part {
    /// Appends the instances of `batch`, parsed from this part's piece, and their runs of lines.
    fn append(&mut self, batch: &Batch) -> std::result::Result<(), String> {
        let base = self.records.len() as u64;
        for (first, line) in batch.origin.piece_runs() {
            let record = base + first as u64;
            let continues = self
                .runs
                .last()
                .is_some_and(|&(r, l)| l + (record - r) == line);
            if !continues {
                self.runs.push((record, line));
            }
        }
        self.records.append(batch)
    }
}

/// Instances as consecutive records of `u32` words: per used slot, in the desc's order, a header
/// (the number of values `n`, shifted left by one, with [`WIDE`] set when the values take two
/// words each), then the values: ids below 2^32 and float bits in one word, wide ids as their low
/// then high word. The records are kept in the segments the readers parsed in parallel (joining
/// them would copy every word once more).
#[derive(Debug, Default)]
struct Records {
    /// Per instance: its segment (the bits above [`OFFSET_BITS`]) and where its record starts
    /// in that segment.
    starts: Vec<u64>,
    segments: Vec<Vec<u32>>,
    /// Each instance's id, when the lines carry one (empty otherwise).
    ids: InstanceIds,
}

/// Bits of a start that hold the offset in the segment (2^40 words = 4 TiB).
const OFFSET_BITS: u32 = 40;
const OFFSET_MASK: u64 = (1 << OFFSET_BITS) - 1;
/// The header bit of a slot whose values take two words each.
const WIDE: u32 = 1;
/// Most values of one slot of one instance a header can count.
const MAX_VALUES: usize = (u32::MAX >> 1) as usize;

impl Records {
    fn len(&self) -> usize {
        self.starts.len()
    }

    /// Instance `i`'s segment and the record's offset in it.
    #[inline]
    fn locate(&self, i: usize) -> (&[u32], usize) {
        let start = self.starts[i];
        (
            &self.segments[(start >> OFFSET_BITS) as usize],
            (start & OFFSET_MASK) as usize,
        )
    }

    /// Appends every instance of `batch` to the last segment; fails, naming the slot, when one
    /// slot of one instance has more than [`MAX_VALUES`] values.
    fn append(&mut self, batch: &Batch) -> std::result::Result<(), String> {
        self.append_within(batch, MAX_VALUES)
    }

    /// [`Records::append`] with at most `max_values` values per slot and instance.
    fn append_within(
        &mut self,
        batch: &Batch,
        max_values: usize,
    ) -> std::result::Result<(), String> {
        if self.segments.is_empty() {
            self.segments.push(Vec::new());
        }
        let segment = (self.segments.len() - 1) as u64;
        if !batch.ids.is_empty() {
            for i in 0..batch.len {
                self.ids.push(batch.ids.get(i).unwrap_or_default());
            }
        }
        let words = self
            .segments
            .last_mut()
            .expect("a segment was just ensured");
        let values: usize = batch.slots.iter().map(|s| s.values.len()).sum();
        words.reserve(values + batch.len * batch.slots.len());
        self.starts.reserve(batch.len);
        for i in 0..batch.len {
            self.starts
                .push(segment << OFFSET_BITS | words.len() as u64);
            for (k, slot) in batch.slots.iter().enumerate() {
                let (a, b) = (slot.offsets[i], slot.offsets[i + 1]);
                let n = b - a;
                if n > max_values {
                    return Err(format!(
                        "an instance has {n} values in used slot {k}, at most {max_values} fit in memory mode"
                    ));
                }
                let header = (n as u32) << 1;
                match &slot.values {
                    SlotValues::U64(v) if v[a..b].iter().all(|&x| x <= u64::from(u32::MAX)) => {
                        words.push(header);
                        words.extend(v[a..b].iter().map(|&x| x as u32));
                    }
                    SlotValues::U64(v) => {
                        words.push(header | WIDE);
                        for &x in &v[a..b] {
                            words.extend([x as u32, (x >> 32) as u32]);
                        }
                    }
                    SlotValues::F32(v) => {
                        words.push(header);
                        words.extend(v[a..b].iter().map(|x| x.to_bits()));
                    }
                }
            }
        }
        Ok(())
    }

    /// Appends instance `i` to `batch` (laid out for the same desc).
    #[inline]
    fn push_to(&self, batch: &mut Batch, i: usize) {
        let (words, mut at) = self.locate(i);
        for slot in &mut batch.slots {
            let header = words[at];
            let n = (header >> 1) as usize;
            at += 1;
            match &mut slot.values {
                SlotValues::U64(d) if header & WIDE != 0 => {
                    let values = &words[at..at + 2 * n];
                    at += 2 * n;
                    d.extend(
                        values
                            .chunks_exact(2)
                            .map(|w| u64::from(w[0]) | u64::from(w[1]) << 32),
                    );
                }
                SlotValues::U64(d) => {
                    let values = &words[at..at + n];
                    at += n;
                    // One value (a CTR field, a label) is the common case: a push, not a loop.
                    match values {
                        [x] => d.push(u64::from(*x)),
                        _ => d.extend(values.iter().map(|&x| u64::from(x))),
                    }
                }
                SlotValues::F32(d) => {
                    let values = &words[at..at + n];
                    at += n;
                    d.extend(values.iter().map(|&x| f32::from_bits(x)));
                }
            }
            slot.end_instance();
        }
        if let Some(id) = self.ids.get(i) {
            batch.ids.push(id);
        }
        batch.len += 1;
    }

    /// Appends the instances `order` to `batch`, in that order, prefetching the record start
    /// `2 * AHEAD` instances ahead and the record's lines `AHEAD` ahead (its start is in cache by
    /// then), so the misses of random instances overlap the copying of the ones before them.
    fn gather(&self, batch: &mut Batch, order: &[u32]) {
        const AHEAD: usize = 8;
        /// Lines of a record prefetched at most (a longer record is read sequentially, where
        /// the hardware prefetcher takes over).
        const LINES: usize = 4;
        for (k, &i) in order.iter().enumerate() {
            if let Some(start) = order
                .get(k + 2 * AHEAD)
                .and_then(|&f| self.starts.get(f as usize))
            {
                prefetch(start);
            }
            if let Some(&near) = order.get(k + AHEAD) {
                let near = near as usize;
                if near < self.starts.len() {
                    let (words, at) = self.locate(near);
                    // The record ends where the next one starts in the same segment.
                    let end = match self.starts.get(near + 1) {
                        Some(&next) if next >> OFFSET_BITS == self.starts[near] >> OFFSET_BITS => {
                            (next & OFFSET_MASK) as usize
                        }
                        _ => words.len(),
                    };
                    // 16 words per 64-byte line.
                    for word in words[at..end].iter().step_by(16).take(LINES) {
                        prefetch(word);
                    }
                }
            }
            self.push_to(batch, i as usize);
        }
    }

    /// The records of `parts`, one after another: their segments are moved, not copied.
    fn concat(parts: Vec<Records>) -> Records {
        let mut all = Records {
            starts: Vec::with_capacity(parts.iter().map(Records::len).sum()),
            segments: Vec::new(),
            ids: InstanceIds::default(),
        };
        for part in parts {
            let base = all.segments.len() as u64;
            all.starts.extend(
                part.starts
                    .iter()
                    .map(|&start| start + (base << OFFSET_BITS)),
            );
            all.segments.extend(part.segments);
            all.ids.extend(&part.ids);
        }
        all
    }

    fn byte_size(&self) -> usize {
        std::mem::size_of_val(self.starts.as_slice())
            + self
                .segments
                .iter()
                .map(|words| std::mem::size_of_val(words.as_slice()))
                .sum::<usize>()
            + self.ids.byte_size()
    }
}

/// Instances parsed into a reader's batch before they move to its records.
const LOAD_BATCH: usize = 1024;

impl InMemoryDataset {
    /// Parses every file (in parallel, `opts.readers` or `opts.threads` threads; a large plain
    /// file is split into byte ranges so that one file loads in parallel too) under
    /// `opts.errors`; instances keep the files' order, whatever the number of readers.
    pub fn load(desc: &DataFeedDesc, files: &[PathBuf], opts: &FeedOptions) -> Result<Self> {
        Self::load_in_pieces(desc, files, opts, MIN_PIECE_BYTES)
    }

    fn load_in_pieces(
        desc: &DataFeedDesc,
        files: &[PathBuf],
        opts: &FeedOptions,
        min_piece_bytes: u64,
    ) -> Result<Self> {
        desc.validate().map_err(|message| Error::Desc {
            origin: "<in memory>".to_string(),
            message,
        })?;
        let readers = if opts.readers == 0 {
            opts.threads.max(1)
        } else {
            opts.readers
        };
        let pieces = plan_pieces(files, desc.pipe_command(), readers, min_piece_bytes)?;
        let readers = readers.min(pieces.len()).max(1);
        let shared = Shared::new(opts, 0, 0);
        let context = ReadContext::new(desc, opts.line_prefix);
        let next = AtomicUsize::new(0);
        let parts: Mutex<Vec<Option<Part>>> = Mutex::new((0..pieces.len()).map(|_| None).collect());
        std::thread::scope(|scope| {
            for _ in 0..readers {
                scope.spawn(|| {
                    // Instances move from a small reused batch to the piece's records as they are
                    // parsed, so a load holds little besides the records.
                    let mut batch = Batch::empty(desc);
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if i >= pieces.len() || shared.stopped() {
                            break;
                        }
                        let started = Instant::now();
                        let mut part = Part::default();
                        let mut too_large = None;
                        let Piece { file, range } = &pieces[i];
                        batch.clear();
                        let piece = PieceRead {
                            path: &files[*file],
                            range: range.clone(),
                            first_pass: true,
                        };
                        let result =
                            context.read_file(&shared, piece, &mut batch, LOAD_BATCH, &mut |b| {
                                let fits = part.append(b);
                                b.clear();
                                fits.map_err(|reason| too_large = Some(reason)).is_ok()
                            });
                        if too_large.is_none() {
                            too_large = part.append(&batch).err();
                        }
                        shared.add_read_time(started.elapsed());
                        let result = match too_large.take() {
                            Some(reason) => Err(Error::InvalidConfig {
                                field: "mode".into(),
                                reason: format!("{}: {reason}", files[*file].display()),
                            }),
                            None => result,
                        };
                        match result {
                            Ok(lines) => {
                                part.lines = lines.unwrap_or(0);
                                parts.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(part)
                            }
                            Err(error) => shared.fail(error),
                        }
                    }
                });
            }
        });
        if let Some(error) = shared.take_error() {
            return Err(error);
        }
        let parts = parts.into_inner().unwrap_or_else(|e| e.into_inner());
        let Some(parts) = parts.into_iter().collect::<Option<Vec<Part>>>() else {
            return Err(Error::Io {
                path: "data feed".to_string(),
                message: "a reader thread stopped without an error".to_string(),
            });
        };
        let origins = Arc::new(origins_of(files, &pieces, &parts));
        let parts: Vec<Records> = parts.into_iter().map(|p| p.records).collect();
        let segments: usize = parts.iter().map(|p| p.segments.len()).sum();
        if let Some(words) = parts
            .iter()
            .flat_map(|p| p.segments.iter().map(Vec::len))
            .find(|&len| len as u64 > OFFSET_MASK)
        {
            return Err(Error::InvalidConfig {
                field: "mode".into(),
                reason: format!(
                    "{words} words from one file, at most {OFFSET_MASK} fit in memory mode"
                ),
            });
        }
        if segments as u64 > u64::MAX >> OFFSET_BITS {
            return Err(Error::InvalidConfig {
                field: "mode".into(),
                reason: format!(
                    "{segments} files, at most {} fit in memory mode",
                    u64::MAX >> OFFSET_BITS
                ),
            });
        }
        let data = Records::concat(parts);
        if u32::try_from(data.len()).is_err() {
            return Err(Error::InvalidConfig {
                field: "mode".into(),
                reason: format!(
                    "{} instances, at most {} fit in memory mode",
                    data.len(),
                    u32::MAX
                ),
            });
        }
        let load_stats = shared.stats();
        Ok(InMemoryDataset {
            desc: desc.clone(),
            data: Arc::new(data),
            origins,
            load_stats,
        })
    }

    /// Number of instances held.
    pub fn len(&self) -> usize {
        self.data.len()
    }

    /// Whether no instance is held.
    pub fn is_empty(&self) -> bool {
        self.data.len() == 0
    }

    /// What loading read: lines, bytes, bad lines, read time.
    pub fn load_stats(&self) -> &FeedStats {
        &self.load_stats
    }

    /// Bytes held for the instances and their origins.
    pub fn byte_size(&self) -> usize {
        self.data.byte_size() + self.origins.byte_size()
    }

    /// The file (its index among the files loaded) and line (from 1) of instance `i`.
    pub fn origin(&self, i: usize) -> Option<(usize, u64)> {
        self.origins.locate(i).map(|(file, _, line)| (file, line))
    }

    /// The id of instance `i`, when its line started with one (see [`Batch::ins_id`]).
    pub fn ins_id(&self, i: usize) -> Option<&[u8]> {
        self.data.ids.get(i)
    }

    /// An empty batch laid out for the dataset's desc.
    pub fn empty_batch(&self) -> Batch {
        Batch::empty(&self.desc)
    }

    /// Appends instance `i` (below [`InMemoryDataset::len`]) to `batch`, a batch from
    /// [`InMemoryDataset::empty_batch`].
    pub fn push_to(&self, batch: &mut Batch, i: usize) {
        self.data.push_to(batch, i);
        batch.origin.push_records(&self.origins, &[i as u32]);
    }

    /// Appends the instances `order` (each below [`InMemoryDataset::len`]) to `batch`, a batch
    /// from [`InMemoryDataset::empty_batch`], prefetching ahead: the fast way to gather a
    /// shuffled batch.
    pub fn gather(&self, batch: &mut Batch, order: &[u32]) {
        self.data.gather(batch, order);
        batch.origin.push_records(&self.origins, order);
    }

    /// Appends the instances `order` to `batch` by their record numbers alone, without their
    /// values: for a model that keeps what it needs of every record
    /// ([`crate::Model::prepare_dataset`]), which finds them with [`Batch::records_of`].
    pub(crate) fn refer(&self, batch: &mut Batch, order: &[u32]) {
        batch.origin.push_records(&self.origins, order);
        batch.len += order.len();
    }

    /// Who this dataset is: the same for every batch gathered from it, and for no other
    /// dataset's while it lives.
    pub(crate) fn origins(&self) -> &Arc<DatasetOrigins> {
        &self.origins
    }
}

/// The origins of the records of `parts` (one per piece, in order): each run's line counted from
/// its file's start (the lines of the pieces before it in the same file added).
fn origins_of(files: &[PathBuf], pieces: &[Piece], parts: &[Part]) -> DatasetOrigins {
    let mut runs = Vec::with_capacity(parts.iter().map(|p| p.runs.len()).sum());
    let (mut first, mut base) = (0u64, 0u64);
    for (k, (piece, part)) in pieces.iter().zip(parts).enumerate() {
        if k > 0 && pieces[k - 1].file != piece.file {
            base = 0;
        }
        runs.extend(part.runs.iter().map(|&(record, line)| RecordRun {
            first: first + record,
            file: piece.file as u32,
            line: base + line,
        }));
        first += part.records.len() as u64;
        base += part.lines;
    }
    DatasetOrigins::new(
        files.iter().map(|f| f.display().to_string()).collect(),
        runs,
    )
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::feed::batch::SlotBatch;
    use crate::feed::SlotType;

    /// A batch of `n` instances: a one-value id slot, a slot of 0-3 ids, and a float slot. Every
    /// fifth one-value id and every seventh instance's ids need 64 bits.
    fn sample(n: usize) -> Batch {
        let mut one = SlotBatch::new(SlotType::U64);
        let mut many = SlotBatch::new(SlotType::U64);
        let mut floats = SlotBatch::new(SlotType::F32);
        for i in 0..n {
            if let SlotValues::U64(v) = &mut one.values {
                v.push(if i % 5 == 4 {
                    u64::MAX - i as u64
                } else {
                    i as u64 * 10
                });
            }
            one.end_instance();
            if let SlotValues::U64(v) = &mut many.values {
                let base = if i % 7 == 6 { 1 << 32 } else { 0 };
                v.extend((0..i % 4).map(|k| base + (i * 100 + k) as u64));
            }
            many.end_instance();
            if let SlotValues::F32(v) = &mut floats.values {
                v.extend([i as f32 + 0.5, -(i as f32)]);
            }
            floats.end_instance();
        }
        Batch::from_slots(vec![one, many, floats])
    }

    #[test]
    fn records_give_back_the_instances_in_any_order() {
        // Two parts, as two files would load.
        let (first, second) = (sample(30), sample(20));
        let mut records = Records::default();
        records.append(&first).unwrap();
        records.append(&second).unwrap();
        assert_eq!(records.len(), 50);
        let order: Vec<u32> = (0..50u32)
            .map(|k| (k * 17 + 3) % 50)
            .chain([7, 7, 49, 0])
            .collect();
        let mut want = Batch::empty_like(&first);
        for &i in &order {
            let (part, j) = if i < 30 {
                (&first, i)
            } else {
                (&second, i - 30)
            };
            want.push_instance(part, j as usize);
        }
        let mut got = Batch::empty_like(&first);
        records.gather(&mut got, &order);
        assert_eq!(got, want);
        // Instance 37 of the whole is instance 7 of the second part: 3 ids, floats 7.5 and -7.
        assert_eq!(got.slots[0].u64s(2), Some(&[70u64][..]));
        assert_eq!(got.slots[1].u64s(2), Some(&[700u64, 701, 702][..]));
        assert_eq!(got.slots[2].f32s(2), Some(&[7.5f32, -7.0][..]));
        assert_eq!(got.slots[1].u64s(1), Some(&[][..]));
        // Orders shorter than the prefetch distance, one instance at a time, and an empty order.
        let mut short = Batch::empty_like(&first);
        records.gather(&mut short, &[3, 1]);
        records.push_to(&mut short, 49);
        records.gather(&mut short, &[]);
        assert_eq!(short.len, 3);
        assert_eq!(short.slots[1].u64s(0), Some(&[300u64, 301, 302][..]));
        assert_eq!(short.slots[1].u64s(2), Some(&[1900u64, 1901, 1902][..]));
        // Records hold a 4-byte header per slot and instance, one 4-byte word per value below
        // 2^32 and per float, two per wider value; and an 8-byte start per instance.
        let words = |i: usize| {
            let width = |wide: bool| if wide { 2 } else { 1 };
            3 + width(i % 5 == 4) + (i % 4) * width(i % 7 == 6) + 2
        };
        let words: usize = (0..30).chain(0..20).map(words).sum();
        assert_eq!(records.byte_size(), 4 * words + 8 * 50);
        let wide = got.slots[0].u64s(got.len - 2).unwrap();
        assert_eq!(order[got.len - 2], 49);
        assert_eq!(wide, &[u64::MAX - 19]);
    }
    #[test]
    fn a_slot_with_more_values_than_a_header_counts_is_refused() {
        let mut records = Records::default();
        let err = records.append_within(&sample(8), 2).unwrap_err();
        assert_eq!(
            err,
            "an instance has 3 values in used slot 1, at most 2 fit in memory mode"
        );
    }

    const DESC: &str = r#"name: "MultiSlotDataFeed"
batch_size: 4
multi_slot_desc {
  slots { name: "words" type: "uint64" is_dense: false is_used: true }
  slots { name: "label" type: "uint64" is_dense: false is_used: true }
}
"#;

    /// Every instance of `data`, in the order held.
    fn all_instances(data: &InMemoryDataset) -> Batch {
        let mut batch = data.empty_batch();
        let order: Vec<u32> = (0..data.len() as u32).collect();
        data.gather(&mut batch, &order);
        batch
    }

    fn options(readers: usize) -> FeedOptions {
        FeedOptions {
            readers,
            ..FeedOptions::default()
        }
    }

    #[test]
    fn a_file_loaded_in_byte_ranges_gives_the_same_instances_in_order() {
        let dir = tempfile::tempdir().unwrap();
        // Lines of different lengths, a CRLF line, and a last line without a newline.
        let mut text = String::new();
        for i in 0..60u64 {
            let words: Vec<String> = (0..1 + i % 5).map(|k| (i * 10 + k).to_string()).collect();
            let end = if i == 17 { "\r\n" } else { "\n" };
            text += &format!("{} {} 1 {}{end}", words.len(), words.join(" "), i % 2);
        }
        text += "1 999 1 1";
        let file = dir.path().join("train");
        std::fs::write(&file, &text).unwrap();
        let desc = DataFeedDesc::from_text(DESC).unwrap();
        let files = [file];
        let whole = InMemoryDataset::load_in_pieces(&desc, &files, &options(1), 1).unwrap();
        assert_eq!(whole.len(), 61);
        let want = all_instances(&whole);
        assert_eq!(want.slots[0].u64s(60), Some(&[999u64][..]));
        assert_eq!(want.slots[0].u64s(17), Some(&[170u64, 171, 172][..]));
        // Range boundaries fall at every kind of place: inside lines, on newlines, on line starts.
        for (readers, min_bytes) in [(2, 1), (3, 1), (4, 7), (5, 1), (8, 100), (64, 1)] {
            let pieces = plan_pieces(&files, "", readers, min_bytes).unwrap();
            assert!(pieces.len() > 1);
            let split =
                InMemoryDataset::load_in_pieces(&desc, &files, &options(readers), min_bytes)
                    .unwrap();
            assert_eq!(all_instances(&split), want, "{readers} readers");
            for i in 0..61 {
                assert_eq!(
                    split.origin(i),
                    Some((0, i as u64 + 1)),
                    "{readers} readers"
                );
            }
            assert_eq!(split.load_stats().lines, 61);
            assert_eq!(split.load_stats().bytes, whole.load_stats().bytes);
        }
    }

    #[test]
    fn instances_keep_their_lines_across_ranges_and_skipped_lines() {
        let dir = tempfile::tempdir().unwrap();
        let bad = [5, 17, 40, 41, 60];
        let text: String = (1..=60)
            .map(|n| match bad.contains(&n) {
                true => "x\n".to_string(),
                false => format!("1 {n} 1 0\n"),
            })
            .collect();
        let (first, second) = (dir.path().join("first"), dir.path().join("second"));
        std::fs::write(&first, text).unwrap();
        std::fs::write(&second, "1 1001 1 1\nbad\n1 1003 1 1\n").unwrap();
        let files = [first.clone(), second.clone()];
        let desc = DataFeedDesc::from_text(DESC).unwrap();
        let mut want: Vec<(usize, u64)> = (1..=60u64)
            .filter(|n| !bad.contains(&(*n as i32)))
            .map(|n| (0, n))
            .collect();
        want.extend([(1, 1), (1, 3)]);
        for (readers, min_bytes) in [(1, MIN_PIECE_BYTES), (3, 1), (8, 7)] {
            let opts = FeedOptions {
                errors: crate::feed::ErrorPolicy::Skip {
                    max_bad_lines: None,
                    max_bad_fraction: None,
                },
                ..options(readers)
            };
            let data = InMemoryDataset::load_in_pieces(&desc, &files, &opts, min_bytes).unwrap();
            let got: Vec<_> = (0..data.len()).map(|i| data.origin(i).unwrap()).collect();
            assert_eq!(got, want, "{readers} readers");
            assert_eq!(data.load_stats().bad_lines, 6);
            // A gathered batch names its instances by file and line, whatever their order.
            let mut batch = data.empty_batch();
            data.gather(&mut batch, &[56, 3, 0]);
            let name = |f: &Path, line: u64| Some((f.display().to_string(), line));
            assert_eq!(batch.origin(0), name(&second, 3));
            assert_eq!(batch.origin(1), name(&first, 4));
            assert_eq!(batch.origin(2), name(&first, 1));
            assert_eq!(batch.slots[0].u64s(0), Some(&[1003u64][..]));
        }
    }

    #[test]
    fn a_bad_line_in_a_later_range_is_named_by_its_line_in_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let mut text: String = (0..40).map(|i| format!("1 {i} 1 0\n")).collect();
        text += "0 1 0\n";
        text += &(0..10).map(|i| format!("1 {i} 1 1\n")).collect::<String>();
        let file = dir.path().join("bad");
        std::fs::write(&file, &text).unwrap();
        let desc = DataFeedDesc::from_text(DESC).unwrap();
        let files = [file.clone()];
        assert!(plan_pieces(&files, "", 4, 16).unwrap().len() == 4);
        let error = InMemoryDataset::load_in_pieces(&desc, &files, &options(4), 16)
            .err()
            .unwrap();
        assert_eq!(
            error.to_string(),
            format!(
                "{}:41: slot \"words\": count 0 (every slot needs at least one value; pad it)",
                file.display()
            )
        );
    }
}
