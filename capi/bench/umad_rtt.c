/*
 * SMP round trips through libibumad, to compare libibumad implementations on
 * the same fabric (scripts/bench-umad: vmad's libibumad vs umad2sim on ibsim).
 *
 *   umad_rtt N WINDOW MODE
 *
 * Sends N directed-route Get(NodeInfo) SMPs one hop out (the neighbour of
 * port 1), keeping WINDOW in flight. MODE "one": one thread sends and
 * receives. MODE "two": a thread blocked in umad_recv(-1) receives while
 * the main thread sends, as OpenSM's vendor layer does. Prints microseconds
 * per MAD. Any error or failed status ends it with exit 1.
 */
#include <endian.h>
#include <infiniband/umad.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int port, agent, total, window;
static int received;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t progress = PTHREAD_COND_INITIALIZER;

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

static void die(const char *what)
{
	fprintf(stderr, "umad_rtt: %s\n", what);
	exit(1);
}

static void send_one(void *u, uint64_t tid)
{
	uint8_t *m;
	uint64_t be = htobe64(tid);

	memset(u, 0, umad_size() + 256);
	umad_set_addr(u, 0xffff, 0, 0, 0);
	m = umad_get_mad(u);
	m[0] = 1;		/* base version */
	m[1] = 0x81;		/* directed-route SMP */
	m[2] = 1;
	m[3] = 0x01;		/* Get */
	m[7] = 1;		/* hop count */
	memcpy(m + 8, &be, 8);
	m[17] = 0x11;		/* NodeInfo */
	memset(m + 32, 0xff, 4);	/* DrSLID, DrDLID permissive */
	m[129] = 1;		/* initial path: out of port 1 */
	if (umad_send(port, agent, u, 256, 1000, 3) < 0)
		die("umad_send failed");
}

static void recv_one(void *r)
{
	int len = 256;

	if (umad_recv(port, r, &len, -1) < 0)
		die("umad_recv failed");
	if (umad_status(r))
		die("a request timed out");
}

static void *receiver(void *arg)
{
	void *r = umad_alloc(1, umad_size() + 256);

	(void)arg;
	for (int i = 0; i < total; i++) {
		recv_one(r);
		pthread_mutex_lock(&lock);
		received++;
		pthread_cond_signal(&progress);
		pthread_mutex_unlock(&lock);
	}
	umad_free(r);
	return NULL;
}

int main(int argc, char **argv)
{
	void *u, *r;
	pthread_t th;
	int sent = 0, two;
	double t0;

	if (argc != 4)
		die("usage: umad_rtt N WINDOW one|two");
	total = atoi(argv[1]);
	window = atoi(argv[2]);
	two = !strcmp(argv[3], "two");
	if (total < 1 || window < 1)
		die("N and WINDOW must be positive");
	if (umad_init() < 0)
		die("umad_init failed");
	port = umad_open_port(NULL, 0);
	if (port < 0)
		die("umad_open_port failed");
	agent = umad_register(port, 0x81, 1, 0, NULL);
	if (agent < 0)
		die("umad_register failed");
	u = umad_alloc(1, umad_size() + 256);
	r = umad_alloc(1, umad_size() + 256);

	t0 = now();
	if (two) {
		pthread_create(&th, NULL, receiver, NULL);
		while (sent < total) {
			pthread_mutex_lock(&lock);
			while (sent - received >= window)
				pthread_cond_wait(&progress, &lock);
			pthread_mutex_unlock(&lock);
			send_one(u, ++sent);
		}
		pthread_join(th, NULL);
	} else {
		while (sent < window && sent < total)
			send_one(u, ++sent);
		for (int got = 0; got < total; got++) {
			recv_one(r);
			if (sent < total)
				send_one(u, ++sent);
		}
	}
	printf("%.1f\n", (now() - t0) / total * 1e6);
	umad_free(u);
	umad_free(r);
	umad_close_port(port);
	return 0;
}
