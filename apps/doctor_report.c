/* SPDX-License-Identifier: MIT */
/*
 * `tern doctor`'s findings read back (apps/doctor.h): one by its check,
 * the worst status, and the report as text or JSON.
 */
#include <stdio.h>
#include <string.h>

#include "apps/doctor.h"
#include "apps/json.h"

const struct doctor_finding *doctor_find(const struct doctor *d,
					 const char *check)
{
	for (size_t i = 0; i < d->n; i++) {
		if (strcmp(d->f[i].check, check) == 0)
			return &d->f[i];
	}
	return NULL;
}

enum doctor_status doctor_worst(const struct doctor *d)
{
	enum doctor_status w = d->nomem ? DOCTOR_FAIL : DOCTOR_OK;

	for (size_t i = 0; i < d->n; i++) {
		if (d->f[i].status > w)
			w = d->f[i].status;
	}
	return w;
}

const char *doctor_status_str(enum doctor_status s)
{
	return s == DOCTOR_FAIL ? "fail" : s == DOCTOR_WARN ? "warn" : "ok";
}

void doctor_print_text(const struct doctor *d, FILE *f)
{
	size_t warn = 0, fail = 0;

	for (size_t i = 0; i < d->n; i++) {
		const struct doctor_finding *x = &d->f[i];

		fprintf(f, "%-4s  %-14s %s%s%s\n", doctor_status_str(x->status),
			x->check, x->detail, x->fix[0] ? "; fix: " : "",
			x->fix);
		warn += x->status == DOCTOR_WARN;
		fail += x->status == DOCTOR_FAIL;
	}
	if (d->nomem)
		fprintf(f, "fail  doctor         out of memory: findings "
			   "are missing\n");
	if (fail > 0 || d->nomem)
		fprintf(f,
			"\n%zu failure(s), %zu warning(s): fix the "
			"failures before running tern here\n",
			fail, warn);
	else
		fprintf(f, "\nno failure, %zu warning(s): tern can run here\n",
			warn);
}

void doctor_print_json(const struct doctor *d, FILE *f)
{
	fprintf(f, "{\"findings\": [");
	for (size_t i = 0; i < d->n; i++) {
		const struct doctor_finding *x = &d->f[i];

		fprintf(f, "%s\n  {\"check\": ", i ? "," : "");
		app_json_string(f, x->check, sizeof(x->check));
		fprintf(f, ", \"status\": \"%s\", \"detail\": ",
			doctor_status_str(x->status));
		app_json_string(f, x->detail, sizeof(x->detail));
		fprintf(f, ", \"fix\": ");
		app_json_string(f, x->fix, sizeof(x->fix));
		fprintf(f, "}");
	}
	fprintf(f, "\n], \"ok\": %s}\n",
		doctor_worst(d) == DOCTOR_FAIL ? "false" : "true");
}
