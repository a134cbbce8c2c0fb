/* The reference's conversation window (kv_cache/conversation.py ConversationManager), replayed at
 * the times its events happen there:
 *
 *  - a user sends a request (its generation thread, here the dispatcher at the request's arrival):
 *    a first turn starts a conversation, evicting the least recently touched one when
 *    max_conversations are remembered; a later turn touches its conversation (add_turn), and when
 *    that conversation was evicted add_turn raises, which ends the user's thread: the user sends
 *    nothing more;
 *  - a worker serves the request (later, after the queue): get_all_previous_turn_keys returns no
 *    key when the conversation has left the window, so the request makes no earlier-turn reads.
 *
 * The reference evicts the minimum of (last_access, created_at), both stamped at those events:
 * the order in which conversations were touched, an LRU list here. Conversation ids are never
 * reused, so a conversation out of the window stays out.
 */
#include <errno.h>
#include <stdlib.h>

#include "kv_int.h"

int kv_conv_init(struct kv_run *r)
{
	const struct dc_kv_config *cfg = r->cfg;
	struct kv_conv_window *w = &r->win;
	size_t n = cfg->nconv ? cfg->nconv : 1;

	w->cap = cfg->max_conversations;
	w->head = w->tail = KV_NIL;
	if (!w->cap)
		return 0;
	w->prev = malloc(n * sizeof(*w->prev));
	w->next = malloc(n * sizeof(*w->next));
	w->in = calloc(n, 1);
	w->user_stopped = calloc(cfg->nusers ? cfg->nusers : 1, 1);
	return w->prev && w->next && w->in && w->user_stopped ? 0 : -ENOMEM;
}

void kv_conv_free(struct kv_run *r)
{
	free(r->win.prev);
	free(r->win.next);
	free(r->win.in);
	free(r->win.user_stopped);
}

static void unlink_conv(struct kv_conv_window *w, uint32_t c)
{
	if (w->prev[c] == KV_NIL)
		w->head = w->next[c];
	else
		w->next[w->prev[c]] = w->next[c];
	if (w->next[c] == KV_NIL)
		w->tail = w->prev[c];
	else
		w->prev[w->next[c]] = w->prev[c];
	w->len--;
}

static void append_conv(struct kv_conv_window *w, uint32_t c)
{
	w->prev[c] = w->tail;
	w->next[c] = KV_NIL;
	if (w->tail == KV_NIL)
		w->head = c;
	else
		w->next[w->tail] = c;
	w->tail = c;
	w->len++;
}

static void start_conv(struct kv_conv_window *w, uint32_t c)
{
	if (w->len >= w->cap) { /* _evict_oldest_conversation, before the new one is added */
		uint32_t old = w->head;

		unlink_conv(w, old);
		__atomic_store_n(&w->in[old], 0, __ATOMIC_RELEASE);
		w->evictions++;
	}
	append_conv(w, c);
	__atomic_store_n(&w->in[c], 1, __ATOMIC_RELEASE);
}

/* The request's user sends it: 0, or -1 when the user has stopped (the request is never sent). */
int kv_conv_arrive(struct kv_run *r, const struct dc_kv_req *q)
{
	const struct dc_kv_config *cfg = r->cfg;
	struct kv_conv_window *w = &r->win;
	uint32_t c = q->conv, user;

	if (!w->cap || c >= cfg->nconv)
		return 0;
	user = cfg->conv_user && cfg->conv_user[c] < cfg->nusers ? cfg->conv_user[c] : KV_NIL;
	if (user != KV_NIL && w->user_stopped[user]) {
		w->unsent++;
		return -1;
	}
	if (q->turn == 0) {
		start_conv(w, c);
	} else if (w->in[c]) { /* add_turn: the conversation is the most recently touched */
		unlink_conv(w, c);
		append_conv(w, c);
	} else if (user != KV_NIL) { /* add_turn raises ValueError in the user's thread */
		w->user_stopped[user] = 1;
		w->users_stopped++;
		w->unsent++;
		return -1;
	}
	return 0;
}

/* Does the window still hold the conversation (a worker asks as it serves a later turn)? */
int kv_conv_remembered(const struct kv_run *r, uint32_t conv)
{
	return !r->win.cap || conv >= r->cfg->nconv ||
	       __atomic_load_n(&r->win.in[conv], __ATOMIC_ACQUIRE);
}

/* The dispatcher's counts, into the result once the workers are done. */
void kv_conv_counts(const struct kv_run *r, uint64_t *count)
{
	count[DC_KV_C_CONV_EVICTIONS] = r->win.evictions;
	count[DC_KV_C_USERS_STOPPED] = r->win.users_stopped;
	count[DC_KV_C_REQUESTS_UNSENT] = r->win.unsent;
}
