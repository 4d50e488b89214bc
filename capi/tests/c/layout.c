/*
 * Prints the size and field offsets of libibumad's structs as this compiler sees them
 * through whichever <infiniband/umad.h> is on the include path. The runner compiles it
 * against the system header and against vmad's capi/include, and compares both outputs
 * with layout.expected, which a Rust unit test (capi/src/abi.rs) checks against the
 * repr(C) definitions the library uses.
 */
#include <stddef.h>
#include <stdio.h>
#include <infiniband/umad.h>

#define S(t) printf("sizeof %s %zu\n", #t, sizeof(t))
#define O(t, f) printf("offsetof %s.%s %zu\n", #t, #f, offsetof(t, f))

int main(void)
{
	S(ib_mad_addr_t);
	O(ib_mad_addr_t, qpn);
	O(ib_mad_addr_t, qkey);
	O(ib_mad_addr_t, lid);
	O(ib_mad_addr_t, sl);
	O(ib_mad_addr_t, path_bits);
	O(ib_mad_addr_t, grh_present);
	O(ib_mad_addr_t, gid_index);
	O(ib_mad_addr_t, hop_limit);
	O(ib_mad_addr_t, traffic_class);
	O(ib_mad_addr_t, gid);
	O(ib_mad_addr_t, flow_label);
	O(ib_mad_addr_t, pkey_index);
	O(ib_mad_addr_t, reserved);
	S(struct ib_user_mad);
	O(struct ib_user_mad, agent_id);
	O(struct ib_user_mad, status);
	O(struct ib_user_mad, timeout_ms);
	O(struct ib_user_mad, retries);
	O(struct ib_user_mad, length);
	O(struct ib_user_mad, addr);
	O(struct ib_user_mad, data);
	S(umad_port_t);
	O(umad_port_t, ca_name);
	O(umad_port_t, portnum);
	O(umad_port_t, base_lid);
	O(umad_port_t, lmc);
	O(umad_port_t, sm_lid);
	O(umad_port_t, sm_sl);
	O(umad_port_t, state);
	O(umad_port_t, phys_state);
	O(umad_port_t, rate);
	O(umad_port_t, capmask);
	O(umad_port_t, gid_prefix);
	O(umad_port_t, port_guid);
	O(umad_port_t, pkeys_size);
	O(umad_port_t, pkeys);
	O(umad_port_t, link_layer);
	S(umad_ca_t);
	O(umad_ca_t, ca_name);
	O(umad_ca_t, node_type);
	O(umad_ca_t, numports);
	O(umad_ca_t, fw_ver);
	O(umad_ca_t, ca_type);
	O(umad_ca_t, hw_ver);
	O(umad_ca_t, node_guid);
	O(umad_ca_t, system_guid);
	O(umad_ca_t, ports);
	S(struct umad_reg_attr);
	O(struct umad_reg_attr, mgmt_class);
	O(struct umad_reg_attr, mgmt_class_version);
	O(struct umad_reg_attr, flags);
	O(struct umad_reg_attr, method_mask);
	O(struct umad_reg_attr, oui);
	O(struct umad_reg_attr, rmpp_version);
	S(struct umad_device_node);
	O(struct umad_device_node, next);
	O(struct umad_device_node, ca_name);
	return 0;
}
