//! Quickstart: decode a built-in MAD (the full fabric demo lands with the port layer).
use vmad::wire::{mad, rmpp};

fn main() {
    let mut bytes = [0u8; 256];
    let hdr = mad::Repr {
        base_version: 1,
        mgmt_class: mad::MgmtClass::SubnAdm,
        class_version: 2,
        method: mad::Method::GetTable,
        status: mad::MadStatus::OK,
        class_specific: 0,
        tid: 0x1234,
        attr_id: 0x11,
        attr_mod: 0,
    };
    hdr.emit(&mut mad::Packet::new_unchecked(&mut bytes[..]));
    let parsed = mad::Repr::parse(&mad::Packet::new_checked(&bytes[..]).unwrap()).unwrap();
    let r = rmpp::Repr::parse(&rmpp::Packet::new_checked(&bytes[..]).unwrap()).unwrap();
    println!("decoded: {parsed:?}\nrmpp: {r:?}");
}
