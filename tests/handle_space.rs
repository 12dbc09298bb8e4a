//! The run-time handle space: many run-time pools created and dropped in a loop,
//! some with handles leaked, until the space is exhausted. Creation must then fail with the
//! typed `HandleSpaceExhausted`, and no pool may ever accept a handle of another (no alias):
//! every live pool rejects every earlier pool's outstanding handle. Its own test binary (its
//! own process), because it exhausts the process-wide space on purpose.

use idxpool::{Handle, Offset, Pool, PoolBuilder, PoolError, Runtime};

/// 512 KiB objects: 4096 of them span 2^28 raw entries (2 GiB of region, mapped but never
/// touched), so 16 such pools fill the 2^32 space.
type Big = [u8; 512 * 1024];

/// Entries in the whole handle space (entries 1 ..= u32::MAX).
const SPACE: u64 = u32::MAX as u64;

fn big_pool(i: usize) -> Result<Pool<Big, Runtime, Offset>, PoolError> {
    PoolBuilder::<Big>::zeroed(4096)
        .cache_size(0)
        .name(format!("big-{i}"))
        .build()
}

#[test]
#[cfg_attr(miri, ignore = "maps 2 GiB regions")]
fn exhausting_the_handle_space_is_a_typed_error_and_never_aliases() {
    let free0 = Runtime::space_usage().free;
    let mut outstanding: Vec<(usize, Handle<Big, Runtime, Offset>)> = Vec::new();
    let mut made = 0;
    let err = loop {
        let pool = match big_pool(made) {
            Ok(p) => p,
            Err(e) => break e,
        };
        // No earlier pool's handle is this pool's.
        for (k, h) in &outstanding {
            assert!(!pool.owns(h), "pool {made} accepts a handle of pool {k}");
            assert!(matches!(
                pool.check(h),
                Err(PoolError::ForeignHandle { .. })
            ));
        }
        let h = pool.get().unwrap();
        if made % 2 == 0 {
            // Leaked: dropped with the object out, so its range is quarantined for good.
            outstanding.push((made, h));
        } else {
            pool.put(h); // all home: the range goes back to the free list
        }
        drop(pool);
        made += 1;
        assert!(made < 100, "the space never ran out");
    };
    match err {
        PoolError::HandleSpaceExhausted {
            requested,
            block,
            largest_free,
            quarantined,
        } => {
            assert_eq!(block, requested.next_power_of_two());
            // 4096 objects x stride / 8 (the stride is 512 KiB rounded to an odd number of
            // cache lines by StrideMode::Auto), in a block of the next power of two, 2^29.
            assert!((1 << 28..1 << 29).contains(&requested), "{requested}");
            assert!(largest_free < SPACE);
            assert!(quarantined >= outstanding.len() as u64 * (1 << 29));
        }
        other => panic!("expected HandleSpaceExhausted, got {other:?}"),
    }
    // Ranges of pools dropped with every object home were reused; quarantined ones never: the
    // space holds 7 aligned blocks of 2^29 entries (entry 0 is none), each leaked pool takes
    // one for good, each pool that came home gave its block back.
    assert!(made >= 7, "{made} pools before exhaustion");
    let idxpool::SpaceUsage { free, quarantined } = Runtime::space_usage();
    assert!(free < free0 && quarantined >= (outstanding.len() as u64) << 29);
    assert!(outstanding.len() >= 3, "half the pools leaked");
    // Small pools still fit in what is left, and still reject the leaked handles.
    let small = PoolBuilder::<Big>::zeroed(1).cache_size(0).build().unwrap();
    for (_, h) in &outstanding {
        assert!(!small.owns(h));
    }
    // The outstanding handles are leaked on purpose (their pools are gone).
    std::mem::forget(outstanding);
}
