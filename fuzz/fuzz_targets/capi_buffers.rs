//! The C ABI's buffer functions (`vmad-capi`, the drop-in libibumad) on buffers of the
//! fuzzer's sizes and contents, each call keeping its `# Safety` contract (so what is
//! tested is the library, not the harness): the header getters and setters, `umad_dump`,
//! and `umad_recv` (its non-waiting core, `recv_nonblocking`) into receive buffers of
//! fuzzed length, including fresh uninitialised memory, on a port of the embedded
//! fabric that sends itself requests, PerfMgt Gets to the switch and SA GetTables
//! answered over RMPP (so messages longer than the buffer meet -ENOSPC), and MADs
//! the fuzzer wrote. No panic (the library's panic guard would hide one: libFuzzer's
//! panic hook aborts first); a successful receive fits the buffer.
#![no_main]

use core::ffi::{c_int, c_long, c_void};
use std::sync::OnceLock;

use ibumad::{dump, header, ports};
use libfuzzer_sys::fuzz_target;
use vmad::wire::MAD_SIZE;
use vmad_fuzz::{mad, Bytes};

const HDR: usize = 64;
/// vmadsim1's LID on the default embedded fabric; vmadsim0 (the SA) is 1, the switch 3.
const MY_LID: c_int = 2;

struct Port {
    id: c_int,
    /// Agents: SA client (RMPP), PerfMgt client, vendor class 0x09 server of Get.
    agents: [c_int; 3],
}

fn port() -> &'static Port {
    static PORT: OnceLock<Port> = OnceLock::new();
    PORT.get_or_init(|| {
        std::env::set_var("VMAD_TRANSPORT", "sim");
        assert_eq!(ports::umad_init(), 0);
        // SAFETY: a NUL-terminated name; the masks are 16 readable bytes.
        unsafe {
            let id = ports::umad_open_port(c"vmadsim1".as_ptr(), 1);
            assert!(id >= 0, "open: {id}");
            let none: [c_long; 2] = [0; 2];
            let get: [c_long; 2] = [1 << 1, 0];
            let sa = ports::umad_register(id, 0x03, 2, 1, none.as_ptr());
            let pm = ports::umad_register(id, 0x04, 1, 0, none.as_ptr());
            let vendor = ports::umad_register(id, 0x09, 1, 0, get.as_ptr());
            assert!(sa >= 0 && pm >= 0 && vendor >= 0);
            Port {
                id,
                agents: [sa, pm, vendor],
            }
        }
    })
}

/// `umad_recv(port, buf, &len, 0)` into `umad_size() + room` bytes of fresh memory
/// (uninitialised, or filled), `room` possibly negative.
fn recv(portid: c_int, room: c_int, fill: Option<u8>) -> c_int {
    let size = HDR + usize::try_from(room).unwrap_or(0);
    let mut buf: Vec<u8> = Vec::with_capacity(size);
    if let Some(f) = fill {
        buf.resize(size, f);
    }
    let mut len = room;
    // SAFETY: `buf` is valid for writes of umad_size() + max(room, 0) bytes (a negative
    // *length is refused before the buffer is touched); `len` is an initialised int.
    let r = unsafe { ports::recv_nonblocking(portid, buf.as_mut_ptr().cast(), &mut len) };
    if r >= 0 {
        assert!(len >= 0 && len <= room.max(0), "received {len} into {room}");
    }
    r
}

/// Send `mad` to `dlid` through agent `agent` (umad_set_addr, then umad_send).
fn send(p: &Port, agent: c_int, mad: &[u8; MAD_SIZE], dlid: c_int, timeout_ms: c_int) -> c_int {
    let mut buf = vec![0u8; HDR + MAD_SIZE];
    buf[HDR..].copy_from_slice(mad);
    let qkey = 0x8001_0000u32 as c_int;
    // SAFETY: `buf` holds umad_size() + 256 initialised bytes, ours alone.
    unsafe {
        assert_eq!(
            header::umad_set_addr(buf.as_mut_ptr().cast(), dlid, 1, 0, qkey),
            0
        );
        ports::umad_send(
            p.id,
            agent,
            buf.as_mut_ptr().cast(),
            MAD_SIZE as c_int,
            timeout_ms,
            0,
        )
    }
}

