//! Agent registration rules and TID high words.

use super::harness::*;
use crate::engine::{AgentId, AgentSpec, Engine, EngineConfig};
use crate::types::Qp;
use crate::wire::mad::MgmtClass;
use crate::Error;

fn engine() -> Engine {
    Engine::new(EngineConfig::default())
}

#[test]
fn agents_conflicting_registration_refused() {
    let mut e = engine();
    e.register(gsi_agent(0x04, 0, &[0x01, 0x02])).unwrap();
    let err = e.register(gsi_agent(0x04, 0, &[0x02, 0x03])).unwrap_err();
    assert!(
        matches!(
            err,
            Error::MethodInUse {
                class: 0x04,
                version: 1,
                method: 0x02
            }
        ),
        "{err}"
    );
    // Same methods, other class version: no conflict.
    let mut other = gsi_agent(0x04, 0, &[0x01, 0x02]);
    other.class_version = 2;
    e.register(other).unwrap();
    // Client-only agents never conflict.
    e.register(gsi_agent(0x04, 0, &[])).unwrap();
    e.register(gsi_agent(0x04, 0, &[])).unwrap();
}

#[test]
fn agents_vendor_range2_conflict_is_per_oui() {
    let mut e = engine();
    let vendor = |oui| AgentSpec {
        oui,
        ..gsi_agent(0x30, 0, &[0x01])
    };
    e.register(vendor(0x1234)).unwrap();
    e.register(vendor(0x5678)).unwrap();
    assert!(matches!(
        e.register(vendor(0x1234)),
        Err(Error::MethodInUse { .. })
    ));
}

#[test]
fn agents_invalid_specs_refused() {
    let mut e = engine();
    let base = gsi_agent(0x03, 1, &[0x01]);
    let bad = [
        AgentSpec {
            rmpp_version: 2,
            ..base
        },
        AgentSpec {
            class_version: 0x83,
            ..base
        },
        AgentSpec {
            mgmt_class: MgmtClass::from(0),
            ..base
        },
        AgentSpec {
            mgmt_class: MgmtClass::from(0x50),
            ..base
        },
        AgentSpec {
            mgmt_class: MgmtClass::from(0x30),
            oui: 0,
            ..base
        },
        AgentSpec {
            mgmt_class: MgmtClass::from(0x04),
            rmpp_version: 1,
            ..base
        },
        AgentSpec {
            qp: Qp::Smi,
            ..base
        },
        AgentSpec {
            mgmt_class: MgmtClass::from(0x81),
            rmpp_version: 0,
            qp: Qp::Gsi,
            ..base
        },
    ];
    for spec in bad {
        let err = e.register(spec).unwrap_err();
        // (Its errno, EINVAL, is vmad's: see its error conversion test.)
        assert!(matches!(err, Error::InvalidArgument(_)), "{spec:?}: {err}");
    }
    // The good ones of each kind pass.
    e.register(base).unwrap();
    e.register(AgentSpec {
        mgmt_class: MgmtClass::from(0x81),
        qp: Qp::Smi,
        rmpp_version: 0,
        ..base
    })
    .unwrap();
    e.register(AgentSpec {
        mgmt_class: MgmtClass::from(0x30),
        oui: 0x0002c9,
        ..base
    })
    .unwrap();
}

#[test]
fn agents_limit_is_32_per_port() {
    let mut e = engine();
    let ids: Vec<AgentId> = (0..32)
        .map(|_| e.register(gsi_agent(0x04, 0, &[])).unwrap())
        .collect();
    assert_eq!(ids, (0..32).map(AgentId).collect::<Vec<_>>());
    let err = e.register(gsi_agent(0x04, 0, &[])).unwrap_err();
    assert!(matches!(err, Error::LimitReached(_)));
    // A freed slot is reused: ids are slot indexes.
    e.unregister(AgentId(5)).unwrap();
    assert_eq!(e.register(gsi_agent(0x04, 0, &[])).unwrap(), AgentId(5));
    assert!(matches!(
        e.unregister(AgentId(40)),
        Err(Error::UnknownAgent(40))
    ));
}

#[test]
fn agents_hi_tid_is_24_bit_cyclic_and_seeded() {
    let hi = |seed| {
        let mut e = Engine::new(EngineConfig {
            rng_seed: Some(seed),
            ..EngineConfig::default()
        });
        let a = e.register(gsi_agent(0x04, 0, &[])).unwrap();
        let b = e.register(gsi_agent(0x04, 0, &[])).unwrap();
        e.unregister(a).unwrap();
        let c = e.register(gsi_agent(0x04, 0, &[])).unwrap();
        assert_eq!(c, a, "slot reused");
        (e.hi_tid(a).unwrap(), e.hi_tid(b).unwrap())
    };
    let (x, y) = hi(1);
    assert!(x < 1 << 24 && y < 1 << 24);
    // The slot came back but the high word moved on (cyclic allocation).
    assert_eq!((hi(1)), (x, y), "same seed, same words");
    let (p, q) = hi(2);
    assert_ne!((p, q), (x, y), "seeded start");
    let mut e = Engine::new(EngineConfig {
        rng_seed: Some(1),
        ..EngineConfig::default()
    });
    let a = e.register(gsi_agent(0x04, 0, &[])).unwrap();
    let first = e.hi_tid(a).unwrap();
    e.unregister(a).unwrap();
    let b = e.register(gsi_agent(0x04, 0, &[])).unwrap();
    assert_eq!(e.hi_tid(b).unwrap(), (first + 1) % (1 << 24));
}

#[test]
fn agents_client_only_receives_no_requests() {
    let mut f = Fabric::new(2, LinkModel::perfect(), 3);
    let _client = f.register(1, gsi_agent(0x04, 0, &[]));
    let sender = f.register(0, gsi_agent(0x04, 0, &[]));
    f.send(0, sender, 1, &mad(0x04, 0x03, 1), 0, 0).unwrap(); // Send: nobody serves it
    f.drive_bounded(50);
    assert!(recvs(&f.take_events(1)).is_empty());
    assert_eq!(f.nodes[1].engine.stats().dropped_unclaimed, 1);
}
