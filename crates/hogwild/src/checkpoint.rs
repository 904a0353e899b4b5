//! Saving and loading models: every table's weights, optimizer slots and scalars, a text
//! description of the model (its configuration) and the named sections of bytes the model needs
//! besides its tables (word2vec's vocabulary: the word of every row; the bag-of-words model's
//! label names), in one checksummed file, so that a checkpoint is all a model needs, wherever it
//! is loaded.
//!
//! Format (little-endian; a row is `stride = dim * (1 + slots)` f32s, its weights then slots):
//! ```text
//! magic "HOGWILD\0" | version u32 = 4 | meta_len u64 | meta (UTF-8) |
//! sections u32 | per section: name_len u32 | name | len u64 | bytes |
//! tables u32 |
//! per table: name_len u32 | name | rows u64 | dim u64 | slots u32 | scalars u32 |
//!            scalars f32 * scalars | layout u32 |
//!            layout 0, every row:   row f32 * stride * rows
//!            layout 1, listed rows: fill f32 * stride | listed u64 |
//!                                   (index u64 | row f32 * stride) * listed, indices increasing
//!            layout 2, listed rows over drawn ones: seed u64 | scale f32 | from u32 |
//!                                   then as layout 1
//! crc32 u32 of every byte before it
//! ```
//! Layouts 1 and 2 are written when they are the smaller: a hashed table of which a run touched
//! a fraction of the rows lists those that differ from how they started. Under layout 1 every
//! other row is the table's fill row ([`Table::fill`]: zero weights and the slots as the
//! optimizer stores them fresh, `Optimizer::slot_fill`); under layout 2, the fill row with its
//! weights `from..dim` drawn again by [`Drawn`] (a factorization machine's random factors), so
//! a model of a few hundred features hashed into 2^18 rows saves as those rows. Version 3 files
//! (without layout 2), version 2 files (also without sections) and version 1 files (also without
//! `layout`, every row written) still load, with no sections.
//! Writing is atomic ([`crate::files::Replacement`]): the file is written beside its destination
//! under a temporary name, flushed to disk, then renamed over the destination, so a crash leaves
//! either the old file or the new one, and the next save removes the crashed one's temporary.
//! CRC-32 (the `crc32fast` crate, the checksum of zip and PNG) detects truncation and corruption of the
//! kind a disk or a copy produces; it is not a defence against deliberate tampering. The declared sizes
//! are checked against the file's length before anything is allocated.

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use crate::files::{Replacement, StaleTemps};
use crate::model::Model;
use crate::store::{map_ranges, AtomicF32, Drawn, Table};
use crate::{Error, Result};

const MAGIC: &[u8; 8] = b"HOGWILD\0";
const VERSION: u32 = 4;
/// Every row is written.
const DENSE: u32 = 0;
/// The fill row, then the rows that differ from it.
const LISTED: u32 = 1;
/// How the weights were drawn and the fill row, then the rows that differ from their start.
const DRAWN: u32 = 2;
const CHUNK: usize = 1 << 16;
/// Elements of a table written by one thread at least (a large table is written by one thread
/// per core, each into its own part of the file).
const ELEMENTS_PER_WRITER: usize = 1 << 20;

/// A named string of bytes a model stores besides its tables ([`crate::Model::sections`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Section {
    /// The section's name, unique in a checkpoint.
    pub name: String,
    /// Its contents.
    pub bytes: Vec<u8>,
}

/// A loaded checkpoint: the model description, its sections and its tables, in the order they
/// were saved.
#[derive(Debug)]
pub struct Checkpoint {
    /// The file it was loaded from (for errors).
    pub path: PathBuf,
    /// The model's description ([`crate::Model::describe`]: its configuration).
    pub meta: String,
    /// Empty in files written before sections existed (format versions 1 and 2).
    pub sections: Vec<Section>,
    /// The tables, in the order the model listed them.
    pub tables: Vec<Table>,
}

impl Checkpoint {
    /// Removes and returns the bytes of the section called `name`; `None` when the checkpoint has
    /// none (a file of an older version, or of a model that stores no such section).
    pub fn take_section(&mut self, name: &str) -> Option<Vec<u8>> {
        let pos = self.sections.iter().position(|s| s.name == name)?;
        Some(self.sections.remove(pos).bytes)
    }

    /// Removes and returns the table called `name`, checking its shape.
    pub fn take_table(&mut self, name: &str, rows: usize, dim: usize) -> Result<Table> {
        let pos = self
            .tables
            .iter()
            .position(|t| t.name() == name)
            .ok_or_else(|| Error::InvalidTable {
                table: name.to_string(),
                reason: "missing from the checkpoint".into(),
            })?;
        let t = self.tables.remove(pos);
        if t.rows() != rows || t.dim() != dim {
            return Err(Error::InvalidTable {
                table: name.to_string(),
                reason: format!(
                    "checkpoint holds {} x {}, the model needs {rows} x {dim}",
                    t.rows(),
                    t.dim()
                ),
            });
        }
        Ok(t)
    }
}

fn err(path: &Path, reason: impl Into<String>) -> Error {
    Error::Checkpoint {
        path: path.display().to_string(),
        reason: reason.into(),
    }
}

struct CrcWriter<W> {
    inner: W,
    crc: crc32fast::Hasher,
}

impl<W: Write> CrcWriter<W> {
    fn put(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.crc.update(bytes);
        self.inner.write_all(bytes)
    }
}

