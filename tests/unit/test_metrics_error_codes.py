"""`metrics.stats.count_error_codes`: Produce and Fetch bodies counted by their own short walk give
exactly the generic walk's counts (Kafka's errorCounts), whatever codes they hold."""

from hypothesis import given, settings
from hypothesis import strategies as st

from metrics.stats import count_error_codes, error_codes

CODE = st.sampled_from([0, 0, 0, 1, 6, 7, 19])

PRODUCE = st.fixed_dictionaries(
    {
        "throttle_time_ms": st.just(0),
        "responses": st.lists(
            st.fixed_dictionaries(
                {
                    "name": st.text(max_size=3),
                    "partition_responses": st.lists(
                        st.fixed_dictionaries(
                            {"index": st.integers(0, 3), "error_code": CODE, "base_offset": st.integers(-1, 9)},
                            optional={
                                "record_errors": st.lists(
                                    st.fixed_dictionaries(
                                        {"batch_index": st.integers(0, 3), "batch_index_error_message": st.text()}
                                    ),
                                    max_size=2,
                                )
                            },
                        ),
                        max_size=3,
                    ),
                }
            ),
            max_size=3,
        ),
    }
)
FETCH = st.fixed_dictionaries(
    {
        "throttle_time_ms": st.just(0),
        "error_code": CODE,
        "session_id": st.integers(0, 5),
        "responses": st.lists(
            st.fixed_dictionaries(
                {
                    "topic": st.text(max_size=3),
                    "partitions": st.lists(
                        st.fixed_dictionaries(
                            {
                                "partition_index": st.integers(0, 3),
                                "error_code": CODE,
                                "aborted_transactions": st.one_of(
                                    st.none(), st.lists(st.fixed_dictionaries({"producer_id": st.integers(0, 9)}))
                                ),
                                "records": st.binary(max_size=4),
                            }
                        ),
                        max_size=3,
                    ),
                }
            ),
            max_size=3,
        ),
    }
)


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.tuples(st.just(0), PRODUCE), st.tuples(st.just(1), FETCH)))
def test_shaped_counts_equal_the_generic_walk(case):
    api_key, body = case
    generic: dict[int, int] = {}
    error_codes(body, generic)
    counted: dict[int, int] = {}
    count_error_codes(api_key, body, counted)
    assert counted == generic


def test_other_shapes_take_the_generic_walk():
    body = {"error_code": 7, "responses": [{"partition_responses": [{"error_code": 6}]}], "extra": [{"error_code": 1}]}
    found: dict[int, int] = {}
    count_error_codes(0, body, found)  # not a Produce body's shape: walked generically
    assert found == {7: 1, 6: 1, 1: 1}
