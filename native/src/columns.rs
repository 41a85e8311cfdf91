//! The records of v2 batches decoded straight into Arrow's column layout (validity bitmaps, int32
//! offsets, data bytes), for the Spark source: no Python object per record.
//!
//! `ColumnBuilder(headers)` accumulates the records of many batches; `add(payload, base_offset,
//! base_timestamp, records_count, lo, hi)` parses one (decompressed) records payload as
//! `DefaultRecord.readFrom` does and appends the records whose offset is in [lo, hi); `finish()`
//! returns the buffers and starts over. `protocol/arrow_columns.py` holds the Python reference; a
//! property test holds the two equal.

use pyo3::buffer::PyBuffer;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use crate::{Check, Reader};

/// A nullable binary column: validity per row, int32 end offsets, data.
#[derive(Default)]
struct Binary {
    valid: Vec<bool>,
    ends: Vec<i32>,
    data: Vec<u8>,
}

impl Binary {
    fn len(&self) -> usize {
        self.ends.len()
    }

    fn push(&mut self, value: Option<&[u8]>) -> Check<()> {
        if let Some(v) = value {
            self.data.extend_from_slice(v);
            if self.data.len() > i32::MAX as usize {
                return Err("a column of one Arrow batch would pass 2 GiB".to_string());
            }
        }
        self.valid.push(value.is_some());
        self.ends.push(self.data.len() as i32);
        Ok(())
    }

    fn truncate(&mut self, rows: usize) {
        self.valid.truncate(rows);
        self.ends.truncate(rows);
        self.data.truncate(self.ends.last().copied().unwrap_or(0) as usize);
    }

    /// (validity bitmap or None when no null, offsets, data, null count)
    fn take<'py>(&mut self, py: Python<'py>) -> (Option<Bound<'py, PyBytes>>, Bound<'py, PyBytes>, Bound<'py, PyBytes>, usize) {
        let nulls = self.valid.iter().filter(|v| !**v).count();
        let bitmap = if nulls == 0 { None } else { Some(PyBytes::new(py, &pack(&self.valid))) };
        let mut offsets = Vec::with_capacity(4 * (self.ends.len() + 1));
        offsets.extend_from_slice(&0i32.to_le_bytes());
        for e in &self.ends {
            offsets.extend_from_slice(&e.to_le_bytes());
        }
        let out = (bitmap, PyBytes::new(py, &offsets), PyBytes::new(py, &self.data), nulls);
        *self = Binary::default();
        out
    }
}

/// Arrow's validity bitmap: bit i of byte i / 8 (least significant first) set when row i is valid.
fn pack(valid: &[bool]) -> Vec<u8> {
    let mut out = vec![0u8; valid.len().div_ceil(8)];
    for (i, v) in valid.iter().enumerate() {
        if *v {
            out[i / 8] |= 1 << (i % 8);
        }
    }
    out
}

fn le_bytes<'py>(py: Python<'py>, values: &[i64]) -> Bound<'py, PyBytes> {
    let mut out = Vec::with_capacity(8 * values.len());
    for v in values {
        out.extend_from_slice(&v.to_le_bytes());
    }
    PyBytes::new(py, &out)
}

fn blob<'a>(r: &mut Reader<'a>, end: usize, nullable: bool, what: &str) -> Check<Option<&'a [u8]>> {
    let n = r.varint(end, 5, what)?;
    if n < -1 || (n == -1 && !nullable) {
        return Err(format!("invalid {} length {}", what, n));
    }
    if n == -1 {
        return Ok(None);
    }
    if (n as usize) > end - r.pos {
        return Err(format!("{} of {} bytes overruns its record", what, n));
    }
    let start = r.pos;
    r.pos += n as usize;
    Ok(Some(&r.buf[start..r.pos]))
}

#[pyclass]
pub struct ColumnBuilder {
    with_headers: bool,
    offsets: Vec<i64>,
    timestamps: Vec<i64>, // microseconds, as Spark's timestamp column
    keys: Binary,
    values: Binary,
    header_ends: Vec<i32>, // per row: the end of its headers in the header columns
    header_keys: Binary,
    header_values: Binary,
}

impl ColumnBuilder {
    fn rows(&self) -> usize {
        self.offsets.len()
    }

    fn truncate(&mut self, rows: usize) {
        self.offsets.truncate(rows);
        self.timestamps.truncate(rows);
        self.keys.truncate(rows);
        self.values.truncate(rows);
        if self.with_headers {
            self.header_ends.truncate(rows);
            let headers = self.header_ends.last().copied().unwrap_or(0) as usize;
            self.header_keys.truncate(headers);
            self.header_values.truncate(headers);
        }
    }

