//! Produce (key 0) v3-9 and Fetch (key 1) v4-12 request frames decoded, compiled (issue 48).
//!
//! `RequestDecoder(field_dict, zero_uuid)` gives, for a request frame payload (no size prefix),
//! the `(header, body)` pair of `FieldDict`s the generic `construct` decoder gives, or None to leave
//! the frame to it. `protocol/produce_codec.py` and `protocol/fetch_codec.py` are the Python
//! references: the same shapes handled, the same None for everything else (tagged fields,
//! truncated or malformed frames, other keys and versions), `records` as memoryviews into the
//! frame, and strings decoded as Python's `str(b, "utf-8", "replace")` does. Property tests hold
//! the three (compiled, Python, generic) equal.
//!
//! Wire formats: Kafka's RequestHeader.json (v1, v2), ProduceRequest.json, FetchRequest.json
//! (flexible from Produce v9 / Fetch v12: compact lengths stored as N+1 in an unsigned varint,
//! and a tag section after the header, the body and every struct).

use pyo3::buffer::PyBuffer;
use pyo3::ffi;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyMemoryView, PySlice, PyType};

/// A cursor over a frame; every read past its end or of a shape the fast path does not take is
/// `None` (the frame then goes to the generic decoder, which raises what is wrong with it).
struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
    flexible: bool,
}

impl<'a> Cursor<'a> {
    fn take<const N: usize>(&mut self) -> Option<[u8; N]> {
        let end = self.pos.checked_add(N)?;
        let bytes: [u8; N] = self.buf.get(self.pos..end)?.try_into().ok()?;
        self.pos = end;
        Some(bytes)
    }

    fn i8(&mut self) -> Option<i8> {
        Some(i8::from_be_bytes(self.take::<1>()?))
    }

    fn i16(&mut self) -> Option<i16> {
        Some(i16::from_be_bytes(self.take::<2>()?))
    }

    fn i32(&mut self) -> Option<i32> {
        Some(i32::from_be_bytes(self.take::<4>()?))
    }

    fn i64(&mut self) -> Option<i64> {
        Some(i64::from_be_bytes(self.take::<8>()?))
    }

    /// An unsigned varint of at most 5 bytes.
    fn uvarint(&mut self) -> Option<i64> {
        let mut result: i64 = 0;
        let mut shift = 0;
        loop {
            let b = *self.buf.get(self.pos)?;
            self.pos += 1;
            result |= ((b & 0x7f) as i64) << shift;
            if b & 0x80 == 0 {
                return Some(result);
            }
            shift += 7;
            if shift > 28 {
                return None;
            }
        }
    }

    /// A length prefix, -1 for null: compact, or int16 (strings) / int32 (arrays, bytes).
    fn length(&mut self, string: bool) -> Option<i64> {
        if self.flexible {
            return Some(self.uvarint()? - 1);
        }
        if string {
            return Some(self.i16()? as i64);
        }
        Some(self.i32()? as i64)
    }

    /// An array length. Every element takes at least one byte, so a count beyond the bytes left
    /// cannot parse: refused before anything is allocated for it.
    fn count(&mut self) -> Option<usize> {
        let n = self.length(false)?;
        if n < 0 || n as usize > self.buf.len() - self.pos {
            return None;
        }
        Some(n as usize)
    }

    /// The span of the next `n` bytes.
    fn span(&mut self, n: i64) -> Option<(usize, usize)> {
        if n < 0 || n as usize > self.buf.len() - self.pos {
            return None;
        }
        let start = self.pos;
        self.pos += n as usize;
        Some((start, self.pos))
    }

    /// The end of a flexible struct: only an empty tag section goes the fast way.
    fn no_tags(&mut self) -> Option<()> {
        if self.flexible {
            if *self.buf.get(self.pos)? != 0 {
                return None;
            }
            self.pos += 1;
        }
        Some(())
    }
}

