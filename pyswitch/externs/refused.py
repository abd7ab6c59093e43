"""The externs of v1model (and names of other architectures' externs) that pyswitch does
not run: a program using one is refused at compile time with the reason."""

from __future__ import annotations

from pyswitch.externs import Refused

_PACKET = "it sends the packet through the pipeline again; pyswitch runs one pass"

EXTERNS = [
    Refused(("resubmit", "resubmit_preserving_field_list"), "function", _PACKET),
    Refused(("recirculate", "recirculate_preserving_field_list"), "function", _PACKET),
    Refused(("clone3",), "function", "deprecated: use clone_preserving_field_list"),
    Refused(("truncate",), "function", "not implemented"),
    Refused(("digest",), "function", "no digest channel to a controller"),
    Refused(("assert", "assume"), "function", "not implemented"),
    Refused(("random_int",), "function", "not a v1model extern"),
    Refused(("meter", "direct_meter"), "object", "meters are not implemented"),
    Refused(("action_profile", "action_selector"), "object",
            "action profiles and selectors are not implemented"),
    Refused(("Checksum16",), "object", "deprecated: use verify_checksum/update_checksum"),
    Refused(("Hash", "Random", "Register", "Counter"), "object",
            "not a v1model extern (PSA's names)"),
]
