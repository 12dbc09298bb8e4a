//! The handle ring (src/handle_ring.rs): full and empty edges, ptr_ring's batch semantics,
//! bulk/burst/array transfers, handles returned on failure and on drop, a stress test with real
//! threads, and (under `--cfg loom`) a loom model of the SPSC protocol at tiny capacity:
//!
//! ```sh
//! RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test --release --test handle_ring
//! ```

#[cfg(not(loom))]
mod std_tests {
    use idxpool::handle_ring::{Consumer, HandleRing, Producer, Zeroing};
    use idxpool::repr::Repr;
    use idxpool::{Handle, Pool, PoolBuilder};

    fn get_n<T, B: idxpool::Brand, R: Repr>(
        pool: &Pool<T, B, R>,
        n: usize,
    ) -> Vec<idxpool::Handle<T, B, R>> {
        let mut v = Vec::new();
        pool.get_bulk(&mut v, n).unwrap();
        v
    }

    /// Produces `n` fresh handles one by one; all must fit.
    fn fill<T, B: idxpool::Brand>(pool: &Pool<T, B>, p: &mut Producer<&'_ Pool<T, B>>, n: usize) {
        for h in get_n(pool, n) {
            p.produce(h).expect("ring has room");
        }
    }

    fn consume_put<T, B: idxpool::Brand>(
        pool: &Pool<T, B>,
        c: &mut Consumer<&'_ Pool<T, B>>,
        n: usize,
    ) {
        for _ in 0..n {
            pool.put(c.consume().expect("ring has entries"));
        }
    }

    #[test]
    fn halves_are_send_when_t_is() {
        fn send<X: Send>(_: &X) {}
        PoolBuilder::<[u8; 16]>::with_default(4)
            .scoped(|pool| {
                let (p, c) = HandleRing::new(&pool, 4, Zeroing::Batched).unwrap();
                send(&p);
                send(&c);
            })
            .unwrap();
    }

    #[test]
    fn batch_semantics_on_a_full_ring() {
        PoolBuilder::<u64>::with_default(200)
            .cache_size(0)
            .scoped(|pool| {
                let (mut p, mut c) = HandleRing::new(&pool, 64, Zeroing::Batched).unwrap();
                let batch = p.ring().batch();
                assert_eq!(batch, 32);
                assert!(c.is_empty());
                fill(&pool, &mut p, 64); // all slots usable
                assert!(p.is_full());
                let h = pool.get().unwrap();
                let idx = pool.index_of(&h);
                let h = p.produce(h).unwrap_err(); // full: handed back
                assert_eq!(pool.index_of(&h), idx);
                // After one consume the next produce may fail (here it does: the slot is not
                // emptied until the batch is complete) ...
                consume_put(&pool, &mut c, 1);
                assert_eq!(c.pending(), 1);
                let h = p.produce(h).unwrap_err();
                // ... up to batch - 1 consumes still leave the producer blocked ...
                consume_put(&pool, &mut c, batch - 2);
                let h = p.produce(h).unwrap_err();
                // ... after `batch` consumes it must succeed, and `batch` slots are free.
                consume_put(&pool, &mut c, 1);
                assert_eq!(c.pending(), 0);
                p.produce(h).unwrap();
                fill(&pool, &mut p, batch - 1);
                assert!(p.is_full());
                // FIFO: the rest of the first lap, then the refills.
                let mut all = Vec::new();
                assert_eq!(c.drain_into(&mut all), 64);
                assert!(c.is_empty());
                pool.put_bulk(&mut all);
                drop((p, c));
                assert_eq!(pool.in_use(), 0);
            })
            .unwrap();
    }

    #[test]
    fn immediate_zeroing_frees_each_slot_at_once() {
        PoolBuilder::<u64>::with_default(100)
            .cache_size(0)
            .scoped(|pool| {
                let (mut p, mut c) = HandleRing::new(&pool, 64, Zeroing::Immediate).unwrap();
                assert_eq!(p.ring().batch(), 1);
                fill(&pool, &mut p, 64);
                let h = p.produce(pool.get().unwrap()).unwrap_err();
                consume_put(&pool, &mut c, 1);
                assert_eq!(c.pending(), 0);
                p.produce(h).unwrap();
                let h = p.produce(pool.get().unwrap()).unwrap_err();
                pool.put(h);
            })
            .unwrap();
    }

