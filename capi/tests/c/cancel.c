/*
 * pthread_cancel of threads inside the drop-in, as OpenSM stops its threads, on the
 * embedded fabric (vmadsim0 LID 1 <-> vmadsim1 LID 2), through the SYSTEM
 * <infiniband/umad.h>.
 *
 * A cancellation that lands in a cancellation point (read, write, sendto, ...) inside a
 * Rust turn would unwind through Rust frames (an abort, or undefined behaviour): the
 * entry points keep cancellation disabled while Rust runs, and umad_recv/umad_poll stay
 * cancellable in wait.c's poll(). Each round starts a receiver blocked in umad_recv(-1)
 * (or umad_poll(-1)) and a sender that sends and receives in a loop, so the cancels land
 * anywhere: in poll(), in the Rust turns of umad_send and umad_recv, or before either
 * started. Both threads must end PTHREAD_CANCELED, nothing may leak (ASan), and the ports
 * must still answer a request afterwards.
 *
 * Usage: cancel; prints "N passed, N failed".
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/umad.h>

#include "check.h"

#define MAD_LEN 256
#define VENDOR_CLASS 0x0a /* vendor range 1: no OUI, no RMPP */
#define PERF_CLASS 0x04
#define ROUNDS 200

static int port_a, port_b, client, server;

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

/* Blocks in umad_recv(-1) (odd arg: umad_poll(-1)) until cancelled; takes what comes. */
static void *receiver(void *arg)
{
	/* On the heap, freed by the cleanup handler: ASan's redzones around a stack buffer
	 * stay poisoned after a cancellation unwinds the frame. */
	uint8_t *u = calloc(1, umad_size() + MAD_LEN);
	int use_poll = (int)(long)arg & 1;

	pthread_cleanup_push(free, u);
	for (;;) {
		int len = MAD_LEN;

		if (use_poll && umad_poll(port_b, -1) < 0)
			break;
		if (umad_recv(port_b, u, &len, -1) < 0)
			break;
	}
	pthread_cleanup_pop(1);
	return (void *)1L; /* an error return: not PTHREAD_CANCELED */
}

/* Sends from vmadsim0 to vmadsim1 and polls vmadsim0 in a loop until cancelled. */
static void *sender(void *arg)
{
	uint8_t *u = calloc(1, umad_size() + MAD_LEN);
	uint64_t tid = (uint64_t)(long)arg << 20;

	pthread_cleanup_push(free, u);
	for (;;) {
		int len = MAD_LEN;

		memset(u, 0, umad_size() + MAD_LEN);
		mad_hdr(umad_get_mad(u), VENDOR_CLASS, 3, tid++);
		umad_set_addr(u, 2, 1, 0, 0x80010000);
		if (umad_send(port_a, client, u, MAD_LEN, 0, 0) < 0)
			break;
		umad_recv(port_a, u, &len, 0);
		/* umad_send and umad_recv(0) hold cancellation off inside: act on it here. */
		pthread_testcancel();
	}
	pthread_cleanup_pop(1);
	return (void *)1L;
}

static void rounds(void)
{
	int bad_recv = 0, bad_send = 0;

	for (int i = 0; i < ROUNDS; i++) {
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
	long mask[16 / sizeof(long)] = { 0 };
	int len, r, drained = 0;

	/* What the senders left queued (more may still be on the way). */
	do {
		len = MAD_LEN;
		r = umad_recv(port_b, u, &len, 0);
		drained += r >= 0;
	} while (r >= 0);
	CHECK(r == -EWOULDBLOCK, "drained %d leftovers, then nothing: %d", drained, r);

	mask[0] = 1 << 1; /* serves Get */
	int pma = umad_register(port_a, PERF_CLASS, 1, 0, mask);
	int perf = umad_register(port_b, PERF_CLASS, 1, 0, NULL);
	CHECK(pma >= 0 && perf >= 0, "register: %d %d", pma, perf);
	memset(u, 0, umad_size() + MAD_LEN);
	mad_hdr(umad_get_mad(u), PERF_CLASS, 1, 0x4242);
	umad_set_addr(u, 1, 1, 0, 0x80010000);
	CHECK(umad_send(port_b, perf, u, MAD_LEN, 60000, 0) == 0, "send a Get");
	len = MAD_LEN;
	CHECK(umad_recv(port_a, u, &len, -1) == pma, "the Get reached vmadsim0");
	uint8_t *mad = umad_get_mad(u);
	mad[3] = 0x81;
	CHECK(umad_send(port_a, pma, u, MAD_LEN, 0, 0) == 0, "answer");
	/* A leftover Send still on its way when the drain ended may come first. */
	do {
		len = MAD_LEN;
		r = umad_recv(port_b, u, &len, 60000);
	} while (r == server);
	CHECK(r == perf && ((uint8_t *)umad_get_mad(u))[3] == 0x81,
	      "the GetResp came back (%d)", r);
	free(u);
}

int main(void)
{
	long mask[16 / sizeof(long)] = { 0 };

	if (umad_init() < 0) {
		printf("umad_init failed\n");
		return 2;
	}
	port_a = umad_open_port("vmadsim0", 1);
	port_b = umad_open_port("vmadsim1", 1);
	CHECK(port_a >= 0 && port_b >= 0, "open: %d %d", port_a, port_b);
	client = umad_register(port_a, VENDOR_CLASS, 1, 0, NULL);
	mask[0] = 1 << 3; /* serves Send */
	server = umad_register(port_b, VENDOR_CLASS, 1, 0, mask);
	CHECK(client >= 0 && server >= 0, "register: %d %d", client, server);
	rounds();
	still_answers();
	CHECK(umad_close_port(port_a) == 0 && umad_close_port(port_b) == 0, "close");
	printf("%d passed, %d failed\n", passed, failed);
	return failed != 0;
}
