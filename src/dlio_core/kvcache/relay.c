/* The relay KV store: objects in a store the core has no client for (S3), reached through a helper
 * process (dlio/storage/s3/worker_kv.py), the C engine still deciding and timing every request.
 *
 * Each worker connects once (worker_open, before the clock) to the helper's AF_UNIX SOCK_SEQPACKET
 * socket and says which slot is its own. A put stamps the object's payload into the worker's slot of
 * the shared-memory file, sends one 32-byte record and waits for the 32-byte reply; a get sends
 * its record and the helper lands the bytes in the slot; a delete is a record alone. Nothing is
 * allocated or copied per request but the payload of a demotion (its RAM copy into the slot).
 *
 * An object is the entry's KV bytes alone (no .npy header: an object store's KV tier, LMCache's S3
 * backend among them, keeps raw bytes), so the bytes the server sees are the engine's bytes. The
 * timing: the engine times the whole call (the relay's round trip included); device_ns is the
 * helper's request as it timed it on the same clock, host_ns the rest (stamping, the relay).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "dlio_core/fill.h"
#include "dlio_core/kvcache.h"
#include "dlio_core/timer.h"

_Static_assert(sizeof(struct dc_kv_relay_req) == 32, "relay request record");
_Static_assert(sizeof(struct dc_kv_relay_rep) == 32, "relay reply record");

struct dc_kv_store {
	struct dc_kv_store_cfg cfg;
	struct sockaddr_un addr;
	unsigned char *base; /* workers x slot_len, shared with the helper */
	uint64_t map_len, slot_len;
};

struct dc_kv_worker {
	struct dc_kv_store *s;
	unsigned char *slot;
	uint64_t seq;
	int fd;
};