    #[test]
    fn end_of_ring_flushes_the_batch() {
        // size 40, batch 16: consumed slots 32..40 are emptied at the end of the ring, not
        // after 16 consumes.
        PoolBuilder::<u64>::with_default(100)
            .cache_size(0)
            .scoped(|pool| {
                let (mut p, mut c) = HandleRing::new(&pool, 40, Zeroing::BatchOf(16)).unwrap();
                assert_eq!(p.ring().batch(), 16);
                fill(&pool, &mut p, 40);
                consume_put(&pool, &mut c, 32); // two full batches: slots 0..32 free
                assert_eq!(c.pending(), 0);
                fill(&pool, &mut p, 32);
                assert!(p.is_full());
                consume_put(&pool, &mut c, 7);
                assert_eq!(c.pending(), 7);
                assert!(p.is_full());
                consume_put(&pool, &mut c, 1); // slot 39: end of ring
                assert_eq!(c.pending(), 0);
                // The producer wrapped and refilled 0..32, so it waits at slot 32: now free.
                fill(&pool, &mut p, 8);
                assert!(p.is_full());
                let mut v = Vec::new();
                assert_eq!(c.drain_into(&mut v), 40);
                pool.put_bulk(&mut v);
            })
            .unwrap();
    }

    #[test]
    fn bulk_burst_array_and_zero_length() {
        PoolBuilder::<u64>::with_default(100)
            .cache_size(0)
            .scoped(|pool| {
                let (mut p, mut c) = HandleRing::new(&pool, 8, Zeroing::Batched).unwrap();
                // Zero-length transfers succeed and move nothing.
                let mut empty = Vec::new();
                assert!(p.produce_bulk(&mut empty));
                assert_eq!(p.produce_burst(&mut empty), 0);
                assert!(p.produce_array::<0>([]).is_ok());
                assert!(c.consume_bulk(&mut empty, 0));
                assert_eq!(c.consume_burst(&mut empty, 0), 0);
                assert!(c.consume_array::<0>().is_some());
                assert!(empty.is_empty());
                // Bulk larger than the ring: refused, handles kept.
                let mut v = get_n(&pool, 9);
                let before: Vec<u32> = v.iter().map(|h| pool.index_of(h)).collect();
                assert!(!p.produce_bulk(&mut v));
                assert_eq!(
                    v.iter().map(|h| pool.index_of(h)).collect::<Vec<_>>(),
                    before
                );
                // Burst: the first 8 go in order, the 9th stays.
                assert_eq!(p.produce_burst(&mut v), 8);
                assert_eq!(v.len(), 1);
                assert_eq!(pool.index_of(&v[0]), before[8]);
                assert!(!p.produce_bulk(&mut v));
                assert_eq!(v.len(), 1);
                // Consume bulk: all or nothing.
                let mut out = Vec::new();
                assert!(!c.consume_bulk(&mut out, 9));
                assert!(out.is_empty());
                assert!(c.consume_bulk(&mut out, 3));
                assert_eq!(
                    out.iter().map(|h| pool.index_of(h)).collect::<Vec<_>>(),
                    before[..3]
                );
                // size 8: batch 1, so the 3 slots are free again.
                let arr: [Handle<u64, _>; 3] = c.consume_array::<3>().unwrap();
                assert_eq!(
                    arr.iter().map(|h| pool.index_of(h)).collect::<Vec<_>>(),
                    before[3..6]
                );
                assert!(c.consume_array::<3>().is_none()); // only 2 left
                                                           // size 8 has batch 1: the 6 consumed slots are free again, in order.
                p.produce_array(arr).unwrap();
                let mut rest = Vec::new();
                assert_eq!(c.consume_burst(&mut rest, 100), 5);
                let want: Vec<u32> = before[6..8].iter().chain(&before[3..6]).copied().collect();
                assert_eq!(
                    rest.iter().map(|h| pool.index_of(h)).collect::<Vec<_>>(),
                    want
                );
                // An array that does not fit comes back whole.
                let full: [Handle<u64, _>; 8] = std::array::from_fn(|_| pool.get().unwrap());
                p.produce(v.pop().unwrap()).unwrap();
                let full = p.produce_array(full).unwrap_err();
                pool.put_bulk(&mut full.into_iter().collect());
                pool.put_bulk(&mut out);
                pool.put_bulk(&mut rest);
                c.drain_into(&mut rest);
                pool.put_bulk(&mut rest);
                drop((p, c));
                assert_eq!(pool.in_use(), 0);
            })
            .unwrap();
    }

