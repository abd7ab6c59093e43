/* pyswitch conformance: P4_16 bit-vector semantics (wrap-around, int<N>, casts, slices,
 * concatenation, shifts, saturating arithmetic), header validity and exit. */
#include <core.p4>
#include <v1model.p4>

#define ETH_OPS 0x88b5

header ethernet_t {
    bit<48> dstAddr;
    bit<48> srcAddr;
    bit<16> etherType;
}

header in_t {
    bit<8>  a;
    bit<8>  b;
    int<8>  c;
    int<8>  d;
    bit<16> w;
    bit<32> x;
    bit<8>  n;
}

header opt_t {
    bit<8> v;
}

header out_t {
    bit<8>  add8;
    bit<8>  sub8;
    bit<8>  mul8;
    bit<8>  neg8;
    bit<8>  not8;
    bit<8>  sadd;
    bit<8>  slt;
    bit<8>  ult;
    bit<8>  sshr;
    bit<8>  ushr;
    bit<8>  shl;
    bit<16> cat;
    bit<8>  slice;
    bit<16> sext;
    bit<8>  trunc;
    bit<32> zext;
    bit<8>  satu;
    bit<8>  satsub;
    bit<8>  ssat;
    bit<16> slv;
    bit<8>  tern;
    bit<8>  flags;
    bit<8>  varshl;
    bit<8>  sdiv;
    bit<8>  valid;
}

struct metadata { bit<8> unused; }

struct headers {
    ethernet_t ethernet;
    in_t       inp;
    opt_t      opt;
    out_t      res;
}

parser MyParser(packet_in packet, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) {
            ETH_OPS: parse_in;
            default: accept;
        }
    }
    state parse_in {
        packet.extract(hdr.inp);
        transition select(hdr.inp.a, hdr.inp.b) {
            (0xAA, _): parse_opt;
            (0xF0 &&& 0xF0, 0x00 .. 0x0F): parse_opt;
            default: accept;
        }
    }
    state parse_opt {
        packet.extract(hdr.opt);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) { apply { } }

control MyIngress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    apply {
        standard_metadata.egress_spec = 1;
        if (!hdr.inp.isValid()) {
            exit;
        }
        hdr.res.setValid();
        hdr.res.add8 = hdr.inp.a + hdr.inp.b;
        hdr.res.sub8 = hdr.inp.a - hdr.inp.b;
        hdr.res.mul8 = hdr.inp.a * hdr.inp.b;
        hdr.res.neg8 = -hdr.inp.a;
        hdr.res.not8 = ~hdr.inp.a;
        hdr.res.sadd = (bit<8>)(hdr.inp.c + hdr.inp.d);
        hdr.res.slt = (hdr.inp.c < hdr.inp.d) ? 8w1 : 8w0;
        hdr.res.ult = (hdr.inp.a < hdr.inp.b) ? 8w1 : 8w0;
        hdr.res.sshr = (bit<8>)(hdr.inp.c >> 2);
        hdr.res.ushr = hdr.inp.a >> 3;
        hdr.res.shl = hdr.inp.a << 3;
        hdr.res.cat = hdr.inp.a ++ hdr.inp.b;
        hdr.res.slice = hdr.inp.w[11:4];
        hdr.res.sext = (bit<16>)((int<16>)hdr.inp.c);
        hdr.res.trunc = (bit<8>)hdr.inp.x;
        hdr.res.zext = (bit<32>)hdr.inp.a;
        hdr.res.satu = hdr.inp.a |+| hdr.inp.b;
        hdr.res.satsub = hdr.inp.a |-| hdr.inp.b;
        hdr.res.ssat = (bit<8>)(hdr.inp.c |+| hdr.inp.d);
        bit<16> t = hdr.inp.w;
        t[7:0] = hdr.inp.a;
        t[15:12] = 4w0x9;
        hdr.res.slv = t;
        hdr.res.tern = hdr.inp.a > hdr.inp.b ? hdr.inp.a : hdr.inp.b;
        hdr.res.flags = ((bit<1>)(hdr.inp.a == hdr.inp.b) ++ 7w0)
                        | ((bit<8>)((bit<1>)(hdr.inp.c >= 0)) << 1)
                        | (bit<8>)(hdr.inp.x[31:31]);
        hdr.res.varshl = hdr.inp.a << hdr.inp.n;
        /* BMv2 divides only at compile time: constants fold, a power-of-two divisor
         * becomes a shift or a mask (p4c's strength reduction). */
        hdr.res.sdiv = 8w200 / 8w3 + (bit<8>)(1000 % 7) + hdr.inp.a / 8w4 + hdr.inp.a % 8w8;
        hdr.res.valid = hdr.opt.isValid() ? 8w1 : 8w0;
        if (hdr.opt.isValid() && hdr.opt.v == 0xFF) {
            hdr.opt.setInvalid();
        }
    }
}

control MyEgress(inout headers hdr, inout metadata meta,
                 inout standard_metadata_t standard_metadata) { apply { } }

control MyComputeChecksum(inout headers hdr, inout metadata meta) { apply { } }

control MyDeparser(packet_out packet, in headers hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.inp);
        packet.emit(hdr.opt);
        packet.emit(hdr.res);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(),
         MyDeparser()) main;