    fn parse(&mut self, buf: &[u8], base_offset: i64, base_timestamp: i64, count: i64, lo: i64, hi: i64) -> Check<(i64, i64, i64)> {
        let end = buf.len();
        let mut r = Reader { buf, pos: 0 };
        let (mut index, mut added, mut first, mut last) = (0i64, 0i64, -1i64, -1i64);
        while r.pos < end {
            if index >= count {
                return Err(format!("more records than the header's records_count {}", count));
            }
            let length = r.varint(end, 5, "record length")?;
            if length < 0 || (length as usize) > end - r.pos {
                return Err(format!("record length {} overruns the batch", length));
            }
            if length == 0 {
                return Err("empty record".to_string());
            }
            let rec_end = r.pos + length as usize;
            r.pos += 1; // attributes
            let ts_delta = r.varint(rec_end, 10, "timestamp delta")?;
            let offset = base_offset + r.varint(rec_end, 5, "offset delta")?;
            let key = blob(&mut r, rec_end, true, "key")?;
            let value = blob(&mut r, rec_end, true, "value")?;
            let n_headers = r.varint(rec_end, 5, "header count")?;
            if n_headers < 0 || n_headers > (rec_end - r.pos) as i64 {
                return Err(format!("invalid header count {}", n_headers));
            }
            let keep = lo <= offset && offset < hi;
            for _ in 0..n_headers {
                let hkey = blob(&mut r, rec_end, true, "header key")?.ok_or("null header key")?;
                if std::str::from_utf8(hkey).is_err() {
                    return Err("header key is not UTF-8".to_string());
                }
                let hvalue = blob(&mut r, rec_end, true, "header value")?;
                if keep && self.with_headers {
                    self.header_keys.push(Some(hkey))?;
                    self.header_values.push(hvalue)?;
                }
            }
            if r.pos != rec_end {
                return Err(format!("record has {} bytes beyond its fields", rec_end as i64 - r.pos as i64));
            }
            if keep {
                self.offsets.push(offset);
                self.timestamps.push((base_timestamp + ts_delta).saturating_mul(1000));
                self.keys.push(key)?;
                self.values.push(value)?;
                if self.with_headers {
                    self.header_ends.push(self.header_keys.len() as i32);
                }
                if added == 0 {
                    first = offset;
                }
                last = offset;
                added += 1;
            }
            index += 1;
        }
        if index != count {
            return Err(format!("header says {} records, payload holds {}", count, index));
        }
        Ok((added, first, last))
    }
}

#[pymethods]
impl ColumnBuilder {
    #[new]
    #[pyo3(signature = (headers=false))]
    fn new(headers: bool) -> Self {
        ColumnBuilder {
            with_headers: headers,
            offsets: Vec::new(),
            timestamps: Vec::new(),
            keys: Binary::default(),
            values: Binary::default(),
            header_ends: Vec::new(),
            header_keys: Binary::default(),
            header_values: Binary::default(),
        }
    }

    fn __len__(&self) -> usize {
        self.rows()
    }

    /// Bytes of keys, values and headers held (so a caller can finish before Arrow's int32
    /// offsets overflow).
    fn data_bytes(&self) -> usize {
        self.keys.data.len() + self.values.data.len() + self.header_keys.data.len() + self.header_values.data.len()
    }

    /// Append the records of one payload with lo <= offset < hi: (added, first offset, last
    /// offset), -1 for none. ValueError for a payload that does not parse, leaving the builder
    /// as it was.
    fn add(&mut self, payload: PyBuffer<u8>, base_offset: i64, base_timestamp: i64, records_count: i64, lo: i64, hi: i64) -> PyResult<(i64, i64, i64)> {
        if !payload.is_c_contiguous() {
            return Err(PyValueError::new_err("the payload must be a contiguous buffer"));
        }
        let data = unsafe { std::slice::from_raw_parts(payload.buf_ptr() as *const u8, payload.len_bytes()) };
        let rows = self.rows();
        match self.parse(data, base_offset, base_timestamp, records_count, lo, hi) {
            Ok(found) => Ok(found),
            Err(e) => {
                self.truncate(rows);
                Err(PyValueError::new_err(e))
            }
        }
    }

    /// The columns built so far, as a dict of bytes in Arrow's layout (`offset` and `timestamp`:
    /// little-endian int64; `key`, `value`: (validity or None, int32 offsets, data, null count);
    /// `headers`, when asked for: (list offsets, key column, value column)), and start over.
    fn finish<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let out = PyDict::new(py);
        out.set_item("rows", self.rows())?;
        out.set_item("offset", le_bytes(py, &self.offsets))?;
        out.set_item("timestamp", le_bytes(py, &self.timestamps))?;
        out.set_item("key", self.keys.take(py))?;
        out.set_item("value", self.values.take(py))?;
        if self.with_headers {
            let mut ends = Vec::with_capacity(4 * (self.header_ends.len() + 1));
            ends.extend_from_slice(&0i32.to_le_bytes());
            for e in &self.header_ends {
                ends.extend_from_slice(&e.to_le_bytes());
            }
            let keys = self.header_keys.take(py);
            let values = self.header_values.take(py);
            out.set_item("headers", (PyBytes::new(py, &ends), keys, values))?;
        }
        self.offsets.clear();
        self.timestamps.clear();
        self.header_ends.clear();
        Ok(out)
    }
}
