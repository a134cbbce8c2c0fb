/* The engine registry: an explicit table (IOR's available_aiori[]), not constructor
 * registration, because the core is linked as a static archive and the linker drops archive
 * members nobody references. Optional engines compile away here and nowhere else.
 *
 * One exception, by design: the MPI-IO engine is built into a separate extension (dlio._mpiio) so
 * that the core never links libmpi, and hands its ops table in with dc_engine_register(). Those
 * go into a small table after the static one; an entry is published (count stored with release)
 * only once complete, so lookups need no lock.
 */
#include "dlio_core/engine.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "core_int.h"
#include "engines/engines.h"

static const struct dc_engine_ops *const engines[] = {
	&dc_posix_ops,
#ifdef DC_URING
	&dc_uring_ops,
#endif
	&dc_mmap_ops,
	&dc_null_ops,
};

#define NR_ENGINES (sizeof(engines) / sizeof(engines[0]))
#define NR_EXTRA   8

static unsigned char engine_ok[NR_ENGINES];
static pthread_once_t check_once = PTHREAD_ONCE_INIT;

static const struct dc_engine_ops *extra[NR_EXTRA];
static unsigned nr_extra; /* published with release after extra[nr_extra] is set */
static pthread_mutex_t extra_lock = PTHREAD_MUTEX_INITIALIZER;

/* The contract in one place (fio's check_engine_ops): a table missing a mandatory hook is never
 * handed out, so the runner can call ops without NULL checks. */
static int ops_complete(const struct dc_engine_ops *o)
{
	int ok = o->name && o->init && o->cleanup && o->submit && o->open && o->close &&
		 o->available;

	if ((o->caps & DC_CAP_ASYNC) && !o->reap)
		ok = 0;
	return ok;
}

static void check_engines(void)
{
	for (unsigned i = 0; i < NR_ENGINES; i++)
		engine_ok[i] = (unsigned char)ops_complete(engines[i]);
}

static unsigned extra_count(void)
{
	return __atomic_load_n(&nr_extra, __ATOMIC_ACQUIRE);
}

unsigned dc_engine_count(void)
{
	return (unsigned)NR_ENGINES + extra_count();
}

const struct dc_engine_ops *dc_engine_at(unsigned i)
{
	pthread_once(&check_once, check_engines);
	if (i >= NR_ENGINES) {
		i -= (unsigned)NR_ENGINES;
		return i < extra_count() ? extra[i] : NULL;
	}
	if (!engine_ok[i])
		return NULL;
	return engines[i];
}

const struct dc_engine_ops *dc_engine_find(const char *name)
{
	unsigned n;

	if (!name)
		return NULL;
	pthread_once(&check_once, check_engines);
	for (unsigned i = 0; i < NR_ENGINES; i++)
		if (engine_ok[i] && !strcmp(engines[i]->name, name))
			return engines[i];
	n = extra_count();
	for (unsigned i = 0; i < n; i++)
		if (!strcmp(extra[i]->name, name))
			return extra[i];
	return NULL;
}

int dc_engine_register(const struct dc_engine_ops *ops)
{
	int ret = 0;

	if (!ops || !ops_complete(ops))
		return -EINVAL;
	pthread_mutex_lock(&extra_lock);
	if (dc_engine_find(ops->name))
		ret = 0; /* the same name twice: keep the first */
	else if (nr_extra >= NR_EXTRA)
		ret = -ENOSPC;
	else {
		extra[nr_extra] = ops;
		__atomic_store_n(&nr_extra, nr_extra + 1, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&extra_lock);
	return ret;
}

static void known_names(char *buf, size_t len)
{
	size_t used = 0;
	unsigned total = dc_engine_count();

	buf[0] = '\0';
	for (unsigned i = 0; i < total && used < len; i++) {
		const struct dc_engine_ops *o = i < NR_ENGINES ? engines[i] : dc_engine_at(i);
		int n;

		if (!o)
			continue;
		n = snprintf(buf + used, len - used, "%s%s", i ? ", " : "", o->name);

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
#ifndef DC_URING
	if (name && !strcmp(name, "io_uring")) {
		snprintf(why, whylen,
			 "not compiled in: built with DLIO_FAST_NO_URING=1 (cmake: "
			 "DLIO_NO_URING=ON) or not for Linux; reinstall without the opt-out");
		return -ENOSYS;
	}
#endif
	if (name && !strcmp(name, "mpiio")) {
		snprintf(why, whylen,
			 "not registered: the MPI-IO engine is the separate "
			 "extension dlio._mpiio (built when MPI's compiler is found; pip install "
			 "mpich mpi4py, then reinstall dlio-fast), registered by dlio.mpi");
		return -ENOSYS;
	}
	{
		char names[128];

		known_names(names, sizeof(names));
		snprintf(why, whylen, "unknown engine '%s' (known: %s)", name ? name : "(null)",
			 names);
	}
	return -ENOENT;
}