    #[test]
    fn ring_drop_returns_handles_to_the_pool() {
        for zeroing in [Zeroing::Batched, Zeroing::Immediate] {
            PoolBuilder::<u64>::with_default(128)
                .cache_size(16)
                .scoped(|pool| {
                    let (mut p, mut c) = HandleRing::new(&pool, 64, zeroing).unwrap();
                    fill(&pool, &mut p, 50);
                    // Consumed-but-not-emptied slots must not be returned twice (debug checks
                    // would panic on the double free).
                    consume_put(&pool, &mut c, 5);
                    assert_eq!(pool.in_use(), 45);
                    drop(c);
                    fill(&pool, &mut p, 3); // the producer may go on alone
                    drop(p);
                    pool.flush();
                    assert_eq!(pool.in_use(), 0, "{zeroing:?}");
                    assert!(pool.is_full());
                })
                .unwrap();
        }
    }

    #[test]
    fn pointer_twin_ring() {
        PoolBuilder::<u64>::with_default(64)
            .cache_size(0)
            .repr::<idxpool::Pointer>()
            .scoped(|pool| {
                let (mut p, mut c) = HandleRing::new(&pool, 32, Zeroing::Batched).unwrap();
                assert_eq!(p.ring().batch(), 16);
                let mut v = get_n(&pool, 32);
                for (i, h) in v.iter_mut().enumerate() {
                    *pool.get_mut(h) = i as u64;
                }
                assert!(p.produce_bulk(&mut v));
                let h = p.produce(pool.get().unwrap()).unwrap_err();
                let mut out = Vec::new();
                assert!(c.consume_bulk(&mut out, 15));
                let h = p.produce(h).unwrap_err(); // 15 < batch
                pool.put(c.consume().unwrap());
                p.produce(h).unwrap();
                for (i, h) in out.iter().enumerate() {
                    assert_eq!(*pool.get_ref(h), i as u64);
                }
                pool.put_bulk(&mut out);
                drop((p, c));
                assert_eq!(pool.in_use(), 0);
            })
            .unwrap();
    }