/// Writes `words` (the bits of values, or a row index as two words, low first) into `path` at
/// byte `offset` through a handle of its own, a chunk at a time; returns the CRC state of the
/// bytes written, for combining in file order.
fn write_part(
    path: &Path,
    offset: u64,
    words: impl Iterator<Item = u32>,
) -> std::io::Result<crc32fast::Hasher> {
    let mut file = File::options().write(true).open(path)?;
    file.seek(SeekFrom::Start(offset))?;
    let mut out = BufWriter::with_capacity(CHUNK, file);
    let mut crc = crc32fast::Hasher::new();
    let mut buf = Vec::with_capacity(CHUNK);
    let mut words = words.peekable();
    while words.peek().is_some() {
        buf.clear();
        for x in words.by_ref().take(CHUNK / 4) {
            buf.extend_from_slice(&x.to_le_bytes());
        }
        crc.update(&buf);
        out.write_all(&buf)?;
    }
    out.flush()?;
    Ok(crc)
}

/// The bits of `cells`' values.
fn bits(cells: &[AtomicF32]) -> impl Iterator<Item = u32> + '_ {
    cells.iter().map(|c| c.load().to_bits())
}

/// Row `k` of `range` differs from how it started for every set bit `k` of the range's marks.
struct Marks {
    range: std::ops::Range<usize>,
    bits: Vec<u64>,
    count: usize,
}

/// Whether `row` holds other bits than `start`.
fn differs(row: &[AtomicF32], start: &[f32]) -> bool {
    row.iter()
        .zip(start)
        .any(|(c, f)| c.load().to_bits() != f.to_bits())
}

/// Writes table `t`'s layout and rows (see the module documentation) at the end of `w`, in parts
/// written by one thread per core.
fn write_rows(w: &mut CrcWriter<BufWriter<File>>, tmp: &Path, t: &Table) -> std::io::Result<()> {
    let stride = t.stride();
    let dim = t.dim();
    let fill = t.fill();
    let rows_per_writer = (ELEMENTS_PER_WRITER / stride).max(1);
    // The rows are marked first and then written as marked, so that a table changed during the
    // save (a save between epochs of a run whose other workers go on) still gets a consistent
    // file: a row is listed with the values it holds when written.
    let marks = map_ranges(t.rows(), rows_per_writer, |range| {
        let mut bits = vec![0u64; range.len().div_ceil(64)];
        let mut count = 0;
        let mut start = fill.to_vec();
        for (k, r) in range.clone().enumerate() {
            let row = t.row(r);
            // Slots first: a row training moved has moved them too, and is then listed
            // without drawing its start.
            let moved = differs(&row[dim..], &fill[dim..])
                || match t.drawn() {
                    None => differs(&row[..dim], &fill[..dim]),
                    Some(drawn) => {
                        drawn.draw(r, &mut start[..dim]);
                        differs(&row[..dim], &start[..dim])
                    }
                };
            if moved {
                bits[k / 64] |= 1 << (k % 64);
                count += 1;
            }
        }
        Marks { range, bits, count }
    });
    let listed: usize = marks.iter().map(|m| m.count).sum();
    let row_bytes = 4 * stride as u64;
    let dense_bytes = row_bytes * t.rows() as u64;
    let drawn_bytes = if t.drawn().is_some() { 16 } else { 0 };
    let listed_bytes = drawn_bytes + row_bytes + 8 + (8 + row_bytes) * listed as u64;
    if listed_bytes >= dense_bytes {
        w.put(&DENSE.to_le_bytes())?;
        w.inner.flush()?;
        let start = w.inner.get_mut().stream_position()?;
        let elements = t.elements();
        let parts = map_ranges(elements.len(), ELEMENTS_PER_WRITER, |range| {
            write_part(tmp, start + 4 * range.start as u64, bits(&elements[range]))
        });
        return finish_parts(w, parts, start + dense_bytes);
    }
    match t.drawn() {
        None => w.put(&LISTED.to_le_bytes())?,
        Some(drawn) => {
            w.put(&DRAWN.to_le_bytes())?;
            w.put(&drawn.seed.to_le_bytes())?;
            w.put(&drawn.scale.to_le_bytes())?;
            w.put(&(drawn.from as u32).to_le_bytes())?;
        }
    }
    for x in fill {
        w.put(&x.to_le_bytes())?;
    }
    w.put(&(listed as u64).to_le_bytes())?;
    w.inner.flush()?;
    let start = w.inner.get_mut().stream_position()?;
    let mut offsets = Vec::with_capacity(marks.len());
    let mut at = start;
    for m in &marks {
        offsets.push(at);
        at += (8 + row_bytes) * m.count as u64;
    }
    let parts = map_ranges(marks.len(), 1, |parts| {
        parts
            .map(|p| {
                let m = &marks[p];
                let rows = m.bits.iter().enumerate().flat_map(|(word, &b)| {
                    std::iter::successors((b != 0).then_some(b), |&b| {
                        let rest = b & (b - 1);
                        (rest != 0).then_some(rest)
                    })
                    .map(move |b| m.range.start + word * 64 + b.trailing_zeros() as usize)
                });
                let words = rows.flat_map(|r| {
                    let index = r as u64;
                    [index as u32, (index >> 32) as u32]
                        .into_iter()
                        .chain(bits(t.row(r)))
                });
                write_part(tmp, offsets[p], words)
            })
            .collect::<Vec<_>>()
    });
    finish_parts(w, parts.into_iter().flatten().collect(), at)
}

