/*
 * The C tests' one assertion: counts a pass or prints the failed condition with its
 * file, line and message. Each program prints "N passed, N failed" from the counters.
 */
#ifndef VMAD_TESTS_CHECK_H
#define VMAD_TESTS_CHECK_H

#include <stdio.h>

static int passed, failed;

#define CHECK(cond, ...)                                                     \
	do {                                                                 \
		if (cond) {                                                  \
			passed++;                                            \
		} else {                                                     \
			failed++;                                            \
			printf("FAIL %s:%d: ", __FILE__, __LINE__);          \
			printf(__VA_ARGS__);                                 \
			printf("  [%s]\n", #cond);                           \
		}                                                            \
	} while (0)

#endif
