/*
 * ca_dump: every field libibumad reports about the host's CAs, one per line.
 *
 * Run once on the system libibumad and once on vmad's drop-in
 * (LD_LIBRARY_PATH); the outputs must be identical (tests/it/kernel.rs).
 *
 *   ca_dump
 *     umad_get_cas_names; per CA: umad_get_ca (every field, every port
 *     through ca.ports[]), umad_get_ca_portguids; per port: umad_get_port
 *     (every field, each P_Key) and umad_get_issm_path; then
 *     umad_open_port(ca, 0) and umad_get_port(ca, 0)'s port number.
 */
#include <endian.h>
#include <inttypes.h>
#include <infiniband/umad.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void port_fields(const char *what, const umad_port_t *p)
{
	printf("%s ca_name=%s portnum=%d base_lid=%u lmc=%u sm_lid=%u sm_sl=%u state=%u "
	       "phys_state=%u rate=%u capmask=0x%08x gid_prefix=0x%016" PRIx64
	       " port_guid=0x%016" PRIx64 " pkeys_size=%u link_layer=%s\n",
	       what, p->ca_name, p->portnum, p->base_lid, p->lmc, p->sm_lid, p->sm_sl, p->state,
	       p->phys_state, p->rate, be32toh(p->capmask), be64toh(p->gid_prefix),
	       be64toh(p->port_guid), p->pkeys_size, p->link_layer);
	for (unsigned i = 0; i < p->pkeys_size; i++)
		if (p->pkeys[i])
			printf("%s pkey[%u]=0x%04x\n", what, i, p->pkeys[i]);
}

int main(void)
{
	char names[UMAD_MAX_DEVICES][UMAD_CA_NAME_LEN];

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (umad_init() < 0) {
		perror("umad_init");
		return 1;
	}
	int n = umad_get_cas_names(names, UMAD_MAX_DEVICES);
	printf("cas=%d\n", n);
	for (int c = 0; c < n; c++) {
		umad_ca_t ca;
		int r = umad_get_ca(names[c], &ca);
		printf("ca %s get_ca=%d\n", names[c], r);
		if (r < 0)
			continue;
		printf("ca %s node_type=%u numports=%d fw_ver=%s ca_type=%s hw_ver=%s "
		       "node_guid=0x%016" PRIx64 " system_guid=0x%016" PRIx64 "\n",
		       ca.ca_name, ca.node_type, ca.numports, ca.fw_ver, ca.ca_type, ca.hw_ver,
		       be64toh(ca.node_guid), be64toh(ca.system_guid));
		for (int i = 0; i <= ca.numports && i < UMAD_CA_MAX_PORTS; i++)
			if (ca.ports[i])
				port_fields("ca.ports[]", ca.ports[i]);
		__be64 guids[UMAD_CA_MAX_PORTS + 1];
		int g = umad_get_ca_portguids(names[c], guids, UMAD_CA_MAX_PORTS + 1);
		printf("ca %s portguids=%d", names[c], g);
		for (int i = 0; i < g; i++)
			printf(" 0x%016" PRIx64, be64toh(guids[i]));
		printf("\n");
		for (int i = 1; i <= ca.numports; i++) {
			umad_port_t port;
			r = umad_get_port(names[c], i, &port);
			printf("port %s/%d get_port=%d\n", names[c], i, r);
			if (r < 0)
				continue;
			port_fields("port", &port);
			umad_release_port(&port);
			char path[256];
			r = umad_get_issm_path(names[c], i, path, sizeof(path));
			printf("port %s/%d issm=%d %s\n", names[c], i, r, r == 0 ? path : "-");
		}
		umad_release_ca(&ca);
		umad_port_t first;
		r = umad_get_port(names[c], 0, &first);
		printf("ca %s port0=%d portnum=%d\n", names[c], r, r == 0 ? first.portnum : -1);
		if (r == 0)
			umad_release_port(&first);
		int fd = umad_open_port(names[c], 0);
		printf("ca %s open_port=%s\n", names[c], fd >= 0 ? "ok" : strerror(-fd));
		if (fd >= 0)
			umad_close_port(fd);
	}
	umad_done();
	return 0;
}
