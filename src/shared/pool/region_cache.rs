//! The shared pool's mechanics of the cache algorithm ([`RegionCache`]).

use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicU32, Ordering};

use super::assume_init;
use super::SharedPool;
use crate::cache::CacheOps;
use crate::ring::Behavior;
use crate::shared::owner::FREE;
use crate::shared::xring::{kill_hook, kill_point, K_DEQ_CACHE, NO_ENTRY, REC_BATCH};
use crate::stats::Counter;

/// Entries a get or put handles on the stack; larger runs use a heap buffer.
const STACK_RUN: usize = 64;

/// Runs `f` on a scratch buffer of `n` entries (on the stack up to [`STACK_RUN`]).
pub(super) fn with_scratch<R>(n: usize, f: impl FnOnce(&mut [MaybeUninit<u32>]) -> R) -> R {
    if n <= STACK_RUN {
        let mut a = [MaybeUninit::<u32>::uninit(); STACK_RUN];
        f(&mut a[..n])
    } else {
        f(&mut vec![MaybeUninit::<u32>::uninit(); n])
    }
}

/// Runs `f` on `n` zeroed entries (on the stack up to [`STACK_RUN`]): a ring operation's entries.
pub(super) fn with_entries<R>(n: usize, f: impl FnOnce(&mut [u32]) -> R) -> R {
    if n <= STACK_RUN {
        let mut a = [0u32; STACK_RUN];
        f(&mut a[..n])
    } else {
        f(&mut vec![0u32; n])
    }
}

/// The shared pool's mechanics of the cache algorithm ([`CacheOps`]): the attachment's cache array
/// and length word in its process slot, and the recoverable common ring. Why each step (run pop and
/// push, refill, flush, bypass) survives a kill anywhere: DESIGN.md, "Per-process cache". Corrupt
/// entries are dropped, counted, and written as [`NO_ENTRY`] in the caller's buffer
/// (`SharedPool::get_entries` strikes them).
///
/// **The length is read once** per run ([`RegionCache::new`]) and clamped to the fill limit: every
/// decision of the run uses that copy, so `len <= 2 x size` holds whatever a peer writes into the
/// word (only stored, for recovery). Such a write can make the run use stale or foreign entries
/// (every claim checks) or lose objects (`audit` finds them), never index out of the cache.
pub(crate) struct RegionCache<'p, T> {
    pub(super) pool: &'p SharedPool<T>,
    /// This run's copy of the cache length (`<= 2 x size`).
    len: u32,
}

impl<'p, T> RegionCache<'p, T> {
    /// One run's mechanics of `pool`'s cache: reads the length word once; one above the fill limit
    /// (a peer's write) is clamped and counted (`corrupt_entries`).
    #[inline(always)]
    pub(super) fn new(pool: &'p SharedPool<T>) -> Self {
        let word = pool.my_slot().len.load(Ordering::Relaxed);
        let limit = pool.plan.fill_limit;
        let len = if word <= limit {
            word
        } else {
            pool.stats().corrupt_entries.fetch_add(1, Ordering::Relaxed);
            limit
        };
        RegionCache { pool, len }
    }

    fn len_word(&self) -> &AtomicU32 {
        &self.pool.my_slot().len
    }

    /// Sets the copy and the word to `len` (at most the cache array).
    #[inline(always)]
    fn set_len(&mut self, len: u32) {
        self.len = len.min(self.pool.cache_cap());
        self.len_word().store(self.len, Ordering::Release);
    }
}

