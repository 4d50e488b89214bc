//! The embedded fabric as a transport: delivery, addressing, registry, faults.

use std::time::Duration;

use vmad::clock::VirtualClock;
use vmad::subnet::{Fabric, FaultConfig};
use vmad::transport::{registry, Transport};
use vmad::types::{GrhAddr, MadAddr, Qp};

use crate::util::*;

fn gmp(tid: u64) -> [u8; 256] {
    let mut m = [0u8; 256];
    m[0] = 1;
    m[1] = 0x05; // Baseboard management: no agent in the fabric answers it
    m[2] = 1;
    m[3] = 0x01;
    m[8..16].copy_from_slice(&tid.to_be_bytes());
    m[200] = tid as u8;
    m
}

#[test]
fn gmp_reaches_the_other_ca_with_source_address() {
    let f = Fabric::builder()
        .ca("sfa0")
        .ca("sfa1")
        .link("sfa0", 1, "sfa1", 1)
        .build_private()
        .unwrap();
    let mut a = f.open("sfa0", 1).unwrap();
    let mut b = f.open("sfa1", 1).unwrap();
    send(&mut a, Qp::Gsi, gsi(2), &gmp(0x55));
    let (meta, mad) = recv(&mut b);
    assert_eq!(meta.qp, Qp::Gsi);
    assert_eq!(meta.src.lid, 1);
    assert_eq!(meta.src.qpn, 1);
    assert_eq!(meta.src.grh, None);
    assert_eq!(mad, gmp(0x55).to_vec());
}

#[test]
fn grh_carries_the_sender_gid() {
    let f = Fabric::builder()
        .ca("sfg0")
        .ca("sfg1")
        .link("sfg0", 1, "sfg1", 1)
        .build_private()
        .unwrap();
    let mut a = f.open("sfg0", 1).unwrap();
    let mut b = f.open("sfg1", 1).unwrap();
    let dest = MadAddr {
        grh: Some(GrhAddr {
            gid: b.gid(),
            hop_limit: 7,
            traffic_class: 3,
            flow_label: 0x12345,
            ..GrhAddr::default()
        }),
        ..gsi(2)
    };
    send(&mut a, Qp::Gsi, dest, &gmp(1));
    let (meta, _) = recv(&mut b);
    let grh = meta.src.grh.expect("GRH");
    assert_eq!(grh.gid, a.gid());
    assert_eq!(&grh.gid[..8], &[0xfe, 0x80, 0, 0, 0, 0, 0, 0]);
    assert_eq!(
        (grh.hop_limit, grh.traffic_class, grh.flow_label),
        (7, 3, 0x12345)
    );
}

#[test]
fn lid_routing_through_switches_and_attrs() {
    let f = Fabric::builder()
        .ca("sfl0")
        .switch("sflS", 8)
        .switch("sflT", 8)
        .ca("sfl1")
        .link("sfl0", 1, "sflS", 5)
        .link("sflS", 1, "sflT", 7)
        .link("sflT", 2, "sfl1", 1)
        .build_private()
        .unwrap();
    let mut a = f.open("sfl0", 1).unwrap();
    let mut b = f.open("sfl1", 1).unwrap();
    let lid_b = f.lid("sfl1", 1).unwrap();
    assert_eq!(b.attrs().lid, lid_b);
    assert_eq!(b.attrs().state, 4);
    assert_eq!(b.attrs().node_type, 1);
    send(&mut a, Qp::Gsi, gsi(lid_b), &gmp(9));
    let (meta, mad) = recv(&mut b);
    assert_eq!(meta.src.lid, 1);
    assert_eq!(be64(&mad, 8), 9);
    // And back.
    send(&mut b, Qp::Gsi, gsi(1), &gmp(10));
    assert_eq!(be64(&recv(&mut a).1, 8), 10);
}

#[test]
fn a_port_opens_once_at_a_time() {
    let f = Fabric::builder().ca("sfo0").build_private().unwrap();
    let t = f.open("sfo0", 1).unwrap();
    assert_eq!(
        f.open("sfo0", 1).unwrap_err().errno(),
        vmad::error::errno::EADDRINUSE
    );
    drop(t);
    f.open("sfo0", 1).unwrap();
    assert_eq!(
        f.open("nope", 1).unwrap_err().errno(),
        vmad::error::errno::ENODEV
    );
    let e = f.open("sfo0", 2).unwrap_err();
    assert_eq!(e.errno(), vmad::error::errno::ENODEV);
    assert!(e.to_string().contains("sfo0 has ports 1..=1, not 2"), "{e}");
}

