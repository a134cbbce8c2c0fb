/* The relay store's protocol (kvcache/relay.c) against a helper written here: a thread that serves
 * the records from an in-memory object table, as dlio/storage/s3/worker_kv.py serves them from S3.
 * The known three-request plan of test_kvcache.c gives the same counters as the file store; the
 * helper sees each worker's hello first, the object sizes the plan has, every put's payload stamped
 * (no two 4 KiB blocks equal), every get landing the bytes of that object's put, the sequence numbers
 * echoed; its own request time comes back as device time; a helper that answers with an error fails
 * the run with that errno, and one that is gone fails it with EPIPE. */
#include <pthread.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "t_helpers.h"
#include "dlio_core/kvcache.h"
#include "dlio_core/timer.h"

#define BPT     8192u
#define SLOT    (64u * 4096u)
#define NOBJ    8
#define WORKERS 2

static struct dc_kv_req reqs[3];
static struct dc_kv_step steps[3];
static struct dc_kv_entry_spec ents[3];
static const uint32_t conv_first[3] = { 0, 2, 3 };
static const uint32_t conv_reqs[3] = { 0, 1, 2 };
static volatile int stop_flag;

static void plan(void)
{
	static const uint32_t tokens[3] = { 10, 20, 30 }, gen[3] = { 64, 32, 5 };

	for (int i = 0; i < 3; i++) {
		reqs[i] = (struct dc_kv_req){ .arrival_ns = (uint64_t)i * 1000,
					      .first_step = (uint32_t)i,
					      .nsteps = 1,
					      .conv = i < 2 ? 0 : 1,
					      .turn = i == 1,
					      .gen = gen[i],
					      .prio = 1,
					      .flags = i == 2 ? DC_KV_PREFILL_ONLY : 0 };
		steps[i] = (struct dc_kv_step){ .entry = (uint32_t)i, .kind = DC_KV_SYNTH };
		ents[i] = (struct dc_kv_entry_spec){ .bytes = (uint64_t)tokens[i] * BPT,
						     .tokens = tokens[i] };
	}
}

/* ---- the helper ---- */

struct helper {
	int lfd;
	unsigned char *slots;
	unsigned char *obj[NOBJ]; /* the objects' bytes, by entry */
	uint64_t len[NOBJ];
	int fail_op; /* answer this op with -EIO (0: never) */
	int die;     /* close every connection at the first put */
	unsigned hellos, puts, gets, dels, bad_seq, bad_hello;
	uint64_t put_bytes, get_bytes;
	pthread_mutex_t lock;
};

struct conn {
	struct helper *h;
	int fd;
};

static void *serve(void *arg)
{
	struct conn *c = arg;
	struct helper *h = c->h;
	struct dc_kv_relay_req q;
	unsigned char *slot = NULL;
	uint64_t last_seq = 0;

	while (recv(c->fd, &q, sizeof(q), 0) == (ssize_t)sizeof(q)) {
		struct dc_kv_relay_rep p = { .seq = q.seq };

		pthread_mutex_lock(&h->lock);
		if (q.seq != last_seq + 1)
			h->bad_seq++;
		last_seq = q.seq;
		p.t0_ns = dc_now_ns();
		if (!slot && q.op != DC_KV_RELAY_HELLO)
			h->bad_hello++;
		if (q.op == DC_KV_RELAY_HELLO) {
			h->hellos++;
			if (q.entry >= WORKERS || q.len != SLOT)
				h->bad_hello++;
			else
				slot = h->slots + q.entry * SLOT;
		} else if (h->die && q.op == DC_KV_RELAY_PUT) {
			pthread_mutex_unlock(&h->lock);
			break;
		} else if ((int)q.op == h->fail_op) {
			p.status = -EIO;
		} else if (q.op == DC_KV_RELAY_PUT && slot && q.entry < NOBJ) {
			free(h->obj[q.entry]);
			h->obj[q.entry] = malloc(q.len);
			memcpy(h->obj[q.entry], slot, q.len);
			h->len[q.entry] = q.len;
			h->puts++;
			h->put_bytes += q.len;
		} else if (q.op == DC_KV_RELAY_GET && slot && q.entry < NOBJ) {
			if (h->len[q.entry] != q.len) {
				p.status = -ENOENT;
			} else {
				memset(slot, 0, q.len); /* what lands must be the object's */
				memcpy(slot, h->obj[q.entry], q.len);
				h->gets++;
				h->get_bytes += q.len;
			}
		} else if (q.op == DC_KV_RELAY_DEL && q.entry < NOBJ) {
			h->dels++;
			h->len[q.entry] = 0;
		}
		p.t1_ns = dc_now_ns();
		pthread_mutex_unlock(&h->lock);
		if (send(c->fd, &p, sizeof(p), MSG_NOSIGNAL) != (ssize_t)sizeof(p))
			break;
	}
	close(c->fd);
	free(c);
	return NULL;
}

