/*
 * Force-included (cc -include) into rdma-core 56's libibumad/tests/umad_register2.c
 * when scripts/rxe-test builds it for the VM (tests/it/kernel.rs).
 *
 * Before its tests of umad_register2, that program asks the kernel whether it has
 * IB_USER_MAD_REGISTER_AGENT2, with ioctl() on the port id umad_open_port returned:
 * libibumad's port id is the umad device's descriptor. vmad's is not a descriptor at
 * all (a number, 1 for the first port: the ioctl would go to stdout and the program
 * would stop, "Kernel does not support the new ioctl"). So the question goes where
 * it is meant, the kernel's umad device; the program's only ioctl() is this probe,
 * and its tests, which go through umad_register2/umad_unregister, are unchanged.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <unistd.h>

static inline int register2_probe(int port_id, unsigned long request, void *arg)
{
	int fd = open("/dev/infiniband/umad0", O_RDWR), rc, err;

	(void)port_id;
	if (fd < 0) {
		perror("register2_probe: /dev/infiniband/umad0");
		exit(2);
	}
	rc = ioctl(fd, request, arg);
	err = errno;
	close(fd);
	errno = err;
	return rc;
}

#define ioctl(fd, request, arg) register2_probe(fd, request, arg)
