//! The MultiSlot line parser: `<count> v1 .. v<count>` per slot, in the desc's order, after the
//! fields Paddle's datasets may put first ([`LinePrefix`]: an instance id, a content, a log key).
//!
//! Integers are parsed byte by byte in one pass (digits are accumulated while the token is
//! scanned); floats use the standard library's exact parser. A line is parsed straight into the
//! batch under construction and rolled back if it turns out bad, so good lines cost no copy.

use std::fmt;

use super::batch::{Batch, SlotValues};
use super::desc::{DataFeedDesc, SlotType};

/// What is wrong with a line; the message is shown after `file:line: slot "name": `.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LineErrorKind {
    /// The line ends where a slot's count should be.
    MissingCount,
    /// The count is not an integer.
    BadCount {
        /// The count as written.
        text: String,
    },
    /// The count is negative.
    NegativeCount {
        /// The count as written.
        text: String,
    },
    /// The count is 0 (Paddle requires at least one value per slot).
    ZeroCount,
    /// The count cannot fit in the rest of the line.
    CountTooLarge {
        /// The count as written.
        text: String,
        /// The most values the rest of the line could hold.
        room: usize,
    },
    /// The line ends before the slot's values do.
    Truncated {
        /// The slot's count.
        count: u64,
        /// The values found before the line ended.
        found: u64,
    },
    /// A value is not a number of the slot's type (`index` counts from 1).
    NotNumber {
        /// The value's position in the slot, from 1.
        index: u64,
        /// The value as written.
        text: String,
        /// The slot's type.
        kind: SlotType,
    },
    /// A value is a number but outside the slot type's range (or not finite).
    OutOfRange {
        /// The value's position in the slot, from 1.
        index: u64,
        /// The value as written.
        text: String,
        /// The slot's type.
        kind: SlotType,
    },
    /// A dense slot's count differs from its per-instance width.
    DenseWidth {
        /// The slot's count on this line.
        count: u64,
        /// The width expected.
        expected: u64,
        /// Whether the width comes from the slot's shape (else from earlier lines of the batch).
        from_shape: bool,
    },
    /// Something follows the last slot.
    TrailingGarbage {
        /// What follows (possibly shortened).
        text: String,
    },
    /// The line starts with a byte order mark (`utf16`: a UTF-16 one), which would show as
    /// nothing in the token it spoils.
    ByteOrderMark {
        /// Whether it is a UTF-16 one.
        utf16: bool,
    },
    /// The line holds a NUL byte at `column` (from 1): binary or corrupt data.
    NulByte {
        /// The byte's column, from 1.
        column: usize,
    },
    /// The line ends before a field of its [`LinePrefix`] (`field`: `ins_id`, `content` or
    /// `logkey`).
    PrefixMissing {
        /// The field.
        field: &'static str,
    },
    /// A field of the [`LinePrefix`] does not start with the count 1 Paddle's layout has
    /// (`1 <id>`).
    PrefixCount {
        /// The field.
        field: &'static str,
        /// What stands where the count should.
        text: String,
    },
    /// The first slot's first value is no number and the line starts `1 <token>`: the line
    /// likely starts with an instance id that no [`LinePrefix`] was set to read.
    UnreadInstanceId {
        /// The token that looks like an instance id.
        text: String,
    },
}

impl LineErrorKind {
    /// A short name of the problem class, used by `hogwild check`'s summary.
    pub fn class(&self) -> &'static str {
        match self {
            LineErrorKind::MissingCount | LineErrorKind::Truncated { .. } => "truncated line",
            LineErrorKind::BadCount { .. } => "count not a number",
            LineErrorKind::NegativeCount { .. } => "negative count",
            LineErrorKind::ZeroCount => "zero count",
            LineErrorKind::CountTooLarge { .. } => "count too large",
            LineErrorKind::NotNumber { .. } | LineErrorKind::UnreadInstanceId { .. } => {
                "value not a number"
            }
            LineErrorKind::OutOfRange { .. } => "value out of range",
            LineErrorKind::DenseWidth { .. } => "dense width mismatch",
            LineErrorKind::TrailingGarbage { .. } => "trailing garbage",
            LineErrorKind::ByteOrderMark { .. } => "byte order mark",
            LineErrorKind::NulByte { .. } => "NUL byte",
            LineErrorKind::PrefixMissing { .. } | LineErrorKind::PrefixCount { .. } => {
                "bad instance id prefix"
            }
        }
    }
}

