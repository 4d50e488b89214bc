//! The embedded fabric as a managed subnet: topology files, the built-in SM's
//! sweep (LIDs, LFTs, port states through SubnSet), SMInfo, the SM role, PMAs.

use vmad::transport::sim::FabricBuilder;

fn topo(name: &str) -> String {
    let path = format!("{}/tests/topo/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(path).unwrap()
}

#[test]
fn ft234_loads_every_node_with_ibsims_guids() {
    let text = topo("ft234.net");
    let fabric = FabricBuilder::from_topology(&text)
        .unwrap()
        .build_private()
        .unwrap();
    let cas = fabric.ca_names();
    assert_eq!(cas.len(), 12 * 18);
    assert_eq!(fabric.node_guid("H0"), Some(0x100000));
    assert_eq!(fabric.node_guid("H1"), Some(0x100002));
    assert_eq!(fabric.node_guid("L0"), Some(0x200000));
    assert_eq!(fabric.node_guid("S5"), Some(0x200000 + 12 + 5));
}

#[test]
fn register_only_keeps_the_other_cas_out_of_the_registry() {
    let text = topo("small.net")
        .replace("\"H", "\"rgoH")
        .replace("\"S", "\"rgoS");
    let fabric = FabricBuilder::from_topology(&text)
        .unwrap()
        .register_only(&["rgoH2"])
        .build()
        .unwrap();
    assert!(vmad::transport::registry::contains("rgoH2"));
    assert!(!vmad::transport::registry::contains("rgoH1"));
    fabric.unregister();
    assert!(FabricBuilder::from_topology(&text)
        .unwrap()
        .register_only(&["rgoS1"])
        .build()
        .is_err());
}
