"""KEP-5866 shard selectors: parsed as kube-apiserver parses them, written as
apimachinery writes them, matched with the same hash."""

from __future__ import annotations

import uuid
from types import SimpleNamespace

import pytest

from kubereflector import (
    HASH_SPACE,
    NAMESPACE_FIELD,
    UID_FIELD,
    ShardRange,
    ShardSelector,
    ShardSelectorError,
    fnv1a_64,
    to_compact,
)

HALF = "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')"
REST = "shardRange(object.metadata.uid, '0x8000000000000000', '0x10000000000000000')"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", 0xCBF29CE484222325),  # the offset basis
        ("a", 0xAF63DC4C8601EC8C),  # FNV's published test vectors
        ("foobar", 0x85944171F73967E8),
        ("é", 0x0AC21707B7181E01),  # its UTF-8 bytes c3 a9, as Go's []byte(string)
    ],
)
def test_fnv1a_64_matches_the_published_vectors(text: str, expected: int) -> None:
    assert fnv1a_64(text) == expected


@pytest.mark.parametrize(
    ("text", "ranges"),
    [
        (HALF, [(0, 1 << 63)]),
        (REST, [(1 << 63, HASH_SPACE)]),
        (f"{HALF} || {REST}", [(0, 1 << 63), (1 << 63, HASH_SPACE)]),
        (HALF.replace(", ", ","), [(0, 1 << 63)]),  # no spaces
        (f"  {HALF.replace('(', '( ').replace(')', ' )')}  ", [(0, 1 << 63)]),
        (HALF.replace("'", '"'), [(0, 1 << 63)]),  # CEL takes either quote
        (f"({HALF}) || ({REST})", [(0, 1 << 63), (1 << 63, HASH_SPACE)]),
    ],
)
def test_parse_accepts_what_the_api_server_accepts(
    text: str, ranges: list[tuple[int, int]]
) -> None:
    selector = ShardSelector.parse(text)
    assert selector.field == UID_FIELD
    assert [(r.start, r.end) for r in selector.ranges] == ranges


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", "empty shard selector is not allowed"),
        ("   ", "empty shard selector is not allowed"),
        (HALF.replace("'0x0000000000000000'", "'0000000000000000'"), "'0x' prefix"),
        (HALF.replace("'0x0000000000000000'", "'0x'"), "required after '0x'"),
        (HALF.replace("'0x0000000000000000'", "'0x0'"), "did you mean '0x0000000000000000'"),
        (HALF.replace("'0x0000000000000000'", "'0x" + "0" * 18 + "'"), "too long"),
        (HALF.replace("'0x0000000000000000'", "'0x000000000000000g'"), "invalid hex character"),
        (HALF.replace("'0x0000000000000000'", "'0x00000000000000AA'"), "invalid hex character"),
        (HALF.replace("'0x0000000000000000'", "'0x20000000000000000'"), "must be '0x1000"),
        (HALF.replace("uid", "name"), "unsupported field path 'object.metadata.name'"),
        (HALF.replace("uid", "labels"), "unsupported field path"),
        (HALF.replace("shardRange", "invalidFunc"), "unsupported function 'invalidFunc'"),
        (f"{HALF} && {REST}", "unsupported operator '&&'"),
        ("shardRange(object.metadata.uid, 0, 8)", "must be a string literal"),
        ("object.metadata.uid > '0x0'", "unsupported function 'object'"),
        ("shardRange(object.metadata.uid, '0x0000000000000000')", "expected ','"),
        (HALF.replace(")", ", '0x1')"), "exactly 3 arguments"),
        ("shardRange(object.metadata.uid, hex(0), '0x8000000000000000')", "string literal"),
        (
            f"{HALF} || {REST.replace('uid', 'namespace')}",
            "all shard ranges must use the same field",
        ),
        (HALF.replace("0x0000000000000000", "0x8000000000000000"), "must be less than end"),
        (HALF.replace("'0x8000000000000000'", "'0x0000000000000000'"), "must be less than end"),
        (HALF[:-1], "expected ')'"),
        (f"{HALF} {REST}", "expected '||' or the end"),
    ],
)
def test_parse_refuses_what_the_api_server_refuses(text: str, says: str) -> None:
    with pytest.raises(ShardSelectorError, match=None) as caught:
        ShardSelector.parse(text)
    assert says in str(caught.value)