impl fmt::Display for LineErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LineErrorKind::MissingCount => write!(f, "line ends before the count (truncated line)"),
            LineErrorKind::BadCount { text } => write!(f, "count \"{text}\" is not a number"),
            LineErrorKind::NegativeCount { text } => write!(f, "count {text} is negative"),
            LineErrorKind::ZeroCount => {
                write!(f, "count 0 (every slot needs at least one value; pad it)")
            }
            LineErrorKind::CountTooLarge { text, room } => write!(
                f,
                "count {text} is too large for the rest of the line ({room} bytes)"
            ),
            LineErrorKind::Truncated { count, found } => write!(
                f,
                "expected {count} values, the line ends after {found} (truncated line)"
            ),
            LineErrorKind::NotNumber { index, text, kind } => {
                let what = match kind {
                    SlotType::U64 => "an unsigned integer",
                    SlotType::F32 => "a number",
                };
                write!(f, "value {index} \"{text}\" is not {what}")
            }
            LineErrorKind::OutOfRange { index, text, kind } => write!(
                f,
                "value {index} \"{text}\" is out of range for {}",
                kind.name()
            ),
            LineErrorKind::DenseWidth {
                count,
                expected,
                from_shape: true,
            } => write!(
                f,
                "dense slot has {count} values, its shape needs {expected}"
            ),
            LineErrorKind::DenseWidth {
                count, expected, ..
            } => write!(
                f,
                "dense slot has {count} values, earlier lines of this batch have {expected}"
            ),
            LineErrorKind::TrailingGarbage { text } => {
                write!(f, "trailing data after the last slot: \"{text}\"")
            }
            LineErrorKind::ByteOrderMark { utf16: false } => write!(
                f,
                "byte order mark (U+FEFF) at the start of the line: save the file without one"
            ),
            LineErrorKind::ByteOrderMark { utf16: true } => write!(
                f,
                "UTF-16 byte order mark: the file is UTF-16, MultiSlot files are ASCII text"
            ),
            LineErrorKind::NulByte { column } => {
                write!(f, "NUL byte at column {column} (binary or corrupt data)")
            }
            LineErrorKind::PrefixMissing { field } => write!(
                f,
                "{field}: the line ends before its {field} (with --parse-{} lines start with \
                 `1 <{field}>`)",
                field.replace('_', "-")
            ),
            LineErrorKind::UnreadInstanceId { text } => write!(
                f,
                "value 1 \"{text}\" is not a number (a line that starts with an instance id, \
                 `1 <id>`, is read with --parse-ins-id)"
            ),
            LineErrorKind::PrefixCount { field, text } => write!(
                f,
                "{field}: count \"{text}\" is not 1 (the {field} is written `1 <{field}>` \
                 before the slots)"
            ),
        }
    }
}

/// A bad line: the slot (index among all slots, used or not) and the problem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineError {
    /// Index of the slot in the desc, `None` when the problem follows the last slot.
    pub slot: Option<usize>,
    /// What is wrong.
    pub kind: LineErrorKind,
}

/// `slot 2: count 0 ...` (the slot by its index in the desc; the feed's own errors,
/// [`crate::Error::Parse`], name the file, the line and the slot's name instead).
impl fmt::Display for LineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.slot {
            Some(slot) => write!(f, "slot {slot}: {}", self.kind),
            None => write!(f, "{}", self.kind),
        }
    }
}

impl std::error::Error for LineError {}

#[derive(Debug, Clone)]
struct SlotSpec {
    kind: SlotType,
    /// Position among the used slots, if used.
    used: Option<usize>,
    dense: bool,
    dense_width: Option<u64>,
}

