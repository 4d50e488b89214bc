/*
 * Preloaded into a diag (capi/tests/sim-diags.sh: perfquery -R): reads the
 * PortCounters of one port before the program's main and again after its exit,
 * in its process, and prints the data counters to stderr:
 *
 *   pma-readback before: xmit_data=N rcv_data=N xmit_pkts=N rcv_pkts=N
 *   pma-readback after: ...
 *
 * On the embedded fabric each process has its own subnet, so a reset can only
 * be read back by the process that sent it. PMA_READBACK="LID PORT" names the
 * port; unset, nothing is done. The read is perfquery's (a PortCounters Get to
 * the node's PMA over QP1), through the same libibumad as the program. A
 * failure ends the process with status 2 (_exit: it may come during exit).
 */
#include <infiniband/umad.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PERF_CLASS 0x04
#define PORT_COUNTERS 0x0012
#define DATA 64 /* the PMA's data, after the common and the reserved headers */
#define QKEY 0x80010000

static uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void readback(const char *when)
{
	const char *spec = getenv("PMA_READBACK");
	int lid, portsel, port, agent, len = 256;
	uint8_t *req, *resp, *mad;

	if (!spec || sscanf(spec, "%d %d", &lid, &portsel) != 2)
		return;
	req = calloc(1, umad_size() + 256);
	resp = calloc(1, umad_size() + 256);
	if (!req || !resp || umad_init() < 0 || (port = umad_open_port(NULL, 0)) < 0) {
		fprintf(stderr, "pma-readback %s: cannot open a port\n", when);
		_exit(2);
	}
	agent = umad_register(port, PERF_CLASS, 1, 0, NULL);
	if (agent < 0) {
		fprintf(stderr, "pma-readback %s: umad_register: %d\n", when, agent);
		_exit(2);
	}
	umad_set_addr(req, lid, 1, 0, QKEY);
	mad = umad_get_mad(req);
	mad[0] = 1; /* base version */
	mad[1] = PERF_CLASS;
	mad[2] = 1; /* class version */
	mad[3] = 0x01; /* Get */
	mad[15] = 0x5a; /* TID */
	mad[16] = PORT_COUNTERS >> 8;
	mad[17] = PORT_COUNTERS & 0xff;
	mad[DATA + 1] = (uint8_t)portsel;
	if (umad_send(port, agent, req, 256, 1000, 3) < 0 ||
	    umad_recv(port, resp, &len, 10000) < 0 || umad_status(resp) != 0) {
		fprintf(stderr, "pma-readback %s: no PortCounters from lid %d port %d\n", when, lid,
			portsel);
		_exit(2);
	}
	mad = umad_get_mad(resp);
	if (mad[3] != 0x81 || (mad[4] << 8 | mad[5]) != 0) {
		fprintf(stderr, "pma-readback %s: method 0x%02x, MAD status 0x%04x\n", when, mad[3],
			mad[4] << 8 | mad[5]);
		_exit(2);
	}
	fprintf(stderr, "pma-readback %s: xmit_data=%u rcv_data=%u xmit_pkts=%u rcv_pkts=%u\n", when,
		be32(mad + DATA + 24), be32(mad + DATA + 28), be32(mad + DATA + 32),
		be32(mad + DATA + 36));
	umad_unregister(port, agent);
	umad_close_port(port);
	free(req);
	free(resp);
}

__attribute__((constructor)) static void before(void)
{
	readback("before");
}

__attribute__((destructor)) static void after(void)
{
	readback("after");
}
