//! Re-entrancy (issue 25, item 5): a global allocator that uses the pool on the same thread,
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
}

struct Reentrant;

// SAFETY: forwards every allocation to System; the pool call allocates nothing (the thread's
// cache already exists, and the pool is in a OnceLock).
unsafe impl GlobalAlloc for Reentrant {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if ARMED.with(|a| a.replace(false)) {
            if let Some(pool) = POOL.get() {
                if let Ok(h) = pool.get() {
                    STOLEN.store(h.into_raw(), Ordering::SeqCst);
                }
            }
        }
        // SAFETY: forwarded unchanged.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
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
/// (found by attack, issue 23). The install now keeps the cache already there.
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
