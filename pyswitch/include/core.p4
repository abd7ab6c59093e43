/* pyswitch's own minimal core library declarations (P4_16).
 * Only what pyswitch implements is declared; semantics live in pyswitch. */
#ifndef _PYSWITCH_CORE_P4_
#define _PYSWITCH_CORE_P4_
/* p4c's core.p4 guard too: programs test it (#ifdef _CORE_P4_) to know core.p4 is in. */
#define _CORE_P4_

error {
    NoError,
    PacketTooShort,
    NoMatch,
    StackOutOfBounds,
    HeaderTooShort,
    ParserTimeout,
    ParserInvalidArgument
}

extern packet_in {
    void extract<HdrT>(out HdrT hdr);
    LookT lookahead<LookT>();
    void advance(in bit<32> sizeInBits);
    bit<32> length();
}

extern packet_out {
    void emit<EmitT>(in EmitT hdr);
}

extern void verify(in bool check, in error toSignal);

@noWarn("unused")
action NoAction() {}

match_kind {
    exact,
    ternary,
    lpm
}

#endif
