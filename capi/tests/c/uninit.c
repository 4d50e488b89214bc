/*
 * Buffers fresh from malloc, never written (issue 31): a C caller may hand any of them to
 * vmad's libibumad. Each call that fills a caller's buffer must write what it reports and
 * must not read the rest; the header setters must write their own fields and no other.
 *
 * Run under AddressSanitizer and under valgrind. Memcheck reports a use of uninitialised
 * memory, so every byte the library says it wrote is read back here: its value is checked
 * where it is known, and under valgrind each such range is also checked byte for byte
 * with VALGRIND_CHECK_MEM_IS_DEFINED (an error, hence valgrind's error exit code, if any
 * byte of it was never written).
 *
 * Built against the SYSTEM <infiniband/umad.h>; embedded fabric vmadsim0 (LID 1) <->
 * vmadsim1 (LID 2). Prints "N passed, N failed".
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/umad.h>

#if __has_include(<valgrind/memcheck.h>)
#include <valgrind/memcheck.h>
#else
#define VALGRIND_CHECK_MEM_IS_DEFINED(p, n) 0
#endif

#include "check.h"

/* IBUMAD_1.4: not declared by older system headers. */
struct vmad_ca_pair {
	char smi_name[UMAD_CA_NAME_LEN];
	uint32_t smi_preferred_port;
	char gsi_name[UMAD_CA_NAME_LEN];
	uint32_t gsi_preferred_port;
};
int umad_get_smi_gsi_pairs(struct vmad_ca_pair cas[], size_t max);

#define MAD_LEN 256
#define VENDOR_CLASS 0x0a
#define SA_CLASS 0x03

/* n bytes of malloc, never written (no calloc, no memset). */
static void *fresh(size_t n)
{
	void *p = malloc(n);
	if (!p) {
		perror("malloc");
		exit(2);
	}
	return p;
}

/* Under valgrind: whether all n bytes at p were written (elsewhere: 1). Also reads each
 * one, so that ASan sees the whole range is addressable. */
static int defined(const void *p, size_t n)
{
	volatile uint8_t sink = 0;
	for (size_t i = 0; i < n; i++)
		sink ^= ((const volatile uint8_t *)p)[i] & 0;
	(void)sink;
	return VALGRIND_CHECK_MEM_IS_DEFINED(p, n) == 0;
}

static void mad_hdr(uint8_t *mad, uint8_t class, uint8_t version, uint8_t method, uint32_t tid)
{
	memset(mad, 0, 24);
	mad[0] = 1;
	mad[1] = class;
	mad[2] = version;
	mad[3] = method;
	mad[12] = tid >> 24;
	mad[13] = tid >> 16;
	mad[14] = tid >> 8;
	mad[15] = tid;
}

static uint32_t mad_tid(const uint8_t *mad)
{
	return (uint32_t)mad[12] << 24 | (uint32_t)mad[13] << 16 | (uint32_t)mad[14] << 8 | mad[15];
}

/* The header setters on an uninitialised header: each writes its fields, reads nothing. */
static void test_setters(void)
{
	uint8_t *u = fresh(umad_size() + MAD_LEN);
	CHECK((uint8_t *)umad_get_mad(u) == u + 64 && (uint8_t *)umad_get_mad_addr(u) == u + 20,
	      "umad_get_mad / umad_get_mad_addr on an uninitialised buffer");
	ib_mad_addr_t *a = umad_get_mad_addr(u);
	CHECK(umad_set_addr(u, 0x1234, 1, 3, 0x80010000) == 0, "umad_set_addr on an uninitialised header");
	CHECK(defined(&a->qpn, 4) && defined(&a->qkey, 4) && defined(&a->lid, 2) && defined(&a->sl, 1),
	      "umad_set_addr wrote qpn, qkey, lid, sl");
	CHECK(a->lid == htobe16(0x1234) && a->qpn == htobe32(1) && a->qkey == htobe32(0x80010000) &&
		      a->sl == 3,
	      "umad_set_addr: the values read back");
	CHECK(umad_set_pkey(u, 7) == 0 && defined(&a->pkey_index, 2) && a->pkey_index == 7,
	      "umad_set_pkey on an uninitialised header");
	ib_mad_addr_t g;
	memset(&g, 0, sizeof(g));
	g.gid[15] = 0x42;
	g.hop_limit = 9;
	g.traffic_class = 3;
	g.flow_label = 0x12345;
	CHECK(umad_set_grh(u, &g) == 0 && defined(&a->grh_present, 1) && defined(a->gid, 16) &&
		      defined(&a->flow_label, 4) && a->grh_present == 1 && a->gid[15] == 0x42 &&
		      a->hop_limit == 9 && a->traffic_class == 3 && a->flow_label == htobe32(0x12345),
	      "umad_set_grh on an uninitialised header");
	CHECK(umad_set_addr_net(u, htobe16(5), htobe32(1), 2, htobe32(0x80010000)) == 0 &&
		      a->lid == htobe16(5) && a->sl == 2,
	      "umad_set_addr_net on a partly initialised header");
	free(u);
}