/// What comes before the slots on every line: the fields Paddle's in-memory datasets read when
/// told to (`set_parse_ins_id`, `set_parse_content`, `set_parse_logkey`), in that order, each
/// written `1 <token>` (a count of 1, then one token without spaces), as Paddle's
/// `MultiSlotInMemoryDataFeed` and `SlotRecordInMemoryDataFeed` read them. The instance id is
/// the `ins_id`, or the `logkey` when it is read (Paddle's records take the log key as their id);
/// the content is read past.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LinePrefix {
    /// Lines start with `1 <ins_id>`.
    pub ins_id: bool,
    /// Then `1 <content>`.
    pub content: bool,
    /// Then `1 <logkey>`, which becomes the instance id.
    pub logkey: bool,
}

impl LinePrefix {
    /// Whether lines carry an instance id (an `ins_id` or a `logkey`).
    pub fn has_id(&self) -> bool {
        self.ins_id || self.logkey
    }

    /// The fields read, in line order, each with whether it is the instance id.
    fn fields(&self) -> impl Iterator<Item = (&'static str, bool)> {
        [
            (self.ins_id, "ins_id", !self.logkey),
            (self.content, "content", false),
            (self.logkey, "logkey", true),
        ]
        .into_iter()
        .filter(|(on, _, _)| *on)
        .map(|(_, name, is_id)| (name, is_id))
    }
}

/// Parses MultiSlot lines for one desc.
#[derive(Debug, Clone)]
pub struct LineParser {
    slots: Vec<SlotSpec>,
    prefix: LinePrefix,
}

const MAX_SHOWN: usize = 32;

/// Shows a token in a message, shortened if long, with control characters escaped (`\u{1b}`)
/// so that the message prints as it reads.
fn shown(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let escaped = |chars: &mut dyn Iterator<Item = char>| -> String {
        chars
            .flat_map(|c| match c.is_control() {
                true => c.escape_debug().collect::<Vec<_>>(),
                false => vec![c],
            })
            .collect()
    };
    if text.chars().count() > MAX_SHOWN {
        format!("{}...", escaped(&mut text.chars().take(MAX_SHOWN)))
    } else {
        escaped(&mut text.chars())
    }
}

/// What the bytes of a bad line say about it, when they say more than the token they spoil: a
/// byte order mark at its start (a file saved by an editor that adds one), a NUL byte (binary
/// data). Called only for lines that failed to parse.
#[cold]
fn byte_problem(line: &[u8]) -> Option<LineErrorKind> {
    if line.starts_with(&[0xEF, 0xBB, 0xBF]) {
        return Some(LineErrorKind::ByteOrderMark { utf16: false });
    }
    if line.starts_with(&[0xFF, 0xFE]) || line.starts_with(&[0xFE, 0xFF]) {
        return Some(LineErrorKind::ByteOrderMark { utf16: true });
    }
    let column = line.iter().position(|&b| b == 0)? + 1;
    Some(LineErrorKind::NulByte { column })
}

/// `error`, or the line's byte problem in its place.
#[cold]
fn explained(line: &[u8], error: LineError) -> LineError {
    match byte_problem(line) {
        Some(kind) => LineError { slot: None, kind },
        None => error,
    }
}

/// `error`, said to be an unread instance id when it is one: the first slot's first value is no
/// number at all (not a float either) in a line that starts `1 <token>` (Paddle's `1 <ins_id>`).
#[cold]
fn maybe_unread_id(line: &[u8], error: LineError) -> LineError {
    match &error.kind {
        LineErrorKind::NotNumber { index: 1, text, .. }
            if error.slot == Some(0)
                && (line.starts_with(b"1 ") || line.starts_with(b"1\t"))
                && text.parse::<f64>().is_err() =>
        {
            LineError {
                slot: error.slot,
                kind: LineErrorKind::UnreadInstanceId { text: text.clone() },
            }
        }
        _ => error,
    }
}

