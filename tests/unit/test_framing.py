"""The incremental frame splitter: any chunking of the stream gives the same frames."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from protocol.errors import FrameTooLarge
from protocol.framing import FrameDecoder, encode_frame


@given(st.lists(st.binary(max_size=50), max_size=6), st.lists(st.integers(1, 40), min_size=1))
def test_any_chunking_yields_the_same_frames(payloads, cuts):
    stream = b"".join(encode_frame(p) for p in payloads)
    decoder, frames, pos, i = FrameDecoder(), [], 0, 0
    while pos < len(stream):
        step = cuts[i % len(cuts)]
        frames += decoder.feed(stream[pos : pos + step])
        pos, i = pos + step, i + 1
    assert frames == payloads
    assert decoder.at_frame_boundary()


def test_several_frames_in_one_read_and_a_partial_tail():
    decoder = FrameDecoder()
    assert decoder.feed(encode_frame(b"a") + encode_frame(b"bc") + b"\x00\x00\x00\x05xy") == [b"a", b"bc"]
    assert decoder.buffered == 2 and not decoder.at_frame_boundary()
    assert decoder.feed(b"zuv") == [b"xyzuv"]


def test_oversize_prefix_raises_before_the_body_is_buffered():
    decoder = FrameDecoder(max_frame_size=100)
    with pytest.raises(FrameTooLarge) as err:
        decoder.feed(b"\x00\x00\x00\x65" + b"x" * 10)
    assert err.value.size == 101 and err.value.limit == 100
    assert decoder.buffered == 0
    with pytest.raises(FrameTooLarge):  # the decoder stays failed: the connection must close
        decoder.feed(b"more")


def test_default_limit_is_kafkas_socket_request_max_bytes():
    decoder = FrameDecoder()
    assert decoder.max_frame_size == 104857600
    with pytest.raises(FrameTooLarge):
        decoder.feed((104857601).to_bytes(4, "big"))


def test_negative_size_is_rejected():
    with pytest.raises(FrameTooLarge):
        FrameDecoder().feed(b"\xff\xff\xff\xff")


def test_a_buffer_holding_exactly_one_frame_is_handed_over_and_wanted_counts_down():
    decoder = FrameDecoder()
    assert decoder.wanted == 4
    assert decoder.feed(b"\x00\x00") == [] and decoder.wanted == 2
    assert decoder.feed(b"\x00\x06abc") == [] and decoder.wanted == 3
    (frame,) = decoder.feed(b"def")
    assert frame == b"abcdef" and decoder.wanted == 4
    frame[0:1] = b"X"  # the caller owns it: the decoder kept nothing of it
    assert decoder.feed(encode_frame(b"next")) == [b"next"]


@given(st.lists(st.binary(min_size=0, max_size=3000), min_size=1, max_size=4), st.integers(1, 700))
def test_frames_longer_than_a_read_come_whole_from_bytes_and_bytearrays(payloads, step):
    stream = b"".join(encode_frame(p) for p in payloads)
    for kind in (bytes, bytearray):
        decoder, frames = FrameDecoder(), []
        for pos in range(0, len(stream), step):
            frames += decoder.feed(kind(stream[pos : pos + step]))
            assert decoder.buffered + decoder.wanted >= 0
        assert frames == payloads
        assert decoder.at_frame_boundary() and decoder.buffered == 0 and decoder.wanted == 4


def test_a_frame_in_many_reads_counts_what_it_holds_and_what_it_wants():
    decoder = FrameDecoder()
    body = bytes(range(256)) * 64  # 16 KiB
    stream = encode_frame(body)
    assert decoder.feed(stream[:1000]) == []
    assert decoder.buffered == 1000 - 4 and decoder.wanted == len(body) - (1000 - 4)
    assert decoder.feed(stream[1000:-1]) == [] and decoder.wanted == 1
    (frame,) = decoder.feed(stream[-1:] + encode_frame(b"next")[:2])
    assert frame == body and decoder.buffered == 2 and decoder.wanted == 2


def test_an_oversize_prefix_split_over_reads_raises_when_complete():
    decoder = FrameDecoder(max_frame_size=100)
    assert decoder.feed(b"\x00\x00") == []
    with pytest.raises(FrameTooLarge):
        decoder.feed(b"\x00\x65")
    assert decoder.buffered == 0