struct world {
	int a, b, client, server;
};

static long all_methods[2] = { -1L, -1L };

/* Send a vendor Get from a's client to LID dlid. A send buffer's header must be
 * initialised (libibumad hands all of it to the kernel); it is zeroed here. */
static int send_get(struct world *w, uint32_t tid, int timeout_ms, int dlid)
{
	uint8_t *u = fresh(umad_size() + MAD_LEN);
	memset(u, 0, umad_size() + MAD_LEN);
	mad_hdr(umad_get_mad(u), VENDOR_CLASS, 1, 0x01, tid);
	umad_set_addr(u, dlid, 1, 0, 0x80010000);
	int r = umad_send(w->a, w->client, u, MAD_LEN, timeout_ms, 0);
	free(u);
	return r;
}

/* umad_recv into uninitialised buffers: a MAD, a send-timeout report. */
static void test_recv(struct world *w)
{
	CHECK(send_get(w, 0x1001, 0, 2) == 0, "umad_send a Get");
	uint8_t *u = fresh(umad_size() + MAD_LEN);
	int *len = fresh(sizeof(int));
	*len = MAD_LEN;
	int r = umad_recv(w->b, u, len, 5000);
	CHECK(r == w->server && *len == MAD_LEN, "recv a Get into an uninitialised buffer (r=%d)", r);
	CHECK(defined(u, umad_size() + *len), "recv wrote the whole header and all %d data bytes", *len);
	struct ib_user_mad *h = (struct ib_user_mad *)u;
	CHECK(h->agent_id == (uint32_t)w->server && h->status == 0 &&
		      h->length == umad_size() + MAD_LEN && be16toh(h->addr.lid) == 1 &&
		      mad_tid(umad_get_mad(u)) == 0x1001,
	      "recv: header and MAD read back");
	CHECK(umad_status(u) == 0 && umad_get_pkey(u) == 0, "umad_status / umad_get_pkey on it");
	free(u);

	/* LID 9 does not exist: the request comes back as a send-timeout report. */
	CHECK(send_get(w, 0x2002, 30, 9) == 0, "umad_send a Get to a LID that does not exist");
	u = fresh(umad_size() + MAD_LEN);
	*len = MAD_LEN;
	r = umad_recv(w->a, u, len, 5000);
	CHECK(r == w->client && *len == 24 && umad_status(u) == ETIMEDOUT,
	      "recv the send-timeout report into an uninitialised buffer (r=%d, len=%d)", r, *len);
	CHECK(defined(u, umad_size() + *len) && mad_tid(umad_get_mad(u)) == 0x2002,
	      "recv: the report's header and 24-byte MAD header written");
	free(u);
	free(len);
}

/* An SA GetTable answered with an RMPP response longer than one MAD: ENOSPC into an
 * uninitialised buffer, then the whole message into a second one. */
