//! Pool behaviour through the public API: creation, get/put, bulk, handles, counts.

use idxpool::{
    Backing, BackingPolicy, FlushPolicy, Handle, Pointer, Pool, PoolBuilder, PoolError, StrideMode,
};

idxpool::brand!(Basic);

#[test]
fn get_put_and_access() {
    let pool = PoolBuilder::<u64>::with_init(100, |i, slot| slot.write(i as u64 * 10))
        .cache_size(8)
        .build_named::<Basic>()
        .unwrap();
    assert_eq!(pool.capacity(), 100);
    assert_eq!(pool.available(), 100);
    let mut h = pool.get().unwrap();
    let i = pool.index_of(&h);
    assert_eq!(*pool.get_ref(&h), i as u64 * 10);
    *pool.get_mut(&mut h) += 1;
    assert_eq!(pool.in_use(), 1);
    pool.put(h);
    assert_eq!(pool.in_use(), 0);
    assert!(pool.is_full());
}

#[test]
fn scoped_pools_bulk_and_exhaustion() {
    for policy in FlushPolicy::ALL {
        PoolBuilder::<[u8; 100]>::zeroed(64)
            .cache_size(16)
            .policy(policy)
            .scoped(|pool| {
                let mut c = pool.local_cache();
                let mut v = Vec::new();
                c.get_bulk(&mut v, 60).unwrap();
                assert_eq!(v.len(), 60);
                let err = c.get_bulk(&mut v, 5).unwrap_err();
                assert!(matches!(
                    err,
                    PoolError::Exhausted {
                        requested: 5,
                        available: 4
                    }
                ));
                assert_eq!(v.len(), 60, "failed bulk leaves out unchanged");
                assert_eq!(c.get_burst(&mut v, 10), 4);
                assert!(c.get().is_err());
                let mut idx: Vec<u32> = v.iter().map(|h| pool.index_of(h)).collect();
                idx.sort_unstable();
                idx.dedup();
                assert_eq!(idx.len(), 64, "{policy}: distinct objects");
                c.put_bulk_tail(&mut v, 4);
                assert_eq!(v.len(), 60);
                c.put_bulk(&mut v);
                assert!(v.is_empty());
                let arr = c.get_array::<8>().unwrap();
                c.put_array(arr);
                drop(c);
                assert_eq!(pool.ring_count(), 64);
            })
            .unwrap();
    }
}

#[test]
fn stride_modes() {
    PoolBuilder::<[u8; 24]>::zeroed(10)
        .scoped(|p| assert_eq!(p.stride(), 32))
        .unwrap();
    PoolBuilder::<[u8; 24]>::zeroed(10)
        .stride(StrideMode::Natural)
        .scoped(|p| assert_eq!(p.stride(), 24))
        .unwrap();
    PoolBuilder::<[u8; 100]>::zeroed(10)
        .scoped(|p| assert_eq!(p.stride(), 192, "2 lines -> 3 (odd)"))
        .unwrap();
    PoolBuilder::<[u8; 2048]>::zeroed(10)
        .scoped(|p| assert_eq!(p.stride(), 2112, "as a DPDK mbuf"))
        .unwrap();
    PoolBuilder::<[u8; 150]>::zeroed(10)
        .scoped(|p| assert_eq!(p.stride(), 192, "already odd"))
        .unwrap();
    PoolBuilder::<[u8; 24]>::zeroed(10)
        .stride(StrideMode::CacheLine)
        .scoped(|p| assert_eq!(p.stride(), 64))
        .unwrap();
    assert!(matches!(
        PoolBuilder::<u64>::zeroed(10)
            .stride(StrideMode::Bytes(12))
            .scoped(|_| ()),
        Err(PoolError::InvalidConfig { .. })
    ));
}

#[test]
fn pointer_twin_behaves_the_same() {
    PoolBuilder::<u64>::with_default(32)
        .cache_size(4)
        .repr::<idxpool::Pointer>()
        .scoped(|pool| {
            let mut c = pool.local_cache();
            let mut v = Vec::new();
            c.get_bulk(&mut v, 32).unwrap();
            for (k, h) in v.iter_mut().enumerate() {
                *pool.get_mut(h) = k as u64;
            }
            for (k, h) in v.iter().enumerate() {
                assert_eq!(*pool.get_ref(h), k as u64);
            }
            c.put_bulk(&mut v);
        })
        .unwrap();
}

#[test]
fn backing_is_reported() {
    let r = PoolBuilder::<u8>::zeroed(4096)
        .backing(BackingPolicy::Require(Backing::Pages4K))
        .scoped(|p| p.backing().clone())
        .unwrap();
    assert_eq!(r.backing, Backing::Pages4K);
    assert!(r.fallbacks.is_empty());
}

#[test]
fn handle_sizes() {
    assert_eq!(std::mem::size_of::<Handle<[u8; 2048], Basic>>(), 4);
    assert_eq!(std::mem::size_of::<Option<Handle<[u8; 2048], Basic>>>(), 4);
}

#[test]
fn caches_written_by_one_thread_sit_on_their_own_pair_of_cache_lines() {
    // LocalCaches kept side by side in a Vec (one per thread) shared a cache line,
    // and each thread's writes of its fast state invalidated the other's (false sharing).
    const PAIR: usize = 2 * idxpool::CACHE_LINE;
    assert!(std::mem::align_of::<idxpool::LocalCache<&'static Pool<u64, Basic>>>() >= PAIR);
    assert!(
        std::mem::align_of::<idxpool::LocalCache<&'static Pool<u64, Basic, Pointer>>>() >= PAIR
    );
    PoolBuilder::<u64>::with_default(256)
        .cache_size(8)
        .scoped(|pool| {
            let caches: Vec<_> = (0..4).map(|_| pool.local_cache()).collect();
            for w in caches.windows(2) {
                let (a, b) = (&w[0] as *const _ as usize, &w[1] as *const _ as usize);
                assert_eq!(a % PAIR, 0);
                assert!(b - a >= PAIR);
            }
        })
        .unwrap();
}

/// `into_raw` / `from_raw` keep the raw value (`entry - 1`) of both 4-byte representations,
/// and `Option<Handle>` stays 4 bytes (the niche).
#[test]
fn raw_round_trip() {
    use idxpool::{Handle, Index, Unchecked};
    // SAFETY: not used with any pool.
    let h: Handle<u8, Unchecked, Index> = unsafe { Handle::from_raw(41) };
    assert_eq!(h.into_raw(), 41);
    // SAFETY: as above.
    let h: Handle<u8, Unchecked> = unsafe { Handle::from_raw(41) };
    assert_eq!(h.into_raw(), 41);
    assert_eq!(
        std::mem::size_of::<Option<Handle<u8, Unchecked, Index>>>(),
        4
    );
}