#[inline(always)]
fn is_sep(b: u8) -> bool {
    b == b' ' || b == b'\t' || b == b'\r'
}

/// Why an integer token did not parse.
enum IntError {
    /// `-<digits>`.
    Negative,
    /// Digits only, but more than fits in u64.
    Overflow,
    /// Anything else.
    NotNumber,
}

struct Cursor<'a> {
    line: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    #[inline(always)]
    fn skip_sep(&mut self) {
        while self.pos < self.line.len() && is_sep(self.line[self.pos]) {
            self.pos += 1;
        }
    }

    #[inline(always)]
    fn at_end(&self) -> bool {
        self.pos >= self.line.len()
    }

    /// The next token (after separators); call only when not at the end.
    #[inline(always)]
    fn token(&mut self) -> &'a [u8] {
        let start = self.pos;
        while self.pos < self.line.len() && !is_sep(self.line[self.pos]) {
            self.pos += 1;
        }
        &self.line[start..self.pos]
    }

    /// Parses an unsigned integer token in one pass. `None` at the end of the line; on error
    /// the token's text comes back with the reason.
    #[inline(always)]
    fn next_u64(&mut self) -> Option<Result<u64, (IntError, &'a [u8])>> {
        self.skip_sep();
        if self.at_end() {
            return None;
        }
        let line = self.line;
        let start = self.pos;
        let mut value: u64 = 0;
        let mut pos = start;
        // Eight bytes at a time while they are available (SWAR), then byte by byte.
        while let Some(chunk) = line.get(pos..pos + 8) {
            let word = u64::from_le_bytes(chunk.try_into().expect("8 bytes"));
            let (digits, chunk_value) = swar_digits(word);
            value = value.wrapping_mul(POW10[digits]).wrapping_add(chunk_value);
            pos += digits;
            if digits < 8 {
                break;
            }
        }
        if line.len() - pos < 8 {
            while pos < line.len() {
                let digit = line[pos].wrapping_sub(b'0');
                if digit > 9 {
                    break;
                }
                value = value.wrapping_mul(10).wrapping_add(u64::from(digit));
                pos += 1;
            }
        }
        if pos > start && (pos == line.len() || is_sep(line[pos])) {
            self.pos = pos;
            let digits = pos - start;
            // 19 decimal digits always fit in u64; longer tokens are re-checked exactly.
            if digits > 19 {
                let text = &line[start..pos];
                return Some(checked_u64(text).ok_or((IntError::Overflow, text)));
            }
            return Some(Ok(value));
        }
        let text = self.token_from(start);
        let reason = match text.split_first() {
            Some((b'-', rest)) if !rest.is_empty() && rest.iter().all(u8::is_ascii_digit) => {
                IntError::Negative
            }
            _ => IntError::NotNumber,
        };
        Some(Err((reason, text)))
    }

    fn token_from(&mut self, start: usize) -> &'a [u8] {
        self.pos = start;
        self.token()
    }
}

const POW10: [u64; 9] = [
    1,
    10,
    100,
    1_000,
    10_000,
    100_000,
    1_000_000,
    10_000_000,
    100_000_000,
];

/// The number of leading ASCII digits in the 8 bytes of `word` (first byte lowest) and their
/// value, without a per-byte loop.
#[inline(always)]
fn swar_digits(word: u64) -> (usize, u64) {
    const ONES: u64 = 0x0101_0101_0101_0101;
    let values = word.wrapping_sub(0x30 * ONES);
    // A byte's high bit is set here iff it is below b'0' (borrow) or above b'9' (carry) or
    // non-ASCII. Borrows and carries only move upwards, so bytes below the first non-digit are
    // exact.
    let non_digit = (values | word.wrapping_add(0x46 * ONES)) & (0x80 * ONES);
    let digits = (non_digit.trailing_zeros() / 8) as usize;
    if digits == 0 {
        return (0, 0);
    }
    // Move the digits to the top bytes: the bytes shifted in are zeros, i.e. leading zeros.
    let mut v = values << (8 * (8 - digits));
    // Pairwise combine: 8 digits -> 4 two-digit -> 2 four-digit -> 1 eight-digit number.
    v = (v.wrapping_mul(10) + (v >> 8)) & 0x00FF_00FF_00FF_00FF;
    v = (v.wrapping_mul(100) + (v >> 16)) & 0x0000_FFFF_0000_FFFF;
    v = (v.wrapping_mul(10_000) + (v >> 32)) & 0x0000_0000_FFFF_FFFF;
    (digits, v)
}

