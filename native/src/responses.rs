//! Produce (key 0) v3-9 and Fetch (key 1) v4-12 responses encoded, compiled (issue 48).
//!
//! `encode_produce_response(version, correlation_id, body)` and `encode_fetch_response(...)` give
//! the frame (int32 size prefix included) as the list of buffers `protocol/produce_codec.py` and
//! `protocol/fetch_codec.py` give, their Python references: bytearrays, with Fetch record blobs of
//! 32 KiB or more referenced rather than copied, or None to leave the body to the generic encoder
//! (the same shapes: a Produce partition with record errors or an error message, a Fetch body or
//! struct with other keys than the fast path writes, values out of their field's range, strings
//! that do not encode). Bodies are dicts, as the broker builds them; anything else (a non-dict
//! mapping) also goes the generic way. Property tests hold the three encoders equal.
//!
//! Wire formats: Kafka's ProduceResponse.json, FetchResponse.json (flexible from Produce v9 /
//! Fetch v12: compact lengths, N+1 as an unsigned varint, and empty tag sections).

use pyo3::buffer::PyBuffer;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyDict, PyList, PyMemoryView, PyString};

const BY_REFERENCE: usize = 32768;

/// What an encode step gives: Ok(None) leaves the body to the generic encoder.
type Step<T> = PyResult<Option<T>>;

macro_rules! want {
    ($e:expr) => {
        match $e {
            Some(v) => v,
            None => return Ok(None),
        }
    };
}

/// An integer field as `struct.pack` takes it: None when it is not an integer or out of range.
fn int<'py, T: for<'a> FromPyObject<'a, 'py>>(value: &Bound<'py, PyAny>) -> Option<T> {
    value.extract::<T>().ok()
}

/// `container[key]`, None when it raises (a dict's item looked up directly).
fn item<'py>(container: &Bound<'py, PyAny>, key: &Bound<'py, PyString>) -> Option<Bound<'py, PyAny>> {
    match container.cast::<PyDict>() {
        Ok(d) => d.get_item(key).ok().flatten(),
        Err(_) => container.get_item(key).ok(),
    }
}

fn field<'py, T: for<'a> FromPyObject<'a, 'py>>(container: &Bound<'py, PyAny>, key: &Bound<'py, PyString>) -> Option<T> {
    int(&item(container, key)?)
}

fn write_length(out: &mut Vec<u8>, n: i64, flexible: bool, string: bool) {
    if flexible {
        let mut n = (n + 1) as u64;
        while n > 0x7f {
            out.push((n & 0x7f) as u8 | 0x80);
            n >>= 7;
        }
        out.push(n as u8);
    } else if string {
        out.extend_from_slice(&(n as i16).to_be_bytes());
    } else {
        out.extend_from_slice(&(n as i32).to_be_bytes());
    }
}

/// A string field as `value.encode("utf-8")`: None for a non-str or one with lone surrogates.
fn write_string(out: &mut Vec<u8>, value: &Bound<'_, PyAny>, flexible: bool) -> Option<()> {
    let s = value.cast::<PyString>().ok()?.to_str().ok()?;
    if !flexible && s.len() > i16::MAX as usize {
        return None; // struct.pack(">h") refuses it
    }
    write_length(out, s.len() as i64, flexible, true);
    out.extend_from_slice(s.as_bytes());
    Some(())
}

/// A dict holding exactly `keys` (Python's `d.keys() != frozenset(keys)`).
fn has_exactly(value: &Bound<'_, PyAny>, keys: &[&Bound<'_, PyString>]) -> Option<()> {
    let d = value.cast::<PyDict>().ok()?;
    if d.len() != keys.len() {
        return None;
    }
    for k in keys {
        if !d.contains(k).ok()? {
            return None;
        }
    }
    Some(())
}

/// The frame's buffers: bytearrays between referenced record blobs, the size prefix filled in.
struct Parts<'py> {
    py: Python<'py>,
    done: Vec<Bound<'py, PyAny>>,
    out: Vec<u8>,
    size: usize,
}

impl<'py> Parts<'py> {
    fn new(py: Python<'py>) -> Self {
        Parts { py, done: Vec::new(), out: vec![0; 4], size: 0 }
    }

    fn flush(&mut self) {
        if !self.out.is_empty() {
            self.size += self.out.len();
            self.done.push(PyByteArray::new(self.py, &self.out).into_any());
            self.out.clear();
        }
    }

