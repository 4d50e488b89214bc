/*
 * umad_fd_poll: a C program that waits on the descriptor umad_get_fd gives, with
 * poll(2), and in umad_poll, through the SYSTEM <infiniband/umad.h> (run on vmad's
 * drop-in with VMAD_TRANSPORT=verbs or =hybrid by tests/it/rxe/dropin_c.rs).
 *
 *   umad_fd_poll <ca> <port> <dgid> <sgid_index> <n>
 *
 * n class 0x09 Gets (attr 0xff10) to QP1 at dgid (the kernel's `umad_agent serve`
 * on the other port answers each); even round trips wait in poll(2) on
 * umad_get_fd's descriptor, odd ones in umad_poll, then take the answer with
 * umad_recv(0). The descriptor must be readable exactly while a message is queued:
 * not while idle (before, between and after the round trips, and over 200 ms
 * with nothing on the way: a busy-ready descriptor fails there), and every wake-up
 * must bring a message (counted as spurious otherwise). Prints the checks' failures,
 * "wakes=W spurious=S", and "N passed, N failed".
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <infiniband/umad.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

#define MAD_LEN 256

/* poll(2) on fd for POLLIN: its result (1 readable, 0 not within ms). */
static int readable(int fd, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	int r = poll(&p, 1, ms);
	return r > 0 && (p.revents & POLLIN) ? 1 : r;
}

int main(int argc, char **argv)
{
	if (argc != 6) {
		fprintf(stderr, "usage: %s <ca> <port> <dgid> <sgid_index> <n>\n", argv[0]);
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	const char *ca = argv[1], *dgid = argv[3];
	int port = atoi(argv[2]), sgid_index = atoi(argv[4]), n = atoi(argv[5]);
	if (umad_init() < 0) {
		printf("umad_init failed\n");
		return 2;
	}
	int portid = umad_open_port(ca, port);
	CHECK(portid >= 0, "umad_open_port(%s, %d): %d", ca, port, portid);
	if (portid < 0)
		return 1;
	int agent = umad_register(portid, 0x09, 1, 0, NULL);
	CHECK(agent >= 0, "umad_register: %d", agent);
	int fd = umad_get_fd(portid);
	CHECK(fd >= 0, "umad_get_fd: %d", fd);
	if (agent < 0 || fd < 0)
		return 1;

	CHECK(readable(fd, 0) == 0, "nothing queued at first: the descriptor is not readable");
	CHECK(readable(fd, 200) == 0, "idle for 200 ms: the descriptor stays unreadable");
	CHECK(umad_poll(portid, 0) == -ETIMEDOUT, "umad_poll(0) with nothing queued: -ETIMEDOUT");

	void *u = calloc(1, umad_size() + MAD_LEN);
	int wakes = 0, spurious = 0;
	for (int k = 0; k < n; k++) {
		ib_user_mad_t *um = u;
		memset(u, 0, umad_size() + MAD_LEN);
		uint8_t *m = umad_get_mad(u);
		m[0] = 1;
		m[1] = 0x09;
		m[2] = 1;
		m[3] = 0x01;
		uint64_t tid = htobe64(0x5000u + (uint64_t)k);
		memcpy(m + 8, &tid, 8);
		m[16] = 0xff;
		m[17] = 0x10;
		umad_set_addr(u, 0, 1, 0, 0x80010000);
		um->addr.grh_present = 1;
		um->addr.gid_index = (uint8_t)sgid_index;
		um->addr.hop_limit = 64;
		inet_pton(AF_INET6, dgid, um->addr.gid);
		int r = umad_send(portid, agent, u, MAD_LEN, 60000, 0);
		CHECK(r == 0, "round trip %d: umad_send: %d", k, r);
		if (r)
			continue;
		int len, got = -1;
		if (k % 2 == 0) {
			/* A wake-up that brings nothing is counted; a busy-ready descriptor
			 * would count thousands within one round trip. */
			while (got < 0 && spurious < 1000) {
				r = readable(fd, 60000);
				if (r != 1)
					break;
				wakes++;
				len = MAD_LEN;
				got = umad_recv(portid, u, &len, 0);
				spurious += got < 0;
			}
			CHECK(got == agent, "round trip %d: poll(2) woke with the answer: poll %d recv %d", k, r,
			      got);
		} else {
			r = umad_poll(portid, 60000);
			CHECK(r == 0, "round trip %d: umad_poll(60000): %d", k, r);
			len = MAD_LEN;
			got = umad_recv(portid, u, &len, 0);
			CHECK(got == agent, "round trip %d: umad_poll said ready, umad_recv(0): %d", k, got);
		}
		if (got != agent)
			continue;
		uint64_t t;
		memcpy(&t, m + 8, 8);
		/* The low 32 bits: the upper ones are the sender's agent's (the kernel's, and
		 * libibumad's, TID layout). */
		CHECK((be64toh(t) & 0xffffffffu) == 0x5000u + (uint64_t)k && m[3] == 0x81 && !um->status &&
			      !memcmp(m + 24, "RESPONSE", 8),
		      "round trip %d: the answer (tid %#llx method %#x status %u)", k,
		      (unsigned long long)be64toh(t), m[3], um->status);
		CHECK(readable(fd, 0) == 0, "round trip %d: taken, the descriptor is not readable", k);
	}
	CHECK(readable(fd, 200) == 0, "after all: idle for 200 ms, the descriptor stays unreadable");
	CHECK(umad_poll(portid, 200) == -ETIMEDOUT, "after all: umad_poll(200): -ETIMEDOUT");
	CHECK(spurious == 0, "every wake-up of poll(2) brought a message (%d did not)", spurious);
	CHECK(umad_close_port(portid) == 0, "close");
	free(u);
	printf("wakes=%d spurious=%d\n", wakes, spurious);
	printf("%d passed, %d failed\n", passed, failed);
	return failed != 0;
}
