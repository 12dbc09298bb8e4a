//! Re-entrancy: a global allocator that uses the pool on the same thread,
//! while the pool is in the middle of a bulk get that grows the caller's `Vec`. Before the fix,
//! the implicit-cache `get_bulk` took the thread's cache token (with the length copied) and
//! then grew the `Vec`: the allocator popped the top entry, and the outer call copied that same
//! entry into the `Vec` as well: two handles, two `&mut T` to one object (Miri: UB). Now every
//! adapter grows the `Vec` before it takes the token. Its own test binary: it installs a
//! global allocator. Also run under Miri (scripts/miri.sh).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;

use idxpool::{Handle, Offset, Pool, PoolBuilder, Runtime};

type P = Pool<u64, Runtime, Offset>;

static POOL: OnceLock<P> = OnceLock::new();
/// The tests share POOL and STOLEN: one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
/// The raw value of the handle the allocator took (u32::MAX: none).
static STOLEN: AtomicU32 = AtomicU32::new(u32::MAX);

thread_local! {
    static ARMED: Cell<bool> = const { Cell::new(false) };
    /// Every allocation and free on this thread tries a bulk get of 2 from WAIT_POOL (which
    /// has 1 free: it fails, and a failed get that reached the ring, with an entry there and
    /// waiters registered, wakes them: it takes the waiter queue's lock).
    static PROBE: Cell<bool> = const { Cell::new(false) };
    /// Set while the probe runs: its own allocations are forwarded unchanged.
    static IN_PROBE: Cell<bool> = const { Cell::new(false) };
}

/// The pool of the waiting test: three objects, no caches (every get reaches the ring).
static WAIT_POOL: OnceLock<P> = OnceLock::new();

/// A failed get from WAIT_POOL, from inside the allocator (see PROBE).
fn probe() {
    if !PROBE.with(|p| p.get()) || IN_PROBE.with(|p| p.replace(true)) {
        return;
    }
    if let Some(pool) = WAIT_POOL.get() {
        let mut v = Vec::with_capacity(2);
        if pool.get_bulk(&mut v, 2).is_ok() {
            pool.put_bulk(&mut v);
        }
    }
    IN_PROBE.with(|p| p.set(false));
}

struct Reentrant;

// SAFETY: forwards every allocation to System; the pool calls allocate nothing but through
// this allocator again, which forwards those unchanged (ARMED is cleared first, IN_PROBE set).
unsafe impl GlobalAlloc for Reentrant {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if ARMED.with(|a| a.replace(false)) {
            if let Some(pool) = POOL.get() {
                if let Ok(h) = pool.get() {
                    STOLEN.store(h.into_raw(), Ordering::SeqCst);
                }
            }
        }
        probe();
        // SAFETY: forwarded unchanged.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        probe();
        // SAFETY: forwarded unchanged.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static A: Reentrant = Reentrant;

#[test]
fn an_allocator_that_reenters_the_pool_never_gets_a_duplicate() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let pool = POOL.get_or_init(|| {
        PoolBuilder::<u64>::with_default(64)
            .cache_size(16)
            .build()
            .unwrap()
    });
    // Warm this thread's cache: it now holds entries, the next gets are hits.
    let mut warm = Vec::with_capacity(8);
    pool.get_bulk(&mut warm, 8).unwrap();
    pool.put_bulk(&mut warm);
    for round in 0..4 {
        let mut out: Vec<Handle<u64, Runtime, Offset>> = Vec::new(); // capacity 0
        ARMED.with(|a| a.set(true));
        pool.get_bulk(&mut out, 4).unwrap(); // grows `out`: the allocator re-enters
        let stolen = STOLEN.swap(u32::MAX, Ordering::SeqCst);
        assert_ne!(
            stolen,
            u32::MAX,
            "round {round}: the allocator ran and took a handle"
        );
        let mut raws: Vec<u32> = out.iter().map(|h| pool.index_of(h)).collect();
        // SAFETY: `stolen` came from into_raw of a handle of this live pool, rebuilt once.
        let back = unsafe { Handle::<u64, Runtime, Offset>::from_raw(stolen) };
        raws.push(pool.index_of(&back));
        raws.sort_unstable();
        raws.dedup();
        assert_eq!(raws.len(), 5, "round {round}: one object handed out twice");
        // Every object is in one place: 5 out, the rest free.
        assert_eq!(pool.in_use(), 5);
        pool.put(back);
        pool.put_bulk(&mut out);
        assert_eq!(pool.in_use(), 0);
    }
}

