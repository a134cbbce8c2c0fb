/* The run skeleton the three runs share: first error, stop flag, start gate (run_base.h). */
#include <errno.h>
#include <string.h>
#include <time.h>

#include "dlio_core/engine.h"
#include "dlio_core/timer.h"
#include "run_base.h"

void run_base_init(struct run_base *b, struct dc_error *error, pthread_cond_t *wake,
		   const volatile int *user_stop)
{
	pthread_condattr_t ca;

	memset(b, 0, sizeof(*b));
	b->error = error;
	b->wake = wake;
	b->user_stop = user_stop;
	memset(error, 0, sizeof(*error));
	error->file = UINT32_MAX;
	pthread_mutex_init(&b->lock, NULL);
	/* Timed waits on the monotonic clock, so a wall-clock step cannot stall a stop check. */
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&b->cond, &ca);
	pthread_condattr_destroy(&ca);
}

void run_base_destroy(struct run_base *b)
{
	pthread_cond_destroy(&b->cond);
	pthread_mutex_destroy(&b->lock);
}

/* Only the first error is kept: later ones are usually consequences of it. Everyone is woken so
 * the run stops promptly (a thread at the gate, a trainer waiting for a batch, readers waiting for
 * room, KV workers waiting for a request). */
void run_fail(struct run_base *b, int err, uint32_t file, uint64_t offset, const char *what)
{
	struct dc_error *e = b->error;

	pthread_mutex_lock(&b->lock);
	if (!e->err) {
		e->file = file;
		e->offset = offset;
		strncpy(e->what, what, sizeof(e->what) - 1);
		e->what[sizeof(e->what) - 1] = '\0';
		__atomic_store_n(&e->err, err > 0 ? err : EIO, __ATOMIC_RELAXED);
	}
	__atomic_store_n(&b->stop, 1, __ATOMIC_RELAXED);
	pthread_cond_broadcast(&b->cond);
	if (b->wake)
		pthread_cond_broadcast(b->wake);
	pthread_mutex_unlock(&b->lock);
}

int run_start(struct run_base *b, pthread_t *tid, const pthread_attr_t *attr, void *(*fn)(void *),
	      void *arg)
{
	/* Probe where buffered reads land (land.c) now, before any clock runs, not in a first read. */
	(void)dc_buffered_land();
	int ret = pthread_create(tid, attr, fn, arg);

	if (ret) {
		run_fail(b, ret, UINT32_MAX, 0, "thread");
		return ret;
	}
	pthread_mutex_lock(&b->lock);
	b->ncreated++;
	pthread_mutex_unlock(&b->lock);
	return 0;
}

int run_gate_wait(struct run_base *b)
{
	int go;

	pthread_mutex_lock(&b->lock);
	b->nready++;
	pthread_cond_broadcast(&b->cond);
	while (!b->go)
		pthread_cond_wait(&b->cond, &b->lock);
	go = b->go;
	pthread_mutex_unlock(&b->lock);
	return go > 0 ? 0 : -1;
}

int run_gate_open(struct run_base *b, uint64_t ramp_ns, uint64_t runtime_ns)
{
	int failed;

	pthread_mutex_lock(&b->lock);
	while (b->nready < b->ncreated)
		pthread_cond_wait(&b->cond, &b->lock);
	failed = run_stopped(b);
	if (!failed) {
		b->t0 = dc_now_ns();
		b->t_ramp_end = b->t0 + ramp_ns;
		b->t_stop = runtime_ns ? b->t_ramp_end + runtime_ns : UINT64_MAX;
	}
	b->go = failed ? -1 : 1;
	pthread_cond_broadcast(&b->cond);
	pthread_mutex_unlock(&b->lock);
	return failed ? -1 : 0;
}
