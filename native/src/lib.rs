//! The per-record checks Kafka's broker makes of a client's v2 record batch (`DefaultRecord.readFrom`
//! and `LogValidator`), over the batch's records payload (decompressed when the batch is compressed).
//!
//! `record_spans(payload)` walks a payload once for the log cleaner (keys, offset deltas, null
//! values and record spans, as parallel lists).
//!
//! `ColumnBuilder` (columns.rs) decodes records into Arrow's column layout for the Spark source;
//! `partition_rows` and `encode_runs` (encode.rs) encode Arrow columns as records for the sink.
//!
//! `RequestDecoder` (requests.rs) decodes Produce and Fetch request frames, and responses.rs encodes
//! their responses: the broker's hot path.
//!
//! `batches_valid` (verify.rs) checks the batches of a segment read (CRCs and offset order) in one
//! pass, as `storage.log.Log._verify` does.
//!
//! `validate_records(payload, records_count)` returns None when the payload is exactly
//! `records_count` well-formed records, else `(record index, message)` for the first bad record.
//! `protocol/record_validation.py` is the reference implementation: the same checks, in the same
//! order, with the same messages; a property test holds the two equal.

mod columns;
mod encode;
mod requests;
mod responses;
mod verify;

use pyo3::buffer::PyBuffer;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::hash::{BuildHasher, BuildHasherDefault, Hasher};

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

type Check<T> = Result<T, String>;

impl<'a> Reader<'a> {
    /// A zig-zag varint of at most `max_bytes` bytes ending at or before `end`.
    fn varint(&mut self, end: usize, max_bytes: usize, what: &str) -> Check<i64> {
        let mut raw: u64 = 0;
        let mut shift = 0;
        for i in 0..max_bytes {
            if self.pos >= end {
                return Err(format!("truncated {} varint", what));
            }
            let b = self.buf[self.pos];
            self.pos += 1;
            raw |= ((b & 0x7f) as u64) << shift;
            if b & 0x80 == 0 {
                return Ok(((raw >> 1) as i64) ^ -((raw & 1) as i64));
            }
            shift += 7;
            if i + 1 == max_bytes {
                break;
            }
        }
        Err(format!("{} varint longer than {} bytes", what, max_bytes))
    }

    /// A length-prefixed blob (-1: null when `nullable`) inside the record ending at `end`.
    fn blob(&mut self, end: usize, nullable: bool, what: &str) -> Check<()> {
        let n = self.varint(end, 5, what)?;
        if n < -1 || (n == -1 && !nullable) {
            return Err(format!("invalid {} length {}", what, n));
        }
        if n > 0 {
            if (n as usize) > end - self.pos {
                return Err(format!("{} of {} bytes overruns its record", what, n));
            }
            self.pos += n as usize;
        }
        Ok(())
    }
}

fn check(buf: &[u8], records_count: i64) -> Option<(i64, String)> {
    let end = buf.len();
    let mut r = Reader { buf, pos: 0 };
    let mut index: i64 = 0;
    while r.pos < end {
        if index >= records_count {
            return Some((index, format!("more records than the header's records_count {}", records_count)));
        }
        if let Err(e) = record(&mut r, end, index) {
            return Some((index, e));
        }
        index += 1;
    }
    if index != records_count {
        return Some((index, format!("header says {} records, payload holds {}", records_count, index)));
    }
    None
}

fn record(r: &mut Reader, end: usize, index: i64) -> Check<()> {
    let length = r.varint(end, 5, "record length")?;
    if length <= 0 {
        return Err(format!("invalid record length {}", length));
    }
    if (length as usize) > end - r.pos {
        return Err(format!("record length {} overruns the batch", length));
    }
    let rec_end = r.pos + length as usize;
    r.pos += 1; // attributes
    r.varint(rec_end, 10, "timestamp delta")?;
    let offset_delta = r.varint(rec_end, 5, "offset delta")?;
    if offset_delta != index {
        return Err(format!("offset delta {} where {} was expected", offset_delta, index));
    }
    r.blob(rec_end, true, "key")?;
    r.blob(rec_end, true, "value")?;
    let headers = r.varint(rec_end, 5, "header count")?;
    if headers < 0 || headers > ((rec_end - r.pos) / 2) as i64 {
        return Err(format!("invalid header count {}", headers));
    }
    for _ in 0..headers {
        r.blob(rec_end, false, "header key")?;
        r.blob(rec_end, true, "header value")?;
    }
    if r.pos != rec_end {
        return Err(format!("record has {} bytes beyond its fields", rec_end as i64 - r.pos as i64));
    }
    Ok(())
}