/// The first get of a thread installs its cache, which allocates: an allocator that uses the
/// pool there installed a cache first, and the outer install overwrote it, losing its objects
/// (found by attack). The install now keeps the cache already there.
#[test]
fn an_allocator_that_reenters_the_first_install_loses_nothing() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let pool = POOL.get_or_init(|| {
        PoolBuilder::<u64>::with_default(64)
            .cache_size(16)
            .build()
            .unwrap()
    });
    std::thread::spawn(move || {
        ARMED.with(|a| a.set(true)); // the install's allocation re-enters
        let h = pool.get().unwrap();
        let stolen = STOLEN.swap(u32::MAX, Ordering::SeqCst);
        pool.put(h);
        if stolen != u32::MAX {
            // SAFETY: `stolen` came from into_raw of a handle of this live pool, rebuilt once.
            pool.put(unsafe { Handle::<u64, Runtime, Offset>::from_raw(stolen) });
        }
    })
    .join()
    .unwrap();
    // The thread exited: its cache went back to the ring; nothing is out.
    assert_eq!(pool.in_use(), 0, "objects lost in an overwritten cache");
}

/// Waiters register in a queue under a lock; the queue grows as waiters arrive. It grew with
/// the lock held, so a global allocator that uses the same pool (a failed get or a put there
/// wakes waiters: it takes that lock) deadlocked the registering thread, and every waiter
/// after it. The queue now grows outside the lock. Not under Miri: a deadlock, not UB, with
/// real timeouts and sleeps.
#[test]
#[cfg_attr(miri, ignore)]
fn an_allocator_that_reenters_while_a_waiter_registers_does_not_deadlock() {
    use std::sync::mpsc;
    use std::time::Duration;
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let pool = WAIT_POOL.get_or_init(|| {
        PoolBuilder::<u64>::with_default(3)
            .cache_size(0)
            .build()
            .unwrap()
    });
    let mut held = Vec::new();
    pool.get_bulk(&mut held, 2).unwrap(); // one left: too few for a waiter
    let (tx, rx) = mpsc::channel();
    // More waiters than the queue's first allocation holds: one of them grows it.
    const WAITERS: usize = 9;
    for _ in 0..WAITERS {
        let tx = tx.clone();
        std::thread::spawn(move || {
            PROBE.with(|p| p.set(true)); // every allocation of this thread re-enters
            let mut two = Vec::new();
            let r = pool.get_bulk_wait(&mut two, 2, Duration::from_millis(1500));
            PROBE.with(|p| p.set(false));
            pool.put_bulk(&mut two);
            tx.send(r.is_ok()).unwrap();
        });
        std::thread::sleep(Duration::from_millis(20)); // registered before the next one
    }
    drop(tx);
    // From another thread: with the bug, the queue's lock is never released, and a put that
    // wakes waiters would block this thread too.
    std::thread::spawn(move || pool.put_bulk(&mut held));
    let mut done = 0;
    while done < WAITERS {
        match rx.recv_timeout(Duration::from_secs(20)) {
            Ok(_) => done += 1,
            Err(e) => panic!("{done} of {WAITERS} waiters returned, then {e:?}: deadlocked"),
        }
    }
    assert_eq!(pool.in_use(), 0, "every object back in the pool");
}