static void test_recv_rmpp(void)
{
	enum { DATA = 2000 };
	int a = umad_open_port("vmadsim0", 1);
	int b = umad_open_port("vmadsim1", 1);
	long mask[2] = { 1L << 0x12, 0 }; /* GetTable */
	int client = umad_register(a, SA_CLASS, 2, 1, NULL);
	int server = umad_register(b, SA_CLASS, 2, 1, mask);
	CHECK(a >= 0 && b >= 0 && client >= 0 && server >= 0, "SA agents registered");

	uint8_t *u = fresh(umad_size() + MAD_LEN);
	memset(u, 0, umad_size() + MAD_LEN);
	mad_hdr(umad_get_mad(u), SA_CLASS, 2, 0x12, 0x7007);
	umad_set_addr(u, 2, 1, 0, 0x80010000);
	CHECK(umad_send(a, client, u, MAD_LEN, 60000, 0) == 0, "send SA GetTable");
	free(u);
	u = fresh(umad_size() + MAD_LEN);
	int len = MAD_LEN;
	CHECK(umad_recv(b, u, &len, 60000) == server, "SA server gets the GetTable");

	uint8_t *resp = fresh(umad_size() + 56 + DATA);
	memcpy(resp, u, umad_size() + 24);
	uint8_t *m = umad_get_mad(resp);
	memset(m + 24, 0, 32);
	m[3] = 0x92;
	m[24] = 1;    /* RMPP version */
	m[25] = 1;    /* DATA */
	m[26] = 0x01; /* Active */
	m[45] = 8;    /* attribute offset, 8-byte words */
	for (int i = 0; i < DATA; i++)
		m[56 + i] = (uint8_t)(i * 7 + 1);
	CHECK(umad_send(b, server, resp, 56 + DATA, 0, 0) == 0, "send a 2,056-byte RMPP response");
	free(resp);
	free(u);

	u = fresh(umad_size() + MAD_LEN);
	len = MAD_LEN;
	int r = umad_recv(a, u, &len, 60000);
	CHECK(r == -ENOSPC && len == 56 + DATA, "recv: -ENOSPC, *length = %d", len);
	CHECK(defined(u, umad_size() + MAD_LEN), "ENOSPC: the header and the first 256 bytes written");
	free(u);
	uint8_t *big = fresh(umad_size() + len);
	int len2 = len;
	r = umad_recv(a, big, &len2, 0);
	CHECK(r == client && len2 == 56 + DATA, "recv the whole message into an uninitialised buffer");
	CHECK(defined(big, umad_size() + len2), "recv wrote all %d bytes of it", len2);
	uint8_t *bm = umad_get_mad(big);
	int same = bm[3] == 0x92;
	for (int i = 0; i < DATA; i++)
		same &= bm[56 + i] == (uint8_t)(i * 7 + 1);
	CHECK(same, "recv: the RMPP data read back");
	free(big);
	CHECK(umad_close_port(a) == 0 && umad_close_port(b) == 0, "close the SA ports");
}

