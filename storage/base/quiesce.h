/*
 * quiesce.h: lock-free readers, and waiting for them to be done.
 *
 * A thread that reads shared memory without a lock (the prefetch walk of
 * prefetch.h) brackets the read with quiesce_enter() and quiesce_exit().
 * A thread about to free memory such a reader might still be looking at
 * (a hash table replaced by an expansion, a slab page given back) first
 * makes it unreachable, then calls quiesce_wait(): every read section
 * that could have seen the memory has ended when it returns, and one that
 * begins later cannot reach it.
 *
 * A read section is counted in its thread's slot (64 slots, each on its
 * own cache line, shared round robin beyond 64 threads), so readers on
 * different workers never write a shared line.  The enter is sequentially
 * consistent: a reader that loads a pointer after entering is seen by the
 * waiter, or sees the pointer already cleared.
 */
#ifndef MCPM_STORAGE_QUIESCE_H
#define MCPM_STORAGE_QUIESCE_H

/* Begin and end a lock-free read section (any thread; not nested). */
void quiesce_enter(void);
void quiesce_exit(void);

/* Wait until every read section in progress now has ended.  Never call
 * it from inside a read section. */
void quiesce_wait(void);

#endif