/// What a decode step gives: Ok(None) leaves the frame to the generic decoder; Err is a Python
/// error from building the result (memory, a failing FieldDict), never a verdict on the frame.
type Step<T> = PyResult<Option<T>>;

/// A decoded request: (header, body).
type Decoded<'py> = (Bound<'py, PyDict>, Bound<'py, PyDict>);

macro_rules! want {
    ($e:expr) => {
        match $e {
            Some(v) => v,
            None => return Ok(None),
        }
    };
}

/// Decodes Produce v3-9 and Fetch v4-12 request frames into the generic decoder's `FieldDict`s.
#[pyclass(frozen)]
pub struct RequestDecoder {
    field_dict: Py<PyType>,
    zero_uuid: Py<PyAny>,
}

struct Frame<'py, 'a> {
    py: Python<'py>,
    obj: &'a Bound<'py, PyAny>,
    view: Option<Bound<'py, PyAny>>,
}

impl<'py, 'a> Frame<'py, 'a> {
    /// `memoryview(frame)[start:end]`, the view made once per frame.
    fn slice(&mut self, (start, end): (usize, usize)) -> PyResult<Bound<'py, PyAny>> {
        if self.view.is_none() {
            self.view = Some(PyMemoryView::from(self.obj)?.into_any());
        }
        let slice = PySlice::new(self.py, start as isize, end as isize, 1);
        self.view.as_ref().unwrap().get_item(slice)
    }

    /// The bytes of `span` as `str(b, "utf-8", "replace")`.
    fn text(&self, buf: &[u8], (start, end): (usize, usize)) -> PyResult<Bound<'py, PyAny>> {
        let bytes = &buf[start..end];
        if let Ok(s) = std::str::from_utf8(bytes) {
            return Ok(pyo3::types::PyString::new(self.py, s).into_any());
        }
        // Python's own decoder, so invalid bytes are replaced exactly as the reference replaces them
        unsafe {
            let obj = ffi::PyUnicode_DecodeUTF8(bytes.as_ptr() as *const _, bytes.len() as ffi::Py_ssize_t, c"replace".as_ptr());
            Bound::from_owned_ptr_or_err(self.py, obj)
        }
    }

    /// A string (int16 or compact length); None (the Python object) for a nullable null.
    fn string(&self, c: &mut Cursor, nullable: bool) -> Step<Bound<'py, PyAny>> {
        let n = want!(c.length(true));
        if n < 0 {
            if n == -1 && nullable {
                return Ok(Some(self.py.None().into_bound(self.py)));
            }
            return Ok(None);
        }
        let span = want!(c.span(n));
        Ok(Some(self.text(c.buf, span)?))
    }
}

