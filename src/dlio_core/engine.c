/* The engine registry: an explicit table (IOR's available_aiori[]), not constructor
 * registration, because the core is linked as a static archive and the linker drops archive
 * members nobody references. Optional engines compile away here and nowhere else.
 */
#include "dlio_core/engine.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "core_int.h"

static const struct dc_engine_ops *const engines[] = {
	&dc_posix_ops,
#ifdef DC_HAVE_LIBURING
	&dc_uring_ops,
#endif
	&dc_mmap_ops,
	&dc_null_ops,
};

#define NR_ENGINES (sizeof(engines) / sizeof(engines[0]))

static unsigned char engine_ok[NR_ENGINES];
static pthread_once_t check_once = PTHREAD_ONCE_INIT;

/* The contract in one place (fio's check_engine_ops): a table missing a mandatory hook is never
 * handed out, so the runner can call ops without NULL checks. */
static void check_engines(void)
{
	for (unsigned i = 0; i < NR_ENGINES; i++) {
		const struct dc_engine_ops *o = engines[i];
		int ok = o->name && o->init && o->cleanup && o->submit && o->open && o->close &&
			 o->available;

		if ((o->caps & DC_CAP_ASYNC) && !o->reap)
			ok = 0;
		engine_ok[i] = (unsigned char)ok;
	}
}

unsigned dc_engine_count(void)
{
	return (unsigned)NR_ENGINES;
}

const struct dc_engine_ops *dc_engine_at(unsigned i)
{
	pthread_once(&check_once, check_engines);
	if (i >= NR_ENGINES || !engine_ok[i])
		return NULL;
	return engines[i];
}

const struct dc_engine_ops *dc_engine_find(const char *name)
{
	if (!name)
		return NULL;
	pthread_once(&check_once, check_engines);
	for (unsigned i = 0; i < NR_ENGINES; i++)
		if (engine_ok[i] && !strcmp(engines[i]->name, name))
			return engines[i];
	return NULL;
}

static void known_names(char *buf, size_t len)
{
	size_t used = 0;

	buf[0] = '\0';
	for (unsigned i = 0; i < NR_ENGINES && used < len; i++) {
		int n = snprintf(buf + used, len - used, "%s%s", i ? ", " : "", engines[i]->name);

		if (n < 0)
			break;
		used += (size_t)n;
	}
}

int dc_engine_available(const char *name, char *why, size_t whylen)
{
	const struct dc_engine_ops *o = dc_engine_find(name);
	char tmp[1];

	if (!why || !whylen) {
		why = tmp;
		whylen = sizeof(tmp);
	}
	why[0] = '\0';
	if (o)
		return o->available(why, whylen);
#ifndef DC_HAVE_LIBURING
	if (name && !strcmp(name, "io_uring")) {
		snprintf(why, whylen, "not compiled in: liburing headers were missing at build time "
			 "(apt-get install liburing-dev, then reinstall dlio-fast)");
		return -ENOSYS;
	}
#endif
	{
		char names[128];

		known_names(names, sizeof(names));
		snprintf(why, whylen, "unknown engine '%s' (known: %s)", name ? name : "(null)", names);
	}
	return -ENOENT;
}
