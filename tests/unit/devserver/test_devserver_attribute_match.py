"""The dev server's Attribute match rules (``WaitForAttribute``): scalar operands, a missing value never matches."""

import pytest
from dex.dexpb import dex_pb2 as pb

from dex_agents.devserver._attribute_waits import check_match, matches
from dex_agents.devserver._errors import ServiceError


def _match(operator: int, **operand: object) -> pb.AttributeMatch:
    return pb.AttributeMatch(key="K", operator=operator, operand=pb.Value(**operand))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("stored", "operator", "operand", "expected"),
    [
        (pb.Value(int_value=3), pb.ATTRIBUTE_MATCH_OPERATOR_GREATER_THAN_OR_EQUAL, {"int_value": 3}, True),
        (pb.Value(int_value=2), pb.ATTRIBUTE_MATCH_OPERATOR_GREATER_THAN_OR_EQUAL, {"int_value": 3}, False),
        (pb.Value(int_value=4), pb.ATTRIBUTE_MATCH_OPERATOR_GREATER_THAN, {"double_value": 3.5}, True),
        (pb.Value(double_value=1.0), pb.ATTRIBUTE_MATCH_OPERATOR_LESS_THAN_OR_EQUAL, {"int_value": 1}, True),
        (pb.Value(string_value="a"), pb.ATTRIBUTE_MATCH_OPERATOR_EQUAL, {"string_value": "a"}, True),
        (pb.Value(string_value="a"), pb.ATTRIBUTE_MATCH_OPERATOR_NOT_EQUAL, {"string_value": "a"}, False),
        (pb.Value(bool_value=True), pb.ATTRIBUTE_MATCH_OPERATOR_EQUAL, {"bool_value": True}, True),
        (pb.Value(string_value="3"), pb.ATTRIBUTE_MATCH_OPERATOR_EQUAL, {"int_value": 3}, False),
        (None, pb.ATTRIBUTE_MATCH_OPERATOR_NOT_EQUAL, {"int_value": 3}, False),
    ],
)
def test_a_stored_value_matches_by_its_operator_and_kind(
    stored: pb.Value | None, operator: int, operand: dict[str, object], expected: bool
) -> None:
    match = _match(operator, **operand)
    check_match(match)
    assert matches(stored, match) is expected


@pytest.mark.parametrize(
    "match",
    [
        pb.AttributeMatch(operator=pb.ATTRIBUTE_MATCH_OPERATOR_EQUAL, operand=pb.Value(int_value=1)),
        _match(pb.ATTRIBUTE_MATCH_OPERATOR_UNSPECIFIED, int_value=1),
        _match(pb.ATTRIBUTE_MATCH_OPERATOR_GREATER_THAN, string_value="a"),
        _match(pb.ATTRIBUTE_MATCH_OPERATOR_LESS_THAN, bool_value=True),
        _match(pb.ATTRIBUTE_MATCH_OPERATOR_EQUAL, null_value=0),
    ],
)
def test_a_match_the_server_cannot_evaluate_is_refused(match: pb.AttributeMatch) -> None:
    with pytest.raises(ServiceError):
        check_match(match)