def test_str_is_the_api_servers_form_and_parses_back() -> None:
    for text in (HALF, REST, f"{HALF} || {REST}"):
        assert str(ShardSelector.parse(text)) == text
    spaced = ShardSelector.parse(HALF.replace(", ", " ,  "))
    assert str(spaced) == HALF
    namespace = ShardSelector.parse(HALF.replace("uid", "namespace"))
    assert namespace.field == NAMESPACE_FIELD
    assert ShardSelector.parse(str(namespace)) == namespace


def test_even_splits_the_space_as_apimachinery_does() -> None:
    # NewShardRangeSelector: start = i * 2^64 / n (integer division), the last end 2^64.
    assert str(ShardSelector.even(0, 1)) == (
        "shardRange(object.metadata.uid, '0x0000000000000000', '0x10000000000000000')"
    )
    thirds = [ShardSelector.even(i, 3) for i in range(3)]
    assert thirds[0].ranges[0] == ShardRange(0, 0x5555555555555555)
    assert thirds[1].ranges[0] == ShardRange(0x5555555555555555, 0xAAAAAAAAAAAAAAAA)
    assert thirds[2].ranges[0] == ShardRange(0xAAAAAAAAAAAAAAAA, HASH_SPACE)
    assert sum(s.size() for s in thirds) == HASH_SPACE
    with pytest.raises(ShardSelectorError, match=r"index must be an int in \[0, 3\)"):
        ShardSelector.even(3, 3)
    with pytest.raises(ShardSelectorError, match="total must be an int >= 1"):
        ShardSelector.even(0, 0)


def test_every_uid_is_in_exactly_one_of_an_even_split() -> None:
    parts = [ShardSelector.even(i, 7) for i in range(7)]
    counts = [0] * 7
    for n in range(700):
        obj = {"metadata": {"uid": str(uuid.uuid5(uuid.NAMESPACE_OID, str(n)))}}
        hits = [i for i, part in enumerate(parts) if part.matches(obj)]
        assert len(hits) == 1
        counts[hits[0]] += 1
    assert min(counts) > 50  # random uids spread over the whole space


def test_matches_reads_dicts_compact_objects_and_models_alike() -> None:
    uid = "6f1c3c5e-0000-4000-8000-000000000001"
    inside = ShardSelector.covering([ShardRange(fnv1a_64(uid), fnv1a_64(uid) + 1)])
    as_dict = {"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "p", "uid": uid}}
    model = SimpleNamespace(metadata=SimpleNamespace(uid=uid, namespace="ns"))
    assert inside.matches(as_dict)
    assert inside.matches(to_compact(as_dict))
    assert inside.matches(model)
    assert not inside.matches({"metadata": {"uid": uid + "x"}})
    # An object without the field hashes "" (as the API server resolves a missing uid).
    empty = ShardSelector.covering([ShardRange(fnv1a_64(""), fnv1a_64("") + 1)])
    assert empty.matches({"metadata": {}})
    assert empty.matches({})
    by_namespace = ShardSelector(NAMESPACE_FIELD, (ShardRange(fnv1a_64("ns"), fnv1a_64("ns") + 1),))
    assert by_namespace.matches(model)
    assert by_namespace.matches({"metadata": {"namespace": "ns", "uid": "u"}})


def test_covering_merges_adjacent_and_overlapping_ranges() -> None:
    merged = ShardSelector.covering(
        [ShardRange(10, 20), ShardRange(0, 10), ShardRange(15, 30), ShardRange(40, 50)]
    )
    assert merged.ranges == (ShardRange(0, 30), ShardRange(40, 50))
    assert merged.size() == 40
    with pytest.raises(ShardSelectorError, match="at least one range"):
        ShardSelector.covering([])


@pytest.mark.parametrize(
    ("start", "end"), [(5, 5), (6, 5), (-1, 3), (0, HASH_SPACE + 1), (True, 3)]
)
def test_a_range_out_of_order_or_space_is_refused(start: int, end: int) -> None:
    with pytest.raises(ShardSelectorError):
        ShardRange(start, end)


def test_range_membership() -> None:
    r = ShardRange(10, 20)
    assert 10 in r
    assert 19 in r
    assert 20 not in r
    assert 9 not in r
    assert "15" not in r
    assert r.text() == "shardRange(object.metadata.uid, '0x000000000000000a', '0x0000000000000014')"