#[test]
fn builder_rejects_bad_descriptions() {
    use vmad::error::errno::EINVAL;
    let bad = [
        Fabric::builder().ca("x").ca("x"),
        Fabric::builder().ca("a_name_of_twenty_byt"),
        Fabric::builder().ca("a").link("a", 1, "b", 1),
        Fabric::builder().ca("a").ca("b").link("a", 2, "b", 1),
        Fabric::builder()
            .ca("a")
            .ca("b")
            .ca("c")
            .link("a", 1, "b", 1)
            .link("a", 1, "c", 1),
        Fabric::builder()
            .ca("a")
            .faults("a", 1, FaultConfig::default()),
    ];
    for b in bad {
        assert_eq!(b.build_private().unwrap_err().errno(), EINVAL);
    }
}

#[test]
fn registry_finds_built_fabrics_and_refuses_duplicates() {
    let f = Fabric::builder()
        .ca("sfr0")
        .ca("sfr1")
        .link("sfr0", 1, "sfr1", 1)
        .build()
        .unwrap();
    assert!(registry::ca_names().contains(&"sfr0".to_string()));
    let info = registry::ca_info("sfr1").unwrap();
    assert_eq!(info.node_guid, f.node_guid("sfr1").unwrap());
    assert_eq!(info.ports.len(), 1);
    assert_eq!(info.ports[0].lid, 2);
    let again = Fabric::builder().ca("sfr0").build();
    assert_eq!(again.unwrap_err().errno(), vmad::error::errno::EADDRINUSE);
    let mut t = registry::open("sfr0", 1).unwrap();
    let mut u = registry::open("sfr1", 0).unwrap();
    send(t.as_mut(), Qp::Gsi, gsi(2), &gmp(3));
    assert_eq!(be64(&recv(u.as_mut()).1, 8), 3);
    f.unregister();
    assert!(!registry::contains("sfr0"));
    assert_eq!(
        registry::open("sfr0", 1).err().unwrap().errno(),
        vmad::error::errno::ENODEV
    );
}

#[test]
fn loss_drops_frames_and_is_counted() {
    let f = Fabric::builder()
        .ca("sfx0")
        .ca("sfx1")
        .link("sfx0", 1, "sfx1", 1)
        .faults(
            "sfx0",
            1,
            FaultConfig {
                loss: 0.5,
                seed: 3,
                ..FaultConfig::default()
            },
        )
        .build_private()
        .unwrap();
    let mut a = f.open("sfx0", 1).unwrap();
    let mut b = f.open("sfx1", 1).unwrap();
    for i in 0..200 {
        send(&mut a, Qp::Gsi, gsi(2), &gmp(i));
    }
    let got = drain(&mut b).len() as u64;
    let stats = f.link_stats("sfx1", 1).unwrap();
    assert_eq!(stats.frames, 200);
    assert_eq!(got, 200 - stats.lost);
    assert!(stats.lost > 50 && stats.lost < 150, "{stats:?}");
}

#[test]
fn dup_reorder_corrupt_happen_and_are_counted() {
    let clock = VirtualClock::new();
    let f = Fabric::builder()
        .clock(clock.clone())
        .ca("sfd0")
        .ca("sfd1")
        .link("sfd0", 1, "sfd1", 1)
        .faults(
            "sfd1",
            1,
            FaultConfig {
                dup: 0.2,
                reorder: 0.2,
                corrupt: 0.2,
                hold: Duration::from_millis(20),
                seed: 11,
                ..FaultConfig::default()
            },
        )
        .build_private()
        .unwrap();
    let mut a = f.open("sfd0", 1).unwrap();
    let mut b = f.open("sfd1", 1).unwrap();
    for i in 0..100u64 {
        send(&mut a, Qp::Gsi, gsi(2), &gmp(i));
    }
    let mut got: Vec<_> = drain(&mut b).into_iter().map(|(_, mad)| mad).collect();
    let stats = f.link_stats("sfd0", 1).unwrap();
    assert!(
        (got.len() as u64) < 100 + stats.duplicated,
        "reordered frames are held back"
    );
    clock.advance(Duration::from_millis(20));
    got.extend(drain(&mut b).into_iter().map(|(_, mad)| mad));
    assert!(
        stats.duplicated > 0 && stats.reordered > 0 && stats.corrupted > 0,
        "{stats:?}"
    );
    assert_eq!(got.len() as u64, 100 + stats.duplicated);
    let clean: Vec<_> = (0..100u64).map(|i| gmp(i).to_vec()).collect();
    let damaged = got.iter().filter(|m| !clean.contains(m)).count() as u64;
    assert!(damaged > 0 && damaged <= stats.corrupted * 2);
    // Reordering: at least one intact frame arrives after a later-sent one.
    let order: Vec<u64> = got
        .iter()
        .filter(|m| clean.contains(m))
        .map(|m| be64(m, 8))
        .collect();
    assert!(order.windows(2).any(|w| w[0] > w[1]), "{order:?}");
}

