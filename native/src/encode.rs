//! Rows of Arrow binary/string columns encoded as v2 records, for the Spark sink: no Python object
//! per row.
//!
//! A column arrives as `(validity or None, int32 offsets, data, array offset, length)`: pyarrow's buffers
//! of a `binary` or `string` array. `partition_rows(keys, values, explicit, partitions, sticky,
//! batch_size)` picks each row's partition as Kafka's default partitioner does (murmur2 of the key,
//! positive, modulo the partition count; a null key sticks to one partition until `batch_size`
//! bytes went to it, KIP-480); `encode_runs(keys, values, rows_partitions, max_bytes)` encodes the
//! rows of each partition, in row order, as record payloads of at most `max_bytes` (one record at
//! least). `protocol/arrow_encode.py` holds the Python reference; a property test holds them equal.

use pyo3::buffer::PyBuffer;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use std::collections::HashMap;

type Column = (Option<PyBuffer<u8>>, PyBuffer<u8>, PyBuffer<u8>, usize, usize);

fn slice(b: &PyBuffer<u8>) -> PyResult<&[u8]> {
    if !b.is_c_contiguous() {
        return Err(PyValueError::new_err("buffers must be contiguous"));
    }
    Ok(unsafe { std::slice::from_raw_parts(b.buf_ptr() as *const u8, b.len_bytes()) })
}

/// A column's rows as byte slices (None when null).
struct Binary<'a> {
    validity: Option<&'a [u8]>,
    offsets: &'a [u8],
    data: &'a [u8],
    offset: usize,
    length: usize,
}

impl<'a> Binary<'a> {
    fn of(c: &'a Column) -> PyResult<Self> {
        let b = Binary { validity: c.0.as_ref().map(slice).transpose()?, offsets: slice(&c.1)?, data: slice(&c.2)?, offset: c.3, length: c.4 };
        if 4 * (b.offset + b.length + 1) > b.offsets.len() || b.validity.is_some_and(|v| 8 * v.len() < b.offset + b.length) {
            return Err(PyValueError::new_err("a column's buffers are shorter than its length"));
        }
        Ok(b)
    }

    fn rows(&self) -> usize {
        self.length
    }

    fn end(&self, i: usize) -> usize {
        let p = 4 * i;
        i32::from_le_bytes([self.offsets[p], self.offsets[p + 1], self.offsets[p + 2], self.offsets[p + 3]]) as usize
    }

    fn get(&self, row: usize) -> PyResult<Option<&'a [u8]>> {
        let i = row + self.offset;
        if let Some(v) = self.validity {
            if v[i / 8] & (1 << (i % 8)) == 0 {
                return Ok(None);
            }
        }
        let (a, b) = (self.end(i), self.end(i + 1));
        if a > b || b > self.data.len() {
            return Err(PyValueError::new_err("a column's offsets overrun its data"));
        }
        Ok(Some(&self.data[a..b]))
    }
}

/// Kafka's `Utils.murmur2` (seed 0x9747b28c), as the Java producer's default partitioner uses.
pub fn murmur2(data: &[u8]) -> i32 {
    let m: u32 = 0x5bd1e995;
    let mut h: u32 = 0x9747b28c ^ (data.len() as u32);
    let chunks = data.chunks_exact(4);
    let tail = chunks.remainder();
    for c in chunks {
        let mut k = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        k = k.wrapping_mul(m);
        k ^= k >> 24;
        k = k.wrapping_mul(m);
        h = h.wrapping_mul(m);
        h ^= k;
    }
    match tail.len() {
        3 => {
            h ^= (tail[2] as u32) << 16;
            h ^= (tail[1] as u32) << 8;
            h ^= tail[0] as u32;
            h = h.wrapping_mul(m);
        }
        2 => {
            h ^= (tail[1] as u32) << 8;
            h ^= tail[0] as u32;
            h = h.wrapping_mul(m);
        }
        1 => {
            h ^= tail[0] as u32;
            h = h.wrapping_mul(m);
        }
        _ => {}
    }
    h ^= h >> 13;
    h = h.wrapping_mul(m);
    h ^= h >> 15;
    h as i32
}

