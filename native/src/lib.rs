//! The per-record checks Kafka's broker makes of a client's v2 record batch (`DefaultRecord.readFrom`
//! and `LogValidator`), over the batch's records payload (decompressed when the batch is compressed).
//!
//! `validate_records(payload, records_count)` returns None when the payload is exactly
//! `records_count` well-formed records, else `(record index, message)` for the first bad record.
//! `protocol/record_validation.py` is the reference implementation: the same checks, in the same
//! order, with the same messages; a property test holds the two equal.

use pyo3::buffer::PyBuffer;
use pyo3::prelude::*;

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

#[pymodule]
fn minikafka_native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(validate_records, m)?)?;
    Ok(())
}
