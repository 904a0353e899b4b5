//! Saving and loading models: every table's weights, optimizer slots and scalars, plus a text
//! description of the model (its configuration), in one checksummed file.
//!
//! Format (little-endian):
//! ```text
//! magic "HOGWILD\0" | version u32 = 1 | meta_len u64 | meta (UTF-8) | tables u32 |
//! per table: name_len u32 | name | rows u64 | dim u64 | slots u32 | scalars u32 |
//!            scalars f32 * scalars | elements f32 * rows * dim * (1 + slots) |
//! crc32 u32 of every byte before it
//! ```
//! Writing is atomic: the file is written beside its destination under a temporary name, flushed to
//! disk, then renamed over the destination, so a crash leaves either the old file or the new one.
//! CRC-32 (the `crc32fast` crate, the checksum of zip and PNG) detects truncation and corruption of the
//! kind a disk or a copy produces; it is not a defence against deliberate tampering. The declared sizes
//! are checked against the file's length before anything is allocated.

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use crate::store::{map_ranges, AtomicF32, Table};
use crate::{Error, Result};

const MAGIC: &[u8; 8] = b"HOGWILD\0";
const VERSION: u32 = 1;
const CHUNK: usize = 1 << 16;
/// Elements of a table written by one thread at least (a large table is written by one thread
/// per core, each into its own part of the file).
const ELEMENTS_PER_WRITER: usize = 1 << 20;

/// A loaded checkpoint: the model description and its tables, in the order they were saved.
#[derive(Debug)]
pub struct Checkpoint {
    pub meta: String,
    pub tables: Vec<Table>,
}

impl Checkpoint {
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

/// Writes `elements` into `path` at byte `offset` through a handle of its own; returns the CRC
/// state of the bytes written, for combining in file order.
fn write_elements(
    path: &Path,
    offset: u64,
    elements: &[AtomicF32],
) -> std::io::Result<crc32fast::Hasher> {
    let mut file = File::options().write(true).open(path)?;
    file.seek(SeekFrom::Start(offset))?;
    let mut out = BufWriter::with_capacity(CHUNK, file);
    let mut crc = crc32fast::Hasher::new();
    let mut buf = Vec::with_capacity(CHUNK);
    for chunk in elements.chunks(CHUNK / 4) {
        buf.clear();
        for x in chunk {
            buf.extend_from_slice(&x.load().to_le_bytes());
        }
        crc.update(&buf);
        out.write_all(&buf)?;
    }
    out.flush()?;
    Ok(crc)
}

/// Saves `tables` and `meta` to `path` atomically (see the module documentation). Tables must not be
/// trained while they are saved.
pub fn save(path: &Path, meta: &str, tables: &[&Table]) -> Result<()> {
    replace_file(
        path,
        |tmp| write_file(tmp, meta, tables),
        |e| err(path, format!("cannot rename into place: {e}")),
    )
}

/// Replaces `path` with what `write` puts into a temporary file beside it ([`temp_path`]),
/// renamed into place only when `write` succeeds: a reader of `path` sees the old file or the
/// new one, whole. On any failure the temporary file is removed; a failed rename is reported
/// through `rename_error`.
pub(crate) fn replace_file<E>(
    path: &Path,
    write: impl FnOnce(&Path) -> std::result::Result<(), E>,
    rename_error: impl FnOnce(std::io::Error) -> E,
) -> std::result::Result<(), E> {
    let tmp = temp_path(path);
    let result = write(&tmp).and_then(|()| std::fs::rename(&tmp, path).map_err(rename_error));
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// A temporary name beside `path` that no other writer uses: `<name>.tmp.<pid>.<n>`, so that two
/// processes, or two threads of one, writing the same file never write into one another's
/// temporary file.
fn temp_path(path: &Path) -> PathBuf {
    static WRITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".tmp.{}.{n}", std::process::id()));
    path.with_file_name(name)
}

fn write_file(tmp: &Path, meta: &str, tables: &[&Table]) -> Result<()> {
    let io = |e: std::io::Error| err(tmp, format!("cannot write: {e}"));
    let file = File::create(tmp).map_err(io)?;
    let mut w = CrcWriter {
        inner: BufWriter::with_capacity(CHUNK, file),
        crc: crc32fast::Hasher::new(),
    };
    w.put(MAGIC).map_err(io)?;
    w.put(&VERSION.to_le_bytes()).map_err(io)?;
    w.put(&(meta.len() as u64).to_le_bytes()).map_err(io)?;
    w.put(meta.as_bytes()).map_err(io)?;
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
        w.inner.flush().map_err(io)?;
        let start = w.inner.get_mut().stream_position().map_err(io)?;
        let elements = t.elements();
        let parts = map_ranges(elements.len(), ELEMENTS_PER_WRITER, |range| {
            write_elements(tmp, start + 4 * range.start as u64, &elements[range])
        });
        for part in parts {
            w.crc.combine(&part.map_err(io)?);
        }
        let end = start + 4 * elements.len() as u64;
        w.inner.get_mut().seek(SeekFrom::Start(end)).map_err(io)?;
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
    fn string(&mut self, len: u64, what: &str) -> Result<String> {
        let len = self.fits(len, 1, what)?;
        let mut b = vec![0u8; len];
        self.take(&mut b, what)?;
        String::from_utf8(b).map_err(|_| err(self.path, format!("{what} is not UTF-8")))
    }
}

/// Loads a checkpoint written by [`save`]; a truncated or corrupt file is refused with an error
/// naming the file and what is wrong.
pub fn load(path: &Path) -> Result<Checkpoint> {
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
    if version != VERSION {
        return Err(err(
            path,
            format!("format version {version}, this build reads version {VERSION}"),
        ));
    }
    let meta_len = r.u64("the header")?;
    let meta = r.string(meta_len, "the model description")?;
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
        let elements = rows
            .checked_mul(dim)
            .and_then(|n| n.checked_mul(1 + slots as u64))
            .unwrap_or(u64::MAX);
        r.fits(elements, 4, &what)?;
        let table =
            Table::with_layout(&name, rows as usize, dim as usize, slots as usize, &scalars)
                .map_err(|e| err(path, e.to_string()))?;
        for chunk in table.elements().chunks(CHUNK / 4) {
            let b = &mut bytes[..chunk.len() * 4];
            r.take(b, &what)?;
            for (cell, x) in chunk.iter().zip(b.chunks_exact(4)) {
                cell.store(f32::from_le_bytes([x[0], x[1], x[2], x[3]]));
            }
        }
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
    Ok(Checkpoint { meta, tables })
}

#[cfg(test)]
mod tests {
    use super::*;
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

    fn saved(dir: &Path) -> PathBuf {
        let (a, b) = sample();
        let path = dir.join("model.bin");
        save(&path, "kind = \"test\"", &[&a, &b]).unwrap();
        path
    }

    #[test]
    fn round_trip_keeps_every_bit() {
        let dir = tempfile::tempdir().unwrap();
        let path = saved(dir.path());
        let (a, b) = sample();
        let mut ck = load(&path).unwrap();
        assert_eq!(ck.meta, "kind = \"test\"");
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
        let e = load(&dir.path().join("nope.bin")).unwrap_err().to_string();
        assert!(e.contains("nope.bin") && e.contains("cannot open"), "{e}");
        let mut ck = load(&saved(dir.path())).unwrap();
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
        let e = save(&missing, "", &[&a]).unwrap_err().to_string();
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
        save(&path, "m", &[&small, &big, &small]).unwrap();
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
}
