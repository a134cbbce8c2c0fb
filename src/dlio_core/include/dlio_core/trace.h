/* Event tracing: one record per read/write request, per sample (open .. close), per batch fetch
 * (the trainer's wait) and per compute, written afterwards as DFTracer .pfw JSON lines.
 *
 * Recording: the runner owns one buffer per thread, sized and allocated before the clock starts;
 * recording an event is a bounds check and a 48-byte store, no allocation, no lock. A full buffer
 * stops recording and counts what it drops. With tracing off (dc_run_config.trace == NULL) the hot
 * loops pay one predictable branch per request.
 *
 * Writing: dc_trace_write_pfw formats events in a large buffer and writes it in bulk. The format is
 * DFTracer's .pfw: a line "[", then one complete event ("ph":"X") per line with no separator, then
 * a line "]" (written by the caller when the file is complete). Each event line is a JSON object on
 * its own: DFTracer's analyzer (DFAnalyzer) parses the file line by line, and Perfetto's JSON
 * importer accepts it (it treats commas between events as optional, and the final "]" too).
 *
 * Times: ts and dur are integer microseconds, as DFTracer writes them; ts is on the epoch clock.
 * Both ends of a span are rounded down to the microsecond (ts = floor((t + t0_ns) / 1000), end the
 * same, dur = end - ts): one monotonic rounding of every instant, so a span nested in another stays
 * nested and two back-to-back spans never overlap (rounding the start down and the end up would
 * make back-to-back spans overlap by a microsecond). A span shorter than 1 us may get dur 0.
 *
 * Tracks: with several requests (or samples) in flight, one thread's spans cross each other, and a
 * viewer that stacks the complete events of a track (Perfetto) draws them wrong. So the writer
 * gives each thread's events "lanes": a lane holds spans that are disjoint or properly nested (a
 * request inside its own sample, anything inside a fetch), and the event's tid is
 * thread * DC_TRACE_LANES + lane. At qd 1 everything is on lane 0 (tid = thread * DC_TRACE_LANES).
 * Complete events on lanes rather than async begin/end pairs, because DFAnalyzer reads only
 * complete events (it needs "dur"), and Perfetto draws one track per tid.
 */
#ifndef DLIO_CORE_TRACE_H
#define DLIO_CORE_TRACE_H
#include "dlio_core/defs.h"
#include <stddef.h>
#include <stdint.h>

enum dc_trace_kind {
	DC_TR_READ = 0,    /* one read request: issue .. completion (cat POSIX, name "read") */
	DC_TR_WRITE = 1,   /* one write request (cat POSIX, name "write") */
	DC_TR_SAMPLE = 2,  /* one sample: open .. its reads .. close (cat data, name "item") */
	DC_TR_FETCH = 3,   /* trainer waits for batch `step` (cat dataloader, name "fetch.iter") */
	DC_TR_COMPUTE = 4, /* emulated compute of step `step` (cat compute, name "compute") */
};

#define DC_TRACE_NONE32 UINT32_MAX
#define DC_TRACE_NONE64 UINT64_MAX

/* One event: 48 bytes, numpy dtype
 * [('t_start','<u8'),('dur','<u8'),('offset','<u8'),('bytes','<u8'),('step','<u8'),
 *  ('file','<u4'),('tid','<u2'),('kind','u1'),('pad','u1')]. */
struct dc_trace_event {
	uint64_t t_start; /* dc_now_ns() */
	uint64_t dur;     /* ns */
	uint64_t offset;  /* read/write: file offset */
	uint64_t bytes;   /* read/write/sample: bytes transferred */
	uint64_t step;    /* training step, DC_TRACE_NONE64 if none (io runs) */
	uint32_t file;    /* index into the path table, DC_TRACE_NONE32 if none */
	uint16_t tid;     /* 0 = trainer (train) or worker 0 (io); train readers are 1 + t */
	uint8_t kind;     /* enum dc_trace_kind */
	uint8_t pad;
};

/* One thread's buffer. */
struct dc_trace_buf {
	struct dc_trace_event *ev;
	uint64_t n, cap;
	uint64_t dropped; /* events not recorded because the buffer was full */
};