/// `(record index, message)` of the first invalid record of a v2 records payload, or None.
#[pyfunction]
fn validate_records(py: Python<'_>, payload: PyBuffer<u8>, records_count: i64) -> PyResult<Option<(i64, String)>> {
    if !payload.is_c_contiguous() {
        return Err(pyo3::exceptions::PyValueError::new_err("the payload must be a contiguous buffer"));
    }
    let data = unsafe { std::slice::from_raw_parts(payload.buf_ptr() as *const u8, payload.len_bytes()) };
    let _ = py;
    Ok(check(data, records_count))
}

/// One record's fields the log cleaner needs: offset delta, key span (None when null), whether the
/// value is null, and the record's byte span (length prefix included).
struct Span {
    offset_delta: i64,
    timestamp_delta: i64,
    key: Option<(usize, usize)>,
    null_value: bool,
    start: usize,
    end: usize,
}

fn scan(buf: &[u8]) -> Check<Vec<Span>> {
    let end = buf.len();
    let mut r = Reader { buf, pos: 0 };
    let mut out = Vec::new();
    while r.pos < end {
        let start = r.pos;
        let length = r.varint(end, 5, "record length")?;
        if length <= 0 || (length as usize) > end - r.pos {
            return Err(format!("record length {} overruns the batch", length));
        }
        let rec_end = r.pos + length as usize;
        r.pos += 1; // attributes
        let timestamp_delta = r.varint(rec_end, 10, "timestamp delta")?;
        let offset_delta = r.varint(rec_end, 5, "offset delta")?;
        let key_len = r.varint(rec_end, 5, "key length")?;
        let key = if key_len >= 0 {
            if (key_len as usize) > rec_end - r.pos {
                return Err(format!("key of {} bytes overruns its record", key_len));
            }
            let k = (r.pos, r.pos + key_len as usize);
            r.pos += key_len as usize;
            Some(k)
        } else {
            None
        };
        let value_len = r.varint(rec_end, 5, "value length")?;
        out.push(Span { offset_delta, timestamp_delta, key, null_value: value_len < 0, start, end: rec_end });
        r.pos = rec_end;
    }
    Ok(out)
}

type Spans<'py> = (Vec<Option<Bound<'py, PyBytes>>>, Vec<i64>, Vec<i64>, Vec<bool>, Vec<usize>, Vec<usize>);

/// The records of a (decompressed) v2 records payload as parallel lists: keys (bytes or None),
/// offset deltas, timestamp deltas, null-value flags, start and end positions. Raises ValueError
/// for a payload that does not parse. `protocol/record_filter.py` holds the Python reference.
#[pyfunction]
fn record_spans<'py>(py: Python<'py>, payload: PyBuffer<u8>) -> PyResult<Spans<'py>> {
    if !payload.is_c_contiguous() {
        return Err(pyo3::exceptions::PyValueError::new_err("the payload must be a contiguous buffer"));
    }
    let data = unsafe { std::slice::from_raw_parts(payload.buf_ptr() as *const u8, payload.len_bytes()) };
    let spans = scan(data).map_err(pyo3::exceptions::PyValueError::new_err)?;
    let n = spans.len();
    let (mut keys, mut offsets, mut stamps, mut nulls, mut starts, mut ends) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    for s in spans {
        keys.push(s.key.map(|(a, b)| PyBytes::new(py, &data[a..b])));
        offsets.push(s.offset_delta);
        stamps.push(s.timestamp_delta);
        nulls.push(s.null_value);
        starts.push(s.start);
        ends.push(s.end);
    }
    Ok((keys, offsets, stamps, nulls, starts, ends))
}

/// The keys are already hashes: use their low 64 bits as the table hash.
#[derive(Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ b as u64;
        }
    }
    fn write_u128(&mut self, i: u128) {
        self.0 = i as u64;
    }
}

/// The log cleaner's offset map (Kafka's `SkimpyOffsetMap`): a 128-bit hash of each key (two
/// SipHash-1-3 digests with this process's random keys; the map lives for one cleaning in one
/// process) -> the key's latest offset, at most `capacity` entries, about 24 bytes each plus the
/// table's slack. `storage/cleaner/offset_map.py` holds the Python reference.
#[pyclass]
struct OffsetMap {
    map: HashMap<u128, i64, BuildHasherDefault<IdHasher>>,
    capacity: usize,
    seeds: (RandomState, RandomState),
    latest_offset: i64,
}