static void *acceptor(void *arg)
{
	struct helper *h = arg;

	for (;;) {
		int fd = accept(h->lfd, NULL, NULL);
		struct conn *c;
		pthread_t th;

		if (fd < 0)
			return NULL;
		c = malloc(sizeof(*c));
		c->h = h;
		c->fd = fd;
		pthread_create(&th, NULL, serve, c);
		pthread_detach(th);
	}
}

static void config(struct dc_kv_config *c, struct dc_kv_store_cfg *sc,
		   const struct dc_kv_relay_opts *o, unsigned workers)
{
	memset(c, 0, sizeof(*c));
	memset(sc, 0, sizeof(*sc));
	sc->max_obj = 30 * BPT;
	sc->workers = workers;
	sc->seed = 7;
	sc->opts = o;
	c->reqs = reqs;
	c->nreqs = 3;
	c->steps = steps;
	c->nsteps = 3;
	c->entries = ents;
	c->nentries = 3;
	c->conv_first = conv_first;
	c->conv_reqs = conv_reqs;
	c->nconv = 2;
	c->workers = workers; /* one: the requests run in order (the counts are known) */
	c->alloc_slots = 1;
	c->bytes_per_token = BPT;
	c->decode_batch = 32;
	c->storage_bytes = UINT64_MAX;
	c->target_ratio = 0.8;
	c->skip_ratio = 0.95;
	c->flags = DC_KV_ASAP | DC_KV_DRAIN;
	c->seed = 7;
	c->stage_bytes = 128 * 1024;
	c->store = &dc_kv_store_relay;
	c->store_cfg = sc;
	c->stop = &stop_flag;
}

static void reset(struct helper *h)
{
	for (int i = 0; i < NOBJ; i++) {
		free(h->obj[i]);
		h->obj[i] = NULL;
		h->len[i] = 0;
	}
	h->hellos = h->puts = h->gets = h->dels = h->bad_seq = h->bad_hello = 0;
	h->put_bytes = h->get_bytes = 0;
	h->fail_op = h->die = 0;
}

/* No two 4 KiB blocks of the objects the helper holds are equal (stamped in the slots). */
static void check_unique(struct helper *h)
{
	for (int a = 0; a < NOBJ; a++)
		for (uint64_t x = 0; x + 4096 <= h->len[a]; x += 4096)
			for (int b = a; b < NOBJ; b++)
				for (uint64_t y = a == b ? x + 4096 : 0; y + 4096 <= h->len[b];
				     y += 4096)
					T_CHECK(memcmp(h->obj[a] + x, h->obj[b] + y, 4096),
						"object %d block %llu = object %d block %llu", a,
						(unsigned long long)x, b, (unsigned long long)y);
}

