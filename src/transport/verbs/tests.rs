//! Unit tests of the verbs transport that need no device.

use super::attrs::rate_gbps;
use super::*;
use crate::types::GSI_QKEY;
use crate::wire::grh;

#[test]
fn gid_preference_is_roce_v2_ipv6_global_first() {
    let v2 = sys::IBV_GID_TYPE_ROCE_V2;
    let v1 = sys::IBV_GID_TYPE_ROCE_V1;
    let link_local = [
        0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0xc0, 0xff, 0xfe, 0, 2, 1, 0, 0,
    ];
    let v4 = grh::ipv4_mapped_gid([192, 0, 2, 1]);
    let mut global = [0u8; 16];
    global[..4].copy_from_slice(&[0x20, 0x01, 0x0d, 0xb8]);
    global[15] = 1;
    assert_eq!(gid_rank(&global, v2), Some(0));
    assert_eq!(gid_rank(&v4, v2), Some(1));
    assert_eq!(gid_rank(&link_local, v2), Some(2));
    assert_eq!(gid_rank(&global, v1), Some(3));
    assert_eq!(gid_rank(&[0; 16], v2), None);
}

#[test]
fn rates() {
    assert_eq!(rate_gbps(2, 1), 10); // 4x SDR
    assert_eq!(rate_gbps(2, 32), 100); // 4x EDR
    assert_eq!(rate_gbps(1, 0), 0);
    assert_eq!(rate_gbps(2, 256), 800); // 4x XDR: only in active_speed_ex
}

#[test]
fn controlled_qkey_refusal_names_the_fix() {
    let e = qkey_error(&io::Error::from_raw_os_error(1), GSI_QKEY);
    assert_eq!(e.errno(), crate::error::errno::EPERM);
    let msg = e.to_string();
    assert!(
        msg.contains("CAP_NET_RAW") && msg.contains("privileged-qkey"),
        "{msg}"
    );
    // A non-controlled Q_Key refused is a plain I/O error.
    let e = qkey_error(&io::Error::from_raw_os_error(1), 0x1234);
    assert_eq!(e.errno(), crate::error::errno::EIO);
}

/// On a machine without RDMA (this CI: no ib_uverbs), opening must fail
/// cleanly with ENODEV; where devices exist, opening a bogus name must.
#[test]
fn no_device_is_a_clean_enodev() {
    let e = VerbsTransport::open(VerbsConfig {
        device: Some("vmad-no-such-device".into()),
        ..Default::default()
    })
    .unwrap_err();
    assert!(matches!(e, Error::NoDevice(_)), "{e}");
    assert_eq!(e.errno(), crate::error::errno::ENODEV);
    if std::env::var_os("RXE_VM").is_none()
        && !std::path::Path::new("/sys/class/infiniband_verbs").exists()
    {
        let e = VerbsTransport::open(VerbsConfig::default()).unwrap_err();
        assert!(matches!(e, Error::NoDevice(_)), "{e}");
        assert!(devices().unwrap().is_empty());
    }
}
