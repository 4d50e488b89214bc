//! The queries both SAs are asked, in order (the Sets and Deletes change
//! the SA's state for the queries after them). Records that name a port
//! name it by GUID, turned into each SA's LID when sent.

use super::Side;

/// The ports of tests/topo/small.net (ibsim's GUID numbering, which the
/// embedded fabric follows): CA Hn's port GUID, switch Sn's GUID.
const H1: u64 = 0x10_0001;
const H2: u64 = 0x10_0003;
const H3: u64 = 0x10_0005;
const H4: u64 = 0x10_0007;
const S1: u64 = 0x20_0000;
const PREFIX: u64 = 0xfe80_0000_0000_0000;

const GET: u8 = 0x01;
const SET: u8 = 0x02;
const GET_TABLE: u8 = 0x12;
const GET_MULTI: u8 = 0x14;
const DELETE: u8 = 0x15;

type Record = Box<dyn Fn(&Side) -> Vec<u8>>;

/// One query.
pub(super) struct Query {
    pub(super) name: &'static str,
    pub(super) method: u8,
    pub(super) attr: u16,
    pub(super) mask: u64,
    pub(super) sm_key: u64,
    pub(super) attr_mod: u32,
    pub(super) record: Record,
}

fn q(name: &'static str, method: u8, attr: u16, mask: u64, record: Record) -> Query {
    Query {
        name,
        method,
        attr,
        mask,
        sm_key: 0,
        attr_mod: 0,
        record,
    }
}

/// `q` with the SA's SM_Key (OpenSM's default, 1): a trusted request.
fn trusted(mut q: Query) -> Query {
    q.sm_key = 1;
    q
}

fn zeros(n: usize) -> Record {
    Box::new(move |_| vec![0; n])
}

fn gid(guid: u64) -> [u8; 16] {
    let mut g = [0u8; 16];
    g[..8].copy_from_slice(&PREFIX.to_be_bytes());
    g[8..].copy_from_slice(&guid.to_be_bytes());
    g
}

/// A record of `len` bytes with the LID of `guid` at offset 0.
fn by_lid(len: usize, guid: u64) -> Record {
    Box::new(move |s| {
        let mut r = vec![0; len];
        r[..2].copy_from_slice(&s.lid(guid).to_be_bytes());
        r
    })
}

/// A PathRecord query; `f` fills it given the side.
fn path(f: impl Fn(&Side, &mut [u8]) + 'static) -> Record {
    Box::new(move |s| {
        let mut r = vec![0u8; 64];
        f(s, &mut r);
        r
    })
}

/// A MultiPathRecord: sources, destinations, NumbPath.
fn multipath(sgids: &'static [u64], dgids: &'static [u64], numb: u8) -> Record {
    Box::new(move |_| {
        let mut m = vec![0u8; 24 + 16 * (sgids.len() + dgids.len())];
        m[5] = numb;
        m[15] = sgids.len() as u8;
        m[16] = dgids.len() as u8;
        for (i, g) in sgids.iter().chain(dgids).enumerate() {
            m[24 + 16 * i..][..16].copy_from_slice(&gid(*g));
        }
        m
    })
}

/// An MCMemberRecord for H2's port: MGID, Q_Key, P_Key 0xffff, JoinState.
fn member(mgid_low: u8, join_state: u8) -> Record {
    Box::new(move |_| {
        let mut r = vec![0u8; 56];
        // Not an IPoIB MGID (ff12:401b/601b): OpenSM gives those its
        // partition's IPoIB parameters (Q_Key 0xb1b) and refuses others.
        r[..4].copy_from_slice(&[0xff, 0x12, 0x12, 0x34]);
        r[4..6].copy_from_slice(&[0xff, 0xff]);
        r[15] = mgid_low;
        r[16..32].copy_from_slice(&gid(H2));
        r[32..36].copy_from_slice(&0x1234u32.to_be_bytes());
        r[40..42].copy_from_slice(&[0xff, 0xff]); // P_Key
        r[48] = 0x20 | join_state; // Scope 2 (link-local), JoinState
        r
    })
}

/// The IPoIB broadcast group's MCMemberRecord for H2's port: JoinState, Q_Key.
fn ipoib(join_state: u8, qkey: u32) -> Record {
    Box::new(move |_| {
        let mut r = vec![0u8; 56];
        r[..16].copy_from_slice(&[
            0xff, 0x12, 0x40, 0x1b, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff,
        ]);
        r[16..32].copy_from_slice(&gid(H2));
        r[32..36].copy_from_slice(&qkey.to_be_bytes());
        r[48] = 0x20 | join_state;
        r
    })
}