    /// Producer thread sends `items` sequence-stamped objects; the consumer checks FIFO order
    /// and returns each to the pool. Mixed single / bulk / burst / array calls on both sides.
    fn stress(size: usize, zeroing: Zeroing, items: u64, pool_cap: u32) {
        PoolBuilder::<u64>::with_default(pool_cap)
            .cache_size(32)
            .scoped(|pool| {
                let (mut p, mut c) = HandleRing::new(&pool, size, zeroing).unwrap();
                std::thread::scope(|s| {
                    let pool = &pool;
                    s.spawn(move || {
                        let mut cache = pool.local_cache();
                        let mut seq = 0u64;
                        let mut v = Vec::new();
                        let mut spins = 0u64;
                        let mut attempt = 0u64;
                        while seq < items || !v.is_empty() {
                            attempt += 1;
                            let k = (1 + seq % 7).min(items.saturating_sub(seq)) as usize;
                            if v.is_empty() {
                                if cache.get_bulk(&mut v, k).is_err() {
                                    std::thread::yield_now();
                                    continue;
                                }
                                for h in v.iter_mut() {
                                    *pool.get_mut(h) = seq;
                                    seq += 1;
                                }
                            }
                            // Rotate the call per attempt: a bulk that cannot fit (larger than
                            // the ring) is retried as a burst or singles next time.
                            let moved = match attempt % 3 {
                                0 => {
                                    let n = v.len();
                                    if p.produce_bulk(&mut v) {
                                        n
                                    } else {
                                        0
                                    }
                                }
                                1 => p.produce_burst(&mut v),
                                _ => {
                                    let h = v.remove(0);
                                    match p.produce(h) {
                                        Ok(()) => 1,
                                        Err(h) => {
                                            v.insert(0, h);
                                            0
                                        }
                                    }
                                }
                            };
                            if moved == 0 {
                                spins += 1;
                                std::thread::yield_now();
                            }
                        }
                        spins
                    });
                    let mut cache = pool.local_cache();
                    let mut want = 0u64;
                    let mut out = Vec::new();
                    let mut attempt = 0u64;
                    while want < items {
                        attempt += 1;
                        let n = match attempt % 4 {
                            0 => {
                                if c.consume_bulk(&mut out, 4) {
                                    4
                                } else {
                                    c.consume_burst(&mut out, 1)
                                }
                            }
                            1 => c.consume_burst(&mut out, 5),
                            2 => match c.consume_array::<2>() {
                                Some(a) => {
                                    out.extend(a);
                                    2
                                }
                                None => 0,
                            },
                            _ => match c.consume() {
                                Some(h) => {
                                    out.push(h);
                                    1
                                }
                                None => 0,
                            },
                        };
                        if n == 0 {
                            std::thread::yield_now();
                        }
                        for h in out.iter() {
                            assert_eq!(*pool.get_ref(h), want, "FIFO order");
                            want += 1;
                        }
                        cache.put_bulk(&mut out);
                    }
                    assert!(c.is_empty());
                });
                drop(c);
                pool.flush();
                assert_eq!(pool.in_use(), 0);
            })
            .unwrap();
    }

    #[test]
    fn stress_two_threads() {
        let items = if cfg!(debug_assertions) {
            60_000
        } else {
            400_000
        };
        for (size, zeroing) in [
            (64, Zeroing::Batched),
            (64, Zeroing::Immediate),
            (100, Zeroing::BatchOf(8)),
            (3, Zeroing::Batched),
            (1, Zeroing::Batched),
        ] {
            stress(size, zeroing, items / 4, 512);
        }
        stress(1024, Zeroing::Batched, items, 4096);
    }
}

#[cfg(loom)]
mod loom_tests {
    use idxpool::handle_ring::{HandleRing, Zeroing};
    use idxpool::{Backing, BackingPolicy, HandleRing, Pool, PoolBuilder, Unchecked};
    use loom::cell::UnsafeCell;
    use loom::thread;

    type Obj = UnsafeCell<u32>;

    fn model(bound: usize, f: impl Fn() + Sync + Send + 'static) {
        let mut b = loom::model::Builder::new();
        if std::env::var("LOOM_MAX_PREEMPTIONS").is_err() {
            b.preemption_bound = Some(bound);
        }
        b.check(f);
    }

