/* SPDX-License-Identifier: MIT */
/*
 * A registration refused for the locked-memory limit names the limit, its
 * value and the fix (docs/api.md, "Registration limits"). The fake efa
 * provider, with TERN_FAKEEFA_MEMLOCK=1, pins what it registers against
 * RLIMIT_MEMLOCK as EFA and verbs do; this program sets the soft limit
 * to 4 MiB (or the hard limit, if lower), registers 16 MiB (refused:
 * tern's warning must name RLIMIT_MEMLOCK, its value in bytes, `ulimit
 * -l` and `tern doctor --region-size 16777216`), then 1 MiB (taken), and
 * after closing that, 16 MiB again with no soft limit where the hard one
 * allows it (taken).
 * usage: memlock (with FI_PROVIDER_PATH at the fake)
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <tern/tern.h>

#define LIMIT (4u << 20)
#define BIG   (16u << 20)

static int failed;

#define CHECK(cond, ...)                                                     \
	do {                                                                 \
		if (!(cond)) {                                               \
			fprintf(stdout, "FAIL %s:%d: ", __FILE__, __LINE__); \
			fprintf(stdout, __VA_ARGS__);                        \
			fputc('\n', stdout);                                 \
			failed = 1;                                          \
		}                                                            \
	} while (0)

/* Run tern_mr_reg() of @len bytes with stderr into @log (NUL-ended). */
static int reg_logged(struct tern_ctx *ctx, void *buf, size_t len,
		      struct tern_mr **mr, char *log, size_t loglen)
{
	FILE *tmp = tmpfile();
	int saved = dup(2), ret;
	size_t got;

	if (tmp == NULL || saved < 0) {
		perror("tmpfile/dup");
		exit(1);
	}
	fflush(stderr);
	dup2(fileno(tmp), 2);
	ret = tern_mr_reg(ctx, buf, len, TERN_ACCESS_LOCAL, mr);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	rewind(tmp);
	got = fread(log, 1, loglen - 1, tmp);
	log[got] = '\0';
	fclose(tmp);
	return ret;
}

int main(void)
{
	struct tern_ctx_attr attr = { .provider = "efa", .fabric = "efa" };
	struct tern_mr *mr = NULL, *small = NULL;
	struct rlimit old, rl;
	struct tern_ctx *ctx;
	char log[4096], want[80];
	uint8_t *buf;
	int ret;

	setenv("TERN_FAKEEFA_MEMLOCK", "1", 1);
	if (tern_ctx_open(&attr, &ctx) != 0) {
		fprintf(stdout,
			"FAIL: no ctx on the fake efa (FI_PROVIDER_PATH "
			"at build/tests/fakeefa/prov?)\n");
		return 1;
	}
	buf = calloc(1, BIG);
	if (buf == NULL || getrlimit(RLIMIT_MEMLOCK, &old) != 0)
		return 1;
	rl = old;
	rl.rlim_cur = LIMIT;
	if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < LIMIT)
		rl.rlim_cur = rl.rlim_max;
	if (setrlimit(RLIMIT_MEMLOCK, &rl) != 0) {
		perror("setrlimit");
		return 1;
	}

	ret = reg_logged(ctx, buf, BIG, &mr, log, sizeof(log));
	CHECK(ret == -TERN_EPROV, "16 MiB over a 4 MiB limit: %d", ret);
	snprintf(want, sizeof(want), "RLIMIT_MEMLOCK is %llu bytes",
		 (unsigned long long)rl.rlim_cur);
	CHECK(strstr(log, want) != NULL,
	      "the warning names the limit and its value (%s): %s", want, log);
	CHECK(strstr(log, "ulimit -l unlimited") != NULL &&
		      strstr(log, "LimitMEMLOCK=infinity") != NULL,
	      "the warning says the fix: %s", log);
	CHECK(strstr(log, "tern doctor --region-size 16777216") != NULL,
	      "the warning names the doctor check: %s", log);
	fputs(log, stdout);

	ret = reg_logged(ctx, buf, 1u << 20, &small, log, sizeof(log));
	CHECK(ret == 0, "1 MiB under the limit: %d (%s)", ret, log);
	if (ret == 0)
		CHECK(tern_mr_close(small) == 0, "close");
	small = NULL;

	/* Unlimited, as root may make it (else the old limit): the same
	 * 16 MiB is taken, so the limit was the only refusal. */
	rl.rlim_cur = rl.rlim_max = RLIM_INFINITY;
	if (setrlimit(RLIMIT_MEMLOCK, &rl) != 0) {
		rl = old;
		rl.rlim_cur = rl.rlim_max;
		(void)setrlimit(RLIMIT_MEMLOCK, &rl);
	}
	if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= 2u * BIG) {
		ret = reg_logged(ctx, buf, BIG, &mr, log, sizeof(log));
		CHECK(ret == 0, "16 MiB with no limit: %d (%s)", ret, log);
	} else {
		printf("memlock: the hard limit (%llu) leaves no room for the "
		       "last step; not run\n",
		       (unsigned long long)rl.rlim_cur);
		ret = -1;
	}

	if (small != NULL)
		CHECK(tern_mr_close(small) == 0, "close");
	if (ret == 0)
		CHECK(tern_mr_close(mr) == 0, "close");
	tern_ctx_close(ctx);
	free(buf);
	puts(failed ? "memlock: FAILED" : "memlock: ok");
	return failed;
}