/// Folds the parts' checksums into `w`'s, in file order, and moves `w` to `end`.
fn finish_parts(
    w: &mut CrcWriter<BufWriter<File>>,
    parts: Vec<std::io::Result<crc32fast::Hasher>>,
    end: u64,
) -> std::io::Result<()> {
    for part in parts {
        w.crc.combine(&part?);
    }
    w.inner.get_mut().seek(SeekFrom::Start(end))?;
    Ok(())
}

/// Saves `meta`, `sections` and `tables` to `path` atomically (see the module documentation) and
/// returns the temporaries of earlier saves of `path` that were interrupted (the process killed)
/// and are now removed. Tables must not be trained while they are saved.
pub fn save(
    path: &Path,
    meta: &str,
    sections: &[Section],
    tables: &[&Table],
) -> Result<StaleTemps> {
    let replacement = Replacement::new(path);
    write_file(replacement.path(), path, meta, sections, tables)?;
    let stale = replacement.stale().clone();
    replacement
        .commit()
        .map_err(|e| err(path, format!("cannot rename into place: {e}")))?;
    Ok(stale)
}

/// Saves everything `model` needs to be rebuilt: its description, sections and tables (see
/// [`save`]).
pub fn save_model<M: Model>(path: impl AsRef<Path>, model: &M) -> Result<StaleTemps> {
    let path = path.as_ref();
    save(path, &model.describe(), &model.sections(), &model.tables())
}

/// Writes the checkpoint into `tmp`; errors name `path`, the file the user asked for.
fn write_file(
    tmp: &Path,
    path: &Path,
    meta: &str,
    sections: &[Section],
    tables: &[&Table],
) -> Result<()> {
    let io = |e: std::io::Error| err(path, format!("cannot write: {e}"));
    let file = File::create(tmp).map_err(io)?;
    let mut w = CrcWriter {
        inner: BufWriter::with_capacity(CHUNK, file),
        crc: crc32fast::Hasher::new(),
    };
    w.put(MAGIC).map_err(io)?;
    w.put(&VERSION.to_le_bytes()).map_err(io)?;
    w.put(&(meta.len() as u64).to_le_bytes()).map_err(io)?;
    w.put(meta.as_bytes()).map_err(io)?;
    w.put(&(sections.len() as u32).to_le_bytes()).map_err(io)?;
    for s in sections {
        w.put(&(s.name.len() as u32).to_le_bytes()).map_err(io)?;
        w.put(s.name.as_bytes()).map_err(io)?;
        w.put(&(s.bytes.len() as u64).to_le_bytes()).map_err(io)?;
        w.put(&s.bytes).map_err(io)?;
    }
    w.put(&(tables.len() as u32).to_le_bytes()).map_err(io)?;
    for t in tables {
        w.put(&(t.name().len() as u32).to_le_bytes()).map_err(io)?;
        w.put(t.name().as_bytes()).map_err(io)?;
        w.put(&(t.rows() as u64).to_le_bytes()).map_err(io)?;
        w.put(&(t.dim() as u64).to_le_bytes()).map_err(io)?;
        w.put(&(t.slots() as u32).to_le_bytes()).map_err(io)?;
        w.put(&(t.num_scalars() as u32).to_le_bytes()).map_err(io)?;
        for s in t.scalars() {
            w.put(&s.to_le_bytes()).map_err(io)?;
        }
        write_rows(&mut w, tmp, t).map_err(io)?;
    }
    let crc = w.crc.finalize();
    w.inner.write_all(&crc.to_le_bytes()).map_err(io)?;
    let file = w.inner.into_inner().map_err(|e| io(e.into_error()))?;
    file.sync_all().map_err(io)?;
    Ok(())
}

struct CrcReader<'a, R> {
    inner: R,
    crc: crc32fast::Hasher,
    path: &'a Path,
    /// Bytes the file has left after what was read.
    left: u64,
}

impl<R: Read> CrcReader<'_, R> {
    fn take(&mut self, buf: &mut [u8], what: &str) -> Result<()> {
        if (buf.len() as u64) > self.left {
            return Err(err(
                self.path,
                format!("truncated: the file ends inside {what}"),
            ));
        }
        self.inner
            .read_exact(buf)
            .map_err(|e| err(self.path, format!("cannot read {what}: {e}")))?;
        self.left -= buf.len() as u64;
        self.crc.update(buf);
        Ok(())
    }
    fn u32(&mut self, what: &str) -> Result<u32> {
        let mut b = [0u8; 4];
        self.take(&mut b, what)?;
        Ok(u32::from_le_bytes(b))
    }
    fn u64(&mut self, what: &str) -> Result<u64> {
        let mut b = [0u8; 8];
        self.take(&mut b, what)?;
        Ok(u64::from_le_bytes(b))
    }
    /// Reads `cells.len()` values into `cells`, through `bytes` a chunk at a time.
    fn cells(&mut self, cells: &[AtomicF32], bytes: &mut [u8], what: &str) -> Result<()> {
        for chunk in cells.chunks(bytes.len() / 4) {
            let b = &mut bytes[..chunk.len() * 4];
            self.take(b, what)?;
            for (cell, x) in chunk.iter().zip(b.chunks_exact(4)) {
                cell.store(f32::from_le_bytes([x[0], x[1], x[2], x[3]]));
            }
        }
        Ok(())
    }
    /// Checks that `count` items of `size` bytes fit in what is left (plus the trailing checksum).
    fn fits(&self, count: u64, size: u64, what: &str) -> Result<usize> {
        match count.checked_mul(size) {
            Some(bytes) if bytes.saturating_add(4) <= self.left => Ok(count as usize),
            _ => Err(err(
                self.path,
                format!(
                    "truncated or corrupt: {what} declares {count} items, the file has {} bytes left",
                    self.left
                ),
            )),
        }
    }
    fn bytes(&mut self, len: u64, what: &str) -> Result<Vec<u8>> {
        let len = self.fits(len, 1, what)?;
        let mut b = vec![0u8; len];
        self.take(&mut b, what)?;
        Ok(b)
    }
    fn string(&mut self, len: u64, what: &str) -> Result<String> {
        String::from_utf8(self.bytes(len, what)?)
            .map_err(|_| err(self.path, format!("{what} is not UTF-8")))
    }
}

