"""BMv2's Thrift runtime API for pyswitch (``pyswitch run --thrift-port N``): the server
(:mod:`pyswitch.thriftapi.server`) and the BMv2 JSON it describes the program with
(:mod:`pyswitch.thriftapi.bmv2_json`)."""