#[test]
fn same_seed_same_fate() {
    let run = |name: &str| {
        let f = Fabric::builder()
            .ca(&format!("{name}0"))
            .ca(&format!("{name}1"))
            .link(&format!("{name}0"), 1, &format!("{name}1"), 1)
            .faults(
                &format!("{name}0"),
                1,
                FaultConfig {
                    loss: 0.3,
                    seed: 77,
                    ..FaultConfig::default()
                },
            )
            .build_private()
            .unwrap();
        let mut a = f.open(&format!("{name}0"), 1).unwrap();
        let mut b = f.open(&format!("{name}1"), 1).unwrap();
        for i in 0..64 {
            send(&mut a, Qp::Gsi, gsi(2), &gmp(i));
        }
        drain(&mut b)
            .iter()
            .map(|(_, m)| be64(m, 8))
            .collect::<Vec<_>>()
    };
    assert_eq!(run("sfs"), run("sft"));
}

#[test]
fn waker_ends_a_wait() {
    let f = Fabric::builder().ca("sfw0").build_private().unwrap();
    let mut t = f.open("sfw0", 1).unwrap();
    let w = t.waker().unwrap();
    // Whether the wake comes before the wait blocks or while it does, it ends the wait
    // (a wake is kept until a wait takes it); without it this would block forever.
    let h = std::thread::spawn(move || w.wake());
    t.wait(None).unwrap();
    h.join().unwrap();
}

#[test]
fn delay_holds_frames_back() {
    let clock = VirtualClock::new();
    let f = Fabric::builder()
        .clock(clock.clone())
        .ca("sfy0")
        .ca("sfy1")
        .link("sfy0", 1, "sfy1", 1)
        .faults(
            "sfy0",
            1,
            FaultConfig {
                delay: Duration::from_millis(30),
                ..FaultConfig::default()
            },
        )
        .build_private()
        .unwrap();
    let mut a = f.open("sfy0", 1).unwrap();
    let mut b = f.open("sfy1", 1).unwrap();
    send(&mut a, Qp::Gsi, gsi(2), &gmp(1));
    send(&mut a, Qp::Gsi, gsi(2), &gmp(2));
    // Held frames come out in order once due on the fabric's clock, not before.
    clock.advance(Duration::from_micros(29_999));
    assert!(drain(&mut b).is_empty());
    clock.advance(Duration::from_micros(1));
    let got: Vec<u64> = drain(&mut b).iter().map(|(_, m)| be64(m, 8)).collect();
    assert_eq!(got, [1, 2]);
}

/// A request's timeout fires on time while the port thread is parked without the
/// transport and nobody else drives the port: the caller's own turn sent the request
/// (starting its timer), found the thread parked with no deadline at all, and must wake
/// it to wait for the new one. The caller blocks without spinning, so only the port
/// thread can report the timeout; without the wake it never would.
#[test]
fn a_timeout_set_by_a_callers_turn_wakes_the_parked_port_thread() {
    use vmad::engine::{Event, SendRequest};
    use vmad::port::PortConfig;
    let config = PortConfig {
        spin: Duration::ZERO,
        caller_spin: Duration::ZERO,
        ..PortConfig::default()
    };
    let pair = pair_config("sfpk", FaultConfig::default(), config);
    let port = vmad::umad::port(pair.a).unwrap();
    let agent = port.register(client_spec(0x04, 1)).unwrap();
    for round in 0..5u64 {
        let get = gmp_mad(0x04, 1, 0x01, round, 0x10);
        let req = SendRequest {
            // No port has LID 9: the fabric drops the request, and nothing answers.
            addr: gsi(9),
            mad: &get,
            timeout_ms: 20,
            retries: 0,
        };
        port.send(agent, req).unwrap();
        match port.recv(Some(PATIENCE)) {
            Ok(Event::SendTimedOut { .. }) => {}
            other => panic!("round {round}: {other:?}, not the request's timeout"),
        }
    }
}