static int relay_open(struct dc_kv_store **out, const struct dc_kv_store_cfg *cfg, char *why,
		      size_t whylen)
{
	const struct dc_kv_relay_opts *o = cfg->opts;
	struct dc_kv_store *s;
	struct stat st;
	uint64_t need;
	void *p;
	int fd, ret;

	if (!o || !o->sock_path || !o->shm_path || !cfg->workers) {
		snprintf(why, whylen, "the relay store needs its helper's socket and slots");
		return -EINVAL;
	}
	if (strlen(o->sock_path) >= sizeof(((struct sockaddr_un *)0)->sun_path)) {
		snprintf(why, whylen, "%s: too long for a socket name", o->sock_path);
		return -ENAMETOOLONG;
	}
	if (o->slot_len < cfg->max_obj || !o->slot_len || o->slot_len % 4096) {
		snprintf(why, whylen, "relay slots of %llu bytes for objects of %llu",
			 (unsigned long long)o->slot_len, (unsigned long long)cfg->max_obj);
		return -EINVAL;
	}
	need = o->slot_len * cfg->workers;
	fd = open(o->shm_path, O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		ret = -errno;
		snprintf(why, whylen, "%s: %s", o->shm_path, strerror(-ret));
		return ret;
	}
	if (fstat(fd, &st) < 0 || (uint64_t)st.st_size < need) {
		snprintf(why, whylen, "%s: smaller than %u slots of %llu bytes", o->shm_path,
			 cfg->workers, (unsigned long long)o->slot_len);
		close(fd);
		return -EINVAL;
	}
	/* Populated now, and filled with random bytes: no page fault in a timed request, and a put
	 * only stamps its blocks (dc_kv_stamp) into bytes no other block shares. */
	p = mmap(NULL, need, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
	close(fd);
	if (p == MAP_FAILED) {
		ret = -errno;
		snprintf(why, whylen, "%s: %s", o->shm_path, strerror(-ret));
		return ret;
	}
	s = calloc(1, sizeof(*s));
	if (!s) {
		munmap(p, need);
		return -ENOMEM;
	}
	s->cfg = *cfg;
	s->base = p;
	s->map_len = need;
	s->slot_len = o->slot_len;
	s->addr.sun_family = AF_UNIX;
	memcpy(s->addr.sun_path, o->sock_path, strlen(o->sock_path) + 1);
	for (unsigned i = 0; i < cfg->workers; i++)
		dc_fill_random(s->base + (uint64_t)i * s->slot_len, s->slot_len, cfg->seed + i + 1);
	*out = s;
	return 0;
}

/* One record out, its reply in. 0, or -errno (-EPIPE: the helper is gone). */
static int relay_call(struct dc_kv_worker *w, uint32_t op, const struct dc_kv_obj *o, uint64_t len,
		      struct dc_kv_relay_rep *rep)
{
	struct dc_kv_relay_req req = { .op = op, .seq = ++w->seq, .len = len };
	ssize_t n;

	if (o) {
		req.entry = o->entry;
		req.chunk = o->chunk;
	}
	do {
		n = send(w->fd, &req, sizeof(req), MSG_NOSIGNAL);
	} while (n < 0 && errno == EINTR);
	if (n < 0)
		return errno == ECONNRESET ? -EPIPE : -errno;
	if (n != (ssize_t)sizeof(req))
		return -EPROTO;
	do {
		n = recv(w->fd, rep, sizeof(*rep), 0);
	} while (n < 0 && errno == EINTR);
	if (n < 0)
		return errno == ECONNRESET ? -EPIPE : -errno;
	if (n == 0)
		return -EPIPE;
	if (n != (ssize_t)sizeof(*rep) || rep->seq != req.seq)
		return -EPROTO;
	return rep->status > 0 ? -EPROTO : rep->status;
}

static int relay_worker_open(struct dc_kv_store *s, unsigned worker, struct dc_kv_worker **out)
{
	struct dc_kv_worker *w;
	struct dc_kv_relay_rep rep;
	struct dc_kv_obj hello = { .entry = worker };
	int ret;

	if (worker >= s->cfg.workers)
		return -EINVAL;
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->s = s;
	w->slot = s->base + (uint64_t)worker * s->slot_len;
	w->fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (w->fd < 0) {
		ret = -errno;
		free(w);
		return ret;
	}
	if (connect(w->fd, (struct sockaddr *)&s->addr, sizeof(s->addr)) < 0)
		ret = -errno;
	else
		ret = relay_call(w, DC_KV_RELAY_HELLO, &hello, s->slot_len, &rep);
	if (ret < 0) {
		close(w->fd);
		free(w);
		return ret;
	}
	*out = w;
	return 0;
}

static void set_timing(struct dc_kv_timing *t, uint64_t t0, const struct dc_kv_relay_rep *rep)
{
	uint64_t total = dc_now_ns() - t0;
	uint64_t dev = rep->t1_ns > rep->t0_ns ? rep->t1_ns - rep->t0_ns : 0;

	if (dev > total)
		dev = total;
	t->device_ns = dev;
	t->host_ns = total - dev;
}

static int relay_put(struct dc_kv_worker *w, const struct dc_kv_obj *o, const struct dc_kv_src *src,
		     struct dc_kv_timing *t)
{
	struct dc_kv_relay_rep rep = { 0 };
	uint64_t t0 = dc_now_ns();
	int ret;

	if (o->bytes > w->s->slot_len)
		return -EMSGSIZE;
	if (src->whole) /* a demotion: the entry's RAM copy is what is written */
		memcpy(w->slot, src->buf, o->bytes);
	dc_kv_stamp(o, w->s->cfg.seed, 0, 0, w->slot, o->bytes);
	ret = relay_call(w, DC_KV_RELAY_PUT, o, o->bytes, &rep);
	set_timing(t, t0, &rep);
	return ret;
}

static int relay_get(struct dc_kv_worker *w, const struct dc_kv_obj *o, struct dc_kv_timing *t)
{
	struct dc_kv_relay_rep rep = { 0 };
	uint64_t t0 = dc_now_ns();
	int ret;

	if (o->bytes > w->s->slot_len)
		return -EMSGSIZE;
	ret = relay_call(w, DC_KV_RELAY_GET, o, o->bytes, &rep);
	set_timing(t, t0, &rep);
	return ret;
}

static int relay_del(struct dc_kv_worker *w, const struct dc_kv_obj *o)
{
	struct dc_kv_relay_rep rep;

	return relay_call(w, DC_KV_RELAY_DEL, o, o->bytes, &rep);
}

static void relay_worker_close(struct dc_kv_worker *w)
{
	close(w->fd); /* the helper sees the connection end */
	free(w);
}

static void relay_close(struct dc_kv_store *s, struct dc_kv_store_stats *stats)
{
	memset(stats, 0, sizeof(*stats)); /* no fsync, no page cache: nothing to attest */
	munmap(s->base, s->map_len);
	free(s);
}

const struct dc_kv_store_ops dc_kv_store_relay = {
	.name = "relay",
	.open = relay_open,
	.worker_open = relay_worker_open,
	.put = relay_put,
	.get = relay_get,
	.del = relay_del,
	.worker_close = relay_worker_close,
	.close = relay_close,
};