    fn reference(&mut self, blob: Bound<'py, PyAny>, n: usize) {
        self.flush();
        self.size += n;
        self.done.push(blob);
    }

    fn finish(mut self) -> PyResult<Bound<'py, PyList>> {
        self.flush();
        let size = ((self.size - 4) as i32).to_be_bytes();
        let first = self.done[0].cast::<PyByteArray>()?;
        unsafe { first.as_bytes_mut()[..4].copy_from_slice(&size) };
        PyList::new(self.py, self.done)
    }
}

/// A Produce v3-9 response, as `produce_codec.encode_response` gives it, or None.
#[pyfunction]
fn encode_produce_response<'py>(py: Python<'py>, version: i16, correlation_id: i32, body: &Bound<'py, PyAny>) -> Step<Bound<'py, PyList>> {
    if !(3..=9).contains(&version) {
        return Ok(None);
    }
    let flexible = version >= 9;
    let mut parts = Parts::new(py);
    let out = &mut parts.out;
    out.extend_from_slice(&correlation_id.to_be_bytes());
    if flexible {
        out.push(0);
    }
    let responses = want!(item(body, intern!(py, "responses")));
    write_length(out, want!(responses.len().ok()) as i64, flexible, false);
    for topic in want!(responses.try_iter().ok()) {
        let topic = topic?;
        want!(write_string(out, &want!(item(&topic, intern!(py, "name"))), flexible));
        let partitions = want!(item(&topic, intern!(py, "partition_responses")));
        write_length(out, want!(partitions.len().ok()) as i64, flexible, false);
        for p in want!(partitions.try_iter().ok()) {
            let p = p?;
            let d = want!(p.cast::<PyDict>().ok());
            if let Some(errors) = d.get_item(intern!(py, "record_errors"))? {
                if errors.is_truthy()? {
                    return Ok(None); // KIP-467 details: the generic encoder writes them
                }
            }
            if let Some(message) = d.get_item(intern!(py, "error_message"))? {
                if !message.is_none() {
                    return Ok(None);
                }
            }
            out.extend_from_slice(&want!(field::<i32>(&p, intern!(py, "index"))).to_be_bytes());
            out.extend_from_slice(&want!(field::<i16>(&p, intern!(py, "error_code"))).to_be_bytes());
            out.extend_from_slice(&want!(field::<i64>(&p, intern!(py, "base_offset"))).to_be_bytes());
            out.extend_from_slice(&want!(field::<i64>(&p, intern!(py, "log_append_time_ms"))).to_be_bytes());
            if version >= 5 {
                out.extend_from_slice(&want!(field::<i64>(&p, intern!(py, "log_start_offset"))).to_be_bytes());
            }
            if version >= 8 {
                // no record errors, a null error message (and, flexible, no tags)
                out.extend_from_slice(if flexible { b"\x01\x00\x00" } else { b"\x00\x00\x00\x00\xff\xff" });
            }
        }
        if flexible {
            out.push(0);
        }
    }
    let throttle = match body.cast::<PyDict>() {
        Ok(d) => match d.get_item(intern!(py, "throttle_time_ms"))? {
            Some(v) => want!(int::<i32>(&v)),
            None => 0,
        },
        Err(_) => return Ok(None),
    };
    out.extend_from_slice(&throttle.to_be_bytes());
    if flexible {
        out.push(0);
    }
    Ok(Some(parts.finish()?))
}