fn checked_u64(digits: &[u8]) -> Option<u64> {
    digits.iter().try_fold(0u64, |v, &b| {
        v.checked_mul(10)?.checked_add(u64::from(b - b'0'))
    })
}

impl LineParser {
    /// A parser for the desc's slots (the desc must be valid).
    pub fn new(desc: &DataFeedDesc) -> Self {
        let mut used = 0;
        let slots = desc
            .slots()
            .iter()
            .map(|s| {
                let spec = SlotSpec {
                    kind: s.slot_type(),
                    used: s.is_used().then_some(used),
                    dense: s.is_dense(),
                    dense_width: s.dense_width().map(|w| w as u64),
                };
                used += usize::from(s.is_used());
                spec
            })
            .collect();
        LineParser {
            slots,
            prefix: LinePrefix::default(),
        }
    }

    /// The parser for lines that start with `prefix`'s fields.
    pub fn with_prefix(self, prefix: LinePrefix) -> Self {
        LineParser { prefix, ..self }
    }

    /// Reads the fields of the line prefix; the instance id's bytes, when the prefix has one.
    fn parse_prefix<'a>(&self, cursor: &mut Cursor<'a>) -> Result<Option<&'a [u8]>, LineError> {
        let mut id = None;
        for (field, is_id) in self.prefix.fields() {
            let error = |kind| LineError { slot: None, kind };
            match cursor.next_u64() {
                None => return Err(error(LineErrorKind::PrefixMissing { field })),
                Some(Ok(1)) => {}
                Some(Ok(n)) => {
                    let text = n.to_string();
                    return Err(error(LineErrorKind::PrefixCount { field, text }));
                }
                Some(Err((_, text))) => {
                    let text = shown(text);
                    return Err(error(LineErrorKind::PrefixCount { field, text }));
                }
            }
            cursor.skip_sep();
            if cursor.at_end() {
                return Err(error(LineErrorKind::PrefixMissing { field }));
            }
            let token = cursor.token();
            if is_id {
                id = Some(token);
            }
        }
        Ok(id)
    }

    /// Parses one line (without its newline) and appends it to `batch` as one instance (with its
    /// instance id, when the prefix has one). On error `batch` is left as it was.
    pub fn parse_into(&self, line: &[u8], batch: &mut Batch) -> Result<(), LineError> {
        let mut cursor = Cursor { line, pos: 0 };
        let id = match self.prefix == LinePrefix::default() {
            true => None,
            false => self
                .parse_prefix(&mut cursor)
                .map_err(|error| explained(line, error))?,
        };
        for (index, spec) in self.slots.iter().enumerate() {
            if let Err(kind) = self.parse_slot(spec, &mut cursor, batch) {
                batch.rollback();
                let error = LineError {
                    slot: Some(index),
                    kind,
                };
                if !self.prefix.has_id() {
                    return Err(explained(line, maybe_unread_id(line, error)));
                }
                return Err(explained(line, error));
            }
        }
        cursor.skip_sep();
        if !cursor.at_end() {
            batch.rollback();
            let error = LineError {
                slot: None,
                kind: LineErrorKind::TrailingGarbage {
                    text: shown(&line[cursor.pos..]),
                },
            };
            return Err(explained(line, error));
        }
        batch.end_instance();
        if let Some(id) = id {
            batch.ids.push(id);
        }
        Ok(())
    }

    #[inline]
    fn parse_slot(
        &self,
        spec: &SlotSpec,
        cursor: &mut Cursor<'_>,
        batch: &mut Batch,
    ) -> Result<(), LineErrorKind> {
        let count = match cursor.next_u64() {
            None => return Err(LineErrorKind::MissingCount),
            Some(Ok(0)) => return Err(LineErrorKind::ZeroCount),
            Some(Ok(count)) => count,
            Some(Err((reason, text))) => {
                let text = shown(text);
                return Err(match reason {
                    IntError::Negative => LineErrorKind::NegativeCount { text },
                    IntError::Overflow => LineErrorKind::CountTooLarge {
                        text,
                        room: cursor.line.len() - cursor.pos,
                    },
                    IntError::NotNumber => LineErrorKind::BadCount { text },
                });
            }
        };
        // Every value takes at least one byte plus a separator before it.
        let room = cursor.line.len() - cursor.pos;
        if count > (room / 2) as u64 {
            return Err(LineErrorKind::CountTooLarge {
                text: count.to_string(),
                room,
            });
        }
        let slot = spec.used.map(|u| &mut batch.slots[u]);
        if let (true, Some(slot)) = (spec.dense, &slot) {
            let (expected, from_shape) = match spec.dense_width {
                Some(width) => (Some(width), true),
                None if slot.offsets.len() > 1 => {
                    (Some((slot.offsets[1] - slot.offsets[0]) as u64), false)
                }
                None => (None, false),
            };
            if let Some(expected) = expected.filter(|&e| e != count) {
                return Err(LineErrorKind::DenseWidth {
                    count,
                    expected,
                    from_shape,
                });
            }
        }
        match (spec.kind, slot) {
            (SlotType::U64, Some(slot)) => {
                let SlotValues::U64(out) = &mut slot.values else {
                    unreachable!("slot layout follows the desc")
                };
                out.reserve(count as usize);
                for index in 1..=count {
                    out.push(parse_u64_value(cursor, index, count)?);
                }
            }
            (SlotType::U64, None) => {
                for index in 1..=count {
                    parse_u64_value(cursor, index, count)?;
                }
            }
            (SlotType::F32, Some(slot)) => {
                let SlotValues::F32(out) = &mut slot.values else {
                    unreachable!("slot layout follows the desc")
                };
                out.reserve(count as usize);
                for index in 1..=count {
                    out.push(parse_f32_value(cursor, index, count)?);
                }
            }
            (SlotType::F32, None) => {
                for index in 1..=count {
                    parse_f32_value(cursor, index, count)?;
                }
            }
        }
        Ok(())
    }
}