    /// A pool that loom threads (which must be 'static) can borrow; freed by `free_pool`.
    fn leak_pool(capacity: u32) -> &'static Pool<Obj, Unchecked> {
        // SAFETY: one Unchecked pool per model execution, and its handles never meet another.
        let pool = unsafe {
            PoolBuilder::<Obj>::with_fn(capacity, |_| UnsafeCell::new(0))
                .cache_size(0)
                .backing(BackingPolicy::Require(Backing::Heap))
                .max_threads(1)
                .build_unchecked()
                .unwrap()
        };
        Box::leak(Box::new(pool))
    }

    /// # Safety
    /// Every thread and ring half that borrowed `pool` must be gone.
    unsafe fn free_pool(pool: &'static Pool<Obj, Unchecked>) {
        // SAFETY: pool came from Box::leak in leak_pool and nothing borrows it any more.
        drop(unsafe { Box::from_raw(pool as *const _ as *mut Pool<Obj, Unchecked>) });
    }

    /// SPSC through a 4-slot ring with batch 2: `items` stamped objects cross, the ring wraps
    /// and fills, so produce fails on full slots and consumed slots are emptied in batches and
    /// at the end of the ring. loom checks that every stamp write happens-before its read (the
    /// object is a loom UnsafeCell), FIFO order, and that all objects come home.
    fn spsc(size: usize, zeroing: Zeroing, items: u32, bound: usize) {
        model(bound, move || {
            let pool = leak_pool(items);
            let (mut p, mut c) = HandleRing::new(pool, size, zeroing).unwrap();
            let mut hs = Vec::new();
            pool.get_bulk(&mut hs, items as usize).unwrap();
            let prod = thread::spawn(move || {
                for (i, h) in hs.into_iter().enumerate() {
                    // SAFETY: we own h's object; the consumer reads it after the Release
                    // store of the entry (checked by loom).
                    pool.get_ref(&h).with_mut(|v| unsafe { *v = i as u32 + 1 });
                    let mut h = Some(h);
                    while let Some(x) = h.take() {
                        if let Err(back) = p.produce(x) {
                            h = Some(back);
                            thread::yield_now();
                        }
                    }
                }
                drop(p);
            });
            let mut want = 1;
            while want <= items {
                match c.consume() {
                    Some(h) => {
                        // SAFETY: the handle gives us the object (loom checks the ordering).
                        let v = pool.get_ref(&h).with(|v| unsafe { *v });
                        assert_eq!(v, want);
                        want += 1;
                        pool.put(h);
                    }
                    None => thread::yield_now(),
                }
            }
            prod.join().unwrap();
            drop(c);
            assert_eq!(pool.in_use(), 0);
            // SAFETY: the producer thread is joined, both halves are dropped.
            unsafe { free_pool(pool) };
        });
    }

    #[test]
    fn loom_spsc_batched_wraps() {
        spsc(4, Zeroing::BatchOf(2), 5, 5);
    }

    #[test]
    fn loom_spsc_immediate() {
        spsc(2, Zeroing::Immediate, 3, 5);
    }

    /// Bulk transfers of 2 through a 4-slot ring with batch 2, twice around the ring: the
    /// consumer's "n-th slot full implies the ones before are" shortcut and the producer's
    /// all-slots-empty check, against the lazily emptied batches.
    #[test]
    fn loom_bulk_pairs_wrap() {
        model(4, || {
            let pool = leak_pool(8);
            let (mut p, mut c) = HandleRing::new(pool, 4, Zeroing::BatchOf(2)).unwrap();
            let mut hs = Vec::new();
            pool.get_bulk(&mut hs, 8).unwrap();
            let prod = thread::spawn(move || {
                let mut hs = hs;
                for (i, h) in hs.iter().enumerate() {
                    // SAFETY: we own the object until the handle is produced.
                    pool.get_ref(h).with_mut(|v| unsafe { *v = i as u32 + 1 });
                }
                while !hs.is_empty() {
                    let mut pair: Vec<_> = hs.drain(..2).collect();
                    while !p.produce_bulk(&mut pair) {
                        thread::yield_now();
                    }
                }
            });
            let mut want = 1;
            let mut out = Vec::new();
            while want <= 8 {
                if !c.consume_bulk(&mut out, 2) {
                    thread::yield_now();
                    continue;
                }
                for h in out.drain(..) {
                    // SAFETY: the handle gives us the object (loom checks the ordering).
                    assert_eq!(pool.get_ref(&h).with(|v| unsafe { *v }), want);
                    want += 1;
                    pool.put(h);
                }
            }
            prod.join().unwrap();
            drop(c);
            assert_eq!(pool.in_use(), 0);
            // SAFETY: the producer thread is joined, both halves are dropped.
            unsafe { free_pool(pool) };
        });
    }

    /// The pointer twin's slots (AtomicPtr, null = empty) under the same protocol.
    #[test]
    fn loom_pointer_ring() {
        model(5, || {
            // SAFETY: one Unchecked pool per execution; freed below after everything is done.
            let pool = Box::leak(Box::new(unsafe {
                PoolBuilder::<Obj>::with_fn(3, |_| UnsafeCell::new(0))
                    .cache_size(0)
                    .backing(BackingPolicy::Require(Backing::Heap))
                    .max_threads(1)
                    .repr::<idxpool::Pointer>()
                    .build_unchecked()
                    .unwrap()
            }));
            let pool: &'static idxpool::Pool<Obj, Unchecked, Pointer> = pool;
            let (mut p, mut c) = HandleRing::new(pool, 2, Zeroing::Batched).unwrap();
            let mut hs = Vec::new();
            pool.get_bulk(&mut hs, 3).unwrap();
            let prod = thread::spawn(move || {
                for (i, h) in hs.into_iter().enumerate() {
                    // SAFETY: we own the object until the handle is produced.
                    pool.get_ref(&h).with_mut(|v| unsafe { *v = i as u32 + 1 });
                    let mut h = Some(h);
                    while let Some(x) = h.take() {
                        if let Err(back) = p.produce(x) {
                            h = Some(back);
                            thread::yield_now();
                        }
                    }
                }
            });
            let mut want = 1;
            while want <= 3 {
                match c.consume() {
                    Some(h) => {
                        // SAFETY: the handle gives us the object (loom checks the ordering).
                        assert_eq!(pool.get_ref(&h).with(|v| unsafe { *v }), want);
                        want += 1;
                        pool.put(h);
                    }
                    None => thread::yield_now(),
                }
            }
            prod.join().unwrap();
            drop(c);
            assert_eq!(pool.in_use(), 0);
            // SAFETY: the producer thread is joined, both halves are dropped.
            drop(unsafe {
                Box::from_raw(pool as *const _ as *mut idxpool::Pool<Obj, Unchecked, Pointer>)
            });
        });
    }

    /// Bulk produce into a 2-slot ring that must drain first, bulk consume, and a ring dropped
    /// with handles inside: they go back to the pool exactly once.
    #[test]
    fn loom_bulk_and_drop() {
        model(5, || {
            let pool = leak_pool(4);
            let (mut p, mut c) = HandleRing::new(pool, 2, Zeroing::Batched).unwrap();
            let mut hs = Vec::new();
            pool.get_bulk(&mut hs, 4).unwrap();
            let prod = thread::spawn(move || {
                let mut hs = hs;
                let mut rest = hs.split_off(2);
                assert!(p.produce_bulk(&mut hs));
                while !p.produce_bulk(&mut rest) {
                    thread::yield_now();
                }
            });
            let mut out = Vec::new();
            while !c.consume_bulk(&mut out, 2) {
                thread::yield_now();
            }
            assert_eq!(out.len(), 2);
            pool.put_bulk(&mut out);
            drop(c);
            prod.join().unwrap();
            assert_eq!(pool.in_use(), 0);
            unsafe { free_pool(pool) };
        });
    }
}