impl OffsetMap {
    fn digest(&self, key: &[u8]) -> u128 {
        let mut a = self.seeds.0.build_hasher();
        a.write(key);
        let mut b = self.seeds.1.build_hasher();
        b.write(key);
        ((a.finish() as u128) << 64) | b.finish() as u128
    }
}

fn payload_slice(payload: &PyBuffer<u8>) -> PyResult<&[u8]> {
    if !payload.is_c_contiguous() {
        return Err(pyo3::exceptions::PyValueError::new_err("the payload must be a contiguous buffer"));
    }
    Ok(unsafe { std::slice::from_raw_parts(payload.buf_ptr() as *const u8, payload.len_bytes()) })
}

#[pymethods]
impl OffsetMap {
    #[new]
    fn new(capacity: usize) -> PyResult<Self> {
        if capacity < 1 {
            return Err(pyo3::exceptions::PyValueError::new_err("an offset map needs room for at least one key"));
        }
        Ok(OffsetMap {
            map: HashMap::with_capacity_and_hasher(capacity.min(1 << 16), BuildHasherDefault::default()),
            capacity,
            seeds: (RandomState::new(), RandomState::new()),
            latest_offset: -1,
        })
    }

    fn __len__(&self) -> usize {
        self.map.len()
    }

    #[getter]
    fn capacity(&self) -> usize {
        self.capacity
    }

    #[getter]
    fn latest_offset(&self) -> i64 {
        self.latest_offset
    }

    fn room(&self) -> usize {
        self.capacity - self.map.len()
    }

    /// Record `offset` as `key`'s latest; OverflowError when a new key does not fit.
    fn put(&mut self, key: &[u8], offset: i64) -> PyResult<()> {
        let d = self.digest(key);
        if !self.map.contains_key(&d) && self.map.len() >= self.capacity {
            return Err(pyo3::exceptions::PyOverflowError::new_err(format!(
                "the offset map is full ({} keys)",
                self.capacity
            )));
        }
        self.map.insert(d, offset);
        self.latest_offset = self.latest_offset.max(offset);
        Ok(())
    }

    fn get(&self, key: &[u8]) -> i64 {
        *self.map.get(&self.digest(key)).unwrap_or(&-1)
    }

    /// `put` every keyed record of a (decompressed) records payload whose base offset is
    /// `base_offset`; ValueError for a payload that does not parse.
    fn put_batch(&mut self, payload: PyBuffer<u8>, base_offset: i64) -> PyResult<()> {
        let data = payload_slice(&payload)?;
        let spans = scan(data).map_err(pyo3::exceptions::PyValueError::new_err)?;
        for s in spans {
            if let Some((a, b)) = s.key {
                self.put(&data[a..b], base_offset + s.offset_delta)?;
            }
        }
        Ok(())
    }

    /// Indexes of the records a cleaning keeps (a key, no later offset in the map, and for a
    /// tombstone `retain_deletes`), or None when it keeps them all.
    fn kept(&self, payload: PyBuffer<u8>, base_offset: i64, retain_deletes: bool) -> PyResult<Option<Vec<usize>>> {
        let data = payload_slice(&payload)?;
        let spans = scan(data).map_err(pyo3::exceptions::PyValueError::new_err)?;
        let n = spans.len();
        let mut out = Vec::with_capacity(n);
        for (i, s) in spans.iter().enumerate() {
            if let Some((a, b)) = s.key {
                let latest = *self.map.get(&self.digest(&data[a..b])).unwrap_or(&-1);
                if latest <= base_offset + s.offset_delta && (retain_deletes || !s.null_value) {
                    out.push(i);
                }
            }
        }
        Ok(if out.len() == n { None } else { Some(out) })
    }
}

#[pymodule]
fn minikafka_native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(validate_records, m)?)?;
    m.add_function(wrap_pyfunction!(record_spans, m)?)?;
    m.add_class::<OffsetMap>()?;
    m.add_class::<columns::ColumnBuilder>()?;
    encode::register(m)?;
    requests::register(m)?;
    responses::register(m)?;
    verify::register(m)?;
    Ok(())
}
