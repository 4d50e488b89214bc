#!/usr/bin/env python3
"""Seed corpora for the fuzz targets, from vmad's test fixtures.

wire: every byte-array fixture in core/src/wire (NodeInfo, PortInfo, PathRecord
query, ib_user_mad header, GIDs...), placed alone and inside the MADs the
tests build (PerfMgt Get, SA GetTable with RMPP, DR/LID SMPs), plus the
hostile-test segments. engine / rmpp_recv: op streams that walk a request
and its answer, an in-order RMPP transfer, and the hostile cases.
roce_rx: RoCE v2 UD datagrams carrying the MADs above (the harness recomputes the
ICRC when the first byte says so, which these seeds do for IPv6). ibsim_proto,
umad_header, subnet_agents, capi_buffers: op streams (see each target for the
decoding) that carry the same MADs through the ibsim protocol, ib_user_mad reads,
the embedded subnet's agents and the C ABI.
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

def fmad(kind, method, tid=1, attr=0, mods=(), cls=None):
    """The bytes vmad_fuzz::mad() reads: kind (0 SA, 1 PerfMgt, 2 vendor OUI, 3 DR SMP,
    4 LID SMP, 5 class 0x09, 6 any), method, TID, attribute, overwrites."""
    out = bytes([kind]) + (bytes(cls) if kind == 6 else b"")
    out += bytes([method]) + struct.pack(">IH", tid, attr) + bytes([len(mods)])
    return out + b"".join(bytes([a, v]) for a, v in mods)

def roce_seeds():
    def ud(m, pad=0, pkey=0xffff, dqp=1, qkey=0x80010000, sqp=1, psn=7):
        bth = bytes([0x64, pad << 4]) + struct.pack(">HI", pkey, dqp & 0xffffff) + struct.pack(">I", 0x80000000 | psn)
        deth = struct.pack(">II", qkey, sqp & 0xffffff)
        return bth + deth + bytes(m) + bytes(pad) + bytes(4)
    mads = [mad(0x04, 1, 0x01, 0x2a, 0x12), mad(0x03, 2, 0x12, 9, 0x11),
            rmpp(mad(0x03, 2, 0x92, 7, 0x11), 1, 3, 1, 1000), mad(0x30, 1, 0x06, 3, 0x10)]
    for m in mads:
        # IPv6 port (ICRC recomputed by the harness), then the IPv4 ports (no ICRC check).
        put("roce_rx", bytes([0x04]) + bytes([0, 0, 0, 2]) + struct.pack(">H", 4791) + ud(m))
        put("roce_rx", bytes([0x06, 2]) + struct.pack(">H", 4791) + ud(m))
        put("roce_rx", bytes([0x07, 2]) + struct.pack(">H", 4791) + ud(m, pkey=0x8012))
    put("roce_rx", bytes([0x04, 0, 0, 0, 3, 0x12, 0xb7]) + ud(mads[0], pad=3, qkey=1, dqp=2))
    put("roce_rx", bytes([0x00, 0, 0, 0, 3, 0x12, 0xb7]) + ud(mads[1]))  # ICRC left wrong

def ibsim_seeds():
    def datagram(op, dlid, slid, dqp, sqp, sent, m=b"", mods=()):
        out = bytes([op, 0]) + struct.pack(">HH", dlid, slid) + bytes([dqp, sqp, sent]) + m
        return out + bytes([len(mods)]) + b"".join(struct.pack(">H", a) + bytes([v]) for a, v in mods)
    ctl = struct.pack("<IIII", 0xdeadbeef, 3, 1, 40) + b"H1\0".ljust(32, b"\0") + struct.pack("<II", 3, 1) + bytes(24)
    put("ibsim_proto", bytes([0, 0]) + ctl + bytes([1]))
    put("ibsim_proto", bytes([0, 0]) + struct.pack("<IIII", 0xdeadbeef, 3, 10, 64) + bytes([0xff, 0xff, 0x80, 0x01] * 16) + bytes([1]))
    sa_get = fmad(0, 0x12, 5, 0x11)
    # We send an SA GetTable (agent 1), ibsim answers it, then echoes one back undelivered.
    put("ibsim_proto", bytes([1]) + sa_get + bytes([1]) + datagram(3, 2, 1, 1, 1, 0) + datagram(4, 1, 2, 1, 1, 0))
    # A DR SMP from the SM (fresh), and a PerfMgt Get.
    put("ibsim_proto", datagram(2, 0xffff, 0xffff, 0, 0, 0xff, fmad(3, 0x01, 9, 0x11, [(7, 1), (6, 1)])))
    put("ibsim_proto", datagram(2, 2, 1, 1, 1, 0xff, fmad(1, 0x01, 4, 0x12)))

def umad_seeds():
    def hdr(agent, status=0, lid=1, qpn=1, grh=0, pkey_index=0):
        h = struct.pack("<IiII", agent, status, 0, 0) + struct.pack("<I", 256)
        h += struct.pack(">IIH", qpn, 0x80010000, lid) + bytes([0, 0, grh, 0, 64, 0]) + bytes(16)
        h += struct.pack(">IH", 0, pkey_index) + bytes(6)
        return h.ljust(64, b"\0")[:64]
    # A PerfMgt GetResp for the client (kernel agent 3), an SA request to the server
    # (agent 0), a first RMPP segment of a GetTableResp for the SA client (agent 1).
    put("umad_header", bytes([0, 0]) + hdr(3) + fmad(1, 0x81, 7, 0x12))
    put("umad_header", bytes([0, 0]) + hdr(0) + fmad(0, 0x01, 8, 0x35))
    put("umad_header", bytes([0, 0]) + hdr(1) + fmad(0, 0x92, 9, 0x11, [(24, 1), (25, 1), (26, 0xfb), (31, 1), (35, 200)]))
    # A tracked send, its ETIMEDOUT completion (24 bytes of MAD), a DR SMP on QP0 (agent 5).
    put("umad_header", bytes([0x80, 3, 4, 1, 0, 0xf0, 0, 88]) + hdr(3, status=110) + bytes(24))
    put("umad_header", bytes([0, 0]) + hdr(5, lid=0xffff, qpn=0) + fmad(3, 0x01, 3, 0x11, [(7, 1)]))

def subnet_seeds():
    def frame(kind, method, attr, dest, sel=0, tid=1, amod=0):
        return bytes([0, kind, method, attr]) + struct.pack(">IH", tid, amod) + bytes([0, 0, 0, dest, sel])
    # SubnGet NodeInfo / PortInfo to the switch and the other CA (QP0), SubnSet PortInfo.
    put("subnet_agents", frame(0, 0, 0, 2) + frame(0, 0, 3, 3) + frame(0, 1, 3, 1))
    # SA GetTable NodeRecord, then ACKs of what comes back; SA Get PathRecord; a sweep.
    put("subnet_agents", frame(2, 6, 3, 0) + bytes([6, 0, 0, 7]) * 3 + frame(2, 0, 10, 0) + bytes([0x87]))
    # PMA Get PortCounters of the switch and of the SM's CA, SMInfo to the SM.
    put("subnet_agents", frame(3, 0, 2, 2) + frame(3, 0, 2, 0) + frame(0, 0, 8, 0))
    # DR SMPs: NodeInfo one hop out (the switch), two hops (the SM's CA); time passes.
    put("subnet_agents", bytes([4, 1, 0, 0]) + struct.pack(">IH", 2, 0) + bytes([1, 0, 1, 0]))
    put("subnet_agents", bytes([4, 1, 0, 0]) + struct.pack(">IH", 3, 0) + bytes([2, 0, 2, 1, 0]) + bytes([7, 0x03, 0xe8]))
    # SA ServiceRecord Set (a registration), InformInfo Set, then a long wait.
    put("subnet_agents", frame(2, 1, 8, 0) + frame(2, 1, 2, 0) + bytes([7, 0xff, 0xff]))

def capi_seeds():
    def recv(room, fill=0):
        return bytes([3, 0]) + struct.pack(">H", room) + bytes([fill, 0])
    # SA GetTable (RMPP) into a small buffer (-ENOSPC), then a large one.
    put("capi_buffers", bytes([1, 0, 0, 0, 5, 0]) + recv(100) * 3 + recv(1000) * 3)
    # PerfMgt Get to the switch, vendor Get to ourselves; exact-size receives.
    put("capi_buffers", bytes([1, 0, 0, 0, 6, 1]) + recv(256) * 3 + bytes([1, 0, 0, 0, 7, 2]) + recv(256, 1) * 3)
    # The header functions on a filled header, GRH set from an address.
    put("capi_buffers", bytes([0, 0]) + struct.pack(">IIII", 5, 1, 0, 0x80010000) + bytes(range(64)) + bytes(44) + bytes([1]))
    # A negative length, NULL buffers, the fuzzer's own MAD to the SA.
    put("capi_buffers", bytes([3, 0xf0, 5, 0, 0, 5]) + bytes([2]) + fmad(0, 0x01, 3, 0x35) + bytes([0, 1]) + recv(300))

if __name__ == "__main__":
    wire_seeds()
    engine_seeds()
    rmpp_seeds()
    roce_seeds()
    ibsim_seeds()
    umad_seeds()
    subnet_seeds()
    capi_seeds()
    for t in sorted(os.listdir(OUT)):
        print(t, len(os.listdir(os.path.join(OUT, t))), "seeds")
