/* Parser, checksum controls and deparser of p4src/switchml.p4 (v1model).
 *
 * The SwitchML header and its values are parsed only on UDP destination port
 * SWITCHML_UDP_PORT. A truncated packet enters ingress with parser_error set and is
 * counted in dropped_malformed there (BMv2 does not drop on parser errors). */
#ifndef _SWITCHML_PARSER_P4_
#define _SWITCHML_PARSER_P4_

#include "switchml_headers.p4"

parser SmParser(packet_in packet,
                out sm_headers_t hdr,
                inout sm_metadata_t meta,
                inout standard_metadata_t standard_metadata) {

    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) {
            TYPE_IPV4: parse_ipv4;
            default: accept;
        }
    }

    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        transition select(hdr.ipv4.protocol) {
            IP_PROTO_UDP: parse_udp;
            default: accept;
        }
    }

    state parse_udp {
        packet.extract(hdr.udp);
        transition select(hdr.udp.dstPort) {
            SWITCHML_UDP_PORT: parse_switchml;
            default: accept;
        }
    }

    state parse_switchml {
        packet.extract(hdr.sm);
        packet.extract(hdr.vals);
        transition accept;
    }
}

/* IPv4 header checksum (no options: packets with IHL != 5 are dropped in ingress). */
control SmVerifyChecksum(inout sm_headers_t hdr, inout sm_metadata_t meta) {
    apply {
        verify_checksum(
            hdr.ipv4.isValid() && hdr.ipv4.ihl == 5,
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.totalLen,
              hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.fragOffset, hdr.ipv4.ttl,
              hdr.ipv4.protocol, hdr.ipv4.srcAddr, hdr.ipv4.dstAddr },
            hdr.ipv4.hdrChecksum,
            HashAlgorithm.csum16);
    }
}

/* Recomputed because egress may rewrite a RESULT's destination address. */
control SmComputeChecksum(inout sm_headers_t hdr, inout sm_metadata_t meta) {
    apply {
        update_checksum(
            hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.totalLen,
              hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.fragOffset, hdr.ipv4.ttl,
              hdr.ipv4.protocol, hdr.ipv4.srcAddr, hdr.ipv4.dstAddr },
            hdr.ipv4.hdrChecksum,
            HashAlgorithm.csum16);
    }
}

control SmDeparser(packet_out packet, in sm_headers_t hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.ipv4);
        packet.emit(hdr.udp);
        packet.emit(hdr.sm);
        packet.emit(hdr.vals);
    }
}

#endif