/// A ServiceRecord for H2: ID 0x1122, a name, a full ServiceKey.
fn service(lease: u32) -> Record {
    Box::new(move |_| {
        let mut r = vec![0u8; 176];
        r[..8].copy_from_slice(&0x1122u64.to_be_bytes());
        r[8..24].copy_from_slice(&gid(H2));
        r[24..26].copy_from_slice(&[0xff, 0xff]);
        r[28..32].copy_from_slice(&lease.to_be_bytes());
        for (i, b) in r[32..48].iter_mut().enumerate() {
            *b = 0xa0 + i as u8;
        }
        r[48..55].copy_from_slice(b"parity\0");
        r
    })
}

/// An InformInfo for generic trap 64 (GID in service) from any LID.
fn inform(subscribe: bool) -> Record {
    Box::new(move |_| {
        let mut r = vec![0u8; 36];
        r[16..18].copy_from_slice(&0xffffu16.to_be_bytes()); // LIDRangeBegin: all
        r[22] = 1; // IsGeneric
        r[23] = u8::from(subscribe);
        r[24..26].copy_from_slice(&0xffffu16.to_be_bytes()); // Type: all
        r[26..28].copy_from_slice(&64u16.to_be_bytes()); // TrapNumber
        r[28..32].copy_from_slice(&((1u32 << 8) | 18).to_be_bytes()); // QPN 1, RespTimeValue
        r[33..36].copy_from_slice(&[0xff, 0xff, 0xff]); // ProducerType: all
        r
    })
}

// ComponentMask bits used below.
const NR_LID: u64 = 1;
const PIR_LID_PORT: u64 = 0b11;
const PR_DGID: u64 = 1 << 2;
const PR_SGID: u64 = 1 << 3;
const PR_DLID: u64 = 1 << 4;
const PR_SLID: u64 = 1 << 5;
const PR_NUMB_PATH: u64 = 1 << 12;
const PR_SID_MSB: u64 = 1;
const MPR_COUNTS: u64 = (1 << 19) | (1 << 20);
const MCR_JOIN: u64 = 1 | 2 | (1 << 16); // MGID, PortGID, JoinState
const MCR_CREATE: u64 = MCR_JOIN | (1 << 2) | (1 << 6) | (1 << 7) | (1 << 12) | (1 << 13);
const SR_RID: u64 = 0b11; // ServiceID, ServiceGID
const SR_LEASE: u64 = 1 << 4;
const SR_KEY: u64 = 1 << 5;