#[inline(always)]
fn parse_u64_value(cursor: &mut Cursor<'_>, index: u64, count: u64) -> Result<u64, LineErrorKind> {
    match cursor.next_u64() {
        Some(Ok(v)) => Ok(v),
        None => Err(LineErrorKind::Truncated {
            count,
            found: index - 1,
        }),
        Some(Err((reason, text))) => {
            let text = shown(text);
            let kind = SlotType::U64;
            Err(match reason {
                IntError::Negative | IntError::Overflow => {
                    LineErrorKind::OutOfRange { index, text, kind }
                }
                IntError::NotNumber => LineErrorKind::NotNumber { index, text, kind },
            })
        }
    }
}

#[inline(always)]
fn parse_f32_value(cursor: &mut Cursor<'_>, index: u64, count: u64) -> Result<f32, LineErrorKind> {
    cursor.skip_sep();
    if cursor.at_end() {
        return Err(LineErrorKind::Truncated {
            count,
            found: index - 1,
        });
    }
    let token = cursor.token();
    match fast_float2::parse::<f32, _>(token).ok() {
        Some(v) if v.is_finite() => Ok(v),
        parsed => Err(float_error(parsed.is_some(), index, token)),
    }
}

#[cold]
fn float_error(is_number: bool, index: u64, token: &[u8]) -> LineErrorKind {
    let (text, kind) = (shown(token), SlotType::F32);
    if is_number {
        LineErrorKind::OutOfRange { index, text, kind }
    } else {
        LineErrorKind::NotNumber { index, text, kind }
    }
}
