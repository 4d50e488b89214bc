/*
 * A small libibumad client for the install test: lists the CAs, opens the
 * first port of the first one and prints its LID, and says which file the
 * dynamic linker took libibumad.so.3 from (install.sh checks it is vmad's).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <infiniband/umad.h>

int main(void)
{
	char names[UMAD_MAX_DEVICES][UMAD_CA_NAME_LEN];
	Dl_info info;
	umad_port_t port;
	int n, id;

	if (umad_init() < 0) {
		fprintf(stderr, "umad_init failed\n");
		return 1;
	}
	if (!dladdr((void *)umad_get_cas_names, &info) || !info.dli_fname) {
		fprintf(stderr, "dladdr failed\n");
		return 1;
	}
	printf("library %s\n", info.dli_fname);
	n = umad_get_cas_names(names, UMAD_MAX_DEVICES);
	if (n <= 0) {
		fprintf(stderr, "umad_get_cas_names: %d\n", n);
		return 1;
	}
	for (int i = 0; i < n; i++)
		printf("ca %s\n", names[i]);
	id = umad_open_port(names[0], 0);
	if (id < 0 || umad_get_port(names[0], 0, &port) < 0) {
		fprintf(stderr, "cannot open %s\n", names[0]);
		return 1;
	}
	printf("port %s %d lid %u\n", port.ca_name, port.portnum, port.base_lid);
	umad_release_port(&port);
	umad_close_port(id);
	return umad_done() < 0;
}