#[test]
fn each_half_sees_the_other_gone_and_the_consumer_drains_first() {
    use idxpool::channel::TryRecvError;
    let pool = idxpool::PoolBuilder::<u64>::with_default(8)
        .build()
        .unwrap();
    let (mut tx, mut rx) =
        idxpool::HandleRing::new(&pool, 4, idxpool::handle_ring::Zeroing::Batched).unwrap();
    assert!(!tx.is_abandoned() && !rx.is_abandoned());
    assert_eq!(rx.try_consume().unwrap_err(), TryRecvError::Empty);
    tx.produce(pool.get().unwrap()).unwrap();
    tx.produce(pool.get().unwrap()).unwrap();
    let t = std::thread::scope(|s| s.spawn(move || drop(tx)).join());
    t.unwrap();
    assert!(rx.is_abandoned());
    pool.put(rx.try_consume().unwrap());
    pool.put(rx.try_consume().unwrap());
    assert_eq!(rx.try_consume().unwrap_err(), TryRecvError::Disconnected);
    let (tx, rx) =
        idxpool::HandleRing::new(&pool, 4, idxpool::handle_ring::Zeroing::Batched).unwrap();
    drop(rx);
    assert!(tx.is_abandoned());
    assert_eq!(pool.in_use(), 0);
}