/// The header functions on a header-sized buffer (with fuzzed extra room and
/// contents), fresh or filled.
fn headers(b: &mut Bytes<'_>) {
    let extra = usize::from(b.u8());
    let mut buf: Vec<u8> = Vec::with_capacity(HDR + extra);
    let p: *mut c_void = buf.as_mut_ptr().cast();
    let ints = [
        b.u32() as c_int,
        b.u32() as c_int,
        b.u32() as c_int,
        b.u32() as c_int,
    ];
    // SAFETY: `p` is valid for writes of umad_size() bytes (uninitialised: only setters).
    unsafe {
        let _ = header::umad_set_pkey(p, ints[0]);
        let _ = header::umad_set_addr(p, ints[0], ints[1], ints[2], ints[3]);
    }
    // Now initialised, with the fuzzer's bytes over part of it.
    buf.resize(HDR + extra, 0);
    let raw = b.take(HDR + extra);
    buf[..raw.len()].copy_from_slice(raw);
    let p: *mut c_void = buf.as_mut_ptr().cast();
    let mut addr = [0u8; 44];
    let raw = b.take(44);
    addr[..raw.len()].copy_from_slice(raw);
    let sel = b.u8();
    // SAFETY: `p` holds umad_size() initialised bytes; `addr` 44 (an ib_mad_addr_t).
    unsafe {
        let _ =
            header::umad_set_addr_net(p, ints[0] as u16, ints[1] as u32, ints[2], ints[3] as u32);
        let grh = if sel & 1 != 0 {
            addr.as_mut_ptr().cast()
        } else {
            core::ptr::null_mut()
        };
        let _ = header::umad_set_grh(p, grh);
        let _ = header::umad_set_pkey(p, ints[3]);
        let _ = header::umad_get_pkey(p);
        let _ = header::umad_status(p);
        assert_eq!(
            header::umad_get_mad(p),
            p.cast::<u8>().add(header::umad_size()).cast()
        );
        let a = header::umad_get_mad_addr(p);
        assert!(!a.is_null());
        if sel == 0xd5 {
            dump::umad_dump(p);
            dump::umad_addr_dump(a);
        }
        // NULL is refused, never read.
        let null = core::ptr::null_mut();
        assert!(header::umad_set_pkey(null, 0) < 0 && header::umad_get_pkey(null) < 0);
        assert!(header::umad_status(null) < 0 && header::umad_get_mad(null).is_null());
    }
}

fuzz_target!(|data: &[u8]| {
    let p = port();
    let mut b = Bytes(data);
    let mut steps = 0;
    while !b.is_empty() && steps < 64 {
        steps += 1;
        match b.u8() % 6 {
            0 => headers(&mut b),
            // A request that gets an answer: SA GetTable NodeRecord (RMPP), PerfMgt Get
            // of PortCounters from the switch, a vendor Get to ourselves.
            1 => {
                let mut m = [0u8; MAD_SIZE];
                let tid = u64::from(b.u32());
                m[8..16].copy_from_slice(&tid.to_be_bytes());
                let (agent, dlid) = match b.u8() % 3 {
                    0 => {
                        m[..4].copy_from_slice(&[1, 0x03, 2, 0x12]);
                        m[16..18].copy_from_slice(&0x11u16.to_be_bytes());
                        (p.agents[0], 1)
                    }
                    1 => {
                        m[..4].copy_from_slice(&[1, 0x04, 1, 0x01]);
                        m[16..18].copy_from_slice(&0x12u16.to_be_bytes());
                        m[64 + 1] = 1; // PortSelect
                        (p.agents[1], 3)
                    }
                    _ => {
                        m[..4].copy_from_slice(&[1, 0x09, 1, 0x01]);
                        (p.agents[2], MY_LID)
                    }
                };
                let _ = send(p, agent, &m, dlid, 50);
            }
            // The fuzzer's MAD through a fuzzed agent id, without a response timeout.
            2 => {
                let m = mad(&mut b);
                let agent = match b.u8() {
                    x @ 0..=0xf0 => p.agents[usize::from(x % 3)],
                    x => c_int::from(x) - 0xf8,
                };
                let dlid = c_int::from(b.u8() % 5);
                let _ = send(p, agent, &m, dlid, 0);
            }
            // Receive into a buffer of the fuzzer's length.
            3 | 4 => {
                let room = match b.u8() {
                    0..=0xef => c_int::from(b.u16() % 1024),
                    0xf0..=0xf7 => -c_int::from(b.u8()),
                    _ => b.u32() as c_int % 65536,
                };
                let fill = (b.u8() & 1 != 0).then_some(0xa5);
                let portid = if b.u8() == 0xff {
                    c_int::from(b.u8())
                } else {
                    p.id
                };
                let _ = recv(portid, room, fill);
            }
            // NULL buffer or length.
            _ => {
                let mut len: c_int = 256;
                // SAFETY: NULL pointers, which the contract allows (refused).
                unsafe {
                    assert!(ports::recv_nonblocking(p.id, core::ptr::null_mut(), &mut len) < 0);
                    let mut buf = [0u8; HDR];
                    let r = ports::recv_nonblocking(
                        p.id,
                        buf.as_mut_ptr().cast(),
                        core::ptr::null_mut(),
                    );
                    assert!(r < 0);
                }
            }
        }
    }
    // Leave nothing queued for the next input: every message taken whole.
    for _ in 0..256 {
        if recv(p.id, 1 << 16, None) < 0 {
            break;
        }
    }
});
