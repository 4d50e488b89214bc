//! The SA slot: SA MADs and traps to the master SM's port reach the fabric's
//! [`SaPort`] (here a stand-in that echoes), its answers go back from that port,
//! and an application holding the SM role gets them instead.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::{Fabric, SaPort};
use crate::engine::{RecvMeta, Transmit};
use crate::transport::Transport;
use crate::types::{MadAddr, Qp, GSI_QKEY};
use crate::wire::MAD_SIZE;

/// Answers every MAD with itself as a GetResp, to where it came from; counts them.
#[derive(Debug, Default)]
struct Echo(Arc<AtomicUsize>);

impl SaPort for Echo {
    fn exchange(
        &self,
        meta: RecvMeta,
        mad: &[u8],
        db: &super::subnet_db::SubnetDb,
    ) -> Vec<(Transmit, Box<[u8; MAD_SIZE]>)> {
        self.0.fetch_add(1, Ordering::Relaxed);
        let mut out = Box::new([0u8; MAD_SIZE]);
        out[..mad.len()].copy_from_slice(mad);
        out[3] = 0x81;
        // Show the SA what it reads from: the sweep's node count.
        out[255] = db.nodes.len() as u8;
        let dest = MadAddr {
            qkey: GSI_QKEY,
            ..meta.src
        };
        vec![(
            Transmit {
                qp: Qp::Gsi,
                dest,
                len: MAD_SIZE,
                timeout_ms: 0,
            },
            out,
        )]
    }

    fn trap(
        &self,
        notice: &[u8],
        _db: &super::subnet_db::SubnetDb,
    ) -> Vec<(Transmit, Box<[u8; MAD_SIZE]>)> {
        // Traps count in hundreds; nobody subscribed, so nothing to report.
        self.0
            .fetch_add(100 * usize::from(notice[0] == 0x81), Ordering::Relaxed);
        Vec::new()
    }
}

fn sa_get(tid: u8) -> [u8; MAD_SIZE] {
    let mut m = [0u8; MAD_SIZE];
    m[..4].copy_from_slice(&[1, 0x03, 2, 0x01]);
    m[15] = tid;
    m
}

/// Send `mad` to `lid`: an SMP (class 0x01) to QP0, anything else to QP1.
pub(super) fn send(t: &mut dyn Transport, mad: &[u8; MAD_SIZE], lid: u16) {
    let (qp, qpn, qkey) = match mad[1] {
        0x01 => (Qp::Smi, 0, 0),
        _ => (Qp::Gsi, 1, GSI_QKEY),
    };
    let dest = MadAddr {
        qpn,
        qkey,
        lid,
        ..MadAddr::default()
    };
    t.transmit(&mut |buf| {
        buf.copy_from_slice(mad);
        Some(Transmit {
            qp,
            dest,
            len: MAD_SIZE,
            timeout_ms: 0,
        })
    })
    .unwrap();
}

pub(super) fn recv(t: &mut dyn Transport) -> Option<(RecvMeta, Vec<u8>)> {
    let mut got = None;
    // Frames are walked synchronously: whatever was sent is queued already.
    t.wait(Some(Duration::ZERO)).unwrap();
    t.recv_burst(1, &mut |meta, mad| got = Some((meta, mad.to_vec())))
        .unwrap();
    got
}

#[test]
fn sa_mads_reach_the_sa_port_while_the_built_in_sm_is_master() {
    let f = Fabric::builder()
        .ca("sap0")
        .switch("saps", 4)
        .ca("sap1")
        .link("sap0", 1, "saps", 1)
        .link("saps", 2, "sap1", 1)
        .build_private()
        .unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    // In place of the fabric's own SA.
    *super::write(&f.inner.sa) = Arc::new(Echo(calls.clone()));
    let mut client = f.open("sap1", 1).unwrap();
    send(&mut client, &sa_get(1), 1);
    let (meta, mad) = recv(&mut client).expect("the SA answered");
    assert_eq!(
        (meta.src.lid, meta.src.qpn, mad[3], mad[15], mad[255]),
        (1, 1, 0x81, 1, 3)
    );
    // A trap to the SM's LID: TrapRepress from the SM, the Notice to the SA.
    let mut trap = [0u8; MAD_SIZE];
    trap[..4].copy_from_slice(&[1, 0x01, 1, 0x05]);
    trap[15] = 9;
    trap[64] = 0x81; // Notice: generic, type urgent
    send(&mut client, &trap, 1);
    let (meta, mad) = recv(&mut client).expect("TrapRepress");
    assert_eq!(
        (meta.qp, mad[3], mad[15], mad[64]),
        (Qp::Smi, 0x07, 9, 0x81)
    );
    assert_eq!(calls.load(Ordering::Relaxed), 101);
    // An application takes the SM role on the SM's port: the SA steps aside too.
    let mut sm = f.open("sap0", 1).unwrap();
    sm.set_sm(true).unwrap();
    send(&mut client, &sa_get(2), 1);
    let (meta, mad) = recv(&mut sm).expect("the application got the SA request");
    assert_eq!((meta.src.lid, mad[3], mad[15]), (3, 0x01, 2));
    assert_eq!(calls.load(Ordering::Relaxed), 101);
    assert!(recv(&mut client).is_none());
}
