/* Private to the KV file store: file.c (the store, compat mode) and direct.c
 * (direct mode: O_DIRECT through io_uring). */
#ifndef DLIO_CORE_KVCACHE_FILE_H
#define DLIO_CORE_KVCACHE_FILE_H
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "dlio_core/kvcache.h"
#include "../uring_ring.h"

#define KV_DIRECT_HDR 4096u /* direct mode: the .npy header fills the first block */
#define KV_COMPAT_HDR 128u  /* compat: numpy's own header length for these shapes */

struct dc_kv_store {
	struct dc_kv_store_cfg cfg;
	char dir[PATH_MAX];
	int dirfd; /* the folder, opened once without following a link: every entry is opened, made and
		    * removed relative to it (a folder or entry swapped for a link is refused) */
	/* Where reads land: a window of `sink_len` bytes of address space made of one small memfd
	 * mapped over and over, so that one read() of a multi-GiB entry has room without holding the
	 * entry in RAM (the bytes are discarded; nobody looks at them). */
	unsigned char *sink;
	uint64_t sink_len, sink_phys;
	int sink_anon;               /* direct mode: plain memory, not the mapped window */
	struct dc_kv_store_stats st; /* summed from the workers at their close (under lock) */
	pthread_mutex_t lock;
};

struct kv_direct; /* direct.c */

struct dc_kv_worker {
	struct dc_kv_store *s;
	unsigned id;
	unsigned char *dst; /* this worker's place in the sink */
	unsigned char *blk; /* a 4 KiB aligned block: headers */
	uint64_t reads;
	struct dc_kv_store_stats st;
	struct dc_ring ring; /* direct mode */
	int ring_ok;
	struct kv_direct *direct;
	char path[PATH_MAX];
	const char *name; /* the entry's name in path (relative to the store's dirfd) */
};

/* The object's file name into w->path. 0 or -ENAMETOOLONG. Here, not in file.c, so that direct.c
 * needs only this header: file.c calls direct.c, never the other way. */
static inline int kv_file_path(struct dc_kv_worker *w, const struct dc_kv_obj *o)
{
	int n;

	if (o->chunk)
		n = snprintf(w->path, sizeof(w->path), "%s/kv_%08llx_c%05u.npy", w->s->dir,
			     (unsigned long long)o->entry, o->chunk);
	else
		n = snprintf(w->path, sizeof(w->path), "%s/kv_%08llx.npy", w->s->dir,
			     (unsigned long long)o->entry);
	if (n < 0 || (size_t)n >= sizeof(w->path))
		return -ENAMETOOLONG;
	w->name = w->path + strlen(w->s->dir) + 1;
	return 0;
}

/* Open flags of an entry the run creates: never an existing name (a link or a file planted there is
 * refused, not written through), never through a link. */
#define KV_CREATE (O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC)

/* direct.c */
int kv_direct_check(const char *dir, char *why, size_t whylen);
int kv_direct_worker_open(struct dc_kv_worker *w);
void kv_direct_worker_close(struct dc_kv_worker *w);
int kv_direct_put(struct dc_kv_worker *w, const struct dc_kv_obj *o, const struct dc_kv_src *src,
		  struct dc_kv_timing *t);
int kv_direct_get(struct dc_kv_worker *w, const struct dc_kv_obj *o, struct dc_kv_timing *t);

#endif
