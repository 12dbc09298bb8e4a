//! Packet buffers at the edges a caller can reach: room and headroom sizes at and past the
//! `u32` limit, every operation asked for `usize::MAX` or one byte too many (a typed error,
//! the buffer unchanged), a room with no tailroom, a buffer of one pool offered to another
//! pool's guard, `io::Write` into a full buffer, and (feature `bytes`) clones of one `Bytes`
//! dropped on many threads at once after the user's pool is gone. Small sizes under Miri.

use std::io::Write;

use idxpool::packet::MAX_ROOM;
use idxpool::{PacketBuf, Pool, PoolBuilder, PoolError, Pooled};

fn pool(n: u32, room: usize, headroom: usize) -> Pool<PacketBuf> {
    PoolBuilder::packet_bufs(n, room, headroom)
        .cache_size(0)
        .build()
        .unwrap()
}

fn state(b: &PacketBuf) -> (usize, usize, usize, u32, Vec<u8>) {
    (b.headroom(), b.len(), b.tailroom(), b.tag(), b.to_vec())
}

#[test]
fn sizes_past_the_u32_limit_are_typed_errors_at_build() {
    for room in [
        MAX_ROOM + 1,
        MAX_ROOM - 1,
        u32::MAX as usize,
        usize::MAX - 3,
    ] {
        // MAX_ROOM - 1 rounds up to 8 past MAX_ROOM.
        let r = PoolBuilder::packet_bufs(1, room, 0).build();
        assert!(
            matches!(r, Err(PoolError::SizeOverflow { .. })),
            "room {room}: {:?}",
            r.map(|p| p.object_size())
        );
    }
    for headroom in [65, usize::MAX, u32::MAX as usize + 1] {
        let r = PoolBuilder::packet_bufs(1, 64, headroom).build();
        assert!(
            matches!(r, Err(PoolError::InvalidConfig { .. })),
            "headroom {headroom}"
        );
    }
    assert!(matches!(
        PoolBuilder::packet_bufs(1, 0, 0).build(),
        Err(PoolError::InvalidConfig { .. })
    ));
}

#[test]
fn every_operation_past_the_room_is_refused_and_changes_nothing() {
    let p = pool(2, 64, 16);
    let mut g = p.get_pooled().unwrap();
    g.extend_from_slice(b"abcd").unwrap();
    g.set_tag(9);
    let before = state(&g);
    let huge = [usize::MAX, u32::MAX as usize + 1, u32::MAX as usize, 65];
    for n in huge {
        assert!(g.prepend(n).is_err(), "prepend {n}");
        assert!(g.append(n).is_err(), "append {n}");
        assert!(g.strip_front(n).is_err(), "strip_front {n}");
        assert!(g.strip_back(n).is_err(), "strip_back {n}");
        assert!(g.set_data(n, 1).is_err(), "set_data {n}, 1");
        assert!(g.set_data(1, n).is_err(), "set_data 1, {n}");
        assert!(g.set_data(n, n).is_err(), "set_data {n}, {n}");
        g.truncate(n); // longer than the data: no effect
        assert_eq!(state(&g), before, "after {n}");
    }
    // One byte too many at each end.
    assert!(g.prepend(17).is_err());
    assert!(g.append(64 - 16 - 4 + 1).is_err());
    assert!(g.set_data(60, 5).is_err());
    assert_eq!(state(&g), before);
    // Exactly to the end fits.
    g.set_data(64, 0).unwrap();
    assert_eq!((g.headroom(), g.len(), g.tailroom()), (64, 0, 0));
    assert!(g.append(1).is_err());
    g.prepend(64).unwrap();
    assert_eq!((g.headroom(), g.len(), g.tailroom()), (0, 64, 0));
}

#[test]
fn headroom_equal_to_the_room_leaves_no_tailroom() {
    let p = pool(1, 64, 64);
    let mut g = p.get_pooled().unwrap();
    assert_eq!((g.headroom(), g.tailroom(), g.capacity()), (64, 0, 64));
    assert!(g.append(1).is_err());
    assert!(g.spare_mut().is_empty());
    g.prepend(64).unwrap().fill(7);
    assert_eq!(g.as_slice(), &[7u8; 64][..]);
}

#[test]
fn io_write_into_a_full_buffer_is_write_zero_and_keeps_what_fit() {
    let p = pool(1, 8, 0);
    let mut g = p.get_pooled().unwrap();
    let e = g.write_all(b"0123456789").unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::WriteZero);
    assert_eq!(g.as_slice(), b"01234567");
    assert_eq!(g.write(b"x").unwrap(), 0);
}

#[test]
fn a_buffer_of_one_pool_is_refused_by_another_pools_guard_and_accessors() {
    let (a, b) = (pool(2, 64, 0), pool(2, 2048, 0));
    let mut h = b.get().unwrap();
    b.get_mut(&mut h).extend_from_slice(b"from b").unwrap();
    let h = match Pooled::new(&a, h) {
        Err(h) => h, // untouched
        Ok(_) => panic!("a guard of pool a accepted pool b's buffer"),
    };
    assert!(matches!(
        a.try_get_ref(&h),
        Err(PoolError::ForeignHandle { .. })
    ));
    assert_eq!(b.get_ref(&h).as_slice(), b"from b");
    b.put(h);
    assert_eq!((a.in_use(), b.in_use()), (0, 0));
}

/// The last of many clones of one `Bytes`, dropped on many threads at once, after the user's
/// `Arc` of the pool is gone: the buffer goes back exactly once, and the pool is freed.
#[cfg(feature = "bytes")]
#[test]
fn bytes_clones_dropped_on_many_threads_after_the_pool_give_the_buffer_back_once() {
    use std::sync::Arc;
    let threads = if cfg!(miri) { 3 } else { 8 };
    let p = Arc::new(pool(2, 64, 8));
    let weak = Arc::downgrade(&p);
    let mut g = Pooled::get(p.clone()).unwrap();
    g.extend_from_slice(b"shared").unwrap();
    let bytes = g.into_bytes();
    let other = Pooled::get(p.clone()).unwrap(); // the second buffer, held meanwhile
    drop(p);
    let ts: Vec<_> = (0..threads)
        .map(|_| {
            let b = bytes.clone();
            std::thread::spawn(move || {
                assert_eq!(&b[..], b"shared");
                drop(b);
            })
        })
        .collect();
    drop(bytes);
    ts.into_iter().for_each(|t| t.join().unwrap());
    let pool = other.pool().clone();
    assert_eq!(
        pool.in_use(),
        1,
        "the shared buffer is home, the other still held"
    );
    drop(other);
    assert_eq!(pool.in_use(), 0);
    drop(pool);
    assert!(weak.upgrade().is_none(), "the pool outlived every holder");
}

/// A `set_data` past the room names where the window would end, not a size.
#[test]
fn set_data_past_the_room_says_where_the_window_would_end() {
    let pool = PoolBuilder::packet_bufs(2, 256, 16).build().unwrap();
    let mut b = pool.get_pooled().unwrap();
    let e = b.set_data(250, 10).unwrap_err();
    assert_eq!(
        e.to_string(),
        "set_data ending at byte 260: capacity is 256"
    );
    assert_eq!((b.len(), b.headroom()), (0, 16)); // unchanged
}