int main(void)
{
	char dir[] = "/tmp/dlio_t_kvrXXXXXX";
	char sock[256], shm[256];
	struct helper h = { 0 };
	struct dc_kv_relay_opts o;
	struct dc_kv_config c;
	struct dc_kv_store_cfg sc;
	static struct dc_kv_result r;
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	pthread_t acc;
	int fd, ret;
	uint64_t rb = 3 * 10 * BPT + 10 * BPT + 2 * 20 * BPT;

	if (!mkdtemp(dir))
		return T_EXIT_FAIL;
	plan();
	snprintf(sock, sizeof(sock), "%s/relay.sock", dir);
	snprintf(shm, sizeof(shm), "%s/slots", dir);
	fd = open(shm, O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (fd < 0 || ftruncate(fd, (off_t)SLOT * WORKERS) < 0)
		return T_EXIT_FAIL;
	h.slots = mmap(NULL, (size_t)SLOT * WORKERS, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	h.lfd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
	memcpy(a.sun_path, sock, strlen(sock) + 1); /* mkdtemp's name: short */
	if (h.slots == MAP_FAILED || h.lfd < 0 || bind(h.lfd, (struct sockaddr *)&a, sizeof(a)) ||
	    listen(h.lfd, 8))
		return T_EXIT_FAIL;
	pthread_mutex_init(&h.lock, NULL);
	pthread_create(&acc, NULL, acceptor, &h);
	o = (struct dc_kv_relay_opts){ .sock_path = sock, .shm_path = shm, .slot_len = SLOT };

	/* the plan: the file store's counters; the helper's view of them */
	config(&c, &sc, &o, 1);
	ret = dc_kv_run(&c, &r);
	T_CHECK(ret == 0, "relay run %d (%s)", ret, r.why);
	T_CHECK(r.count[DC_KV_C_REQUESTS] == 3, "requests");
	T_CHECK(r.count[DC_KV_C_STORAGE_READ_BYTES] == rb, "storage read bytes");
	T_CHECK(r.count[DC_KV_C_STORAGE_WRITE_BYTES] == 60 * BPT, "storage write bytes");
	T_CHECK(h.hellos == 1 && !h.bad_hello && !h.bad_seq, "hellos %u bad %u seq %u", h.hellos,
		h.bad_hello, h.bad_seq);
	T_CHECK(h.puts == 3 && h.put_bytes == 60 * BPT, "puts %u (%llu B)", h.puts,
		(unsigned long long)h.put_bytes);
	T_CHECK(h.gets == 6 && h.get_bytes == rb, "gets %u (%llu B)", h.gets,
		(unsigned long long)h.get_bytes);
	T_CHECK(h.len[0] == 10 * BPT && h.len[1] == 20 * BPT && h.len[2] == 30 * BPT, "sizes");
	T_CHECK(r.hist[DC_KV_H_STORAGE_READ_DEV].count == 6, "device times");
	T_CHECK(r.store.fsyncs == 0 && r.store.fadvises == 0, "nothing to attest");
	check_unique(&h);

	/* two workers, each on its own slot: the helper saw what the engine counted */
	reset(&h);
	config(&c, &sc, &o, WORKERS);
	ret = dc_kv_run(&c, &r);
	T_CHECK(ret == 0, "two workers: %d", ret);
	T_CHECK(h.hellos == WORKERS && !h.bad_hello && !h.bad_seq, "hellos %u", h.hellos);
	T_CHECK(h.put_bytes == r.count[DC_KV_C_STORAGE_WRITE_BYTES] &&
			h.get_bytes == r.count[DC_KV_C_STORAGE_READ_BYTES],
		"helper %llu / %llu B", (unsigned long long)h.put_bytes,
		(unsigned long long)h.get_bytes);

	/* eviction deletes through the helper (room for 50 tokens) */
	reset(&h);
	config(&c, &sc, &o, 1);
	c.storage_bytes = 50 * BPT;
	ret = dc_kv_run(&c, &r);
	T_CHECK(ret == 0, "evict run %d", ret);
	T_CHECK(h.dels == r.count[DC_KV_C_DELETES] && h.dels >= 1, "deletes %u of %llu", h.dels,
		(unsigned long long)r.count[DC_KV_C_DELETES]);

	/* demotion: the RAM copy's bytes go out (35 tokens of RAM: two demotions) */
	reset(&h);
	config(&c, &sc, &o, 1);
	c.cpu_bytes = 35 * BPT;
	ret = dc_kv_run(&c, &r);
	T_CHECK(ret == 0, "ram run %d", ret);
	T_CHECK(r.count[DC_KV_C_DEMOTIONS] == 2 && h.puts == 2, "demotions %llu, puts %u",
		(unsigned long long)r.count[DC_KV_C_DEMOTIONS], h.puts);
	check_unique(&h);

	/* the helper's error is the run's */
	reset(&h);
	h.fail_op = DC_KV_RELAY_GET;
	config(&c, &sc, &o, 1);
	ret = dc_kv_run(&c, &r);
	T_CHECK(ret == -EIO && r.error.err == EIO, "failed get: %d", ret);

	/* a helper that is gone: EPIPE, not a hang */
	reset(&h);
	h.die = 1;
	config(&c, &sc, &o, 1);
	ret = dc_kv_run(&c, &r);
	T_CHECK(ret == -EPIPE, "gone helper: %d", ret);

	/* no helper listening: the worker cannot open */
	o.sock_path = "/nonexistent/relay.sock";
	config(&c, &sc, &o, 1);
	ret = dc_kv_run(&c, &r);
	T_CHECK(ret < 0, "no helper: %d", ret);

	reset(&h);
	shutdown(h.lfd, SHUT_RDWR);
	close(h.lfd);
	pthread_join(acc, NULL);
	unlink(sock);
	unlink(shm);
	rmdir(dir);
	return t_exit();
}