/// A Fetch v4-12 response, as `fetch_codec.encode_response` gives it, or None.
#[pyfunction]
fn encode_fetch_response<'py>(py: Python<'py>, version: i16, correlation_id: i32, body: &Bound<'py, PyAny>) -> Step<Bound<'py, PyList>> {
    let body_keys = [
        intern!(py, "throttle_time_ms"),
        intern!(py, "error_code"),
        intern!(py, "session_id"),
        intern!(py, "responses"),
    ];
    if !(4..=12).contains(&version) || has_exactly(body, &body_keys).is_none() {
        return Ok(None);
    }
    let topic_keys = [intern!(py, "topic"), intern!(py, "partitions")];
    let partition_keys = [
        intern!(py, "partition_index"),
        intern!(py, "error_code"),
        intern!(py, "high_watermark"),
        intern!(py, "last_stable_offset"),
        intern!(py, "log_start_offset"),
        intern!(py, "aborted_transactions"),
        intern!(py, "preferred_read_replica"),
        intern!(py, "records"),
    ];
    let flexible = version >= 12;
    let mut parts = Parts::new(py);
    parts.out.extend_from_slice(&correlation_id.to_be_bytes());
    if flexible {
        parts.out.push(0);
    }
    parts.out.extend_from_slice(&want!(field::<i32>(body, intern!(py, "throttle_time_ms"))).to_be_bytes());
    if version >= 7 {
        parts.out.extend_from_slice(&want!(field::<i16>(body, intern!(py, "error_code"))).to_be_bytes());
        parts.out.extend_from_slice(&want!(field::<i32>(body, intern!(py, "session_id"))).to_be_bytes());
    }
    let responses = want!(item(body, intern!(py, "responses")));
    write_length(&mut parts.out, want!(responses.len().ok()) as i64, flexible, false);
    for topic in want!(responses.try_iter().ok()) {
        let topic = topic?;
        want!(has_exactly(&topic, &topic_keys));
        want!(write_string(&mut parts.out, &want!(item(&topic, intern!(py, "topic"))), flexible));
        let partitions = want!(item(&topic, intern!(py, "partitions")));
        write_length(&mut parts.out, want!(partitions.len().ok()) as i64, flexible, false);
        for p in want!(partitions.try_iter().ok()) {
            let p = p?;
            want!(has_exactly(&p, &partition_keys));
            let out = &mut parts.out;
            out.extend_from_slice(&want!(field::<i32>(&p, intern!(py, "partition_index"))).to_be_bytes());
            out.extend_from_slice(&want!(field::<i16>(&p, intern!(py, "error_code"))).to_be_bytes());
            out.extend_from_slice(&want!(field::<i64>(&p, intern!(py, "high_watermark"))).to_be_bytes());
            out.extend_from_slice(&want!(field::<i64>(&p, intern!(py, "last_stable_offset"))).to_be_bytes());
            if version >= 5 {
                out.extend_from_slice(&want!(field::<i64>(&p, intern!(py, "log_start_offset"))).to_be_bytes());
            }
            let aborted = want!(item(&p, intern!(py, "aborted_transactions")));
            if aborted.is_none() {
                write_length(out, -1, flexible, false);
            } else {
                write_length(out, want!(aborted.len().ok()) as i64, flexible, false);
                for t in want!(aborted.try_iter().ok()) {
                    let t = t?;
                    out.extend_from_slice(&want!(field::<i64>(&t, intern!(py, "producer_id"))).to_be_bytes());
                    out.extend_from_slice(&want!(field::<i64>(&t, intern!(py, "first_offset"))).to_be_bytes());
                    if flexible {
                        out.push(0);
                    }
                }
            }
            if version >= 11 {
                out.extend_from_slice(&want!(field::<i32>(&p, intern!(py, "preferred_read_replica"))).to_be_bytes());
            }
            let records = want!(item(&p, intern!(py, "records")));
            if records.is_none() {
                write_length(out, -1, flexible, false);
            } else if let Ok(bytes) = records.cast::<PyBytes>() {
                let data = bytes.as_bytes();
                write_length(out, data.len() as i64, flexible, false);
                if data.len() >= BY_REFERENCE {
                    let n = data.len();
                    parts.reference(records, n);
                } else {
                    out.extend_from_slice(data);
                }
            } else {
                // a memoryview counts its bytes (nbytes), anything else its len()
                let view = records.is_instance_of::<PyMemoryView>();
                let buffer = if view || want!(records.len().ok()) < BY_REFERENCE {
                    let b = want!(PyBuffer::<u8>::get(&records).ok());
                    if !b.is_c_contiguous() {
                        return Ok(None);
                    }
                    Some(b)
                } else {
                    None
                };
                let n = match &buffer {
                    Some(b) if view => b.len_bytes(),
                    _ => want!(records.len().ok()),
                };
                write_length(out, n as i64, flexible, false);
                if n >= BY_REFERENCE {
                    parts.reference(records, n);
                } else {
                    let b = buffer.as_ref().unwrap();
                    if b.len_bytes() != n {
                        return Ok(None);
                    }
                    // the export held by `b` keeps these bytes in place while they are copied
                    out.extend_from_slice(unsafe { std::slice::from_raw_parts(b.buf_ptr() as *const u8, n) });
                }
            }
            if flexible {
                parts.out.push(0);
            }
        }
        if flexible {
            parts.out.push(0);
        }
    }
    if flexible {
        parts.out.push(0);
    }
    Ok(Some(parts.finish()?))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(encode_produce_response, m)?)?;
    m.add_function(wrap_pyfunction!(encode_fetch_response, m)?)?;
    Ok(())
}
