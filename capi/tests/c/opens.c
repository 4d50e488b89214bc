/*
 * Several opens of one CA port, and umad_poll(..., 0), through vmad's libibumad and the
 * SYSTEM <infiniband/umad.h>, on the embedded fabric (vmadsim0 LID 1 <-> vmadsim1 LID 2).
 *
 * libibmad 56 and later open an SMI and a GSI port of the same CA
 * (mad_rpc_open_port2): as with the kernel's umad device, each open has its own agents,
 * its own receive queue and its own descriptor.
 *
 * Usage: opens [sim|ibsim-eio]; prints "N passed, N failed".
 *   ibsim-eio: VMAD_TRANSPORT=ibsim; blocks in umad_recv(-1) and umad_poll(-1) after
 *   printing "blocked", until the caller kills ibsim: both must return -EIO.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/umad.h>

#include "check.h"

#define MAD_LEN 256
#define VENDOR_CLASS 0x0a /* vendor range 1: no OUI, no RMPP */
#define PERF_CLASS 0x04

static void mad_hdr(uint8_t *mad, uint8_t class, uint8_t method, uint64_t tid)
{
	memset(mad, 0, MAD_LEN);
	mad[0] = 1;
	mad[1] = class;
	mad[2] = 1;
	mad[3] = method;
	uint64_t be = htobe64(tid);
	memcpy(mad + 8, &be, 8);
}

static void *buf(void)
{
	void *p = calloc(1, umad_size() + MAD_LEN);
	if (!p) {
		perror("calloc");
		exit(2);
	}
	return p;
}

/* Send method `method` of `class` from (port, agent) to LID `lid`, QP1. */
static int send_to(int port, int agent, uint8_t class, uint8_t method, uint64_t tid, int lid,
		   int timeout_ms)
{
	uint8_t *u = buf();
	mad_hdr((uint8_t *)umad_get_mad(u), class, method, tid);
	umad_set_addr(u, lid, 1, 0, 0x80010000);
	int r = umad_send(port, agent, u, MAD_LEN, timeout_ms, 0);
	free(u);
	return r;
}

/* umad_recv into a fresh buffer: the agent id or a negative errno; *tid the MAD's TID. */
static int recv_from(int port, int timeout_ms, uint64_t *tid, uint8_t *method)
{
	uint8_t *u = buf();
	int len = MAD_LEN;
	int r = umad_recv(port, u, &len, timeout_ms);
	if (r >= 0) {
		uint8_t *mad = umad_get_mad(u);
		uint64_t be;
		memcpy(&be, mad + 8, 8);
		if (tid)
			*tid = be64toh(be);
		if (method)
			*method = mad[3];
	}
	free(u);
	return r;
}

