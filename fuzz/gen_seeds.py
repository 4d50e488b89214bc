#!/usr/bin/env python3
"""Seed corpora for the fuzz targets, from vmad's test fixtures.

wire: every byte-array fixture in core/src/wire (NodeInfo, PortInfo, PathRecord
query, ib_user_mad header, GIDs...), placed alone and inside the MADs the
tests build (PerfMgt Get, SA GetTable with RMPP, DR/LID SMPs), plus the
hostile-test segments. engine / rmpp_recv: op streams that walk a request
and its answer, an in-order RMPP transfer, and the hostile cases.
Run from anywhere; writes fuzz/seeds/<target>/.
"""
import hashlib, os, re, struct, glob

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "fuzz", "seeds")

def put(target, data):
    d = os.path.join(OUT, target)
    os.makedirs(d, exist_ok=True)
    name = hashlib.sha1(data).hexdigest()[:16]
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)

def fixtures():
    """Byte arrays `[0x.., ...]` of 4 or more elements in the wire tests."""
    for path in glob.glob(os.path.join(ROOT, "core/src/wire/**/*.rs"), recursive=True):
        text = open(path).read()
        for body in re.findall(r"\[((?:\s*0x[0-9a-fA-F]{1,2}\s*,?)+)\]", text):
            vals = [int(v, 16) for v in re.findall(r"0x([0-9a-fA-F]{1,2})", body)]
            if len(vals) >= 4:
                yield bytes(vals)

def mad(cls, ver, method, tid, attr=0, attr_mod=0):
    m = bytearray(256)
    m[0:4] = bytes([1, cls, ver, method])
    m[8:16] = struct.pack(">Q", tid)
    m[16:18] = struct.pack(">H", attr)
    m[20:24] = struct.pack(">I", attr_mod)
    return m

def rmpp(m, typ, flags, seg, paylen, status=0):
    m[24:28] = bytes([1, typ, (0x1f << 3) | flags, status])
    m[28:36] = struct.pack(">II", seg, paylen)
    return m

def dr_get(tid, attr, path):
    m = mad(0x81, 1, 1, tid, attr)
    m[6], m[7] = 1, len(path)
    m[32:36] = b"\xff\xff\xff\xff"
    for i, p in enumerate(path):
        m[129 + i] = p
    return m

def wire_seeds():
    samples = [
        mad(0x04, 1, 0x01, 0x2a),                       # quickstart PerfMgt Get
        rmpp(mad(0x03, 2, 0x92, 7, 0x11), 1, 3, 1, 1000),  # SA GetTableResp, first segment
        mad(0x03, 2, 0x12, 9, 0x11),                    # SA GetTable
        dr_get(5, 0x11, [1, 3, 2]),                     # DR NodeInfo
        mad(0x01, 1, 0x01, 6, 0x15),                    # LID PortInfo
        mad(0x30, 1, 0x06, 3, 0x10),                    # vendor
    ]
    for fx in fixtures():
        put("wire", fx)
        for base in samples[:3]:
            for off in (24, 36, 56, 64):
                m = bytearray(base)
                m[off:off + len(fx)] = fx[: max(0, 256 - off)]
                put("wire", bytes(m[:256]))
    for s in samples:
        put("wire", bytes(s))
        put("wire", bytes(64) + bytes(s))  # behind an ib_user_mad header

# Engine op streams (see fuzz_targets/engine.rs for the decoding).
def engine_seeds():
    # A PerfMgt Get from peer 1 to the server, its answer, drained.
    put("engine", bytes([0, 2, 0, 5, 0, 0, 0, 0, 4, 255]))
    # The client sends a Get, we drain, the peer answers it, time passes.
    put("engine", bytes([3, 3, 3, 0, 0, 0, 7, 0, 0, 1, 1, 4, 8, 5, 0, 0, 8, 40]))
    # An RMPP send from the SA client, drained, ACKed, ticks.
    put("engine", bytes([3, 1, 8, 0, 0, 0, 9, 2, 0, 0, 0, 1, 0, 4, 9, 5, 0, 0, 3, 8, 30, 2, 1, 0, 8, 200]))
    # A first RMPP segment to the SA server, then ticks until T2L.
    put("engine", bytes([0, 8, 0, 0, 0, 0, 2, 255, 255, 8, 250, 8, 250]))
    # Agent churn around traffic.
    put("engine", bytes([0, 2, 0, 1, 0, 0, 6, 2, 7, 0, 2, 0, 1, 0, 0, 8, 0]))

def rmpp_seeds():
    def seg(op, tid, seg, flags, paylen):
        # op (>= 0x20, bit 0 response), tid byte, flags byte, seg selector, paylen selector..., fill, peer
        out = bytes([op, tid, flags])
        out += bytes([seg]) if seg < 0xf0 else bytes([0xf0]) + struct.pack(">I", seg)
        if paylen == 0:
            out += bytes([0])
        elif paylen < 0x10000:
            out += bytes([0x80]) + struct.pack(">H", paylen)
        else:
            out += bytes([0xf0]) + struct.pack(">I", paylen)
        return out + bytes([seg & 0xff, 0])
    # An in-order transfer of 3 segments (announced), then linger and expire.
    put("rmpp_recv", seg(0x20, 1, 0x03, 1, 660) + seg(0x20, 1, 0x01, 2, 0) + seg(0x20, 1, 0x05, 3, 220) + bytes([0x1f] * 8))
    # Unannounced, growing past max_message.
    put("rmpp_recv", b"".join(seg(0x20, 2, 0x03 if i == 1 else 0x01, i, 0) for i in range(1, 45)))
    # Gigabyte PayloadLength.
    put("rmpp_recv", seg(0x20, 3, 0x03, 1, 0xfffffff0))
    # Out of window, then reordered.
    put("rmpp_recv", seg(0x20, 1, 0x03, 1, 2200) + seg(0x20, 1, 0x01, 9, 0) + seg(0x20, 1, 0x01, 3, 0) + seg(0x20, 1, 0x01, 2, 0))
    # A response transfer to the client, and an ABORT for it.
    put("rmpp_recv", seg(0x21, 0, 0x03, 1, 440) + bytes([0x2f, 0, 0x01, 0, 0, 0, 0]))

if __name__ == "__main__":
    wire_seeds()
    engine_seeds()
    rmpp_seeds()
    for t in sorted(os.listdir(OUT)):
        print(t, len(os.listdir(os.path.join(OUT, t))), "seeds")
