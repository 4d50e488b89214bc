/*
 * src/wait.c on its own: umad_recv's and umad_poll's loops against stand-ins for the
 * Rust side (the vmad_capi_* calls), so that a port can be made to do what no real one
 * does on demand: keep its transport's descriptor readable while nothing ever arrives
 * for the open (another open's stream of MADs, or another thread that always wins).
 * The calls must still time out. A loop that never ends is caught by alarm(2).
 */
#include "../../src/wait.c"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "check.h"

/* The stand-ins' state: what the port "has", and what the loops asked of it. */
static int open_pipe[2], transport_pipe[2];
static int message_at = -1; /* the receive attempt that finds a message; -1: none */
static int attempts, begun, ended, waited_reports;

static int attempt(void)
{
	if (message_at >= 0 && ++attempts >= message_at)
		return 0;
	if (message_at < 0)
		attempts++;
	errno = EWOULDBLOCK;
	return -EWOULDBLOCK;
}

int vmad_capi_recv_nb(int portid, void *umad, int *length)
{
	int r = attempt();

	if (r == 0)
		*length = 256;
	return r;
}

int vmad_capi_recv_before_wait(int portid, void *umad, int *length)
{
	return vmad_capi_recv_nb(portid, umad, length);
}

int vmad_capi_poll_nb(int portid)
{
	return attempt() == 0 ? 0 : -ETIMEDOUT;
}

void *vmad_capi_wait_begin(int portid, int fds[2])
{
	static int token;

	begun++;
	fds[0] = open_pipe[0];
	fds[1] = transport_pipe[0];
	return &token;
}

void vmad_capi_wait_end(void *token)
{
	ended++;
}

int vmad_capi_spin_us(int portid)
{
	return 0;
}

void vmad_capi_waited(int portid, long us)
{
	waited_reports++;
}

static void hung(int sig)
{
	static const char msg[] = "FAIL: umad_recv/umad_poll still looping after 10 s\n";

	(void)sig;
	(void)!write(1, msg, sizeof(msg) - 1);
	_exit(1);
}

static void reset(int at)
{
	message_at = at;
	attempts = begun = ended = waited_reports = 0;
}

int main(void)
{
	char umad[512];
	int len = sizeof(umad);
	int r;

	signal(SIGALRM, hung);
	alarm(10);
	if (pipe(open_pipe) || pipe(transport_pipe)) {
		perror("pipe");
		return 1;
	}
	/* The transport's descriptor polls readable from now on: one byte, never read. */
	if (write(transport_pipe[1], "x", 1) != 1) {
		perror("write");
		return 1;
	}

	reset(-1);
	errno = 0;
	r = umad_recv(0, umad, &len, 100);
	CHECK(r == -ETIMEDOUT && errno == ETIMEDOUT,
	      "umad_recv(100 ms), readable and empty: %d (errno %d), want -ETIMEDOUT", r, errno);
	CHECK(begun == ended && begun > 1, "waits begun %d, ended %d", begun, ended);

	reset(-1);
	errno = 0;
	r = umad_poll(0, 100);
	CHECK(r == -ETIMEDOUT && errno == ETIMEDOUT,
	      "umad_poll(100 ms), readable and empty: %d (errno %d), want -ETIMEDOUT", r, errno);
	CHECK(begun == ended && begun > 1, "waits begun %d, ended %d", begun, ended);

	/* Before the deadline the loops go on: a message found later is returned. */
	reset(50);
	len = sizeof(umad);
	r = umad_recv(0, umad, &len, 5000);
	CHECK(r == 0 && len == 256 && attempts == 50,
	      "umad_recv(5 s), message at the 50th try: %d, len %d, tries %d", r, len, attempts);
	CHECK(waited_reports == 1, "the wait was reported %d times, want 1", waited_reports);

	reset(50);
	len = sizeof(umad);
	r = umad_recv(0, umad, &len, -1);
	CHECK(r == 0 && attempts == 50, "umad_recv(-1), message at the 50th try: %d, tries %d", r,
	      attempts);

	reset(50);
	r = umad_poll(0, 5000);
	CHECK(r == 0 && attempts == 50, "umad_poll(5 s), message at the 50th try: %d, tries %d", r,
	      attempts);

	/* A zero timeout never waits. */
	reset(-1);
	len = sizeof(umad);
	r = umad_recv(0, umad, &len, 0);
	CHECK(r == -EWOULDBLOCK && begun == 0, "umad_recv(0): %d, waits %d", r, begun);
	reset(-1);
	r = umad_poll(0, 0);
	CHECK(r == -ETIMEDOUT && begun == 0, "umad_poll(0): %d, waits %d", r, begun);

	printf("wait_unit: %d passed, %d failed\n", passed, failed);
	return failed != 0;
}