/// Every query, in order.
pub(super) fn all() -> Vec<Query> {
    let mut v = vec![
        q("ClassPortInfo Get", GET, 0x0001, 0, zeros(0)),
        q("NodeRecord GetTable", GET_TABLE, 0x0011, 0, zeros(108)),
        q(
            "NodeRecord Get by LID",
            GET,
            0x0011,
            NR_LID,
            by_lid(108, H3),
        ),
        q(
            "NodeRecord Get, no mask: too many",
            GET,
            0x0011,
            0,
            zeros(108),
        ),
        q(
            "NodeRecord Get, no such LID",
            GET,
            0x0011,
            NR_LID,
            Box::new(|_| {
                let mut r = vec![0; 108];
                r[..2].copy_from_slice(&0x0bffu16.to_be_bytes());
                r
            }),
        ),
        q("NodeRecord Delete", DELETE, 0x0011, NR_LID, by_lid(108, H3)),
        q("PortInfoRecord GetTable", GET_TABLE, 0x0012, 0, zeros(60)),
        q(
            "PortInfoRecord Get by LID and port",
            GET,
            0x0012,
            PIR_LID_PORT,
            Box::new(|s| {
                let mut r = vec![0; 60];
                r[..2].copy_from_slice(&s.lid(S1).to_be_bytes());
                r[2] = 7;
                r
            }),
        ),
        q(
            "PortInfoRecord by CapabilityMask IsSM, exact",
            GET_TABLE,
            0x0012,
            1 << 7,
            Box::new(|_| {
                let mut r = vec![0; 60];
                r[24..28].copy_from_slice(&2u32.to_be_bytes());
                r
            }),
        ),
        q(
            "NodeRecord by NodeType switch",
            GET_TABLE,
            0x0011,
            1 << 4,
            Box::new(|_| {
                let mut r = vec![0; 108];
                r[6] = 2;
                r
            }),
        ),
        q("LinkRecord GetTable", GET_TABLE, 0x0020, 0, zeros(8)),
        q("LinkRecord by FromLID", GET_TABLE, 0x0020, 1, by_lid(8, S1)),
        q("SwitchInfoRecord GetTable", GET_TABLE, 0x0014, 0, zeros(24)),
        q("GUIDInfoRecord GetTable", GET_TABLE, 0x0030, 0, zeros(72)),
        q("SMInfoRecord GetTable", GET_TABLE, 0x0018, 0, zeros(32)),
        q("SMInfoRecord Get by LID", GET, 0x0018, 1, by_lid(32, H1)),
        q("LFTRecord GetTable", GET_TABLE, 0x0015, 0, zeros(72)),
        q(
            "LFTRecord Get by LID and block",
            GET,
            0x0015,
            0b11,
            by_lid(72, S1),
        ),
        q("MFTRecord GetTable", GET_TABLE, 0x0017, 0, zeros(72)),
        q("P_KeyTableRecord GetTable", GET_TABLE, 0x0033, 0, zeros(72)),
        q("SL2VLTableRecord GetTable", GET_TABLE, 0x0013, 0, zeros(16)),
        q(
            "SL2VLTableRecord GetTable by LID",
            GET_TABLE,
            0x0013,
            0b1,
            by_lid(16, S1),
        ),
        q(
            "VLArbitrationTableRecord GetTable",
            GET_TABLE,
            0x0036,
            0,
            zeros(72),
        ),
        q("PathRecord GetTable", GET_TABLE, 0x0035, 0, zeros(64)),
        q(
            "PathRecord Get by SLID, DLID",
            GET,
            0x0035,
            PR_SLID | PR_DLID,
            path(|s, r| {
                r[40..42].copy_from_slice(&s.lid(H4).to_be_bytes());
                r[42..44].copy_from_slice(&s.lid(H2).to_be_bytes());
            }),
        ),
        q(
            "PathRecord GetTable by SGID, DGID (saquery -P)",
            GET_TABLE,
            0x0035,
            PR_SGID | PR_DGID | PR_NUMB_PATH,
            path(|_, r| {
                r[8..24].copy_from_slice(&gid(H3));
                r[24..40].copy_from_slice(&gid(H1));
                r[49] = 0x7f;
            }),
        ),
        q(
            "PathRecord GetTable to a switch",
            GET_TABLE,
            0x0035,
            PR_SGID | PR_DGID,
            path(|_, r| {
                r[8..24].copy_from_slice(&gid(S1));
                r[24..40].copy_from_slice(&gid(H4));
            }),
        ),
        q(
            "PathRecord Get, unknown DGID",
            GET,
            0x0035,
            PR_SGID | PR_DGID,
            path(|_, r| {
                r[8..24].copy_from_slice(&gid(0x99_9999));
                r[24..40].copy_from_slice(&gid(H1));
            }),
        ),
        q(
            "PathRecord GetTable, half a ServiceID",
            GET_TABLE,
            0x0035,
            PR_SID_MSB,
            zeros(64),
        ),
        q("PathRecord Set", SET, 0x0035, 0, zeros(64)),
        q(
            "MultiPathRecord GetMulti",
            GET_MULTI,
            0x003a,
            MPR_COUNTS,
            multipath(&[H1], &[H3, H4], 0),
        ),
        q(
            "MultiPathRecord GetMulti, no counts",
            GET_MULTI,
            0x003a,
            1 << 19,
            multipath(&[H1], &[H3], 0),
        ),
        q("MCMemberRecord GetTable", GET_TABLE, 0x0038, 0, zeros(56)),
        q(
            "MCMemberRecord non-member join of a missing group",
            SET,
            0x0038,
            MCR_CREATE,
            member(0x51, 2),
        ),
        q(
            "MCMemberRecord join without JoinState mask",
            SET,
            0x0038,
            1 | 2,
            member(0x51, 1),
        ),
        q(
            "MCMemberRecord full join creates",
            SET,
            0x0038,
            MCR_CREATE,
            member(0x51, 1),
        ),
        q(
            "MCMemberRecord GetTable after the join",
            GET_TABLE,
            0x0038,
            1,
            member(0x51, 0),
        ),
        q(
            "MCMemberRecord leave",
            DELETE,
            0x0038,
            MCR_JOIN,
            member(0x51, 1),
        ),
        q(
            "ServiceRecord Set without ServiceGID",
            SET,
            0x0031,
            1,
            service(0xffff_ffff),
        ),
        q(
            "ServiceRecord Set with a ServiceKey",
            SET,
            0x0031,
            SR_RID | SR_LEASE | SR_KEY,
            service(0xffff_ffff),
        ),
        q("ServiceRecord GetTable", GET_TABLE, 0x0031, 0, zeros(176)),
        q("ServiceRecord Get by name", GET, 0x0031, 1 << 6, service(0)),
        q("ServiceRecord Delete", DELETE, 0x0031, SR_RID, service(0)),
        q(
            "ServiceRecord Get after Delete",
            GET,
            0x0031,
            SR_RID,
            service(0),
        ),
        q("InformInfoRecord GetTable", GET_TABLE, 0x00f3, 0, zeros(60)),
        q(
            "InformInfo Set: subscribe to trap 64",
            SET,
            0x0003,
            0,
            inform(true),
        ),
        q(
            "InformInfoRecord GetTable, subscribed",
            GET_TABLE,
            0x00f3,
            0,
            zeros(60),
        ),
        trusted(q(
            "InformInfoRecord GetTable, subscribed, trusted",
            GET_TABLE,
            0x00f3,
            0,
            zeros(60),
        )),
        q("InformInfo Set: unsubscribe", SET, 0x0003, 0, inform(false)),
        q(
            "InformInfoRecord GetTable, unsubscribed",
            GET_TABLE,
            0x00f3,
            0,
            zeros(60),
        ),
        q(
            "NodeRecord Get by PortGUID",
            GET,
            0x0011,
            1 << 8,
            Box::new(|_| {
                let mut r = vec![0; 108];
                r[24..32].copy_from_slice(&H4.to_be_bytes());
                r
            }),
        ),
        q(
            "PortInfoRecord Get by a switch's LID: too many",
            GET,
            0x0012,
            1,
            by_lid(60, S1),
        ),
        q(
            "PortInfoRecord GetTable by a switch's LID",
            GET_TABLE,
            0x0012,
            1,
            by_lid(60, S1),
        ),
        q(
            "LinkRecord Get by FromLID and FromPort",
            GET,
            0x0020,
            0b11,
            Box::new(|s| {
                let mut r = vec![0; 8];
                r[..2].copy_from_slice(&s.lid(S1).to_be_bytes());
                r[2] = 7;
                r
            }),
        ),
        q(
            "PathRecord GetTable by SLID",
            GET_TABLE,
            0x0035,
            PR_SLID,
            path(|s, r| {
                r[42..44].copy_from_slice(&s.lid(H3).to_be_bytes());
            }),
        ),
        q(
            "PathRecord GetTable by DGID",
            GET_TABLE,
            0x0035,
            PR_DGID,
            path(|_, r| {
                r[8..24].copy_from_slice(&gid(H1));
            }),
        ),
        q(
            "PathRecord, SGID and SLID of different ports",
            GET_TABLE,
            0x0035,
            PR_SGID | PR_SLID,
            path(|s, r| {
                r[24..40].copy_from_slice(&gid(H1));
                r[42..44].copy_from_slice(&s.lid(H3).to_be_bytes());
            }),
        ),
        q(
            "PathRecord, invalid MTU with its selector",
            GET_TABLE,
            0x0035,
            (1 << 16) | (1 << 17),
            path(|_, r| {
                r[54] = 0x80 | 7;
            }),
        ),
        q(
            "PathRecord, MTU above 256",
            GET_TABLE,
            0x0035,
            (1 << 16) | (1 << 17) | PR_SGID,
            path(|_, r| {
                r[24..40].copy_from_slice(&gid(H2));
                r[54] = 1; // selector 0 (greater than), 256
            }),
        ),
        q(
            "PathRecord by P_Key 0xffff",
            GET_TABLE,
            0x0035,
            (1 << 13) | PR_SGID,
            path(|_, r| {
                r[24..40].copy_from_slice(&gid(H2));
                r[50..52].copy_from_slice(&[0xff, 0xff]);
            }),
        ),
        q(
            "PathRecord by P_Key 0x1234: none",
            GET_TABLE,
            0x0035,
            (1 << 13) | PR_SGID,
            path(|_, r| {
                r[24..40].copy_from_slice(&gid(H2));
                r[50..52].copy_from_slice(&[0x12, 0x34]);
            }),
        ),
        q(
            "PathRecord by SL 1",
            GET_TABLE,
            0x0035,
            (1 << 15) | PR_SGID,
            path(|_, r| {
                r[24..40].copy_from_slice(&gid(H2));
                r[53] = 1;
            }),
        ),
        q(
            "MCMemberRecord non-member join of the IPoIB broadcast group",
            SET,
            0x0038,
            MCR_JOIN,
            ipoib(2, 0x0b1b),
        ),
        q(
            "MCMemberRecord Get by MGID and PortGID",
            GET,
            0x0038,
            1 | 2,
            ipoib(0, 0),
        ),
        q(
            "MCMemberRecord full join, wrong Q_Key",
            SET,
            0x0038,
            MCR_JOIN | (1 << 2),
            ipoib(1, 0x1234),
        ),
        q(
            "MCMemberRecord full join, right Q_Key",
            SET,
            0x0038,
            MCR_JOIN | (1 << 2),
            ipoib(1, 0x0b1b),
        ),
        q(
            "MCMemberRecord GetTable by MGID",
            GET_TABLE,
            0x0038,
            1,
            ipoib(0, 0),
        ),
        q(
            "MCMemberRecord leave of the full membership",
            DELETE,
            0x0038,
            MCR_JOIN,
            ipoib(1, 0),
        ),
        q(
            "MCMemberRecord leave of a port not joined",
            DELETE,
            0x0038,
            MCR_JOIN,
            ipoib(4, 0),
        ),
        q(
            "MCMemberRecord join, invalid rate with selector",
            SET,
            0x0038,
            MCR_JOIN | (1 << 8) | (1 << 9),
            Box::new(|s| {
                let mut r = ipoib(1, 0x0b1b)(s);
                r[42] = 0x80 | 1;
                r
            }),
        ),
        q(
            "ServiceRecord Set without P_Key",
            SET,
            0x0031,
            SR_RID,
            Box::new(|s| {
                let mut r = service(0xffff_ffff)(s);
                r[24..26].fill(0);
                r[0] = 0x42;
                r
            }),
        ),
        q(
            "ServiceRecord GetTable by GID",
            GET_TABLE,
            0x0031,
            2,
            service(0),
        ),
        q(
            "PathRecord by ServiceID",
            GET_TABLE,
            0x0035,
            PR_SID_MSB | 2 | PR_SLID | PR_DLID,
            path(|s, r| {
                r[..8].copy_from_slice(&0x1122_3344_5566_7788u64.to_be_bytes());
                r[40..42].copy_from_slice(&s.lid(H1).to_be_bytes());
                r[42..44].copy_from_slice(&s.lid(H2).to_be_bytes());
            }),
        ),
        q(
            "MultiPathRecord GetMulti, NumbPath 1",
            GET_MULTI,
            0x003a,
            MPR_COUNTS | (1 << 6),
            multipath(&[H1], &[H3, H4], 1),
        ),
        q(
            "MultiPathRecord GetMulti, two by two",
            GET_MULTI,
            0x003a,
            MPR_COUNTS,
            multipath(&[H1, H2], &[H3, H4], 0),
        ),
        q(
            "MultiPathRecord GetMulti, unknown GID",
            GET_MULTI,
            0x003a,
            MPR_COUNTS,
            multipath(&[H1], &[0x99_9999], 0),
        ),
        q("Unknown attribute", GET, 0x00ff, 0, zeros(8)),
    ];
    let mut trusted = q(
        "ServiceRecord Set, trusted (SM_Key 1)",
        SET,
        0x0031,
        SR_RID | SR_KEY,
        service(0xffff_ffff),
    );
    trusted.sm_key = 1;
    v.push(trusted);
    let mut enhanced = q(
        "PortInfoRecord by CapabilityMask IsSM, enhanced (saquery -s)",
        GET_TABLE,
        0x0012,
        1 << 7,
        Box::new(|_| {
            let mut r = vec![0; 60];
            r[24..28].copy_from_slice(&2u32.to_be_bytes());
            r
        }),
    );
    enhanced.attr_mod = 1 << 31;
    v.push(enhanced);
    let mut pkeys = q(
        "P_KeyTableRecord GetTable, trusted",
        GET_TABLE,
        0x0033,
        0,
        zeros(72),
    );
    pkeys.sm_key = 1;
    v.push(pkeys);
    let mut pkeys = q(
        "P_KeyTableRecord Get by LID and block, trusted",
        GET,
        0x0033,
        0b11,
        by_lid(72, H3),
    );
    pkeys.sm_key = 1;
    v.push(pkeys);
    let mut wrong = q(
        "ServiceRecord Get, wrong SM_Key: ignored",
        GET,
        0x0031,
        SR_RID,
        service(0),
    );
    wrong.sm_key = 0x77;
    v.push(wrong);
    v
}
