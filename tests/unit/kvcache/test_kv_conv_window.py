"""The reference's conversation window (ConversationManager, max_conversations) in the C engine: a
known plan whose requests back up behind a slow first request, so that conversations leave the
window before their later turns are served. The expected counts come from a model of the
reference's code (an LRU dict), not from the engine."""

from collections import OrderedDict

import numpy as np
import pytest

from dlio import _core

pytestmark = pytest.mark.usefixtures("measured_phase")

# (user, conversation, turn) of each request, in arrival order; 3 users, a window of 2
REQUESTS = [
    (0, 0, 0),
    (1, 1, 0),
    (0, 0, 1),
    (2, 2, 0),  # the window is full: conversation 1 (least recently touched) leaves
    (1, 1, 1),  # user 1 continues conversation 1, gone: add_turn raises, user 1 stops
    (0, 3, 0),  # conversation 0 leaves
    (1, 4, 0),  # user 1 has stopped: never sent
    (2, 2, 1),
    (0, 3, 1),
    (2, 2, 2),
]
WINDOW = 2
FIRST_GEN, GEN_NS = 400, 1_000_000  # the first request sleeps 0.4 s: everything else queues behind it


def plan():
    n = len(REQUESTS)
    user, conv, turn = (np.array(x) for x in zip(*REQUESTS))
    r = np.zeros(n, _core.KV_REQ_DTYPE)
    r["arrival_ns"] = np.arange(n) * 1000
    r["first_step"] = np.arange(n)
    r["nsteps"] = 1
    r["conv"], r["turn"] = conv, turn
    r["gen"] = [FIRST_GEN] + [1] * (n - 1)
    r["prio"] = 1
    s = np.zeros(n, _core.KV_STEP_DTYPE)
    s["entry"] = np.arange(n)
    e = np.zeros(n, _core.KV_ENTRY_DTYPE)
    e["tokens"] = 16
    e["bytes"] = 16 * 4096
    nconv = conv.max() + 1
    conv_reqs = np.argsort(conv, kind="stable").astype(np.uint32)
    conv_first = np.concatenate(([0], np.cumsum(np.bincount(conv, minlength=nconv)))).astype(np.uint32)
    conv_user = np.zeros(nconv, np.uint32)
    conv_user[conv] = user
    return r, s, e, conv_first, conv_reqs, conv_user


def reference_model(window, backlog):
    """The reference's counts: ConversationManager's dict touched as each request is sent, and
    get_all_previous_turn_keys asked as it is served. backlog: every request is sent before any
    but the first is served (FIFO); else each is served as it is sent."""
    convs: "OrderedDict[int, list]" = OrderedDict()  # conversation -> its turns sent, LRU first
    stopped, sent, out = set(), [], dict(hits=0, misses=0, gone=0, evictions=0, users_stopped=0, unsent=0)

    def serve(i, served):
        u, c, t = REQUESTS[i]
        if t > 0:
            if c not in convs:
                out["gone"] += 1
            for j in convs.get(c, []):
                if j != i:
                    out["hits" if j in served else "misses"] += 1
        served.add(i)

    served: set = set()
    for i, (u, c, t) in enumerate(REQUESTS):
        if u in stopped:
            out["unsent"] += 1
            continue
        if t == 0:
            if len(convs) >= window:
                convs.popitem(last=False)
                out["evictions"] += 1
            convs[c] = []
        elif c not in convs:  # add_turn raises ValueError: the user's thread ends
            stopped.add(u)
            out["users_stopped"] += 1
            out["unsent"] += 1
            continue
        convs.move_to_end(c)
        convs[c].append(i)
        sent.append(i)
        if not backlog or i == 0:
            serve(i, served)
    if backlog:
        for i in sent[1:]:
            serve(i, served)
    out["requests"] = len(sent)
    return out


def run(virtual, window=WINDOW, with_users=True):
    r, s, e, cf, cr, cu = plan()
    return _core.KvRun(
        r,
        s,
        e,
        cf,
        cr,
        store="null",
        workers=1,
        alloc_slots=1,
        bytes_per_token=4096,
        gen_ns_per_token=0 if virtual else GEN_NS,
        asap=True,
        drain=True,
        virtual=virtual,
        conv_user=cu if with_users else None,
        max_conversations=window,
    ).execute()["counts"]


def counts(c):
    keys = ("mt_hits", "mt_misses", "mt_conv_gone", "conv_evictions", "users_stopped", "requests_unsent", "requests")
    return dict(
        zip(("hits", "misses", "gone", "evictions", "users_stopped", "unsent", "requests"), (c[k] for k in keys))
    )


def test_backlog_loses_conversations_as_the_reference_does():
    want = reference_model(WINDOW, backlog=True)
    # by hand: conversation 0 left before its turn 1 was served (gone); conversation 2's turn 1 reads
    # turn 0 (served) and turn 2 (queued: a miss); turn 2 reads both; conversation 3's turn 1 reads turn 0
    assert want == dict(hits=4, misses=1, gone=1, evictions=2, users_stopped=1, unsent=2, requests=8)
    assert counts(run(virtual=False)) == want


def test_virtual_time_serves_each_request_as_it_arrives():
    want = reference_model(WINDOW, backlog=False)
    assert want == dict(hits=5, misses=0, gone=0, evictions=2, users_stopped=1, unsent=2, requests=8)
    assert counts(run(virtual=True)) == want


def test_a_large_window_forgets_nothing():
    want = reference_model(1000, backlog=True)
    assert want == dict(hits=6, misses=1, gone=0, evictions=0, users_stopped=0, unsent=0, requests=10)
    assert counts(run(virtual=False, window=1000)) == want
    # no window (the old behaviour, and trace plans): every turn queued so far
    assert counts(run(virtual=False, window=0)) == want
