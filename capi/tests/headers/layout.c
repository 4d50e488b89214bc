/*
 * Sizes and field offsets of the structs in umad_types.h, umad_sa.h,
 * umad_sa_mcm.h and umad_sm.h, and what their inline helpers return, as
 * seen through whichever headers are on the include path. headers.sh runs
 * it against the system's (rdma-core) and vmad's and diffs the two.
 */
#include <stddef.h>
#include <stdio.h>
#include <infiniband/umad.h>
#include <infiniband/umad_types.h>
#include <infiniband/umad_sa.h>
#include <infiniband/umad_sa_mcm.h>
#include <infiniband/umad_sm.h>
#include <infiniband/umad_cm.h>
#include <infiniband/umad_str.h>

#define S(t) printf("sizeof %s %zu align %zu\n", #t, sizeof(t), _Alignof(t))
#define O(t, f) printf("offsetof %s.%s %zu size %zu\n", #t, #f, offsetof(t, f), sizeof(((t *)0)->f))

int main(void)
{
	S(union umad_gid);
	S(struct umad_hdr);
	O(struct umad_hdr, base_version);
	O(struct umad_hdr, mgmt_class);
	O(struct umad_hdr, class_version);
	O(struct umad_hdr, method);
	O(struct umad_hdr, status);
	O(struct umad_hdr, class_specific);
	O(struct umad_hdr, tid);
	O(struct umad_hdr, attr_id);
	O(struct umad_hdr, resv);
	O(struct umad_hdr, attr_mod);
	S(struct umad_rmpp_hdr);
	O(struct umad_rmpp_hdr, rmpp_version);
	O(struct umad_rmpp_hdr, rmpp_type);
	O(struct umad_rmpp_hdr, rmpp_rtime_flags);
	O(struct umad_rmpp_hdr, rmpp_status);
	O(struct umad_rmpp_hdr, seg_num);
	O(struct umad_rmpp_hdr, paylen_newwin);
	S(struct umad_packet);
	O(struct umad_packet, mad_hdr);
	O(struct umad_packet, data);
	S(struct umad_rmpp_packet);
	O(struct umad_rmpp_packet, mad_hdr);
	O(struct umad_rmpp_packet, rmpp_hdr);
	O(struct umad_rmpp_packet, data);
	S(struct umad_dm_packet);
	O(struct umad_dm_packet, mad_hdr);
	O(struct umad_dm_packet, reserved);
	O(struct umad_dm_packet, data);
	S(struct umad_vendor_packet);
	O(struct umad_vendor_packet, mad_hdr);
	O(struct umad_vendor_packet, rmpp_hdr);
	O(struct umad_vendor_packet, reserved);
	O(struct umad_vendor_packet, oui);
	O(struct umad_vendor_packet, data);
	S(struct umad_class_port_info);
	O(struct umad_class_port_info, base_ver);
	O(struct umad_class_port_info, class_ver);
	O(struct umad_class_port_info, cap_mask);
	O(struct umad_class_port_info, cap_mask2_resp_time);
	O(struct umad_class_port_info, redirgid);
	O(struct umad_class_port_info, redir_tc_sl_fl);
	O(struct umad_class_port_info, redir_lid);
	O(struct umad_class_port_info, redir_pkey);
	O(struct umad_class_port_info, redir_qp);
	O(struct umad_class_port_info, redir_qkey);
	O(struct umad_class_port_info, trapgid);
	O(struct umad_class_port_info, trap_tc_sl_fl);
	O(struct umad_class_port_info, trap_lid);
	O(struct umad_class_port_info, trap_pkey);
	O(struct umad_class_port_info, trap_hl_qp);
	O(struct umad_class_port_info, trap_qkey);
	S(struct umad_sa_packet);
	O(struct umad_sa_packet, mad_hdr);
	O(struct umad_sa_packet, rmpp_hdr);
	O(struct umad_sa_packet, sm_key);
	O(struct umad_sa_packet, attr_offset);
	O(struct umad_sa_packet, reserved);
	O(struct umad_sa_packet, comp_mask);
	O(struct umad_sa_packet, data);
	S(struct umad_sa_mcmember_record);
	O(struct umad_sa_mcmember_record, mgid);
	O(struct umad_sa_mcmember_record, portgid);
	O(struct umad_sa_mcmember_record, qkey);
	O(struct umad_sa_mcmember_record, mlid);
	O(struct umad_sa_mcmember_record, mtu);
	O(struct umad_sa_mcmember_record, tclass);
	O(struct umad_sa_mcmember_record, pkey);
	O(struct umad_sa_mcmember_record, rate);
	O(struct umad_sa_mcmember_record, pkt_life);
	O(struct umad_sa_mcmember_record, sl_flow_hop);
	O(struct umad_sa_mcmember_record, scope_state);
	O(struct umad_sa_mcmember_record, proxy_join);
	O(struct umad_sa_mcmember_record, reserved);
	O(struct umad_sa_mcmember_record, pad);
	S(struct umad_smp);
	O(struct umad_smp, base_version);
	O(struct umad_smp, mgmt_class);
	O(struct umad_smp, class_version);
	O(struct umad_smp, method);
	O(struct umad_smp, status);
	O(struct umad_smp, hop_ptr);
	O(struct umad_smp, hop_cnt);
	O(struct umad_smp, tid);
	O(struct umad_smp, attr_id);
	O(struct umad_smp, resv);
	O(struct umad_smp, attr_mod);
	O(struct umad_smp, mkey);
	O(struct umad_smp, dr_slid);
	O(struct umad_smp, dr_dlid);
	O(struct umad_smp, reserved);
	O(struct umad_smp, data);
	O(struct umad_smp, initial_path);
	O(struct umad_smp, return_path);

	/* The inline helpers, over inputs that reach every bit they touch. */
	struct umad_class_port_info cpi = { .cap_mask2_resp_time = htobe32(0xdeadbeef) };
	printf("cap_mask2 %#x resp_time %u\n", umad_class_cap_mask2(&cpi), umad_class_resp_time(&cpi));
	for (unsigned v = 0; v < 256; v += 37)
		for (unsigned sel = 0; sel < 4; sel++)
			printf("rate %u/%u: get %u set %u\n", sel, v, umad_sa_get_rate_mtu_or_life(v),
			       umad_sa_set_rate_mtu_or_life(sel, v));
	uint8_t sl = 0, hop = 0, scope = 0, state = 0;
	uint32_t flow = 0;
	umad_sa_mcm_get_sl_flow_hop(htonl(0xabcdef12), &sl, &flow, &hop);
	printf("sl %u flow %#x hop %u\n", sl, flow, hop);
	printf("set_sl_flow_hop %#x\n", ntohl(umad_sa_mcm_set_sl_flow_hop(7, 0x12345, 64)));
	umad_sa_mcm_get_scope_state(0xe3, &scope, &state);
	printf("scope %u state %u set %#x\n", scope, state, umad_sa_mcm_set_scope_state(0x5, 0x2));
	struct umad_sa_mcmember_record rec = { .scope_state = 0xe1, .proxy_join = 0x80 };
	umad_sa_mcm_set_join_state(&rec, 0x4);
	printf("join %#x proxy %d\n", rec.scope_state, umad_sa_mcm_get_proxy_join(&rec));
	rec.proxy_join = 0x7f;
	printf("proxy %d\n", umad_sa_mcm_get_proxy_join(&rec));
	return 0;
}
