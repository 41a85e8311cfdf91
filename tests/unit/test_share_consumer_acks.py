"""How our share consumer packs its acknowledgements into ShareFetch / ShareAcknowledge's
AcknowledgementBatches (KIP-932): consecutive offsets in one batch, one type when they agree."""

from client.share_consumer import ACCEPT, GAP, REJECT, RELEASE, ack_batches


def test_runs_of_one_type_are_one_batch_with_one_type():
    assert ack_batches({5: ACCEPT, 3: ACCEPT, 4: ACCEPT}) == [
        {"first_offset": 3, "last_offset": 5, "acknowledge_types": [ACCEPT]}
    ]


def test_mixed_types_list_each_offset_and_gaps_split_batches():
    assert ack_batches({1: ACCEPT, 2: REJECT, 3: GAP, 7: RELEASE}) == [
        {"first_offset": 1, "last_offset": 3, "acknowledge_types": [ACCEPT, REJECT, GAP]},
        {"first_offset": 7, "last_offset": 7, "acknowledge_types": [RELEASE]},
    ]


def test_nothing_to_acknowledge_is_no_batch():
    assert ack_batches({}) == []