impl RequestDecoder {
    fn dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        Ok(self.field_dict.bind(py).call0()?.cast_into::<PyDict>()?)
    }

    fn header<'py>(&self, py: Python<'py>, key: i16, version: i16, correlation_id: i32, client_id: Bound<'py, PyAny>) -> PyResult<Bound<'py, PyDict>> {
        let h = self.dict(py)?;
        h.set_item(intern!(py, "request_api_key"), key)?;
        h.set_item(intern!(py, "request_api_version"), version)?;
        h.set_item(intern!(py, "correlation_id"), correlation_id)?;
        h.set_item(intern!(py, "client_id"), client_id)?;
        Ok(h)
    }

    fn produce_impl<'py>(&self, f: &mut Frame<'py, '_>, buf: &[u8]) -> Step<Decoded<'py>> {
        let py = f.py;
        let mut c = Cursor { buf, pos: 0, flexible: false };
        let (key, version, correlation_id) = (want!(c.i16()), want!(c.i16()), want!(c.i32()));
        if key != 0 || !(3..=9).contains(&version) {
            return Ok(None);
        }
        let client_id = want!(f.string(&mut c, true)?); // the header's client id is never compact
        c.flexible = version >= 9;
        want!(c.no_tags());
        let transactional_id = want!(f.string(&mut c, true)?);
        let (acks, timeout_ms) = (want!(c.i16()), want!(c.i32()));
        let topics = pyo3::types::PyList::empty(py);
        for _ in 0..want!(c.count()) {
            let name = want!(f.string(&mut c, false)?);
            let partitions = pyo3::types::PyList::empty(py);
            for _ in 0..want!(c.count()) {
                let index = want!(c.i32());
                let n = want!(c.length(false));
                if n < -1 {
                    return Ok(None);
                }
                let p = self.dict(py)?;
                p.set_item(intern!(py, "index"), index)?;
                if n == -1 {
                    p.set_item(intern!(py, "records"), py.None())?;
                } else {
                    let span = want!(c.span(n));
                    p.set_item(intern!(py, "records"), f.slice(span)?)?;
                }
                want!(c.no_tags());
                partitions.append(p)?;
            }
            want!(c.no_tags());
            let t = self.dict(py)?;
            t.set_item(intern!(py, "name"), name)?;
            t.set_item(intern!(py, "partition_data"), partitions)?;
            topics.append(t)?;
        }
        want!(c.no_tags());
        let header = self.header(py, key, version, correlation_id, client_id)?;
        let body = self.dict(py)?;
        body.set_item(intern!(py, "transactional_id"), transactional_id)?;
        body.set_item(intern!(py, "acks"), acks)?;
        body.set_item(intern!(py, "timeout_ms"), timeout_ms)?;
        body.set_item(intern!(py, "topic_data"), topics)?;
        Ok(Some((header, body)))
    }

    fn fetch_impl<'py>(&self, f: &mut Frame<'py, '_>, buf: &[u8]) -> Step<Decoded<'py>> {
        let py = f.py;
        let mut c = Cursor { buf, pos: 0, flexible: false };
        let (key, version, correlation_id) = (want!(c.i16()), want!(c.i16()), want!(c.i32()));
        if key != 1 || !(4..=12).contains(&version) {
            return Ok(None);
        }
        let client_id = want!(f.string(&mut c, true)?);
        c.flexible = version >= 12;
        want!(c.no_tags());
        let (replica_id, max_wait_ms, min_bytes, max_bytes) = (want!(c.i32()), want!(c.i32()), want!(c.i32()), want!(c.i32()));
        let isolation_level = want!(c.i8());
        let (session_id, session_epoch) = if version >= 7 { (want!(c.i32()), want!(c.i32())) } else { (0, -1) };
        let zero_uuid = self.zero_uuid.bind(py);
        let topics = pyo3::types::PyList::empty(py);
        for _ in 0..want!(c.count()) {
            let name = want!(f.string(&mut c, false)?);
            let partitions = pyo3::types::PyList::empty(py);
            for _ in 0..want!(c.count()) {
                let partition = want!(c.i32());
                let current_leader_epoch = if version >= 9 { want!(c.i32()) } else { -1 };
                let fetch_offset = want!(c.i64());
                let last_fetched_epoch = if version >= 12 { want!(c.i32()) } else { -1 };
                let log_start_offset = if version >= 5 { want!(c.i64()) } else { -1 };
                let partition_max_bytes = want!(c.i32());
                want!(c.no_tags());
                let p = self.dict(py)?;
                p.set_item(intern!(py, "partition"), partition)?;
                p.set_item(intern!(py, "current_leader_epoch"), current_leader_epoch)?;
                p.set_item(intern!(py, "fetch_offset"), fetch_offset)?;
                p.set_item(intern!(py, "last_fetched_epoch"), last_fetched_epoch)?;
                p.set_item(intern!(py, "log_start_offset"), log_start_offset)?;
                p.set_item(intern!(py, "partition_max_bytes"), partition_max_bytes)?;
                partitions.append(p)?;
            }
            want!(c.no_tags());
            let t = self.dict(py)?;
            t.set_item(intern!(py, "topic"), name)?;
            t.set_item(intern!(py, "partitions"), partitions)?;
            t.set_item(intern!(py, "topic_id"), zero_uuid)?;
            topics.append(t)?;
        }
        let forgotten = pyo3::types::PyList::empty(py);
        if version >= 7 {
            for _ in 0..want!(c.count()) {
                let name = want!(f.string(&mut c, false)?);
                let indexes = pyo3::types::PyList::empty(py);
                for _ in 0..want!(c.count()) {
                    indexes.append(want!(c.i32()))?;
                }
                want!(c.no_tags());
                let t = self.dict(py)?;
                t.set_item(intern!(py, "topic"), name)?;
                t.set_item(intern!(py, "partitions"), indexes)?;
                t.set_item(intern!(py, "topic_id"), zero_uuid)?;
                forgotten.append(t)?;
            }
        }
        let rack_id = if version >= 11 { want!(f.string(&mut c, false)?) } else { intern!(py, "").clone().into_any() };
        want!(c.no_tags());
        let header = self.header(py, key, version, correlation_id, client_id)?;
        let replica_state = self.dict(py)?;
        replica_state.set_item(intern!(py, "replica_id"), -1)?;
        replica_state.set_item(intern!(py, "replica_epoch"), -1)?;
        let body = self.dict(py)?;
        body.set_item(intern!(py, "replica_id"), replica_id)?;
        body.set_item(intern!(py, "max_wait_ms"), max_wait_ms)?;
        body.set_item(intern!(py, "min_bytes"), min_bytes)?;
        body.set_item(intern!(py, "max_bytes"), max_bytes)?;
        body.set_item(intern!(py, "isolation_level"), isolation_level)?;
        body.set_item(intern!(py, "cluster_id"), py.None())?;
        body.set_item(intern!(py, "replica_state"), replica_state)?;
        body.set_item(intern!(py, "session_id"), session_id)?;
        body.set_item(intern!(py, "session_epoch"), session_epoch)?;
        body.set_item(intern!(py, "topics"), topics)?;
        body.set_item(intern!(py, "forgotten_topics_data"), forgotten)?;
        body.set_item(intern!(py, "rack_id"), rack_id)?;
        Ok(Some((header, body)))
    }

    fn run<'py>(
        &self,
        py: Python<'py>,
        frame: &Bound<'py, PyAny>,
        which: for<'a> fn(&Self, &mut Frame<'py, 'a>, &[u8]) -> Step<Decoded<'py>>,
    ) -> Step<Decoded<'py>> {
        let Ok(buffer) = PyBuffer::<u8>::get(frame) else { return Ok(None) };
        if !buffer.is_c_contiguous() {
            return Ok(None);
        }
        // the export held by `buffer` keeps the frame's bytes where they are until it is dropped
        let buf = unsafe { std::slice::from_raw_parts(buffer.buf_ptr() as *const u8, buffer.len_bytes()) };
        let mut f = Frame { py, obj: frame, view: None };
        which(self, &mut f, buf)
    }
}

#[pymethods]
impl RequestDecoder {
    /// `field_dict`: the class of decoded structs (`protocol.types.FieldDict`, a dict subclass);
    /// `zero_uuid`: the value of Fetch's `topic_id` before v13.
    #[new]
    fn new(field_dict: Bound<'_, PyType>, zero_uuid: Bound<'_, PyAny>) -> Self {
        RequestDecoder { field_dict: field_dict.unbind(), zero_uuid: zero_uuid.unbind() }
    }

    /// (header, body) of a Produce v3-9 frame as `produce_codec.decode_request` gives them, or None.
    fn produce<'py>(&self, py: Python<'py>, frame: &Bound<'py, PyAny>) -> Step<Decoded<'py>> {
        self.run(py, frame, Self::produce_impl)
    }

    /// (header, body) of a Fetch v4-12 frame as `fetch_codec.decode_request` gives them, or None.
    fn fetch<'py>(&self, py: Python<'py>, frame: &Bound<'py, PyAny>) -> Step<Decoded<'py>> {
        self.run(py, frame, Self::fetch_impl)
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<RequestDecoder>()
}
