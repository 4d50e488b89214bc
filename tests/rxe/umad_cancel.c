/*
 * umad_cancel: capi/tests/c/cancel.c on two soft-RoCE ports instead of the embedded
 * fabric: pthread_cancel of threads inside the drop-in (as OpenSM stops its threads),
 * through the SYSTEM <infiniband/umad.h>, built with -fsanitize=address and run by
 * tests/it/rxe/dropin_c.rs on vmad's drop-in with VMAD_TRANSPORT=verbs.
 *
 *   umad_cancel <ca> <port> <dgid> <sgid_index> [rounds]
 *
 * The peer is the kernel's `umad_agent serve` on the other port (class 0x09 at QP1,
 * addressed with a GRH: RoCE has no LIDs), which answers each Get. Each round starts
 * a receiver blocked in umad_recv(-1) (odd rounds: umad_poll(-1) first) and a sender
 * that sends Gets and takes answers with umad_recv(0) in a loop, both on the one open,
 * then cancels both, so the cancels land anywhere: in wait.c's poll(), in the Rust
 * turns of umad_send and umad_recv (where the drive of the CQ runs), or before either
 * started. Both threads must end PTHREAD_CANCELED, nothing may leak (ASan's
 * LeakSanitizer at exit), and the port must still answer afterwards.
 * Prints the checks' failures and "N passed, N failed".
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <infiniband/umad.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

#define MAD_LEN 256

static int portid, agent, sgid_index;
static const char *dgid;

/* A class 0x09 Get (attr 0xff10: the agent echoes it) to QP1 at dgid, over a GRH. */
static void get_request(void *u, uint64_t tid)
{
	ib_user_mad_t *um = u;
	memset(u, 0, umad_size() + MAD_LEN);
	uint8_t *m = umad_get_mad(u);
	m[0] = 1;
	m[1] = 0x09;
	m[2] = 1;
	m[3] = 0x01;
	uint64_t be = htobe64(tid);
	memcpy(m + 8, &be, 8);
	m[16] = 0xff;
	m[17] = 0x10;
	umad_set_addr(u, 0, 1, 0, 0x80010000);
	um->addr.grh_present = 1;
	um->addr.gid_index = (uint8_t)sgid_index;
	um->addr.hop_limit = 64;
	inet_pton(AF_INET6, dgid, um->addr.gid);
}

/* Blocks in umad_recv(-1) (odd arg: umad_poll(-1) first) until cancelled. */
static void *receiver(void *arg)
{
	/* On the heap, freed by the cleanup handler: ASan's redzones around a stack buffer
	 * stay poisoned after a cancellation unwinds the frame. */
	uint8_t *u = calloc(1, umad_size() + MAD_LEN);
	int use_poll = (int)(long)arg & 1;

	pthread_cleanup_push(free, u);
	for (;;) {
		int len = MAD_LEN;

		if (use_poll && umad_poll(portid, -1) < 0)
			break;
		if (umad_recv(portid, u, &len, -1) < 0)
			break;
	}
	pthread_cleanup_pop(1);
	return (void *)1L; /* an error return: not PTHREAD_CANCELED */
}

/* Sends Gets to the agent and takes what came back, in a loop until cancelled. */
static void *sender(void *arg)
{
	uint8_t *u = calloc(1, umad_size() + MAD_LEN);
	uint64_t tid = ((uint64_t)(long)arg + 1) << 20;

	pthread_cleanup_push(free, u);
	for (;;) {
		int len = MAD_LEN;

		get_request(u, tid++);
		/* 1 s: an answer the receivers leave behind comes back at the latest as a
		 * timed-out send, drained at the end. */
		if (umad_send(portid, agent, u, MAD_LEN, 1000, 0) < 0)
			break;
		umad_recv(portid, u, &len, 0);
		/* umad_send and umad_recv(0) hold cancellation off inside: act on it here. */
		pthread_testcancel();
	}
	pthread_cleanup_pop(1);
	return (void *)1L;
}

static void rounds(int n)
{
	int bad_recv = 0, bad_send = 0;

	for (int i = 0; i < n; i++) {
		pthread_t r, s;
		void *rr = NULL, *sr = NULL;

		pthread_create(&r, NULL, receiver, (void *)(long)i);
		pthread_create(&s, NULL, sender, (void *)(long)i);
		/* Vary where the cancels land: at once, or after some traffic. */
		for (int k = 0; k < i % 16; k++)
			sched_yield();
		if (i % 2)
			pthread_cancel(s);
		pthread_cancel(r);
		pthread_cancel(s);
		pthread_join(r, &rr);
		pthread_join(s, &sr);
		bad_recv += rr != PTHREAD_CANCELED;
		bad_send += sr != PTHREAD_CANCELED;
	}
	CHECK(bad_recv == 0, "every blocked receiver ended cancelled (%d did not)", bad_recv);
	CHECK(bad_send == 0, "every sender ended cancelled (%d did not)", bad_send);
}

static void still_answers(void)
{
	uint8_t *u = calloc(1, umad_size() + MAD_LEN);
	const uint64_t tid = 0x4242;
	int len, r = -1, drained = 0;
	uint64_t t = 0;

	get_request(u, tid);
	CHECK(umad_send(portid, agent, u, MAD_LEN, 60000, 0) == 0, "send a Get");
	/* Answers and timed-out sends the rounds left queued may come first. */
	for (int k = 0; k < 100000; k++) {
		len = MAD_LEN;
		r = umad_recv(portid, u, &len, 60000);
		if (r < 0)
			break;
		memcpy(&t, umad_get_mad(u) + 8, 8);
		/* The low 32 bits: the upper ones are the agent's (the kernel's TID layout). */
		if ((be64toh(t) & 0xffffffffu) == tid)
			break;
		drained++;
	}
	uint8_t *m = umad_get_mad(u);
	CHECK(r == agent && (be64toh(t) & 0xffffffffu) == tid && m[3] == 0x81 && !umad_status(u) &&
		      !memcmp(m + 24, "RESPONSE", 8),
	      "the answer came back (r %d, %d left over before it)", r, drained);
	printf("leftovers=%d\n", drained);
	free(u);
}

int main(int argc, char **argv)
{
	if (argc < 5) {
		fprintf(stderr, "usage: %s <ca> <port> <dgid> <sgid_index> [rounds]\n", argv[0]);
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	dgid = argv[3];
	sgid_index = atoi(argv[4]);
	int n = argc > 5 ? atoi(argv[5]) : 200;
	if (umad_init() < 0) {
		printf("umad_init failed\n");
		return 2;
	}
	portid = umad_open_port(argv[1], atoi(argv[2]));
	CHECK(portid >= 0, "open: %d", portid);
	agent = portid >= 0 ? umad_register(portid, 0x09, 1, 0, NULL) : -1;
	CHECK(agent >= 0, "register: %d", agent);
	if (agent < 0)
		return 1;
	rounds(n);
	still_answers();
	CHECK(umad_close_port(portid) == 0, "close");
	printf("%d passed, %d failed\n", passed, failed);
	return failed != 0;
}