/* The calls that fill a caller's arrays and structs, each given uninitialised memory. */
static void test_discovery(struct world *w)
{
	char(*names)[UMAD_CA_NAME_LEN] = fresh(4 * UMAD_CA_NAME_LEN);
	int n = umad_get_cas_names(names, 4);
	CHECK(n == 2 && defined(names, (size_t)n * UMAD_CA_NAME_LEN) &&
		      strcmp(names[0], "vmadsim0") == 0 && strcmp(names[1], "vmadsim1") == 0,
	      "umad_get_cas_names into an uninitialised array (%d)", n);
	free(names);

	__be64 *guids = fresh(4 * sizeof(*guids));
	n = umad_get_ca_portguids("vmadsim0", guids, 4);
	CHECK(n == 2 && defined(guids, (size_t)n * sizeof(*guids)) && guids[0] == 0 && guids[1] != 0,
	      "umad_get_ca_portguids into an uninitialised array (%d)", n);
	free(guids);

	umad_ca_t *ca = fresh(sizeof(*ca));
	CHECK(umad_get_ca("vmadsim1", ca) == 0, "umad_get_ca into an uninitialised struct");
	CHECK(defined(ca->ca_name, sizeof(ca->ca_name)) && defined(&ca->node_type, 4) &&
		      defined(&ca->numports, 4) && defined(ca->fw_ver, sizeof(ca->fw_ver)) &&
		      defined(ca->ca_type, sizeof(ca->ca_type)) && defined(ca->hw_ver, sizeof(ca->hw_ver)) &&
		      defined(&ca->node_guid, 8) && defined(&ca->system_guid, 8) &&
		      defined(ca->ports, sizeof(ca->ports)),
	      "umad_get_ca wrote every field");
	CHECK(strcmp(ca->ca_name, "vmadsim1") == 0 && ca->numports == 1 && ca->ports[1] &&
		      ca->ports[1]->portnum == 1 && ca->ports[0] == NULL,
	      "umad_get_ca: the values read back");
	CHECK(umad_release_ca(ca) == 0 && ca->ports[1] == NULL, "umad_release_ca");
	free(ca);

	umad_port_t *port = fresh(sizeof(*port));
	CHECK(umad_get_port("vmadsim0", 1, port) == 0, "umad_get_port into an uninitialised struct");
	CHECK(defined(port->ca_name, sizeof(port->ca_name)) && defined(&port->portnum, 4) &&
		      defined(&port->base_lid, 4) && defined(&port->state, 4) &&
		      defined(&port->port_guid, 8) && defined(&port->pkeys_size, 4) &&
		      defined(&port->pkeys, sizeof(port->pkeys)) &&
		      defined(port->link_layer, sizeof(port->link_layer)) &&
		      (port->pkeys_size == 0 || defined(port->pkeys, port->pkeys_size * 2)),
	      "umad_get_port wrote every field (and the P_Key table)");
	CHECK(port->base_lid == 1 && port->portnum == 1 && strcmp(port->link_layer, "InfiniBand") == 0,
	      "umad_get_port: the values read back");
	CHECK(umad_release_port(port) == 0 && port->pkeys == NULL, "umad_release_port");
	free(port);

	char *path = fresh(256);
	CHECK(umad_get_issm_path("vmadsim0", 1, path, 256) == 0, "umad_get_issm_path into an uninitialised buffer");
	size_t plen = strnlen(path, 256);
	CHECK(plen > 0 && plen < 256 && defined(path, plen + 1), "umad_get_issm_path: a terminated path");
	free(path);

	struct vmad_ca_pair *pairs = fresh(4 * sizeof(*pairs));
	n = umad_get_smi_gsi_pairs(pairs, 4);
	CHECK(n == 2 && defined(pairs[1].smi_name, UMAD_CA_NAME_LEN) &&
		      defined(&pairs[1].gsi_preferred_port, 4) && strcmp(pairs[1].gsi_name, "vmadsim1") == 0,
	      "umad_get_smi_gsi_pairs into an uninitialised array (%d)", n);
	free(pairs);

	struct umad_reg_attr attr;
	memset(&attr, 0, sizeof(attr));
	attr.mgmt_class = 0x31;
	attr.mgmt_class_version = 1;
	attr.oui = 0x001405;
	uint32_t *id = fresh(sizeof(*id));
	CHECK(umad_register2(w->a, &attr, id) == 0 && defined(id, 4) && *id < 32,
	      "umad_register2 writes the agent id into uninitialised memory");
	CHECK(umad_unregister(w->a, (int)*id) == 0, "unregister it");
	free(id);
}

int main(void)
{
	struct world w;
	CHECK(umad_init() == 0, "umad_init");
	test_setters();
	w.a = umad_open_port("vmadsim0", 1);
	w.b = umad_open_port("vmadsim1", 1);
	w.client = umad_register(w.a, VENDOR_CLASS, 1, 0, NULL);
	w.server = umad_register(w.b, VENDOR_CLASS, 1, 0, all_methods);
	CHECK(w.a >= 0 && w.b >= 0 && w.client >= 0 && w.server >= 0, "ports open, agents registered");
	if (failed) {
		printf("%d passed, %d failed\n", passed, failed);
		return 1;
	}
	test_recv(&w);
	test_recv_rmpp();
	test_discovery(&w);
	CHECK(umad_close_port(w.a) == 0 && umad_close_port(w.b) == 0, "close the ports");
	umad_done();
	printf("%d passed, %d failed\n", passed, failed);
	return failed != 0;
}
