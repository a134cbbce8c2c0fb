/* The run skeleton the core's three runs share (runner.c: io and train; vdb/run.c: vector search;
 * kvcache/run.c: the KV cache): the first-error record, the stop flag, the start gate and the
 * thread start. Internal.
 *
 * A run starts its threads with run_start; each sets itself up (a failure goes to run_fail) and
 * waits in run_gate_wait; run_gate_open waits until every started thread has reported, then starts
 * the clock, or aborts everyone when anything failed. The first error is kept, in the result's
 * struct dc_error; later ones are usually its consequences.
 */
#ifndef DLIO_CORE_RUN_BASE_H
#define DLIO_CORE_RUN_BASE_H
#include <pthread.h>
#include <stdint.h>

#include "dlio_core/run.h"

struct run_base {
	pthread_mutex_t
		lock; /* the gate and the first error (a run puts its own state under it too) */
	pthread_cond_t cond;    /* the gate (monotonic clock); broadcast on a failure */
	pthread_cond_t *wake;   /* the run's own condition, also broadcast on a failure (or NULL) */
	struct dc_error *error; /* the result's */
	const volatile int *user_stop; /* the caller's stop flag (or NULL) */
	unsigned ncreated, nready;     /* threads started; threads that reached the gate */
	int go;                        /* 1 = run, -1 = abort */
	int stop; /* atomic: stop now: an error was recorded (kvcache: or the run reached its end) */
	uint64_t t0, t_ramp_end, t_stop; /* set when the gate opens */
};

/* The lock, the gate and an empty error record (file UINT32_MAX). */
void run_base_init(struct run_base *b, struct dc_error *error, pthread_cond_t *wake,
		   const volatile int *user_stop);
void run_base_destroy(struct run_base *b);

/* Record the first error (err <= 0 is EIO), raise the stop flag and wake every waiter. */
void run_fail(struct run_base *b, int err, uint32_t file, uint64_t offset, const char *what);

/* pthread_create, counted for the gate; 0, or the error (recorded as "thread"). */
int run_start(struct run_base *b, pthread_t *tid, const pthread_attr_t *attr, void *(*fn)(void *),
	      void *arg);

/* A started thread reports in (set up, or failed with the error recorded) and waits for the
 * start. 0 = go, -1 = the run was aborted. */
int run_gate_wait(struct run_base *b);

/* Wait until every started thread has reported, then start the clock: t0 now, the measured
 * window from t0 + ramp_ns for runtime_ns (0: no end). 0, or -1 (everyone aborted) when an
 * error was recorded. */
int run_gate_open(struct run_base *b, uint64_t ramp_ns, uint64_t runtime_ns);

/* The stop flag: an error was recorded (kvcache: or the run reached its end). */
static inline int run_stopped(const struct run_base *b)
{
	return __atomic_load_n(&b->stop, __ATOMIC_RELAXED);
}

/* The stop flag, or the caller's. */
static inline int run_stop_asked(const struct run_base *b)
{
	return (b->user_stop && *b->user_stop) || run_stopped(b);
}

/* An error was recorded. */
static inline int run_failed(const struct run_base *b)
{
	return __atomic_load_n(&b->error->err, __ATOMIC_RELAXED) != 0;
}

#endif