/// An empty table of the declared shape, its error naming the file.
fn new_table(
    path: &Path,
    name: &str,
    rows: u64,
    dim: u64,
    slots: u32,
    scalars: &[f32],
) -> Result<Table> {
    Table::with_layout(name, rows as usize, dim as usize, slots as usize, scalars)
        .map_err(|e| err(path, e.to_string()))
}

/// Loads a checkpoint written by [`save`]; a truncated or corrupt file is refused with an error
/// naming the file and what is wrong.
pub fn load(path: impl AsRef<Path>) -> Result<Checkpoint> {
    let path = path.as_ref();
    let file = File::open(path).map_err(|e| err(path, format!("cannot open: {e}")))?;
    let len = file
        .metadata()
        .map_err(|e| err(path, format!("cannot stat: {e}")))?
        .len();
    let mut r = CrcReader {
        inner: BufReader::with_capacity(CHUNK, file),
        crc: crc32fast::Hasher::new(),
        path,
        left: len,
    };
    let mut magic = [0u8; 8];
    r.take(&mut magic, "the header")?;
    if &magic != MAGIC {
        return Err(err(path, "not a hogwild checkpoint (bad magic bytes)"));
    }
    let version = r.u32("the header")?;
    if !(1..=VERSION).contains(&version) {
        return Err(err(
            path,
            format!("format version {version}, this build reads versions 1 to {VERSION}"),
        ));
    }
    let meta_len = r.u64("the header")?;
    let meta = r.string(meta_len, "the model description")?;
    let mut sections = Vec::new();
    if version >= 3 {
        for k in 0..r.u32("the section count")? {
            let what = format!("section {k}'s header");
            let name_len = r.u32(&what)?;
            let name = r.string(name_len as u64, &what)?;
            let len = r.u64(&what)?;
            let bytes = r.bytes(len, &format!("section {name}"))?;
            sections.push(Section { name, bytes });
        }
    }
    let count = r.u32("the table count")?;
    let mut tables = Vec::new();
    let mut bytes = vec![0u8; CHUNK];
    for k in 0..count {
        let what = format!("table {k}'s header");
        let name_len = r.u32(&what)?;
        let name = r.string(name_len as u64, &what)?;
        let rows = r.u64(&what)?;
        let dim = r.u64(&what)?;
        let slots = r.u32(&what)?;
        let nscalars = r.u32(&what)?;
        let what = format!("table {name}");
        let nscalars = r.fits(nscalars as u64, 4, &what)?;
        let mut scalars = vec![0.0f32; nscalars];
        for s in &mut scalars {
            *s = f32::from_bits(r.u32(&what)?);
        }
        let layout = if version >= 2 { r.u32(&what)? } else { DENSE };
        let stride = dim.saturating_mul(1 + slots as u64);
        let table = match layout {
            DENSE => {
                r.fits(rows.saturating_mul(stride), 4, &what)?;
                let table = new_table(path, &name, rows, dim, slots, &scalars)?;
                r.cells(table.elements(), &mut bytes, &what)?;
                table
            }
            LISTED | DRAWN => {
                let drawn = match layout {
                    DRAWN => {
                        let seed = r.u64(&what)?;
                        let scale = f32::from_bits(r.u32(&what)?);
                        let from = r.u32(&what)? as u64;
                        if from > dim {
                            return Err(err(
                                path,
                                format!(
                                    "corrupt: table {name} draws its weights from {from} of {dim}"
                                ),
                            ));
                        }
                        Some(Drawn {
                            seed,
                            scale,
                            from: from as usize,
                        })
                    }
                    _ => None,
                };
                let stride = r.fits(stride, 4, &what)?;
                let mut fill = vec![0.0f32; stride];
                for x in &mut fill {
                    *x = f32::from_bits(r.u32(&what)?);
                }
                let listed = r.u64(&what)?;
                if listed > rows {
                    return Err(err(
                        path,
                        format!("corrupt: table {name} lists {listed} of its {rows} rows"),
                    ));
                }
                r.fits(listed, 8 + 4 * stride as u64, &what)?;
                let mut table = new_table(path, &name, rows, dim, slots, &scalars)?;
                table.fill_with(&fill);
                if let Some(drawn) = drawn {
                    table.set_drawn(drawn);
                    table.write_drawn();
                }
                let mut next = 0u64;
                for _ in 0..listed {
                    let index = r.u64(&what)?;
                    if index >= rows {
                        return Err(err(
                            path,
                            format!("corrupt: table {name} lists row {index}, it has {rows} rows"),
                        ));
                    }
                    if index < next {
                        return Err(err(
                            path,
                            format!(
                                "corrupt: table {name} lists row {index} after row {}",
                                next - 1
                            ),
                        ));
                    }
                    next = index + 1;
                    r.cells(table.row(index as usize), &mut bytes, &what)?;
                }
                table
            }
            other => {
                return Err(err(
                    path,
                    format!("corrupt: table {name} has row layout {other} (0, 1 or 2 expected)"),
                ))
            }
        };
        tables.push(table);
    }
    let computed = r.crc.clone().finalize();
    let mut stored = [0u8; 4];
    if r.left < 4 {
        return Err(err(path, "truncated: the checksum is missing"));
    }
    r.inner
        .read_exact(&mut stored)
        .map_err(|e| err(path, format!("cannot read the checksum: {e}")))?;
    if r.left > 4 {
        return Err(err(
            path,
            format!("{} unexpected bytes after the checksum", r.left - 4),
        ));
    }
    let stored = u32::from_le_bytes(stored);
    if stored != computed {
        return Err(err(
            path,
            format!("corrupt: checksum {stored:08x} stored, {computed:08x} computed"),
        ));
    }
    Ok(Checkpoint {
        path: path.to_path_buf(),
        meta,
        sections,
        tables,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    use crate::optim::AdamAsync;
    use crate::store::AtomicF32;

    fn sample() -> (Table, Table) {
        let opt = AdamAsync::new(0.01f32, 0.9, 0.999, 1e-8);
        let a = Table::new("emb", 5, 3, &opt).unwrap();
        for (i, c) in a.elements().iter().enumerate() {
            c.store(i as f32 * 0.5 - 3.0);
        }
        a.set_scalars(&[0.25, 0.75]).unwrap();
        let b = Table::with_layout("fc", 2, 4, 0, &[]).unwrap();
        b.write_weights(1, &[1.0, -2.0, 3.5, f32::MIN_POSITIVE]);
        (a, b)
    }

    fn values(t: &Table) -> Vec<u32> {
        t.elements()
            .iter()
            .map(AtomicF32::load)
            .map(f32::to_bits)
            .collect()
    }

    fn sections() -> Vec<Section> {
        vec![
            Section {
                name: "vocab".into(),
                bytes: b"zebra\x00\xff".to_vec(),
            },
            Section {
                name: "empty".into(),
                bytes: Vec::new(),
            },
        ]
    }

    fn saved(dir: &Path) -> PathBuf {
        let (a, b) = sample();
        let path = dir.join("model.bin");
        save(&path, "kind = \"test\"", &sections(), &[&a, &b]).unwrap();
        path
    }

    #[test]
    fn round_trip_keeps_every_bit() {
        let dir = tempfile::tempdir().unwrap();
        let path = saved(dir.path());
        let (a, b) = sample();
        let mut ck = load(&path).unwrap();
        assert_eq!(ck.meta, "kind = \"test\"");
        assert_eq!(ck.path, path);
        assert_eq!(ck.sections, sections());
        assert_eq!(ck.take_section("vocab"), Some(b"zebra\x00\xff".to_vec()));
        assert_eq!(ck.take_section("vocab"), None, "taken once");
        assert_eq!(ck.take_section("empty"), Some(Vec::new()));
        let la = ck.take_table("emb", 5, 3).unwrap();
        let lb = ck.take_table("fc", 2, 4).unwrap();
        assert_eq!(values(&la), values(&a));
        assert_eq!(values(&lb), values(&b));
        assert_eq!(la.scalars(), vec![0.25, 0.75]);
        assert_eq!((la.slots(), lb.slots()), (2, 0));
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(names.len(), 1, "no temporary file is left behind");
    }

    #[test]
    fn truncated_files_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = saved(dir.path());
        let full = std::fs::read(&path).unwrap();
        for cut in [0, 5, 20, 40, 80, full.len() - 30, full.len() - 2] {
            std::fs::write(&path, &full[..cut]).unwrap();
            let e = load(&path).unwrap_err().to_string();
            assert!(
                e.contains("model.bin") && e.contains("truncated"),
                "cut {cut}: {e}"
            );
        }
    }

    #[test]
    fn corrupt_files_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = saved(dir.path());
        let mut full = std::fs::read(&path).unwrap();
        let n = full.len();
        full[n - 20] ^= 0x10;
        std::fs::write(&path, &full).unwrap();
        let e = load(&path).unwrap_err().to_string();
        assert!(e.contains("corrupt: checksum"), "{e}");
        full[0] = b'X';
        std::fs::write(&path, &full).unwrap();
        let e = load(&path).unwrap_err().to_string();
        assert!(e.contains("bad magic"), "{e}");
        let mut longer = std::fs::read(saved(dir.path())).unwrap();
        longer.push(0);
        std::fs::write(&path, &longer).unwrap();
        let e = load(&path).unwrap_err().to_string();
        assert!(e.contains("unexpected bytes"), "{e}");
    }

    #[test]
    fn huge_declared_sizes_are_refused_before_allocating() {
        let dir = tempfile::tempdir().unwrap();
        let path = saved(dir.path());
        let mut full = std::fs::read(&path).unwrap();
        // meta_len sits after the magic and the version.
        full[12..20].copy_from_slice(&u64::MAX.to_le_bytes());
        std::fs::write(&path, &full).unwrap();
        let e = load(&path).unwrap_err().to_string();
        assert!(e.contains("declares"), "{e}");
    }

    #[test]
    fn missing_files_and_tables_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let e = load(dir.path().join("nope.bin")).unwrap_err().to_string();
        assert!(e.contains("nope.bin") && e.contains("cannot open"), "{e}");
        let mut ck = load(saved(dir.path())).unwrap();
        let e = ck.take_table("emb", 6, 3).unwrap_err().to_string();
        assert!(e.contains("5 x 3"), "{e}");
        let e = ck.take_table("other", 1, 1).unwrap_err().to_string();
        assert!(e.contains("missing"), "{e}");
    }

    #[test]
    fn failed_save_leaves_the_old_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = saved(dir.path());
        let before = std::fs::read(&path).unwrap();
        let missing = dir.path().join("no-such-dir").join("model.bin");
        let (a, _) = sample();
        let e = save(&missing, "", &[], &[&a]).unwrap_err().to_string();
        assert!(e.contains("cannot write"), "{e}");
        assert_eq!(std::fs::read(&path).unwrap(), before);
    }

    /// Tables large enough to be written by several threads (one part of the file each) load
    /// back bit for bit, and a flipped byte in any part fails the combined checksum.
    #[test]
    fn large_tables_written_in_parts_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let (small, _) = sample();
        // 300,000 rows of 4 weights and 1 slot: 2.4 M elements, more than two writers' worth.
        let big = Table::with_layout("big", 300_000, 4, 1, &[]).unwrap();
        for r in (0..300_000).step_by(7) {
            big.write_weights(r, &[r as f32, -(r as f32), 0.5, f32::MIN_POSITIVE]);
        }
        for (i, cell) in big.elements().iter().enumerate().skip(3).step_by(1001) {
            cell.store(i as f32 * 0.25);
        }
        let path = dir.path().join("big.bin");
        save(&path, "m", &[], &[&small, &big, &small]).unwrap();
        let mut ck = load(&path).unwrap();
        assert_eq!(ck.tables.len(), 3);
        let loaded = ck.take_table("big", 300_000, 4).unwrap();
        assert_eq!(values(&loaded), values(&big));
        assert_eq!(values(&ck.tables[1]), values(&small));
        let mut full = std::fs::read(&path).unwrap();
        let n = full.len();
        for at in [n / 3, n / 2, n - 8] {
            full[at] ^= 0x01;
            std::fs::write(&path, &full).unwrap();
            let e = load(&path).unwrap_err().to_string();
            assert!(e.contains("corrupt: checksum"), "byte {at}: {e}");
            full[at] ^= 0x01;
        }
    }

    /// A file of `version` holding one table of 4 rows x 1 weight, no slots, whose rows after the
    /// scalars are `body` (and no sections, from version 3); with its checksum.
    fn handmade(version: u32, body: &[u8]) -> Vec<u8> {
        let mut f = Vec::new();
        f.extend_from_slice(MAGIC);
        f.extend_from_slice(&version.to_le_bytes());
        f.extend_from_slice(&1u64.to_le_bytes());
        f.extend_from_slice(b"m");
        if version >= 3 {
            f.extend_from_slice(&0u32.to_le_bytes());
        }
        f.extend_from_slice(&1u32.to_le_bytes());
        f.extend_from_slice(&1u32.to_le_bytes());
        f.extend_from_slice(b"t");
        f.extend_from_slice(&4u64.to_le_bytes());
        f.extend_from_slice(&1u64.to_le_bytes());
        f.extend_from_slice(&0u32.to_le_bytes());
        f.extend_from_slice(&0u32.to_le_bytes());
        f.extend_from_slice(body);
        let crc = crc32fast::hash(&f);
        f.extend_from_slice(&crc.to_le_bytes());
        f
    }

    fn words(values: &[f32]) -> Vec<u8> {
        values.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    /// A listed body: layout 1, fill 0.5, then (index, value) pairs.
    fn listed(rows: &[(u64, f32)]) -> Vec<u8> {
        let mut b = LISTED.to_le_bytes().to_vec();
        b.extend(words(&[0.5]));
        b.extend_from_slice(&(rows.len() as u64).to_le_bytes());
        for &(index, x) in rows {
            b.extend_from_slice(&index.to_le_bytes());
            b.extend(words(&[x]));
        }
        b
    }

    /// A hashed table of which a run touched a few rows is saved as those rows alone, loads back
    /// bit for bit (the other rows hold the optimizer's initial row) and saves again the same.
    #[test]
    fn tables_mostly_untouched_list_their_changed_rows() {
        let dir = tempfile::tempdir().unwrap();
        let opt = crate::optim::Adagrad {
            lr: 0.1f32,
            initial_accumulator: 0.1,
        };
        let rows = 200_000;
        let t = Table::new("w", rows, 2, &opt).unwrap();
        let step = t.begin(&opt, true).unwrap();
        let touched: Vec<usize> = (0..1000).map(|k| (k * 7919 + 13) % rows).collect();
        for &r in &touched {
            t.update_row(&opt, &step, r, &[0.5, -0.25], 1.0);
        }
        // A row changed back to the fill row is not listed; -0.0 differs from 0.0 and is.
        t.write_weights(5, &[-0.0, 0.0]);
        let path = dir.path().join("hashed.bin");
        save(&path, "m", &[], &[&t]).unwrap();
        let size = std::fs::metadata(&path).unwrap().len();
        let row = 4 * 2 * 2;
        let expected = (touched.len() + 1) as u64 * (8 + row);
        assert!(size > expected && size < expected + 200, "{size} bytes");
        let mut ck = load(&path).unwrap();
        let back = ck.take_table("w", rows, 2).unwrap();
        assert_eq!(values(&back), values(&t));
        assert_eq!(back.fill(), &[0.0; 4]);
        assert_eq!(back.row(1)[2].load(), 0.0);
        let again = dir.path().join("again.bin");
        save(&again, "m", &[], &[&back]).unwrap();
        assert_eq!(
            std::fs::read(&again).unwrap(),
            std::fs::read(&path).unwrap()
        );
    }

    /// A factor table whose weights were drawn ([`Drawn`]) saves only the rows that moved from
    /// their draw, whether training moved their slots or only a weight; it loads back bit for
    /// bit with the same draw, and saves again the same.
    #[test]
    fn tables_with_drawn_weights_list_the_rows_that_moved() {
        let dir = tempfile::tempdir().unwrap();
        let opt = crate::optim::Adagrad {
            lr: 0.1f32,
            initial_accumulator: 0.1,
        };
        let rows = 100_000;
        let drawn = Drawn {
            seed: 42,
            scale: 0.1,
            from: 1,
        };
        let mut t = Table::new("fm", rows, 5, &opt).unwrap();
        t.set_drawn(drawn);
        t.write_drawn();
        let mut row = [0.0f32; 5];
        t.read_weights(9, &mut row);
        assert_eq!(row[0], 0.0, "weights before `from` keep the fill");
        assert!(
            row[1..].iter().all(|x| x.abs() <= 0.1 && *x != 0.0),
            "{row:?}"
        );
        let step = t.begin(&opt, true).unwrap();
        let touched: Vec<usize> = (0..500).map(|k| (k * 7919 + 13) % rows).collect();
        for &r in &touched {
            t.update_row(&opt, &step, r, &[0.5, -0.25, 0.0, 1.0, 2.0], 1.0);
        }
        // A weight written outside training is listed; a row drawn again is not.
        t.read_weights(3, &mut row);
        row[2] = 9.0;
        t.write_weights(3, &row);
        drawn.draw(4, &mut row);
        t.write_weights(4, &row);
        let path = dir.path().join("drawn.bin");
        save(&path, "m", &[], &[&t]).unwrap();
        let size = std::fs::metadata(&path).unwrap().len();
        let row_bytes = 4 * 5 * 2;
        let expected = (touched.len() + 1) as u64 * (8 + row_bytes);
        assert!(size > expected && size < expected + 200, "{size} bytes");
        let mut ck = load(&path).unwrap();
        let back = ck.take_table("fm", rows, 5).unwrap();
        assert_eq!(values(&back), values(&t));
        assert_eq!(back.drawn(), Some(&drawn));
        let again = dir.path().join("again.bin");
        save(&again, "m", &[], &[&back]).unwrap();
        assert_eq!(
            std::fs::read(&again).unwrap(),
            std::fs::read(&path).unwrap()
        );
    }

    /// A drawn body: layout 2 with `from`, fill 0.5, then (index, value) pairs.
    fn drawn_body(from: u32, rows: &[(u64, f32)]) -> Vec<u8> {
        let mut b = DRAWN.to_le_bytes().to_vec();
        b.extend_from_slice(&7u64.to_le_bytes());
        b.extend(words(&[0.25]));
        b.extend_from_slice(&from.to_le_bytes());
        b.extend(listed(rows)[4..].iter().copied());
        b
    }

    /// Layout 2 read by hand: the unlisted rows hold the fill row with the drawn weights over
    /// it, the listed ones their values; a draw beyond the row is refused.
    #[test]
    fn drawn_rows_load_as_the_generator_draws_them() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("drawn.bin");
        std::fs::write(&path, handmade(4, &drawn_body(0, &[(2, 4.0)]))).unwrap();
        let mut ck = load(&path).unwrap();
        let t = ck.take_table("t", 4, 1).unwrap();
        let draw = Drawn {
            seed: 7,
            scale: 0.25,
            from: 0,
        };
        let want: Vec<f32> = (0..4)
            .map(|r| {
                let mut x = [0.5f32];
                draw.draw(r, &mut x);
                if r == 2 {
                    4.0
                } else {
                    x[0]
                }
            })
            .collect();
        let got: Vec<f32> = t.elements().iter().map(AtomicF32::load).collect();
        assert_eq!(got, want);
        for r in [0, 1, 3] {
            assert!(
                want[r].abs() <= 0.25,
                "row {r} drawn over the fill: {}",
                want[r]
            );
        }
        // Drawing from the row's end draws nothing.
        std::fs::write(&path, handmade(4, &drawn_body(1, &[]))).unwrap();
        let t = load(&path).unwrap().take_table("t", 4, 1).unwrap();
        assert!(t.elements().iter().all(|c| c.load() == 0.5));
        std::fs::write(&path, handmade(4, &drawn_body(2, &[]))).unwrap();
        let e = load(&path).unwrap_err().to_string();
        assert!(
            e.contains("drawn.bin") && e.contains("table t draws its weights from 2 of 1"),
            "{e}"
        );
    }

    /// A table saved while another thread writes it gives a file that loads: each listed row
    /// holds the values it had when written.
    #[test]
    fn a_table_changed_during_the_save_still_loads() {
        let dir = tempfile::tempdir().unwrap();
        let rows = 300_000;
        let t = Table::with_layout("w", rows, 4, 0, &[]).unwrap();
        for r in (0..rows).step_by(3) {
            t.write_weights(r, &[1.0, 2.0, 3.0, 4.0]);
        }
        let path = dir.path().join("moving.bin");
        let stop = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| {
                let mut k = 0usize;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let r = (k * 104_729) % rows;
                    let v = if k.is_multiple_of(2) { 0.0 } else { k as f32 };
                    t.write_weights(r, &[v; 4]);
                    k += 1;
                }
            });
            for _ in 0..3 {
                save(&path, "m", &[], &[&t]).unwrap();
                let mut ck = load(&path).unwrap();
                ck.take_table("w", rows, 4).unwrap();
            }
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
        });
    }

    #[test]
    fn version_1_files_still_load() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v1.bin");
        std::fs::write(&path, handmade(1, &words(&[1.0, -2.0, 0.0, 3.5]))).unwrap();
        let mut ck = load(&path).unwrap();
        let t = ck.take_table("t", 4, 1).unwrap();
        let got: Vec<f32> = t.elements().iter().map(AtomicF32::load).collect();
        assert_eq!(got, vec![1.0, -2.0, 0.0, 3.5]);
        assert!(ck.sections.is_empty());
        std::fs::write(&path, handmade(5, &[])).unwrap();
        let e = load(&path).unwrap_err().to_string();
        assert!(e.contains("format version 5"), "{e}");
    }

    /// Version 2 files have no sections: they load with none, and with the same tables as the
    /// version 3 file that holds the same model.
    #[test]
    fn version_2_files_load_without_sections() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v2.bin");
        std::fs::write(&path, handmade(2, &listed(&[(2, 4.0)]))).unwrap();
        let mut ck = load(&path).unwrap();
        assert!(ck.sections.is_empty());
        assert_eq!(ck.take_section("vocab"), None);
        let t = ck.take_table("t", 4, 1).unwrap();
        let v3 = dir.path().join("v3.bin");
        save(&v3, "m", &[], &[&t]).unwrap();
        let mut back = load(&v3).unwrap();
        assert!(back.sections.is_empty());
        assert_eq!(values(&back.take_table("t", 4, 1).unwrap()), values(&t));
    }

    /// A section's bytes are covered by the checksum, and a section longer than the file is
    /// refused before it is allocated.
    #[test]
    fn corrupt_and_oversized_sections_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = saved(dir.path());
        let full = std::fs::read(&path).unwrap();
        let at = full
            .windows(5)
            .position(|w| w == b"zebra")
            .expect("the section's bytes are in the file");
        let mut flipped = full.clone();
        flipped[at + 2] ^= 0x01;
        std::fs::write(&path, &flipped).unwrap();
        let e = load(&path).unwrap_err().to_string();
        assert!(
            e.contains("model.bin") && e.contains("corrupt: checksum"),
            "{e}"
        );
        // The section's length sits just before its bytes.
        let mut huge = full.clone();
        huge[at - 8..at].copy_from_slice(&(u64::MAX / 2).to_le_bytes());
        std::fs::write(&path, &huge).unwrap();
        let e = load(&path).unwrap_err().to_string();
        assert!(e.contains("section vocab") && e.contains("declares"), "{e}");
        std::fs::write(&path, &full[..at + 3]).unwrap();
        let e = load(&path).unwrap_err().to_string();
        assert!(e.contains("truncated"), "{e}");
    }

    #[test]
    fn listed_rows_load_over_the_fill_row() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("listed.bin");
        std::fs::write(&path, handmade(2, &listed(&[(1, -1.0), (3, 7.0)]))).unwrap();
        let mut ck = load(&path).unwrap();
        let t = ck.take_table("t", 4, 1).unwrap();
        let got: Vec<f32> = t.elements().iter().map(AtomicF32::load).collect();
        assert_eq!(got, vec![0.5, -1.0, 0.5, 7.0]);
    }

    #[test]
    fn bad_row_lists_are_refused_with_the_table_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bad.bin");
        let mut too_many = listed(&[]);
        too_many[8..16].copy_from_slice(&5u64.to_le_bytes());
        let mut layout = listed(&[]);
        layout[..4].copy_from_slice(&7u32.to_le_bytes());
        for (body, want) in [
            (listed(&[(4, 1.0)]), "lists row 4, it has 4 rows"),
            (listed(&[(2, 1.0), (2, 1.0)]), "lists row 2 after row 2"),
            (listed(&[(3, 1.0), (0, 1.0)]), "lists row 0 after row 3"),
            (too_many, "lists 5 of its 4 rows"),
            (layout, "row layout 7"),
            (listed(&[(1, 1.0)])[..20].to_vec(), "truncated"),
        ] {
            std::fs::write(&path, handmade(2, &body)).unwrap();
            let e = load(&path).unwrap_err().to_string();
            assert!(e.contains("bad.bin") && e.contains(want), "{want}: {e}");
            if !want.contains("truncated") {
                assert!(e.contains("table t"), "{e}");
            }
        }
    }

    /// Listed rows wider than the reader's chunk (here 20,000 weights) load whole.
    #[test]
    fn listed_rows_wider_than_a_read_chunk_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let t = Table::with_layout("wide", 10, 20_000, 0, &[]).unwrap();
        let row: Vec<f32> = (0..20_000).map(|k| k as f32 * 0.5).collect();
        t.write_weights(7, &row);
        let path = dir.path().join("wide.bin");
        save(&path, "m", &[], &[&t]).unwrap();
        assert!(
            std::fs::metadata(&path).unwrap().len() < 3 * 80_000,
            "rows listed"
        );
        let mut ck = load(&path).unwrap();
        assert_eq!(
            values(&ck.take_table("wide", 10, 20_000).unwrap()),
            values(&t)
        );
    }
}