fn varint(out: &mut Vec<u8>, value: i64) {
    let mut v = ((value << 1) ^ (value >> 63)) as u64;
    while v > 0x7f {
        out.push((v as u8 & 0x7f) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn varint_len(value: i64) -> usize {
    let mut v = ((value << 1) ^ (value >> 63)) as u64;
    let mut n = 1;
    while v > 0x7f {
        v >>= 7;
        n += 1;
    }
    n
}

fn blob(out: &mut Vec<u8>, b: Option<&[u8]>) {
    match b {
        None => varint(out, -1),
        Some(b) => {
            varint(out, b.len() as i64);
            out.extend_from_slice(b);
        }
    }
}

fn blob_len(b: Option<&[u8]>) -> usize {
    match b {
        None => 1,
        Some(b) => varint_len(b.len() as i64) + b.len(),
    }
}

/// Each row's partition (int32 little-endian) and the sticky state after them: `explicit` (an
/// int32 column's (validity, values, array offset)) wins where not null, then the key's murmur2,
/// then the sticky partition for null keys, which moves on (+1) once `batch_size` bytes of
/// values went to it. Returns (partitions, sticky partition, bytes sent to it).
#[pyfunction]
#[pyo3(signature = (keys, values, explicit, partitions, sticky, sticky_bytes, batch_size))]
fn partition_rows<'py>(
    py: Python<'py>,
    keys: Option<Column>,
    values: Column,
    explicit: Option<(Option<PyBuffer<u8>>, PyBuffer<u8>, usize)>,
    partitions: i32,
    sticky: i32,
    sticky_bytes: usize,
    batch_size: usize,
) -> PyResult<(Bound<'py, PyBytes>, i32, usize)> {
    if partitions <= 0 {
        return Err(PyValueError::new_err("a topic has at least one partition"));
    }
    let values = Binary::of(&values)?;
    let keys = keys.as_ref().map(Binary::of).transpose()?;
    if keys.as_ref().is_some_and(|k| k.rows() != values.rows()) {
        return Err(PyValueError::new_err("keys and values differ in length"));
    }
    let explicit = match &explicit {
        Some((v, data, off)) => Some((v.as_ref().map(slice).transpose()?, slice(data)?, *off)),
        None => None,
    };
    let n = values.rows();
    let (mut sticky, mut sticky_bytes) = (sticky.rem_euclid(partitions), sticky_bytes);
    let mut out = Vec::with_capacity(4 * n);
    for row in 0..n {
        let mut chosen: Option<i32> = None;
        if let Some((validity, data, off)) = explicit {
            let i = row + off;
            if validity.is_none_or(|v| v[i / 8] & (1 << (i % 8)) != 0) {
                let p = 4 * i;
                if p + 4 > data.len() {
                    return Err(PyValueError::new_err("the partition column is shorter than the values"));
                }
                chosen = Some(i32::from_le_bytes([data[p], data[p + 1], data[p + 2], data[p + 3]]));
            }
        }
        if chosen.is_none() {
            if let Some(key) = keys.as_ref().map(|k| k.get(row)).transpose()?.flatten() {
                chosen = Some((murmur2(key) & 0x7fffffff) % partitions);
            }
        }
        let p = match chosen {
            Some(p) => p,
            None => {
                if sticky_bytes >= batch_size {
                    sticky = (sticky + 1) % partitions;
                    sticky_bytes = 0;
                }
                sticky_bytes += values.get(row)?.map_or(0, |v| v.len());
                sticky
            }
        };
        out.extend_from_slice(&p.to_le_bytes());
    }
    Ok((PyBytes::new(py, &out), sticky, sticky_bytes))
}

/// The rows of each partition (in order of first appearance) encoded as record payloads of at
/// most `max_bytes` each (offset deltas from 0, timestamp deltas 0, no headers):
/// [(partition, payload, records, bytes of keys and values)].
#[pyfunction]
fn encode_runs<'py>(
    py: Python<'py>,
    keys: Option<Column>,
    values: Column,
    rows_partitions: PyBuffer<u8>,
    max_bytes: usize,
) -> PyResult<Vec<(i32, Bound<'py, PyBytes>, usize, usize)>> {
    let values = Binary::of(&values)?;
    let keys = keys.as_ref().map(Binary::of).transpose()?;
    if keys.as_ref().is_some_and(|k| k.rows() != values.rows()) {
        return Err(PyValueError::new_err("keys and values differ in length"));
    }
    let parts = slice(&rows_partitions)?;
    let n = values.rows();
    if parts.len() != 4 * n {
        return Err(PyValueError::new_err("one partition per row"));
    }
    // (partition, open payload, records, bytes); finished runs in `out`
    let mut open: Vec<(i32, Vec<u8>, usize, usize)> = Vec::new();
    let mut slots: HashMap<i32, usize> = HashMap::new(); // partition -> its index in `open`
    let mut out = Vec::new();
    for row in 0..n {
        let p = 4 * row;
        let partition = i32::from_le_bytes([parts[p], parts[p + 1], parts[p + 2], parts[p + 3]]);
        let key = keys.as_ref().map(|k| k.get(row)).transpose()?.flatten();
        let value = values.get(row)?;
        let slot = *slots.entry(partition).or_insert_with(|| {
            open.push((partition, Vec::new(), 0, 0));
            open.len() - 1
        });
        let run = &mut open[slot];
        let body = 1 + 1 + varint_len(run.2 as i64) + blob_len(key) + blob_len(value) + 1;
        if run.2 > 0 && run.1.len() + body + varint_len(body as i64) > max_bytes {
            out.push((run.0, PyBytes::new(py, &run.1), run.2, run.3));
            run.1.clear();
            run.2 = 0;
            run.3 = 0;
        }
        let body = 1 + 1 + varint_len(run.2 as i64) + blob_len(key) + blob_len(value) + 1;
        varint(&mut run.1, body as i64);
        run.1.push(0); // attributes
        varint(&mut run.1, 0); // timestamp delta
        varint(&mut run.1, run.2 as i64); // offset delta
        blob(&mut run.1, key);
        blob(&mut run.1, value);
        varint(&mut run.1, 0); // headers
        run.2 += 1;
        run.3 += key.map_or(0, |k| k.len()) + value.map_or(0, |v| v.len());
    }
    for run in open {
        if run.2 > 0 {
            out.push((run.0, PyBytes::new(py, &run.1), run.2, run.3));
        }
    }
    Ok(out)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(partition_rows, m)?)?;
    m.add_function(wrap_pyfunction!(encode_runs, m)?)?;
    Ok(())
}