impl<T> CacheOps<u32> for RegionCache<'_, T> {
    #[inline]
    fn len(&self) -> usize {
        self.len as usize
    }

    #[inline]
    fn fill_limit(&self) -> usize {
        self.pool.plan.fill_limit as usize
    }

    fn pop_top(&mut self, dst: &mut [MaybeUninit<u32>]) {
        let k = dst.len();
        if k == 0 {
            return;
        }
        let p = self.pool;
        let len = self.len();
        // The algorithm asks for at most `len` (decided on the same copy); a shortfall is struck.
        debug_assert!(k <= len);
        let take = k.min(len);
        let cache = &p.cache_of(p.slot)[len - take..len];
        // Held first, popped second (see the type's docs).
        for (i, (d, c)) in dst.iter_mut().zip(cache).enumerate() {
            let e = c.load(Ordering::Relaxed);
            d.write(if p.claim(e, FREE) { e } else { NO_ENTRY });
            if i == 0 && take > 1 {
                kill_hook(kill_point::CACHE_POP_RUN);
            }
        }
        for d in &mut dst[take..] {
            d.write(NO_ENTRY);
        }
        kill_hook(kill_point::CACHE_POP);
        self.set_len((len - take) as u32);
    }

    fn push(&mut self, src: &[u32]) {
        let p = self.pool;
        let (len, k) = (self.len(), src.len());
        if len + k > p.cache_cap() as usize {
            // No room: only when a flush found the ring full (a corrupt region). The ring
            // put keeps what does not fit marked held by us (lost to circulation, counted).
            self.ring_put(src);
            return;
        }
        for (c, &e) in p.cache_of(p.slot)[len..].iter().zip(src) {
            c.store(e, Ordering::Relaxed);
        }
        self.set_len((len + k) as u32);
        kill_hook(kill_point::CACHE_PUSH);
        // In the cache first, free second (see the type's docs).
        for (i, &e) in src.iter().enumerate() {
            p.unmark_held(e);
            if let Some(w) = p.owners().get(e as usize) {
                w.store(FREE, Ordering::Release);
            }
            if i == 0 && k > 1 {
                kill_hook(kill_point::CACHE_PUSH_RUN);
            }
        }
    }

    fn refill(&mut self, want: usize, how: Behavior) -> usize {
        let p = self.pool;
        let (rs, id) = p.party();
        let len = self.len;
        // The plan keeps `len + want` within the cache array; clamped all the same.
        let want = (want as u32).min(p.cache_cap() - len);
        let n = p.with_ring(&p.ring, rs, id, K_DEQ_CACHE, |p, t| {
            let avail = t.count();
            let n = match how {
                Behavior::Bulk if avail < want => 0,
                _ => want.min(avail),
            };
            if n == 0 {
                return 0;
            }
            with_entries(n as usize, |buf| {
                SharedPool::<T>::read_head(t, buf);
                p.commit(t, K_DEQ_CACHE, t.head, n, len, rs, 0, 0, buf);
            });
            n
        });
        // The record stored the word; the copy follows what this run asked for.
        self.len = len + n;
        n as usize
    }

    /// Leaves them cached: only a short Dpdk2607 burst refill gets here (other policies refill all
    /// or nothing; a full one serves the get), so `len < n <= size/2` is within the fill limit, and
    /// moving them back would be a second ring operation for nothing.
    fn unrefill(&mut self, _k: usize) {}

    fn flush_bottom(&mut self, k: usize) {
        let p = self.pool;
        self.len = p.flush_cache(p.slot, self.len, k as u32, p.party());
    }

    fn ring_get(&mut self, dst: &mut [MaybeUninit<u32>], how: Behavior) -> usize {
        let p = self.pool;
        let n = dst.len();
        if how == Behavior::Bulk && p.ring.count() < n {
            return 0;
        }
        let mut k = 0;
        while k < n {
            let want = (n - k).min(REC_BATCH as usize);
            let mut j = k;
            let left = p.deq_held(&p.ring, want as u32, FREE, |e| {
                dst[j].write(e);
                j += 1;
            }) as usize;
            for d in &mut dst[j..k + left] {
                d.write(NO_ENTRY);
            }
            k += left;
            if left < want {
                break;
            }
        }
        if how == Behavior::Bulk && k < n {
            // Short (others took some meanwhile): give back what we claimed.
            // SAFETY: dst[..k] were written above.
            let taken: Vec<u32> = unsafe { assume_init(&dst[..k]) }
                .iter()
                .copied()
                .filter(|&e| e != NO_ENTRY)
                .collect();
            for &e in &taken {
                p.unmark_held(e);
            }
            p.enq_held(&p.ring, &taken, FREE);
            return 0;
        }
        k
    }

    fn ring_put(&mut self, src: &[u32]) {
        let p = self.pool;
        for &e in src {
            p.unmark_held(e);
        }
        p.enq_held(&p.ring, src, FREE);
    }

    fn ring_count(&self) -> usize {
        self.pool.ring.count()
    }

    /// Every step stores the length itself.
    #[inline(always)]
    fn publish(&self) {}

    /// The shared pool keeps no per-operation counters.
    #[inline(always)]
    fn count(&self, _which: Counter, _n: usize) {}
}
