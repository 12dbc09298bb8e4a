//! Heap allocations of a waiting receive: a receiver that parks on an empty `HandleChannel`
//! and is woken by a send should allocate nothing per wake-up (a UDP echo server's worker
//! does this for a large share of its datagrams: `examples/udp_echo.rs`).
//!
//! The allocator counts the allocations of the thread under test only (a thread-local
//! counter), so other threads and the test harness do not disturb the count.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use idxpool::{HandleChannel, PoolBuilder};

thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}

struct Counting;

fn count() {
    // `try_with`: no panic in the allocator while thread-locals are torn down.
    let _ = COUNTING.try_with(|on| {
        if on.get() {
            let _ = ALLOCS.try_with(|n| n.set(n.get() + 1));
        }
    });
}

// SAFETY: forwards every call to the system allocator unchanged; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        count();
        // SAFETY: the caller's contract, forwarded.
        unsafe { System.alloc(l) }
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        count();
        // SAFETY: the caller's contract, forwarded.
        unsafe { System.alloc_zeroed(l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        count();
        // SAFETY: the caller's contract, forwarded.
        unsafe { System.realloc(p, l, n) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: the caller's contract, forwarded.
        unsafe { System.dealloc(p, l) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// 200 sends, each after a pause long enough for the receiver to park most of the time;
/// the receiving thread's allocations over the 200 receives are counted.
#[test]
fn a_waiting_receive_allocates_nothing_per_wake_up() {
    const ROUNDS: u64 = 200;
    let pool = Arc::new(PoolBuilder::<u64>::with_default(1024).build().unwrap());
    let (tx, rx) = HandleChannel::new(pool.clone()).unwrap();
    let ready = Arc::new(AtomicBool::new(false));
    let (p, r) = (pool.clone(), ready.clone());
    let receiver = std::thread::spawn(move || {
        // Warm-up outside the count: the thread's cache, a first park and wake-up.
        r.store(true, Ordering::Release);
        p.put(rx.recv().unwrap());
        COUNTING.with(|c| c.set(true));
        for _ in 0..ROUNDS {
            p.put(rx.recv().unwrap());
        }
        COUNTING.with(|c| c.set(false));
        ALLOCS.with(|n| n.get())
    });
    while !ready.load(Ordering::Acquire) {
        std::thread::yield_now();
    }
    for _ in 0..=ROUNDS {
        std::thread::sleep(Duration::from_millis(1)); // the receiver parks meanwhile
        tx.send(pool.get().unwrap()).unwrap();
    }
    let allocs = receiver.join().unwrap();
    assert!(
        allocs <= 2,
        "{allocs} allocations in {ROUNDS} waiting receives (a park and a wake-up each)"
    );
    assert_eq!(pool.in_use(), 0);
}
