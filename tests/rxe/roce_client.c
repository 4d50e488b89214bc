/*
 * roce_client: a plain libibumad client on a kernel RoCE port (rxe0) asking
 * the QP1 at <dgid> -- vmad's roce transport in the RoCE VM tests -- and
 * checking every answer. Everything on this side is the system libibumad and
 * the kernel's MAD layer (ib_umad, QP1, the kernel's RMPP reassembly).
 *
 *   roce_client <ca> <port> <dgid> <sgid_index> <test> [arg]
 *     echo <n>     n class 0x09 Gets (attr 0xff10, data k..): GetResp, status
 *                  0, "RESPONSE" + the request's data echoed.
 *     rmpp <bytes> one class 0x30 Get (OUI 00:14:05, attr_mod = bytes): the
 *                  kernel reassembles the RMPP GetResp; byte i must be
 *                  pattern(i), exactly bytes long.
 *     unclaimed    a class 0x0b Get nobody registered: GetResp with MAD
 *                  status 0x000c (unsupported method/attribute).
 *     bench <n>    n class 0x09 round trips; prints p50_us/p99_us.
 * Exit 0 when every check passed; prints "OK <test> ..." lines.
 */
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <infiniband/umad.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAD_SIZE 256
#define VENDOR_HDR 40
#define BUF_SIZE (4u << 20)

static const uint8_t OUI[3] = {0x00, 0x14, 0x05};

/* Shared with the Rust tests and umad_agent.c. */
static uint8_t pattern(uint32_t i)
{
	return (uint8_t)(i * 7u + (i >> 8) * 13u + 3u);
}

static double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

struct ctx {
	int fd;
	int sgid_index;
	const char *dgid;
	void *u;
};

/* Send one Get (256 bytes) and receive its answer; returns the length received or -1. */
static int round_trip(struct ctx *c, int agent, uint8_t class, uint64_t tid, uint32_t attr_mod,
		      const uint8_t *data, size_t data_len)
{
	ib_user_mad_t *um = c->u;
	memset(c->u, 0, umad_size() + MAD_SIZE);
	uint8_t *m = umad_get_mad(c->u);
	m[0] = 1;
	m[1] = class;
	m[2] = 1;
	m[3] = 0x01;
	uint64_t be = htobe64(tid);
	memcpy(m + 8, &be, 8);
	m[16] = 0xff;
	m[17] = 0x10;
	uint32_t am = htobe32(attr_mod);
	memcpy(m + 20, &am, 4);
	size_t hdr = 24;
	if (class >= 0x30) {
		m[24] = 1; /* RMPP version; inactive: a one-MAD Get */
		memcpy(m + 37, OUI, 3);
		hdr = VENDOR_HDR;
	}
	if (data)
		memcpy(m + hdr, data, data_len);
	umad_set_addr(c->u, 0, 1, 0, 0x80010000);
	um->addr.grh_present = 1;
	um->addr.gid_index = (uint8_t)c->sgid_index;
	um->addr.hop_limit = 64;
	inet_pton(AF_INET6, c->dgid, um->addr.gid);
	/* The kernel times a request until its whole (RMPP) response is in:
	 * 1 MiB under TCG takes seconds. */
	int r = umad_send(c->fd, agent, c->u, MAD_SIZE, class >= 0x30 ? 60000 : 2000, 3);
	if (r < 0) {
		fprintf(stderr, "[roce_client] umad_send: %s\n", strerror(-r));
		return -1;
	}
	int len = BUF_SIZE;
	r = umad_recv(c->fd, c->u, &len, 120000);
	if (r < 0 || um->status) {
		fprintf(stderr, "[roce_client] tid %#lx: recv r=%d status=%u (%s)\n", (unsigned long)tid, r,
			um->status, um->status ? strerror((int)um->status) : "");
		return -1;
	}
	uint8_t *resp = umad_get_mad(c->u);
	if (resp[3] != 0x81 || be64toh(*(uint64_t *)(resp + 8)) << 32 != tid << 32) {
		fprintf(stderr, "[roce_client] tid %#lx: method %#x tid %#lx\n", (unsigned long)tid, resp[3],
			(unsigned long)be64toh(*(uint64_t *)(resp + 8)));
		return -1;
	}
	return len;
}