static void sim(void)
{
	long mask[16 / sizeof(long)] = { 0 };

	int a = umad_open_port("vmadsim0", 1);
	int b1 = umad_open_port("vmadsim1", 1);
	int b2 = umad_open_port("vmadsim1", 1);
	CHECK(a >= 0 && b1 >= 0, "open: %d %d", a, b1);
	CHECK(b2 >= 0, "a second open of vmadsim1 port 1 succeeds (got %d)", b2);
	CHECK(b1 != b2, "the two opens are told apart");
	CHECK(umad_get_fd(b1) != umad_get_fd(b2), "each open has its own descriptor");

	int client = umad_register(a, VENDOR_CLASS, 1, 0, NULL);
	mask[0] = 1 << 3; /* serves Send */
	int server = umad_register(b1, VENDOR_CLASS, 1, 0, mask);
	CHECK(client >= 0 && server >= 0, "register: %d %d", client, server);
	CHECK(umad_register(b2, VENDOR_CLASS, 1, 0, mask) < 0,
	      "a method one open serves cannot be taken by another open of the port");
	int b2_perf = umad_register(b2, PERF_CLASS, 1, 0, NULL);
	CHECK(b2_perf >= 0, "register on the second open: %d", b2_perf);
	CHECK(send_to(b1, b2_perf, PERF_CLASS, 1, 1, 1, 0) < 0,
	      "an agent is usable only through the open that registered it");

	/*
	 * poll(0) right after the request was sent drives the port once, as recv(0) does:
	 * when it says ready, recv(0) has the message; when not, the message still arrives.
	 */
	int ready = 0;
	for (int i = 0; i < 200; i++) {
		CHECK(send_to(a, client, VENDOR_CLASS, 3, 100 + i, 2, 0) == 0, "send %d", i);
		int p = umad_poll(b1, 0);
		CHECK(p == 0 || p == -ETIMEDOUT, "poll(0): %d", p);
		ready += p == 0;
		if (p != 0)
			CHECK(umad_poll(b1, 2000) == 0, "the message arrives (%d)", i);
		uint64_t tid = 0;
		int r = recv_from(b1, 0, &tid, NULL);
		CHECK(r == server && (tid & 0xffffffff) == (uint64_t)(100 + i),
		      "poll said ready, so recv(0) has it: %d tid %llx", r, (unsigned long long)tid);
	}
	printf("poll(0) found the message at once in %d of 200 rounds\n", ready);
	CHECK(ready > 0, "poll(0) found a message without a thread's help");
	CHECK(umad_poll(b2, 0) == -ETIMEDOUT, "the other open saw nothing");
	CHECK(recv_from(b2, 0, NULL, NULL) == -EWOULDBLOCK, "and receives nothing");

	/* The second open's request: the answer comes back to it, not to the first open. */
	mask[0] = 1 << 1; /* serves Get */
	int pma = umad_register(a, PERF_CLASS, 1, 0, mask);
	CHECK(pma >= 0, "register Get server on vmadsim0: %d", pma);
	CHECK(send_to(b2, b2_perf, PERF_CLASS, 1, 0x42, 1, 2000) == 0, "send from b2");
	uint8_t *u = buf();
	int len = MAD_LEN;
	CHECK(umad_recv(a, u, &len, -1) == pma, "the Get reached vmadsim0");
	uint8_t *mad = umad_get_mad(u);
	mad[3] = 0x81;
	CHECK(umad_send(a, pma, u, MAD_LEN, 0, 0) == 0, "answer");
	free(u);
	uint8_t method = 0;
	CHECK(recv_from(b2, 2000, NULL, &method) == b2_perf && method == 0x81,
	      "the GetResp came to the open that asked");
	CHECK(umad_poll(b1, 0) == -ETIMEDOUT, "and not to the other one");

	/* Closing one open leaves the other working; its method is free again. */
	CHECK(umad_close_port(b1) == 0, "close the first open");
	mask[0] = 1 << 3;
	int server2 = umad_register(b2, VENDOR_CLASS, 1, 0, mask);
	CHECK(server2 >= 0, "the closed open's method is free: %d", server2);
	CHECK(send_to(a, client, VENDOR_CLASS, 3, 7, 2, 0) == 0, "send");
	CHECK(recv_from(b2, 2000, NULL, NULL) == server2, "the remaining open receives it");
	CHECK(umad_close_port(b2) == 0 && umad_close_port(a) == 0, "close");
}

static int blocked_port;

static void *poller(void *arg)
{
	(void)arg;
	long r = umad_poll(blocked_port, -1);
	return (void *)r;
}

static void ibsim_eio(void)
{
	int port = umad_open_port(NULL, 0);
	CHECK(port >= 0, "open the ibsim port: %d", port);
	if (port < 0)
		return;
	blocked_port = port;
	int agent = umad_register(port, VENDOR_CLASS, 1, 0, NULL);
	CHECK(agent >= 0, "register: %d", agent);
	pthread_t t;
	pthread_create(&t, NULL, poller, NULL);
	printf("blocked\n");
	fflush(stdout);
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	uint8_t *u = buf();
	int len = MAD_LEN;
	int r = umad_recv(port, u, &len, -1);
	free(u);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	void *pr;
	pthread_join(t, &pr);
	CHECK(r == -EIO, "umad_recv(-1) under a dead ibsim returns -EIO (got %d)", r);
	CHECK((long)pr == -EIO, "umad_poll(-1) under a dead ibsim returns -EIO (got %ld)",
	      (long)pr);
	CHECK(umad_recv(port, u = buf(), &len, 0) == -EIO, "later receives too");
	free(u);
	CHECK(send_to(port, agent, VENDOR_CLASS, 1, 5, 1, 100) < 0, "sends fail");
	CHECK(umad_close_port(port) == 0, "close still works");
	printf("unblocked after %.1f s\n",
	       (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9);
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "sim";

	if (umad_init() < 0) {
		printf("umad_init failed\n");
		return 2;
	}
	if (!strcmp(mode, "sim"))
		sim();
	else if (!strcmp(mode, "ibsim-eio"))
		ibsim_eio();
	else {
		fprintf(stderr, "usage: opens [sim|ibsim-eio]\n");
		return 2;
	}
	printf("%d passed, %d failed\n", passed, failed);
	return failed != 0;
}
