//! Batches read from a segment file, checked in one pass (issue 48).
//!
//! `batches_valid(data, fetch_offset, segment_base, next_base)` is `storage.log.Log._verify`'s
//! rules, compiled: every RecordBatch v2 in `data` is whole (header fields as
//! `protocol.record_batch.read_header` checks them), its CRC-32C (Castagnoli, from the attributes
//! to the batch's end) matches the stored one, the first batch holds `fetch_offset` and starts at
//! or after `segment_base`, every later one starts at or after the offset following the previous
//! one, and none ends at or beyond `next_base` (the next segment's base offset; None: the last
//! segment). True when all hold; False when any does not, and the caller then runs the Python
//! reference, which raises the error that says what is wrong. A property test holds the two
//! equal on valid and damaged reads.
//!
//! Wire format: Kafka's RecordBatch v2 (DefaultRecordBatch.java): baseOffset int64, batchLength
//! int32, partitionLeaderEpoch int32, magic int8, crc uint32, attributes int16, lastOffsetDelta
//! int32, ... recordsCount int32 at byte 57; 61 bytes in all.

use pyo3::buffer::PyBuffer;
use pyo3::prelude::*;

const HEADER_SIZE: usize = 61;
const LOG_OVERHEAD: usize = 12; // baseOffset and batchLength
const CRC_START: usize = 21;
const MAGIC: u8 = 2;

/// CRC-32C (reflected polynomial 0x82F63B78), one table; the SSE 4.2 instruction when the CPU
/// has it.
fn crc32c(data: &[u8]) -> u32 {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("sse4.2") {
            // SAFETY: the feature was detected at run time
            return unsafe { crc32c_sse42(data) };
        }
    }
    crc32c_table(data)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse4.2")]
unsafe fn crc32c_sse42(data: &[u8]) -> u32 {
    use std::arch::x86_64::{_mm_crc32_u64, _mm_crc32_u8};
    let mut crc: u64 = 0xFFFF_FFFF;
    let mut chunks = data.chunks_exact(8);
    for chunk in &mut chunks {
        crc = _mm_crc32_u64(crc, u64::from_le_bytes(chunk.try_into().unwrap()));
    }
    let mut crc = crc as u32;
    for &b in chunks.remainder() {
        crc = _mm_crc32_u8(crc, b);
    }
    !crc
}

fn crc32c_table(data: &[u8]) -> u32 {
    static TABLE: std::sync::OnceLock<[u32; 256]> = std::sync::OnceLock::new();
    let table = TABLE.get_or_init(|| {
        let mut t = [0u32; 256];
        for (i, entry) in t.iter_mut().enumerate() {
            let mut c = i as u32;
            for _ in 0..8 {
                c = if c & 1 != 0 { (c >> 1) ^ 0x82F6_3B78 } else { c >> 1 };
            }
            *entry = c;
        }
        t
    });
    let mut crc = 0xFFFF_FFFFu32;
    for &b in data {
        crc = table[((crc ^ b as u32) & 0xFF) as usize] ^ (crc >> 8);
    }
    !crc
}

fn be_i64(buf: &[u8], at: usize) -> i64 {
    i64::from_be_bytes(buf[at..at + 8].try_into().unwrap())
}

fn be_i32(buf: &[u8], at: usize) -> i32 {
    i32::from_be_bytes(buf[at..at + 4].try_into().unwrap())
}

/// Whether every batch of `buf` passes `Log._verify`'s rules (see the module doc).
fn batches_ok(buf: &[u8], fetch_offset: i64, segment_base: i64, next_base: Option<i64>) -> bool {
    let end = buf.len();
    let mut pos = 0usize;
    let mut expected: Option<i64> = None;
    while pos < end {
        let left = end - pos;
        if left < HEADER_SIZE || buf[pos + 16] != MAGIC {
            return false;
        }
        let base = be_i64(buf, pos);
        let batch_length = be_i32(buf, pos + 8);
        if batch_length < (HEADER_SIZE - LOG_OVERHEAD) as i32 {
            return false;
        }
        let size = batch_length as usize + LOG_OVERHEAD;
        if size > left {
            return false;
        }
        let last_offset_delta = be_i32(buf, pos + 23);
        let records_count = be_i32(buf, pos + 57);
        if records_count < 0 || last_offset_delta < 0 {
            return false;
        }
        let Some(last) = base.checked_add(last_offset_delta as i64) else {
            return false;
        };
        let floor = match expected {
            None => {
                if last < fetch_offset || base < segment_base {
                    return false;
                }
                base
            }
            Some(e) => e,
        };
        if base < floor || next_base.is_some_and(|limit| last >= limit) {
            return false;
        }
        let stored = u32::from_be_bytes(buf[pos + 17..pos + 21].try_into().unwrap());
        if crc32c(&buf[pos + CRC_START..pos + size]) != stored {
            return false;
        }
        let Some(next) = last.checked_add(1) else {
            return false;
        };
        expected = Some(next);
        pos += size;
    }
    true
}

/// `batches_valid(data, fetch_offset, segment_base, next_base) -> bool`: see the module doc.
/// Raises ValueError for a buffer that is not contiguous bytes.
#[pyfunction]
#[pyo3(signature = (data, fetch_offset, segment_base, next_base=None))]
fn batches_valid(data: PyBuffer<u8>, fetch_offset: i64, segment_base: i64, next_base: Option<i64>) -> PyResult<bool> {
    if !data.is_c_contiguous() {
        return Err(pyo3::exceptions::PyValueError::new_err("the data must be a contiguous buffer"));
    }
    // SAFETY: a contiguous buffer of len_bytes() bytes, held by `data` for this call
    let buf = unsafe { std::slice::from_raw_parts(data.buf_ptr() as *const u8, data.len_bytes()) };
    Ok(batches_ok(buf, fetch_offset, segment_base, next_base))
}

/// `crc32c(data) -> int`: the CRC-32C of `data` (for tests against the `crc32c` package).
#[pyfunction]
#[pyo3(name = "crc32c")]
fn crc32c_py(data: PyBuffer<u8>) -> PyResult<u32> {
    if !data.is_c_contiguous() {
        return Err(pyo3::exceptions::PyValueError::new_err("the data must be a contiguous buffer"));
    }
    // SAFETY: as in batches_valid
    let buf = unsafe { std::slice::from_raw_parts(data.buf_ptr() as *const u8, data.len_bytes()) };
    Ok(crc32c(buf))
}

/// `crc32c_portable(data) -> int`: the table implementation, whatever the CPU (for tests).
#[pyfunction]
fn crc32c_portable(data: &[u8]) -> u32 {
    crc32c_table(data)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(batches_valid, m)?)?;
    m.add_function(wrap_pyfunction!(crc32c_py, m)?)?;
    m.add_function(wrap_pyfunction!(crc32c_portable, m)?)?;
    Ok(())
}