/* Tracing of one run: set dc_run_config.trace to one of these (zeroed, then cap set if wanted).
 * The runner allocates bufs before the clock starts; the caller reads them after the run and
 * frees them with dc_trace_free. */
struct dc_trace {
	uint64_t cap;              /* in: events per thread; 0 = sized from the plan (train: every
	                              * op, sample and step of the thread's steps; io: the thread's
	                              * ops once through, at least 1 Mi when the run loops) */
	struct dc_trace_buf *bufs; /* out: nbufs buffers, in tid order */
	unsigned nbufs;
};

/* Allocate nbufs buffers of caps[i] events (or cap each when caps is NULL). 0 or -ENOMEM. */
DC_MUST_CHECK int dc_trace_alloc(struct dc_trace *tr, unsigned nbufs, const uint64_t *caps,
				 uint64_t cap);
void dc_trace_free(struct dc_trace *tr);
/* Events recorded / dropped over all buffers. */
uint64_t dc_trace_count(const struct dc_trace *tr);
uint64_t dc_trace_dropped(const struct dc_trace *tr);

/* The slot for the next event, or NULL (and one more dropped) when the buffer is full. */
static inline struct dc_trace_event *dc_trace_next(struct dc_trace_buf *b)
{
	if (__builtin_expect(b->n >= b->cap, 0)) {
		b->dropped++;
		return NULL;
	}
	return &b->ev[b->n++];
}

static inline void dc_trace_add(struct dc_trace_buf *b, uint8_t kind, uint16_t tid,
				uint64_t t_start, uint64_t dur, uint32_t file, uint64_t offset,
				uint64_t bytes, uint64_t step)
{
	struct dc_trace_event *e = dc_trace_next(b);

	if (!e)
		return;
	e->t_start = t_start;
	e->dur = dur;
	e->offset = offset;
	e->bytes = bytes;
	e->step = step;
	e->file = file;
	e->tid = tid;
	e->kind = kind;
	e->pad = 0;
}

/* Lanes per thread: an event's output tid is thread * DC_TRACE_LANES + lane. */
#define DC_TRACE_LANES 10000u

/* How dc_trace_write_pfw writes one batch of events into one file. */
struct dc_pfw_opts {
	int pid;            /* the rank */
	uint64_t t0_ns;     /* added to every time to put it on the epoch clock */
	const char *io_cat; /* cat of read/write events: the engine ("POSIX", "IO_URING"); NULL =
	                          * "POSIX" */
	const uint32_t *fh_seen; /* sorted file hashes whose "FH" line the file already has */
	size_t nseen;
	uint32_t *fh_new; /* out (may be NULL): hashes of the FH lines this call wrote; room for one
	                   * per path the events use; *nnew set to their number */
	size_t *nnew;
	uint32_t
		*lanes; /* in/out (may be NULL): per input tid (ntids entries), raised to the number
	                  * of lanes the thread's events used */
	unsigned ntids;
};

/* Write n events to fd as .pfw lines (no "[" / "]": the caller writes those once per file), by
 * thread, then start time. paths: the run's path table (an event's file indexes it); events refer
 * to a file by "fhash" (DFTracer's 32-bit hash); the metadata line "FH" (hash -> name, as
 * DFTracer's) is written before the first event of each file whose hash is not in opt->fh_seen.
 * *id_base: the "id" of the first line, updated past the last (ids keep counting across calls for
 * one file). Returns 0 or -errno (-E2BIG: a thread needs more than DC_TRACE_LANES lanes). */
DC_MUST_CHECK int dc_trace_write_pfw(int fd, const struct dc_trace_event *ev, size_t n,
				     const char *const *paths, const struct dc_pfw_opts *opt,
				     uint64_t *id_base);

/* JSON string escaping as the writer does it (for tests): writes the escaped form of s, without
 * quotes and NUL-terminated, into out (room for outlen bytes). Returns its length, or -ENOSPC. */
DC_MUST_CHECK int dc_json_escape(const char *s, char *out, size_t outlen);

/* DFTracer-style 32-bit hash of a path (FNV-1a), the "fhash" of its events. */
uint32_t dc_trace_fhash(const char *path);

#endif