static int reg(int fd, uint8_t class, int rmpp)
{
	long mask[16 / sizeof(long)];
	memset(mask, 0, sizeof(mask));
	uint8_t oui[3];
	memcpy(oui, OUI, 3);
	int a = class >= 0x30 ? umad_register_oui(fd, class, 1, oui, mask)
			      : umad_register(fd, class, 1, (uint8_t)rmpp, mask);
	if (a < 0) {
		fprintf(stderr, "umad_register(%#x): %s\n", class, strerror(-a));
		exit(1);
	}
	return a;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc < 6) {
		fprintf(stderr, "usage: %s <ca> <port> <dgid> <sgid_index> echo <n>|rmpp <bytes>|unclaimed|bench <n>\n",
			argv[0]);
		return 2;
	}
	if (umad_init() < 0)
		return 1;
	struct ctx c = {.sgid_index = atoi(argv[4]), .dgid = argv[3]};
	c.fd = umad_open_port(argv[1], atoi(argv[2]));
	if (c.fd < 0) {
		fprintf(stderr, "umad_open_port(%s): %s\n", argv[1], strerror(-c.fd));
		return 1;
	}
	c.u = calloc(1, umad_size() + BUF_SIZE);
	const char *test = argv[5];
	int arg = argc > 6 ? atoi(argv[6]) : 1;

	if (!strcmp(test, "echo") || !strcmp(test, "bench")) {
		int a = reg(c.fd, 0x09, 0);
		double *lat = calloc((size_t)arg, sizeof(double));
		for (int k = 0; k < arg; k++) {
			uint8_t data[MAD_SIZE - 24];
			for (size_t i = 0; i < sizeof(data); i++)
				data[i] = (uint8_t)(k + i);
			double t0 = now_us();
			if (round_trip(&c, a, 0x09, 0x1000u + (uint64_t)k, 0, data, sizeof(data)) < 0)
				return 1;
			lat[k] = now_us() - t0;
			uint8_t *r = umad_get_mad(c.u);
			uint16_t status = (uint16_t)((r[4] << 8) | r[5]);
			if (status || memcmp(r + 24, "RESPONSE", 8) || memcmp(r + 32, data + 8, sizeof(data) - 8)) {
				fprintf(stderr, "[roce_client] echo %d: status %#x or data differs\n", k, status);
				return 1;
			}
		}
		qsort(lat, (size_t)arg, sizeof(double), cmp_double);
		printf("OK %s n=%d p50_us=%.0f p99_us=%.0f\n", test, arg, lat[arg / 2], lat[(arg * 99) / 100]);
	} else if (!strcmp(test, "rmpp")) {
		int a = reg(c.fd, 0x30, 1);
		double t0 = now_us();
		int len = round_trip(&c, a, 0x30, 0x3000u + (uint64_t)arg, (uint32_t)arg, NULL, 0);
		if (len < 0)
			return 1;
		uint8_t *r = umad_get_mad(c.u);
		if (len - VENDOR_HDR != arg) {
			fprintf(stderr, "[roce_client] rmpp: %d data bytes, want %d\n", len - VENDOR_HDR, arg);
			return 1;
		}
		for (int i = 0; i < arg; i++)
			if (r[VENDOR_HDR + i] != pattern((uint32_t)i)) {
				fprintf(stderr, "[roce_client] rmpp: byte %d is %#x, want %#x\n", i, r[VENDOR_HDR + i],
					pattern((uint32_t)i));
				return 1;
			}
		printf("OK rmpp bytes=%d byte-exact us=%.0f\n", arg, now_us() - t0);
	} else if (!strcmp(test, "unclaimed")) {
		int a = reg(c.fd, 0x0b, 0);
		if (round_trip(&c, a, 0x0b, 0x0b0b, 0, NULL, 0) < 0)
			return 1;
		uint8_t *r = umad_get_mad(c.u);
		uint16_t status = (uint16_t)((r[4] << 8) | r[5]);
		if (status != 0x000c) {
			fprintf(stderr, "[roce_client] unclaimed: status %#06x, want 0x000c\n", status);
			return 1;
		}
		printf("OK unclaimed status=%#06x\n", status);
	} else {
		fprintf(stderr, "unknown test %s\n", test);
		return 2;
	}
	umad_close_port(c.fd);
	return 0;
}
